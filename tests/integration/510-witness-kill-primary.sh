#!/usr/bin/env bash
# Automatic failover after kill -9 of the primary (docs/WITNESS.md N6).
# a (primary), b and the witness run; a client writes distinct blocks to a
# and, when a request fails, retries on b. a is killed during the writes:
#  1. b promotes itself without any command (the witness grants its claim),
#     and the client's writes go on there; the gap is printed. a's address
#     refuses connections once it is dead, so b says its peer is gone and
#     the witness grants without waiting out a's lease (LE4, WIT_F_PEER_GONE).
#  2. Every write the client saw acknowledged (on a, then on b) is in b's
#     data area and reads back over NBD on b.
#  3. a restarts and rejoins as secondary (the witness names b), resyncs;
#     both data areas are equal, and every acknowledged write is in a's too.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

write_config3 "$T/cluster.ini"
start_trio
wait_for a "v['role'] == 'primary'"

client_start a b
wait_acked "$T/acked" 300
log "killing a after $(acked "$T/acked") acknowledged writes"
crash a
wait_for b "v['role'] == 'primary' and v['disk'] == 'uptodate'" 15
wait_acked "$T/acked" $(($(acked "$T/acked") + 200))
client_stop
grep -q '^# gap' "$T/acked" || fail "the client never had to fail over"
this_run b | grep -q "the witness agrees" || fail "b's log does not show the failover"
this_run b | grep -q "a refuses connections: its daemon is gone" ||
	fail "b did not find that a's daemon is gone"
this_run w | grep -q "b is primary now.*the old primary's daemon is gone" ||
	fail "the witness did not grant on a's daemon being gone"
[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b primary"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" --nbd "127.0.0.1:${NBDP[b]}" \
	"$T/b/vol0.img" || fail "acknowledged writes are missing on b"

start a
wait_connected
wait_for a "v['role'] == 'secondary'"
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" ||
	fail "acknowledged writes are missing on a after the resync"
stop a
stop b
kill_witness TERM
log "ok"
