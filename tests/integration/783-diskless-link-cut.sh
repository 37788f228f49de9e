#!/usr/bin/env bash
# A diskless primary (its store fails every write: `tandemctl inject`) loses
# and regains its link to the peer, which holds the only copy:
#  1. The a-b link is cut (blackholed). a cannot serve without b: a read
#     and a write fail with an error (EIO), within the peer timeout, never
#     hang; a stays primary (the witness keeps it), b is not promoted.
#  2. The link returns: a and b connect again without a resync either
#     way (neither is a sync target: a's disk is gone) and a serves through
#     b again: fio's verify pass over a finds every block written before.
#  3. A new disk is attached to a while the link is slow (50 ms each way);
#     the link is cut during the copy: the copy pauses and a's requests
#     fail; the link returns: the copy resumes by itself and ends, a's
#     new disk up to date and identical to b's.
#  4. a's new disk fails too; a third disk is attached over the slow link
#     and a switchover to b is asked during the copy: a stops copying once
#     its pieces in flight are done, b becomes primary, a secondary; a's
#     disk is then resynced from b like any inconsistent secondary, and the
#     replicas end identical.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3 fio qemu-io

export VOL_SIZE=64M
write_config3 "$T/cluster.ini"
fault_injection_on a
start_trio
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 30
ctl_on a inject vol0 write || fail "inject refused"
fio_args=(--name=v --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=64k --iodepth=4
	--size=32M --verify=crc32c --verify_fatal=1 --do_verify=1 --randseed=783)
fio "${fio_args[@]}" >"$T/fio1.out" 2>&1 || fail "fio on the diskless a: $(cat "$T/fio1.out")"
wait_for a "v['disk'] == 'diskless'" 10

# 1. the link is cut: errors, no hang
link ab drop
t0=$(date +%s.%N)
out=$(timeout 30 qemu-io -f raw "$(uri a)" -c "read 0 4096" 2>&1) &&
	echo "$out" | grep -q "^read" && fail "a served a read without its peer: $out"
out=$(timeout 30 qemu-io -f raw "$(uri a)" -c "write -P 0x5a 40M 4096" 2>&1) &&
	echo "$out" | grep -q "^wrote" && fail "a took a write without its peer: $out"
t1=$(date +%s.%N)
log "without its peer, a's read and write failed within $(echo "$t1 - $t0" | bc) s"
[ "$(jfield a "v['role']")" = primary ] || fail "a is no longer primary"
[ "$(jfield b "v['role']")" = secondary ] || fail "b was promoted while a is primary"

# 2. the link returns
link ab restore
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate' and v['disk'] == 'diskless'" 60
this_run a | grep -q "sync target\|split brain" && fail "a refused b: $(this_run a | grep 'sync target\|split brain')"
this_run b | grep -q "sync target\|split brain" && fail "b refused a: $(this_run b | grep 'sync target\|split brain')"
fio "${fio_args[@]}" --verify_only >"$T/fio2.out" 2>&1 ||
	fail "fio's verify pass over a after the link returned: $(cat "$T/fio2.out")"
log "the link returned: a serves through b again, every block as written"

# 3. a new disk, filled over a slow link that is cut on the way
link ab delay 50
ctl_on a attach vol0 --disk "$T/a/new.img" || fail "attach on a failed"
wait_for a "p['replication'] == 'synctarget'" 10
sleep 1
pct=$(jfield a "p['sync_percent']")
link ab drop
wait_for a "p['connection'] != 'connected'" 30
out=$(timeout 30 qemu-io -f raw "$(uri a)" -c "read 0 4096" 2>&1) &&
	echo "$out" | grep -q "^read" && fail "a served a read of a region not yet copied, without its peer: $out"
log "link cut at ${pct}% of the copy: a's requests fail, the copy waits"
[ "$(jfield a "v['disk']")" = inconsistent ] || fail "a's disk is $(jfield a "v['disk']")"
link ab restore
link ab delay 0
wait_for a "v['disk'] == 'uptodate' and p['replication'] == 'established'" 90
this_run a | grep -q "copying to the attached disk paused" || fail "a does not say the copy paused"
IMG_A=$T/a/new.img compare_replicas
fio "${fio_args[@]}" --verify_only >"$T/fio3.out" 2>&1 ||
	fail "fio's verify pass over a's new disk: $(cat "$T/fio3.out")"
log "the copy resumed and ended: a's new disk is identical to b's"

# 4. a switchover in the middle of a copy
ctl_on a inject vol0 write || fail "inject refused"
qemu-io -f raw "$(uri a)" -c "write -P 0x77 40M 1M" >"$T/w4.out" 2>&1 || fail "write: $(cat "$T/w4.out")"
wait_for a "v['disk'] == 'diskless'" 10
link ab delay 50
ctl_on a attach vol0 --disk "$T/a/third.img" || fail "attach of a third disk failed"
wait_for a "p['replication'] == 'synctarget'" 10
sleep 0.5
ctl_on a switchover vol0 || fail "switchover during the copy failed"
wait_for b "v['role'] == 'primary'" 20
wait_for a "v['role'] == 'secondary'" 20
this_run a | grep -q "filling the attached disk stopped" || fail "a does not say it stopped copying"
link ab delay 0
wait_for a "v['disk'] == 'uptodate'" 90
IMG_A=$T/a/third.img compare_replicas
log "switchover during a copy: b primary, a's third disk resynced from b, replicas identical"
stop a
stop b
kill_witness TERM
log "ok"
