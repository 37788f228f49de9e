# shellcheck shell=bash
# Sourced after lib.sh and lib2.sh by the witness tests: a two-node cluster
# (a, b) plus tandem-witness (w), each of the three links through its own
# link proxy (tests/tools/linkproxy.py), so a test can cut, delay and heal
# them one by one:
#   ab: a -> b replication (a dials: its name sorts first)
#   aw: a -> witness        bw: b -> witness
# Each node dials the witness at its own [node] witness address (the proxy).
# (_root: set by lib.sh, sourced first)
# shellcheck disable=SC2154

declare -A PXP=()   # link -> proxy listen port
WPORT=
WPID=

# write_config3 FILE [LINE...]: as write_config2 (lines land in [volume vol0]),
# with a witness and one proxy per link. WITNESS_TIMEOUT, QUORUM_TIMEOUT.
write_config3()
{
	local file=$1 l
	shift
	PROXY=1 write_config2 "$file" "$@"
	WPORT=$(free_port)
	for l in aw bw; do PXP[$l]=$(free_port); done
	PXP[ab]=$PROXY_PORT
	python3 - "$file" "$WPORT" "${PXP[aw]}" "${PXP[bw]}" "$T/w" \
		"${WITNESS_TIMEOUT:-2}" "${QUORUM_TIMEOUT:-20}" <<'PY'
import sys
f, wport, aw, bw, wdir, wt, qt = sys.argv[1:]
out = []
for line in open(f):
    out.append(line)
    if line.startswith("name = "):
        out += ["witness = 127.0.0.1:%s\n" % wport, "witness-dir = %s\n" % wdir,
                "witness-timeout = %s\n" % wt, "quorum-timeout = %s\n" % qt]
    if line.startswith("[node a]"):
        out.append("witness = 127.0.0.1:%s\n" % aw)
    if line.startswith("[node b]"):
        out.append("witness = 127.0.0.1:%s\n" % bw)
open(f, "w").writelines(out)
PY
}

# start_witness [noinit]: tandem-witness in the foreground for $CFG and the
# files in the array WCFGS (more clusters; log $T/w.log), ready once it says
# so. A cluster whose state file does not exist yet is new: it gets --init
# (only on this first start, so that a restart tests the restart), unless
# `noinit` (the witness then refuses that cluster).
start_witness()
{
	local i c name dir args=()
	for c in "$CFG" ${WCFGS[@]+"${WCFGS[@]}"}; do
		args+=(-c "$c")
		name=$(sed -n 's/^name *= *//p' "$c" | head -n 1)
		dir=$(sed -n 's/^witness-dir *= *//p' "$c" | head -n 1)
		if [ "${1:-}" != noinit ] && [ ! -e "$dir/witness-$name.state" ]; then
			args+=(--init "$name")
		fi
	done
	echo "=== start $(date +%T.%N)" >>"$T/w.log"
	"$BIN/tandem-witness" "${args[@]}" -f >>"$T/w.log" 2>&1 &
	WPID=$!
	track "$WPID"
	for ((i = 0; i < 100; i++)); do
		alive "$WPID" || { tail -n 20 "$T/w.log" >&2; fail "tandem-witness exited"; }
		[ "$(this_run w | grep -c 'tandem-witness: ready')" -ge 1 ] && return 0
		sleep 0.05
	done
	fail "tandem-witness did not start"
}

# kill_witness [SIG]: SIGKILL (default) or SIGTERM; waits for the exit.
kill_witness()
{
	kill "-${1:-KILL}" "$WPID" 2>/dev/null || true
	wait "$WPID" 2>/dev/null || true
	_forget "$WPID"
	WPID=
}

# link_start NAME TARGET_PORT: the proxy of link NAME (its control socket
# $T/px-NAME.sock) in front of TARGET_PORT.
link_start()
{
	local name=$1 target=$2 pid i
	python3 "$_root/tests/tools/linkproxy.py" --listen "127.0.0.1:${PXP[$name]}" \
		--target "127.0.0.1:$target" --control "$T/px-$name.sock" \
		>"$T/px-$name.out" 2>"$T/px-$name.log" &
	pid=$!
	track "$pid"
	for ((i = 0; i < 100; i++)); do
		grep -q ready "$T/px-$name.out" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "link proxy $name did not start"
}

# link NAME CMD...: cut | drop | restore | reset | delay MS
link()
{
	local name=$1
	shift
	python3 "$_root/tests/tools/linkproxy.py" --control "$T/px-$name.sock" --cmd "$*" \
		>/dev/null || fail "link $name: $*"
}

# start_trio: the three links, the witness, both nodes connected and
# established, and the witness naming a primary with its peer in sync.
start_trio()
{
	link_start ab "${REPP[b]}"
	link_start aw "$WPORT"
	link_start bw "$WPORT"
	start_witness
	start a
	start b
	wait_connected
	wait_for a "p['replication'] == 'established'"
	wait_for a "v['witness']['session'] and v['witness']['primary'] == 'a'"
	wait_for b "v['witness']['session']"
}

# witness_status: tandemctl witness-status (JSON) of the test cluster.
witness_status() { "$BIN/tandemctl" -c "$CFG" witness-status; }

# wrec EXPR: a python expression on the witness's record of vol0 (r), its
# node sessions (s: name -> bool).
wrec()
{
	witness_status 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
r = [x for x in d['volumes'] if x['name'] == 'vol0'][0]
s = {x['node']: x['session'] for x in d['nodes']}
print($1)"
}

# acked FILE: how many writes the failclient log FILE holds.
acked()
{
	local c
	c=$(grep -c '^[0-9]' "$1" 2>/dev/null)
	echo "${c:-0}"
}

# wait_acked FILE N [SECONDS]: until the log holds N writes.
wait_acked()
{
	local i
	for ((i = 0; i < ${3:-20} * 20; i++)); do
		[ "$(acked "$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	fail "the client has $(acked "$1") acknowledged writes, not $2, after ${3:-20} s"
}

# client_start NODES...: the failclient writing to the nodes given (names),
# log $T/acked; client_stop ends it and checks it exited 0.
client_start()
{
	local n nodes=""
	for n in "$@"; do nodes="$nodes${nodes:+,}127.0.0.1:${NBDP[$n]}"; done
	rm -f "$T/stop"
	python3 "$TANDEM_TOOLS/failclient.py" write --nodes "$nodes" --log "$T/acked" \
		--first $((4 << 20)) --rate "${RATE:-400}" --stop "$T/stop" \
		>"$T/client.out" 2>"$T/client.err" &
	CPID=$!
	track "$CPID"
}
client_stop()
{
	touch "$T/stop"
	wait "$CPID" || fail "the client failed: $(cat "$T/client.err")"
	_forget "$CPID"
	log "client: $(cat "$T/client.out")"
}

# end_trio: the client stops; both replicas are identical and hold every
# write the client saw acknowledged; both nodes and the witness stop.
end_trio()
{
	client_stop
	compare_replicas
	python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" \
		"$T/b/vol0.img" || fail "acknowledged writes are missing"
	stop a
	stop b
	kill_witness TERM
}

# checker_start SEED: the stamped checker (tests/tools/checker.py) on $BLOCKS
# blocks from FIRST (default 0) over NBD on a and b, or with PROTO=iscsi
# over iSCSI (the ports in ISCP, the target IQN); state in STATE (default
# $T/check.json, resumed: the same blocks), a flush every 16 writes.
# checker_stop: tells it to stop and fails the test if it failed.
checker_start()
{
	local nodes="127.0.0.1:${NBDP[a]},127.0.0.1:${NBDP[b]}" iscsi=()
	if [ "${PROTO:-nbd}" = iscsi ]; then
		nodes="127.0.0.1:${ISCP[a]},127.0.0.1:${ISCP[b]}"
		iscsi=(--iqn "$IQN")
	fi
	rm -f "$T/stop"
	python3 "$TANDEM_TOOLS/checker.py" run --nodes "$nodes" "${iscsi[@]}" \
		--blocks "$BLOCKS" --state "${STATE:-$T/check.json}" --first "${FIRST:-0}" \
		--seed "$1" --flush-every 16 \
		--timeout 5 --resume --stop "$T/stop" >"$T/checker.out" 2>"$T/checker.err" &
	CPID=$!
	track "$CPID"
	sleep 1
	alive "$CPID" || fail "the checker ended at once: $(cat "$T/checker.err")"
}
checker_stop()
{
	touch "$T/stop"
	wait "$CPID" || fail "the checker failed: $(cat "$T/checker.err")"
	_forget "$CPID"
	log "checker: $(cat "$T/checker.out")"
}
