#!/usr/bin/env bash
# The loss window holds during catch-up (ASYNC.md A9, A10). b's image lives
# on XFS (a loop device: a reflink copy is kept when a resync starts, as in
# 770). a streams async to b over a 16 Mbit/s link with a 4M backlog and
# async-max-lag = 5, while one client writes stamped 4K blocks (as in 750)
# a little faster than the link can carry, logging when each write was
# acknowledged. The test runs in a network namespace of its own whose TCP
# buffers are at most 256K (a WAN-sized socket; the host's 4M would hold
# the whole backlog), so most of the backlog waits on a itself. The backlog
# overflows and a catches b up with a live resync; during it, once a's lag
# is at least half the bound while writes still flow, a is killed. b,
# promoted with --force, starts from its kept copy. Its image must be a
# prefix of a's writes and:
# - the oldest acknowledged write it lacks was acknowledged at most
#   async-max-lag before the kill, plus 0.2 s: the kill follows a status
#   sample and an acknowledgement of the last 0.1 s, and the rest is
#   scheduling on a loaded machine;
# - a's last status before the kill showed a lag_seconds no smaller than
#   what b lacked at that sample (its time minus that write's), less 0.05 s
#   for the event loop's cached clock and the status' rounding.
# Before, RS_START went out while older entries still waited on a, so b's
# kept copy lacked them, and the lag counted only from the first marked
# write: a showed, and bounded, a lag some 1.8 s short of what b lacked.
# shellcheck source=netns.sh
. "$(dirname "$0")/netns.sh"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3 mkfs.xfs losetup

XFS_SIZE=1G xfs_loop "$T/xfs" -m reflink=1

export VOL_SIZE=64M PROXY=1 PEER_TIMEOUT=4 REPL_MODE=async
NBLK=4096 RATE=560 MAXLAG=5
write_config2 "$T/c.ini" "async-backlog = 4M" "async-max-lag = $MAXLAG" "disk.b = $T/xfs/vol0.img"
proxy_start
start_pair
proxy rate 16mbit

STAMPWRITER_ACK_LOG=$T/acks python3 "$TANDEM_TOOLS/stampwriter.py" write "${NBDP[a]}" "$NBLK" \
	"$T/acked" 0 "$RATE" 2>"$T/writer.err" &
wpid=$!
track "$wpid"

# The sampler: a's status every 50 ms (its time and lag in $T/samples); it
# kills a (SIGKILL, its time in $T/killed) once a catches b up (b behind),
# a's lag is at least half the bound and a write was acknowledged within
# the last 0.1 s.
cat >"$T/sampler.py" <<'EOF'
import json, os, signal, subprocess, sys, time
ctl, cfg, pid, acked, out, killed, thr, secs = sys.argv[1:]
end = time.time() + float(secs)
with open(out, "w") as f:
    while time.time() < end:
        t = time.time()
        r = subprocess.run([ctl, "-c", cfg, "-n", "a", "status", "vol0", "--json"],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit("status of a failed: " + r.stderr)
        p = json.loads(r.stdout)["volumes"][0]["peers"][0]
        f.write("%.6f %.3f %s %s\n" % (t, p["lag_seconds"], p["replication"], p["congestion"]))
        f.flush()
        try:
            fresh = time.time() - os.stat(acked).st_mtime < 0.1
        except FileNotFoundError:
            fresh = False
        if p["replication"] in ("behind", "syncsource") and p["lag_seconds"] >= float(thr) and fresh:
            tk = time.time()
            os.kill(int(pid), signal.SIGKILL)
            with open(killed, "w") as k:
                k.write("%.6f\n" % tk)
            sys.exit(0)
        time.sleep(0.05)
sys.exit("a never lagged %s s while catching b up with writes flowing" % thr)
EOF
python3 "$T/sampler.py" "$BIN/tandemctl" "$CFG" "${NPID[a]}" "$T/acked" "$T/samples" "$T/killed" \
	"$(awk "BEGIN { print $MAXLAG * 0.5 }")" 180 || fail "sampler: see above"
# (a is gone: reap it as crash does)
wait "${NPID[a]}" 2>/dev/null || true
_forget "${NPID[a]}"
NPID[a]=""
wait_released "$T/a.sock" "${NBDP[a]}" "${REPP[a]}"
wait "$wpid" 2>/dev/null || true
grep -q failed "$T/writer.err" && fail "a write failed: $(cat "$T/writer.err")"
log "a killed at lag $(tail -n 1 "$T/samples" | cut -d' ' -f2) s, $(cat "$T/acked") writes acknowledged"

wait_for b "p['connection'] != 'connected'" 30
ctl_on b primary vol0 --force >/dev/null || fail "b: primary --force failed"
[ "$(jfield b "v['role']")" = primary ] || fail "b did not become primary"
stop b
grep -q "consistent image kept before the resync" "$T/b.log" ||
	fail "b did not start from its kept copy"
python3 "$TANDEM_TOOLS/stampwriter.py" check "$T/xfs/vol0.img" "$NBLK" "$(cat "$T/acked")" \
	2>"$T/check.out" || fail "b's image is not a prefix of a's writes: $(cat "$T/check.out")"
log "$(cat "$T/check.out")"
have=$(sed -n 's/.*holds the first \([0-9]*\) of.*/\1/p' "$T/check.out")
[ -n "$have" ] || fail "no count in: $(cat "$T/check.out")"

python3 - "$T/acks" "$T/samples" "$T/killed" "$have" "$MAXLAG" <<'EOF' || fail "the loss window is off"
import sys
acks, samples, killed, have, bound = sys.argv[1:]
have, bound = int(have), float(bound)
t_ack = {}
for line in open(acks):
    n, t = line.split()
    t_ack[int(n)] = float(t)
t_kill = float(open(killed).read())
if have + 1 not in t_ack:
    sys.exit("b lacks no acknowledged write: a died with nothing in flight")
oldest = t_ack[have + 1]
lacked = t_kill - oldest
t_s, lag = [float(x) for x in open(samples).read().splitlines()[-1].split()[:2]]
print("b lacks writes %d-%d, the oldest acknowledged %.3f s before the kill (bound %.1f s); "
      "a's last lag_seconds %.3f, %.3f s before the kill" %
      (have + 1, max(t_ack), lacked, bound, lag, t_kill - t_s), file=sys.stderr)
bad = []
if lacked > bound + 0.2:
    bad.append("b lacks a write acknowledged %.3f s before the kill, past async-max-lag %.1f s"
               % (lacked, bound))
if lag < t_s - oldest - 0.05:
    bad.append("a showed a lag of %.3f s while b lacked %.3f s of writes"
               % (lag, t_s - oldest))
if bad:
    sys.exit("; ".join(bad))
EOF
