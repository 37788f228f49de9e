#!/usr/bin/env bash
# The primary's disk dies under a writer, with a witness (issue: a dead disk
# on the primary must not cost the volume its up-to-date peer). a's data area
# is a file on XFS on a loop device; `xfs_io -x -c shutdown` makes every later
# I/O to it fail with EIO, as a dead disk does. A client writes distinct
# blocks to a and, when a request fails, retries on b.
#  1. a's disk is failed, and status and the event say why (EIO, which
#     operation, when).
#  2. The witness record stays `synced`: b holds every write a acknowledged.
#  3. a is killed: b takes over by itself (no --force), and every write the
#     client saw acknowledged is on b.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3 mkfs.xfs losetup xfs_io

xfs_loop "$T/xfs"

export VOL_SIZE=64M
write_config3 "$T/cluster.ini" "disk.a = $T/xfs/vol0.img"
start_trio
wait_for a "v['role'] == 'primary'"
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 30
events_follow a "$T/events.a"
[ "$(wrec "r['synced']")" = True ] || fail "the witness record is not synced before the failure"

client_start a b
wait_acked "$T/acked" 200
log "the disk of a dies after $(acked "$T/acked") acknowledged writes"
xfs_io -x -c "shutdown" "$T/xfs" || fail "xfs_io shutdown failed"
wait_for a "v['disk'] == 'failed'" 15
[ "$(jfield a "v['disk_error']['error']")" = EIO ] ||
	fail "a's disk_error is $(jfield a "v['disk_error']"), expected EIO"
op=$(jfield a "v['disk_error']['op']")
case $op in read | write | flush) ;; *) fail "a's disk_error names the operation '$op'" ;; esac
[ "$(jfield a "v['disk_error']['time'] is not None")" = True ] || fail "a's disk_error has no time"
this_run a | grep -q "the disk failed: $op of the local store: Input/output error" ||
	fail "a's log does not say why its disk failed"
for ((i = 0; i < 100; i++)); do
	grep -q '"event":"disk-error","error":"EIO","op":"'"$op"'"' "$T/events.a" && break
	sleep 0.1
done
grep -q '"event":"disk-error","error":"EIO"' "$T/events.a" ||
	fail "no disk-error event: $(cat "$T/events.a")"
# b still holds everything a acknowledged: the record stays synced
sleep 1
[ "$(wrec "r['synced']")" = True ] || fail "the witness record lost synced when a's disk failed"
[ "$(wrec "r['primary']")" = a ] || fail "the witness does not name a primary"

log "killing a"
crash a
wait_for b "v['role'] == 'primary' and v['disk'] == 'uptodate'" 20
wait_acked "$T/acked" $(($(acked "$T/acked") + 100))
client_stop
this_run b | grep -q "the witness agrees" || fail "b's log does not show the failover"
grep -q -- '--force' "$T/b.log" && fail "b needed --force"
[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b primary"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" --nbd "127.0.0.1:${NBDP[b]}" \
	"$T/b/vol0.img" || fail "acknowledged writes are missing on b"
stop b
kill_witness TERM
log "ok"
