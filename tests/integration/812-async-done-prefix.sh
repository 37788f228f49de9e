#!/usr/bin/env bash
# Up to date means a prefix (SPEC guarantee 9, ASYNC.md A7-A9). a streams
# async to b over an 8 Mbit/s link with a 32M backlog (far more than the
# sockets hold) and a change bitmap of 4K regions. One client writes
# stamped 4K blocks over the first 16M: a burst that ends once a went
# ahead (a live resync then catches b up), then 100 writes a second,
# slower than the link, so the stream is still backed up when the resync
# ends. The moment b turns `inconsistent -> uptodate`, the link is cut and
# a killed. b's image must then be a prefix of a's write order: nothing
# newer than a write it lacks.
# Without a witness: b is promoted with --force (813: with the witness,
# which promotes b by itself).
# Before, RS_DONE went out ahead of older stream entries still queued on a,
# and b's image held newer writes beside missing older ones.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=64M PEER_TIMEOUT=4 REPL_MODE=async
NBLK=4096

# round NAME: the writer, whose burst ends once a went ahead; the link cut
# and a killed the moment b turns `inconsistent -> uptodate` (RS_DONE
# arrived), as a site lost then. The number of acknowledged writes lands in
# $T/NAME.acked.
round()
{
	local name=$1 wpid i
	events_follow a "$T/$name.a.events"
	events_follow b "$T/$name.b.events"
	STAMP_BURST_STOP=$T/$name.ahead python3 "$TANDEM_TOOLS/stampwriter.py" write "${NBDP[a]}" \
		"$NBLK" "$T/$name.acked" 12000 100 2>"$T/$name.writer.err" &
	wpid=$!
	track "$wpid"
	for ((i = 0; i < 18000; i++)); do
		[ -e "$T/$name.ahead" ] ||
			! grep -q '"event":"congestion".*"to":"ahead"' "$T/$name.a.events" ||
			touch "$T/$name.ahead"
		grep -q '"event":"disk".*"from":"inconsistent","to":"uptodate"' "$T/$name.b.events" &&
			break
		sleep 0.01
	done
	proxy cut
	crash a
	wait "$wpid" 2>/dev/null || true
	[ -e "$T/$name.ahead" ] || fail "a never went ahead"
	grep -q '"event":"disk".*"from":"inconsistent","to":"uptodate"' "$T/$name.b.events" ||
		fail "b never turned uptodate within 180 s"
	log "$name: the link cut and a killed at b's uptodate"
}

# check NAME: b is primary; stopped, its image is a prefix of a's writes.
check()
{
	local name=$1
	wait_for b "v['role'] == 'primary'" 30
	stop b
	python3 "$TANDEM_TOOLS/stampwriter.py" check "$T/b/vol0.img" "$NBLK" "$(cat "$T/$name.acked")" \
		2>"$T/check.out" || fail "$name: b's image is not a prefix of a's writes: $(cat "$T/check.out")"
	log "$name: $(cat "$T/check.out")"
}

PROXY=1 write_config2 "$T/c.ini" "async-backlog = 32M" "bitmap-granularity = 4K"
proxy_start
start_pair
proxy rate 8mbit
round plain
wait_for b "p['connection'] != 'connected'" 30
ctl_on b primary vol0 --force >/dev/null || fail "b: primary --force failed"
check plain
