#!/usr/bin/env bash
# iSCSI front-end benchmark: Tandem against tgt (Debian's user-space target,
# tgtd) on the same backing file, same host, with the same client jobs. fio has
# no libiscsi engine here, iscsi-perf only reads and qemu-img bench only strides
# sequentially, so the client is bench/iscsi-load.c (build/iscsi-load): one
# libiscsi session, QD commands kept in flight, per-command latency.
#
#   bench/iscsi.sh                               3 rounds of 10 s per job and target
#   RUNS=1 RUNTIME=3 SIZE_MB=256 bench/iscsi.sh  smoke run
#
# One file of SIZE_MB MiB of random data (written once, so every read hits
# allocated blocks) backs both targets, with O_DIRECT on both sides:
#   tandem  a single-node volume, disk.a = the file, cache = none (O_DIRECT);
#           tandemd -f, iSCSI on a free port, LUN 0
#   tgt     tgtd -f on a free port, a private control socket (TGT_IPC_SOCKET in
#           the work directory, so a system tgtd is never touched), backing store
#           rdwr with bsoflags=direct on LUN 1 (LUN 0 is tgt's controller)
# Only one target runs at a time: per round Tandem is started, runs every job,
# is stopped (by pid), then tgt likewise, so slow drifts of this machine hit
# both alike. Jobs (iscsi-load, seed = round number: both targets get the same
# offsets): 4 KiB random read and write at QD1 and QD32, 1 MiB sequential read
# and write at QD8 (as in bench/nbd.sh), RUNTIME s each after RAMP s; random
# write data (a 16 MiB random pool, each write at a random place in it).
#
# tgt's session limits: Debian's defaults are MaxRecvDataSegmentLength 8 KiB,
# FirstBurstLength 64 KiB, MaxBurstLength 256 KiB and InitialR2T=Yes; Tandem
# offers 256 KiB, 256 KiB, 1 MiB and the initiator's choice of InitialR2T
# (libiscsi asks No). TGT_PARAMS=matched (default) gives tgt Tandem's limits
# (also MaxXmitDataSegmentLength 256 KiB), so large transfers compare like with
# like; TGT_PARAMS=stock leaves tgt as Debian ships it.
#
# Knobs: RUNS (default 3), RUNTIME (s per job, default 10), RAMP (s before the
# measured window, default 1), SIZE_MB (default 1024), SEQ_QD (queue depth of
# the 1 MiB jobs, default 8), TGT_PARAMS (matched | stock), JOBS (a subset of
# randread-4k-qd1 randwrite-4k-qd1 randread-4k-qd32 randwrite-4k-qd32
# seqread-1m-qdSEQ_QD seqwrite-1m-qdSEQ_QD; default all), RESULTS=DIR (keep the
# JSON lines and both targets' logs there), TANDEM_BUILD (default build),
# DISK_REF (1 = the fio references each round, default when fio exists; 0 = off).
# A default run takes about 8 minutes (36 jobs and 6 disk references of 11 s, tgtd's 2-4 s exits).
#
# Prints medians per job and target: IOPS (4 KiB jobs) or MB/s (1 MiB jobs),
# MB = 10^6 bytes, and p99 latency in microseconds; ratios Tandem/tgt of
# throughput (above 1: Tandem faster) and of p99 (below 1: Tandem's tail
# shorter); and the CPU each target process used during the job (all its
# threads, % of one CPU over the job's ramp and runtime), which tells a target
# that is CPU-bound from one that waits on the disk. Unless DISK_REF=0, each
# round also runs fio alone on the file (io_uring, O_DIRECT): a 1 MiB read at QD
# SEQ_QD and a 4 KiB random write at QD32, so the disk's own rates of that round
# stand next to both targets (a target near them is bound by the disk, and no
# ratio between two such targets can exceed what the disk leaves). Never asserts timings. Exit 0 when it ran, 77 when a tool is
# missing (scripts/deps.sh --bench), 1 when setting up failed or a job failed
# (a command not GOOD, a broken session, a target that died): the failing
# target's log lines are printed.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
BIN=${TANDEM_BUILD:-build}
RUNS=${RUNS:-3}
RUNTIME=${RUNTIME:-10}
RAMP=${RAMP:-1}
SIZE_MB=${SIZE_MB:-1024}
SEQ_QD=${SEQ_QD:-8}
TGT_PARAMS=${TGT_PARAMS:-matched}
ALL_JOBS="randread-4k-qd1 randwrite-4k-qd1 randread-4k-qd32 randwrite-4k-qd32 seqread-1m-qd$SEQ_QD seqwrite-1m-qd$SEQ_QD"
JOBS=${JOBS:-$ALL_JOBS}
RESULTS=${RESULTS:-}
DISK_REF=${DISK_REF:-1}

skip() { echo "bench: $*" >&2; exit 77; }
die() { echo "bench: $*" >&2; exit 1; }

for v in RUNS SIZE_MB SEQ_QD; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v: '${!v}' is not a positive number"
done
for v in RUNTIME RAMP; do
	[[ ${!v} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "$v: '${!v}' is not a number of seconds"
done
case $DISK_REF in 0 | 1) ;; *) die "DISK_REF: 0 or 1, not '$DISK_REF'" ;; esac
case $TGT_PARAMS in matched | stock) ;; *) die "TGT_PARAMS: 'matched' or 'stock', not '$TGT_PARAMS'" ;; esac
for j in $JOBS; do [[ " $ALL_JOBS " == *" $j "* ]] || die "JOBS: unknown job '$j' (jobs: $ALL_JOBS)"; done

for c in tgtd tgtadm python3 make cc; do
	command -v $c >/dev/null || skip "$c missing (scripts/deps.sh --bench)"
done
[ -f /usr/include/iscsi/iscsi.h ] || skip "libiscsi-dev missing (scripts/deps.sh --bench)"
[ -x "$BIN/tandemd" ] || skip "$BIN/tandemd missing (run make)"
make --no-print-directory -s build/iscsi-load >&2 || die "building build/iscsi-load failed"
LOAD=build/iscsi-load

W=$(mktemp -d /var/tmp/tandem-iscsi.XXXXXX)
PIDS=()
TGT_PID='' TANDEM_PID=''
export TGT_IPC_SOCKET=$W/tgtd.sock # tgtd and tgtadm: a private control socket
TGT_CTL=0                          # -C: the number appended to that path
mine() { # PID: still running and our child (so never a reused pid)
	[ "$(ps -o ppid= -p "$1" 2>/dev/null | tr -d ' ')" = "$$" ]
}
# Waits up to $2 tenths of a second for our child $1 to exit, then kills it.
reap() {
	for _ in $(seq "$2"); do mine "$1" || break; sleep 0.1; done
	mine "$1" && kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null || true
}
cleanup() {
	local p
	trap - ERR
	set +e
	# tgtd ignores SIGTERM while it has targets: ask it to shut down first.
	if [ -n "$TGT_PID" ] && mine "$TGT_PID"; then
		tgtadm -C $TGT_CTL --op delete --force --mode target --tid 1 >/dev/null 2>&1
		tgtadm -C $TGT_CTL --op delete --mode system >/dev/null 2>&1
	fi
	for p in "${PIDS[@]}"; do mine "$p" && kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do reap "$p" 50; done
	if [ -n "$RESULTS" ]; then
		mkdir -p "$RESULTS" && cp "$W"/results.txt "$W"/*.log "$W"/*.json "$RESULTS"/ 2>/dev/null
	fi
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "bench: failed at line $LINENO: $BASH_COMMAND" >&2; exit 1' ERR

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Ready = a login, READ CAPACITY and reads work; up to 10 s.
wait_ready() { # URL PID LOG
	for _ in $(seq 100); do
		mine "$2" || { tail -n 30 "$3" >&2; die "target died while starting (log above)"; }
		"$LOAD" --runtime 0.05 --ramp 0 "$1" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	tail -n 30 "$3" >&2
	die "no working iSCSI target at $1 after 10 s (log above)"
}
load_avg() { cut -d' ' -f1-3 /proc/loadavg; }
# CPU time of process $1, all threads, in clock ticks (utime + stime; the
# command names tandemd and tgtd hold no blank, so fields count plainly).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
now_ms() { date +%s%3N; }
HZ=$(getconf CLK_TCK)
command -v fio >/dev/null || DISK_REF=0

IMG=$W/disk.img
echo "# preparing ${SIZE_MB} MiB of random data in $IMG" >&2
head -c $((SIZE_MB << 20)) /dev/urandom >"$IMG"
sync

# ---------------------------------------------------------------- targets
start_tandem() { # ROUND -> URL
	local p log=$W/tandem.$1.log
	p=$(port)
	cat >"$W/tandem.ini" <<INI
[cluster]
name = bench
[node a]
iscsi = 127.0.0.1:$p
control = $W/tandem.sock
data-dir = $W/tandem
[volume vol0]
size = ${SIZE_MB}M
nodes = a
cache = none
disk.a = $IMG
INI
	"$BIN/tandemd" -c "$W/tandem.ini" -n a -f 2>"$log" &
	TANDEM_PID=$!
	PIDS+=("$TANDEM_PID")
	URL=iscsi://127.0.0.1:$p/iqn.2026-11.org.tandem:bench.vol0/0
	wait_ready "$URL" "$TANDEM_PID" "$log"
}
stop_tandem() {
	kill "$TANDEM_PID" 2>/dev/null || true
	reap "$TANDEM_PID" 100
	TANDEM_PID=''
}

start_tgt() { # ROUND -> URL
	local p log=$W/tgt.$1.log iqn=iqn.2026-11.org.tandem:bench.tgt
	p=$(port)
	tgtd -f -C $TGT_CTL --iscsi "portal=127.0.0.1:$p" >"$log" 2>&1 &
	TGT_PID=$!
	PIDS+=("$TGT_PID")
	for _ in $(seq 100); do
		mine "$TGT_PID" || { cat "$log" >&2; die "tgtd died while starting (log above)"; }
		tgtadm -C $TGT_CTL --op show --mode system >/dev/null 2>&1 && break
		sleep 0.1
	done
	tgtadm -C $TGT_CTL --lld iscsi --op new --mode target --tid 1 -T $iqn
	tgtadm -C $TGT_CTL --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 \
		--backing-store "$IMG" --bstype rdwr --bsoflags direct
	if [ "$TGT_PARAMS" = matched ]; then
		local kv
		for kv in MaxRecvDataSegmentLength=262144 MaxXmitDataSegmentLength=262144 \
			MaxBurstLength=1048576 FirstBurstLength=262144 InitialR2T=No; do
			tgtadm -C $TGT_CTL --lld iscsi --op update --mode target --tid 1 -n "${kv%%=*}" -v "${kv#*=}"
		done
	fi
	tgtadm -C $TGT_CTL --lld iscsi --op bind --mode target --tid 1 -I ALL
	URL=iscsi://127.0.0.1:$p/$iqn/1
	wait_ready "$URL" "$TGT_PID" "$log"
}
stop_tgt() {
	tgtadm -C $TGT_CTL --op delete --force --mode target --tid 1 >/dev/null 2>&1 || true
	tgtadm -C $TGT_CTL --op delete --mode system >/dev/null 2>&1 || true
	reap "$TGT_PID" 100 # tgtd takes 2-4 s to leave
	TGT_PID=''
}

job_args() {
	case $1 in
	randread-4k-qd1) echo "--rw read --pattern rand --bs 4k --qd 1" ;;
	randwrite-4k-qd1) echo "--rw write --pattern rand --bs 4k --qd 1" ;;
	randread-4k-qd32) echo "--rw read --pattern rand --bs 4k --qd 32" ;;
	randwrite-4k-qd32) echo "--rw write --pattern rand --bs 4k --qd 32" ;;
	seqread-1m-*) echo "--rw read --pattern seq --bs 1M --qd $SEQ_QD" ;;
	seqwrite-1m-*) echo "--rw write --pattern seq --bs 1M --qd $SEQ_QD" ;;
	esac
}

progress() { # ROUND JOB TARGET CPU% JSON
	python3 - "$@" <<'PY'
import json, sys
r, job, t, cpu, j = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
err = f"  ERRORS {j['errors']}" if j["errors"] else ""
print(f"# round {r} {job:18s} {t:6s} {j['iops']:8.0f} IOPS {j['mb_s']:7.1f} MB/s  p50 {j['lat_p50_us']:6.0f}"
      f"  p99 {j['lat_p99_us']:6.0f}  p99.9 {j['lat_p999_us']:6.0f}  max {j['lat_max_us']:6.0f} us"
      f"  cpu {cpu}%{err}")
PY
}
# The disk alone: fio on the backing file, a 1 MiB read as the 1 MiB read job
# does and a 4 KiB random write as the QD32 write job does.
disk_ref() { # ROUND
	local kind rw bs qd out v unit
	for kind in read write; do
		if [ $kind = read ]; then
			rw=read bs=1M qd=$SEQ_QD unit=MB/s
		else
			rw=randwrite bs=4k qd=32 unit=IOPS
		fi
		out=$W/disk.$1.$kind.json
		if fio --name=disk --filename="$IMG" --direct=1 --rw="$rw" --bs="$bs" --iodepth="$qd" \
			--ioengine=io_uring --runtime="$RUNTIME" --ramp_time="$RAMP" --time_based \
			--randseed="$1" --output-format=json >"$out" 2>"$out.err"; then
			v=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))["jobs"][0]; k = sys.argv[2]; print("%.1f" % (j["read"]["bw_bytes"] / 1e6 if k == "read" else j["write"]["iops"]))' "$out" $kind)
			echo "$1 $kind $v" >>"$DISK"
			echo "# round $1 disk alone (fio, $bs $rw QD$qd, O_DIRECT): $v $unit" >&2
		else
			echo "# round $1 disk alone ($rw): fio failed ($(head -c 200 "$out.err"))" >&2
		fi
	done
}

# ---------------------------------------------------------------- rounds
RES=$W/results.txt
DISK=$W/disk.txt
: >"$RES"
: >"$DISK"
FAILED=0
T0=$SECONDS
echo "# $(nproc) CPUs, load average at start: $(load_avg); tgt session limits: $TGT_PARAMS" >&2
for r in $(seq "$RUNS"); do
	[ "$DISK_REF" = 0 ] || disk_ref "$r"
	for t in tandem tgt; do
		echo "# round $r: $t (load average $(load_avg))" >&2
		"start_$t" "$r"
		pid_var=${t^^}_PID
		for j in $JOBS; do
			out=$W/$t.$r.$j.json
			c0=$(cpu_ticks "${!pid_var}") m0=$(now_ms)
			# shellcheck disable=SC2046
			if "$LOAD" $(job_args "$j") --runtime "$RUNTIME" --ramp "$RAMP" --seed "$r" \
				--initiator-name "iqn.2026-11.org.tandem:bench-$t" "$URL" >"$out" 2>"$out.err"; then
				rc=0
			else
				rc=$?
			fi
			c1=$(cpu_ticks "${!pid_var}" 2>/dev/null) || c1=$c0
			cpu=$(((c1 - c0) * 100000 / HZ / ($(now_ms) - m0 + 1))) # % of one CPU
			line=$(head -n 1 "$out")
			if [ -n "$line" ]; then
				echo "$r $t $j $rc $cpu $line" >>"$RES"
				progress "$r" "$j" "$t" "$cpu" "$line" >&2
			fi
			if [ $rc -ne 0 ] || [ -z "$line" ]; then
				FAILED=1
				echo "bench: round $r $t $j FAILED (iscsi-load exit $rc):" >&2
				sed 's/^/  client: /' "$out.err" >&2
				echo "  $t log (last 20 lines):" >&2
				tail -n 20 "$W/$t.$r.log" | sed 's/^/  target: /' >&2
			fi
			mine "${!pid_var}" || die "$t died during $j (round $r) (its log above)"
		done
		"stop_$t"
	done
done
echo "# load average at end: $(load_avg); $((SECONDS - T0)) s of rounds" >&2

python3 - "$RES" "$JOBS" "$RUNTIME" "$DISK" "$SEQ_QD" <<'PY'
import sys, json, statistics, collections
res, jobs, runtime, disk, seq_qd = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4], sys.argv[5]
d = collections.defaultdict(list)
for line in open(res):
    r, t, j, rc, cpu, js = line.split(None, 5)
    x = json.loads(js)
    x["cpu"] = int(cpu)
    d[(j, t)].append(x)
def med(j, t, key):
    v = [x[key] for x in d.get((j, t), [])]
    return statistics.median(v) if v else float("nan")
runs = max((len(v) for v in d.values()), default=0)
print(f"iSCSI benchmark: medians of {runs} runs of {runtime} s (4k jobs in IOPS, 1m jobs in MB/s, "
      f"MB = 10^6 bytes; p99 in us)")
print(f"{'job':19s}{'tandem':>10s}{'tgt':>10s}{'tandem/tgt':>12s}{'tandem p99':>12s}{'tgt p99':>10s}"
      f"{'p99 t/tgt':>11s}{'cpu% t':>8s}{'cpu% tgt':>10s}{'errors':>8s}")
for j in jobs:
    big = "1m" in j
    key = "mb_s" if big else "iops"
    a, b = med(j, "tandem", key), med(j, "tgt", key)
    pa, pb = med(j, "tandem", "lat_p99_us"), med(j, "tgt", "lat_p99_us")
    f = (lambda v: f"{v:.0f}") if big else (lambda v: f"{v / 1000:.1f}k")
    errs = sum(x["errors"] for t in ("tandem", "tgt") for x in d.get((j, t), []))
    ca, cb = med(j, "tandem", "cpu"), med(j, "tgt", "cpu")
    print(f"{j:19s}{f(a):>10s}{f(b):>10s}{a / b:12.2f}{pa:12.0f}{pb:10.0f}{pa / pb:11.2f}"
          f"{ca:8.0f}{cb:10.0f}{errs:8d}")
refs = collections.defaultdict(list)
for line in open(disk):
    r, kind, v = line.split()
    refs[kind].append(float(v))
for kind, what, unit in (("read", f"1 MiB read QD{seq_qd}", "MB/s"), ("write", "4 KiB randwrite QD32", "IOPS")):
    ref = refs.get(kind)
    if ref:
        print(f"disk alone (fio, {what}, O_DIRECT), per round: "
              + ", ".join(f"{v:.0f}" for v in ref) + f" {unit}; median {statistics.median(ref):.0f}")
PY
[ $FAILED -eq 0 ] || die "some jobs failed (see above)"
