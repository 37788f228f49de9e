#!/usr/bin/env bash
# A disk that starts without reaching its peer is "consistent", not
# "uptodate" (docs/SPEC.md, "When a disk is up to date"): b crashes as
# secondary, a goes on writing and stops; b started alone must refuse
# `primary` without --force, as it lacks a's acknowledged writes. Once a is
# back, the connect makes b a sync target and then uptodate. Two nodes that
# both restart become uptodate by connecting (equal), and promotion works.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-io python3

export VOL_SIZE=32M
write_config2 "$T/c.ini"
start a
start b
wait_connected
put a 0 $((4 << 20))
ctl_on a wait-sync vol0 --timeout 30 || fail "a: wait-sync"

crash b
put a $((8 << 20)) $((2 << 20)) # acknowledged by a alone
stop a

start b
[ "$(jfield b "v['disk']")" = consistent ] || fail "b started alone with disk $(jfield b "v['disk']"), expected consistent"
rc=0
ctl_on b primary vol0 2>"$T/p.err" || rc=$?
[ "$rc" -eq 1 ] || fail "b (consistent, alone) was promoted without --force (rc $rc)"
grep -q -- "--force" "$T/p.err" || fail "the refusal does not name --force: $(cat "$T/p.err")"
[ "$(jfield b "v['role']")" = secondary ] || fail "b is $(jfield b "v['role']") after a refused promotion"

start a
# (it may connect before a status call: its start line says how it opened)
this_run a | grep -c "volume vol0: secondary, consistent," >/dev/null ||
	fail "a did not restart with its disk consistent"
wait_connected
compare_replicas
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b is not uptodate after its resync"
[ "$(jfield a "v['disk']")" = uptodate ] || fail "a is not uptodate after the connect"
grep -q "replication with a: off -> synctarget" "$T/b.log" || fail "b never resynced from a"

# Both restart cleanly: both consistent until they connect, then uptodate.
stop b
stop a
start a
start b
wait_connected
wait_for a "v['disk'] == 'uptodate'" 10
wait_for b "v['disk'] == 'uptodate'" 10
ctl_on a primary vol0 || fail "a: primary after both reconnected failed"
put a 0 $((1 << 20))
compare_replicas
stop b
stop a
