#!/usr/bin/env bash
# resync-min-rate keeps a resync moving under a foreground that wants the
# whole link: a 40 Mbit/s link (the link proxy), 32M out of sync after b was
# away, and a writer (fio, 64K random writes, 8 in flight) that alone fills
# the link. The resync controller yields to the writer, but not below the
# floor (2M/s here): the out-of-sync bytes, sampled from status, fall by
# at least 1.5M/s while the writer runs. The replicas end identical.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-io fio python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=256M PROXY=1 PEER_TIMEOUT=4
write_config2 "$T/c.ini" "resync-min-rate = ${MIN_RATE:-2M}"
proxy_start
start_pair
stop b
qemu-io -f raw "$(uri a)" -c "write -P 0x6b 128M 32M" >/dev/null || fail "write on a failed"
proxy rate 40mbit
fio --name=fg --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=64k --iodepth=8 --size=64M \
	--refill_buffers --time_based --runtime=40 --output-format=json >"$T/fio.json" 2>"$T/fio.err" &
fpid=$!
track "$fpid"
sleep 2
start b
wait_for a "p['replication'] == 'syncsource'" 30
sleep 2
t1=$(date +%s.%N) o1=$(jfield a "p['out_of_sync_bytes']")
sleep 6
t2=$(date +%s.%N) o2=$(jfield a "p['out_of_sync_bytes']")
rate=$(python3 -c "print(int(($o1 - $o2) / ($t2 - $t1)))")
log "resync under a link-filling writer: $rate bytes/s (floor 2M)"
alive "$fpid" || fail "the writer ended early"
[ "$rate" -ge $((1536 << 10)) ] || fail "the resync went $rate bytes/s under load, below the floor"
kill "$fpid" 2>/dev/null
wait "$fpid" 2>/dev/null || true
proxy rate 0
compare_replicas 120
