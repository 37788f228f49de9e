#!/usr/bin/env python3
"""checker: a stamped-block consistency checker over NBD or iSCSI.

  checker.py run --nodes H:P[,H:P...] [--iqn IQN] --blocks N --state FILE
                 [--bs 4096] [--first B] [--seed S] [--count N] [--stop FILE]
                 [--flush-every K] [--timeout S] [--give-up S] [--rate R]
                 [--resume] [--journal FILE]
      Overwrites blocks chosen at random among N (from block B), one request in
      flight. Every write carries a stamp: (block, version, checksum), the
      version counting the writes to that block. A write counts as attempted
      when sent and acknowledged when its reply came back. When a request
      fails or its node stops answering (--timeout, default 10 s), the
      checker tries the nodes in turn and sends the same write again: it
      survives reconnects and failovers. It gives up after --give-up s
      (default 90) without an acknowledgement and exits 2. Every K writes it
      also sends a flush (NBD FLUSH; SCSI SYNCHRONIZE CACHE). It ends after
      --count writes or once --stop FILE exists, and keeps FILE (JSON: the
      acknowledged and attempted version of each block, the counts, the
      gaps) up to date twice a second and at the end. With --resume it goes
      on from the versions FILE holds (a later round on the same blocks).
      With --journal, one line per request is appended to that file as it
      is sent and as its reply comes back or it fails (wall time, node,
      what, block, version): what a lost write's history is read from.
  checker.py verify --state FILE [--nodes H:P[,H:P...] [--iqn IQN]] [--flushed]
                    [IMAGE...]
      Reads every block through each node given and from each image (a data
      area) and checks that it holds its last acknowledged version or a
      later attempted one, whole (zeros only if no write to it was ever
      acknowledged). With --flushed, the last version acknowledged before
      the last acknowledged flush is enough, and a block may be torn: each
      of its 512-byte sectors from one of the versions allowed (what a crash
      of the only copy may leave). Exit 1 on any other content; prints the
      counts.
Python 3 standard library only (iSCSI through tests/integration's
iscsi_initiator.py, as failclient.py does).
"""
import argparse
import hashlib
import json
import os
import random
import signal
import struct
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbdclient import Conn  # noqa: E402
import iscsiclient  # noqa: E402

MAGIC = b"TNDMCHK1"


def stamp(block, version, bs):
    head = struct.pack("<8sQQ", MAGIC, block, version)
    seed = hashlib.sha256(head).digest()
    body = (head + seed * (bs // len(seed) + 1))[:bs - 4]
    return body + struct.pack("<I", zlib.crc32(body))


def unstamp(data, bs):
    """(block, version) of a whole stamped block, 'zero', or None."""
    if data == bytes(bs):
        return "zero"
    if len(data) != bs or data[:8] != MAGIC:
        return None
    if struct.unpack("<I", data[-4:])[0] != zlib.crc32(data[:-4]):
        return None
    _, block, version = struct.unpack("<8sQQ", data[:24])
    return block, version


class Nbd(Conn):
    def close(self):
        try:
            self.s.close()
        except Exception:
            pass


def nodes_of(arg):
    return [(h, int(p)) for h, p in (x.rsplit(":", 1) for x in arg.split(","))]


def connect(node, iqn, timeout):
    if iqn:
        return iscsiclient.Conn(node[0], node[1], iqn, timeout,
                                initiator="iqn.2026-12.test:checker", connect_max=5, ua_retries=8)
    return Nbd(node[0], node[1], timeout)


def save(path, st):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(st, f)
    os.replace(tmp, path)


def run(a):
    nodes = nodes_of(a.nodes)
    rng = random.Random(a.seed)
    st = {"bs": a.bs, "blocks": a.blocks, "first": a.first, "acked": [0] * a.blocks,
          "attempted": [0] * a.blocks, "durable": [0] * a.blocks, "writes": 0, "flushes": 0, "reconnects": 0,
          "gaps": [], "seed": a.seed}
    if a.resume and os.path.exists(a.state):
        old = json.load(open(a.state))
        if (old["bs"], old["blocks"], old.get("first", 0)) != (a.bs, a.blocks, a.first):
            sys.exit("checker: %s is for other blocks" % a.state)
        for k in ("acked", "attempted", "durable", "writes", "flushes", "reconnects", "gaps"):
            st[k] = old[k]
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    conn, cur, t_fail, last_save = None, 0, None, 0.0
    t0, writes0 = time.monotonic(), st["writes"]
    pending = None  # (kind, block, version)
    jf = open(a.journal, "a", buffering=1) if a.journal else None

    def journal(what):
        if jf:
            jf.write("%s %s:%d %s %s %d %d\n" % (
                time.strftime("%H:%M:%S", time.localtime()) + ("%.3f" % (time.time() % 1))[1:],
                nodes[cur][0], nodes[cur][1], what, pending[0], pending[1], pending[2]))
    while True:
        if pending is None:
            if stop["now"] or st["writes"] >= a.count or (a.stop and os.path.exists(a.stop)):
                break
            if a.flush_every and st["writes"] and st["writes"] % a.flush_every == 0 \
                    and st["flushes"] < st["writes"] // a.flush_every:
                pending = ("flush", 0, 0)
            else:
                b = rng.randrange(a.blocks)
                v = st["attempted"][b] + 1
                st["attempted"][b] = v
                pending = ("write", b, v)
        if pending[0] == "write" and conn is None and (
                stop["now"] or (a.stop and os.path.exists(a.stop))):
            break  # told to stop while no node answers: the write stays attempted
        now = time.monotonic()
        if now - last_save > 0.5:
            save(a.state, st)
            last_save = now
        if t_fail is not None and now - t_fail > a.give_up:
            save(a.state, st)
            print("checker: no node acknowledged a write for %.0f s" % a.give_up,
                  file=sys.stderr)
            sys.exit(2)
        if conn is None:
            try:
                conn = connect(nodes[cur], a.iqn, a.timeout)
            except Exception:
                conn = None
                if t_fail is None:
                    t_fail = now
                cur = (cur + 1) % len(nodes)
                time.sleep(0.05)
                continue
        kind, b, v = pending
        try:
            if a.rate:
                # paced from this run's start (with --resume, writes
                # counts the earlier rounds too)
                ahead = t0 + (st["writes"] - writes0) / a.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            journal("send")
            if kind == "flush":
                conn.req(3, 0, 0)
            else:
                conn.req(1, (a.first + b) * a.bs, a.bs, stamp(a.first + b, v, a.bs))
        except Exception as e:
            journal("fail(%s)" % type(e).__name__)
            conn.close()
            conn = None
            st["reconnects"] += 1
            if t_fail is None:
                t_fail = time.monotonic()
            cur = (cur + 1) % len(nodes)
            time.sleep(0.05)
            continue
        journal("ack")
        if t_fail is not None:
            t = time.monotonic()
            st["gaps"].append({"seconds": round(t - t_fail, 3), "node": "%s:%d" % nodes[cur]})
            t_fail = None
        if kind == "flush":
            st["flushes"] += 1
            st["durable"] = list(st["acked"])
        else:
            st["acked"][b] = v
            st["writes"] += 1
        pending = None
    if conn:
        conn.close()
    save(a.state, st)
    print(json.dumps({k: st[k] for k in ("writes", "flushes", "reconnects", "gaps")}))


def verify(a):
    st = json.load(open(a.state))
    bs, n, first = st["bs"], st["blocks"], st.get("first", 0)
    acked, attempted = st["durable" if a.flushed else "acked"], st["attempted"]
    sources = []
    if a.nodes:
        for node in nodes_of(a.nodes):
            sources.append(("%s:%d" % node, connect(node, a.iqn, 30)))
    for path in a.images:
        f = open(path, "rb")
        # what the page cache holds of it goes: the blocks are read from the
        # file as the node's O_DIRECT writes left it
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        sources.append((path, f))
    bad = 0
    for name, src in sources:
        wrong, torn = [], 0
        for b in range(n):
            if hasattr(src, "req"):
                data = src.req(0, (first + b) * bs, bs)
            else:
                src.seek((first + b) * bs)
                data = src.read(bs)
            got = unstamp(data, bs)
            if got == "zero":
                ok = acked[b] == 0
                what = "zeros"
            elif got is None:
                ok, what = False, "no whole stamp (torn or foreign)"
            else:
                ok = got[0] == first + b and acked[b] <= got[1] <= attempted[b]
                what = "block %d version %d" % got
            if not ok and a.flushed and attempted[b] - acked[b] < 64:
                # the only copy crashed: a write in flight may be torn, each
                # 512-byte sector from one of the versions allowed
                cands = [bytes(bs) if v == 0 else stamp(first + b, v, bs)
                         for v in range(acked[b], attempted[b] + 1)]
                ok = all(any(c[o:o + 512] == data[o:o + 512] for c in cands)
                         for o in range(0, bs, 512))
                torn += ok
            if not ok:
                wrong.append("block %d: %s, acknowledged %d, attempted %d" %
                             (first + b, what, acked[b], attempted[b]))
        if wrong:
            bad += len(wrong)
            print("%s: %d of %d blocks wrong; first: %s" % (name, len(wrong), n,
                                                            "; ".join(wrong[:4])),
                  file=sys.stderr)
        else:
            print("%s: %d blocks, each its last %s version or a later "
                  "attempted one (%d writes acknowledged%s)" %
                  (name, n, "flushed" if a.flushed else "acknowledged", st["writes"],
                   ", %d torn across sectors" % torn if torn else ""), file=sys.stderr)
        if hasattr(src, "close"):
            src.close()
    if not sources:
        print("checker: nothing to verify", file=sys.stderr)
        sys.exit(1)
    sys.exit(1 if bad or not (st["writes"] or a.flushed) else 0)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--nodes", required=True)
    r.add_argument("--iqn")
    r.add_argument("--blocks", type=int, required=True)
    r.add_argument("--first", type=int, default=0, help="the first block's number")
    r.add_argument("--bs", type=int, default=4096)
    r.add_argument("--state", required=True)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--count", type=int, default=1 << 40)
    r.add_argument("--stop")
    r.add_argument("--flush-every", type=int, default=0)
    r.add_argument("--timeout", type=float, default=10)
    r.add_argument("--give-up", type=float, default=90)
    r.add_argument("--rate", type=float, default=0)
    r.add_argument("--resume", action="store_true",
                   help="go on from the versions in --state (a later round)")
    r.add_argument("--journal", help="append each request's send and reply to this file")
    v = sub.add_parser("verify")
    v.add_argument("--state", required=True)
    v.add_argument("--nodes")
    v.add_argument("--iqn")
    v.add_argument("--flushed", action="store_true",
                   help="only writes acknowledged before a flush must be there (a crash "
                   "with no other copy)")
    v.add_argument("images", nargs="*")
    a = ap.parse_args()
    run(a) if a.cmd == "run" else verify(a)


if __name__ == "__main__":
    main()
