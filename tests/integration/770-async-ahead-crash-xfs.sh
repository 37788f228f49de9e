#!/usr/bin/env bash
# A consistent point survives catch-up: b's image lives on XFS (a loop
# device), where a reflink copy is cheap. a streams async to b over a
# 20 Mbit/s link with a 4M backlog while one client writes stamped 4K
# blocks one at a time (as in 750). The backlog overflows: a goes ahead, and
# b, before the first resync write lands, keeps a reflink copy of its image
# (status: consistent_copy). During that resync a is killed; b is promoted
# with --force and starts from the kept copy, not from the half-resynced
# mix: its image must be a prefix of a's write order. The copy is gone
# afterwards.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3 mkfs.xfs losetup
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for a loop device" >&2; exit 77; }

XFS_SIZE=1G xfs_loop "$T/xfs" -m reflink=1

export VOL_SIZE=64M PROXY=1 PEER_TIMEOUT=4 REPL_MODE=async
NBLK=4096
write_config2 "$T/c.ini" "async-backlog = 4M" "disk.b = $T/xfs/vol0.img"
proxy_start
start_pair
proxy rate 20mbit

python3 "$TANDEM_TOOLS/stampwriter.py" write "${NBDP[a]}" "$NBLK" "$T/acked" 2>"$T/writer.err" &
wpid=$!
track "$wpid"
wait_for b "p['replication'] == 'behind' and v['consistent_copy'] is not None" 60
copy=$(jfield b "v['consistent_copy']['path']")
[ -f "$copy" ] || fail "status names $copy, which does not exist"
log "b keeps $copy from $(jfield b "v['consistent_copy']['time']")"
sleep 1.5
[ "$(jfield b "p['replication']")" = behind ] || log "note: the resync ended before the crash"
kill -STOP "$wpid"
crash a
kill -CONT "$wpid"
wait "$wpid" 2>/dev/null || true
acked=$(cat "$T/acked")
wait_for b "p['connection'] != 'connected'" 30
ctl_on b primary vol0 --force >/dev/null || fail "b: primary --force failed"
[ "$(jfield b "v['role']")" = primary ] || fail "b did not become primary"
stop b
python3 "$TANDEM_TOOLS/stampwriter.py" check "$T/xfs/vol0.img" "$NBLK" "$acked" || fail "b's image is not a prefix of a's writes"
grep -q "consistent image kept before the resync" "$T/b.log" ||
	fail "b did not start from its kept copy"
if [ -e "$copy" ]; then fail "the copy is still there after it was restored"; fi
