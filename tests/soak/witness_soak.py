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
A lost write or a stuck schedule leaves fail-K/ in the work directory: that
schedule's part of each log, the checkers' journals and states, statuses.
Prints one line per schedule and the totals; exit 1 unless lost, double and
stuck are all 0.
   witness_soak.py --build build --schedules 500 [--seed N] [--jobs 2]
       [--disk-failure serve|handover|mixed]
With --jobs N, N clusters run side by side (seeds N, N+1, ...).
--disk-failure sets the clusters' on-disk-failure (default serve: a primary
whose disk failed serves through its peer; handover: it hands over; mixed:
serve in clusters 0, 2, ..., handover in clusters 1, 3, ...).
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TOOLS = os.path.join(ROOT, "tests", "tools")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Cluster:
    def __init__(self, build, work, disk_failure="serve"):
        self.b, self.w = build, work
        self.procs = {}
        self.crashes = 0  # simulated crashes that struck
        self.kept = False  # evidence of a failed schedule was kept
        self.ports = {k: free_port() for k in
                      ("ra", "rb", "na", "nb", "ia", "ib", "wit", "pab", "paw", "pbw")}
        cfg = os.path.join(work, "c.ini")
        p = self.ports
        with open(cfg, "w") as f:
            f.write("[cluster]\nname = soak\nsecret = soak-secret\npeer-timeout = 2\n"
                    "witness = 127.0.0.1:%d\nwitness-dir = %s/w\nwitness-timeout = 2\n"
                    "quorum-timeout = 5\ndisk-slow-ms = 100\ndisk-slow-s = 2\n"
                    "on-disk-failure = %s\n"
                    % (p["wit"], work, disk_failure))
            for n in "ab":
                f.write("[node %s]\nreplication = 127.0.0.1:%d\nnbd = 127.0.0.1:%d\n"
                        "iscsi = 127.0.0.1:%d\n"
                        "control = %s/%s.sock\ndata-dir = %s/%s\nwitness = 127.0.0.1:%d\n"
                        "fault-injection = on\n"
                        % (n, p["r" + n], p["n" + n], p["i" + n], work, n, work, n,
                           p["p%sw" % n]))
                if n == "b":
                    f.write("replication-advertise = 127.0.0.1:%d\n" % p["pab"])
            f.write("[volume vol0]\nsize = 256M\nnodes = a b\n")
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


def client(c, nodes, log, first, salt, pinned):
    argv = [sys.executable, os.path.join(TOOLS, "failclient.py"), "write", "--nodes",
            ",".join("127.0.0.1:%d" % c.ports["n" + n] for n in nodes), "--log", log,
            "--first", str(first), "--rate", "200", "--stop", os.path.join(c.w, "stop"),
            "--salt", salt, "--count", "4000"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# The stamped checkers: one over NBD on the first 8 MiB, one over iSCSI on
# 8 MiB beyond the failclients' regions (which end at 200 MiB).
CHECKERS = {"nbd": ("n", 0, None), "iscsi": ("i", 53248, "iqn.2026-11.org.tandem:soak.vol0")}


def checker(c, seed, proto):
    port, first, iqn = CHECKERS[proto]
    argv = [sys.executable, os.path.join(TOOLS, "checker.py"), "run", "--nodes",
            ",".join("127.0.0.1:%d" % c.ports[port + n] for n in "ab"), "--blocks", "2048",
            "--first", str(first), "--state", os.path.join(c.w, "check-%s.json" % proto),
            "--resume", "--seed", str(seed), "--rate", "200", "--timeout", "3",
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


def check(log, salt, files):
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "failclient.py"), "check", "--log",
                        log, "--salt", salt] + files, capture_output=True, text=True)
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
        files = [os.path.join(c.w, n, "vol0.img") for n in ("a", "b")]
        for log in logs.values():
            lost += check(log, salt, files)
        for proto in CHECKERS:
            lost += checker_verify(c, files, proto)
    if lost or stuck:
        keep_evidence(c, k, marks)
    acked = sum(sum(1 for l in open(f) if l[:1].isdigit()) for f in logs.values())
    return names, acked, lost, double, both, stuck


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
              "checker.err", "acked-fo", "acked-a", "acked-b"):
        if os.path.exists(os.path.join(c.w, f)):
            shutil.copy(os.path.join(c.w, f), d)
    for n in ("a", "b"):
        open(os.path.join(d, "status-%s.json" % n), "w").write(
            c.ctl(n, "status", "vol0", "--json", out=True, timeout=5))
    sys.stderr.write("schedule %d: evidence in %s\n" % (k, d))
    c.kept = True


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
        argv += ["--faults", ",".join(a.faults), "--disk-failure", df]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    import threading

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
              "and %d stamped ones, %d lost, %d double-primary samples (both primary: %d), "
              "%d stuck" % (a.jobs, a.seed, a.seed + a.jobs - 1, sums["schedules"],
                            sums["acked"], sums["stamped"], sums["lost"], sums["double"],
                            sums["both"], sums["stuck"]))
    sys.exit(1 if rc else 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--schedules", type=int, default=500)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--faults", default=",".join(FAULTS),
                    help="the fault kinds to draw from (comma-separated; default all)")
    ap.add_argument("--disk-failure", choices=("serve", "handover", "mixed"),
                    default="serve", help="the clusters' on-disk-failure (default serve)")
    ap.add_argument("--totals", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.faults = a.faults.split(",")
    for f in a.faults:
        if f not in FAULTS:
            ap.error("unknown fault %s (known: %s)" % (f, ", ".join(FAULTS)))
    if a.jobs > 1:
        parallel(a)
    if a.disk_failure == "mixed":
        a.disk_failure = "serve"
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="tandem-soak.", dir="/var/tmp")
    c = Cluster(os.path.abspath(a.build), work, a.disk_failure)
    totals = {"schedules": 0, "acked": 0, "lost": 0, "double": 0, "both": 0, "stuck": 0}
    kinds = {}
    print("witness soak: seed %d, %d schedules, on-disk-failure %s, in %s"
          % (a.seed, a.schedules, a.disk_failure, work), flush=True)
    try:
        for n in ("w", "a", "b"):
            c.start(n)
        for _ in range(600):
            if c.settled():
                break
            time.sleep(0.1)
        for k in range(a.schedules):
            names, acked, lost, double, both, stuck = schedule(c, k, rng, a)
            totals["schedules"] += 1
            for f in names:
                kinds[f] = kinds.get(f, 0) + 1
            totals["acked"] += acked
            totals["lost"] += lost
            totals["double"] += double
            totals["both"] += both
            totals["stuck"] += int(stuck)
            print("schedule %d: %-45s acked %5d lost %d double %d (both primary %d)%s" %
                  (k, "+".join(names), acked, lost, double, both, " STUCK" if stuck else ""),
                  flush=True)
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
          " and %d stamped ones (verified after each schedule), " % stamped +
          "%(lost)d lost, %(double)d double-primary samples (both primary: %(both)d), "
          "%(stuck)d stuck" % totals)
    if a.totals:
        json.dump(dict(totals, stamped=stamped, crashes=c.crashes, kinds=kinds),
                  open(a.totals, "w"))
    ok = totals["lost"] == 0 and totals["double"] == 0 and totals["stuck"] == 0
    if ok and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("logs kept in %s" % work)
    sys.exit(0 if ok else 1)


main()
