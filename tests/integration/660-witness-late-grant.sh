#!/usr/bin/env bash
# A grant that arrives for a claim the node withdrew (WITNESS.md Q6; found
# by `make soak SOAK_SEED=4242`, schedule 19, where it left no primary):
#  1. a primary, b secondary. a's link to the witness goes silent (cut, no
#     FIN), then a is killed: b loses its peer at once and claims; the
#     witness waits, as a's session looks alive until witness-timeout.
#  2. a restarts at once (its witness link still cut) and connects to b:
#     b withdraws its claim (its peer is back).
#  3. The witness then grants b's claim. b takes the volume (at once, or
#     as the named node once a resync between them is done): within 20 s b
#     is primary, the record names b, and writes through b are acknowledged.
#     The record never stays on a node that does not serve.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

write_config3 "$T/cluster.ini"
start_trio
wait_for a "v['role'] == 'primary' and v.get('lease', True)"
client_start a b
wait_acked "$T/acked" 200
link aw cut
crash a
for ((i = 0; i < 40; i++)); do
	this_run b | grep -q "asking the witness to make this node primary" && break
	sleep 0.05
done
this_run b | grep -q "asking the witness to make this node primary" || fail "b did not claim"
start a
wait_connected 10
log "a back and connected to b before the witness decided"
for ((i = 0; i < 100; i++)); do
	grep -q "b is primary now" "$T/w.log" && break
	sleep 0.1
done
grep -q "b is primary now" "$T/w.log" || fail "the witness did not grant b's claim"
log "the witness granted b's withdrawn claim"
wait_for b "v['role'] == 'primary'" 20
[ "$(wrec "r['primary']")" = b ] || fail "the record names $(wrec "r['primary']"), not b"
n=$(acked "$T/acked")
wait_acked "$T/acked" $((n + 200)) 20
link aw restore
wait_for a "v['witness']['session']" 20
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
end_trio
log "ok"
