#!/usr/bin/env bash
# Self-test of the link proxy (tests/tools/linkproxy.py): a proxy on
# loopback in front of a sink/source (tests/tools/linkproxy-peer.py, which
# also drives each check from the near end and prints its figures).
#   tests/tools/test-linkproxy.sh
# Checks, in about 25 s:
#   - start-up options are applied (--rate ...), a bad one ends the proxy;
#   - unshaped throughput (1 GiB; printed, not checked: LINKPROXY_TEST_MIB);
#   - rate: 10mbit one way and 50mbit the other at once, then swapped, each
#     carried within +-10 % over 3 s (a run short of the rate, nothing
#     else wrong, runs once more: a loaded machine); while the senders
#     push as fast as they can, the bytes queued in the proxy stay below
#     queue + one read, and
#     the near sender is held back (its socket takes at most the kernel's
#     buffers more than has arrived) instead of the proxy's memory growing;
#   - delay 20 + jitter 10: round trips within [40, 60] ms (+ 15 ms for
#     scheduling), not all alike; small writes 0.25 ms apart arrive in order;
#   - loss 5 (rto 100): the bytes arrive unchanged, slowed by the stalls;
#   - corrupt ab|ba 1: exactly one byte changed (XOR 0x01);
#   - capture ab|ba: the file holds exactly the bytes forwarded; capture off
#     stops it;
#   - bad commands are refused; SIGTERM ends the proxy with status 0.
# Exits 0 when all pass, 1 otherwise. Ports: LINKPROXY_TEST_PORTS="PROXY
# TARGET" (tests/integration/015-linkproxy.sh passes ports it claimed),
# else two that are free now. Cleans up the processes it started, by pid.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
LP=$here/linkproxy.py
PEER=$here/linkproxy-peer.py
dir=$(mktemp -d "${TMPDIR:-/tmp}/linkproxy-test.XXXXXX")
pids=()
proxy_pid=

cleanup()
{
	local rc=$? p
	set +e
	trap - EXIT
	trap '' TERM INT
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null
	done
	if [ "$rc" -ne 0 ] && [ -s "$dir/proxy.log" ]; then
		echo "--- proxy log ---" >&2
		tail -n 20 "$dir/proxy.log" >&2
	fi
	rm -rf "$dir"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

say() { printf 'test-linkproxy: %s\n' "$*"; }
fail()
{
	printf 'FAIL: test-linkproxy: %s\n' "$*" >&2
	exit 1
}

if [ -n "${LINKPROXY_TEST_PORTS:-}" ]; then
	read -r pport tport <<<"$LINKPROXY_TEST_PORTS"
else
	read -r pport tport < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
fi
ctl=$dir/ctl.sock

# wait_ready FILE PID WHAT: until PID printed "ready" into FILE (5 s).
wait_ready()
{
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q '^ready' "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || fail "$3 exited: $(cat "$1" "$dir/proxy.log" 2>/dev/null)"
		sleep 0.05
	done
	fail "$3 did not start"
}

# px CMD: a control command that must succeed; its reply goes to stdout.
px() { python3 "$LP" --control "$ctl" --cmd "$*" || fail "proxy command '$*' refused"; }
# px_refused CMD: one that must be refused.
px_refused()
{
	local reply
	if reply=$(python3 "$LP" --control "$ctl" --cmd "$*"); then
		fail "proxy accepted '$*': $reply"
	fi
	case $reply in error*) ;; *) fail "'$*': no error reply: $reply" ;; esac
}
# field NAME: a field of the stats reply.
field() { px stats | tr ' ' '\n' | sed -n "s/^$1=//p"; }
check() { python3 "$PEER" --port "$pport" --control "$ctl" --tmp "$dir" "$@" || fail "check $1"; }

python3 "$PEER" serve "$tport" >"$dir/peer.out" 2>&1 &
pids+=($!)
wait_ready "$dir/peer.out" "${pids[-1]}" "the sink/source"

# A start-up option the command refuses ends the proxy with status 2.
rc=0
python3 "$LP" --listen "127.0.0.1:$pport" --target "127.0.0.1:$tport" \
	--control "$dir/bad.sock" --rate 10mbps >/dev/null 2>"$dir/bad.log" || rc=$?
[ "$rc" -eq 2 ] || fail "--rate 10mbps: exit status $rc, expected 2"

python3 "$LP" --listen "127.0.0.1:$pport" --target "127.0.0.1:$tport" --control "$ctl" \
	--rate 50mbit --rate 'ba 20mbit' --delay 0 --jitter 0 --loss 0 --rto 200 --queue auto \
	>"$dir/proxy.out" 2>"$dir/proxy.log" &
proxy_pid=$!
pids+=("$proxy_pid")
wait_ready "$dir/proxy.out" "$proxy_pid" "the proxy"
[ "$(field rate_ab) $(field rate_ba) $(field queue_ab)" = "50000000 20000000 312500" ] ||
	fail "start-up options not applied: $(px stats)"

# Unshaped.
px "rate off" >/dev/null
check throughput "${LINKPROXY_TEST_MIB:-1024}"

# check_rates AB BA: the rates check; a run that carried less than the
# rate but held every other check (status 3: the proxy or a peer short of
# CPU on a loaded machine) runs once more. Over the rate fails at once.
check_rates()
{
	local rc=0
	python3 "$PEER" --port "$pport" --control "$ctl" --tmp "$dir" \
		rates 0.5 3 "$1" "$2" 10 "$qmax" "$slack" "$proxy_pid" || rc=$?
	if [ "$rc" -eq 3 ]; then
		echo "short of the rate with load average $(cut -d' ' -f1-3 /proc/loadavg); once more"
		rc=0
		python3 "$PEER" --port "$pport" --control "$ctl" --tmp "$dir" \
			rates 0.5 3 "$1" "$2" 10 "$qmax" "$slack" "$proxy_pid" || rc=$?
	fi
	[ "$rc" -eq 0 ] || fail "check rates $1 $2"
}

# Rates, both directions at once. Queued: at most the queue (auto: 256 KiB
# at 10mbit, 312500 bytes at 50mbit) plus one read of 256 KiB, plus what
# waits for a receiver that is slow to read (the far end short of CPU):
# 4 MiB at most. The sender may run ahead by its socket's send buffer and
# the proxy's receive buffer (tcp_wmem, tcp_rmem: a few MiB), not more:
# 16 MiB.
qmax=$((312500 + 262144 + (4 << 20)))
slack=$((16 << 20))
px "rate ab 10mbit; rate ba 50mbit" >/dev/null
check_rates 10 50
px "rate ab 50mbit; rate ba 10mbit" >/dev/null
check_rates 50 10

# Delay and jitter: a round trip is 2 x (20 + [0, 10]) ms.
px "rate off; delay 20; jitter 10" >/dev/null
check rtt 40 40 75
check order 1

# Loss: each lost segment stalls its stream for rto.
px "delay 0; jitter 0; loss 5; rto 100" >/dev/null
check loss 512 100
px "loss 0; rto 200" >/dev/null

# corrupt ab|ba 1 (given by the check itself, once its request has passed)
check corrupt 1024 ab
check corrupt 1024 ba

px "capture ab $dir/cap-ab" >/dev/null
check capture 1024 ab "$dir/cap-ab"
px "capture ab off; capture ba $dir/cap-ba" >/dev/null
check capture 1024 ba "$dir/cap-ba"
px "capture off" >/dev/null
check idle 64 "$dir/cap-ba"

for bad in "rate 10mbps" "rate ab" "rate xy 10mbit" "loss 101" "jitter -1" "rto 0" \
	"queue 0" "corrupt" "corrupt xy 1" "corrupt ab -1" "capture ab" "capture $dir/x"; do
	px_refused "$bad"
done
# The refused ones changed nothing.
[ "$(field rate_ab) $(field loss_ab) $(field rto) $(field corrupt_ab) $(field capture_ab)" = "0 0 200 0 off" ] ||
	fail "a refused command changed a setting: $(px stats)"
say "$(px stats)"

kill -TERM "$proxy_pid"
rc=0
wait "$proxy_pid" || rc=$?
[ "$rc" -eq 0 ] || fail "the proxy exited with status $rc after SIGTERM"
if grep -v '^$' "$dir/proxy.log" >&2; then
	fail "the proxy wrote to stderr (above)"
fi
say "all checks passed"
