#!/usr/bin/env bash
# A witness without its state file is not a witness of a new cluster
# (issue 22):
#  1. started without the file and without --init, it refuses the cluster:
#     both nodes log why, witness-status says so and holds no record, no
#     file appears; when the primary dies, the secondary cannot be made
#     primary through the witness;
#  2. started with --init, it creates the empty record and serves: the
#     nodes' sessions come up, no node claims by itself (a record that never
#     named a primary), the operator's `primary` is granted;
#  3. stopped, its state file removed, started again without --init: it
#     refuses the cluster again, and the primary keeps acknowledging writes
#     with its peer (quorum through the peer); every acknowledged write is
#     on both replicas.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

STATE=$T/w/witness-it.state
MISSING="this witness does not serve cluster it: its state file is missing"

# refusals NODE: how often NODE's log (this run) shows the witness's refusal.
refusals()
{
	local c
	c=$(this_run "$1" | grep -cF "the witness refused: $MISSING (for a new cluster, tandem-witness --init it creates it)") || true
	echo "${c:-0}"
}

# refused_more NODE N: until NODE logged more than N refusals.
refused_more()
{
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(refusals "$1")" -gt "$2" ] && return 0
		sleep 0.1
	done
	this_run "$1" | tail -n 20 >&2
	fail "$1 did not log the witness's refusal"
}

# not_served: witness-status says the cluster is refused, with no record.
not_served()
{
	[ "$(witness_status | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(d['serving'], d['volumes'], '--init it' in d['refused'], any(x['session'] for x in d['nodes']))
")" = "False [] True False" ] || fail "witness-status: $(witness_status)"
}

write_config3 "$T/cluster.ini"
link_start ab "${REPP[b]}"
link_start aw "$WPORT"
link_start bw "$WPORT"

# 1. no state file, no --init
start_witness noinit
grep -q "cluster it: no state file $STATE: not served" "$T/w.log" || fail "the witness did not say it refuses"
not_served
start a
start b
refused_more a 0
refused_more b 0
wait_connected
wait_for a "v['role'] == 'primary' and p['replication'] == 'established' and p['disk'] == 'uptodate'"
[ "$(jfield a "v['witness']['session'], v['quorum']")" = "False True" ] || fail "a: $(ctl_on a status vol0 --json)"
[ -e "$STATE" ] && fail "the witness created a state file without --init"
not_served
crash a
sleep 7 # peer-timeout, witness-timeout and claims of b, had it a session
[ "$(jfield b "v['role'], v['witness']['session']")" = "secondary False" ] ||
	fail "b became primary through a witness without a state file"
log "refused without a state file: b stayed secondary"

# 2. --init: a new, empty record
kill_witness TERM
start_witness
grep -qF -- "cluster it: --init: created $STATE, no record yet" "$T/w.log" || fail "no --init in the log"
[ -e "$STATE" ] || fail "--init wrote no state file"
[ "$(wrec "d['serving'], r['primary'], r['epoch']")" = "True None 0" ] || fail "record: $(witness_status)"
start a
wait_connected
wait_for a "v['witness']['session'] and p['disk'] == 'uptodate' and v['disk'] == 'uptodate'" 60
wait_for b "v['witness']['session']"
sleep 5 # a peer-timeout and more: neither claims a record that never named a primary
[ "$(jfield a "v['role']") $(jfield b "v['role']")" = "secondary secondary" ] ||
	fail "a node claimed an empty record by itself"
ctl_on a primary vol0 || fail "primary by hand was refused"
wait_for a "v['role'] == 'primary' and v['witness']['primary'] == 'a'"
[ "$(wrec "r['primary'], r['epoch']")" = "a 1" ] || fail "record: $(witness_status)"
log "served after --init; primary by hand granted"

# 3. the state file lost: refused again, the pair goes on
client_start a
wait_acked "$T/acked" 200
kill_witness
rm -f "$STATE"
ra=$(refusals a)
start_witness noinit
refused_more a "$ra"
not_served
n=$(acked "$T/acked")
wait_acked "$T/acked" $((n + 1600)) 30 # 4 s at 400 writes/s: past witness-timeout
[ "$(jfield a "v['role'], v['quorum'], v['witness']['session'], v['witness']['held_writes']")" = "primary True False 0" ] ||
	fail "a: $(ctl_on a status vol0 --json)"
[ "$(jfield b "v['role']")" = secondary ] || fail "b changed role"
[ -e "$STATE" ] && fail "the witness created a state file without --init"
end_trio
log "ok"
