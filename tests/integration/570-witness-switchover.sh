#!/usr/bin/env bash
# Planned switchover in one command (docs/WITNESS.md N8), with a witness:
#  1. `switchover vol0` on the primary a: a demotes (both flushed), b
#     promotes through the witness; the command returns once b is primary;
#     the witness names b; its wall time is printed (the volume is idle);
#  2. `switchover vol0 a` sent to a, now the secondary: a asks b to step
#     down, then takes over;
#  3. writes on each primary in between; replicas identical at the end.
#  4. Refusals: a node the volume does not live on; a switchover with the
#     peer away.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3 qemu-io

write_config3 "$T/cluster.ini"
start_trio
put a 0 $((4 << 20))
wait_for a "p['disk'] == 'uptodate'"
t0=$(date +%s.%N)
ctl_on a switchover vol0 || fail "switchover on a failed"
t1=$(date +%s.%N)
log "switchover a -> b took $(python3 -c "print(round($t1 - $t0, 3))") s"
[ "$(jfield a "v['role']")" = secondary ] || fail "a is not secondary"
[ "$(jfield b "v['role']")" = primary ] || fail "b is not primary"
[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b: $(witness_status)"
put b $((4 << 20)) $((4 << 20))
wait_for b "p['disk'] == 'uptodate' and p['replication'] == 'established'"

t0=$(date +%s.%N)
ctl_on a switchover vol0 a || fail "switchover to a, asked on a, failed"
t1=$(date +%s.%N)
log "switchover b -> a (asked on a) took $(python3 -c "print(round($t1 - $t0, 3))") s"
[ "$(jfield a "v['role']")" = primary ] || fail "a is not primary"
[ "$(jfield b "v['role']")" = secondary ] || fail "b is not secondary"
[ "$(wrec "r['primary']")" = a ] || fail "the witness does not name a: $(witness_status)"
put a $((8 << 20)) $((4 << 20))

if ctl_on a switchover vol0 c 2>"$T/err"; then fail "switchover to an unknown node succeeded"; fi
grep -q "not on c" "$T/err" || fail "unclear refusal: $(cat "$T/err")"
compare_replicas
stop b
if ctl_on a switchover vol0 2>"$T/err"; then fail "switchover without the peer succeeded"; fi
grep -q "not connected" "$T/err" || fail "unclear refusal: $(cat "$T/err")"
stop a
kill_witness TERM
log "ok"
