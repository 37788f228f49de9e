"""Stamped writes for the async tests (750, 770): one NBD client writes 4 KiB
blocks one at a time, each stamped with its write number, in a fixed order
(two passes over NBLK blocks, shuffled and reversed, ten times over, or
as often as it takes to make some 40000 writes), and a
checker says whether an image is a prefix of that order.

  stampwriter.py write PORT NBLK ACKED_FILE [BURST RATE]
      writes until the connection ends; ACKED_FILE always holds the number of
      the last acknowledged write (renamed into place after each one). With
      BURST and RATE: the first BURST writes as fast as they go, then RATE
      writes a second. With STAMPWRITER_ACK_LOG=FILE in the environment,
      FILE gets a line "N TIME" for every acknowledged write N, TIME the
      wall clock (time.time()) just after its reply arrived
  stampwriter.py check IMAGE NBLK ACKED [BACKLOG]
      exit 0 when, for the newest write number K found in IMAGE, every block
      holds exactly its last write numbered <= K (zeros if none): no block is
      newer than one that is missing. With BACKLOG (bytes), also that the
      acknowledged writes missing fit in it and that some are missing.
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


def write(port, nblk, out, burst=None, rate=None):
    writes = order(nblk)
    s, _ = connect("127.0.0.1", port)
    done = 0
    t0 = None
    log_path = os.environ.get("STAMPWRITER_ACK_LOG")
    acklog = open(log_path, "w") if log_path else None
    try:
        for n, blk in enumerate(writes, start=1):
            if burst is not None and n > burst:
                if t0 is None:
                    t0 = time.monotonic()
                ahead = t0 + (n - burst) / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            data = struct.pack("<QQ", n, blk) * 256
            s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, n, blk * 4096, 4096) + data)
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


def check(img, nblk, acked, backlog):
    writes = order(nblk)
    with open(img, "rb") as f:
        data = f.read(nblk * 4096).ljust(nblk * 4096, b"\0")
    seen = {}
    for blk in range(nblk):
        b = data[blk * 4096:(blk + 1) * 4096]
        if b == b"\0" * 4096:
            seen[blk] = 0
            continue
        n, bb = struct.unpack("<QQ", b[:16])
        if (bb != blk or b != struct.pack("<QQ", n, blk) * 256 or not 1 <= n <= len(writes)
                or writes[n - 1] != blk):
            sys.exit("block %d holds a torn or foreign write (n=%d)" % (blk, n))
        seen[blk] = n
    k = max(seen.values())
    want = {blk: 0 for blk in range(nblk)}
    for n in range(1, k + 1):
        want[writes[n - 1]] = n
    bad = [blk for blk in range(nblk) if seen[blk] != want[blk]]
    if bad:
        blk = bad[0]
        sys.exit("not a prefix: newest write is %d, but block %d holds %d instead of %d "
                 "(%d blocks wrong)" % (k, blk, seen[blk], want[blk], len(bad)))
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


if __name__ == "__main__":
    if len(sys.argv) in (5, 7) and sys.argv[1] == "write":
        write(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
              *([int(sys.argv[5]), float(sys.argv[6])] if len(sys.argv) == 7 else []))
    elif len(sys.argv) in (5, 6) and sys.argv[1] == "check":
        check(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
              int(sys.argv[5]) if len(sys.argv) == 6 else None)
    else:
        sys.exit(__doc__)
