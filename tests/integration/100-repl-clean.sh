#!/usr/bin/env bash
# Two nodes created empty together: no initial sync; random data written over
# NBD to the primary (nbdcopy, several connections, and qemu-io patterns) is
# on both data areas byte for byte; the secondary refuses the export; status
# shows both sides connected and established.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy nbdinfo qemu-io python3

export VOL_SIZE=64M
write_config2 "$T/c.ini"
start a
start b
wait_connected
[ "$(jfield a "p['replication']")" = established ] || fail "a: not established"
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b: disk not uptodate"
# created together: nothing to copy
grep -q "full sync" "$T/a.log" && fail "volumes created empty together got a full sync"

nbdinfo "$(uri b)" >/dev/null 2>&1 && fail "the secondary served the export"

head -c 64M /dev/urandom >"$T/in.img"
nbdcopy --flush "$T/in.img" "$(uri a)" || fail "nbdcopy to the primary failed"
qemu-io -f raw "$(uri a)" -c "aio_write -P 0x11 0 64k" -c "aio_write -P 0x22 32k 64k" \
	-c "aio_flush" -c "write -P 0x33 1M 4k" -c "write -z 2M 1M" -c "discard 4M 1M" \
	-c "write -f -P 0x44 8M 8k" >/dev/null || fail "qemu-io patterns failed"

compare_replicas
[ "$(jfield a "p['out_of_sync_bytes']")" = 0 ] || fail "a reports bytes out of sync"
stop b
stop a
