#!/usr/bin/env bash
# An orderly demotion while the old primary is still away never hands the
# volume back to it (W1, W2):
#  1. a, the primary, is cut off from b and the witness during writes; b
#     takes over and the client's writes go on there;
#  2. `secondary` on b: the witness's record names no primary now, and its
#     generation is b's;
#  3. a's link to the witness heals before quorum-timeout (a is still
#     primary): a reports itself primary and is deposed (it lacks b's
#     writes), steps down and gives up what it wrote alone; the record
#     still names no one;
#  4. `primary` on b (without --force: b holds what it released), the node
#     link heals: a resyncs from b, no split brain, replicas identical, and
#     every acknowledged write on both.
# Before W1 checked the data, a took the free record in step 3 and served
# writes without b's (found by docs/model).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

QUORUM_TIMEOUT=60 write_config3 "$T/cluster.ini"
start_trio
client_start a b
wait_acked "$T/acked" 200
link aw drop
link ab drop
log "a cut off after $(acked "$T/acked") acknowledged writes"
wait_for b "v['role'] == 'primary'" 20
wait_acked "$T/acked" $(($(acked "$T/acked") + 200)) 40
client_stop
grep -q '^# gap' "$T/acked" || fail "the client never had to fail over"

ctl_on b secondary vol0 >/dev/null || fail "secondary on b failed"
[ "$(wrec "r['primary'] or ''")" = "" ] || fail "the record still names a primary after b's release"
[ "$(jfield a "v['role']")" = primary ] ||
	fail "a stepped down before the witness came back: the case is not reached"

link aw restore
wait_for a "v['role'] == 'secondary'" 20
this_run a | grep -q "the witness holds newer data" || fail "a does not say why it stepped down"
[ "$(wrec "r['primary'] or ''")" = "" ] || fail "the witness gave the volume to $(wrec "r['primary']")"
log "a deposed; the record names no primary"

ctl_on b primary vol0 >/dev/null || fail "primary on b (it holds what it released) failed"
[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b primary"
link ab restore
wait_connected 60
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
[ "$(jfield b "p['split_brain']")" = False ] || fail "b reports split brain"
[ "$(jfield a "p['split_brain']")" = False ] || fail "a reports split brain"
compare_replicas
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" ||
	fail "acknowledged writes are missing on a"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing on b"
stop a
stop b
kill_witness TERM
log "ok"
