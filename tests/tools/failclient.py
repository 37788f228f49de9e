#!/usr/bin/env python3
"""failclient: an NBD writer that fails over, for the witness tests and
bench/failover.sh.

  failclient.py write --nodes H:P[,H:P...] --log FILE [--first OFF] [--bs N]
                [--count N] [--rate R] [--stop FILE] [--timeout S] [--quiet]
      Writes distinct blocks in order (one request in flight), each with a
      pattern derived from its offset, and appends "OFF" to FILE once its
      reply arrived (flushed per line). When a request fails or the
      connection goes, it tries the nodes in turn (every 20 ms, 2 s connect
      timeout each, or --timeout S, which also bounds each request's wait:
      a node that is paused answers nothing) and writes the block again
      there; each such gap is
      logged as "# gap T_FAIL T_ACK NODE" (monotonic seconds). Ends after
      --count blocks, or when --stop FILE exists; prints a JSON summary.
  failclient.py check --log FILE [--bs N] [--nbd H:P] [FILE...]
      Every logged offset holds its pattern in each FILE (a data area) and,
      with --nbd, reads back through NBD. Exit 1 if any is missing.
Pattern of the block at offset o: sha256("tandem-fail:<o>") repeated.
Python 3 standard library only.
"""
import argparse
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbdclient import Conn  # noqa: E402
import iscsiclient  # noqa: E402


SALT = b""


def pattern(off, bs):
    d = hashlib.sha256(b"tandem-fail:%s%d" % (SALT, off)).digest()
    return d * (bs // len(d))


def IscsiConn(host, port, iqn, timeout=30):
    return iscsiclient.Conn(host, port, iqn, timeout, initiator="iqn.2026-12.test:failclient")


def write(a):
    nodes = [(h, int(p)) for h, p in (x.rsplit(":", 1) for x in a.nodes.split(","))]
    log = open(a.log, "a")
    conn, cur, n, gaps = None, 0, 0, []
    t_fail = None
    t0 = time.monotonic()
    while n < a.count and not (a.stop and os.path.exists(a.stop)):
        off = a.first + n * a.bs
        if conn is None:
            try:
                conn = (IscsiConn(nodes[cur][0], nodes[cur][1], a.iqn, a.timeout) if a.iqn
                        else Conn(nodes[cur][0], nodes[cur][1], a.timeout))
            except Exception:
                conn = None
                if t_fail is None:
                    t_fail = time.monotonic()
                cur = (cur + 1) % len(nodes)
                time.sleep(0.02)
                continue
        try:
            if a.rate:
                ahead = t0 + n / a.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            conn.req(1, off, a.bs, pattern(off, a.bs))
        except Exception:
            try:
                (conn.sess.s if a.iqn else conn.s).close()
            except Exception:
                pass
            conn = None
            if t_fail is None:
                t_fail = time.monotonic()
            cur = (cur + 1) % len(nodes)
            time.sleep(0.02)
            continue
        if t_fail is not None:
            t = time.monotonic()
            gaps.append({"fail": t_fail, "ack": t, "seconds": t - t_fail,
                         "node": "%s:%d" % nodes[cur]})
            log.write("# gap %.6f %.6f %s:%d\n" % (t_fail, t, nodes[cur][0], nodes[cur][1]))
            t_fail = None
        log.write("%d\n" % off)
        log.flush()
        n += 1
    print(json.dumps({"acked": n, "gaps": gaps}))


def check(a):
    offs = [int(l) for l in open(a.log) if l.strip() and not l.startswith("#")]
    bad = {}
    srcs = [(f, open(f, "rb")) for f in a.files]
    conn = None
    if a.nbd:
        h, p = a.nbd.rsplit(":", 1)
        conn = Conn(h, int(p))
    for off in offs:
        want = pattern(off, a.bs)
        for name, f in srcs:
            f.seek(off)
            if f.read(a.bs) != want:
                bad.setdefault(name, []).append(off)
        if conn and conn.req(0, off, a.bs) != want:
            bad.setdefault("nbd", []).append(off)
    for name, lst in bad.items():
        print("%s: %d of %d acknowledged writes missing, first at %s" %
              (name, len(lst), len(offs), ", ".join(hex(o) for o in lst[:8])), file=sys.stderr)
    print("checked %d acknowledged writes" % len(offs), file=sys.stderr)
    sys.exit(1 if bad or not offs else 0)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--nodes", required=True)
    w.add_argument("--log", required=True)
    w.add_argument("--first", type=int, default=0)
    w.add_argument("--bs", type=int, default=4096)
    w.add_argument("--count", type=int, default=1 << 30)
    w.add_argument("--rate", type=float, default=0)
    w.add_argument("--timeout", type=float, default=30)
    w.add_argument("--stop")
    w.add_argument("--iqn", help="iSCSI: the target name (the nodes are iSCSI portals)")
    c = sub.add_parser("check")
    c.add_argument("--log", required=True)
    c.add_argument("--bs", type=int, default=4096)
    c.add_argument("--nbd")
    c.add_argument("files", nargs="*")
    for p in (w, c):
        p.add_argument("--salt", default="", help="part of every pattern (soak rounds)")
    a = ap.parse_args()
    global SALT
    SALT = a.salt.encode() + (b":" if a.salt else b"")
    write(a) if a.cmd == "write" else check(a)


main()
