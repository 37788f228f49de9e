#!/usr/bin/env bash
# No spurious failover under full load (issue: leases): 4 KiB random writes
# at full speed (fio, nbd engine, iodepth 32) on the primary for
# LOAD_SECONDS (default 600), with the witness 200 ms away (100 ms each way
# through the link proxy) and the nodes' link 2 ms round trip, default
# timeouts. Passes when no failover, no step-down, no lease lost and no
# session or peer lost happened, and fio finished without error; prints
# what it counted (`lease-load: N s, IOPS, 0 failovers`).
#   bash tests/soak/lease-load.sh          (make soak-load)
#   LOAD_SECONDS=60 bash tests/soak/lease-load.sh
# shellcheck source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source=../integration/lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=../integration/lib3.sh
. "$_root/tests/integration/lib3.sh"
need fio python3

SECS=${LOAD_SECONDS:-600}
export VOL_SIZE=1G
PEER_TIMEOUT=2 WITNESS_TIMEOUT=2 QUORUM_TIMEOUT=30 write_config3 "$T/cluster.ini"
start_trio
link ab delay 1
link aw delay 100
link bw delay 100
wait_for a "v['role'] == 'primary' and v['lease'] and v['witness']['session']" 20
sleep 2 # the sessions settle with the delay
log "fio: 4 KiB random writes, iodepth 32, $SECS s, witness 200 ms away"
fio --name=load --ioengine=nbd --uri="nbd://127.0.0.1:${NBDP[a]}/vol0" --rw=randwrite --bs=4k \
	--iodepth=32 --time_based --runtime="$SECS" --size=1G --group_reporting \
	--output-format=json --output="$T/fio.json" >"$T/fio.out" 2>&1 || fail "fio failed: $(tail -n 5 "$T/fio.out")"
iops=$(python3 -c "import json; print(int(json.load(open('$T/fio.json'))['jobs'][0]['write']['iops']))")
errs=$(python3 -c "import json; print(json.load(open('$T/fio.json'))['jobs'][0]['error'])")
bad=$(cat "$T/a.log" "$T/b.log" | grep -cE "stepping down|lease lost|failover|session lost|did not answer|role primary -> secondary|role secondary -> primary" || true)
n_fo=$(grep -c "failover" "$T/b.log" || true)
log "$SECS s, $iops IOPS, fio error $errs, $n_fo failovers, $bad lease/role/session events"
cat "$T/a.log" "$T/b.log" | grep -E "stepping down|lease lost|failover|session lost|did not answer|role " | tail -n 20 >&2 || true
[ "$errs" = 0 ] || fail "fio reported an error"
[ "$(jfield a "v['role']")" = primary ] || fail "a is no longer primary"
# the one promotion of a when the pair was new is the only role change
[ "$(grep -c "role secondary -> primary" "$T/a.log")" = 1 ] || fail "a changed roles under load"
[ "$n_fo" = 0 ] || fail "b took over under load"
[ "$(grep -cE "stepping down|lease lost|session lost|did not answer" "$T/a.log" "$T/b.log" | awk -F: '{s += $2} END {print s}')" = 0 ] ||
	fail "a lease, session or peer was lost under load"
echo "lease-load: $SECS s, $iops IOPS, 0 failovers"
stop a
stop b
kill_witness TERM
