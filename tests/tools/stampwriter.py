"""Stamped writes for the async tests (750, 770): one NBD client writes 4 KiB
blocks one at a time, each stamped with its write number, in a fixed order
(two passes over NBLK blocks, shuffled and reversed, ten times over, or
as often as it takes to make some 40000 writes), and a
checker says whether an image is a prefix of that order.

  stampwriter.py write PORT NBLK ACKED_FILE [BURST RATE]
      writes until the connection ends; ACKED_FILE always holds the number of
      the last acknowledged write (renamed into place after each one). With
      BURST and RATE: the first BURST writes as fast as they go (fewer, if
      the file named by $STAMP_BURST_STOP appears first), then RATE writes a
      second. With STAMPWRITER_ACK_LOG=FILE in the environment, FILE gets a
      line "N TIME" for every acknowledged write N, TIME the wall clock
      (time.time()) just after its reply arrived
  stampwriter.py check IMAGE NBLK ACKED [BACKLOG]
      exit 0 when, for the newest write number K found in IMAGE, every block
      holds exactly its last write numbered <= K (zeros if none): no block is
      newer than one that is missing. With BACKLOG (bytes), also that the
      acknowledged writes missing fit in it and that some are missing.
  Both take --first B (the blocks begin at block B, default 0) and --epoch E
  (default none): with an epoch, each block also carries E, and a block that
  holds another epoch's stamp counts as never written in this one (the soak
  writes a new epoch over the same blocks in each schedule).
"""
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbdclient import connect, recvall  # noqa: E402


def order(nblk):
    o = list(range(nblk))
    random.Random(7).shuffle(o)
    # at least ten passes each way, and some 40000 writes on few blocks
    return (o + o[::-1]) * max(10, 40000 // (2 * nblk))


STAMP_MAGIC = 0x54414e444d535450


def block(n, blk, epoch):
    if epoch is None:
        return struct.pack("<QQ", n, blk) * 256
    return struct.pack("<QQQQ", n, blk, epoch, STAMP_MAGIC) * 128


def write(port, nblk, out, burst=None, rate=None, first=0, epoch=None):
    writes = order(nblk)
    s, _ = connect("127.0.0.1", port)
    done = 0
    t0 = None
    stop = os.environ.get("STAMP_BURST_STOP")
    log_path = os.environ.get("STAMPWRITER_ACK_LOG")
    acklog = open(log_path, "w") if log_path else None
    try:
        for n, blk in enumerate(writes, start=1):
            if burst is not None and (n > burst or (stop and n % 16 == 0 and os.path.exists(stop))):
                if t0 is None:
                    burst = n - 1
                    t0 = time.monotonic()
                ahead = t0 + (n - burst) / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            data = block(n, blk, epoch)
            s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, n, (first + blk) * 4096, 4096)
                      + data)
            _, err, _ = struct.unpack(">IIQ", recvall(s, 16))
            if acklog and not err:
                acklog.write("%d %.6f\n" % (n, time.time()))
            if err:
                sys.exit("write %d failed: %d" % (n, err))
            done = n
            with open(out + ".tmp", "w") as f:
                f.write("%d\n" % done)
            os.rename(out + ".tmp", out)
    except (ConnectionError, OSError):
        pass
    finally:
        if acklog:
            acklog.close()


def prefix(data, nblk, epoch=None):
    """(K, error): K the newest write number found in DATA (NBLK blocks),
    error None when every block holds exactly its last write numbered <= K,
    else what is wrong (a torn or foreign block, or not a prefix)."""
    writes = order(nblk)
    data = data[:nblk * 4096].ljust(nblk * 4096, b"\0")
    seen = {}
    for blk in range(nblk):
        b = data[blk * 4096:(blk + 1) * 4096]
        if b == b"\0" * 4096:
            seen[blk] = 0
            continue
        if epoch is None:
            n, bb = struct.unpack("<QQ", b[:16])
        else:
            n, bb, e, m = struct.unpack("<QQQQ", b[:32])
            if m == STAMP_MAGIC and e != epoch and b == struct.pack("<QQQQ", n, bb, e, m) * 128:
                seen[blk] = 0  # an earlier epoch's: not written in this one
                continue
        if (bb != blk or b != block(n, blk, epoch) or not 1 <= n <= len(writes)
                or writes[n - 1] != blk):
            return 0, "block %d holds a torn or foreign write (n=%d)" % (blk, n)
        seen[blk] = n
    k = max(seen.values())
    want = {blk: 0 for blk in range(nblk)}
    for n in range(1, k + 1):
        want[writes[n - 1]] = n
    bad = [blk for blk in range(nblk) if seen[blk] != want[blk]]
    if bad:
        blk = bad[0]
        return k, ("not a prefix: newest write is %d, but block %d holds %d instead of %d "
                   "(%d blocks wrong)" % (k, blk, seen[blk], want[blk], len(bad)))
    return k, None


def check(img, nblk, acked, backlog, first=0, epoch=None):
    with open(img, "rb") as f:
        f.seek(first * 4096)
        data = f.read(nblk * 4096)
    k, err = prefix(data, nblk, epoch)
    if err:
        sys.exit(err)
    if k > acked + 1:
        sys.exit("the image holds write %d, only %d were acknowledged" % (k, acked))
    if backlog is not None:
        if (acked - k) * 4096 > backlog:
            sys.exit("%d acknowledged writes are missing, more than the backlog of %d bytes"
                     % (acked - k, backlog))
        if k >= acked:
            sys.exit("nothing was lost: the backlog was not in memory when the primary died")
    print("the image holds the first %d of %d acknowledged writes%s" %
          (k, acked, "" if backlog is None else
           " (%d lost with a backlog of %d bytes)" % (acked - k, backlog)), file=sys.stderr)


def options(argv):
    """--first B and --epoch E out of ARGV (the rest is positional)."""
    opt, rest = {"first": 0, "epoch": None}, []
    it = iter(argv)
    for x in it:
        if x in ("--first", "--epoch"):
            opt[x[2:]] = int(next(it))
        else:
            rest.append(x)
    return opt, rest


if __name__ == "__main__":
    opt, argv = options(sys.argv)
    if len(argv) in (5, 7) and argv[1] == "write":
        write(int(argv[2]), int(argv[3]), argv[4],
              *([int(argv[5]), float(argv[6])] if len(argv) == 7 else [None, None]), **opt)
    elif len(argv) in (5, 6) and argv[1] == "check":
        check(argv[2], int(argv[3]), int(argv[4]),
              int(argv[5]) if len(argv) == 6 else None, **opt)
    else:
        sys.exit(__doc__)
