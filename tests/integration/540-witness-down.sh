#!/usr/bin/env bash
# The witness goes away, then the peer too:
#  1. witness killed: writes on a go on (the peer acknowledges them);
#  2. then b is killed: a has no quorum: writes wait (none is acknowledged),
#     status says quorum false;
#  3. the witness is started again (from its state file): the waiting writes
#     complete and new ones are acknowledged without any command, a still
#     primary;
#  4. b returns, resyncs; replicas identical, every acknowledged write on both.
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
kill_witness
wait_for a "not v['witness']['session']" 10
n=$(acked "$T/acked")
wait_acked "$T/acked" $((n + 300)) 20
[ "$(jfield a "v['quorum']")" = True ] || fail "a lost quorum while its peer is there"
log "witness down: writes went on ($(acked "$T/acked") acknowledged)"

crash b
wait_for a "not v['quorum']" 10
sleep 1
n=$(acked "$T/acked")
sleep 2
[ "$(acked "$T/acked")" -eq "$n" ] || fail "a acknowledged writes without quorum ($n, then $(acked "$T/acked"))"
[ "$(jfield a "v['witness']['held_writes']")" -ge 1 ] || fail "no write is held on a"
[ "$(jfield a "v['role']")" = primary ] || fail "a stepped down too early"
log "no quorum: $n acknowledged, none since"

start_witness
wait_acked "$T/acked" $((n + 200)) 15
wait_for a "v['quorum'] and v['role'] == 'primary'"
log "witness back: writes resumed ($(acked "$T/acked") acknowledged)"
client_stop
grep -q '^# gap' "$T/acked" && fail "a write failed on a"

start b
wait_connected
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing"
stop a
stop b
kill_witness TERM
log "ok"
