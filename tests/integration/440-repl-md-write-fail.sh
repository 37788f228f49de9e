#!/usr/bin/env bash
# A change bitmap that could not be written is never taken as clean
# (docs/SPEC.md, "Metadata errors"): a's metadata lives on a tmpfs that is
# full; b crashes while a's activity log still holds the extent just
# written, so a marks it out of sync, but the bitmap page cannot be
# allocated and the bits live in memory only. a stops: its metadata must not
# be marked clean, so that the next start recovers the activity log as after
# a crash and resyncs the extent to b. (Writes a takes while its bitmap
# cannot be written fail: the write intent cannot be made durable.)
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-io python3 mount umount

export VOL_SIZE=1G
mkdir -p "$T/img"
mount_tmpfs "$T/a" 4m
write_config2 "$T/c.ini" "disk.a = $T/img/a.img"
start_pair
put a 0 $((1 << 20))
ctl_on a wait-sync vol0 --timeout 30 || fail "a: wait-sync"
# Fill a's metadata file system.
dd if=/dev/zero of="$T/a/filler" bs=64k status=none 2>/dev/null || true
crash b
wait_for a "p['connection'] != 'connected'" 10
stop a
grep -q "could not write the change bitmap" "$T/a.log" ||
	fail "the bitmap write did not fail (the tmpfs was not full): the test means little"
rm -f "$T/a/filler"
start a
this_run a | grep -c "was not shut down cleanly" >/dev/null ||
	fail "a's metadata was marked clean although its bitmap could not be written"
this_run a | grep -c "regions marked in the change bitmap" >/dev/null ||
	fail "a restarted without the extent that b may lack"
start b
wait_connected
ctl_on b wait-sync vol0 --timeout 60 || fail "b: wait-sync"
grep -q "replication with a: off -> synctarget" "$T/b.log" || fail "b was not resynced from a"
IMG_A=$T/img/a.img compare_replicas
stop b
stop a
