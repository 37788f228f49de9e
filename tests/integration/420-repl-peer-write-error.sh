#!/usr/bin/env bash
# The secondary's disk fills up (a sparse image on a small tmpfs): its writes
# fail with ENOSPC while the primary acknowledges them (docs/SPEC.md, "What a
# peer error does"). The secondary must mark itself inconsistent at once, the
# primary must show it as not up to date with the regions out of sync, and a
# switchover must refuse to promote it without --force. Once the disk has
# room again, the regions are resynced in the background and both replicas
# end equal.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy python3 mount umount

export VOL_SIZE=32M
mount_tmpfs "$T/small" 12m
write_config2 "$T/c.ini" "disk.b = $T/small/vol0.img"
start a
start b
wait_connected
head -c 28M /dev/urandom >"$T/data"
nbdcopy "$T/data" "$(uri a)" || fail "writing to a failed"
grep -q "b failed a write: No space left on device" "$T/a.log" || fail "b's writes never failed (the tmpfs did not fill up)"
wait_for b "v['disk'] == 'inconsistent'" 10
wait_for a "p['disk'] != 'uptodate' and p['out_of_sync_bytes'] > 0" 10
# b lacks acknowledged writes: a switchover must not promote it silently.
ctl_on a secondary vol0 || fail "a: secondary failed"
rc=0
ctl_on b primary vol0 2>"$T/p.err" || rc=$?
[ "$rc" -eq 1 ] || fail "b, lacking acknowledged writes, was promoted without --force (rc $rc)"
ctl_on a primary vol0 || fail "a: primary again failed"
# Room again: the marked regions are copied in the background.
mount -o remount,size=64m "$T/small" || fail "remount failed"
IMG_B=$T/small/vol0.img compare_replicas 60
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b is not uptodate after the resync"
cmp -n $((28 << 20)) "$T/data" "$T/small/vol0.img" || fail "b does not hold what a acknowledged"
stop b
stop a
