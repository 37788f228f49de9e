#!/usr/bin/env bash
# Async: the secondary's image is always an earlier state of the primary's.
# One client writes 4K blocks one at a time to a (each stamped with its write
# number; two passes over the blocks in a shuffled order, so the second pass
# overwrites), while a streams to b over a link with 150 ms of delay each
# way. The link then drops (what is on it never arrives), the writes go on
# for a while into a's backlog, the client is paused, and a is killed (-9)
# with that backlog; b is promoted with --force. Its image must be a prefix
# of a's write order: for the newest write number K found on b, every block
# holds exactly its last write numbered <= K (or zeros when it has none), so
# no block is newer than one that is missing. What b lacks of the
# acknowledged writes is at most the backlog a's status showed last.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=64M PROXY=1 PEER_TIMEOUT=4 REPL_MODE=async
NBLK=4096
write_config2 "$T/c.ini" "async-backlog = 64M"
proxy_start
start_pair
proxy delay 150

cat >"$T/writer.py" <<'PY'
import os, random, struct, sys
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import connect, recvall
port, nblk, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
order = list(range(nblk)); random.Random(7).shuffle(order)
writes = (order + order[::-1]) * 10
s, _ = connect("127.0.0.1", port)
done = 0
try:
    for n, blk in enumerate(writes, start=1):
        data = struct.pack("<QQ", n, blk) * 256
        s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, n, blk * 4096, 4096) + data)
        magic, err, h = struct.unpack(">IIQ", recvall(s, 16))
        if err:
            sys.exit("write %d failed: %d" % (n, err))
        done = n
        with open(out + ".tmp", "w") as f:
            f.write("%d\n" % done)
        os.rename(out + ".tmp", out)
except (ConnectionError, OSError):
    pass
with open(out, "w") as f:
    f.write("%d\n" % done)
PY
python3 "$T/writer.py" "${NBDP[a]}" "$NBLK" "$T/acked" 2>"$T/writer.err" &
wpid=$!
track "$wpid"
# crash a in the second pass (overwrites), with a backlog
for ((i = 0; i < 600; i++)); do
	n=$(cat "$T/acked" 2>/dev/null || echo 0)
	[ "$n" -ge $((NBLK + NBLK / 2)) ] && break
	sleep 0.1
done
[ "$n" -ge $((NBLK + NBLK / 2)) ] || fail "the writer did only $n writes in 60 s"
proxy drop
sleep 1
kill -STOP "$wpid"
sleep 0.2
acked=$(cat "$T/acked")
backlog=$(jfield a "p['backlog_bytes']")
[ "$backlog" -gt 0 ] || fail "no backlog when a was to be killed"
crash a
kill -CONT "$wpid"
wait "$wpid" 2>/dev/null || true
proxy restore
log "a killed after $acked acknowledged writes, backlog $backlog bytes"
wait_for b "p['connection'] != 'connected'" 30
ctl_on b primary vol0 --force >/dev/null || fail "b: primary --force failed"
[ "$(jfield b "v['role']")" = primary ] || fail "b did not become primary"
stop b
python3 - "$T/b/vol0.img" "$NBLK" "$acked" "$backlog" <<'PY' || fail "b's image is not a prefix of a's writes"
import random, struct, sys
img, nblk, acked, backlog = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
order = list(range(nblk)); random.Random(7).shuffle(order)
writes = (order + order[::-1]) * 10
with open(img, "rb") as f:
    data = f.read(nblk * 4096).ljust(nblk * 4096, b"\0")
seen = {}
for blk in range(nblk):
    b = data[blk * 4096:(blk + 1) * 4096]
    if b == b"\0" * 4096:
        seen[blk] = 0
        continue
    n, bb = struct.unpack("<QQ", b[:16])
    if bb != blk or b != struct.pack("<QQ", n, blk) * 256 or not 1 <= n <= len(writes) or writes[n - 1] != blk:
        sys.exit("block %d holds a torn or foreign write (n=%d)" % (blk, n))
    seen[blk] = n
K = max(seen.values())
want = {blk: 0 for blk in range(nblk)}
for n in range(1, K + 1):
    want[writes[n - 1]] = n
bad = [blk for blk in range(nblk) if seen[blk] != want[blk]]
if bad:
    blk = bad[0]
    sys.exit("not a prefix: newest write on b is %d, but block %d holds %d instead of %d (%d blocks wrong)" % (K, blk, seen[blk], want[blk], len(bad)))
if K > acked + 1:
    sys.exit("b holds write %d, a acknowledged only %d" % (K, acked))
if (acked - K) * 4096 > backlog:
    sys.exit("b lacks %d acknowledged writes, more than the backlog of %d bytes" % (acked - K, backlog))
if K >= acked:
    sys.exit("nothing was lost: the backlog was not in a's memory when it was killed")
print("b holds the first %d of %d acknowledged writes (%d lost with a backlog of %d bytes)" % (K, acked, acked - K, backlog), file=sys.stderr)
PY
