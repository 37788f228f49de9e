#!/usr/bin/env python3
"""The witness soak (make soak): random fault schedules on a real cluster.

One cluster of three real processes (tandemd a and b, tandem-witness), each
link through its own link proxy (tests/tools/linkproxy.py). For each
schedule (random, from --seed: reproducible), four clients write during
1-3 faults picked from:
  kill-*      SIGKILL of the primary, the secondary or the witness,
              restarted after a random time;
  freeze-*    SIGSTOP of one of them, SIGCONT after a random time (it
              resumes on stale state);
  cut-*       a blackholed link (a-b, a-w, b-w), healed after a random time;
  delay       a delay on a link;
  disk-error-* every later write of the primary's or secondary's store fails
              (EIO, `tandemctl inject`); after a random time the same file
              is attached again;
  slow-*      every operation of a node's store waits 300 ms (disk-slow-ms
              detaches it after 2 s when its peer serves); healed and, if
              detached, attached again;
  crash-*     a simulated power loss of the primary or the secondary at a
              random crash point (`inject vol0 crash`: unflushed writes lost
              or torn, metadata torn), restarted after a random time. A
              crash is a schedule's only fault: the clients do not flush, so
              a crash together with another fault may lose what the other
              copy would have kept.
The clients: tests/tools/failclient.py, one that fails over between the
nodes and one pinned to each node (it keeps trying that node alone), each
over its own region with a salt of its own per schedule; and two stamped
checkers (tests/tools/checker.py), which overwrite 8 MiB each at random
through every schedule, one over NBD (the first 8 MiB), one over iSCSI
(from 208 MiB), failing over, and are verified after each. After the
faults: everything healed and running, the pair back in sync with one
primary (within 120 s), in sync (wait-sync, 60 s). Then:
  lost        = acknowledged writes missing from either data area, plus
                blocks the checker finds at a version older than the last
                acknowledged (or torn);
  double      = status samples (every 100 ms during the schedule) in which
                both nodes may acknowledge writes (accepting(): primary with
                quorum, no held write, alone or through a connected
                secondary);
  both        = samples in which both were primary at all (printed, not
                failed: one of them may be a primary that has not yet noticed
                that its peer link is dead, which cannot acknowledge);
  stuck       = schedules that did not get back to one primary in sync.
A lost or torn write or a stuck schedule leaves fail-K/ in the work directory: that
schedule's part of each log, the checkers' journals and states, statuses.
Prints one line per schedule and the totals; exit 1 unless lost, torn,
double and stuck are all 0.
   witness_soak.py --build build --schedules 500 [--seed N] [--jobs 2]
       [--disk-failure serve|handover|mixed] [--replication sync|async|mixed]
       [--faults KIND,...]
With --jobs N, N clusters run side by side (seeds N, N+1, ...).
--disk-failure sets the clusters' on-disk-failure (default serve: a primary
whose disk failed serves through its peer; handover: it hands over; mixed:
serve in clusters 0, 2, ..., handover in clusters 1, 3, ...).
--replication (default sync) does the same for replication: mixed runs sync
in clusters 0, 2, ... and async in 1, 3, ... (with one cluster: sync).

Async clusters (replication = async, async-backlog = 4M,
bitmap-granularity = 4K, failover = auto; the data directories on an XFS
loop device with reflinks, where a node being caught up keeps a consistent
copy of its image; the a-b link at 20 Mbit/s while the faults run):
  - the clients write at a quarter of the sync rate (1 MB/s in all, below
    the link), plus, to the primary, a 16 MiB burst in 128K writes and the
    stamped writer (tests/tools/stampwriter.py: write number N goes to the
    block of the N-th write of a fixed order, each block carrying the
    schedule's epoch; one write in flight, pinned to the schedule's first
    primary, 4000 writes at full speed then 100 a second). The backlog
    overflows: the primary goes ahead, the peer is behind, a catch-up
    resync follows;
  - 1-2 faults strike within 2 s of the primary going ahead (or of its
    catch-up starting; 20 s into the schedule if neither came): kill-*,
    freeze-* (SIGCONT or SIGKILL and a restart at the end), cut-ab|aw|bw,
    force-kill and force-freeze (the primary killed or frozen, and
    `tandemctl primary vol0 --force` on the survivor once it sees its peer
    gone, unless the witness promoted it first: failover = auto);
  - every promotion (a node other than the last primary seen becomes the
    only primary; from the samples, the statuses read at each fault, and the
    forcing thread) is checked at once: the stamp blocks read through the
    new primary's NBD must be a write-order prefix of the writes the old
    primary acknowledged (write acked + 1 allowed: the one in flight);
    else torn. After the schedule both data files must be such a prefix
    too;
  - without a promotion, lost is counted as in sync clusters, plus stamped
    writes missing at the end; after one, missing acknowledged writes are
    the loss window (allowed, counted: "stamped writes in loss windows"),
    and the checkers' states take the image's versions as acknowledged
    (a checker block without a whole stamp of its own is torn).
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TOOLS = os.path.join(ROOT, "tests", "tools")
sys.path.insert(0, TOOLS)
import checker as checkermod  # noqa: E402
import nbdclient  # noqa: E402
import stampwriter  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


# Async clusters: a backlog that a burst overflows, 4K bitmap bits (short
# catch-up resyncs), the a-b link at 20 Mbit/s while faults run.
ASYNC_BACKLOG = 4 << 20
ASYNC_RATE = "20mbit"


class Cluster:
    def __init__(self, build, work, disk_failure="serve", replication="sync"):
        self.b, self.w = build, work
        self.procs = {}
        self.replication = replication
        self.loop = None  # the loop device of the async cluster's XFS
        self.ddir = work
        if replication == "async":
            self.ddir = self.xfs()
        self.crashes = 0  # simulated crashes that struck
        self.kept = False  # evidence of a failed schedule was kept
        self.ports = {k: free_port() for k in
                      ("ra", "rb", "na", "nb", "ia", "ib", "wit", "pab", "paw", "pbw")}
        cfg = os.path.join(work, "c.ini")
        p = self.ports
        with open(cfg, "w") as f:
            f.write("[cluster]\nname = soak\nsecret = soak-secret\npeer-timeout = 2\n"
                    "witness = 127.0.0.1:%d\nwitness-dir = %s/w\nwitness-timeout = 2\n"
                    "quorum-timeout = 5\ndisk-slow-ms = %d\ndisk-slow-s = %d\n"
                    "on-disk-failure = %s\n"
                    # no slow disks in async schedules: the defaults, so that
                    # a loop device on a busy machine is not detached
                    % (p["wit"], work, *((100, 2) if replication == "sync" else (5000, 30)),
                       disk_failure))
            ddir = self.ddir
            for n in "ab":
                f.write("[node %s]\nreplication = 127.0.0.1:%d\nnbd = 127.0.0.1:%d\n"
                        "iscsi = 127.0.0.1:%d\n"
                        "control = %s/%s.sock\ndata-dir = %s/%s\nwitness = 127.0.0.1:%d\n"
                        "fault-injection = on\n"
                        % (n, p["r" + n], p["n" + n], p["i" + n], work, n, ddir, n,
                           p["p%sw" % n]))
                if n == "b":
                    f.write("replication-advertise = 127.0.0.1:%d\n" % p["pab"])
            f.write("[volume vol0]\nsize = 256M\nnodes = a b\n")
            if replication == "async":
                f.write("replication = async\nasync-backlog = %d\nbitmap-granularity = 4K\n"
                        "failover = auto\n" % ASYNC_BACKLOG)
        self.cfg = cfg
        for name, listen, target in (("ab", p["pab"], p["rb"]), ("aw", p["paw"], p["wit"]),
                                     ("bw", p["pbw"], p["wit"])):
            out = open(os.path.join(work, "px-%s.out" % name), "w")
            pr = subprocess.Popen([sys.executable, os.path.join(TOOLS, "linkproxy.py"),
                                   "--listen", "127.0.0.1:%d" % listen,
                                   "--target", "127.0.0.1:%d" % target,
                                   "--control", os.path.join(work, "px-%s.sock" % name)],
                                  stdout=out, stderr=subprocess.DEVNULL)
            self.procs["px-" + name] = pr
        for name in ("ab", "aw", "bw"):
            for _ in range(100):
                if "ready" in open(os.path.join(work, "px-%s.out" % name)).read():
                    break
                time.sleep(0.05)

    def xfs(self):
        """The async cluster's data directories live on XFS with reflinks (a
        loop device), where a node being caught up keeps a consistent copy
        of its image (docs/ASYNC.md): what a forced promotion starts from.
        Elsewhere (not root, no mkfs.xfs) a forced promotion of a node being
        resynced has no consistent image to start from; the soak says so."""
        img, mnt = os.path.join(self.w, "xfs.img"), os.path.join(self.w, "x")
        try:
            with open(img, "wb") as f:
                f.truncate(2 << 30)
            self.loop = subprocess.run(["losetup", "-f", "--show", img], capture_output=True,
                                       text=True, check=True).stdout.strip()
            subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", self.loop], check=True,
                           capture_output=True)
            os.makedirs(mnt)
            subprocess.run(["mount", self.loop, mnt], check=True, capture_output=True)
            return mnt
        except (OSError, subprocess.CalledProcessError) as e:
            print("witness soak: no XFS for the data (%s): plain directories, no consistent "
                  "copy during catch-up" % e, flush=True)
            if self.loop:
                subprocess.run(["losetup", "-d", self.loop], capture_output=True)
                self.loop = None
            return self.w

    def data(self, n):
        return os.path.join(self.ddir, n, "vol0.img")

    def link(self, name, *cmd):
        subprocess.run([sys.executable, os.path.join(TOOLS, "linkproxy.py"), "--control",
                        os.path.join(self.w, "px-%s.sock" % name), "--cmd", " ".join(cmd)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def running(self, n):
        p = self.procs.get(n)
        return p is not None and p.poll() is None

    def start(self, n):
        if self.running(n):
            return
        log = open(os.path.join(self.w, "%s.log" % n), "a")
        if n == "w":
            argv = [os.path.join(self.b, "tandem-witness"), "-c", self.cfg, "-f"]
            # a new cluster on the first start only: a restart must find its state
            if not os.path.exists(os.path.join(self.w, "w", "witness-soak.state")):
                argv += ["--init", "soak"]
        else:
            argv = [os.path.join(self.b, "tandemd"), "-c", self.cfg, "-n", n, "-f"]
        self.procs[n] = subprocess.Popen(argv, stdout=log, stderr=log)
        if n != "w":
            for _ in range(100):
                if self.ctl(n, "ping") == 0:
                    break
                time.sleep(0.1)

    def kill(self, n, sig=signal.SIGKILL):
        p = self.procs.get(n)
        if p and p.poll() is None:
            p.send_signal(signal.SIGCONT)  # a frozen one too
            p.send_signal(sig)
            p.wait()

    def signal(self, n, sig):
        p = self.procs.get(n)
        if p and p.poll() is None:
            p.send_signal(sig)

    def heal_disk(self, n):
        """A node whose store was made slow or failing gets it back: the
        delay ends; a failed or detached disk is attached again (the same
        file; `attach` waits for requests still on the old one)."""
        if not self.running(n):
            return
        self.ctl(n, "inject", "vol0", "slow", "--ms", "0", timeout=5)
        end = time.monotonic() + 10  # an attach refused is tried again, not forever
        while time.monotonic() < end:
            st = self.status(n)
            if not st or st["disk"] not in ("failed", "diskless"):
                return
            self.ctl(n, "attach", "vol0", timeout=5)
            time.sleep(0.1)

    def ctl(self, n, *args, out=False, timeout=60):
        try:
            r = subprocess.run([os.path.join(self.b, "tandemctl"), "-c", self.cfg, "-n", n] +
                               list(args), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:  # a frozen node answers nothing
            return "" if out else 124
        return r.stdout if out else r.returncode

    def status(self, n):
        if not self.running(n):
            return None
        try:
            return json.loads(self.ctl(n, "status", "vol0", "--json", out=True,
                                       timeout=2))["volumes"][0]
        except Exception:
            return None

    def settled(self):
        sa, sb = self.status("a"), self.status("b")
        if not sa or not sb:
            return False
        roles = sorted([sa["role"], sb["role"]])
        if roles != ["primary", "secondary"]:
            return False
        p = sa if sa["role"] == "primary" else sb
        peer = p["peers"][0]
        return (peer["connection"] == "connected" and peer["replication"] == "established"
                and peer["disk"] == "uptodate" and p["disk"] == "uptodate"
                and p["witness"]["session"])

    def stop_all(self):
        for n in ("a", "b", "w"):
            self.kill(n, signal.SIGTERM)
        for n, p in self.procs.items():
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.loop:
            subprocess.run(["umount", self.ddir], capture_output=True)
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
            self.loop = None


def client(c, nodes, log, first, salt, pinned, rate=200):
    argv = [sys.executable, os.path.join(TOOLS, "failclient.py"), "write", "--nodes",
            ",".join("127.0.0.1:%d" % c.ports["n" + n] for n in nodes), "--log", log,
            "--first", str(first), "--rate", str(rate), "--stop", os.path.join(c.w, "stop"),
            "--salt", salt, "--count", "4000"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# The stamped checkers: one over NBD on the first 8 MiB, one over iSCSI on
# 8 MiB beyond the failclients' regions (which end at 200 MiB).
CHECKERS = {"nbd": ("n", 0, None), "iscsi": ("i", 53248, "iqn.2026-11.org.tandem:soak.vol0")}


def checker(c, seed, proto, rate=200):
    port, first, iqn = CHECKERS[proto]
    argv = [sys.executable, os.path.join(TOOLS, "checker.py"), "run", "--nodes",
            ",".join("127.0.0.1:%d" % c.ports[port + n] for n in "ab"), "--blocks", "2048",
            "--first", str(first), "--state", os.path.join(c.w, "check-%s.json" % proto),
            "--resume", "--seed", str(seed), "--rate", str(rate), "--timeout", "3",
            "--give-up", "600", "--stop", os.path.join(c.w, "stop"),
            "--journal", os.path.join(c.w, "journal-%s" % proto)]
    if iqn:
        argv += ["--iqn", iqn]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(c.w, "checker.err"), "a"))


def checker_verify(c, files, proto):
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "checker.py"), "verify",
                        "--state", os.path.join(c.w, "check-%s.json" % proto)] + files,
                       capture_output=True, text=True)
    wrong = 0
    for line in r.stderr.splitlines():
        if "blocks wrong" in line:
            wrong = max(wrong, int(line.split(":")[1].split()[0]))
            sys.stderr.write("checker: " + line + "\n")
    if r.returncode and not wrong:
        wrong = 1  # no acknowledged write at all, or it could not read
        sys.stderr.write(r.stderr)
    return wrong


def check(log, salt, files, bs=None):
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "failclient.py"), "check", "--log",
                        log, "--salt", salt] + (["--bs", str(bs)] if bs else []) + files,
                       capture_output=True, text=True)
    lost = 0
    for line in r.stderr.splitlines():
        if "acknowledged writes missing" in line:
            lost = max(lost, int(line.split(":")[1].split()[0]))
            sys.stderr.write("%s: %s\n" % (os.path.basename(log), line))
    return lost


FAULTS = ["kill-primary", "kill-secondary", "kill-witness", "cut-ab", "cut-aw", "cut-bw",
          "delay", "freeze-primary", "freeze-secondary", "freeze-witness",
          "disk-error-primary", "disk-error-secondary", "slow-primary", "slow-secondary",
          "crash-primary", "crash-secondary"]


def accepting(me, other):
    """Whether a node's status says it may acknowledge writes: primary with
    quorum and no write held for the witness, and either writing alone or
    through a peer that, by its own status, is a connected secondary. A
    primary whose peer link is dead but not yet noticed still shows it
    connected for up to peer-timeout; it cannot acknowledge anything
    (no peer answers, and a primary never takes a peer's writes: R6), so it
    is not counted while the other node, primary too, shows otherwise. A
    primary without its lease serves nothing (SPEC "Leases and data")."""
    if not me or me["role"] != "primary" or not me["quorum"] or me["witness"]["held_writes"]:
        return False
    if not me.get("lease", True):
        return False
    if me["peers"][0]["connection"] != "connected":
        return True
    return bool(other) and other["role"] == "secondary" and \
        other["peers"][0]["connection"] == "connected"


def finish(c, p):
    """The end of a fault (pending entry p: time, what, whom)."""
    what, n = p[1], p[2]
    if what == "start":
        c.start(n)
    elif what == "restore":
        c.link(n, "restore")
    elif what == "cont":
        c.signal(n, signal.SIGCONT)
    elif what == "heal":
        c.heal_disk(n)
    elif what == "crashed":
        if c.running(n):
            c.kill(n)  # its crash point did not come: an ordinary kill then
        else:
            c.crashes += 1
        c.start(n)
    else:
        c.link(n, "delay", "0")


def schedule(c, k, rng, args):
    salt = "s%d-%d" % (args.seed, k)
    os.path.exists(os.path.join(c.w, "stop")) and os.unlink(os.path.join(c.w, "stop"))
    logs = {x: os.path.join(c.w, "acked-%s" % x) for x in ("fo", "a", "b")}
    for f in list(logs.values()) + [os.path.join(c.w, "journal-" + p) for p in CHECKERS]:
        open(f, "w").close()
    marks = {n: log_size(c, n) for n in ("a", "b", "w")}
    region = (k % 8) * (24 << 20) + (8 << 20)
    cl = [client(c, "ab", logs["fo"], region, salt, False),
          client(c, "a", logs["a"], region + (8 << 20), salt, True),
          client(c, "b", logs["b"], region + (16 << 20), salt, True),
          checker(c, args.seed * 100000 + k, "nbd"),
          checker(c, args.seed * 100000 + k, "iscsi")]
    faults = sorted(((rng.uniform(0.3, 2.5), rng.choice(args.faults), rng.uniform(0.3, 5))
                     for _ in range(rng.randint(1, 3))))
    crashes = [f for f in faults if f[1].startswith("crash-")]
    if crashes:
        faults = crashes[:1]  # a crash is the only fault of its schedule
    t0 = time.monotonic()
    pending, double, both, names = [], 0, 0, []
    end = t0 + max(f[0] + f[2] for f in faults) + 1
    while time.monotonic() < end:
        now = time.monotonic() - t0
        while faults and faults[0][0] <= now:
            at, kind, dur = faults.pop(0)
            names.append(kind)
            sa, sb = c.status("a"), c.status("b")
            prim = "a" if sa and sa["role"] == "primary" else "b" if sb and sb["role"] == "primary" else None
            sec = ("b" if prim == "a" else "a") if prim else None
            if kind.startswith("freeze-"):
                n = {"primary": prim, "secondary": sec, "witness": "w"}[kind[7:]]
                if n:
                    c.signal(n, signal.SIGSTOP)
                    pending.append((now + dur, "cont", n))
            elif kind.startswith("disk-error-") and prim:
                n = prim if kind.endswith("primary") else sec
                c.ctl(n, "inject", "vol0", "write", timeout=5)
                pending.append((now + dur, "heal", n))
            elif kind.startswith("slow-") and prim:
                n = prim if kind.endswith("primary") else sec
                c.ctl(n, "inject", "vol0", "slow", "--ms", "300", timeout=5)
                pending.append((now + dur, "heal", n))
            elif kind.startswith("crash-") and prim:
                n = prim if kind.endswith("primary") else sec
                c.ctl(n, "inject", "vol0", "crash", "--after", str(rng.randrange(300)),
                      "--seed", str(rng.randrange(1 << 30)), timeout=5)
                pending.append((now + dur, "crashed", n))
            elif kind == "kill-primary" and prim:
                c.kill(prim)
                pending.append((now + dur, "start", prim))
            elif kind == "kill-secondary" and prim:
                sec = "b" if prim == "a" else "a"
                c.kill(sec)
                pending.append((now + dur, "start", sec))
            elif kind == "kill-witness":
                c.kill("w")
                pending.append((now + dur, "start", "w"))
            elif kind.startswith("cut-"):
                c.link(kind[4:], "drop")
                pending.append((now + dur, "restore", kind[4:]))
            elif kind == "delay":
                ln = rng.choice(["ab", "aw", "bw"])
                c.link(ln, "delay", str(rng.choice([5, 50, 150, 300])))
                pending.append((now + dur, "undelay", ln))
        for p in [p for p in pending if p[0] <= now]:
            pending.remove(p)
            finish(c, p)
        sa, sb = c.status("a"), c.status("b")
        if accepting(sa, sb) and accepting(sb, sa):
            double += 1
        if sa and sb and sa["role"] == sb["role"] == "primary":
            both += 1
        time.sleep(0.1)
    for p in pending:
        finish(c, p)
    for n in ("w", "a", "b"):
        c.signal(n, signal.SIGCONT)
        c.start(n)
    for n in ("a", "b"):
        c.heal_disk(n)
    for ln in ("ab", "aw", "bw"):
        c.link(ln, "restore")
        c.link(ln, "delay", "0")
    stuck = True
    # bounded in time (not in rounds: a round that heals may take seconds)
    deadline, i = time.monotonic() + 120, -1
    while time.monotonic() < deadline:
        i += 1
        # settled twice, 3 s apart: a disk made slow is detached up to
        # disk-slow-s (2 s) after the delay ended, by the slow requests
        # before it; the next schedule (a crash of the other node, say)
        # must not start with one copy
        if c.settled():
            time.sleep(3)
            if c.settled():
                stuck = False
                break
        if i % 20 == 19:
            # a disk may fail after its fault ended (an inject sent to a
            # frozen node takes effect when it resumes): heal it then
            for n in ("a", "b"):
                c.heal_disk(n)
        time.sleep(0.1)
    open(os.path.join(c.w, "stop"), "w").close()
    for p in cl:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
    lost = 0
    if not stuck:
        for n in ("a", "b"):
            if c.ctl(n, "wait-sync", "vol0", "--timeout", "60", timeout=90):
                # not in sync: what the replicas hold says nothing yet
                sys.stderr.write("schedule %d: %s not in sync after 60 s\n" % (k, n))
                stuck = True
    if not stuck:
        files = [c.data(n) for n in ("a", "b")]
        for log in logs.values():
            lost += check(log, salt, files)
        for proto in CHECKERS:
            lost += checker_verify(c, files, proto)
    if lost or stuck:
        keep_evidence(c, k, marks)
    acked = sum(sum(1 for l in open(f) if l[:1].isdigit()) for f in logs.values())
    return names, acked, lost, double, both, stuck


# The async clusters (--replication async): the faults, each of which
# strikes once the primary has gone ahead or its peer is being caught up
# (or 20 s into the schedule if neither came), and the stamped writer.
ASYNC_FAULTS = ["kill-primary", "kill-secondary", "kill-witness", "freeze-primary",
                "freeze-secondary", "freeze-witness", "cut-ab", "cut-aw", "cut-bw",
                "force-kill", "force-freeze"]
STAMP_FIRST = 55296  # 216 MiB: beyond the iSCSI checker's blocks
STAMP_BLOCKS = 2048  # 8 MiB
STAMP_BURST = 4000   # 16 MiB as fast as it goes: four backlogs
STAMP_RATE = 100     # writes a second after the burst
BURST_FIRST = 224 << 20  # and 16 MiB in 128K writes at once, from 224 MiB
BURST_BS = 128 << 10


def stamp_writer(c, n, acked, epoch):
    """The stamped writer: one NBD connection to node n (the primary when
    the schedule began), write number N in the block of the N-th write of
    a fixed order (tests/tools/stampwriter.py), each block also carrying
    this schedule's epoch. It never fails over: it ends with its
    connection, so every write it got acknowledged is the old primary's."""
    argv = [sys.executable, os.path.join(TOOLS, "stampwriter.py"), "write",
            str(c.ports["n" + n]), str(STAMP_BLOCKS), acked, str(STAMP_BURST),
            str(STAMP_RATE), "--first", str(STAMP_FIRST), "--epoch", str(epoch)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(c.w, "stamp.err"), "a"))


def stamp_acked(path):
    try:
        return int(open(path).read())
    except (OSError, ValueError):
        return 0


def stamp_image(c, n=None, path=None):
    """The stamp blocks of node n read through NBD, or of a data file."""
    if path:
        with open(path, "rb") as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            f.seek(STAMP_FIRST * 4096)
            return f.read(STAMP_BLOCKS * 4096)
    conn = nbdclient.Conn("127.0.0.1", c.ports["n" + n], timeout=5)
    try:
        return b"".join(conn.req(0, (STAMP_FIRST + i) * 4096, 256 * 4096)
                        for i in range(0, STAMP_BLOCKS, 256))
    finally:
        conn.s.close()


def stamp_verdict(data, acked, epoch):
    """(k, error): k the newest stamped write the image holds; error when
    it is not a write-order prefix of what the old primary acknowledged
    (one write more is allowed: the one in flight)."""
    k, err = stampwriter.prefix(data, STAMP_BLOCKS, epoch)
    if not err and k > acked + 1:
        err = "holds write %d, only %d were acknowledged" % (k, acked)
    return k, err


def phase(st):
    """Where the async stream of a primary's status stands."""
    if not st or st["role"] != "primary":
        return "none"
    peer = st["peers"][0]
    if peer.get("congestion") == "ahead":
        return "ahead"
    if peer["replication"] == "syncsource":
        return "catchup"
    if peer["connection"] != "connected":
        return "alone"
    return "streaming"


def force_survivor(c, n, rec, prom):
    """After the primary was killed or frozen: n, once it sees its peer
    gone, is promoted with `primary vol0 --force` unless the witness
    promoted it first (bounded: 12 s to see the peer gone, 20 s for the
    command)."""
    end = time.monotonic() + 12
    while time.monotonic() < end:
        st = c.status(n)
        if st and st["role"] == "primary":
            rec["auto"] = True
            return
        if st and st["peers"][0]["connection"] != "connected":
            rec["before"] = {k: st.get(k) for k in ("disk", "consistent_copy",
                                                    "consistent_copy_note")}
            rec["before"]["replication"] = st["peers"][0]["replication"]
            break
        time.sleep(0.1)
    prom.forcing.add(n)
    try:
        r = subprocess.run([os.path.join(c.b, "tandemctl"), "-c", c.cfg, "-n", n, "primary",
                            "vol0", "--force"], capture_output=True, text=True, timeout=20)
        rec["rc"], rec["out"] = r.returncode, (r.stdout + r.stderr).strip()
    except subprocess.TimeoutExpired:
        rec["rc"], rec["out"] = 124, "timed out"
    if rec["rc"] == 0:
        prom.seen(n, "forced")  # checked now: it may be killed before the next sample


class Promotions:
    """The promotions of one async schedule, each checked once, as soon as
    the new primary serves: its stamp blocks, read through NBD, must be a
    write-order prefix of what the old primary acknowledged. The writer
    never wrote to this node, so what it serves of them is what it was
    promoted with. Seen by the status samples, the statuses read when a
    fault strikes, and the thread that forces a promotion (a node may be
    primary for less than a sample takes while another node is frozen)."""

    def __init__(self, c, first, sacked, epoch, t0):
        self.c, self.cur, self.sacked, self.epoch, self.t0 = c, first, sacked, epoch, t0
        self.list, self.lock, self.forcing = [], threading.Lock(), set()

    def seen(self, p, how="auto"):
        with self.lock:
            if not p or p == self.cur:
                return
            self.cur = p
            if p in self.forcing:
                how = "forced"
            pr = {"node": p, "how": how, "checked": False,
                  "at": round(time.monotonic() - self.t0, 1)}
            self.list.append(pr)
        self.check(pr)

    def check(self, pr):
        end = time.monotonic() + 3  # a new primary may take a moment to serve
        while not pr["checked"] and time.monotonic() < end:
            try:
                data = stamp_image(self.c, pr["node"])
            except (OSError, ConnectionError):
                time.sleep(0.1)
                continue
            pr["acked"] = stamp_acked(self.sacked)
            pr["k"], pr["err"] = stamp_verdict(data, pr["acked"], self.epoch)
            pr["checked"] = True


def the_primary(sa, sb):
    """The one node whose status says primary, or None (none, or both)."""
    pa = bool(sa) and sa["role"] == "primary"
    pb = bool(sb) and sb["role"] == "primary"
    return "a" if pa and not pb else "b" if pb and not pa else None


def checker_rebase(c, proto, path):
    """After a failover of an async cluster the checker's blocks may hold
    older versions than acknowledged (the loss window): its state takes
    what the image holds as acknowledged from here on. A block that holds
    no whole stamp of its own, or a version never attempted, is torn."""
    state = os.path.join(c.w, "check-%s.json" % proto)
    try:
        st = json.load(open(state))
    except (OSError, ValueError):
        return 0
    bs, nb, first = st["bs"], st["blocks"], st.get("first", 0)
    torn = []
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        f.seek(first * bs)
        data = f.read(nb * bs)
    for b in range(nb):
        got = checkermod.unstamp(data[b * bs:(b + 1) * bs], bs)
        if got == "zero":
            v = 0
        elif got is None or got[0] != first + b or got[1] > st["attempted"][b]:
            torn.append(b)
            continue
        else:
            v = got[1]
        st["acked"][b] = v
        st["durable"][b] = min(st["durable"][b], v)
    checkermod.save(state, st)
    if torn:
        sys.stderr.write("checker %s: %d blocks torn after a failover; first: block %d\n"
                         % (proto, len(torn), first + torn[0]))
    return len(torn)


def schedule_async(c, k, rng, args):
    """One schedule of an async cluster (see the module's docstring)."""
    salt = "s%d-%d" % (args.seed, k)
    epoch = args.seed * 100000 + k + 1
    os.path.exists(os.path.join(c.w, "stop")) and os.unlink(os.path.join(c.w, "stop"))
    logs = {x: os.path.join(c.w, "acked-%s" % x) for x in ("fo", "a", "b", "burst")}
    sacked = os.path.join(c.w, "stamp-acked")
    for f in list(logs.values()) + [os.path.join(c.w, "journal-" + p) for p in CHECKERS]:
        open(f, "w").close()
    open(sacked, "w").close()
    marks = {n: log_size(c, n) for n in ("a", "b", "w")}
    region = (k % 8) * (24 << 20) + (8 << 20)
    torn, lost, double, both, notes = 0, 0, 0, 0, []
    info = {"ahead": 0, "auto": 0, "forced": 0, "window": 0}
    prim0 = None
    end = time.monotonic() + 30
    while prim0 is None and time.monotonic() < end:
        prim0 = the_primary(c.status("a"), c.status("b"))
        prim0 or time.sleep(0.1)
    prim0 = prim0 or "a"
    c.link("ab", "rate", ASYNC_RATE)
    # the others write slower than in sync clusters (1 MB/s together): with
    # the stamped writer after its burst, well below the link's rate, so
    # that a catch-up ends (docs/ASYNC.md, "Why it converges")
    cl = [client(c, "ab", logs["fo"], region, salt, False, rate=50),
          client(c, "a", logs["a"], region + (8 << 20), salt, True, rate=50),
          client(c, "b", logs["b"], region + (16 << 20), salt, True, rate=50),
          checker(c, args.seed * 100000 + k, "nbd", rate=50),
          checker(c, args.seed * 100000 + k, "iscsi", rate=50)]
    sw = stamp_writer(c, prim0, sacked, epoch)
    # the burst that overflows the backlog whatever the stamped writer's
    # pace: 16 MiB in 128K writes to the primary, as fast as they go
    burst = subprocess.Popen([sys.executable, os.path.join(TOOLS, "failclient.py"), "write",
                              "--nodes", "127.0.0.1:%d" % c.ports["n" + prim0], "--log",
                              logs["burst"], "--first", str(BURST_FIRST), "--bs",
                              str(BURST_BS), "--count", "128", "--salt", salt, "--stop",
                              os.path.join(c.w, "stop"), "--timeout", "3"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cl.append(burst)
    t0 = time.monotonic()
    prom = Promotions(c, prim0, sacked, epoch, t0)

    def sample():
        nonlocal double, both
        sa, sb = c.status("a"), c.status("b")
        if accepting(sa, sb) and accepting(sb, sa):
            double += 1
        if sa and sb and sa["role"] == sb["role"] == "primary":
            both += 1
        prom.seen(the_primary(sa, sb))
        return sa, sb
    # the faults strike during ahead or catch-up
    t_ahead = None
    while time.monotonic() - t0 < 20:
        sa, sb = sample()
        if phase(sa if prim0 == "a" else sb) in ("ahead", "catchup"):
            t_ahead = time.monotonic() - t0
            info["ahead"] = 1
            break
        time.sleep(0.1)
    base = time.monotonic() - t0
    faults = []
    for _ in range(rng.randint(1, 2)):
        kind = rng.choice(args.faults)
        dur = rng.uniform(4, 8) if kind.startswith("force-") else rng.uniform(0.5, 5)
        faults.append((base + rng.uniform(0, 2), kind, dur))
    faults.sort()
    pending, names, threads = [], [], []
    end = t0 + max(f[0] + f[2] for f in faults) + 1
    while time.monotonic() < end:
        now = time.monotonic() - t0
        while faults and faults[0][0] <= now:
            at, kind, dur = faults.pop(0)
            sa, sb = c.status("a"), c.status("b")
            prim = the_primary(sa, sb)
            prom.seen(prim)
            sec = ("b" if prim == "a" else "a") if prim else None
            names.append("%s@%s" % (kind, phase(sa if prim == "a" else sb if prim else None)))
            if kind.startswith("freeze-"):
                n = {"primary": prim, "secondary": sec, "witness": "w"}[kind[7:]]
                if n:
                    c.signal(n, signal.SIGSTOP)
                    # it resumes, or is killed frozen and started again
                    pending.append((now + dur, rng.choice(["cont", "killstart"]), n))
            elif kind == "kill-primary" and prim:
                c.kill(prim)
                pending.append((now + dur, "start", prim))
            elif kind == "kill-secondary" and sec:
                c.kill(sec)
                pending.append((now + dur, "start", sec))
            elif kind == "kill-witness":
                c.kill("w")
                pending.append((now + dur, "start", "w"))
            elif kind.startswith("cut-"):
                c.link(kind[4:], "drop")
                pending.append((now + dur, "restore", kind[4:]))
            elif kind.startswith("force-") and prim:
                if kind == "force-kill":
                    c.kill(prim)
                    pending.append((now + dur, "start", prim))
                else:
                    c.signal(prim, signal.SIGSTOP)
                    pending.append((now + dur, rng.choice(["cont", "killstart"]), prim))
                rec = {"node": sec, "kind": kind}
                th = threading.Thread(target=force_survivor, args=(c, sec, rec, prom))
                th.start()
                threads.append((th, rec))
        for p in [p for p in pending if p[0] <= now]:
            pending.remove(p)
            if p[1] == "killstart":
                c.kill(p[2])
                c.start(p[2])
            else:
                finish(c, p)
        sample()
        time.sleep(0.1)
    for p in pending:
        if p[1] == "killstart":
            c.kill(p[2])
            c.start(p[2])
        else:
            finish(c, p)
    for th, rec in threads:
        th.join()
        if not rec.get("auto"):
            notes.append("force %s: rc %s%s" % (rec["node"], rec.get("rc"),
                                                 " (%s)" % rec.get("before", "")))
    sw.terminate()
    sw.wait()
    for n in ("w", "a", "b"):
        c.signal(n, signal.SIGCONT)
        c.start(n)
    for ln in ("ab", "aw", "bw"):
        c.link(ln, "restore")
        c.link(ln, "delay", "0")
    c.link("ab", "rate", "0")  # the catch-up after the faults at loopback speed
    stuck = True
    deadline, i = time.monotonic() + 120, -1
    while time.monotonic() < deadline:
        i += 1
        sample()
        if c.settled():
            time.sleep(3)
            if c.settled():
                stuck = False
                break
        if i % 20 == 19:
            for n in ("a", "b"):
                c.heal_disk(n)
        time.sleep(0.1)
    sample()  # a promotion while settling, checked
    open(os.path.join(c.w, "stop"), "w").close()
    for p in cl:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if not stuck:
        for n in ("a", "b"):
            if c.ctl(n, "wait-sync", "vol0", "--timeout", "60", timeout=90):
                sys.stderr.write("schedule %d: %s not in sync after 60 s\n" % (k, n))
                stuck = True
    acked = stamp_acked(sacked)
    promotions = prom.list
    for pr in promotions:
        info[pr["how"]] += 1
        if pr["checked"]:
            info["window"] += max(0, pr["acked"] - pr["k"])
            if pr["err"]:
                torn += 1
                notes.append("TORN: %s promoted (%s) at %.1f s: %s (acknowledged %d)" %
                             (pr["node"], pr["how"], pr["at"], pr["err"], pr["acked"]))
            else:
                notes.append("%s promoted (%s) at %.1f s: first %d of %d stamped writes" %
                             (pr["node"], pr["how"], pr["at"], pr["k"], pr["acked"]))
        else:
            notes.append("%s promoted (%s) at %.1f s: not served in 3 s, not checked" %
                         (pr["node"], pr["how"], pr["at"]))
    if not stuck:
        files = [c.data(n) for n in ("a", "b")]
        for f in files:
            kf, err = stamp_verdict(stamp_image(c, path=f), acked, epoch)
            if err:
                torn += 1
                notes.append("TORN: %s at the end: %s" % (os.path.basename(os.path.dirname(f)),
                                                         err))
            elif not promotions and kf < acked:
                lost += acked - kf
                notes.append("%s: %d of %d stamped writes, no failover" %
                             (os.path.basename(os.path.dirname(f)), kf, acked))
        if promotions:
            # the loss window: acknowledged writes may be missing, not torn
            for proto in CHECKERS:
                torn += checker_rebase(c, proto, files[0])
        else:
            for x, log in logs.items():
                lost += check(log, salt, files, BURST_BS if x == "burst" else None)
            for proto in CHECKERS:
                lost += checker_verify(c, files, proto)
    if lost or stuck or torn:
        keep_evidence(c, k, marks)
    acked_all = acked + sum(sum(1 for ln in open(f) if ln[:1].isdigit())
                            for f in logs.values())
    info["ahead_at"] = t_ahead
    info["notes"] = notes
    return names, acked_all, lost, double, both, stuck, torn, info


def log_size(c, n):
    try:
        return os.path.getsize(os.path.join(c.w, "%s.log" % n))
    except OSError:
        return 0


def keep_evidence(c, k, marks):
    """A schedule that lost a write or got stuck: its share of each node's
    log, the checker's journal and state, the client logs and both nodes'
    status go to fail-K/ in the work directory (kept)."""
    d = os.path.join(c.w, "fail-%d" % k)
    os.makedirs(d, exist_ok=True)
    for n in ("a", "b", "w"):
        try:
            with open(os.path.join(c.w, "%s.log" % n), "rb") as f:
                f.seek(marks[n])
                open(os.path.join(d, "%s.log" % n), "wb").write(f.read())
        except OSError:
            pass
    for f in ("journal-nbd", "journal-iscsi", "check-nbd.json", "check-iscsi.json",
              "checker.err", "acked-fo", "acked-a", "acked-b", "acked-burst", "stamp-acked",
              "stamp.err"):
        if os.path.exists(os.path.join(c.w, f)):
            shutil.copy(os.path.join(c.w, f), d)
    for n in ("a", "b"):
        open(os.path.join(d, "status-%s.json" % n), "w").write(
            c.ctl(n, "status", "vol0", "--json", out=True, timeout=5))
    sys.stderr.write("schedule %d: evidence in %s\n" % (k, d))
    c.kept = True


def summary(t):
    """The totals line's counts (one cluster's or all of them)."""
    line = ("%d lost, %d torn, %d double-primary samples (both primary: %d), %d stuck"
            % (t["lost"], t["torn"], t["double"], t["both"], t["stuck"]))
    if t.get("async"):
        line += ("; async: %d schedules, %d reached ahead or catch-up before the faults, "
                 "%d promotions (%d automatic, %d forced), %d stamped writes in loss windows"
                 % (t["async"], t["ahead"], t["auto"] + t["forced"], t["auto"], t["forced"],
                    t["window"]))
    return line


def parallel(a):
    """--jobs N: N clusters side by side, each with its share of the
    schedules and a seed of its own (seed, seed + 1, ...); the totals add."""
    procs, outs = [], []
    for j in range(a.jobs):
        out = tempfile.NamedTemporaryFile(prefix="soak-totals.", suffix=".json", delete=False)
        outs.append(out.name)
        n = a.schedules // a.jobs + (1 if j < a.schedules % a.jobs else 0)
        argv = [sys.executable, os.path.abspath(__file__), "--build", a.build, "--schedules",
                str(n), "--seed", str(a.seed + j), "--jobs", "1", "--totals", out.name]
        if a.keep:
            argv.append("--keep")
        df = a.disk_failure
        if df == "mixed":
            df = ("serve", "handover")[j % 2]
        rp = a.replication
        if rp == "mixed":
            rp = ("sync", "async")[j % 2]
        if a.faults:
            argv += ["--faults", ",".join(a.faults)]
        argv += ["--disk-failure", df, "--replication", rp]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))

    def relay(j, p):
        for line in p.stdout:
            sys.stdout.write("[%d] %s" % (j, line))
            sys.stdout.flush()
    ts = [threading.Thread(target=relay, args=(j, p)) for j, p in enumerate(procs)]
    for t in ts:
        t.start()
    rc = 0
    for p in procs:
        rc |= p.wait()
    for t in ts:
        t.join()
    sums = {}
    for f in outs:
        try:
            for k, v in json.load(open(f)).items():
                if isinstance(v, dict):
                    for kk, vv in v.items():
                        sums.setdefault(k, {})[kk] = sums.get(k, {}).get(kk, 0) + vv
                else:
                    sums[k] = sums.get(k, 0) + v
        except Exception:
            rc |= 1
        os.unlink(f)
    if "schedules" in sums:
        print("faults: " + ", ".join("%s %d" % kv for kv in sorted(sums["kinds"].items())) +
              "; simulated crashes that struck: %d" % sums["crashes"])
        print("witness soak (%d clusters, seeds %d-%d): %d schedules, %d acknowledged writes "
              "and %d stamped ones, %s" % (a.jobs, a.seed, a.seed + a.jobs - 1,
                                           sums["schedules"], sums["acked"], sums["stamped"],
                                           summary(sums)))
    sys.exit(1 if rc else 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--schedules", type=int, default=500)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--faults",
                    help="the fault kinds to draw from (comma-separated; default all of "
                    "the cluster's kind: sync or async)")
    ap.add_argument("--disk-failure", choices=("serve", "handover", "mixed"),
                    default="serve", help="the clusters' on-disk-failure (default serve)")
    ap.add_argument("--replication", choices=("sync", "async", "mixed"), default="sync",
                    help="the clusters' replication (default sync; mixed: sync in clusters "
                    "0, 2, ..., async in 1, 3, ...)")
    ap.add_argument("--totals", help=argparse.SUPPRESS)
    a = ap.parse_args()
    known = FAULTS + [f for f in ASYNC_FAULTS if f not in FAULTS]
    a.faults = a.faults.split(",") if a.faults else None
    for f in a.faults or []:
        if f not in known:
            ap.error("unknown fault %s (known: %s)" % (f, ", ".join(known)))
    if a.jobs > 1:
        parallel(a)
    if a.disk_failure == "mixed":
        a.disk_failure = "serve"
    if a.replication == "mixed":
        a.replication = "sync"
    own = ASYNC_FAULTS if a.replication == "async" else FAULTS
    a.faults = [f for f in a.faults or own if f in own]
    if not a.faults:
        ap.error("none of these faults applies to a %s cluster (its own: %s)"
                 % (a.replication, ", ".join(own)))
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="tandem-soak.", dir="/var/tmp")
    c = Cluster(os.path.abspath(a.build), work, a.disk_failure, a.replication)
    totals = {"schedules": 0, "acked": 0, "lost": 0, "torn": 0, "double": 0, "both": 0,
              "stuck": 0, "async": 0, "ahead": 0, "auto": 0, "forced": 0, "window": 0}
    kinds = {}
    print("witness soak: seed %d, %d schedules, replication %s, on-disk-failure %s, in %s"
          % (a.seed, a.schedules, a.replication, a.disk_failure, work), flush=True)
    try:
        for n in ("w", "a", "b"):
            c.start(n)
        for _ in range(600):
            if c.settled():
                break
            time.sleep(0.1)
        for k in range(a.schedules):
            if a.replication == "async":
                names, acked, lost, double, both, stuck, torn, info = \
                    schedule_async(c, k, rng, a)
                totals["async"] += 1
                for x in ("ahead", "auto", "forced", "window"):
                    totals[x] += info[x]
            else:
                names, acked, lost, double, both, stuck = schedule(c, k, rng, a)
                torn, info = 0, None
            totals["schedules"] += 1
            for f in names:
                f = f.split("@")[0]
                kinds[f] = kinds.get(f, 0) + 1
            totals["acked"] += acked
            totals["lost"] += lost
            totals["torn"] += torn
            totals["double"] += double
            totals["both"] += both
            totals["stuck"] += int(stuck)
            print("schedule %d: %-45s acked %5d lost %d torn %d double %d (both primary %d)%s" %
                  (k, "+".join(names), acked, lost, torn, double, both,
                   " STUCK" if stuck else ""), flush=True)
            if info:
                print("    %s%s" % ("ahead at %.1f s" % info["ahead_at"]
                                    if info["ahead_at"] is not None
                                    else "never ahead nor catching up",
                                    "".join("; " + x for x in info["notes"])), flush=True)
            if stuck:
                break
    finally:
        c.stop_all()
    stamped = 0
    for proto in CHECKERS:
        try:
            stamped += json.load(open(os.path.join(work, "check-%s.json" % proto)))["writes"]
        except Exception:
            pass
    print("faults: " + ", ".join("%s %d" % kv for kv in sorted(kinds.items())) +
          "; simulated crashes that struck: %d" % c.crashes)
    print("witness soak: %(schedules)d schedules, %(acked)d acknowledged writes" % totals +
          " and %d stamped ones (verified after each schedule), " % stamped + summary(totals))
    if a.totals:
        json.dump(dict(totals, stamped=stamped, crashes=c.crashes, kinds=kinds),
                  open(a.totals, "w"))
    ok = totals["lost"] == 0 and totals["torn"] == 0 and totals["double"] == 0 and \
        totals["stuck"] == 0
    if ok and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("logs kept in %s" % work)
    sys.exit(0 if ok else 1)

main()
