#!/usr/bin/env bash
# Write latency against the round trip between the sites: the second field
# report measured a vSAN stretched cluster at 2 ms write latency with 1 ms
# RTT and 10 ms with 4 ms RTT. A synchronous write cannot complete before one
# round trip to the peer; an asynchronous one should not see the round trip.
#
# A Tandem pair on loopback (no namespaces): node a (primary, NBD) dials b's
# replication-advertise address, which is the link proxy
# (tests/tools/linkproxy.py) in front of b's replication port, as
# tests/integration/lib2.sh does with PROXY=1. `delay MS` on the proxy delays
# each direction by MS, so RTT = 2 x MS. fio's nbd engine writes 4 KiB at
# random offsets (random data) to a, time-based (RUNTIME s after RAMP s), at
# QD1 and QD16, for each mode (sync, async) at each RTT (RTTS, ms). Reported:
# p50 and p99 completion latency (fio's clat), IOPS, the round trip's floor
# (the RTT itself) and the vSAN figures beside.
#
# The proxy is Python and adds latency of its own, so two more figures: per
# mode, the same jobs with a dialing b directly at 0 ms (PROXY_CHECK=0 skips
# that), against the proxy at 0 ms; and at each RTT, with the pair idle, the
# round trip of a 4 KiB ping-pong through a second proxy with the same delay
# ("proxy RTT"). The proxy's timers wake on a timerfd and poll for the
# last 0.3 ms, so a delay comes out within about 0.1 ms per direction of
# what was set; "proxy RTT" shows what each setting gave.
#
# Every pair starts on fresh data and the whole volume is written once
# before it is measured (PREFILL=0 skips that), so no job meets first-write
# costs. In async mode, each job starts with the backlog drained.
#
#   bench/latency-rtt.sh                       RTTS "0 1 2 4 8", 15 s per job
#   RTTS="0 2" RUNTIME=5 bench/latency-rtt.sh  a quick look
#
# Knobs: MODES (default "sync async"), RTTS (ms, may be fractional), QDS
# (default "1 16"), RUNTIME (default 15), RAMP (default 3), RUNS (medians of
# N, default 1), SIZE_MB (volume size, default 256), ASYNC_BACKLOG (default
# 1G: no job fills it), COMPRESSION=none|lz4|zstd and TLS=on|off (default
# none and off; set and refused by this tandemd, the cells are skipped with a
# note), PROXY_CHECK, PREFILL, DRAIN_MAX (s to wait for the peer to have
# everything before each job, default 120), RESULTS=DIR (keep the result
# lines, fio's JSON and the logs there), TANDEM_BUILD (default build).
#
# Prints medians; never asserts timings. Exit 0 when it ran, 77 when a tool
# is missing, 1 when setting up (or a job) failed. Sends traffic only to
# 127.0.0.1.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# (skip, die and the process handling; no namespaces here)
# shellcheck source=lib-link.sh
. bench/lib-link.sh
BIN=${TANDEM_BUILD:-build}
MODES=${MODES:-sync async}
RTTS=${RTTS:-0 1 2 4 8}
QDS=${QDS:-1 16}
RUNTIME=${RUNTIME:-15}
RAMP=${RAMP:-3}
RUNS=${RUNS:-1}
SIZE_MB=${SIZE_MB:-256}
ASYNC_BACKLOG=${ASYNC_BACKLOG:-1G}
COMPRESSION=${COMPRESSION:-none}
TLS=${TLS:-off}
PROXY_CHECK=${PROXY_CHECK:-1}
PREFILL=${PREFILL:-1}
DRAIN_MAX=${DRAIN_MAX:-120}

for m in $MODES; do case $m in sync | async) ;; *) die "MODES: unknown mode '$m'" ;; esac; done
for x in $RTTS; do [[ $x =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "RTTS: '$x' is not a number of ms"; done
for q in $QDS; do [[ $q =~ ^[1-9][0-9]*$ ]] || die "QDS: '$q' is not a queue depth"; done
for v in RUNTIME RUNS SIZE_MB DRAIN_MAX; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v: '${!v}' is not a positive number"
done
[[ $RAMP =~ ^[0-9]+$ ]] || die "RAMP: '$RAMP' is not a number"
[[ $ASYNC_BACKLOG =~ ^[0-9]+[KMGT]?$ ]] || die "ASYNC_BACKLOG: '$ASYNC_BACKLOG' is not a size"
case $COMPRESSION in none | lz4 | zstd) ;; *) die "COMPRESSION: '$COMPRESSION' is not none, lz4 or zstd" ;; esac
case $TLS in on | off) ;; *) die "TLS: '$TLS' is not on or off" ;; esac

for c in fio python3 timeout; do
	command -v $c >/dev/null || skip "$c missing (scripts/deps.sh --bench)"
done
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
for c in tandemd tandemctl; do [ -x "$BIN/$c" ] || skip "$BIN/$c missing (run make)"; done

W=$(mktemp -d /var/tmp/tandem-lat.XXXXXX)
trap bench_cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "bench: failed at line $LINENO: $BASH_COMMAND" >&2; exit 1' ERR
RES=$W/results.txt
: > "$RES"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ports() { NBD_A=$(port) REP_A=$(port) REP_B=$(port) NBD_B=$(port) PXP=$(port) ECHO=$(port) PRP=$(port); }
ports
while [ "$(printf '%s\n' "$NBD_A" "$REP_A" "$REP_B" "$NBD_B" "$PXP" "$ECHO" "$PRP" | sort -u | wc -l)" != 7 ]; do
	ports
done
URI=nbd://127.0.0.1:$NBD_A/vol0

# write_pair MODE PROXIED(0|1) [FILE]: the pair's configuration.
write_pair() {
	{
		echo "[cluster]"
		echo "name = lat"
		echo "secret = lat-$$-$RANDOM"
		[ "$TLS" = on ] && echo "tls = on"
		[ "$COMPRESSION" != none ] && echo "compression = $COMPRESSION"
		echo
		echo "[node a]"
		echo "replication = 127.0.0.1:$REP_A"
		echo "nbd = 127.0.0.1:$NBD_A"
		echo "control = $W/a.sock"
		echo "data-dir = $W/a"
		echo
		echo "[node b]"
		echo "replication = 127.0.0.1:$REP_B"
		# a dials b (its name sorts first): through the proxy
		[ "$2" = 1 ] && echo "replication-advertise = 127.0.0.1:$PXP"
		echo "nbd = 127.0.0.1:$NBD_B"
		echo "control = $W/b.sock"
		echo "data-dir = $W/b"
		echo
		echo "[volume vol0]"
		echo "size = ${SIZE_MB}M"
		echo "nodes = a b"
		echo "replication = $1"
		if [ "$1" = async ]; then echo "async-backlog = $ASYNC_BACKLOG"; fi
	} > "${3:-$W/pair.ini}"
}
ctl() { local n=$1; shift; timeout 60 "$BIN/tandemctl" -c "$W/pair.ini" -n "$n" "$@"; }
# st EXPR: EXPR on a's status of vol0 (v: the volume, p: its peer); "" when
# the status cannot be read.
st() {
	local j
	j=$(ctl a status vol0 --json 2>/dev/null) || true
	python3 -c 'import json, sys
try:
    v = json.loads(sys.argv[1])["volumes"][0]
    p = v["peers"][0]
    print(eval(sys.argv[2]))
except Exception:
    pass' "$j" "$1"
}

# accepts INI: see accepts_in in bench/lib-link.sh (node a on loopback).
accepts() { accepts_in "$1"; }

# Two link proxies with the same delay: px in front of b's replication port,
# and pr in front of an echo server (rttprobe.py), through which a 4 KiB
# ping-pong measures the round trip a proxy really gives at each setting
# (the proxy's timers are not exact: it shows in this figure).
cat > "$W/rttprobe.py" <<'PY'
# rttprobe.py server PORT | client PORT SECONDS: 4 KiB + 32 B out, 24 B back,
# one at a time; the client prints the p50 and p99 round trip in ms.
import socket, statistics, sys, time
s = socket.socket()
if sys.argv[1] == "server":
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[2]))); s.listen(4)
    print("ready", flush=True)
    while True:
        c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            got = 0
            while got < 4128:
                b = c.recv(4128 - got)
                if not b:
                    break
                got += len(b)
            if got < 4128:
                break
            c.sendall(b"a" * 24)
        c.close()
c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg, lat, end = b"w" * 4128, [], time.monotonic() + float(sys.argv[3])
while time.monotonic() < end or len(lat) < 50:
    t = time.perf_counter()
    c.sendall(msg)
    got = 0
    while got < 24:
        got += len(c.recv(24 - got))
    lat.append((time.perf_counter() - t) * 1e3)
lat.sort()
print(f"{statistics.median(lat):.3f} {lat[int(len(lat) * 0.99)]:.3f}")
PY
proxy_start() { # NAME LISTEN-PORT TARGET-PORT
	python3 tests/tools/linkproxy.py --listen "127.0.0.1:$2" --target "127.0.0.1:$3" \
		--control "$W/$1.sock" > "$W/$1.out" 2>> "$W/$1.log" &
	PIDS+=("$!")
	for _ in $(seq 100); do grep -q ready "$W/$1.out" 2>/dev/null && return 0; sleep 0.05; done
	die "link proxy $1 did not start: $(tail -n 3 "$W/$1.log" | tr '\n' ' ')"
}
proxy() { # NAME COMMAND...
	python3 tests/tools/linkproxy.py --control "$W/$1.sock" --cmd "${*:2}" > /dev/null
}

PID_A="" PID_B=""
# start_pair MODE PROXIED LABEL: fresh data, both nodes, until a is primary
# with b connected and replication established; then the prefill.
start_pair() {
	local end p
	rm -rf "$W/a" "$W/b"
	write_pair "$1" "$2"
	echo "=== $3" >> "$W/a.log"
	echo "=== $3" >> "$W/b.log"
	"$BIN/tandemd" -c "$W/pair.ini" -n a -f 2>> "$W/a.log" &
	PID_A=$!
	PIDS+=("$PID_A")
	"$BIN/tandemd" -c "$W/pair.ini" -n b -f 2>> "$W/b.log" &
	PID_B=$!
	PIDS+=("$PID_B")
	end=$((SECONDS + 60))
	while [ "$(st "v['role'] == 'primary' and p['connection'] == 'connected' and p['replication'] == 'established'")" != True ]; do
		for p in "$PID_A" "$PID_B"; do
			kill -0 "$p" 2>/dev/null || die "$3: a tandemd exited (logs: $(tail -n 3 "$W/a.log" "$W/b.log" | tr '\n' ' '))"
		done
		[ $SECONDS -lt $end ] || die "$3: the pair did not connect with a primary within 60 s"
		sleep 0.2
	done
	if [ "$PREFILL" = 1 ]; then
		echo "# $3: prefill ${SIZE_MB} MiB" >&2
		fg_wait timeout -k 10 600 fio --name=prefill --ioengine=nbd --uri="$URI" --rw=write \
			--bs=1M --iodepth=4 --size="${SIZE_MB}M" --refill_buffers --output-format=json \
			> /dev/null 2> "$W/fio.err" || die "prefill failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
	fi
}
stop_pair() {
	stop_pids "$PID_A" "$PID_B"
	forget "$PID_A" "$PID_B"
	rm -rf "$W/a" "$W/b"
}

# drained: until the peer has everything (wait-sync and an empty backlog),
# at most DRAIN_MAX s; 1 if not.
drained() {
	local end=$((SECONDS + DRAIN_MAX))
	while [ $SECONDS -lt $end ]; do
		if fg_wait timeout $((end - SECONDS + 30)) "$BIN/tandemctl" -c "$W/pair.ini" -n a \
			wait-sync vol0 --timeout $((end - SECONDS)) > /dev/null 2>&1 &&
			[ "$(st "p.get('backlog_bytes', 0) == 0 and p['out_of_sync_bytes'] == 0")" = True ]; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# job RUN MODE PATH RTT QD: one fio job; appends its "res" line.
job() {
	local out=$W/fio-r$1-$2-$3-rtt$4-qd$5.json v p50 p99 iops
	if ! drained; then
		echo "note run $1 $2 $3 rtt $4: the peer was not in sync within $DRAIN_MAX s before QD$5" >> "$RES"
	fi
	fg_wait timeout -k 10 $((RUNTIME + RAMP + 120)) fio --name=lat --ioengine=nbd --uri="$URI" \
		--rw=randwrite --bs=4k --iodepth="$5" --size="${SIZE_MB}M" --randrepeat=0 \
		--norandommap --refill_buffers --time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
		--output-format=json > "$out" 2> "$W/fio.err" ||
		die "fio $2 $3 rtt $4 QD$5 failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
	v=$(python3 - "$out" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
w = json.loads(t[t.index("{"):])["jobs"][0]["write"]  # skips the nbd engine's first line
p = w["clat_ns"]["percentile"]
print(p["50.000000"] / 1e6, p["99.000000"] / 1e6, w["iops"])
PY
)
	echo "res $1 $2 $3 $4 $5 $v" >> "$RES"
	read -r p50 p99 iops <<< "$v"
	printf '# run %s %-5s %-6s rtt %4s ms QD%-3s p50 %7.3f ms  p99 %7.3f ms  %8.0f IOPS\n' \
		"$1" "$2" "$3" "$4" "$5" "$p50" "$p99" "$iops" >&2
}

# ---------------------------------------------------------------- run
echo "# work dir $W; a nbd $NBD_A repl $REP_A; b repl $REP_B behind the proxy on $PXP" >&2
declare -A MODE_SKIP=()
for m in $MODES; do
	write_pair "$m" 1 "$W/probe.ini"
	accepts "$W/probe.ini" && continue
	MODE_SKIP[$m]="this tandemd refuses the configuration (COMPRESSION=$COMPRESSION TLS=$TLS): $(cat "$W/probe.why")"
	echo "note $m: ${MODE_SKIP[$m]}; not measured" >> "$RES"
done
echo "note settings: compression $COMPRESSION, tls $TLS, async-backlog $ASYNC_BACKLOG" >> "$RES"
proxy_start px "$PXP" "$REP_B"
python3 "$W/rttprobe.py" server "$ECHO" > "$W/echo.out" 2> "$W/echo.log" &
PIDS+=("$!")
for _ in $(seq 100); do grep -q ready "$W/echo.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$W/echo.out" || die "the echo server did not start: $(tail -n 3 "$W/echo.log" | tr '\n' ' ')"
proxy_start pr "$PRP" "$ECHO"
for r in $(seq "$RUNS"); do
	for m in $MODES; do
		[ -z "${MODE_SKIP[$m]:-}" ] || continue
		if [ "$PROXY_CHECK" = 1 ]; then
			start_pair "$m" 0 "run $r $m direct"
			for q in $QDS; do job "$r" "$m" direct 0 "$q"; done
			stop_pair
		fi
		start_pair "$m" 1 "run $r $m proxy"
		for x in $RTTS; do
			d=$(python3 -c 'import sys; print(float(sys.argv[1]) / 2)' "$x")
			proxy px delay "$d"
			proxy pr delay "$d"
			# with the pair idle: what the proxy gives for this RTT
			echo "probe $r $m $x $(timeout 120 python3 "$W/rttprobe.py" client "$PRP" 2)" >> "$RES"
			for q in $QDS; do job "$r" "$m" proxy "$x" "$q"; done
		done
		proxy px delay 0
		proxy pr delay 0
		stop_pair
	done
done
if [ -n "${RESULTS:-}" ]; then
	mkdir -p "$RESULTS"
	cp "$RES" "$W"/fio-* "$W"/*.log "$W"/pair.ini "$RESULTS"/ 2>/dev/null || true
fi

python3 - "$RES" "$RUNTIME" "$RAMP" "$MODES" "$RTTS" "$QDS" <<'PY'
import collections, statistics, sys
res, runtime, ramp = sys.argv[1], sys.argv[2], sys.argv[3]
modes, rtts, qds = sys.argv[4].split(), sys.argv[5].split(), sys.argv[6].split()
d, probe = collections.defaultdict(list), collections.defaultdict(list)
notes = []
for line in open(res):
    f = line.split()
    if f[0] == "res":
        r, m, path, rtt, qd, p50, p99, iops = f[1:]
        d[(m, path, float(rtt), int(qd))].append((float(p50), float(p99), float(iops)))
    elif f[0] == "probe" and len(f) == 6:
        probe[(f[2], float(f[3]))].append(float(f[4]))
    elif f[0] == "note":
        notes.append(" ".join(f[1:]))
runs = max((len(v) for v in d.values()), default=0)
def med(m, path, rtt, qd):
    v = d.get((m, path, float(rtt), int(qd)))
    if not v:
        return None
    return tuple(statistics.median(x[i] for x in v) for i in range(3))
def prtt(m, rtt):
    v = probe.get((m, float(rtt)))
    return statistics.median(v) if v else None
vsan = {1.0: "2 ms", 4.0: "10 ms"}
print("Write latency against the round trip: 4 KiB random writes (fio nbd engine) to node a; "
      "a's replication link to b through the link proxy, RTT = 2 x its one-way delay")
print(f"medians of {runs} run(s), {runtime} s per job after {ramp} s ramp; latency = fio's "
      "completion latency (clat) in ms")
print("floor = one round trip (the RTT set); proxy RTT = p50 of a 4 KiB ping-pong through a second "
      "proxy with the same delay, pair idle (what the Python proxy really gives)")
print("the field report (vSAN stretched cluster): 2 ms write latency at 1 ms RTT, 10 ms at 4 ms RTT")
for n in notes:
    print(n)
own = {}
for m in modes:
    rows = [x for x in rtts if any(med(m, "proxy", x, q) for q in qds)]
    if not rows:
        continue
    print()
    print(f"== {m}")
    head = f"{'RTT ms':>7s}{'floor':>7s}{'proxy RTT':>11s}"
    for q in qds:
        head += f"{'QD' + q + ' p50':>11s}{'p99':>9s}{'IOPS':>9s}"
    head += f"{'vSAN':>7s}"
    print(head)
    for x in rows:
        pr = prtt(m, x)
        line = f"{float(x):7g}{float(x):7.2f}" + (f"{pr:11.3f}" if pr is not None else f"{'-':>11s}")
        for q in qds:
            v = med(m, "proxy", x, q)
            line += f"{v[0]:11.3f}{v[1]:9.3f}{v[2]:9.0f}" if v else f"{'-':>11s}{'-':>9s}{'-':>9s}"
        print(line + f"{vsan.get(float(x), ''):>7s}")
    for q in qds:
        a, b = med(m, "direct", 0, q), med(m, "proxy", 0, q)
        if a and b:
            own[(m, int(q))] = b[0] - a[0]
            print(f"   the proxy's own latency, QD{q} p50 at 0 ms: direct {a[0]:.3f} ms, through the "
                  f"proxy {b[0]:.3f} ms: {b[0] - a[0]:+.3f} ms (p99 {a[1]:.3f} -> {b[1]:.3f} ms, "
                  f"IOPS {a[2]:.0f} -> {b[2]:.0f})")

print()
print("Acceptance (printed, never asserted):")
if any(med("sync", "proxy", x, 1) for x in rtts):
    for x in rtts:
        v = med("sync", "proxy", x, 1)
        if not v:
            continue
        goal = float(x) + 0.5
        pr = prtt("sync", x)
        extra = (f"; above the proxy's measured round trip ({pr:.3f} ms): {v[0] - pr:+.3f} ms "
                 f"{'met' if v[0] - pr <= 0.5 else 'NOT met'}") if pr is not None else ""
        print(f"  sync QD1 p50 at {float(x):g} ms RTT: {v[0]:.3f} ms   goal <= RTT + 0.5 = {goal:.1f} ms: "
              f"{'met' if v[0] <= goal else 'NOT met'}{extra}")
else:
    print("  sync QD1: not measured")
for q in qds:
    vals = [(x, med("async", "proxy", x, q)) for x in rtts]
    vals = [(x, v) for x, v in vals if v]
    if not vals:
        print(f"  async QD{q}: not measured")
        continue
    p50s = [v[0] for _, v in vals]
    spread = max(p50s) - min(p50s)
    print(f"  async QD{q} p50 by RTT: " + ", ".join(f"{float(x):g} ms: {v[0]:.3f}" for x, v in vals) +
          f"; spread {spread:.3f} ms ({100 * spread / statistics.median(p50s):.0f}% of the median)"
          " (goal: no dependence on RTT)")
PY
