#!/usr/bin/env bash
# The witness record never names a node that cannot serve (WITNESS.md W5, N13).
# a is primary with the witness, acknowledged writes synced to b. b stops, then a
# stops; a's data directory is emptied and a starts again: it stays
# secondary and inconsistent, and the witness still names it (with the data it
# no longer has). b starts: it resyncs a fully from its own data.
# a, named without the recorded data, releases the record (its session stays
# up, a is never stopped). The record's generation is a's branch from when b
# stopped (a primary that loses its peer branches, R7), which no node holds
# any more, so no node takes over by itself: `primary vol0 --force` on b is
# the operator's call, and the witness grants it because the record names no
# one. b then serves every acknowledged byte and a is in sync with it.
# Before, a's live session kept the record, --force on b was denied
# ("the primary still holds its session") and only stopping a freed it.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M
write_config3 "$T/cluster.ini"
start_trio
wait_for a "v['role'] == 'primary' and v.get('lease', True)"
client_start a
wait_acked "$T/acked" 300
client_stop
ctl_on a wait-sync vol0 --timeout 30 || fail "not in sync before the stops"
stop b
stop a
rm -rf "$T/a"
mkdir "$T/a"
start a
wait_for a "v['witness']['session'] and v['witness']['primary'] == 'a'" 20
[ "$(jfield a "v['role']")" = secondary ] || fail "the wiped node a became primary"
[ "$(wrec "r['primary']")" = a ] || fail "the witness should still name a here (nothing told it)"
start b
wait_connected 30
wait_for b "p['replication'] == 'established'" 60
wait_for a "v['witness']['session']"
log "a: $(jfield a "v['disk']"), b: $(jfield b "v['disk']"), record names '$(wrec "r['primary'] or ''")'"
# a holds no recorded data: it releases the record without being stopped
for ((i = 0; i < 100; i++)); do
	[ -z "$(wrec "r['primary'] or ''")" ] && break
	sleep 0.1
done
[ -z "$(wrec "r['primary'] or ''")" ] || fail "the witness still names a, which lacks the recorded data"
[ "$(wrec "s['a']")" = True ] || fail "a's witness session should be alive"
# the record's generation is a's branch from when b left: no node holds it,
# so b does not take over by itself (it may lack writes a acknowledged alone)
[ "$(jfield b "v['role']")" = secondary ] || fail "b took over by itself"
out=$(ctl_on b primary vol0 --force 2>&1) || fail "primary --force on b: $out"
wait_for b "v['role'] == 'primary' and v['disk'] == 'uptodate'" 20
[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b"
[ -n "${NPID[a]}" ] || fail "a was stopped"
this_run a | grep -q "which it does not hold .*releasing the record" ||
	fail "a did not log why it released the record"
grep -q "a releases the record without the data it names" "$T/w.log" ||
	fail "the witness did not log the release"
# a's copy is as current as b's (R13): up to date once b's STATE carries no
# marks (the cleaner sends one when b's last mark leaves its disk)
wait_for b "p['replication'] == 'established'" 60
wait_for a "v['disk'] == 'uptodate'" 30
ctl_on b wait-sync vol0 --timeout 30 || fail "a and b not in sync after the forced promotion"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" --nbd "127.0.0.1:${NBDP[b]}" \
	"$T/b/vol0.img" || fail "b does not serve every acknowledged write"
stop a
stop b
cmp -n $((64 << 20)) "$T/a/vol0.img" "$T/b/vol0.img" || fail "the replicas differ"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" ||
	fail "a did not resync from b"
kill_witness TERM
log "ok"
