#!/usr/bin/env bash
# Gray failure: a secondary's disk that still answers, slowly (issue: slow
# disks that are never ejected drag the cluster down). b's disk is throttled
# (blkio cgroup, as 470 does) to 1 MB/s of writes while a writes; with
# disk-slow-ms = 200 and disk-slow-s = 3, b detaches its disk by itself:
#  1. b's disk is failed, disk_error says ETIMEDOUT / slow, the log says why;
#     a shows b connected with its disk failed.
#  2. a's writes no longer wait for b: 64 MiB take seconds, not the minute
#     b's disk would need.
#  3. With the throttle gone, `tandemctl attach vol0` on b brings the disk
#     back; the resync ends with both replicas identical.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio python3 stat

export VOL_SIZE=256M
write_config2 "$T/c.ini"
sed -i "s|^secret = .*|&\ndisk-slow-ms = 200\ndisk-slow-s = 3|" "$CFG"
start_pair
throttle_writes b $((1 << 20))
# a writer that b's disk cannot keep up with, until b detaches
fio --name=w --ioengine=nbd --uri="$(uri a)" --rw=write --bs=1M --iodepth=8 --size=128M \
	--direct=1 --time_based --runtime=60 --output="$T/fio1.out" >/dev/null 2>&1 &
FIO=$!
track "$FIO"
wait_for b "v['disk'] == 'failed'" 40
kill "$FIO" 2>/dev/null || true
wait "$FIO" 2>/dev/null || true
_forget "$FIO"
[ "$(jfield b "v['disk_error']['error']")" = ETIMEDOUT ] ||
	fail "b's disk_error is $(jfield b "v['disk_error']"), expected ETIMEDOUT"
[ "$(jfield b "v['disk_error']['op']")" = slow ] || fail "b's disk_error does not say slow"
this_run b | grep -q "the disk is too slow: more than 1% of its requests took over 200 ms" ||
	fail "b's log does not say why its disk was detached"
wait_for a "p['disk'] == 'failed' and p['connection'] == 'connected'" 10

# 2. a goes on at its own disk's pace
t0=$(date +%s.%N)
fio --name=w2 --ioengine=nbd --uri="$(uri a)" --rw=write --bs=1M --iodepth=8 --size=64M \
	--offset=128M --direct=1 --output="$T/fio2.out" >/dev/null 2>&1 || fail "writing to a failed"
secs=$(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$t0")
log "64 MiB on a in ${secs} s with b detached (b's disk at 1 MB/s would need 64 s)"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 30 else 1)" "$secs" ||
	fail "a still waits for b's slow disk: 64 MiB took ${secs} s"

# 3. the throttle goes, the disk comes back
throttle_writes b 0
out=$(ctl_on b attach vol0 2>&1) || fail "attach failed: $out"
wait_for b "v['disk'] == 'uptodate'" 90
wait_for a "p['replication'] == 'established' and p['out_of_sync_bytes'] == 0" 30
compare_replicas
stop b
stop a
log "ok"
