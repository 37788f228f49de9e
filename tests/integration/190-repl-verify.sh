#!/usr/bin/env bash
# Online verify (`tandemctl verify VOL` on the primary): the pair is
# connected and in sync with 128M of random data; then two places of b's
# data area are corrupted behind its back (a 4K block, and a single byte far
# away). A verify on a, run while a light write load (fio, checked with
# crc32c) goes on elsewhere in the volume, must find exactly those two
# places: status (verify: done, mismatch_ranges 2), one verify-mismatch event
# and one log line per place, each covering the corrupted offset; then the
# differing ranges are resynced from a by themselves (a: syncsource ->
# established, b: inconsistent -> uptodate) and both data areas end equal
# byte for byte. A second verify on the identical replicas finds nothing.
# Refused, with a clear message: verify on the secondary, a second verify
# while one runs, and verify while the peer is disconnected.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio nbdcopy python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=128M
M=$((1 << 20))
# The corrupted places: a whole 4K block, and one byte (not block aligned).
BAD1=$((20 * M + 12 * 1024))
BAD2=$((110 * M + 100 * 1024 + 7))
# The write load stays in [LOAD_OFF, LOAD_OFF + 16M), far from both.
LOAD_OFF=$((48 * M))

# refused NODE PATTERN WHAT: `verify vol0` on NODE must fail with a message
# matching PATTERN (extended regex, any case).
refused()
{
	local n=$1 pat=$2 what=$3 rc=0
	ctl_on "$n" verify vol0 >"$T/vfy.out" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] || fail "verify on $n was accepted ($what)"
	grep -qiE "$pat" "$T/vfy.out" || fail "verify on $n ($what): unclear message: $(cat "$T/vfy.out")"
	log "verify on $n refused ($what): $(cat "$T/vfy.out")"
}

write_config2 "$T/c.ini"
start_pair
events_follow a "$T/a.events"
events_follow b "$T/b.events"

head -c 128M /dev/urandom >"$T/data"
nbdcopy "$T/data" "$(uri a)" || fail "writing 128M to a failed"
compare_replicas

refused b "primary" "b is secondary"

# Corrupt b's data area behind the daemon's back (it uses O_DIRECT: write,
# fsync and drop the page cache so that nothing stale is left anywhere).
python3 - "$T/b/vol0.img" "$BAD1" "$BAD2" <<'EOF' || fail "corrupting b's data area failed"
import os, sys
path, bad1, bad2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_RDWR)
old = os.pread(fd, 4096, bad1)
os.pwrite(fd, bytes(x ^ 0x5a for x in old), bad1)
old2 = os.pread(fd, 1, bad2)
os.pwrite(fd, bytes([old2[0] ^ 0xff]), bad2)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
assert os.pread(fd, 4096, bad1) != old and os.pread(fd, 1, bad2) != old2
os.close(fd)
EOF
[ "$(jfield a "p['out_of_sync_bytes']")" = 0 ] || fail "a shows bytes out of sync before the verify"

# A light write load on a while the verify runs (4K random writes, QD 4,
# ~1000/s, verified by fio): writes racing the verify must not count as
# differences.
timeout -k 5 40 fio --name=load --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=4k \
	--iodepth=4 --rate_iops=1000 "--offset=$LOAD_OFF" --size=16M --time_based --runtime=4 \
	--verify=crc32c --verify_backlog=256 --verify_fatal=1 --randseed=190 \
	--output-format=json --output="$T/fio.json" >"$T/fio.err" 2>&1 &
FIO_PID=$!
track "$FIO_PID"
# fio connects and starts writing within a second.
sleep 1
alive "$FIO_PID" || { cat "$T/fio.err" >&2; fail "fio ended before the verify started"; }

t0=$(date +%s.%N)
ctl_on a verify vol0 || fail "verify on a (primary, connected, in sync) was refused"
refused a "already running" "a verify is running"
wait_for a "p['verify']['state'] == 'done'" 30
t1=$(date +%s.%N)
load_during=no
alive "$FIO_PID" && load_during=yes
rc=0
wait "$FIO_PID" || rc=$?
_forget "$FIO_PID"
[ "$rc" -eq 0 ] || { cat "$T/fio.err" "$T/fio.json" >&2; fail "fio exited with $rc during the verify"; }
grep -qiE 'verify:|bad magic|verify failed' "$T/fio.err" &&
	{ cat "$T/fio.err" >&2; fail "fio reported a verify error"; }

read -r ranges vbytes pct < <(jfield a "p['verify']['mismatch_ranges'], p['verify']['mismatch_bytes'], p['verify']['percent']")
log "verify: $(python3 -c "print('%.2f' % ($t1 - $t0))") s for 128M, $ranges ranges ($vbytes bytes) differ, ${pct}%, write load still running at the end: $load_during"
python3 - "$T/fio.json" <<'EOF' >&2
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print("load during the verify: %d writes, %d IOPS, worst latency %.3f s"
      % (j["write"]["total_ios"], j["write"]["iops"], j["write"]["clat_ns"]["max"] / 1e9))
EOF
[ "$ranges" = 2 ] || fail "verify found $ranges differing ranges, expected 2 (at $BAD1 and $BAD2)"
[ "$pct" = 100.0 ] || fail "verify done at $pct%"

# The differing ranges go to b at once; b ends uptodate and identical.
wait_for a "p['replication'] == 'established' and p['out_of_sync_bytes'] == 0" 30
wait_for b "v['disk'] == 'uptodate' and p['replication'] == 'established'" 30
compare_replicas
sent=$(jfield a "p['resync_sent_bytes']")
log "resync after the verify: $sent bytes sent as data"
[ "$sent" -gt 0 ] || fail "nothing was resynced after the verify found differences"
[ "$sent" -le "$vbytes" ] || fail "the resync after the verify sent $sent bytes, more than the $vbytes that differ"

# Events and log lines: each corrupted offset is covered by exactly one
# reported range; a went syncsource -> established, b's disk inconsistent
# -> uptodate.
python3 - "$T/a.events" "$T/b.events" "$T/a.log" "$BAD1" "$BAD2" <<'EOF' ||
import json, re, sys
evf_a, evf_b, logf, bad = sys.argv[1], sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4:]]
def events(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]
ea, eb = events(evf_a), events(evf_b)
errs = []
mm = [(e["offset"], e["length"]) for e in ea if e["event"] == "verify-mismatch"]
logged = [(int(m.group(2)), int(m.group(1))) for m in
          re.finditer(r"verify: (\d+) bytes at (\d+) differ on b", open(logf).read())]
for what, rs in (("verify-mismatch events", mm), ("log lines", logged)):
    if len(rs) != 2:
        errs.append("%d %s, expected 2: %s" % (len(rs), what, rs))
    for b in bad:
        n = sum(1 for o, l in rs if o <= b < o + l)
        if n != 1:
            errs.append("offset %d is covered by %d %s" % (b, n, what))
done = [e for e in ea if e["event"] == "verify" and e.get("to") == "done"]
if len(done) != 1 or done[0]["mismatch_ranges"] != 2 or done[0]["compared_bytes"] != 128 << 20:
    errs.append("verify done events: %s" % done)
for e, want in ((ea, {"event": "replication", "from": "established", "to": "syncsource"}),
                (ea, {"event": "replication", "from": "syncsource", "to": "established"}),
                (eb, {"event": "disk", "from": "uptodate", "to": "inconsistent"}),
                (eb, {"event": "disk", "from": "inconsistent", "to": "uptodate"})):
    if not any(all(x.get(k) == v for k, v in want.items()) for x in e):
        errs.append("no event %s" % want)
print("reported ranges: %s" % ", ".join("%d+%d" % r for r in mm), file=sys.stderr)
for x in errs:
    print("  " + x, file=sys.stderr)
sys.exit(1 if errs else 0)
EOF
	{ cat "$T/a.events" "$T/b.events" >&2; fail "the verify's events or log lines do not match the corruption"; }

# Identical replicas: a second verify finds nothing and resyncs nothing.
nev=$(grep -c '"verify-mismatch"' "$T/a.events")
ctl_on a verify vol0 || fail "the second verify was refused"
wait_for a "p['verify']['state'] == 'done'" 30
read -r ranges2 vbytes2 < <(jfield a "p['verify']['mismatch_ranges'], p['verify']['mismatch_bytes']")
log "second verify: $ranges2 ranges ($vbytes2 bytes) differ"
if [ "$ranges2" != 0 ] || [ "$vbytes2" != 0 ]; then
	fail "the second verify on identical replicas found $ranges2 ranges ($vbytes2 bytes)"
fi
[ "$(grep -c '"verify-mismatch"' "$T/a.events")" = "$nev" ] || fail "the second verify reported mismatch events"
[ "$(jfield a "p['replication']")" = established ] || fail "a left 'established' after a clean verify"
[ "$(grep -c '"from":"running","to":"done"' "$T/a.events")" = 2 ] || fail "no done event for the second verify"

# Disconnected: refused on both sides.
ctl_on b disconnect vol0 || fail "disconnect on b failed"
wait_for a "p['connection'] != 'connected'" 15
refused a "not connected" "b disconnected"
refused b "not connected" "b disconnected"
ctl_on b connect vol0 || fail "connect on b failed"
wait_connected
compare_replicas
stop b
stop a
