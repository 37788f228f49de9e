#!/usr/bin/env bash
# A crash as primary is settled by the next handshake (repl.h R14). b is
# primary and is killed; the witness makes a primary, and b, started again,
# resyncs from a as a secondary. Then a streams async over a slow link, the
# witness dies (the pair keeps quorum through each other) and a is killed
# with writes it acknowledged still in its backlog. b, its witness gone,
# stays up to date (the witness, not b, would have judged a's loss). a
# starts again: the generations are equal, a's activity log marks what it
# was writing, neither node is primary: the copy that crashed as primary is
# the source. That is a: its acknowledged writes survive, and b gets them.
# Before, b still claimed its old crash in every STATE, the tie went to the
# up-to-date disk (b's), and the resync wrote b's older regions over a's
# acknowledged writes (the witness soak lost 663 of them).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M PEER_TIMEOUT=4 REPL_MODE=async
NBLK=2048

write_config3 "$T/c.ini" "async-backlog = 16M" "bitmap-granularity = 4K"
start_trio
ctl_on a switchover vol0 >/dev/null || fail "switchover to b failed"
wait_for b "v['role'] == 'primary' and v.get('lease', True)" 30
crash b
wait_for a "v['role'] == 'primary'" 30
start b
this_run b | grep -q "was not shut down cleanly" || fail "b did not start as crashed"
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
log "b, crashed as primary, is a's up-to-date secondary"

# a streams over a slow link: its backlog holds acknowledged writes b lacks
link ab rate 2mbit
python3 "$TANDEM_TOOLS/stampwriter.py" write "${NBDP[a]}" "$NBLK" "$T/acked" 2>"$T/writer.err" &
wpid=$!
track "$wpid"
wait_for a "p['backlog_bytes'] >= 2 << 20" 60
kill_witness
wait_for a "not v['witness']['session']" 10
crash a
wait "$wpid" 2>/dev/null || true
acked=$(cat "$T/acked")
log "a killed with $acked writes acknowledged and its backlog unsent"
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b is $(jfield b "v['disk']"), not uptodate"
link ab rate 0
start a
wait_for a "p['connection'] == 'connected'" 30
this_run a | grep -q "connected to b (generations \([0-9a-f]*\) / \1: source)" ||
	fail "a, crashed as primary, is not the source: $(this_run a | grep 'connected to b' | head -n 1)"
ctl_on a wait-sync vol0 --timeout 60 || fail "a and b not in sync"
stop a
stop b
for n in a b; do
	python3 "$TANDEM_TOOLS/stampwriter.py" check "$T/$n/vol0.img" "$NBLK" "$acked" \
		2>"$T/check.$n" || fail "$n lost acknowledged writes: $(cat "$T/check.$n")"
	k=$(sed -n 's/^the image holds the first \([0-9]*\) of.*/\1/p' "$T/check.$n")
	[ "${k:-0}" -ge "$acked" ] || fail "$n: $(cat "$T/check.$n")"
done
log "ok: both hold all $acked acknowledged writes"
