#!/usr/bin/env bash
# One tandem-witness serves two clusters whose witness-timeouts differ, and
# each cluster's sessions are judged by its own (issue 22):
#  1. cluster it (a, b; witness-timeout 2 s, through link proxies) is the
#     first -c; cluster it2 (c, d; witness-timeout 10 s: its nodes ping every
#     2.5 s, longer than the 2 s of the first cluster) the second;
#  2. idle for 2 minutes: no session is dropped or lost, nothing fails over
#     or changes role, a and c are still primary and named by the witness;
#  3. d restarted with a config saying witness-timeout 3 is refused at its
#     HELLO with a clear error (in d's log); c refuses it as its peer too
#     (the volume's contract), and goes on as primary.
# Slow: about 130 s. Step 2 is the test: two minutes idle, so that many
# 2.5 s ping rounds of the second cluster pass under the 2 s witness-timeout
# of the first; a shorter idle would not show a session judged by the
# wrong cluster's timeout.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

IDLE=${IDLE:-120}
WITNESS_TIMEOUT=2 write_config3 "$T/it.ini"
for n in c d; do
	NBDP[$n]=$(free_port)
	REPP[$n]=$(free_port)
done
C2=$T/it2.ini
{
	echo "[cluster]"
	echo "name = it2"
	echo "secret = other-secret"
	echo "peer-timeout = 2"
	echo "witness = 127.0.0.1:$WPORT"
	echo "witness-dir = $T/w"
	echo "witness-timeout = 10"
	echo "quorum-timeout = 20"
	[ -z "${TANDEM_TLS:-}" ] || echo "tls = $TANDEM_TLS" # (as write_config2)
	for n in c d; do
		echo
		echo "[node $n]"
		echo "replication = 127.0.0.1:${REPP[$n]}"
		echo "nbd = 127.0.0.1:${NBDP[$n]}"
		echo "control = $T/$n.sock"
		echo "data-dir = $T/$n"
	done
	echo
	echo "[volume vol0]"
	echo "size = 64M"
	echo "nodes = c d"
	echo "replication = sync"
} >"$C2"
WCFGS=("$C2")

# w2 EXPR: a python expression on it2's witness-status (d), its record of
# vol0 (r) and its node sessions (s: name -> bool).
w2()
{
	"$BIN/tandemctl" -c "$C2" witness-status 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
r = [x for x in d['volumes'] if x['name'] == 'vol0'][0]
s = {x['node']: x['session'] for x in d['nodes']}
print($1)"
}

start_trio
start c "$C2"
start d "$C2"
CFG=$C2 wait_for c "p['connection'] == 'connected' and p['replication'] == 'established'"
CFG=$C2 wait_for c "v['role'] == 'primary' and v['witness']['session'] and v['witness']['primary'] == 'c'"
CFG=$C2 wait_for d "v['witness']['session']"
[ "$(wrec "d['witness_timeout'], d['serving'], r['primary'], s['a'] and s['b']")" = "2.0 True a True" ] ||
	fail "cluster it: $(witness_status)"
[ "$(w2 "d['witness_timeout'], d['serving'], r['primary'], s['c'] and s['d']")" = "10.0 True c True" ] ||
	fail "cluster it2: $("$BIN/tandemctl" -c "$C2" witness-status)"

# From here on, only what the logs gain counts.
declare -A MARK=()
for n in a b c d w; do MARK[$n]=$(wc -l <"$T/$n.log"); done
since() { tail -n +$((MARK[$1] + 1)) "$T/$1.log"; }
ups=$(grep -c 'session up' "$T/w.log")
log "idle for $IDLE s"
sleep "$IDLE"

bad='silent|session (lost|closed|dropped)|failover|stepping down|role [a-z]+ ->|asking the witness|no quorum|deposed|giving up|refused|illegal'
for n in a b c d w; do
	if since "$n" | grep -Eq "$bad"; then
		since "$n" | grep -E "$bad" | head -n 20 >&2
		fail "$n logged a lost session, a failover or a role change while idle"
	fi
done
[ "$(grep -c 'session up' "$T/w.log")" -eq "$ups" ] || fail "the witness saw sessions come up again"
[ "$(jfield a "v['role'], v['witness']['session']")" = "primary True" ] || fail "a: not primary"
[ "$(CFG=$C2 jfield c "v['role'], v['witness']['session']")" = "primary True" ] || fail "c: not primary"
[ "$(wrec "r['primary'], r['epoch'], s['a'] and s['b']")" = "a 1 True" ] || fail "it: $(witness_status)"
[ "$(w2 "r['primary'], r['epoch'], s['c'] and s['d']")" = "c 1 True" ] ||
	fail "it2: $("$BIN/tandemctl" -c "$C2" witness-status)"
log "idle: no session dropped, no role changed"

# A node whose witness-timeout is not its cluster's is refused at HELLO.
stop d
sed 's/^witness-timeout = 10$/witness-timeout = 3/' "$C2" >"$T/it2-bad.ini"
start d "$T/it2-bad.ini"
want="witness-timeout differs: node d says 3.0 s, this witness has 10.0 s for cluster it2"
for ((i = 0; i < 100; i++)); do
	this_run d | grep -qF "the witness refused: $want" && break
	sleep 0.1
done
this_run d | grep -qF "the witness refused: $want" || { this_run d >&2; fail "d: no clear refusal"; }
grep -qF "(d, not authenticated): $want" "$T/w.log" || fail "the witness did not log the refusal"
# and by c, whose contract with d names the same key (SPEC "The volume's
# contract"): the two never connect, and both say why
CFG=$T/it2-bad.ini wait_for d "'witness-timeout is 3 s on d, 10 s on c' in p['error']"
[ "$(CFG=$T/it2-bad.ini jfield d "p['connection']")" != connected ] || fail "d connected to c"
[ "$(CFG=$T/it2-bad.ini jfield d "v['witness']['session']")" = False ] || fail "d has a session"
[ "$(w2 "s['d']")" = False ] || fail "the witness counts d's session"
[ "$(CFG=$C2 jfield c "v['role'], v['quorum']")" = "primary True" ] || fail "c lost its role"

stop d
stop c
stop a
stop b
kill_witness TERM
log "ok"
