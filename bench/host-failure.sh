#!/usr/bin/env bash
# A failed host under load: the secondary goes away (SIGKILL, as a host that
# dies) for AWAY s while a client keeps working, then returns; what the client
# saw each second, and how long until both replicas are whole again. The
# second field report's host-failure case (VMware's vSAN resiliency study: a
# failed host cost 16% of TPS and 715 s to steady state).
#
# Two network namespaces joined by a veth pair (10.231.44.1 in A, .2 in B;
# bench/lib-link.sh), shaped to LINK Mbit/s (default 0: unshaped). Node a
# (primary, NBD) in A, node b in B, one volume of SIZE_MB MiB with
# replication = sync, written once in full first (so the client meets no
# unallocated blocks and the resync has data to copy). fio (nbd engine) in A:
# 4 KiB random reads and writes, 70/30, QD8, random data, for RUNTIME s, with
# its IOPS logged per second. At t = BEFORE s, b is killed; AWAY s later it is
# started again; a's status is sampled until the peer is established, up to
# date and nothing is out of sync (full redundancy).
#
#   bench/host-failure.sh
#   LINK=100 AWAY=20 RUNTIME=120 bench/host-failure.sh
#
# Prints the IOPS of each second (reads + writes), the median of each phase
# (before, away, resync, after) against the median before it, the worst
# second, and the times from b's return to full redundancy and from the
# failure to full redundancy, beside vSAN's figures. MB = 10^6 bytes. Never
# asserts timings. Exit 0 when it ran, 77 when a tool is missing, 1 when
# setting up failed. Needs root.
# Knobs: LINK, SIZE_MB (default 1024), BEFORE (default 10), AWAY (default
# 20), RUNTIME (default 90: must outlast the resync, or the rest of it goes
# unmeasured), RESULTS=DIR (keep fio's logs, the samples and the daemons'
# logs), TANDEM_BUILD (default build).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib-link.sh
. bench/lib-link.sh
# shellcheck source=lib-failure.sh
. bench/lib-failure.sh
BIN=${TANDEM_BUILD:-build}
LINK=${LINK:-0}
SIZE_MB=${SIZE_MB:-1024}
BEFORE=${BEFORE:-10}
AWAY=${AWAY:-20}
RUNTIME=${RUNTIME:-90}
for v in BEFORE AWAY; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v: '${!v}' is not a number"
done
[ $((BEFORE + AWAY)) -lt "$RUNTIME" ] || die "RUNTIME ($RUNTIME) must be longer than BEFORE + AWAY"
failure_pair hostfail 10.231.44
failure_start

echo "# fio 4k randrw 70/30 QD8 for ${RUNTIME} s; b dies at ${BEFORE} s, returns at $((BEFORE + AWAY)) s" >&2
failure_load
sleep "$BEFORE"
T_FAIL=$EPOCHREALTIME
# shellcheck disable=SC2154 # set by start_node
kill -KILL "$PID_b"
wait "$PID_b" 2>/dev/null || true
forget "$PID_b"
sleep "$AWAY"
T_BACK=$EPOCHREALTIME
start_node b
wait_is $((RUNTIME + 600)) "$WHOLE"
T_WHOLE=$WHEN
failure_end

PYTHONPATH=bench python3 - "$W" "$T0" "$T_FAIL" "$T_BACK" "${T_WHOLE:-}" "$LINK" "$AWAY" <<'PY'
import statistics, sys
from failure_report import Report
w, t0, tf, tb, tw, link, away = sys.argv[1:]
t0, tf, tb = float(t0), float(tf), float(tb)
tw = float(tw) if tw else None
r = Report(w, t0)
rel = r.rel
print(f"A failed host under load: fio 4k randrw 70/30 QD8 on a; b killed at {rel(tf):.1f} s, "
      f"back at {rel(tb):.1f} s; link {'unshaped' if link == '0' else link + ' Mbit/s'}")
r.rows({tf: "<b dies", tb: "<b back", tw: "<whole"})
allv = r.phases([("before", r.phase(0, rel(tf))),
                 (f"b away ({away} s)", r.phase(rel(tf), rel(tb))),
                 ("b back, resync", r.phase(rel(tb), rel(tw) if tw else 1e9)),
                 ("after, whole", r.phase(rel(tw), 1e9) if tw else [])])
if allv:
    print(f"  dip: worst second {min(allv) / r.base - 1:+.0%}, median while not whole "
          f"{statistics.median(allv) / r.base - 1:+.0%} (vSAN, a failed host: -16% of TPS)")
if tw:
    print(f"  full redundancy {tw - tb:.1f} s after b returned, {tw - tf:.1f} s after it failed "
          f"(vSAN: 715 s to steady state)")
else:
    print("  NOT whole again within the wait")
PY
