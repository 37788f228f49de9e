#!/usr/bin/env bash
# async: the secondary's disk dies with the stream holding writes for it
# (F1). b's data area is a file on XFS on a loop device, shut down with
# `xfs_io -x -c shutdown`; the link is slowed by the proxy so that a's
# backlog is not empty when b's first write fails. a's writes go on at local
# speed; the backlog turns into marks at once (a drops the connection and
# the stream is marked as on any lost connection, instead of sending it to
# a disk that takes nothing), b stays failed, and attach brings it back to
# a's data.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3 mkfs.xfs losetup xfs_io qemu-io

xfs_loop "$T/xfs"

export VOL_SIZE=64M PROXY=1 REPL_MODE=async
write_config2 "$T/c.ini" "disk.b = $T/xfs/vol0.img" "async-backlog = 32M"
proxy_start
start_pair
put a 0 $((1 << 20))
proxy "rate 8mbit; queue 64k"
xfs_io -x -c shutdown "$T/xfs" || fail "xfs_io shutdown failed"
qemu-io -f raw "$(uri a)" -c "write -P 0x44 0 8M" >/dev/null || fail "writing to a failed"
wait_for b "v['disk'] == 'failed'" 20
proxy "rate 0"
wait_for a "p['disk'] == 'failed' and p.get('backlog_bytes', 0) == 0 and p['out_of_sync_bytes'] > 0" 20
this_run a | grep -q "b's disk failed during the async stream" ||
	fail "a did not turn the stream into marks when b's disk failed"
qemu-io -f raw "$(uri a)" -c "write -P 0x55 8M 8M" >/dev/null || fail "writing to a failed"
sleep 1
[ "$(jfield a "p.get('backlog_bytes', 0)")" = 0 ] || fail "a queues writes for b's failed disk"
n=$(this_run b | grep -c 'disk failed -> inconsistent' || true)
[ "$n" = 0 ] || fail "b's failed disk went inconsistent $n times"
out=$(ctl_on b attach vol0 --disk "$T/b-new.img" 2>&1) || fail "attach failed: $out"
wait_for b "v['disk'] == 'uptodate'" 60
wait_for a "p['replication'] == 'established' and p['out_of_sync_bytes'] == 0 and p.get('backlog_bytes', 0) == 0" 30
cmp -n "$(vol_bytes)" "$T/a/vol0.img" "$T/b-new.img" || fail "b's new disk differs from a's data"
stop a
stop b
log "ok"
