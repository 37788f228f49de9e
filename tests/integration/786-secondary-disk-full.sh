#!/usr/bin/env bash
# A secondary whose filesystem fills up (ENOSPC) fails its disk like a dead
# one, latched (F1), instead of going round resyncs that cannot fit: b's
# data area is a sparse file on an 8 MiB tmpfs, the volume 32 MiB. a writes
# 16 MiB: every write succeeds at a; b's disk is failed with ENOSPC; a marks
# what b lacks. Then `tandemctl attach vol0 --disk` onto a file with room
# resyncs b to a's data.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-io python3
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to mount a tmpfs" >&2; exit 77; }

mkdir -p "$T/small"
mount -t tmpfs -o size=8m tmpfs "$T/small" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs" >&2; exit 77; }
AT_EXIT+=("umount '$T/small'")
export VOL_SIZE=32M
write_config2 "$T/c.ini" "disk.b = $T/small/vol0.img"
start_pair
for i in $(seq 0 15); do
	qemu-io -f raw "$(uri a)" -c "write -P $((i + 1)) $((i << 20)) 1M" >/dev/null ||
		fail "write $i to a failed although only b's disk is full"
done
wait_for b "v['disk'] == 'failed'" 10
[ "$(jfield b "v['disk_error']['error']")" = ENOSPC ] ||
	fail "b's disk_error is $(jfield b "v['disk_error']"), expected ENOSPC"
wait_for a "p['disk'] == 'failed' and p['out_of_sync_bytes'] > 0" 10
sleep 2
n=$(this_run b | grep -c 'disk failed -> inconsistent' || true)
[ "$n" = 0 ] || fail "b's full disk went inconsistent $n times"
out=$(ctl_on b attach vol0 --disk "$T/b-big.img" 2>&1) || fail "attach failed: $out"
wait_for b "v['disk'] == 'uptodate'" 60
wait_for a "p['replication'] == 'established' and p['out_of_sync_bytes'] == 0" 30
cmp "$T/a/vol0.img" "$T/b-big.img" || fail "b's new disk differs from a's data"
stop a
stop b
log "ok"
