#!/usr/bin/env bash
# Async with on-congestion = block and async-max-lag = 2 over a 20 Mbit/s
# link (the link proxy shapes it), with a backlog (16M) that alone would
# allow 6 s of lag. A writer writes as fast as it can for 12 s; the lag
# sampled from a's status all along (every 0.1 s, or as fast as status
# answers on a busy host) never exceeds the bound, writes are
# made to wait (congestion "blocked"), none fails, and the replicas end
# byte-identical.
# tandem-test: plain-only
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=256M PROXY=1 PEER_TIMEOUT=6 REPL_MODE=async
write_config2 "$T/c.ini" "async-backlog = 16M" "on-congestion = block" "async-max-lag = 2"
proxy_start
start_pair
proxy rate 20mbit

fio --name=burst --ioengine=nbd --uri="$(uri a)" --rw=write --bs=1M --iodepth=4 --size=256M \
	--refill_buffers --time_based --runtime=12 --output-format=json >"$T/fio.json" 2>"$T/fio.err" &
fpid=$!
track "$fpid"
: >"$T/samples"
while alive "$fpid"; do
	jfield a "'%s %s %s' % (p['lag_seconds'], p['congestion'], p['backlog_bytes'])" >>"$T/samples" 2>/dev/null || true
	sleep 0.1
done
wait "$fpid" || { cat "$T/fio.err" >&2; fail "fio failed"; }
python3 - "$T/samples" "$T/fio.json" <<'PY' || fail "the lag bound did not hold"
import json, sys
lags, blocked, n = [], 0, 0
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 3:
        continue
    n += 1
    lags.append(float(f[0]))
    blocked += f[1] == "blocked"
t = open(sys.argv[2]).read()
w = json.loads(t[t.index("{"):])["jobs"][0]["write"]
print("%d samples: max lag %.3f s, %d blocked; fio wrote %.1f MB at %.2f MB/s, error %d" %
      (n, max(lags), blocked, w["io_bytes"] / 1e6, w["bw_bytes"] / 1e6, json.loads(t[t.index("{"):])["jobs"][0]["error"]), file=sys.stderr)
if n < 15:
    sys.exit("only %d samples" % n)
if max(lags) > 2.0:
    sys.exit("lag %.3f s sampled, above the bound of 2 s" % max(lags))
if not blocked:
    sys.exit("writes were never blocked: the bound was never tested")
PY
proxy rate 0
compare_replicas 120
