#!/usr/bin/env bash
# Simulated crashes (`tandemctl inject vol0 crash`, src/bs/bs_crash.c): the
# node's store plays a disk with a volatile write cache, and at a random
# crash point (a data write, a flush, a superblock, attribute or bitmap page
# write) the node dies, leaving a prefix of its unflushed writes, the next
# one torn, and the metadata write at that point torn. The stamped checker
# (tests/tools/checker.py) writes throughout, over NBD in some rounds and
# iSCSI in others, with a flush every 16 writes, failing over between the
# nodes by itself. Rounds, each from a seed
# printed in the log (CRASH_SEED=N replays them):
#   - the secondary crashes; it restarts from what the crash left, is
#     resynced, and the replicas end identical;
#   - the primary crashes; b takes over (witness), the checker goes on
#     there; a restarts as secondary from what the crash left and is
#     resynced.
# After each round the checker finds, through NBD on the primary and in
# both images, every block at its last acknowledged version or a later
# attempted one: no acknowledged write is lost, nothing is torn.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M
write_config3 "$T/cluster.ini"
IQN=iqn.2026-11.org.tandem:it.vol0
declare -A ISCP=()
for n in a b; do
	ISCP[$n]=$(free_port)
	sed -i "s|^nbd = 127.0.0.1:${NBDP[$n]}\$|&\nfault-injection = on\niscsi = 127.0.0.1:${ISCP[$n]}|" "$CFG"
done
[ "$(grep -c '^iscsi = ' "$CFG")" = 2 ] || fail "iscsi lines not in the config"
[ "$(grep -c '^fault-injection = on' "$CFG")" = 2 ] || fail "fault-injection not in the config"
start_trio
wait_for a "p['disk'] == 'uptodate'" 30

seed=${CRASH_SEED:-$(($(date +%s) % 100000))}
log "seed $seed (CRASH_SEED=$seed replays it)"
RANDOM=$seed
BLOCKS=4096 # 16 MiB of 4 KiB blocks

# died NODE: waits until NODE killed itself at its crash point (30 s).
died()
{
	local n=$1 pid=${NPID[$1]} i
	for ((i = 0; i < 300; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	alive "$pid" && fail "$n did not reach its crash point within 30 s"
	wait "$pid" 2>/dev/null || true
	_forget "$pid"
	NPID[$n]=""
	wait_released "$T/$n.sock" "${NBDP[$n]}" "${REPP[$n]}"
	grep 'simulated crash at point' "$T/$n.log" | tail -n 1 | sed 's/^.*tandemd warning: //' >&2
}

verify()
{
	local primary=$1
	compare_replicas 90
	python3 "$TANDEM_TOOLS/checker.py" verify --state "${STATE:-$T/check.json}" ${FLUSHED:+--flushed} \
		--nodes "127.0.0.1:${NBDP[$primary]}" "$T/a/vol0.img" "$T/b/vol0.img" ||
		fail "the checker found acknowledged writes lost or torn"
}

# a round: VICTIM (primary or secondary) crashes at a point of KIND
crash_round()
{
	local victim=$1 kind=$2 role after cseed proto=${3:-nbd}
	round=$((round + 1))
	primary=a secondary=b
	if [ "$(jfield b "v['role']")" = primary ]; then
		primary=b secondary=a
	fi
	[ "$(jfield $primary "v['role']")" = primary ] || fail "no primary before round $round"
	role=$victim
	if [ "$victim" = secondary ]; then victim=$secondary; else victim=$primary; fi
	after=$((RANDOM % 400))
	cseed=$((RANDOM * 32768 + RANDOM))
	log "round $round: $victim ($role) crashes at $kind point $((after + 1)), seed $cseed, the checker over $proto"
	PROTO=$proto checker_start "$((seed + round))"
	ctl_on "$victim" inject vol0 crash --at "$kind" --after "$after" --seed "$cseed" \
		>/dev/null || fail "inject crash refused"
	died "$victim"
	if [ "$victim" = "$primary" ]; then
		wait_for "$secondary" "v['role'] == 'primary'" 30
		primary=$secondary
	fi
	sleep 1
	start "$victim"
	wait_for "$victim" "p['connection'] == 'connected'" 30
	wait_for "$primary" "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
	checker_stop
	verify "$primary"
	log "round $round: $victim restarted from the crash and resynced; no acknowledged write lost"
}

round=0
if [ -z "${CRASH_META_ONLY:-}" ]; then
	crash_round secondary any
	crash_round primary write iscsi
	crash_round secondary flush
	crash_round primary any iscsi
fi

# The primary alone (its peer stopped) crashes at a metadata write: the
# superblock of the new generation, an activity log or change bitmap page.
# It restarts from what the crash left: the metadata is whole (one of its
# two slots), every region written while the peer was away is still marked,
# and the resync brings the peer every one of them. Writes not yet flushed
# when the only copy crashed may be lost; flushed ones may not.
round=$((round + 1))
primary=a secondary=b
if [ "$(jfield b "v['role']")" = primary ]; then
	primary=b secondary=a
fi
stop "$secondary"
after=$((RANDOM % 6))
cseed=$((RANDOM * 32768 + RANDOM))
log "round $round: $primary (primary, $secondary stopped) crashes at meta point $((after + 1)), seed $cseed"
ctl_on "$primary" inject vol0 crash --at meta --after "$after" --seed "$cseed" >/dev/null ||
	fail "inject crash refused"
# (on blocks not written before, from 32 MiB: their extents are cold, so
# the writes need activity log and change bitmap pages)
STATE=$T/check2.json FIRST=8192 checker_start "$((seed + round))"
died "$primary"
checker_stop
start "$primary"
wait_for "$primary" "v['role'] == 'primary'" 30
start "$secondary"
wait_for "$primary" "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
verify "$primary"
STATE=$T/check2.json FLUSHED=1 verify "$primary"
log "round $round: $primary restarted from the crash with whole metadata, and its marks brought $secondary every write"
stop a
stop b
kill_witness TERM
log "ok"
