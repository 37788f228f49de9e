#!/usr/bin/env bash
# Resync runs in the background: while b catches up on 128M (capped with
# resync-rate so that it lasts several seconds), the primary keeps serving
# reads and writes over the very regions being resynced, none of them stuck
# behind the resync; status and `events` show the progress; the replicas end
# identical, with the foreground writes made during the resync on both.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio nbdcopy python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=256M
write_config2 "$T/c.ini" "resync-rate = 16M"
start_pair

stop b
head -c 128M /dev/urandom >"$T/data"
nbdcopy "$T/data" "$(uri a)" || fail "writing 128M to a failed"
oos=$(jfield a "p['out_of_sync_bytes']")
[ "$oos" -ge $((120 << 20)) ] || fail "a shows only $oos bytes out of sync after 128M written alone"

events_follow a "$T/events"
start b
wait_for a "p['replication'] == 'syncsource'" 20

# Foreground I/O over the regions being resynced, checked while writing.
fio --name=fg --ioengine=nbd --uri="$(uri a)" --rw=randrw --bs=4k --iodepth=8 --size=64M \
	--time_based --runtime=4 --verify=crc32c --verify_backlog=256 --verify_fatal=1 \
	--randseed=170 --output-format=json --output="$T/fio.json" >"$T/fio.err" 2>&1 ||
	fail "foreground fio during the resync failed: $(cat "$T/fio.err")"
during=$(jfield a "p['replication']")
pct=$(jfield a "p['sync_percent']")
[ "$during" = syncsource ] || fail "the resync ended before the foreground I/O did ($during): the cap did not hold"
python3 - "$T/fio.json" "$pct" <<'PY' || fail "foreground I/O was stalled by the resync"
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
w, r = j["write"], j["read"]
worst = max(w["clat_ns"]["max"], r["clat_ns"]["max"]) / 1e9
print("during resync (%.1f%% done): %d write IOPS, %d read IOPS, worst latency %.3f s"
      % (float(sys.argv[2]), w["iops"], r["iops"], worst), file=sys.stderr)
# A 2-core machine shared with other work: generous bounds, but a stall on
# the resync (seconds) or a trickle of I/O fails.
sys.exit(0 if w["iops"] > 100 and r["iops"] > 100 and worst < 1.5 else 1)
PY

wait_for a "p['replication'] == 'established'" 60
grep -q '"event":"syncsource","out_of_sync_bytes"' "$T/events" || fail "no resync progress event: $(cat "$T/events")"
grep -q '"event":"replication","from":"syncsource","to":"established"' "$T/events" ||
	fail "no event for the end of the resync"
compare_replicas
stop b
stop a
