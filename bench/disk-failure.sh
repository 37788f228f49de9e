#!/usr/bin/env bash
# A failed disk under load: the primary's store starts failing every write
# (`tandemctl inject`, as a disk that dies) while a client keeps working; the
# primary serves through its peer (diskless); after DISKLESS s a new disk is
# attached and filled in the background. What the client saw each second,
# and how long until both replicas are whole again. The second field
# report's disk-failure case (VMware's vSAN resiliency study: a failed disk
# cost 10% of TPS and 160 s to recover).
#
# Two network namespaces joined by a veth pair (10.231.45.1 in A, .2 in B;
# bench/lib-link.sh), shaped to LINK Mbit/s (default 0: unshaped). Node a
# (primary, NBD, fault-injection = on) in A, node b in B, one volume of
# SIZE_MB MiB with replication = sync, written once in full first. fio (nbd
# engine) in A: 4 KiB random reads and writes, 70/30, QD8, random data, for
# RUNTIME s, with its IOPS logged per second. At t = BEFORE s a's disk
# fails; DISKLESS s after a is diskless, `tandemctl attach vol0 --disk NEW`;
# a's status is sampled until its disk is up to date and its peer in sync.
#
#   bench/disk-failure.sh
#   LINK=1000 DISKLESS=20 RUNTIME=120 bench/disk-failure.sh
#
# Prints the IOPS of each second (reads + writes), the median of each phase
# (before, diskless, filling the new disk, after) against the median before
# it, the worst second, whether fio saw any error, and the time from attach
# to full redundancy with the rate it copied at, beside vSAN's figures.
# MB = 10^6 bytes. Never asserts timings. Exit 0 when it ran, 77 when a tool
# is missing, 1 when setting up failed. Needs root.
# Knobs: LINK, SIZE_MB (default 1024), BEFORE (default 10), DISKLESS
# (default 20), RUNTIME (default 90: must outlast the fill), RESULTS=DIR
# (keep fio's logs and the daemons' logs), TANDEM_BUILD (default build).
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
DISKLESS=${DISKLESS:-20}
RUNTIME=${RUNTIME:-90}
for v in BEFORE DISKLESS; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v: '${!v}' is not a number"
done
[ $((BEFORE + DISKLESS)) -lt "$RUNTIME" ] || die "RUNTIME ($RUNTIME) must be longer than BEFORE + DISKLESS"
failure_pair diskfail 10.231.45 "fault-injection = on"
failure_start

echo "# fio 4k randrw 70/30 QD8 for ${RUNTIME} s; a's disk fails at ${BEFORE} s, a new one ${DISKLESS} s later" >&2
failure_load
sleep "$BEFORE"
T_FAIL=$EPOCHREALTIME
ctl_a inject vol0 write >/dev/null || die "inject refused"
wait_is 30 "v['disk'] == 'diskless'"
T_DISKLESS=$WHEN
[ -n "$T_DISKLESS" ] || die "a did not go diskless: $(status_json)"
sleep "$DISKLESS"
T_ATTACH=$EPOCHREALTIME
ctl_a attach vol0 --disk "$W/a/new.img" >/dev/null || die "attach refused"
wait_is $((RUNTIME + 600)) "$WHOLE"
T_WHOLE=$WHEN
failure_end

PYTHONPATH=bench python3 - "$W" "$T0" "$T_FAIL" "$T_DISKLESS" "$T_ATTACH" "${T_WHOLE:-}" "$LINK" "$SIZE_MB" <<'PY'
import json, statistics, sys
from failure_report import Report
w, t0, tf, td, ta, tw, link, size_mb = sys.argv[1:]
t0, tf, td, ta = float(t0), float(tf), float(td), float(ta)
tw = float(tw) if tw else None
r = Report(w, t0)
rel = r.rel
j = json.load(open(f"{w}/fio.json"))["jobs"][0]
print(f"A failed disk under load: fio 4k randrw 70/30 QD8 on a; a's disk fails at {rel(tf):.1f} s "
      f"(diskless {td - tf:.2f} s later), new disk attached at {rel(ta):.1f} s; "
      f"link {'unshaped' if link == '0' else link + ' Mbit/s'}")
print(f"fio: error {j['error']}, {j['read']['total_ios']} reads, {j['write']['total_ios']} writes")
r.rows({tf: "<fails", ta: "<attach", tw: "<whole"})
allv = r.phases([("before", r.phase(0, rel(tf))),
                 ("diskless (through b)", r.phase(rel(tf), rel(ta))),
                 ("new disk filling", r.phase(rel(ta), rel(tw) if tw else 1e9)),
                 ("after, whole", r.phase(rel(tw), 1e9) if tw else [])])
if allv:
    print(f"  dip: worst second {min(allv) / r.base - 1:+.0%}, median while not whole "
          f"{statistics.median(allv) / r.base - 1:+.0%} (vSAN, a failed disk: -10% of TPS)")
if tw:
    mb = int(size_mb) * 1048576 / 1e6
    print(f"  full redundancy {tw - ta:.1f} s after attach ({mb / (tw - ta):.0f} MB/s for "
          f"{size_mb} MiB), {tw - tf:.1f} s after the failure (vSAN: 160 s)")
else:
    print("  NOT whole again within the wait")
PY
