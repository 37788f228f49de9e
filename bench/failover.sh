#!/usr/bin/env bash
# Failover benchmark (issue: witness, quorum and automatic failover): the time
# from SIGKILL of the primary to the first write acknowledged by the new
# primary, for a client that writes one 4K block at a time and, when a
# request fails, retries on the other node's address. REPS repetitions each
# over NBD and over iSCSI, default settings (peer-timeout 4 s,
# witness-timeout 3 s); then the time of a planned switchover with the
# volume idle (`tandemctl switchover`). Prints median and maximum of each.
#
#   bench/failover.sh            20 repetitions
#   REPS=5 bench/failover.sh
#
# The gap: from a CLOCK_MONOTONIC reading taken just before the SIGKILL to the
# first write the client (tests/tools/failclient.py) saw acknowledged by the
# other node (its log has the time of that ack on the same clock). There is no anchor on this
# machine (no DRBD/Heartbeat): the goal is median <= 3 s and max <= 5 s.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TANDEM_BUILD:-build}
REPS=${REPS:-20}
W=$(mktemp -d /var/tmp/tandem-failover.XXXXXX)
declare -A PID=()
WPID=
cleanup() {
	for p in "${PID[@]}" $WPID; do
		if [ -n "$p" ]; then kill -KILL "$p" 2>/dev/null || true; fi
	done
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT
command -v python3 >/dev/null || { echo "bench: python3 missing"; exit 77; }
[ -x "$BIN/tandemd" ] || make -s all

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A NBD=() ISCSI=()
WP=$(port)
{
	echo "[cluster]"
	echo "name = fo"
	echo "secret = bench-secret"
	echo "witness = 127.0.0.1:$WP"
	echo "witness-dir = $W/w"
	for n in a b; do
		NBD[$n]=$(port)
		ISCSI[$n]=$(port)
		echo "[node $n]"
		echo "replication = 127.0.0.1:$(port)"
		echo "nbd = 127.0.0.1:${NBD[$n]}"
		echo "iscsi = 127.0.0.1:${ISCSI[$n]}"
		echo "control = $W/$n.sock"
		echo "data-dir = $W/$n"
	done
	echo "[volume vol0]"
	echo "size = 256M"
	echo "nodes = a b"
} >"$W/c.ini"
IQN=iqn.2026-11.org.tandem:fo.vol0
ctl() { local n=$1; shift; "$BIN/tandemctl" -c "$W/c.ini" -n "$n" "$@"; }
st() { ctl "$1" status vol0 --json 2>/dev/null | python3 -c "
import json, sys
v = json.load(sys.stdin)['volumes'][0]
p = v['peers'][0]
print($2)" 2>/dev/null || true; }
until_true() { # NODE EXPR SECS
	for _ in $(seq $(($3 * 20))); do
		[ "$(st "$1" "$2")" = True ] && return 0
		sleep 0.05
	done
	echo "bench: on $1, $2 did not hold" >&2
	exit 1
}
start() {
	"$BIN/tandemd" -c "$W/c.ini" -n "$1" -f >>"$W/$1.log" 2>&1 &
	PID[$1]=$!
	for _ in $(seq 100); do ctl "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "bench: $1 did not start" >&2
	exit 1
}
"$BIN/tandem-witness" -c "$W/c.ini" --init fo -f >>"$W/w.log" 2>&1 & # a new cluster
WPID=$!
start a
start b
until_true a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 30

other() { [ "$1" = a ] && echo b || echo a; }
primary() { [ "$(st a "v['role']")" = primary ] && echo a || echo b; }

count() { local c; c=$(grep -c '^[0-9]' "$1" 2>/dev/null) || true; echo "${c:-0}"; }

# one_failover PROTO: the gap in seconds, in $W/gap
one_failover() {
	local proto=$1 p q nodes args=() tk
	p=$(primary)
	q=$(other "$p")
	until_true "$p" "p['replication'] == 'established' and p['disk'] == 'uptodate' and v['witness']['session']" 60
	until_true "$q" "v['witness']['session']" 30
	if [ "$proto" = nbd ]; then
		nodes="127.0.0.1:${NBD[$p]},127.0.0.1:${NBD[$q]}"
	else
		nodes="127.0.0.1:${ISCSI[$p]},127.0.0.1:${ISCSI[$q]}"
		args=(--iqn "$IQN")
	fi
	rm -f "$W/acked" "$W/stop"
	python3 tests/tools/failclient.py write --nodes "$nodes" --log "$W/acked" \
		--first $((8 << 20)) --rate 500 --stop "$W/stop" "${args[@]}" >"$W/client.out" 2>&1 &
	local cpid=$!
	for _ in $(seq 200); do [ "$(count "$W/acked")" -ge 100 ] && break; sleep 0.05; done
	tk=$(python3 -c 'import time; print(time.monotonic())')
	kill -KILL "${PID[$p]}"
	wait "${PID[$p]}" 2>/dev/null || true
	for _ in $(seq 400); do grep -q '^# gap' "$W/acked" 2>/dev/null && break; sleep 0.05; done
	sleep 0.3
	touch "$W/stop"
	wait "$cpid" || true
	awk -v tk="$tk" '/^# gap/ { printf "%.3f\n", $4 - tk; exit }' "$W/acked" >"$W/gap"
	start "$p"
}

stats() { python3 -c "
import statistics, sys
v = [float(x) for x in sys.argv[2:] if x]
print('%-22s n=%d median %.3f s  max %.3f s  (goal: median <= %s s, max <= %s s)' % (sys.argv[1], len(v), statistics.median(v), max(v), '3' if 'failover' in sys.argv[1] else '1', '5' if 'failover' in sys.argv[1] else '-'))
" "$@"; }

for proto in nbd iscsi; do
	gaps=()
	for r in $(seq "$REPS"); do
		one_failover "$proto"
		g=$(cat "$W/gap")
		[ -n "$g" ] || { echo "bench: $proto repetition $r: no failover seen" >&2; tail -5 "$W/client.out" >&2; exit 1; }
		gaps+=("$g")
		echo "$proto failover $r: $g s" >&2
	done
	stats "$proto failover" "${gaps[@]}"
done
p=$(primary)
until_true "$p" "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
sw=()
for r in $(seq "$REPS"); do
	p=$(primary)
	until_true "$p" "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
	t0=$(date +%s.%N)
	ctl "$p" switchover vol0 >/dev/null
	t1=$(date +%s.%N)
	sw+=("$(python3 -c "print($t1 - $t0)")")
done
stats "planned switchover" "${sw[@]}"
