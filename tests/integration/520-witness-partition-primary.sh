#!/usr/bin/env bash
# The primary is partitioned from both its peer and the witness (its two
# links blackholed: nothing arrives, no FIN, no RST), during writes:
#  1. a stops acknowledging writes: none is acknowledged on a after the cut
#     that b lacks (checked at the end against b's data area);
#  2. b takes over by itself once the peer and witness timeouts ran out;
#     the client's writes go on there;
#  3. a, without quorum for quorum-timeout, steps down (role secondary);
#  4. heal: a learns from the witness that b is primary, gives up what it
#     wrote alone, reconnects as b's sync target; no split brain; replicas
#     identical, every acknowledged write on both.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

QUORUM_TIMEOUT=4 write_config3 "$T/cluster.ini"
start_trio
client_start a b
wait_acked "$T/acked" 300
link aw drop
link ab drop
log "a cut off from b and the witness after $(acked "$T/acked") acknowledged writes"
wait_for b "v['role'] == 'primary'" 20
wait_for a "v['role'] == 'secondary' and not v['quorum']" 20
wait_acked "$T/acked" $(($(acked "$T/acked") + 200)) 40
client_stop
grep -q '^# gap' "$T/acked" || fail "the client never had to fail over"
this_run a | grep -q "stepping down to secondary" || fail "a did not say it stepped down"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing on b"

link aw restore
link ab restore
wait_connected 60
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
wait_for a "v['role'] == 'secondary' and v['quorum'] and not p['split_brain']"
[ "$(jfield b "p['split_brain']")" = False ] || fail "b reports split brain"
[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b primary"
compare_replicas
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" ||
	fail "acknowledged writes are missing on a"
stop a
stop b
kill_witness TERM
log "ok"
