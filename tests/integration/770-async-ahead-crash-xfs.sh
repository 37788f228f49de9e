#!/usr/bin/env bash
# A consistent point survives catch-up: b's image lives on XFS (a loop
# device), where a reflink copy is cheap. a streams async to b over a
# 20 Mbit/s link with a 4M backlog while one client writes stamped 4K
# blocks one at a time (as in 750). The backlog overflows: a goes ahead, and
# b, before the first resync write lands, keeps a reflink copy of its image
# (status: consistent_copy). During that resync a is killed; b is promoted
# with --force and starts from the kept copy, not from the half-resynced
# mix: its image must be a prefix of a's write order. The copy is gone
# afterwards.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3 mkfs.xfs losetup
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for a loop device" >&2; exit 77; }

truncate -s 1G "$T/xfs.img"
LOOP=$(losetup -f --show "$T/xfs.img" 2>/dev/null) || { echo "SKIP: no loop device" >&2; exit 77; }
AT_EXIT+=("losetup -d '$LOOP'")
mkfs.xfs -q -m reflink=1 "$LOOP" || fail "mkfs.xfs failed"
mkdir -p "$T/xfs"
mount "$LOOP" "$T/xfs" 2>/dev/null || { echo "SKIP: cannot mount XFS" >&2; exit 77; }
AT_EXIT=("umount '$T/xfs'" "${AT_EXIT[@]}")

export VOL_SIZE=64M PROXY=1 PEER_TIMEOUT=4 REPL_MODE=async
NBLK=4096
write_config2 "$T/c.ini" "async-backlog = 4M" "disk.b = $T/xfs/vol0.img"
proxy_start
start_pair
proxy rate 20mbit

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
PY
python3 "$T/writer.py" "${NBDP[a]}" "$NBLK" "$T/acked" 2>"$T/writer.err" &
wpid=$!
track "$wpid"
wait_for b "p['replication'] == 'behind' and v['consistent_copy'] is not None" 60
copy=$(jfield b "v['consistent_copy']['path']")
[ -f "$copy" ] || fail "status names $copy, which does not exist"
log "b keeps $copy from $(jfield b "v['consistent_copy']['time']")"
sleep 1.5
[ "$(jfield b "p['replication']")" = behind ] || log "note: the resync ended before the crash"
kill -STOP "$wpid"
crash a
kill -CONT "$wpid"
wait "$wpid" 2>/dev/null || true
acked=$(cat "$T/acked")
wait_for b "p['connection'] != 'connected'" 30
ctl_on b primary vol0 --force >/dev/null || fail "b: primary --force failed"
[ "$(jfield b "v['role']")" = primary ] || fail "b did not become primary"
stop b
python3 - "$T/xfs/vol0.img" "$NBLK" "$acked" <<'PY' || fail "b's image is not a prefix of a's writes"
import random, struct, sys
img, nblk, acked = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
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
print("b restored the first %d of %d acknowledged writes" % (K, acked), file=sys.stderr)
PY
grep -q "consistent image kept before the resync" "$T/b.log" ||
	fail "b did not start from its kept copy"
if [ -e "$copy" ]; then fail "the copy is still there after it was restored"; fi
