#!/usr/bin/env bash
# `verify` with bitmap-granularity 16M (each compared chunk larger than
# verify's 8 MiB read window) runs to the end and finds a difference planted
# on b; before, it never progressed past 0 bytes.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-io python3

export VOL_SIZE=64M
write_config2 "$T/c.ini" "bitmap-granularity = 16M"
start_pair
put a 0 $((8 << 20))
ctl_on a wait-sync vol0 --timeout 30 || fail "a: wait-sync"
ctl_on a verify vol0 || fail "verify did not start"
wait_for a "p['verify']['state'] == 'done'" 30
[ "$(jfield a "p['verify']['mismatch_ranges']")" = 0 ] || fail "verify found differences in equal replicas"
# A difference behind a's back: one byte of b's image at 4M inverted.
python3 - "$T/b/vol0.img" <<'EOF2'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
off = 4 << 20
old = os.pread(fd, 1, off)
os.pwrite(fd, bytes([old[0] ^ 0xff]), off)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
EOF2
ctl_on a verify vol0 || fail "the second verify did not start"
for ((i = 0; i < 300; i++)); do
	[ "$(grep -c "verify against b done" "$T/a.log")" -ge 2 ] && break
	sleep 0.1
done
[ "$(grep -c "verify against b done" "$T/a.log")" -ge 2 ] || fail "the second verify did not finish in 30 s"
[ "$(jfield a "p['verify']['mismatch_ranges']")" -ge 1 ] || fail "verify missed the planted difference"
stop b
stop a
