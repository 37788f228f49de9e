#!/usr/bin/env bash
# Resync under foreground load, with the default controller (resync-rate =
# auto): a is disconnected (`tandemctl disconnect` on a) while 384M of random
# data is written to it (a 512M volume). Then fio starts 4K random writes at
# queue depth 8 over the whole volume against a (checked with crc32c while
# writing) for RUNTIME s, and half a second into the job a is connected
# again: the resync to b runs under the job from its first byte (however
# fast it is). status --json of a is sampled every 0.1 s meanwhile, fio logs
# its IOPS and worst latency per 100 ms.
# Asserts: the resync ran while the job did (a syncsource in samples taken
# during the job, out_of_sync_bytes going down); the job completed without
# error and without a stall (no request took 1 s or more); the resync
# completes (wait-sync within 60 s); both data areas end equal byte for
# byte. Prints IOPS (a alone, during the resync, after it), p99 and max
# latency and when the worst one was, and the resync's rate.
# Alone (tests/run-integration.sh): no request may take 1 s, which another
# test's disk and CPU load beside it could make happen.
# tandem-test: serial
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio nbdcopy python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=512M
M=$((1 << 20))
DATA_MB=384
RUNTIME=${RUNTIME:-8}
MAX_LAT=1.0   # s: no foreground request may take this long

write_config2 "$T/c.ini"
start_pair

ctl_on a disconnect vol0 || fail "disconnect on a failed"
wait_for a "p['connection'] != 'connected'" 15
wait_for b "p['connection'] != 'connected'" 15
head -c "${DATA_MB}M" /dev/urandom >"$T/data"
t0=$(date +%s.%N)
nbdcopy "$T/data" "$(uri a)" || fail "writing ${DATA_MB}M to a failed"
t1=$(date +%s.%N)
rm -f "$T/data"
marked=$(jfield a "p['out_of_sync_bytes']")
log "${DATA_MB}M written to a alone in $(python3 -c "print('%.2f' % ($t1 - $t0))") s; $marked bytes out of sync"
[ "$marked" -ge $((DATA_MB * M)) ] || fail "a marks only $marked bytes out of sync after ${DATA_MB}M written"

# status of a every 0.1 s: "time replication out_of_sync_bytes resync_bytes_per_sec"
cat >"$T/sample.py" <<'EOF'
import json, os, subprocess, sys, time
bin_, cfg, out, stop = sys.argv[1:5]
with open(out, "w") as f:
    while not os.path.exists(stop):
        t = time.time()
        try:
            s = subprocess.run([bin_ + "/tandemctl", "-c", cfg, "-n", "a", "status", "vol0", "--json"],
                               capture_output=True, timeout=5).stdout
            p = json.loads(s)["volumes"][0]["peers"][0]
            f.write("%.3f %s %d %d\n" % (t, p["replication"], p["out_of_sync_bytes"], p["resync_bytes_per_sec"]))
            f.flush()
        except Exception as e:
            f.write("%.3f error %r\n" % (t, e))
        time.sleep(max(0.0, 0.1 - (time.time() - t)))
EOF
python3 "$T/sample.py" "$BIN" "$CFG" "$T/samples" "$T/stop" &
SAMPLER=$!
track "$SAMPLER"

timeout -k 5 $((RUNTIME + 40)) fio --name=load --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=4k \
	--iodepth=8 --size=512M --time_based "--runtime=$RUNTIME" --verify=crc32c \
	--verify_backlog=1024 --verify_fatal=1 --randseed=220 --log_unix_epoch=1 --log_avg_msec=100 \
	--log_max_value=1 --write_lat_log="$T/fio" --write_iops_log="$T/fio" --output-format=json \
	--output="$T/fio.json" >"$T/fio.err" 2>&1 &
FIO_PID=$!
track "$FIO_PID"
t_fio=$(date +%s.%N)
sleep 0.5
alive "$FIO_PID" || { cat "$T/fio.err" >&2; fail "fio ended before the resync started"; }
t_connect=$(date +%s.%N)
ctl_on a connect vol0 || fail "connect on a failed"
rc=0
wait "$FIO_PID" || rc=$?
_forget "$FIO_PID"
t_fio_end=$(date +%s.%N)
[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && fail "fio did not finish within $((RUNTIME + 40)) s: writes on a are stuck"
[ "$rc" -eq 0 ] || { cat "$T/fio.err" "$T/fio.json" >&2; fail "fio exited with $rc during the resync"; }
grep -qiE 'verify:|bad magic|verify failed' "$T/fio.err" &&
	{ cat "$T/fio.err" >&2; fail "fio reported a verify error"; }

ctl_on a wait-sync vol0 --timeout 60 || fail "the resync did not complete within 60 s of the end of the job"
t_sync=$(date +%s.%N)
touch "$T/stop"
wait "$SAMPLER" || true
_forget "$SAMPLER"

python3 - "$T" "$t_fio" "$t_connect" "$t_fio_end" "$t_sync" "$marked" "$MAX_LAT" <<'EOF' ||
import glob, json, sys
T = sys.argv[1]
t_fio, t_conn, t_end, t_sync = map(float, sys.argv[2:6])
marked, max_lat = int(sys.argv[6]), float(sys.argv[7])
bad = []
j = json.load(open(T + "/fio.json"))["jobs"][0]
w, r = j["write"], j["read"]
if j["error"] != 0:
    bad.append("fio error %d" % j["error"])
if w["total_ios"] < 1000:
    bad.append("only %d writes in the job" % w["total_ios"])
worst = max(w["clat_ns"]["max"], r["clat_ns"]["max"]) / 1e9
if worst >= max_lat:
    bad.append("a request took %.3f s (limit %.1f s): the foreground stalled" % (worst, max_lat))

# status samples: time replication out_of_sync_bytes resync_bytes_per_sec
samples = []
for l in open(T + "/samples"):
    x = l.split()
    if len(x) == 4:
        samples.append((float(x[0]), x[1], int(x[2]), int(x[3])))
errs = [l for l in open(T + "/samples") if " error " in l]
if errs:
    bad.append("status failed %d times while sampled, first: %s" % (len(errs), errs[0].strip()))
before = [s for s in samples if s[0] <= t_conn]
if before:
    marked = max(marked, before[-1][2])   # fio's writes while a was alone count too
src = [s for s in samples if s[0] > t_conn and s[1] == "syncsource"]
src_job = [s for s in src if s[0] <= t_end]
t_rs0 = src[0][0] if src else t_conn
t_rs1 = next((s[0] for s in samples if s[0] > t_rs0 and s[1] == "established"), t_sync)
if len(src_job) < 2:
    bad.append("only %d status samples with a syncsource while the job ran" % len(src_job))
elif not src_job[-1][2] < src_job[0][2]:
    bad.append("out_of_sync_bytes did not go down while the job ran: %d -> %d"
               % (src_job[0][2], src_job[-1][2]))

# fio's logs (unix epoch ms, per 100 ms: IOPS; worst completion latency)
def fio_log(pattern):
    out = []
    for p in glob.glob(T + "/" + pattern):
        for l in open(p):
            x = [v.strip() for v in l.split(",")]
            if len(x) >= 3 and x[2] == "1":     # writes
                out.append((int(x[0]) / 1000.0, int(x[1])))
    return sorted(out)
iops, lat = fio_log("fio_iops.*.log"), fio_log("fio_clat.*.log")
def mean_iops(t0, t1):
    v = [x for t, x in iops if t0 < t <= t1]
    return sum(v) / len(v) if v else 0
wt, wl = max(lat, key=lambda x: x[1]) if lat else (0, 0)
when = ("during the resync" if t_rs0 - 0.1 <= wt <= t_rs1 + 0.1 else
        "before the resync" if wt < t_rs0 else "after the resync")

def mbs(b, s):
    return b / s / 1e6 if s > 0 else 0
print("fio: %d write IOPS over the job (%d writes, %d verify reads), write p99 %.2f ms, max %.1f ms "
      "(verify reads max %.1f ms); worst write at +%.1f s after connect (%s)"
      % (w["iops"], w["total_ios"], r["total_ios"], w["clat_ns"]["percentile"]["99.000000"] / 1e6,
         w["clat_ns"]["max"] / 1e6, r["clat_ns"]["max"] / 1e6, wt - t_conn, when), file=sys.stderr)
print("write IOPS: a alone %.0f, during the resync %.0f, after it %.0f"
      % (mean_iops(t_fio, t_conn), mean_iops(t_rs0, t_rs1), mean_iops(t_rs1, t_end)), file=sys.stderr)
if len(src_job) >= 2:
    d = src_job[-1][0] - src_job[0][0]
    print("resync while the job ran: %d -> %d bytes out of sync in %.1f s: %.1f MB/s"
          % (src_job[0][2], src_job[-1][2], d, mbs(src_job[0][2] - src_job[-1][2], d)), file=sys.stderr)
print("resync of %d bytes (marked at connect): connect -> in sync %.1f s (%.1f MB/s), %s"
      % (marked, t_rs1 - t_conn, mbs(marked, t_rs1 - t_conn),
         "done %.1f s before the job ended" % (t_end - t_rs1) if t_rs1 <= t_end
         else "%.1f s after the job ended" % (t_rs1 - t_end)), file=sys.stderr)
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
	{ tail -n 20 "$T/fio.err" >&2; fail "the foreground job or the resync did not behave"; }

compare_replicas 60
[ "$(jfield a "p['replication']")" = established ] || fail "a is not established after the resync"
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b is not uptodate after the resync"
stop b
stop a
