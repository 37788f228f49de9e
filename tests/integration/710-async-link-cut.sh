#!/usr/bin/env bash
# Async replication over a link that stops: a streams to b through the link
# proxy. While the link is cut (blackhole: no FIN, no RST), writes to a keep
# completing at local speed, and a's status shows the backlog and the lag
# growing. Restored within the peer timeout, the backlog drains over the same
# connection. Switched to sync online (tandemctl set) with a backlog, the
# first sync write completes only once the backlog is acknowledged, and the
# connection stays. Cut for longer, the connection is declared lost, the backlog
# becomes out-of-sync regions, and the reconnect resyncs them. Both times the
# replicas end byte-identical.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy qemu-io python3

export VOL_SIZE=256M PROXY=1 PEER_TIMEOUT=6 REPL_MODE=async
write_config2 "$T/c.ini" "async-backlog = 256M"
proxy_start
start_pair
[ "$(jfield a "p['mode']")" = async ] || fail "a: mode is not async"

# 1. a short cut: the backlog grows, then drains on the same connection
proxy cut
head -c 64M /dev/urandom >"$T/in1"
t0=$(date +%s.%N)
nbdcopy --flush "$T/in1" "$(uri a)" || fail "nbdcopy to a failed during the cut"
t1=$(date +%s.%N)
secs=$(echo "$t1 - $t0" | bc)
log "64M written during the cut in $secs s"
python3 -c "import sys; sys.exit(0 if $secs < 4 else 1)" ||
	fail "writes waited on the cut link ($secs s for 64M)"
b1=$(jfield a "p['backlog_bytes']")
l1=$(jfield a "p['lag_seconds']")
[ "$b1" -ge $((32 << 20)) ] || fail "backlog during the cut is $b1 bytes (expected >= 32M)"
sleep 1
l2=$(jfield a "p['lag_seconds']")
python3 -c "import sys; sys.exit(0 if $l2 > $l1 and $l2 >= 1 else 1)" ||
	fail "lag did not grow during the cut ($l1 then $l2)"
[ "$(jfield a "p['lag_bytes'] >= $b1")" = True ] || fail "lag_bytes below the backlog"
log "during the cut: backlog $b1 bytes, lag $l1 s then $l2 s"
proxy restore
wait_for a "p['backlog_bytes'] == 0 and p['replication'] == 'established'" 60
[ "$(jfield a "p['lag_seconds']")" = 0.0 ] || fail "lag not 0 once drained"
grep -q "lost b" "$T/a.log" && fail "the short cut lost the connection"
compare_replicas

# 2. online switch to sync with a backlog: the connection stays, and a sync
# write completes only once the backlog is acknowledged
proxy cut
head -c 32M /dev/urandom >"$T/in3"
nbdcopy --flush "$T/in3" "$(uri a)" || fail "nbdcopy to a failed"
[ "$(jfield a "p['backlog_bytes'] > 0")" = True ] || fail "no backlog before the switch"
ctl_on a set vol0 replication=sync >/dev/null || fail "set replication=sync failed"
[ "$(jfield a "p['mode']")" = sync ] || fail "a: mode is not sync after set"
( sleep 1; python3 "$_root/tests/tools/linkproxy.py" --control "$T/proxy.sock" --cmd restore >/dev/null ) &
track $!
qemu-io -f raw "$(uri a)" -c "write -P 0x5a 0 64k" >/dev/null || fail "sync write after the switch failed"
[ "$(jfield a "p['backlog_bytes']")" = 0 ] || fail "a sync write completed before the backlog drained"
[ "$(grep -c "connection to b: connecting -> connected" "$T/a.log")" = 1 ] ||
	fail "the switch to sync reconnected"
ctl_on a set vol0 replication=async >/dev/null || fail "set replication=async failed"
[ "$(jfield a "p['mode']")" = async ] || fail "a: mode is not async after set"
ctl_on a set vol0 replication=bogus >/dev/null 2>&1 && fail "set accepted replication=bogus"
compare_replicas

# 3. a cut longer than the peer timeout: the backlog becomes a resync
proxy cut
head -c 48M /dev/urandom >"$T/in2"
nbdcopy --flush "$T/in2" "$(uri a)" || fail "nbdcopy to a failed during the long cut"
wait_for a "p['connection'] != 'connected'" 30
[ "$(jfield a "p['backlog_bytes']")" = 0 ] || fail "a backlog remains without a connection"
[ "$(jfield a "p['out_of_sync_bytes'] >= 40 << 20")" = True ] ||
	fail "the lost backlog is not out of sync: $(jfield a "p['out_of_sync_bytes']")"
[ "$(jfield a "p['lag_seconds'] > 0")" = True ] || fail "no lag while the peer is away"
proxy restore
wait_for a "p['replication'] == 'established' and p['out_of_sync_bytes'] == 0" 90
compare_replicas
stop b
stop a
