#!/usr/bin/env python3
"""The witness soak (make soak): random fault schedules on a real cluster.

One cluster of three real processes (tandemd a and b, tandem-witness), each
link through its own link proxy (tests/tools/linkproxy.py). For each
schedule (random, from --seed: reproducible), three clients write during
1-3 faults picked from: SIGKILL of the primary, of the secondary or of the
witness (each restarted after a random time), a blackholed link (a-b, a-w,
b-w) healed after a random time, a delay on a link. The clients
(tests/tools/failclient.py): one that fails over between the nodes, and one
pinned to each node (it keeps trying that node alone), each over its own
region, with a salt of its own per schedule. After the faults: everything
healed and running, the pair back in sync with one primary (within 90 s).
Then:
  lost        = acknowledged writes missing from either data area;
  double      = status samples (every 100 ms during the schedule) in which
                both nodes may acknowledge writes (accepting(): primary with
                quorum, no held write, alone or through a connected
                secondary);
  both        = samples in which both were primary at all (printed, not
                failed: one of them may be a primary that has not yet noticed
                that its peer link is dead, which cannot acknowledge);
  stuck       = schedules that did not get back to one primary in sync.
Prints one line per schedule and the totals; exit 1 unless lost, double and
stuck are all 0.
   witness_soak.py --build build --schedules 200 [--seed N]
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
    def __init__(self, build, work):
        self.b, self.w = build, work
        self.procs = {}
        self.ports = {k: free_port() for k in
                      ("ra", "rb", "na", "nb", "wit", "pab", "paw", "pbw")}
        cfg = os.path.join(work, "c.ini")
        p = self.ports
        with open(cfg, "w") as f:
            f.write("[cluster]\nname = soak\nsecret = soak-secret\npeer-timeout = 2\n"
                    "witness = 127.0.0.1:%d\nwitness-dir = %s/w\nwitness-timeout = 2\n"
                    "quorum-timeout = 5\n" % (p["wit"], work))
            for n in "ab":
                f.write("[node %s]\nreplication = 127.0.0.1:%d\nnbd = 127.0.0.1:%d\n"
                        "control = %s/%s.sock\ndata-dir = %s/%s\nwitness = 127.0.0.1:%d\n"
                        % (n, p["r" + n], p["n" + n], work, n, work, n, p["p%sw" % n]))
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
            p.send_signal(sig)
            p.wait()

    def ctl(self, n, *args, out=False):
        r = subprocess.run([os.path.join(self.b, "tandemctl"), "-c", self.cfg, "-n", n] +
                           list(args), capture_output=True, text=True, timeout=60)
        return r.stdout if out else r.returncode

    def status(self, n):
        if not self.running(n):
            return None
        try:
            return json.loads(self.ctl(n, "status", "vol0", "--json", out=True))["volumes"][0]
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
                and peer["disk"] == "uptodate" and p["witness"]["session"])

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


def check(log, salt, files):
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "failclient.py"), "check", "--log",
                        log, "--salt", salt] + files, capture_output=True, text=True)
    lost = 0
    for line in r.stderr.splitlines():
        if "acknowledged writes missing" in line:
            lost = max(lost, int(line.split(":")[1].split()[0]))
    return lost


FAULTS = ["kill-primary", "kill-secondary", "kill-witness", "cut-ab", "cut-aw", "cut-bw",
          "delay"]


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


def schedule(c, k, rng, args):
    salt = "s%d-%d" % (args.seed, k)
    os.path.exists(os.path.join(c.w, "stop")) and os.unlink(os.path.join(c.w, "stop"))
    logs = {x: os.path.join(c.w, "acked-%s" % x) for x in ("fo", "a", "b")}
    for f in logs.values():
        open(f, "w").close()
    region = (k % 8) * (24 << 20) + (8 << 20)
    cl = [client(c, "ab", logs["fo"], region, salt, False),
          client(c, "a", logs["a"], region + (8 << 20), salt, True),
          client(c, "b", logs["b"], region + (16 << 20), salt, True)]
    faults = sorted(((rng.uniform(0.3, 2.5), rng.choice(FAULTS), rng.uniform(0.3, 5))
                     for _ in range(rng.randint(1, 3))))
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
            if kind == "kill-primary" and prim:
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
            if p[1] == "start":
                c.start(p[2])
            elif p[1] == "restore":
                c.link(p[2], "restore")
            else:
                c.link(p[2], "delay", "0")
        sa, sb = c.status("a"), c.status("b")
        if accepting(sa, sb) and accepting(sb, sa):
            double += 1
        if sa and sb and sa["role"] == sb["role"] == "primary":
            both += 1
        time.sleep(0.1)
    for p in pending:
        if p[1] == "start":
            c.start(p[2])
        elif p[1] == "restore":
            c.link(p[2], "restore")
        else:
            c.link(p[2], "delay", "0")
    for n in ("w", "a", "b"):
        c.start(n)
    for ln in ("ab", "aw", "bw"):
        c.link(ln, "restore")
        c.link(ln, "delay", "0")
    stuck = True
    for _ in range(900):
        if c.settled():
            stuck = False
            break
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
            c.ctl(n, "wait-sync", "vol0", "--timeout", "60")
        files = [os.path.join(c.w, n, "vol0.img") for n in ("a", "b")]
        for log in logs.values():
            lost += check(log, salt, files)
    acked = sum(sum(1 for l in open(f) if l[:1].isdigit()) for f in logs.values())
    return names, acked, lost, double, both, stuck


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--schedules", type=int, default=200)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="tandem-soak.", dir="/var/tmp")
    c = Cluster(os.path.abspath(a.build), work)
    totals = {"schedules": 0, "acked": 0, "lost": 0, "double": 0, "both": 0, "stuck": 0}
    print("witness soak: seed %d, %d schedules, in %s" % (a.seed, a.schedules, work), flush=True)
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
    print("witness soak: %(schedules)d schedules, %(acked)d acknowledged writes, "
          "%(lost)d lost, %(double)d double-primary samples (both primary: %(both)d), "
          "%(stuck)d stuck" % totals)
    ok = totals["lost"] == 0 and totals["double"] == 0 and totals["stuck"] == 0
    if ok and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("logs kept in %s" % work)
    sys.exit(0 if ok else 1)


main()
