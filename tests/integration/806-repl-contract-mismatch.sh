#!/usr/bin/env bash
# One contract for both nodes of a volume (SPEC guarantee 10): a and b with
# their own config files.
#  1. vol0 sync on a, async on b: the handshake is refused, again on every
#     retry; both logs name both values, both statuses show the connection
#     not established with that reason.
#  2. b with another peer-timeout, then with `nodes = b a`: refused likewise.
#  3. b with a's file again (restarted): they connect and sync.
#  4. `tandemctl set vol0 replication=async` on a: b takes it too (both
#     statuses say async); `set replication=sync` on b: a takes it. With b
#     stopped, `set` on a is refused and changes nothing; b restarted connects.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=64M
write_config2 "$T/a.ini"
cp "$T/a.ini" "$T/same.ini"

# mismatch_lines NODE KEY ON_A ON_B: the lines of NODE's log (this run) that
# name the mismatch of KEY with both values (in either order).
mismatch_lines()
{
	this_run "$1" | grep -F "$2 is" | grep -F "$3 on a" | grep -F "$4 on b" || true
}

# refused_with KEY ON_A ON_B: both logs and both statuses name the mismatch
# of KEY with both values, the nodes do not connect, and both retried.
refused_with()
{
	local n i
	for ((i = 0; i < 200; i++)); do
		[ "$(mismatch_lines a "$@" | wc -l)" -ge 2 ] && [ "$(mismatch_lines b "$@" | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	for n in a b; do
		[ "$(mismatch_lines $n "$@" | wc -l)" -ge 2 ] ||
			{ this_run $n | tail -n 20 >&2; fail "$n's log does not name $1 with both values, twice"; }
		[ "$(jfield $n "p['connection']")" != connected ] || fail "$n connected despite the mismatch"
		jfield $n "p['error']" | grep -F "$1 is" | grep -F "$2 on a" | grep -qF "$3 on b" ||
			fail "$n's status does not say why: $(jfield $n "p['error']")"
	done
	log "refused: a: $(jfield a "p['error']")"
	log "refused: b: $(jfield b "p['error']")"
}

# wait_log NODE TEXT: until NODE's log has TEXT (10 s).
wait_log()
{
	local i
	for ((i = 0; i < 100; i++)); do
		grep -qF "$2" "$T/$1.log" && return 0
		sleep 0.1
	done
	fail "$1's log has no '$2'"
}

# ---- 1. sync on a, async on b ----
sed 's/^replication = sync$/replication = async/' "$T/a.ini" >"$T/b.ini"
start a "$T/a.ini"
start b "$T/b.ini"
refused_with replication sync async

# ---- 2. peer-timeout, nodes order ----
stop b
sed 's/^peer-timeout = .*/peer-timeout = 3/' "$T/a.ini" >"$T/b.ini"
start b "$T/b.ini"
refused_with peer-timeout "2 s" "3 s"
stop b
sed 's/^nodes = a b$/nodes = b a/' "$T/a.ini" >"$T/b.ini"
start b "$T/b.ini"
refused_with nodes "'a b'" "'b a'"

# ---- 3. the same file: connected, in sync ----
stop b
start b "$T/same.ini"
wait_connected
wait_for a "p['replication'] == 'established'"
python3 - "${NBDP[a]}" <<'EOF' || fail "writing through a failed"
import os, sys
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import Conn
c = Conn("127.0.0.1", int(sys.argv[1]))
for i in range(8):
    c.req(1, i << 20, 1 << 20, os.urandom(1 << 20))  # WRITE
c.req(3, 0, 0)  # FLUSH
EOF
ctl_on a wait-sync vol0 --timeout 30 || fail "not in sync"
compare_replicas

# ---- 4. set acts on both nodes or on none ----
ctl_on a set vol0 replication=async >/dev/null || fail "set replication=async on a failed"
wait_for b "p['mode'] == 'async'" 10
[ "$(jfield a "p['mode']")" = async ] || fail "a: mode is not async after set"
ctl_on b set vol0 replication=sync >/dev/null || fail "set replication=sync on b failed"
wait_for a "p['mode'] == 'sync'" 10
[ "$(jfield b "p['mode']")" = sync ] || fail "b: mode is not sync after set"
ctl_on a set vol0 async-backlog=32M on-congestion=block >/dev/null || fail "set bounds on a failed"
wait_log b "async-backlog 33554432, async-max-lag 0 s, on-congestion block (set on a)"
stop b
out=$(ctl_on a set vol0 replication=async 2>&1) && fail "set with the peer away succeeded: $out"
echo "$out" | grep -q "not connected" || fail "the refusal does not say why: $out"
log "set refused: $out"
[ "$(jfield a "p['mode']")" = sync ] || fail "a refused set but its mode changed"
ctl_on a set vol0 on-congestion=ahead async-backlog=64M >/dev/null 2>&1 &&
	fail "set of the bounds with the peer away succeeded"
# a still has the bounds both took; b's file has the defaults: refused
start b "$T/same.ini"
refused_with async-backlog 33554432 67108864
stop b
stop a
start a "$T/same.ini"
start b "$T/same.ini"
wait_connected
ctl_on a wait-sync vol0 --timeout 30 || fail "not in sync after both restarted"
compare_replicas
stop b
stop a
