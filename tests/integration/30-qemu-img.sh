#!/usr/bin/env bash
# qemu-img as a client: convert a raw image onto the volume, compare says
# identical; change one byte locally and compare must see the difference.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need qemu-img python3

export VOL_SIZE=32M
write_config "$T/c.ini"
start_node

# Random data with a zero hole in the middle, so that convert's zero
# detection (WRITE_ZEROES / sparse handling) is exercised too.
head -c 32M /dev/urandom >"$T/img.raw"
dd if=/dev/zero of="$T/img.raw" bs=1M seek=10 count=4 conv=notrunc status=none
# Dirty the volume first so that the hole really has to be zeroed.
qemu-io -f raw "$NBD_URI" -c "write -P 0xee 9M 6M" >/dev/null || fail "qemu-io prefill failed"

qemu-img convert -n -f raw -O raw "$T/img.raw" "$NBD_URI" || fail "qemu-img convert failed"
qemu-img compare -f raw -F raw "$T/img.raw" "$NBD_URI" || fail "qemu-img compare: image and volume differ"

# One byte changed locally (inverted: a fixed value could be there already, the
# data is random): compare must now report a difference (exit 1).
python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)[0]; f.seek(int(sys.argv[2])); f.write(bytes([b ^ 0xff]))' \
	"$T/img.raw" $((20 * 1024 * 1024 + 77))
rc=0
qemu-img compare -f raw -F raw "$T/img.raw" "$NBD_URI" >"$T/cmp.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "qemu-img compare after a local change exited $rc, expected 1: $(cat "$T/cmp.out")"
# qemu-img reports the start of the mismatching 512-byte sector.
grep -q "offset $((20 * 1024 * 1024))!" "$T/cmp.out" ||
	fail "compare names the wrong offset: $(cat "$T/cmp.out")"

stop_node
