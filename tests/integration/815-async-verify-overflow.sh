#!/usr/bin/env bash
# A write that overflows the async backlog while a verify runs (ASYNC.md
# A9). a streams async to b over a 16 Mbit/s link with 50 ms of delay and
# a 1M backlog; the volume is 4G (sparse), so `tandemctl verify vol0` runs
# for a while. During the verify one client writes stamped 4K blocks (as in
# 750) to the first 16M: a burst that overflows the backlog, then a steady
# rate below the link's.
# The overflow must stop the verify and start the resync of what b lacks:
# b turns inconsistent (never promoted without --force) and, once that
# resync is done and b is uptodate again, its image is a prefix of a's
# write order.
# - plain (no witness): once a streams again with b uptodate and some more
#   writes are acknowledged, the link is cut and a killed; b, forced
#   primary, must hold a prefix.
# - witness: no write may fail; a is killed while b is inconsistent, and
#   b must not become primary, by itself or without --force.
# Before, the overflow was only marked: the verify went on, b stayed
# uptodate while it lacked the marked writes, later writes streamed to it
# (a torn image behind a consistent point), and with a witness a kept
# reporting b in sync, so each marked write waited for the quorum and
# failed.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=4G PEER_TIMEOUT=4 REPL_MODE=async QUORUM_TIMEOUT=8
NBLK=4096
BURST=3000 RATE=100

# ev NODE NAME: the events of NODE in round NAME.
ev() { echo "$T/$2.$1.events"; }

# overflow NAME LINK_CMD: a verify on a, then the writer (its acknowledged
# count in $T/NAME.acked, pid in WPID); returns once a went ahead.
overflow()
{
	local name=$1 link=$2
	$link delay 50
	$link rate 16mbit
	events_follow a "$(ev a "$name")"
	events_follow b "$(ev b "$name")"
	ctl_on a verify vol0 >/dev/null || fail "$name: verify did not start"
	# (the verify is past the blocks the writer uses: only the stream and
	# the resync bring them to b)
	wait_for a "p['verify']['state'] == 'running' and p['verify']['percent'] >= 1" 60
	python3 "$TANDEM_TOOLS/stampwriter.py" write "${NBDP[a]}" "$NBLK" "$T/$name.acked" \
		"$BURST" "$RATE" 2>"$T/$name.writer.err" &
	WPID=$!
	track "$WPID"
	wait_event a "$name" '"event":"congestion","from":"streaming","to":"ahead"' 60
	log "$name: the backlog overflowed at $(jfield a "p['verify']['percent']")% of the verify"
}

# stopped NAME: the overflow stopped the verify, for that reason, and b
# turned inconsistent for the resync that took its place.
stopped()
{
	local name=$1
	wait_event a "$name" '"event":"verify","from":"running","to":"aborted"' 10
	this_run a | grep -q 'verify stopped.*a write overflowed the async backlog' ||
		fail "$name: a's log does not say why the verify stopped"
	wait_event b "$name" '"event":"disk","from":"uptodate","to":"inconsistent"' 10
}

# wait_event NODE NAME PATTERN SECONDS: until NODE's events of round NAME
# hold PATTERN; fails when the writer failed meanwhile.
wait_event()
{
	local n=$1 name=$2 pat=$3 secs=$4 i
	for ((i = 0; i < secs * 20; i++)); do
		grep -q "$pat" "$(ev "$n" "$name")" && return 0
		writer_ok "$name"
		sleep 0.05
	done
	ctl_on a status vol0 >&2 || true
	ctl_on b status vol0 >&2 || true
	fail "$name: no event $pat on $n within $secs s"
}

# writer_ok NAME: the writer has not reported a failed write.
writer_ok()
{
	if grep -q 'failed' "$T/$1.writer.err" 2>/dev/null; then
		fail "$1: a write failed: $(cat "$T/$1.writer.err")"
	fi
}

acked() { cat "$T/$1.acked" 2>/dev/null || echo 0; }

# --- plain: b caught up after the overflow holds a prefix ---
PROXY=1 write_config2 "$T/c.ini" "async-backlog = 1M"
proxy_start
start_pair
overflow plain proxy
# a streams again with b uptodate (the resync, if any, ended), and more
# writes went through the stream since.
wait_for a "p['congestion'] == 'none' and p['replication'] in ('established', 'verifying')" 120
[ "$(jfield b "v['disk']")" = uptodate ] || fail "plain: b is $(jfield b "v['disk']") while a streams"
n0=$(acked plain)
for ((i = 0; i < 600; i++)); do
	[ "$(acked plain)" -ge $((n0 + 2 * RATE)) ] && break
	writer_ok plain
	sleep 0.05
done
[ "$(acked plain)" -ge $((n0 + 2 * RATE)) ] || fail "plain: the writer stalled at $(acked plain)"
[ "$(jfield b "v['disk']")" = uptodate ] || fail "plain: b is no longer uptodate"
proxy cut
crash a
wait "$WPID" 2>/dev/null || true
writer_ok plain
wait_for b "p['connection'] != 'connected'" 30
ctl_on b primary vol0 --force >/dev/null || fail "plain: b: primary --force failed"
wait_for b "v['role'] == 'primary'" 30
stop b
python3 "$TANDEM_TOOLS/stampwriter.py" check "$T/b/vol0.img" "$NBLK" "$(acked plain)" \
	2>"$T/check.out" || fail "plain: b's image is not a prefix of a's writes: $(cat "$T/check.out")"
log "plain: $(cat "$T/check.out")"
stopped plain
kill "$PROXY_PID"
wait "$PROXY_PID" 2>/dev/null || true
_forget "$PROXY_PID"

# --- witness: no write fails; b inconsistent is not promoted ---
rm -rf "$T/a" "$T/b"
write_config3 "$T/c3.ini" "async-backlog = 1M"
start_trio
overflow witness "link ab"
stopped witness
# Writes go on while b lacks some (a tells the witness it writes alone):
# 100 more within half the quorum timeout, none held for the quorum.
n0=$(acked witness)
for ((i = 0; i < QUORUM_TIMEOUT * 10; i++)); do
	[ "$(acked witness)" -ge $((n0 + RATE)) ] && break
	writer_ok witness
	sleep 0.05
done
[ "$(acked witness)" -ge $((n0 + RATE)) ] ||
	fail "witness: writes stalled at $(acked witness) while b was behind"
[ "$(jfield b "v['disk']")" = inconsistent ] || fail "witness: the resync ended too soon"
# b is inconsistent now: the site of a is lost
link ab cut
crash a
wait "$WPID" 2>/dev/null || true
writer_ok witness
log "witness: a killed at $(acked witness) acknowledged writes, b inconsistent"
wait_for b "p['connection'] != 'connected'" 30
[ "$(jfield b "v['disk']")" = inconsistent ] || fail "witness: b is $(jfield b "v['disk']") after the kill"
if ctl_on b primary vol0 >"$T/prim.out" 2>&1; then
	fail "witness: b, inconsistent, was promoted without --force"
fi
log "witness: primary without --force refused: $(head -n 1 "$T/prim.out")"
[ "$(jfield b "v['role']")" = secondary ] || fail "witness: b is $(jfield b "v['role']")"
stop b
kill_witness TERM
