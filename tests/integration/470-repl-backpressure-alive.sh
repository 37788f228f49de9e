#!/usr/bin/env bash
# Back-pressure is not peer death (docs/SPEC.md, "Liveness"): b's disk is
# throttled (blkio cgroup) so that its applies fall behind and it stops
# reading the link at its apply limit for many peer timeouts, while a keeps
# sending and b keeps acknowledging. Neither node may drop the other: the
# connection stays up through the whole copy, and the replicas end equal.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio python3 stat
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for a blkio cgroup" >&2; exit 77; }
CG=/sys/fs/cgroup/blkio
if [ ! -w "$CG/cgroup.procs" ] || [ ! -e "$CG/blkio.throttle.write_bps_device" ]; then
	echo "SKIP: no writable blkio cgroup (v1) here" >&2
	exit 77
fi

export VOL_SIZE=256M PEER_TIMEOUT=2
write_config2 "$T/c.ini"
start_pair
G=$CG/tandem-it-$$
mkdir "$G" || { echo "SKIP: cannot make a blkio cgroup" >&2; exit 77; }
AT_EXIT+=("cat '$G/cgroup.procs' 2>/dev/null | while read -r p; do echo \$p > '$CG/cgroup.procs'; done; rmdir '$G'")
dev=$(stat -c '%Hd:%Ld' "$T/b/vol0.img")
echo "$dev $((8 << 20))" >"$G/blkio.throttle.write_bps_device" ||
	{ echo "SKIP: cannot throttle device $dev" >&2; exit 77; }
for tid in /proc/"${NPID[b]}"/task/*; do
	echo "${tid##*/}" >"$G/cgroup.procs" 2>/dev/null || true
done
start_s=$(date +%s)
# Four writers of 4 MiB, 32 deep each: far more in flight than b's apply limit.
fio --name=w --ioengine=nbd --uri="$(uri a)" --rw=write --bs=4M --iodepth=32 --numjobs=4 \
	--size=48M --offset_increment=48M --direct=1 --output="$T/fio.out" >/dev/null 2>&1 ||
	{ cat "$T/fio.out" >&2; fail "fio writing to a failed"; }
secs=$(($(date +%s) - start_s))
log "192M written in ${secs}s with b's disk at 8 MB/s"
grep -E "did not answer|connected -> connecting" "$T/a.log" "$T/b.log" &&
	fail "a node dropped its peer while the peer was alive (back-pressure taken for death)"
[ "$secs" -ge $((3 * PEER_TIMEOUT)) ] || fail "the copy took ${secs}s: b never fell behind, the test means little"
grep -q "established -> syncsource" "$T/a.log" && fail "a resync was needed: the link dropped"
echo "$dev 0" >"$G/blkio.throttle.write_bps_device"
compare_replicas
stop b
stop a
