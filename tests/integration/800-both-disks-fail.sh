#!/usr/bin/env bash
# Both disks fail, one after the other, and both old disks are attached
# again: the volume comes back with every acknowledged write, from the copy
# that holds them, whichever disk is attached first (F2, D4).
# Part 1, the primary's disk first:
#  1. The stamped checker writes to a over NBD. a's store fails (`inject
#     vol0 write`): a detaches it and serves through b.
#  2. b's store fails too: no copy is left in service; writes fail (EIO)
#     rather than being acknowledged anywhere. b's old disk holds every
#     acknowledged write: each went to it until it failed.
#  3. b's old disk is attached first: it comes back up to date (a kept the
#     generation), a serves through it at once, and a's own old disk,
#     attached next, gets only what changed.
# Part 2, the secondary's disk first (the copy that must not win):
#  4. b's store fails: a writes alone, acknowledged, in a new generation.
#  5. a's store fails too: writes fail.
#  6. b's old disk is attached first: it must stay outdated (a's copy is
#     newer; before F2 it would have been served from). a's old disk,
#     attached next, is up to date at once (no write went only to b), and
#     b gets what changed.
# Part 3, a primary alone whose disk fails, then a restart:
#  7. b is killed: a writes alone (the witness knows). a's store fails:
#     writes fail. a is killed.
#  8. b restarts: the witness refuses its claim (a wrote alone): outdated.
#  9. a restarts, its disk still failed (latched), and attaches its old
#     disk: it comes back as a restarted disk would (consistent), the
#     connect finds it the newer copy, and a is primary again with every
#     write it acknowledged alone; b gets what changed. Before, the
#     attach threw a's data away and both copies ended outdated: no
#     primary, and a's writes were gone.
# Each part ends with the replicas identical and the checker finding every
# block at its last acknowledged version or a later attempted one.
# Before F2 a secondary's attach always threw its data away (a full
# resync): after part 1's double failure that left no copy at all, and
# both nodes refused each other for good.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M
QUORUM_TIMEOUT=5 write_config3 "$T/cluster.ini"
fault_injection_on a b
start_trio
wait_for a "v['role'] == 'primary' and p['disk'] == 'uptodate'" 30
BLOCKS=2048

# verify_all PART: the replicas identical, every stamped block at its last
# acknowledged version or a later attempted one, through a and in both images
verify_all()
{
	compare_replicas 90
	python3 "$TANDEM_TOOLS/checker.py" verify --state "$T/check.json" \
		--nodes "127.0.0.1:${NBDP[a]}" "$T/a/vol0.img" "$T/b/vol0.img" ||
		fail "$1: the checker found acknowledged writes lost"
}

# 1. a's disk fails: a serves through b
checker_start 800
ctl_on a inject vol0 write >/dev/null || fail "inject on a refused"
wait_for a "v['disk'] == 'diskless'" 30
log "a detached its disk: $(jfield a "v['disk_error']")"
sleep 1

# 2. b's disk fails too
ctl_on b inject vol0 write >/dev/null || fail "inject on b refused"
wait_for b "v['disk'] == 'failed'" 30
sleep 1
out=$(ctl_on a attach vol0 2>&1) && fail "a's old disk taken back although writes went only to b: $out"
log "attach on a refused: $out"

# 3. b's old disk first
out=$(ctl_on b attach vol0 2>&1) || fail "attach on b: $out"
wait_for b "v['disk'] == 'uptodate'" 30
wait_for a "p['disk'] == 'uptodate' and p['replication'] == 'established'" 30
this_run b | grep -q 'the old disk is back, consistent' || fail "b does not say its old disk is back"
if this_run a | grep -q 'full sync'; then fail "a full sync after the old disk came back"; fi
out=$(ctl_on a attach vol0 2>&1) || fail "attach on a: $out"
wait_for a "v['role'] == 'primary' and v['disk'] == 'uptodate' and p['disk'] == 'uptodate' and p['out_of_sync_bytes'] == 0" 60
sleep 1
checker_stop
verify_all "part 1"
log "part 1 ok"

# 4. b's disk fails: a writes alone
checker_start 801
ctl_on b inject vol0 write >/dev/null || fail "inject on b refused"
wait_for b "v['disk'] == 'failed'" 30
wait_for a "p['disk'] == 'failed'" 30
sleep 1
this_run a | grep -q 'writing without b: new data generation' || fail "a wrote alone without a new generation"

# 5. a's disk fails too
ctl_on a inject vol0 write >/dev/null || fail "inject on a refused"
wait_for a "v['disk'] == 'failed'" 30
sleep 1

# 6. b's old disk first: it must not become the copy a serves from
out=$(ctl_on b attach vol0 2>&1) || fail "attach on b: $out"
sleep 3
[ "$(jfield b "v['disk']")" = outdated ] || fail "b's old disk is $(jfield b "v['disk']"), expected outdated: a holds newer writes"
[ "$(jfield a "v['disk']")" = failed ] || fail "a's disk is $(jfield a "v['disk']")"
out=$(ctl_on a attach vol0 2>&1) || fail "attach on a: $out"
wait_for a "v['role'] == 'primary' and v['disk'] == 'uptodate' and p['disk'] == 'uptodate' and p['out_of_sync_bytes'] == 0" 60
sleep 1
checker_stop
verify_all "part 2"
log "part 2 ok"

# 7. a alone, then its disk fails, then it dies
checker_start 802
crash b
wait_for a "p['connection'] != 'connected'" 20
sleep 2
this_run a | grep -q "the witness knows this node writes alone" || fail "a did not write alone"
ctl_on a inject vol0 write >/dev/null || fail "inject on a refused"
wait_for a "v['disk'] == 'failed'" 30
sleep 1
crash a

# 8. b back: refused
start b
wait_for b "v['disk'] == 'outdated'" 30
[ "$(jfield b "v['role']")" = secondary ] || fail "b took over although a wrote alone"

# 9. a back, its old disk attached
start a
wait_for a "v['disk'] == 'failed'" 30
out=$(ctl_on a attach vol0 2>&1) || fail "attach on a: $out"
wait_for a "v['role'] == 'primary' and v['disk'] == 'uptodate' and p['disk'] == 'uptodate' and p['out_of_sync_bytes'] == 0" 60
if this_run a | grep -q 'full sync'; then fail "a full sync after a's old disk came back"; fi
sleep 1
checker_stop
verify_all "part 3"
stop a
stop b
kill_witness TERM
log "ok"
