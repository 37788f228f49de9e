#!/usr/bin/env bash
# The seed's geometry: 2 ms round trip between the nodes' sites, 200 ms to
# the witness's site (the link proxies add 1 ms and 100 ms each way):
#  1. writes on the primary are not slowed by the witness's distance: one
#     client writing one block at a time gets well over 10 writes a second
#     acknowledged (with the witness on the write path it could not: 200 ms
#     each);
#  2. kill -9 of the primary: b still takes over by itself, and the client's
#     gap between its last write on a and its first on b is under 5 s;
#  3. every acknowledged write is on b, and after a rejoins, on both.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

WITNESS_TIMEOUT=3 write_config3 "$T/cluster.ini"
start_trio
link ab delay 1
link aw delay 100
link bw delay 100
# the sessions survive the delay (pings every witness-timeout / 4)
sleep 2
wait_for a "v['witness']['session']"
RATE=0 client_start a b
wait_acked "$T/acked" 20
n0=$(acked "$T/acked")
sleep 2
n1=$(acked "$T/acked")
log "writes acknowledged in 2 s with the witness 200 ms away: $((n1 - n0))"
[ $((n1 - n0)) -gt 20 ] || fail "writes are slow: $((n1 - n0)) in 2 s"
crash a
wait_for b "v['role'] == 'primary'" 15
wait_acked "$T/acked" $(($(acked "$T/acked") + 50)) 20
client_stop
gap=$(awk '/^# gap/ { print $4 - $3 }' "$T/acked" | head -n 1)
[ -n "$gap" ] || fail "the client never had to fail over"
log "failover gap with the witness 200 ms away: $gap s"
python3 -c "import sys; sys.exit(0 if float('$gap') < 5 else 1)" || fail "failover took $gap s"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing on b"
start a
wait_connected 60
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas
stop a
stop b
kill_witness TERM
log "ok"
