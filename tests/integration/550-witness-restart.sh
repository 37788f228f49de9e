#!/usr/bin/env bash
# The witness restarts from its state file in the middle of a failover, and
# no stale node wins:
#  1. the node link is cut: a goes on alone, the witness records that a
#     writes alone (b is refused, outdated);
#  2. the witness is killed (SIGKILL) and a too: b has neither;
#  3. the witness starts again from its state file: it still names a, not
#     in sync; b, stale, is refused again and never becomes primary;
#  4. a restarts: the witness names it, so it promotes itself; the link
#     heals, b resyncs from a; every write acknowledged on a is on both.
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
link ab drop
wait_for b "v['disk'] == 'outdated'" 20
wait_acked "$T/acked" $(($(acked "$T/acked") + 200)) 20
[ "$(wrec "r['primary'] + ' ' + str(r['synced'])")" = "a False" ] || fail "record: $(witness_status)"
epoch=$(wrec "r['epoch']")
kill_witness
crash a
client_stop
log "witness and a killed after $(acked "$T/acked") acknowledged writes"

start_witness
[ "$(wrec "r['primary'] + ' ' + str(r['synced']) + ' ' + str(r['epoch'])")" = "a False $epoch" ] ||
	fail "the witness did not come back with its record: $(witness_status)"
sleep 6 # the restart grace and several claims of b
[ "$(jfield b "v['role']")" = secondary ] || fail "b, stale, became primary"
[ "$(wrec "r['primary']")" = a ] || fail "the witness gave the record away: $(witness_status)"

start a
wait_for a "v['role'] == 'primary'" 20
this_run a | grep -q "the witness agrees" || fail "a did not promote itself through the witness"
link ab restore
wait_connected 60
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing"
stop a
stop b
kill_witness TERM
log "ok"
