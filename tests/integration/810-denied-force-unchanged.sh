#!/usr/bin/env bash
# Nothing irreversible before the grant (WITNESS.md N8a): a `primary --force`
# that the witness refuses leaves the node exactly as it was.
# a is primary with the witness and writes; the a-b link is cut (both still
# reach the witness): a writes on alone, b's claim is refused and b is
# outdated. `primary vol0 --force` on b is denied: a still holds its session
# with the witness. b's role, disk state, generations, out-of-sync bytes,
# connection and its image bytes are the same before and after; the record
# still names a. Healed, b resyncs from a.
# Before, b marked its disk up to date before it asked, and a denial left an
# outdated copy marked `uptodate`.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

snapshot()
{
	jfield b "(v['role'], v['disk'], v['consistent_copy'], p['generation'], \
p['bitmap_generation'], p['out_of_sync_bytes'], p['connection'], p['replication'])"
}

export VOL_SIZE=64M
write_config3 "$T/cluster.ini"
start_trio
client_start a
wait_acked "$T/acked" 200
link ab drop
wait_for b "v['disk'] == 'outdated' and v['role'] == 'secondary'" 20
n=$(acked "$T/acked")
wait_acked "$T/acked" $((n + 100)) 20
client_stop
[ "$(wrec "r['primary'] + ' ' + str(r['synced'])")" = "a False" ] ||
	fail "the witness should name a, writing alone: $(witness_status)"
before=$(snapshot)
sum0=$(md5sum <"$T/b/vol0.img")
log "b before: $before"
if out=$(ctl_on b primary vol0 --force 2>&1); then
	fail "the witness granted b while a holds its session: $out"
fi
log "b: primary --force: $out"
after=$(snapshot)
log "b after:  $after"
[ "$after" = "$before" ] || fail "the refused --force changed b: $before -> $after"
[ "$(md5sum <"$T/b/vol0.img")" = "$sum0" ] || fail "the refused --force changed b's image"
if this_run b | grep -q "disk outdated -> uptodate"; then
	fail "b marked its disk up to date for a refused claim"
fi
[ "$(wrec "r['primary']")" = a ] || fail "the witness no longer names a"
[ "$(jfield a "v['role']")" = primary ] || fail "a is no longer primary"
# the refusal is what the command says (not a second claim's "waiting")
echo "$out" | grep -q "the witness refused" || fail "not refused by the witness: $out"

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
