#!/usr/bin/env bash
# Only the link between the nodes is cut (blackholed); both still reach the
# witness. The witness keeps exactly one primary:
#  1. a stays primary and goes on acknowledging writes (the witness has
#     recorded that it writes alone); b's claim is refused, b becomes
#     outdated and serves no writes (its NBD export is refused);
#  2. the witness names a primary and says its peer is not in sync;
#  3. heal: b resyncs from a; replicas identical, every acknowledged write on both.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3 qemu-io

write_config3 "$T/cluster.ini"
start_trio
client_start a b
wait_acked "$T/acked" 300
link ab drop
log "a-b link cut after $(acked "$T/acked") acknowledged writes"
wait_for b "v['disk'] == 'outdated' and v['role'] == 'secondary'" 20
wait_for a "v['role'] == 'primary' and p['connection'] != 'connected'" 20
n=$(acked "$T/acked")
wait_acked "$T/acked" $((n + 400)) 20
[ "$(wrec "r['primary'] + ' ' + str(r['synced'])")" = "a False" ] ||
	fail "the witness should name a primary, not in sync: $(witness_status)"
this_run b | grep -q "the witness refused the takeover" || fail "b did not ask the witness"
if qemu-io -f raw "$(uri b)" -c "write -P 0x11 0 4096" >"$T/b-write.out" 2>&1 &&
	grep -q "^wrote" "$T/b-write.out"; then
	fail "b accepted a write while a is primary"
fi
[ "$(jfield b "v['role']")" = secondary ] || fail "b is not secondary"
client_stop
grep -q '^# gap' "$T/acked" && fail "the client had to fail over: a should have served on"

link ab restore
wait_connected 60
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing"
wait_for a "v['witness']['session']"
for ((i = 0; i < 50; i++)); do
	[ "$(wrec "r['synced']")" = True ] && break
	sleep 0.1
done
[ "$(wrec "r['primary'] + ' ' + str(r['synced'])")" = "a True" ] ||
	fail "after the resync the witness should name a, in sync: $(witness_status)"
stop a
stop b
kill_witness TERM
log "ok"
