#!/usr/bin/env bash
# Async: the secondary's image is always an earlier state of the primary's.
# One client writes 4K blocks one at a time to a (each stamped with its write
# number; two passes over the blocks in a shuffled order, so the second pass
# overwrites), while a streams to b over a link with 150 ms of delay each
# way. The link then drops (what is on it never arrives), the writes go on
# for a while into a's backlog, the client is paused, and a is killed (-9)
# with that backlog; b is promoted with --force. Its image must be a prefix
# of a's write order: for the newest write number K found on b, every block
# holds exactly its last write numbered <= K (or zeros when it has none), so
# no block is newer than one that is missing. What b lacks of the
# acknowledged writes is at most the backlog a's status showed last.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=64M PROXY=1 PEER_TIMEOUT=4 REPL_MODE=async
NBLK=4096
write_config2 "$T/c.ini" "async-backlog = 64M"
proxy_start
start_pair
proxy delay 150

python3 "$TANDEM_TOOLS/stampwriter.py" write "${NBDP[a]}" "$NBLK" "$T/acked" 2>"$T/writer.err" &
wpid=$!
track "$wpid"
# crash a in the second pass (overwrites), with a backlog
for ((i = 0; i < 600; i++)); do
	n=$(cat "$T/acked" 2>/dev/null || echo 0)
	[ "$n" -ge $((NBLK + NBLK / 2)) ] && break
	sleep 0.1
done
[ "$n" -ge $((NBLK + NBLK / 2)) ] || fail "the writer did only $n writes in 60 s"
proxy drop
sleep 1
kill -STOP "$wpid"
sleep 0.2
acked=$(cat "$T/acked")
backlog=$(jfield a "p['backlog_bytes']")
[ "$backlog" -gt 0 ] || fail "no backlog when a was to be killed"
crash a
kill -CONT "$wpid"
wait "$wpid" 2>/dev/null || true
proxy restore
log "a killed after $acked acknowledged writes, backlog $backlog bytes"
wait_for b "p['connection'] != 'connected'" 30
ctl_on b primary vol0 --force >/dev/null || fail "b: primary --force failed"
[ "$(jfield b "v['role']")" = primary ] || fail "b did not become primary"
stop b
python3 "$TANDEM_TOOLS/stampwriter.py" check "$T/b/vol0.img" "$NBLK" "$acked" "$backlog" || fail "b's image is not a prefix of a's writes"
