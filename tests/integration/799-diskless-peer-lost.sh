#!/usr/bin/env bash
# A primary whose disk was detached (too slow) loses its peer, then dies;
# the peer must take over by itself and hold every acknowledged write (D2):
#  1. The stamped checker writes to a over NBD. a's store turns slow
#     (`inject vol0 slow --ms 300`; disk-slow-ms = 100, disk-slow-s = 2):
#     a detaches its disk and serves through b.
#  2. b is frozen (SIGSTOP) while writes are in flight, some of them
#     already written to a's detached disk and not to b. a gives b up after
#     the peer timeout. Those writes fail (EIO): their only copy is on a
#     disk a no longer counts. a acknowledges nothing alone, so the witness
#     record keeps b synced.
#  3. a is killed; b resumes: b takes over by itself (no --force), and the
#     checker goes on there.
#  4. a restarts (its disk still failed: latched) and gets its old disk
#     back with `attach`, filled from b. The checker finds every block at
#     its last acknowledged version or a later attempted one, through b
#     and in both images, and the replicas end identical.
# Before D2, a acknowledged those writes as written alone, the witness
# refused b's claim (b outdated), and the attach gave a's disk b's older
# copy: acknowledged writes lost, and no primary without --force.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M
QUORUM_TIMEOUT=5 write_config3 "$T/cluster.ini"
sed -i "s|^secret = .*|&\ndisk-slow-ms = 100\ndisk-slow-s = 2|" "$CFG"
fault_injection_on a b
start_trio
wait_for a "v['role'] == 'primary' and p['disk'] == 'uptodate'" 30
BLOCKS=2048

# 1. a's disk turns slow and is detached
checker_start 799
ctl_on a inject vol0 slow --ms 300 >/dev/null || fail "inject slow refused"
wait_for a "v['disk'] == 'diskless'" 30
log "a detached its slow disk: $(jfield a "v['disk_error']")"
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 30
sleep 1

# 2. b freezes while a writes through it
kill -STOP "${NPID[b]}"
wait_for a "p['connection'] != 'connected'" 20
sleep 1
[ "$(jfield a "v['role']")" = primary ] || fail "a is not primary any more"
rec=$(wrec "r['primary'] + ' ' + str(r['synced'])")
log "witness record with b frozen: $rec"
[ "$rec" = "a True" ] || fail "the witness record is '$rec': a diskless primary without its peer must leave b synced"
if this_run a | grep -q "the witness knows this node writes alone"; then
	fail "a, diskless, acknowledged writes alone"
fi

# 3. a dies; b resumes and takes over by itself
crash a
kill -CONT "${NPID[b]}"
wait_for b "v['role'] == 'primary'" 30
this_run b | grep -q "the witness agrees" || fail "b did not take over through the witness"
log "b took over without --force"
sleep 2
checker_stop

# 4. a comes back, gets its old disk back from b
start a
wait_for a "p['connection'] == 'connected'" 30
[ "$(jfield a "v['disk']")" = failed ] || fail "a's disk is $(jfield a "v['disk']") after the restart, expected failed (latched)"
out=$(ctl_on a attach vol0 2>&1) || fail "attach failed: $out"
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas 90
python3 "$TANDEM_TOOLS/checker.py" verify --state "$T/check.json" \
	--nodes "127.0.0.1:${NBDP[b]}" "$T/a/vol0.img" "$T/b/vol0.img" ||
	fail "the checker found acknowledged writes lost"
stop a
stop b
kill_witness TERM
log "ok"
