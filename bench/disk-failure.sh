#!/usr/bin/env bash
# A failed disk under load: the primary's store starts failing every write
# (`tandemctl inject`, as a disk that dies) while a client keeps working; the
# primary serves through its peer (diskless); after DISKLESS s a new disk is
# attached and filled in the background. What the client saw each second,
# and how long until both replicas are whole again. The second field
# report's disk-failure case (VMware's vSAN resiliency study: a failed disk
# cost 10% of TPS and 160 s to recover).
#
# Two network namespaces joined by a veth pair (10.231.45.1 in A, .2 in B;
# bench/lib-link.sh), shaped to LINK Mbit/s (default 0: unshaped). Node a
# (primary, NBD, fault-injection = on) in A, node b in B, one volume of
# SIZE_MB MiB with replication = sync, written once in full first. fio (nbd
# engine) in A: 4 KiB random reads and writes, 70/30, QD8, random data, for
# RUNTIME s, with its IOPS logged per second. At t = BEFORE s a's disk
# fails; DISKLESS s after a is diskless, `tandemctl attach vol0 --disk NEW`;
# a's status is sampled until its disk is up to date and its peer in sync.
#
#   bench/disk-failure.sh
#   LINK=1000 DISKLESS=20 RUNTIME=120 bench/disk-failure.sh
#
# Prints the IOPS of each second (reads + writes), the median of each phase
# (before, diskless, filling the new disk, after) against the median before
# it, the worst second, whether fio saw any error, and the time from attach
# to full redundancy with the rate it copied at, beside vSAN's figures.
# MB = 10^6 bytes. Never asserts timings. Exit 0 when it ran, 77 when a tool
# is missing, 1 when setting up failed. Needs root.
# Knobs: LINK, SIZE_MB (default 1024), BEFORE (default 10), DISKLESS
# (default 20), RUNTIME (default 90: must outlast the fill), RESULTS=DIR
# (keep fio's logs and the daemons' logs), TANDEM_BUILD (default build).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib-link.sh
. bench/lib-link.sh
BIN=${TANDEM_BUILD:-build}
LINK=${LINK:-0}
SIZE_MB=${SIZE_MB:-1024}
BEFORE=${BEFORE:-10}
DISKLESS=${DISKLESS:-20}
RUNTIME=${RUNTIME:-90}
for v in LINK SIZE_MB BEFORE DISKLESS RUNTIME; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v: '${!v}' is not a number"
done
[ $((BEFORE + DISKLESS)) -lt "$RUNTIME" ] || die "RUNTIME ($RUNTIME) must be longer than BEFORE + DISKLESS"
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, tc)"
for c in fio ip tc python3 nbdinfo timeout; do
	command -v $c >/dev/null || skip "$c missing (scripts/deps.sh --bench)"
done
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
for c in tandemd tandemctl; do [ -x "$BIN/$c" ] || skip "$BIN/$c missing (run make)"; done

W=$(mktemp -d /var/tmp/tandem-diskfail.XXXXXX)
trap bench_cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "bench: failed at line $LINENO: $BASH_COMMAND" >&2; exit 1' ERR

link_up tdf 10.231.45
shape "$LINK"
PORT=10809
URI=nbd://$IPA:$PORT/vol0
cat > "$W/pair.ini" <<INI
[cluster]
name = diskfail
secret = diskfail-$$-$RANDOM

[node a]
replication = $IPA:7789
nbd = $IPA:$PORT
control = $W/a.sock
data-dir = $W/a
fault-injection = on

[node b]
replication = $IPB:7789
nbd = $IPB:$PORT
control = $W/b.sock
data-dir = $W/b

[volume vol0]
size = ${SIZE_MB}M
nodes = a b
replication = sync
INI
chmod 600 "$W/pair.ini"

status_json() { timeout 10 "$BIN/tandemctl" -c "$W/pair.ini" -n a status vol0 --json 2>/dev/null || true; }
whole() { # prints True when a's disk and its peer are up to date and established
	python3 -c 'import json, sys
try:
    v = json.loads(sys.argv[1])["volumes"][0]
    p = v["peers"][0]
    print(v["disk"] == "uptodate" and p["connection"] == "connected"
          and p["replication"] == "established" and p["disk"] == "uptodate")
except Exception:
    print(False)' "$1"
}
disk_is() { # STATE: prints True when a's disk is STATE
	python3 -c 'import json, sys
try:
    print(json.loads(sys.argv[1])["volumes"][0]["disk"] == sys.argv[2])
except Exception:
    print(False)' "$1" "$2"
}
start_b() {
	ip netns exec "$NB" "$BIN/tandemd" -c "$W/pair.ini" -n b -f 2>> "$W/tandem-b.log" &
	PID_B=$!
	PIDS+=("$PID_B")
}
wait_whole() { # SECONDS: until whole; sets WHOLE_AT (epoch s, "" if never)
	local end=$((SECONDS + $1))
	WHOLE_AT=""
	while [ $SECONDS -lt $end ]; do
		if [ "$(whole "$(status_json)")" = True ]; then
			WHOLE_AT=$EPOCHREALTIME
			return 0
		fi
		sleep 0.2
	done
}

echo "# work dir $W, namespaces $NA $NB, link ${LINK:-0} Mbit/s (0 = unshaped)" >&2
ip netns exec "$NA" "$BIN/tandemd" -c "$W/pair.ini" -n a -f 2>> "$W/tandem-a.log" &
PID_A=$!
PIDS+=("$PID_A")
start_b
wait_nbd "$NA" "$URI" "$PID_A" "tandemd a" "$W/tandem-a.log"
wait_whole 60
[ -n "$WHOLE_AT" ] || die "the pair did not connect and sync within 60 s: $(status_json)"

echo "# writing the volume once (${SIZE_MB} MiB)" >&2
fg_wait ip netns exec "$NA" fio --name=prefill --ioengine=nbd --uri="$URI" --rw=write --bs=1M \
	--iodepth=4 --size="${SIZE_MB}M" --refill_buffers --output="$W/prefill.out" >/dev/null
wait_whole 120
[ -n "$WHOLE_AT" ] || die "not in sync after the prefill: $(status_json)"
sync
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true

echo "# fio 4k randrw 70/30 QD8 for ${RUNTIME} s; a's disk fails at ${BEFORE} s, a new one ${DISKLESS} s later" >&2
T0=$EPOCHREALTIME
ip netns exec "$NA" fio --name=load --ioengine=nbd --uri="$URI" --rw=randrw --rwmixread=70 \
	--bs=4k --iodepth=8 --size="${SIZE_MB}M" --time_based --runtime="$RUNTIME" --refill_buffers \
	--write_iops_log="$W/load" --log_avg_msec=1000 --output-format=json \
	--output="$W/fio.json" > /dev/null 2> "$W/fio.err" &
FIO=$!
PIDS+=("$FIO")
sleep "$BEFORE"
T_FAIL=$EPOCHREALTIME
"$BIN/tandemctl" -c "$W/pair.ini" -n a inject vol0 write >/dev/null || die "inject refused"
end=$((SECONDS + 30))
until [ "$(disk_is "$(status_json)" diskless)" = True ]; do
	[ $SECONDS -lt $end ] || die "a did not go diskless: $(status_json)"
	sleep 0.1
done
T_DISKLESS=$EPOCHREALTIME
sleep "$DISKLESS"
T_ATTACH=$EPOCHREALTIME
"$BIN/tandemctl" -c "$W/pair.ini" -n a attach vol0 --disk "$W/a/new.img" >/dev/null || die "attach refused"
wait_whole $((RUNTIME + 600))
T_WHOLE=$WHOLE_AT
wait "$FIO" || die "fio failed: $(tail -n 3 "$W/fio.err")"
forget "$FIO"
if [ -n "${RESULTS:-}" ]; then
	mkdir -p "$RESULTS"
	cp "$W"/load_iops.*.log "$W"/fio.json "$W"/tandem-*.log "$W/pair.ini" "$RESULTS"/ 2>/dev/null || true
fi

python3 - "$W" "$T0" "$T_FAIL" "$T_DISKLESS" "$T_ATTACH" "${T_WHOLE:-}" "$LINK" "$SIZE_MB" <<'PY'
import glob, json, statistics, sys
w, t0, tf, td, ta, tw, link, size_mb = sys.argv[1:]
t0, tf, td, ta = float(t0), float(tf), float(td), float(ta)
tw = float(tw) if tw else None
per = {}
for f in glob.glob(f"{w}/load_iops.*.log"):
    for line in open(f):
        ms, v = line.split(",")[:2]
        s = int(ms) // 1000
        per[s] = per.get(s, 0) + int(v)  # reads and writes, each direction's file
secs = sorted(per)
def phase(a, b):
    return [per[s] for s in secs if a <= s + 0.5 < b]
rel = lambda t: t - t0
before = phase(0, rel(tf))
diskless = phase(rel(tf), rel(ta))
fill = phase(rel(ta), rel(tw)) if tw else phase(rel(ta), 1e9)
after = phase(rel(tw), 1e9) if tw else []
base = statistics.median(before) if before else 0
j = json.load(open(f"{w}/fio.json"))["jobs"][0]
print(f"A failed disk under load: fio 4k randrw 70/30 QD8 on a; a's disk fails at {rel(tf):.1f} s "
      f"(diskless {td - tf:.2f} s later), new disk attached at {rel(ta):.1f} s; "
      f"link {'unshaped' if link == '0' else link + ' Mbit/s'}")
print(f"fio: error {j['error']}, {j['read']['total_ios']} reads, {j['write']['total_ios']} writes")
print("IOPS per second (reads + writes):")
row = []
for s in secs:
    mark = ""
    if int(rel(tf)) == s: mark = "<fails"
    if int(rel(ta)) == s: mark = "<attach"
    if tw and int(rel(tw)) == s: mark = "<whole"
    row.append(f"{s:3d}s {per[s]:6d} {mark:8s}")
for i in range(0, len(row), 4):
    print("  " + "  ".join(row[i:i + 4]))
def line(name, v):
    if not v:
        return f"  {name:28s} -"
    m = statistics.median(v)
    return (f"  {name:28s} median {m:8.0f} IOPS  {m / base:5.2f} of before  "
            f"(worst second {min(v):.0f}, {min(v) / base:.2f})")
print(line("before", before))
print(line("diskless (through b)", diskless))
print(line("new disk filling", fill))
print(line("after, whole", after))
allv = diskless + fill
if allv and base:
    print(f"  dip: worst second {min(allv) / base - 1:+.0%}, median while not whole "
          f"{statistics.median(allv) / base - 1:+.0%} (vSAN, a failed disk: -10% of TPS)")
if tw:
    mb = int(size_mb) * 1048576 / 1e6
    print(f"  full redundancy {tw - ta:.1f} s after attach ({mb / (tw - ta):.0f} MB/s for "
          f"{size_mb} MiB), {tw - tf:.1f} s after the failure (vSAN: 160 s)")
else:
    print("  NOT whole again within the wait")
PY
