#!/usr/bin/env bash
# The primary's disk fails while its peer is being filled (a sync target):
# no whole copy is left in service, so writes fail (a medium error) rather
# than leaving their only copy on the incomplete peer (D4); the primary's
# old disk, attached again, holds every acknowledged write and comes back
# up to date at once (P7), and the resync goes on.
#  1. The stamped checker writes to a over NBD; b is invalidated: a full
#     resync from a, slowed (resync-rate = 2M) so that it lasts.
#  2. a's store fails (`inject vol0 write`) during that resync: a's disk
#     fails, b is still inconsistent. Writes fail; a acknowledges none
#     that only b holds.
#  3. `attach` on a: its old disk is up to date at once; the resync to b
#     ends; the replicas are identical and the checker finds every block
#     at its last acknowledged version or a later attempted one.
# Before D4, a counted writes that b (inconsistent) took as done, its old
# disk lacked them, and its attach was refused: no copy in service.
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
sed -i "s|^size = .*|&\nresync-rate = 2M\nresync-min-rate = 0|" "$CFG"
start_trio
wait_for a "v['role'] == 'primary' and p['disk'] == 'uptodate'" 30
BLOCKS=2048

# 1. b is refilled, slowly
checker_start 801
ctl_on b invalidate vol0 >/dev/null || fail "invalidate on b refused"
wait_for a "p['replication'] == 'syncsource'" 30
sleep 2

# 2. a's disk fails during the resync
ctl_on a inject vol0 write >/dev/null || fail "inject on a refused"
wait_for a "v['disk'] in ('failed', 'diskless')" 30
[ "$(jfield b "v['disk']")" = inconsistent ] || fail "b is $(jfield b "v['disk']"), expected inconsistent (the resync ended too soon)"
sleep 2
if this_run a | grep -q 'the old disk is back'; then fail "the old disk came back by itself"; fi

# 3. a's old disk back
out=$(ctl_on a attach vol0 2>&1) || fail "attach on a refused: $out"
this_run a | grep -q 'the old disk is back and up to date' || fail "a's old disk did not come back up to date"
wait_for a "v['disk'] == 'uptodate' and p['disk'] == 'uptodate' and p['out_of_sync_bytes'] == 0" 90
sleep 1
checker_stop
compare_replicas 90
python3 "$TANDEM_TOOLS/checker.py" verify --state "$T/check.json" \
	--nodes "127.0.0.1:${NBDP[a]}" "$T/a/vol0.img" "$T/b/vol0.img" ||
	fail "the checker found acknowledged writes lost"
stop a
stop b
kill_witness TERM
log "ok"
