#!/usr/bin/env bash
# Async with a backlog smaller than a burst, on a slow link (the link proxy
# shapes it to 40 Mbit/s). A steady writer (fio, 1 MB/s, well below the
# link) runs throughout. A burst of 64M is written at local speed: the
# backlog overflows, a goes ahead (event and status), b shows "behind",
# and a live resync copies what the stream did not carry. Without any
# operator action a returns to streaming and the pair to established with
# nothing out of sync, while the steady writer keeps writing. sync_percent,
# sampled all along, never goes backwards within one resync. The replicas
# end byte-identical.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy fio python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=256M PROXY=1 PEER_TIMEOUT=4 REPL_MODE=async
write_config2 "$T/c.ini" "async-backlog = 8M"
proxy_start
start_pair
events_follow a "$T/a.events"
proxy rate 40mbit

# the steady writer: 1 MB/s of 64K random writes in the first 64M
fio --name=steady --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=64k --size=64M \
	--rate=1m --time_based --runtime=300 --output-format=json >"$T/steady.json" 2>"$T/steady.err" &
fpid=$!
track "$fpid"
sleep 2

# sampler: a's replication state, congestion and sync_percent; b's state
sample()
{
	local a b
	while [ ! -e "$T/stop" ]; do
		a=$(jfield a "'%s %s %s' % (p['replication'], p['congestion'], p['sync_percent'])" 2>/dev/null)
		b=$(jfield b "p['replication']" 2>/dev/null)
		echo "$(date +%s.%N) $a $b"
		sleep 0.2
	done
}
sample >"$T/samples" 2>/dev/null &
spid=$!
track "$spid"

head -c 64M /dev/urandom >"$T/burst"
t0=$(date +%s.%N)
nbdcopy --flush "$T/burst" "$(uri a)" || fail "the burst failed"
t1=$(date +%s.%N)
log "64M burst written in $(echo "$t1 - $t0" | bc) s"
wait_for a "p['congestion'] == 'ahead' or p['replication'] == 'syncsource'" 10
wait_for a "p['congestion'] == 'none' and p['replication'] == 'established' and p['out_of_sync_bytes'] == 0" 120
alive "$fpid" || fail "the steady writer stopped"
touch "$T/stop"
wait "$spid" 2>/dev/null || true
kill "$fpid" 2>/dev/null || true
wait "$fpid" 2>/dev/null || true

grep -q '"event":"congestion".*"to":"ahead"' "$T/a.events" || fail "no congestion event to ahead"
grep -q '"event":"congestion".*"to":"streaming"' "$T/a.events" || fail "no congestion event back to streaming"
grep -q ' behind$' "$T/samples" || fail "b never showed behind"
python3 - "$T/samples" <<'PY' || fail "sync_percent went backwards within a resync"
import sys
last, n, resyncs = None, 0, 0
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 4:
        continue
    rep, pct = f[1], float(f[3])
    if rep != "syncsource":
        last = None
        continue
    if last is None:
        resyncs += 1
    elif pct < last:
        sys.exit("sync_percent %.1f after %.1f: %s" % (pct, last, line.strip()))
    last, n = pct, n + 1
print("%d samples in %d resyncs, sync_percent never went back" % (n, resyncs), file=sys.stderr)
if n == 0:
    sys.exit("no sample during a resync")
PY
proxy rate 0
compare_replicas 120
