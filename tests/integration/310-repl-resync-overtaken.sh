#!/usr/bin/env bash
# Foreground writes that overtake resync data still queued for the peer.
# Resync messages wait in a background send queue that foreground messages
# overtake (net_send_bulk); the peer applies overlapping messages in arrival
# order. A foreground write to a region whose resync data (read before the
# write) is still in that queue must not reach the peer first, or the older
# resync data lands on top of it there and the replicas differ for good.
# Six rounds: a is disconnected and 32M of random data is written to it (a
# 32M volume: all of it out of sync); fio writes 4K blocks at random over the
# whole volume on a (queue depth 16) while a connects and resyncs to b
# through the link proxy with 1 ms of one-way delay (the resync window grows
# with the round trip, so resync data piles up in the background queue), and
# stops once the resync is done. Asserts: the resync ran while fio did; fio
# completed without error; after wait-sync both data areas are equal byte for
# byte. Without the ordering (net_bulk_pin in fg_start) the replicas differed
# in 1 or 2 blocks in 4 runs of 5 of four rounds (without the delay: once in
# 12 rounds); with it, 0 in 5 runs.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio nbdcopy python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=32M

PROXY=1 write_config2 "$T/c.ini"
proxy_start
proxy delay "${DELAY:-1}"
start_pair

ROUNDS=${ROUNDS:-6}
for ((round = 1; round <= ROUNDS; round++)); do
	ctl_on a disconnect vol0 || fail "disconnect on a failed"
	wait_for a "p['connection'] != 'connected'" 15
	head -c 32M /dev/urandom >"$T/data"
	nbdcopy "$T/data" "$(uri a)" || fail "writing 32M to a failed"
	fio --name=overtake --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=4k --iodepth=16 \
		--size=32M --time_based --runtime=60 --randrepeat=0 --norandommap \
		--output="$T/fio.out" >/dev/null 2>&1 &
	FPID=$!
	track "$FPID"
	sleep 0.5
	ctl_on a connect vol0 || fail "connect on a failed"
	wait_for a "p['replication'] in ('syncsource', 'established')" 15
	alive "$FPID" || fail "round $round: fio ended before the resync started"
	# The writes stop as soon as the resync is over, so that the last write
	# of many blocks is one made while it ran (later writes would hide
	# resync data that landed on top of a newer write).
	wait_for a "p['replication'] == 'established'" 60
	kill -INT "$FPID"
	wait "$FPID" || true # interrupted: its own exit code says so
	_forget "$FPID"
	grep -q "err= 0" "$T/fio.out" || { cat "$T/fio.out" >&2; fail "round $round: fio failed"; }
	[ "$(grep -c "off -> syncsource" "$T/a.log")" -eq "$round" ] || fail "round $round: a did not resync to b"
	log "round $round: $(grep -o 'resync to b done.*' "$T/a.log" | tail -n 1)"
	compare_replicas 120
done
stop b
stop a
log "ok"
