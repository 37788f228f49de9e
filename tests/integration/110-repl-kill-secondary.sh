#!/usr/bin/env bash
# The secondary dies (SIGKILL) while fio writes to the primary: the primary's
# writes keep completing (it goes on alone, error-free, no write stuck longer
# than the peer timeout and a margin), it reports the peer gone and regions
# out of sync; once b is back it resyncs only the regions written meanwhile
# (a small region of a larger volume), b goes through synctarget, and both
# data areas end equal byte for byte.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=256M
PEER_TIMEOUT=${PEER_TIMEOUT:-2}
# fio writes only [REGION_OFF, REGION_OFF + NJOBS * JOB_MB): 16M of 256M.
REGION_OFF_MB=96 JOB_MB=4 NJOBS=4
REGION_BYTES=$((NJOBS * JOB_MB * 1024 * 1024))
RUNTIME=10    # s of writes; b dies CRASH_AT s after fio starts
CRASH_AT=3
# No write may take longer than the peer timeout plus this margin (s): the
# machine is shared, so it is generous; a write stuck on the dead peer for
# good hangs fio, which the timeout below turns into a failure.
LAT_MARGIN=4

write_config2 "$T/c.ini"
start_pair

# Random 4K writes at QD 8 from 4 jobs (4 connections), each in its own 4M
# slice, checked with crc32c while writing (verify_backlog re-reads recent
# blocks through a). The latency log records, per 200 ms window, the worst
# completion latency of the writes that completed in it.
fio_args=(--name=w --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=4k --iodepth=8
	"--numjobs=$NJOBS" "--offset=${REGION_OFF_MB}M" "--size=${JOB_MB}M" "--offset_increment=${JOB_MB}M"
	--time_based "--runtime=$RUNTIME" --verify=crc32c --verify_backlog=512 --verify_fatal=1
	--randseed=110 --write_lat_log="$T/lat" --log_avg_msec=200 --log_max_value=1
	--group_reporting --output-format=json --output="$T/fio.json")
t_start=$(date +%s.%N)
timeout -k 5 $((RUNTIME + 40)) fio "${fio_args[@]}" >"$T/fio.err" 2>&1 &
FIO_PID=$!
track "$FIO_PID"

sleep "$CRASH_AT"
alive "$FIO_PID" || { cat "$T/fio.err" >&2; fail "fio ended before b was killed"; }
t_crash=$(date +%s.%N)
crash b
log "b killed $(python3 -c "print('%.2f' % ($t_crash - $t_start))") s after fio started"
# The primary notices the loss (here by the reset of the killed process's
# socket, at the latest by the peer timeout) and goes on alone.
wait_for a "p['connection'] != 'connected'" $((PEER_TIMEOUT + 10))
alive "$FIO_PID" || { cat "$T/fio.err" >&2; fail "fio ended early once b was killed"; }

rc=0
wait "$FIO_PID" || rc=$?
# 124: timeout ended fio (SIGTERM), 137: fio ignored that and was killed.
[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] &&
	fail "fio did not finish within $((RUNTIME + 40)) s of its start: writes on a are stuck"
[ "$rc" -eq 0 ] || { cat "$T/fio.err" "$T/fio.json" >&2; fail "fio exited with $rc"; }
grep -qiE 'verify:|bad magic|verify failed' "$T/fio.err" &&
	{ cat "$T/fio.err" >&2; fail "fio reported a verify error"; }

# Error-free, writes done throughout, none stuck, and some completed well
# after the peer was gone (the primary goes on alone, not only until the
# queue drains).
python3 - "$T/fio.json" "$T" "$t_start" "$t_crash" "$PEER_TIMEOUT" "$LAT_MARGIN" <<'EOF' ||
import glob, json, sys
f, T, t0, tc, tmo, margin = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
j = json.load(open(f))["jobs"][0]
bad = []
if j["error"] != 0:
    bad.append("fio error %d" % j["error"])
if j["write"]["total_ios"] < 1000:
    bad.append("only %d writes" % j["write"]["total_ios"])
worst = j["write"]["clat_ns"]["max"] / 1e9
if worst > tmo + margin:
    bad.append("a write took %.2f s (limit %.1f s)" % (worst, tmo + margin))
# fio's log clock starts when the jobs start, a little after t0: times
# relative to t0 are upper bounds, so "after the crash" below is conservative.
crash_ms = (tc - t0) * 1000
late = crash_ms + (tmo + 1) * 1000
times = []
for p in glob.glob(T + "/lat_clat.*.log"):
    for line in open(p):
        x = [s.strip() for s in line.split(",")]
        if len(x) >= 3 and x[2] == "1":
            times.append(int(x[0]))
if not any(t < crash_ms - 500 for t in times):
    bad.append("no write completed before b was killed")
if not any(t > late for t in times):
    bad.append("no write completed later than %.1f s after fio started (b killed at %.1f s)"
               % (late / 1000, crash_ms / 1000))
print("fio: %d writes, %d verify reads, worst write latency %.3f s"
      % (j["write"]["total_ios"], j["read"]["total_ios"], worst), file=sys.stderr)
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
	fail "the writes on a did not keep completing while b was dead"

# a alone: still primary and uptodate, the peer not connected, and what
# changed meanwhile marked out of sync, inside the region fio wrote.
[ "$(jfield a "v['role']")" = primary ] || fail "a is no longer primary"
[ "$(jfield a "v['disk']")" = uptodate ] || fail "a: disk is $(jfield a "v['disk']")"
conn=$(jfield a "p['connection']")
[ "$conn" != connected ] || fail "a still shows b connected after b was killed"
oos=$(jfield a "p['out_of_sync_bytes']")
log "a alone: connection $conn, out_of_sync_bytes $oos"
[ "$oos" -gt 0 ] || fail "a shows no bytes out of sync after writing without b"
[ "$oos" -le "$REGION_BYTES" ] ||
	fail "a shows $oos bytes out of sync, more than the $REGION_BYTES bytes written"

# b comes back and is resynced: only what changed, a as source, b as target.
start b
wait_connected 30
compare_replicas 60
grep -q "replication with b: off -> syncsource" "$T/a.log" || fail "a never became syncsource"
grep -q "replication with a: off -> synctarget" "$T/b.log" || fail "b never became synctarget"
grep -q "full sync" "$T/a.log" "$T/b.log" && fail "b's return caused a full sync"
n=$(sed -n 's/.*resync to b done: \([0-9]*\) bytes.*/\1/p' "$T/a.log" | tail -n 1)
[ -n "$n" ] || fail "a did not log 'resync to b done: N bytes'"
log "resync to b: $n bytes (region written: $REGION_BYTES of $((256 * 1024 * 1024)))"
[ "$n" -gt 0 ] || fail "the resync copied nothing"
# The bitmap granularity rounds the region up to whole chunks at most.
[ "$n" -le $((REGION_BYTES + 1024 * 1024)) ] ||
	fail "the resync copied $n bytes, more than the $REGION_BYTES bytes that changed"
[ "$(jfield a "p['out_of_sync_bytes']")" = 0 ] || fail "a still reports bytes out of sync"
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b: disk not uptodate after the resync"
[ "$(jfield a "p['replication']")" = established ] || fail "a: not established after the resync"

stop b
stop a
