#!/usr/bin/env bash
# Synchronous replication over a shaped link: Tandem against an anchor.
#
# Two network namespaces joined by a veth pair (10.231.42.1 in A, .2 in B)
# stand for two sites. The link is shaped with tbf on both veth ends' egress
# (no netem on this kernel: bandwidth only, no added delay; bench/lib-link.sh
# makes the link). fio (nbd engine) runs in A against:
#   tandem   a Tandem pair: tandemd node a in A (primary, NBD), node b in B,
#            volume vol0 with replication = sync
#   anchor   qemu-storage-daemon in A exporting a raw file over NBD, its writes
#            mirrored synchronously (blockdev-mirror copy-mode=write-blocking,
#            READY before any measurement) to qemu-nbd in B
#   single   a single-node Tandem volume in A (unshaped link only): the
#            baseline for "sync replication / single node"
# All backing files are sparse raw files in the work directory, opened with
# O_DIRECT and io_uring by every server (Tandem cache=none; qemu
# cache.direct=on, aio=io_uring), so the two sides of each pair do alike.
#
#   bench/repl.sh                          links 10 20 100 Mbit/s and unshaped
#   LINKS="10 0" RUNS=3 bench/repl.sh      medians of 3 runs on two links
#   ANCHOR_ONLY=1 bench/repl.sh            qemu only;  TANDEM_ONLY=1: Tandem only
#   ANCHOR_NODELAY=0 bench/repl.sh         the anchor as qemu 7.2 ships (see below)
#   TANDEM_SOLO=1 bench/repl.sh            the "tandem" volume lives on node a only
#                                          (tests this script without replication;
#                                          its numbers are then NOT replication)
#   TLS=1 TANDEM_ONLY=1 LINKS=0 RUNS=3 bench/repl.sh
#                                          a second Tandem pair ("tandemtls", nodes
#                                          in the same namespaces) with tls = on:
#                                          its replication link in TLS 1.3 (cluster
#                                          key). Every job runs on both pairs one
#                                          after the other, so that both see the
#                                          same machine; the summary adds the
#                                          ratio TLS on / TLS off per job
# Other knobs: RUNTIME (s per job, default 15), RAMP (s, default 3), SIZE_MB
# (volume size, default 1024), PREFILL=0 (skip writing each volume once before
# measuring), LINKCHECK=0 (skip the TCP goodput check of each link),
# TANDEM_TIMEOUT (s to wait for the pair to connect, default 60),
# RESULTS=DIR (keep the result lines, fio's JSON and the servers' logs there),
# TANDEM_BUILD (default build).
#
# The anchor's target connection gets TCP_NODELAY. qemu's NBD server (qemu-nbd
# and qemu-storage-daemon alike, 7.2 here) leaves Nagle on for the sockets it
# accepts, while its NBD client turns it off. A 4 KiB write is three segments,
# the last one short; with two or more writes in flight the short one waits for
# the ACK of the one before, which the other end delays by 40 ms: at 100
# Mbit/s the mirror then does ~640 IOPS at QD32 and ~45 IOPS at QD2, against
# ~2,800 with the flag. The flag is set from outside on the target's end of
# the mirror's connection once the mirror is READY (pidfd_getfd, Linux >= 5.6);
# ANCHOR_NODELAY=0 leaves qemu as it is. The front-end connection (fio to qsd
# on loopback in A) is left alone: it scales with queue depth without the flag.
#
# Jobs, the same against every target: 1 MiB sequential write QD4, 4 KiB
# random write QD1 and QD32; random data refilled for every write. MB = 10^6
# bytes; a link of R Mbit/s carries at most R/8 MB/s. Prints medians; never
# asserts timings. Exit 0 when it ran, 77 when a tool is missing, 1 when
# setting up (or a job) failed. Needs root (ip netns, tc).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib-link.sh
. bench/lib-link.sh
# shellcheck source=lib-anchor.sh
. bench/lib-anchor.sh
BIN=${TANDEM_BUILD:-build}
RUNS=${RUNS:-1}
RUNTIME=${RUNTIME:-15}
RAMP=${RAMP:-3}
SIZE_MB=${SIZE_MB:-1024}
LINKS=${LINKS:-10 20 100 0}
PREFILL=${PREFILL:-1}
LINKCHECK=${LINKCHECK:-1}
TANDEM_TIMEOUT=${TANDEM_TIMEOUT:-60}
TANDEM_ONLY=${TANDEM_ONLY:-0}
ANCHOR_ONLY=${ANCHOR_ONLY:-0}
TANDEM_SOLO=${TANDEM_SOLO:-0}
ANCHOR_NODELAY=${ANCHOR_NODELAY:-1}
TLS=${TLS:-0}

[ "$TANDEM_ONLY" = 1 ] && [ "$ANCHOR_ONLY" = 1 ] && die "TANDEM_ONLY and ANCHOR_ONLY exclude each other"
DO_TANDEM=1 DO_ANCHOR=1
[ "$ANCHOR_ONLY" = 1 ] && DO_TANDEM=0
[ "$TANDEM_ONLY" = 1 ] && DO_ANCHOR=0
for l in $LINKS; do [[ $l =~ ^[0-9]+$ ]] || die "LINKS: '$l' is not a number of Mbit/s (0 = unshaped)"; done
for v in RUNS RUNTIME RAMP SIZE_MB TANDEM_TIMEOUT; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v: '${!v}' is not a number"
	[ "${!v}" -gt 0 ] || [ "$v" = RAMP ] || die "$v must be positive"
done

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, tc)"
for c in fio ip tc python3 nbdinfo timeout; do
	command -v $c >/dev/null || skip "$c missing (scripts/deps.sh --bench)"
done
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
if [ $DO_ANCHOR = 1 ]; then
	for c in qemu-storage-daemon qemu-nbd; do
		command -v $c >/dev/null || skip "$c missing (scripts/deps.sh --bench)"
	done
fi
if [ $DO_TANDEM = 1 ]; then
	for c in tandemd tandemctl; do [ -x "$BIN/$c" ] || skip "$BIN/$c missing (run make)"; done
fi

W=$(mktemp -d /var/tmp/tandem-repl.XXXXXX)
trap bench_cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "bench: failed at line $LINENO: $BASH_COMMAND" >&2; exit 1' ERR

# ---------------------------------------------------------------- helpers
anchor_tools

# ---------------------------------------------------------------- the link
link_up tbr 10.231.42

# ---------------------------------------------------------------- servers
PORT_T=10809 PORT_Q=10810 PORT_S=10811 PORT_TT=10812
# shellcheck disable=SC2034 # (read as ${!uri} in start_tandem and run_one)
URI_tandem=nbd://$IPA:$PORT_T/vol0
# shellcheck disable=SC2034
URI_tandemtls=nbd://$IPA:$PORT_TT/vol0
URI_anchor=nbd://$IPA:$PORT_Q/vol0
URI_single=nbd://$IPA:$PORT_S/vol0

start_tandem() { # [tls]: the pair "tandem", or with tls the pair "tandemtls"
	local nodes="a b" t=tandem port=$PORT_T rport=7789 d=$W tls=off uri
	[ "$TANDEM_SOLO" = 1 ] && nodes=a
	if [ "${1:-}" = tls ]; then
		t=tandemtls port=$PORT_TT rport=7790 d=$W/tls tls=on
		mkdir -p "$d"
	fi
	cat > "$W/$t.ini" <<INI
[cluster]
name = bench-$tls
secret = bench-$$-$RANDOM
$([ $tls = on ] && echo "tls = on")

[node a]
replication = $IPA:$rport
nbd = $IPA:$port
control = $d/a.sock
data-dir = $d/a

[node b]
replication = $IPB:$rport
nbd = $IPB:$port
control = $d/b.sock
data-dir = $d/b

[volume vol0]
size = ${SIZE_MB}M
nodes = $nodes
replication = sync
INI
	ip netns exec "$NA" "$BIN/tandemd" -c "$W/$t.ini" -n a -f 2> "$W/$t-a.log" &
	PID_TA=$!
	PIDS+=("$PID_TA")
	if [ "$TANDEM_SOLO" != 1 ]; then
		ip netns exec "$NB" "$BIN/tandemd" -c "$W/$t.ini" -n b -f 2> "$W/$t-b.log" &
		PID_TB=$!
		PIDS+=("$PID_TB")
	fi
	uri="URI_$t"
	wait_nbd "$NA" "${!uri}" "$PID_TA" "tandemd a ($t)" "$W/$t-a.log"
	[ "$TANDEM_SOLO" = 1 ] && return 0
	# The pair is ready once a sees b connected and replication established.
	local st="" end=$((SECONDS + TANDEM_TIMEOUT))
	while [ $SECONDS -lt $end ]; do
		alive_or_die "$PID_TA" "tandemd a" "$W/$t-a.log"
		alive_or_die "$PID_TB" "tandemd b" "$W/$t-b.log"
		st=$(timeout 5 "$BIN/tandemctl" -c "$W/$t.ini" -n a status --json 2>&1) || true
		if python3 -c 'import json,sys
try:
    p = json.loads(sys.argv[1])["volumes"][0]["peers"][0]
except Exception:
    sys.exit(1)
sys.exit(0 if p.get("connection") == "connected" and p.get("replication") == "established" else 1)' "$st"; then
			if [ $tls = on ]; then
				grep -q 'TLS with .*TLSv1.3' "$W/$t-a.log" ||
					die "$t: the replication link is not in TLS 1.3"
				echo "note tandemtls: a second pair with tls = on, its replication link in TLS 1.3 ($(grep -o 'TLSv1.3, [A-Z0-9_]*' "$W/$t-a.log" | head -n 1)); each job runs on both pairs in turn" >> "$RES"
			fi
			return 0
		fi
		sleep 0.2
	done
	echo "bench: the Tandem pair ($t) did not reach connection=connected, replication=established" \
		"within ${TANDEM_TIMEOUT}s. Last 'tandemctl -n a status --json':" >&2
	echo "  $st" >&2
	echo "tandemd a log:" >&2; tail -n 10 "$W/$t-a.log" >&2 || true
	echo "tandemd b log:" >&2; tail -n 10 "$W/$t-b.log" >&2 || true
	exit 1
}

start_single() {
	cat > "$W/single.ini" <<INI
[cluster]
name = bench-single

[node a]
nbd = $IPA:$PORT_S
control = $W/s.sock
data-dir = $W/s

[volume vol0]
size = ${SIZE_MB}M
nodes = a
INI
	ip netns exec "$NA" "$BIN/tandemd" -c "$W/single.ini" -n a -f 2> "$W/single.log" &
	PID_S=$!
	PIDS+=("$PID_S")
	wait_nbd "$NA" "$URI_single" "$PID_S" "tandemd (single node)" "$W/single.log"
}


# ---------------------------------------------------------------- fio
JOBS=(seqwrite-1m-qd4 randwrite-4k-qd1 randwrite-4k-qd32)
job_args() {
	case $1 in
	seqwrite-1m-qd4) echo "--rw=write --bs=1M --iodepth=4" ;;
	randwrite-4k-qd1) echo "--rw=randwrite --bs=4k --iodepth=1" ;;
	randwrite-4k-qd32) echo "--rw=randwrite --bs=4k --iodepth=32" ;;
	esac
}
fio_nbd() { # URI ARGS... -> fio JSON on stdout
	local uri=$1
	shift
	# fio waits for what is in flight after the runtime: at 10 Mbit/s four
	# 1 MiB writes take 3.4 s, so the time-out leaves room.
	inA timeout -k 10 "${FIO_LIMIT:-900}" fio --name=j --ioengine=nbd --uri="$uri" \
		--size="${SIZE_MB}M" --randrepeat=0 --refill_buffers --norandommap \
		--output-format=json "$@" 2> "$W/fio.err"
}
# What a job wrote per second. fio divides the bytes of every I/O completed
# after the ramp, including the ones drained after the runtime, by the time
# to the end of the drain. With 1 MiB writes at QD4 over a 10 Mbit/s link,
# 4 MiB are in flight (3.4 s of link time), partly sent before the window
# opens, and completions can come in bunches (stock qemu completed its four
# writes as 1-2-1 every 3.5 s), so that figure and any first-to-last count
# came out 5-35% above what the link can carry. The 1 MiB job therefore logs
# each completion and its rate is the least-squares slope of bytes completed
# against time, over completions inside the runtime (those reaped within
# 50 ms of the ramp's end belong to it); on shaped links it runs long enough
# for at least 32 completions. For 4 KiB jobs the in-flight data (QD x 4 KiB)
# is a negligible part of the window, and fio's figure is used.
job_runtime() { # JOB MBIT
	if [[ $1 == seq* ]] && [ "$2" != 0 ]; then
		local need=$(((32 * 1048576 * 8 + $2 * 1000000 - 1) / ($2 * 1000000)))
		[ "$need" -gt "$RUNTIME" ] && echo "$need" && return 0
	fi
	echo "$RUNTIME"
}
run_one() { # TARGET JOB RUNTIME OUT-PREFIX -> "bytes/s iops"
	local u="URI_$1" log=() FIO_LIMIT=$(($3 + RAMP + 180))
	[[ $2 == seq* ]] && log=(--write_bw_log="$4" --log_avg_msec=0)
	# shellcheck disable=SC2046
	fio_nbd "${!u}" $(job_args "$2") --time_based --runtime="$3" --ramp_time="$RAMP" \
		"${log[@]}" > "$4.json" ||
		die "fio $2 against $1 (${!u}) failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
	python3 - "$4" "$3" <<'PY'
import json, os, sys
pre, runtime_ms = sys.argv[1], int(sys.argv[2]) * 1000
t = open(pre + ".json").read()
w = json.loads(t[t.index("{"):])["jobs"][0]["write"]  # skips the nbd engine's first line
bw, iops = w["bw_bytes"], w["iops"]
if os.path.exists(pre + "_bw.1.log"):
    ts, ys, total = [], [], 0  # completion ms after the ramp, bytes completed by then
    for line in open(pre + "_bw.1.log"):
        f = [x.strip() for x in line.split(",")]
        if 50 <= int(f[0]) <= runtime_ms:
            total += int(f[3])
            ts.append(int(f[0]))
            ys.append(total)
    if len(ts) >= 8 and ts[-1] > ts[0]:
        mt, my = sum(ts) / len(ts), sum(ys) / len(ys)
        bw = (sum((a - mt) * (b - my) for a, b in zip(ts, ys)) /
              sum((a - mt) ** 2 for a in ts) * 1000)
        iops = bw * len(ts) / total
print(bw, iops)
PY
}
prefill() { # TARGET: write the whole volume once, so no run meets unallocated blocks
	local u="URI_$1"
	echo "# prefill $1: ${SIZE_MB} MiB sequential" >&2
	fio_nbd "${!u}" --rw=write --bs=1M --iodepth=4 > /dev/null ||
		die "prefill of $1 failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
}

# ---------------------------------------------------------------- run
echo "# work dir $W, namespaces $NA $NB, link $IPA <-> $IPB" >&2
RES=$W/results.txt
: > "$RES"
TARGETS=()
if [ $DO_TANDEM = 1 ]; then
	start_tandem
	TARGETS+=(tandem)
	if [ "$TLS" = 1 ]; then
		start_tandem tls
		TARGETS+=(tandemtls)
	fi
fi
if [ $DO_ANCHOR = 1 ]; then
	start_anchor
	TARGETS+=(anchor)
fi
SINGLE=0
if [ $DO_TANDEM = 1 ] && [[ " $LINKS " == *" 0 "* ]]; then
	start_single
	SINGLE=1
fi
if [ "$PREFILL" = 1 ]; then
	for t in "${TARGETS[@]}"; do prefill "$t"; done
	[ $SINGLE = 1 ] && prefill single
fi

for r in $(seq "$RUNS"); do
	for l in $LINKS; do
		shape "$l"
		if [ "$r" = 1 ]; then
			if [ "$l" = 0 ]; then echo "link 0 qdisc none" >> "$RES"; else echo "link $l qdisc $(tbf_args "$l")" >> "$RES"; fi
			if [ "$LINKCHECK" = 1 ]; then
				g=$(goodput)
				echo "link $l goodput $g" >> "$RES"
				printf '# link %s Mbit/s: TCP goodput %.1f Mbit/s\n' "$l" "$g" >&2
			fi
		fi
		for j in "${JOBS[@]}"; do
			ts=("${TARGETS[@]}")
			[ "$l" = 0 ] && [ $SINGLE = 1 ] && ts+=(single)
			for t in "${ts[@]}"; do
				v=$(run_one "$t" "$j" "$(job_runtime "$j" "$l")" "$W/fio-r$r-l$l-$j-$t")
				echo "res $r $l $j $t $v" >> "$RES"
				read -r bw iops <<< "$v"
				printf '# run %d link %4s %-18s %-7s %9.2f MB/s %9.0f IOPS\n' \
					"$r" "$l" "$j" "$t" "$(python3 -c "print($bw/1e6)")" "$iops" >&2
			done
		done
	done
done
shape 0

# Sanity: with every write acknowledged, the replicas must be identical.
if [ $DO_ANCHOR = 1 ]; then
	python3 "$W/qmp.py" "$W/qmp.sock" check > "$W/mirror.json" ||
		echo "WARNING: anchor mirror job not READY at the end: $(cat "$W/mirror.json")" >> "$RES"
	cmp -s "$W/anchor-a.img" "$W/anchor-b.img" ||
		echo "WARNING: anchor replicas differ (anchor-a.img vs anchor-b.img): mirror not synchronous?" >> "$RES"
fi
if [ $DO_TANDEM = 1 ] && [ "$TANDEM_SOLO" != 1 ]; then
	cmp -s "$W/a/vol0.img" "$W/b/vol0.img" ||
		echo "WARNING: Tandem replicas differ (a/vol0.img vs b/vol0.img)" >> "$RES"
	if [ "$TLS" = 1 ]; then
		cmp -s "$W/tls/a/vol0.img" "$W/tls/b/vol0.img" ||
			echo "WARNING: Tandem replicas with TLS differ (tls/a vs tls/b)" >> "$RES"
	fi
fi
if [ -n "${RESULTS:-}" ]; then
	mkdir -p "$RESULTS"
	cp "$RES" "$W"/fio-* "$W"/*.log "$W"/*.ini "$RESULTS"/ 2>/dev/null || true
fi

python3 - "$RES" "$RUNTIME" "$RAMP" "$TANDEM_SOLO" "${JOBS[*]}" <<'PY'
import sys, statistics, collections
res, runtime, ramp, solo, jobs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5].split()
d = collections.defaultdict(list)
qdisc, goodput, warnings, notes, links, runs = {}, {}, [], [], [], set()
for line in open(res):
    f = line.split()
    if f[0] == "res":
        r, l, j, t, bw, iops = f[1:]
        runs.add(r)
        d[(int(l), j, t)].append((float(bw), float(iops)))
        if int(l) not in links:
            links.append(int(l))
    elif f[0] == "link" and f[2] == "qdisc":
        qdisc[int(f[1])] = " ".join(f[3:])
    elif f[0] == "link" and f[2] == "goodput":
        goodput[int(f[1])] = float(f[3])
    elif f[0] == "note":
        notes.append(" ".join(f[1:]))
    else:
        warnings.append(line.strip())
def med(l, j, t):
    v = d.get((l, j, t))
    if not v:
        return None
    return statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
def num(x, w, p=2):
    return f"{x:{w}.{p}f}" if x is not None else f"{'-':>{w}}"
def ratio(a, b):
    return a[0] / b[0] if a and b and b[0] else None
tname = "Tandem(solo!)" if solo else "Tandem"
print(f"Synchronous replication over a shaped link: {tname} pair vs qemu-storage-daemon "
      f"write-blocking mirror (anchor)")
print(f"medians of {len(runs)} run(s), {runtime} s per job (1 MiB job: >= 32 MiB on shaped links) "
      f"after {ramp} s ramp; fio nbd engine in namespace A")
print("MB = 10^6 bytes; X/link = front-end bytes/s / (link rate/8); jobs: 1 MiB seq write QD4, "
      "4 KiB random write QD1 and QD32")
for n in notes:
    print(n)
if solo:
    print("NOTE: TANDEM_SOLO=1: the 'Tandem' volume lives on node a only; these numbers are NOT replication")
for l in links:
    print()
    if l:
        g = goodput.get(l)
        gs = f"; one TCP stream: {g:.1f} Mbit/s = {g / l:.2f} of rate" if g else ""
        print(f"== link {l} Mbit/s (tbf on both veth ends: {qdisc.get(l, '?')}{gs})")
        print(f"{'job':18s}{tname + ' MB/s':>15s}{'IOPS':>9s}{'anchor MB/s':>13s}{'IOPS':>9s}"
              f"{'T/anchor':>10s}{'T/link':>8s}{'anchor/link':>13s}")
    else:
        g = goodput.get(l)
        gs = f"; one TCP stream: {g:.0f} Mbit/s" if g else ""
        print(f"== link unshaped (veth, no qdisc{gs})")
        print(f"{'job':18s}{tname + ' MB/s':>15s}{'IOPS':>9s}{'anchor MB/s':>13s}{'IOPS':>9s}"
              f"{'single MB/s':>13s}{'IOPS':>9s}{'T/anchor':>10s}{'T/single':>10s}")
    for j in jobs:
        t, a, s = med(l, j, "tandem"), med(l, j, "anchor"), med(l, j, "single")
        row = (f"{j:18s}{num(t and t[0] / 1e6, 15)}{num(t and t[1], 9, 0)}"
               f"{num(a and a[0] / 1e6, 13)}{num(a and a[1], 9, 0)}")
        if l:
            link = l * 1e6 / 8
            row += (f"{num(ratio(t, a), 10)}{num(t and t[0] / link, 8)}"
                    f"{num(a and a[0] / link, 13)}")
        else:
            row += (f"{num(s and s[0] / 1e6, 13)}{num(s and s[1], 9, 0)}"
                    f"{num(ratio(t, a), 10)}{num(ratio(t, s), 10)}")
        print(row)
if any(k[2] == "tandemtls" for k in d):
    print()
    print("== TLS: the same jobs on a second pair with tls = on, run right after the pair without")
    print(f"{'link':>6s} {'job':18s}{'TLS off MB/s':>14s}{'TLS on MB/s':>13s}{'on/off':>8s}"
          f"{'median run':>12s}{'per run on/off':>24s}")
    for l in links:
        for j in jobs:
            off, on = med(l, j, "tandem"), med(l, j, "tandemtls")
            per = [b[0] / a[0] for a, b in zip(d.get((l, j, "tandem"), []),
                                                d.get((l, j, "tandemtls"), [])) if a[0]]
            print(f"{l if l else 'none':>6} {j:18s}{num(off and off[0] / 1e6, 14)}"
                  f"{num(on and on[0] / 1e6, 13)}{num(ratio(on, off), 8)}"
                  f"{num(statistics.median(per) if per else None, 12)}"
                  f"{' '.join('%.2f' % x for x in per):>24s}")
for w in warnings:
    print(w)
PY
