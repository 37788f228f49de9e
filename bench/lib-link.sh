# shellcheck shell=bash
# Two sites joined by a shaped link, for the benchmarks that need one
# (bench/repl.sh, bench/seed-wan.sh): two network namespaces joined by a veth
# pair, tbf on both veth ends' egress (no netem on this kernel: bandwidth
# only, no added delay), a TCP goodput check of the link; and the process
# handling of those and of bench/latency-rtt.sh: long commands waited for
# so that a signal is handled at once, and the cleanup of what the script
# started. Sourced from the repository root.
#
# The script sets W (its work directory) before link_up and traps EXIT with
# bench_cleanup; every background process it starts goes into PIDS. Nothing
# here kills a process it was not given, and traffic goes only to addresses
# inside the namespaces made here.
# (W: set by the script that sources this file)
# shellcheck disable=SC2154

PIDS=()
NS_MADE=()

skip() { echo "bench: $*" >&2; exit 77; }
die() { echo "bench: $*" >&2; exit 1; }

mine() { # PID: still running and our child (so never a reused pid)
	[ "$(ps -o ppid= -p "$1" 2>/dev/null | tr -d ' ')" = "$$" ]
}

# stop_pids PID...: SIGTERM, up to 5 s to exit, then SIGKILL; reaps them.
stop_pids() {
	local p alive live=()
	for p in "$@"; do mine "$p" && live+=("$p"); done
	for p in "${live[@]}"; do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 50); do
		alive=0
		for p in "${live[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for p in "${live[@]}"; do mine "$p" && kill -9 "$p" 2>/dev/null; done
	for p in "${live[@]}"; do wait "$p" 2>/dev/null || true; done
}

# forget PID...: drops processes that were stopped or reaped from PIDS.
forget() {
	local p q keep=()
	for p in "${PIDS[@]}"; do
		for q in "$@"; do [ "$p" = "$q" ] && continue 2; done
		keep+=("$p")
	done
	PIDS=("${keep[@]}")
}

# fg_wait CMD...: runs CMD (a program, not a function) in the background and
# waits for it; returns its status. Bash runs a trap only once the
# foreground command ends, while `wait` returns at a signal: so a TERM during
# a two-minute fio ends the run at once, and the cleanup stops CMD too.
fg_wait() {
	local p rc=0
	"$@" &
	p=$!
	PIDS+=("$p")
	wait "$p" || rc=$?
	forget "$p"
	return $rc
}

bench_cleanup() {
	local p
	trap - ERR
	set +e
	stop_pids "${PIDS[@]}"
	# Deleting a namespace takes its veth end, and so its qdisc, with it.
	for p in "${NS_MADE[@]}"; do ip netns del "$p" 2>/dev/null || true; done
	rm -rf "$W"
}

# Background processes are started as `ip netns exec NS CMD &` (never through
# a shell function, which would fork a subshell): ip execs CMD, so $! is CMD.
inA() { ip netns exec "$NA" "$@"; }
inB() { ip netns exec "$NB" "$@"; }
alive_or_die() { # PID NAME LOG
	kill -0 "$1" 2>/dev/null && return 0
	echo "bench: $2 exited; its log:" >&2
	tail -n 20 "$3" >&2 || true
	exit 1
}
wait_nbd() { # NS URI PID NAME LOG
	for _ in $(seq 100); do
		ip netns exec "$1" nbdinfo --size "$2" >/dev/null 2>&1 && return 0
		alive_or_die "$3" "$4" "$5"
		sleep 0.1
	done
	die "$4: $2 did not come up (log: $(tail -n 5 "$5" | tr '\n' ' '))"
}

# link_up PREFIX NET: namespaces PREFIX-a-PID and PREFIX-b-PID (NA, NB) joined
# by a veth pair, NET.1 in A (IPA, device va) and NET.2 in B (IPB, vb).
link_up() {
	local n
	NA=$1-a-$$ NB=$1-b-$$
	IPA=$2.1 IPB=$2.2
	ip netns add "$NA"
	NS_MADE+=("$NA")
	ip netns add "$NB"
	NS_MADE+=("$NB")
	ip link add va netns "$NA" type veth peer name vb netns "$NB"
	ip -n "$NA" addr add "$IPA/24" dev va
	ip -n "$NB" addr add "$IPB/24" dev vb
	for n in "$NA" "$NB"; do ip -n "$n" link set lo up; done
	ip -n "$NA" link set va up
	ip -n "$NB" link set vb up
}

# tbf: burst at least rate/HZ (HZ=250 here) and a 64 KiB GSO packet, here
# 10 ms of the rate; limit 40 ms of the rate, at least 256 KiB. With these a
# single TCP stream gets 96-97% of the rate as goodput.
tbf_args() { # MBIT
	python3 -c 'import sys; r=int(sys.argv[1])*125000
print(f"rate {sys.argv[1]}mbit burst {max(65536, r//100)} limit {max(262144, r*4//100)}")' "$1"
}
shape() { # MBIT (0 = unshaped)
	local a
	tc -n "$NA" qdisc del dev va root 2>/dev/null || true
	tc -n "$NB" qdisc del dev vb root 2>/dev/null || true
	[ "$1" = 0 ] && return 0
	a=$(tbf_args "$1")
	# shellcheck disable=SC2086
	tc -n "$NA" qdisc add dev va root tbf $a
	# shellcheck disable=SC2086
	tc -n "$NB" qdisc add dev vb root tbf $a
}
goodput() { # -> Mbit/s of one TCP stream A -> B over 3 s
	local p
	[ -f "$W/goodput.py" ] || cat > "$W/goodput.py" <<'PY'
# TCP goodput from A to B: goodput.py recv HOST PORT  |  goodput.py send HOST PORT SECONDS
import os, socket, sys, time
if sys.argv[1] == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[2], int(sys.argv[3]))); s.listen(1); s.settimeout(30)
    c, _ = s.accept(); c.settimeout(30); n = 0; t0 = time.monotonic()
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        n += len(b)
    print(n * 8 / (time.monotonic() - t0) / 1e6)
else:
    for _ in range(100):
        try:
            c = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=30); break
        except OSError:
            time.sleep(0.05)
    buf = os.urandom(1 << 16); end = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < end:
        c.sendall(buf)
    c.close()
PY
	ip netns exec "$NB" python3 "$W/goodput.py" recv "$IPB" 5201 > "$W/goodput.out" &
	p=$!
	PIDS+=("$p")
	inA timeout 60 python3 "$W/goodput.py" send "$IPB" 5201 3
	wait "$p"
	cat "$W/goodput.out"
}

# accepts_in INI [PREFIX...]: 0 when tandemd starts as node a with INI (run
# as PREFIX tandemd ..., e.g. `ip netns exec NS`; on a fresh data directory
# $W/a, stopped again at once); 1 when it refuses INI with a configuration
# error, which is then in $W/probe.why. Any other failure ends the run.
accepts_in() {
	local ini=$1 p rc
	shift
	rm -rf "$W/a"
	"$@" "$BIN/tandemd" -c "$ini" -n a -f 2> "$W/probe.log" &
	p=$!
	PIDS+=("$p")
	for _ in $(seq 100); do
		if ! kill -0 "$p" 2>/dev/null; then
			rc=0
			wait "$p" || rc=$?
			forget "$p"
			if grep -q "^tandemd: $ini:[0-9]*: " "$W/probe.log"; then
				grep "^tandemd: $ini:[0-9]*: " "$W/probe.log" | head -n 1 |
					sed "s|^tandemd: $ini:|line |" > "$W/probe.why"
				return 1
			fi
			die "tandemd exited with $rc on $ini: $(tail -n 3 "$W/probe.log" | tr '\n' ' ')"
		fi
		if "$BIN/tandemctl" -c "$ini" -n a ping >/dev/null 2>&1; then
			stop_pids "$p"
			forget "$p"
			rm -rf "$W/a"
			return 0
		fi
		sleep 0.1
	done
	die "tandemd did not answer ping with $ini (log: $(tail -n 3 "$W/probe.log" | tr '\n' ' '))"
}
