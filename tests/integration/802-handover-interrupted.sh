#!/usr/bin/env bash
# on-disk-failure = handover, interrupted (H2): a's disk fails while b
# cannot take over yet, a's release does not reach the witness, and b is
# then killed.
#  1. b's link to the witness is cut, so b has no witness session; a
#     writes data that both nodes have. Then a's link to the witness is cut
#     too (a's session lives on until witness-timeout).
#  2. a's disk fails (`inject vol0 write`): a steps down, sends its release
#     (W2) into the cut link, and asks b to take over; b's claim cannot
#     reach the witness. b is killed: neither node is primary, and a is
#     diskless.
#  3. a's witness link is back: a's new session finds the record still
#     naming a, and a releases it again.
#  4. b's witness link is back and b restarts: a asks it again, and b takes
#     over by itself, through the witness, without an operator. The data a
#     acknowledged is on b; `attach` on a fills a's disk from b and the
#     replicas end identical.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3
need qemu-io

export VOL_SIZE=64M
write_config3 "$T/cluster.ini"
sed -i "s|^secret = .*|&\non-disk-failure = handover|" "$CFG"
fault_injection_on a

start_trio
wait_for a "v['role'] == 'primary' and p['disk'] == 'uptodate'" 30
: >"$T/expect"
put a 0 $((4 << 20)) "$T/expect"
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 30

# 1-2. b without the witness, then a; a's disk fails.
link bw cut
wait_for b "not v['witness']['session']" 20
link aw cut
ctl_on a inject vol0 write >/dev/null || fail "inject refused"
# a's next write meets the error (a client write, as a user's would)
qemu-io -f raw "$(uri a)" -c "write -P 0x5a $((8 << 20)) 4096" >"$T/qio2.out" 2>&1 || true
wait_for a "v['role'] == 'secondary' and v['disk'] in ('failed', 'diskless')" 20
this_run a | grep -q "handing the primary role to b (on-disk-failure = handover)" ||
	fail "a's log does not say it hands over"
[ "$(jfield b "v['role']")" = secondary ] || fail "b took over without the witness"
crash b
wait_for a "not v['witness']['session']" 20
[ "$(jfield a "v['role']")" = secondary ] || fail "a is primary again without a disk or a peer"
[ "$(wrec "r['primary']")" = a ] || fail "the record does not name a: a's release was not lost"
log "a stepped down, its release lost, b killed before it took over: no primary"

# 3. a's session back: the record is released.
link aw restore
wait_for a "v['witness']['session']" 20
for ((i = 0; i < 100; i++)); do
	[ -z "$(wrec "r['primary'] or ''")" ] && break
	sleep 0.1
done
[ -z "$(wrec "r['primary'] or ''")" ] ||
	fail "the record still names $(wrec "r['primary']") 10 s after a's session is back"
this_run a | grep -q "releases the record again" || fail "a's log does not say it released again"

# 3. b back with its witness link: it takes over by itself.
link bw restore
start b
wait_for b "v['role'] == 'primary'" 40
this_run b | grep -q "the witness agrees" || fail "b did not take over through the witness"
[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b"
this_run a | grep -q "asking b again to take over" || fail "a's log does not say it asked again"
[ "$(jfield a "v['role']")" = secondary ] || fail "a is not secondary"
cmp -n $((4 << 20)) "$T/expect" "$T/b/vol0.img" || fail "b lacks what a acknowledged"
qemu-io -f raw "$(uri b)" -c "read -P 0 $((16 << 20)) 4096" >/dev/null ||
	fail "b does not serve"
log "b took over once back: $(wrec "r['primary']") named by the witness"

out=$(ctl_on a attach vol0 2>&1) || fail "attach failed: $out"
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas 90
stop a
stop b
kill_witness TERM
log "ok"
