#!/usr/bin/env bash
# NBD front-end benchmark: Tandem against nbdkit (file plugin) and qemu-nbd on
# the same backing file with the same fio jobs, plus fio's io_uring engine on
# the raw file as the ceiling. Servers run one after another, interleaved per
# round so that slow drifts of this machine hit all of them alike.
#
#   bench/nbd.sh                 3 rounds of 8 s per job and server
#   RUNS=5 RUNTIME=15 bench/nbd.sh
#   JOBS="randread-4k-qd32" SERVERS="tandem_direct fio_direct" bench/nbd.sh
#
# Tandem runs twice: cache=writeback (page cache, as nbdkit and qemu-nbd use by
# default) and cache=none (O_DIRECT). Ratios compare like with like:
# Tandem(writeback)/nbdkit, Tandem(writeback)/fio-buffered, and
# Tandem(none)/fio-direct. Prints medians; never asserts timings.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TANDEM_BUILD:-build}
RUNS=${RUNS:-3}
RUNTIME=${RUNTIME:-8}
SIZE_MB=${SIZE_MB:-1024}
W=$(mktemp -d /var/tmp/tandem-bench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT
for c in fio nbdkit qemu-nbd python3; do
	command -v $c >/dev/null || { echo "bench: $c missing (make deps)"; exit 77; }
done
fio --enghelp=nbd >/dev/null 2>&1 || { echo "bench: fio has no nbd engine"; exit 77; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 100); do
		nbdinfo --size "nbd://127.0.0.1:$1/$2" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "bench: server on port $1 did not come up" >&2; exit 1
}

IMG=$W/disk.img
echo "# preparing ${SIZE_MB} MiB of random data in $IMG" >&2
head -c $((SIZE_MB << 20)) /dev/urandom > "$IMG"
sync

start_tandem() { # NAME CACHE
	local p; p=$(port)
	cat > "$W/$1.ini" <<INI
[cluster]
name = bench
[node a]
nbd = 127.0.0.1:$p
control = $W/$1.sock
data-dir = $W/$1
[volume vol0]
size = ${SIZE_MB}M
nodes = a
cache = $2
disk.a = $IMG
INI
	"$BIN/tandemd" -c "$W/$1.ini" -n a -f 2> "$W/$1.log" &
	PIDS+=($!)
	wait_port "$p" vol0
	eval "URI_$1=nbd://127.0.0.1:$p/vol0"
}
start_tandem tandem_wb writeback
start_tandem tandem_direct none
P=$(port); nbdkit -f -p "$P" -i 127.0.0.1 file "$IMG" 2> "$W/nbdkit.log" & PIDS+=($!)
wait_port "$P" ""
# shellcheck disable=SC2034 # read through ${!u} in run_job
URI_nbdkit=nbd://127.0.0.1:$P/
P=$(port); qemu-nbd -f raw -x disk -b 127.0.0.1 -p "$P" -e 16 --persistent "$IMG" 2> "$W/qemu-nbd.log" & PIDS+=($!)
wait_port "$P" disk
# shellcheck disable=SC2034 # read through ${!u} in run_job
URI_qemu_nbd=nbd://127.0.0.1:$P/disk

read -ra SERVERS <<< "${SERVERS:-tandem_wb tandem_direct nbdkit qemu_nbd fio_buffered fio_direct}"
# JOBS="job ..." runs a subset (names as below); SERVERS likewise.
read -ra JOBS <<< "${JOBS:-randread-4k-qd1 randread-4k-qd32 randwrite-4k-qd1 randwrite-4k-qd32 seqread-1m-qd8 seqwrite-1m-qd8}"

job_args() {
	case $1 in
	randread-4k-qd1) echo "--rw=randread --bs=4k --iodepth=1" ;;
	randread-4k-qd32) echo "--rw=randread --bs=4k --iodepth=32" ;;
	randwrite-4k-qd1) echo "--rw=randwrite --bs=4k --iodepth=1" ;;
	randwrite-4k-qd32) echo "--rw=randwrite --bs=4k --iodepth=32" ;;
	seqread-1m-qd8) echo "--rw=read --bs=1M --iodepth=8" ;;
	seqwrite-1m-qd8) echo "--rw=write --bs=1M --iodepth=8" ;;
	esac
}

run_one() { # SERVER JOB -> prints IOPS
	local eng
	# Servers that read through the page cache start each run with the whole
	# file cached: an O_DIRECT run before them drops the pages it writes, and
	# the order would otherwise decide who reads from the disk.
	case $1 in
	tandem_direct | fio_direct) ;;
	*) cat "$IMG" > /dev/null ;;
	esac
	case $1 in
	fio_buffered) eng="--ioengine=io_uring --filename=$IMG --direct=0" ;;
	fio_direct) eng="--ioengine=io_uring --filename=$IMG --direct=1" ;;
	*) local u="URI_$1"; eng="--ioengine=nbd --uri=${!u}" ;;
	esac
	# fio's nbd engine prints a line before the JSON; it is skipped.
	# $eng and job_args are lists of options, split on purpose.
	# shellcheck disable=SC2046,SC2086
	fio --name=b $eng $(job_args "$2") --size=${SIZE_MB}M --time_based --runtime="$RUNTIME" \
		--ramp_time=1 --norandommap --randrepeat=0 --output-format=json 2>/dev/null |
		python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(j["read"]["iops"]+j["write"]["iops"])'
}

RES=$W/results.txt
: > "$RES"
for r in $(seq "$RUNS"); do
	for j in "${JOBS[@]}"; do
		for s in "${SERVERS[@]}"; do
			v=$(run_one "$s" "$j")
			echo "$r $j $s $v" >> "$RES"
			printf '# round %d %-18s %-14s %12.0f IOPS\n' "$r" "$j" "$s" "$v" >&2
		done
	done
done

python3 - "$RES" "${SERVERS[*]}" "${JOBS[*]}" <<'PY'
import sys, statistics, collections
res, servers, jobs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
d = collections.defaultdict(list)
for line in open(res):
    r, j, s, v = line.split()
    d[(j, s)].append(float(v))
med = {k: statistics.median(v) for k, v in d.items()}
def fmt(j, v):
    return f"{v/1000:8.1f}k" if "4k" in j else f"{v:7.0f}MB/s"
print(f"NBD benchmark: medians of {len(next(iter(d.values())))} runs (4k jobs in IOPS, 1M jobs in MiB/s)")
print(f"{'job':18s}" + "".join(f"{s:>15s}" for s in servers) +
      f"{'wb/nbdkit':>11s}{'wb/qemu-nbd':>12s}{'wb/fio-buf':>11s}{'direct/fio-dir':>15s}")
for j in jobs:
    row = f"{j:18s}" + "".join(f"{fmt(j, med[(j, s)]):>15s}" for s in servers)
    g = lambda s: med[(j, s)]
    row += f"{g('tandem_wb')/g('nbdkit'):11.2f}{g('tandem_wb')/g('qemu_nbd'):12.2f}"
    row += f"{g('tandem_wb')/g('fio_buffered'):11.2f}{g('tandem_direct')/g('fio_direct'):15.2f}"
    print(row)
PY
