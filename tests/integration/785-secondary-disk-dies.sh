#!/usr/bin/env bash
# A secondary whose disk dies is latched failed until an operator attaches
# a disk (issue: no attach/detach loop). b's data area is a file on XFS on a
# loop device; `xfs_io -x -c shutdown` makes every later I/O to it fail with
# EIO. a goes on writing.
#  1. b's disk is failed and stays failed: no resync onto it, also across a
#     disconnect and reconnect (before: failed -> inconsistent -> failed at
#     every resync start); a shows b connected with its disk failed, keeps
#     writing, and marks what b lacks.
#  2. invalidate refuses a failed disk; attach on the primary, whose disk
#     works, is refused.
#  3. `tandemctl attach vol0 --disk NEW` on b: a full resync from a onto the
#     new file, which ends identical to a's data.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3 mkfs.xfs losetup xfs_io qemu-io

xfs_loop "$T/xfs"

export VOL_SIZE=64M
write_config2 "$T/c.ini" "disk.b = $T/xfs/vol0.img"
start_pair
put a 0 $((1 << 20))
xfs_io -x -c shutdown "$T/xfs" || fail "xfs_io shutdown failed"
qemu-io -f raw "$(uri a)" -c "write -P 0x33 0 64k" -c flush >/dev/null ||
	fail "a write to a failed although only b's disk died"
wait_for b "v['disk'] == 'failed'" 10
wait_for a "p['disk'] == 'failed' and p['connection'] == 'connected'" 10
for i in 1 2 3 4; do
	qemu-io -f raw "$(uri a)" -c "write -P 0x4$i $((i << 20)) 1M" >/dev/null ||
		fail "a write to a failed with b's disk failed"
done
sleep 2
[ "$(jfield b "v['disk']")" = failed ] || fail "b's disk left failed by itself: $(jfield b "v['disk']")"
[ "$(jfield a "p['out_of_sync_bytes'] > 0")" = True ] || fail "a does not mark what b lacks"
ctl_on b disconnect vol0 >/dev/null
ctl_on b connect vol0 >/dev/null
wait_for a "p['connection'] == 'connected' and p['replication'] == 'established'" 20
sleep 2
[ "$(jfield b "v['disk']")" = failed ] || fail "b's disk left failed on reconnect"
n=$(this_run b | grep -c 'disk failed -> inconsistent' || true)
[ "$n" = 0 ] || fail "b's failed disk went inconsistent $n times (the attach/detach loop)"
this_run b | grep -qF 'no resync from a onto it until' ||
	fail "b does not say why nothing is resynced onto it"

# 2. the wrong ways
out=$(ctl_on b invalidate vol0 2>&1) && fail "invalidate took a failed disk: $out"
echo "$out" | grep -q 'tandemctl attach' || fail "invalidate on a failed disk says: $out"
out=$(ctl_on a attach vol0 2>&1) && fail "attach on the primary: $out"
echo "$out" | grep -q 'not failed: nothing to attach' || fail "attach on the primary says: $out"

# 3. a new disk
out=$(ctl_on b attach vol0 --disk "$T/b-new.img" 2>&1) || fail "attach failed: $out"
wait_for b "v['disk'] == 'uptodate'" 60
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate' and p['out_of_sync_bytes'] == 0" 30
[ "$(jfield b "v['disk_error']")" = None ] || fail "b still shows a disk error: $(jfield b "v['disk_error']")"
cmp -n "$(vol_bytes)" "$T/a/vol0.img" "$T/b-new.img" || fail "b's new disk differs from a's data after the resync"
stop a
stop b
log "ok"
