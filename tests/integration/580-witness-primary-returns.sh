#!/usr/bin/env bash
# The primary comes back while the witness is away, and takes its volume
# back once the witness returns, although its peer is connected:
#  1. the witness is killed, then a (the primary) by SIGKILL; b cannot take
#     over (no witness) and stays secondary;
#  2. a restarts and connects to b: two secondaries in sync, and the
#     witness's record (on its disk) still names a;
#  3. the witness starts again: a learns that it is named and claims,
#     granted at once (the record names it; b may not be granted while it
#     does); writes are served again without an operator;
#  4. every write acknowledged before and after is on both nodes.
# Without the claim of a named node whose peer is connected, both nodes
# stayed secondary for good (found by make soak).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

write_config3 "$T/cluster.ini"
start_trio
client_start a
wait_acked "$T/acked" 200
client_stop
kill_witness
crash a
log "witness and a killed after $(acked "$T/acked") acknowledged writes"
sleep 3 # b sees a gone; it has no witness to claim from
[ "$(jfield b "v['role']")" = secondary ] || fail "b became primary without the witness"

start a
wait_connected 30
wait_for b "v['role'] == 'secondary' and p['replication'] == 'established'" 30
[ "$(jfield a "v['role']")" = secondary ] || fail "a came back as primary without the witness"
log "a and b connected, both secondary"

start_witness
wait_for a "v['role'] == 'primary'" 20
this_run a | grep -q "the witness agrees" || fail "a did not claim through the witness"
[ "$(jfield b "v['role']")" = secondary ] || fail "b is primary too"
[ "$(wrec "r['primary']")" = a ] || fail "record: $(witness_status)"
log "a is primary again: $(this_run a | grep -m1 'the witness agrees' | cut -c1-12)"

before=$(acked "$T/acked")
client_start a
wait_acked "$T/acked" $((before + 200)) 20
client_stop
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
ctl_on a wait-sync vol0 --timeout 60 || fail "a: wait-sync did not succeed"
compare_replicas
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing"
stop a
stop b
kill_witness TERM
log "ok"
