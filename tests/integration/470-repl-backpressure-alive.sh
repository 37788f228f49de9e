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

export VOL_SIZE=256M PEER_TIMEOUT=2
write_config2 "$T/c.ini"
start_pair
throttle_writes b $((8 << 20))
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
throttle_writes b 0
compare_replicas
stop b
stop a
