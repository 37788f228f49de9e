#!/usr/bin/env bash
# Gray failure on the primary: a's disk still answers, slowly (a blkio
# cgroup throttle of 1 MB/s on writes, as 470 and 795 do). With
# disk-slow-ms = 200 and disk-slow-s = 3, a detaches its own disk and
# serves through b:
#  1. a is diskless, disk_error says ETIMEDOUT / slow; b is up to date and
#     the pair is connected.
#  2. a's writes no longer wait for its disk: 64 MiB take seconds, not the
#     minute the throttled disk would need, and the client sees no error.
#  3. The throttle goes; `tandemctl attach vol0` (the old disk) copies only
#     what changed while it was away, not the whole volume; both replicas
#     end identical.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio python3 stat

export VOL_SIZE=256M
write_config2 "$T/c.ini"
sed -i "s|^secret = .*|&\ndisk-slow-ms = 200\ndisk-slow-s = 3|" "$CFG"
start_pair
throttle_writes a $((1 << 20))
fio --name=w --ioengine=nbd --uri="$(uri a)" --rw=write --bs=1M --iodepth=8 --size=64M \
	--direct=1 --time_based --runtime=60 --output="$T/fio1.out" >/dev/null 2>&1 &
FIO=$!
track "$FIO"
wait_for a "v['disk'] == 'diskless'" 40
kill "$FIO" 2>/dev/null || true
wait "$FIO" 2>/dev/null || true
_forget "$FIO"
[ "$(jfield a "v['disk_error']['error'] + ' ' + v['disk_error']['op']")" = "ETIMEDOUT slow" ] ||
	fail "a's disk_error is $(jfield a "v['disk_error']"), expected ETIMEDOUT / slow"
this_run a | grep -q "the disk is too slow" || fail "a's log does not say why its disk was detached"
# (the state change is written to the metadata synchronously, on the slow
# device: the loop may stall past the peer timeout, and the pair reconnect)
wait_for a "v['role'] == 'primary' and p['disk'] == 'uptodate' and p['replication'] == 'established'" 20

# 2. a goes on at b's pace
t0=$(date +%s.%N)
fio --name=w2 --ioengine=nbd --uri="$(uri a)" --rw=write --bs=1M --iodepth=8 --size=64M \
	--offset=128M --direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--output="$T/fio2.out" >/dev/null 2>&1 || fail "writing to a failed: $(cat "$T/fio2.out")"
secs=$(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$t0")
log "64 MiB written and read back on a in ${secs} s with its disk detached (at 1 MB/s: 64 s)"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 30 else 1)" "$secs" ||
	fail "a still waits for its slow disk: 64 MiB took ${secs} s"

# 3. the old disk comes back: only what changed is copied
throttle_writes a 0
out=$(ctl_on a attach vol0 2>&1) || fail "attach failed: $out"
copy=$(this_run a | sed -n 's/.*copying \([0-9]*\) bytes from b to the attached disk.*/\1/p' | tail -1)
[ -n "$copy" ] || fail "a does not say what it copies"
log "attach of the old disk copies $((copy >> 20)) MiB of the 256 MiB volume"
[ "$copy" -lt $((256 << 20)) ] || fail "the old disk got a full copy ($copy bytes)"
wait_for a "v['disk'] == 'uptodate' and p['replication'] == 'established'" 90
IMG_A=$T/a/vol0.img compare_replicas
stop b
stop a
log "ok"
