#!/usr/bin/env bash
# qemu-io drives the request types one by one: concurrent aio writes and a
# flush, overlapping 512-aligned (not 4K-aligned) writes, sub-sector writes,
# FUA writes, WRITE_ZEROES (with and without unmap) and TRIM, each checked by
# reading patterns back, then again from a second connection.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need qemu-io

export VOL_SIZE=16M
write_config "$T/c.ini"
start_node

# qemu-io exits 1 if a synchronous command fails or a `read -P` mismatches,
# but aio commands only report errors in their output: grep for those too.
qio()
{
	local out=$T/qio.out rc=0 a=() c
	for c in "$@"; do
		a+=(-c "$c")
	done
	qemu-io -f raw "$NBD_URI" "${a[@]}" >"$out" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ] || grep -qiE 'fail|error|mismatch' "$out"; then
		cat "$out" >&2
		fail "qemu-io (exit $rc) running $# commands from '$1' to '${!#}'"
	fi
}

K=1024
M=$((1024 * 1024))

# 1. Many aio writes in flight at once (non-overlapping, so their order does
#    not matter), including 512-byte ones, then aio_flush waits for them all.
cmds=("aio_write -P 0xab 0 1M" "aio_write -P 0xab 1M 1M")
for i in $(seq 0 31); do
	cmds+=("aio_write -P 0x$(printf %02x $((0x20 + i))) $((4 * M + i * 512)) 512")
done
cmds+=("aio_write -f -P 0x78 $((5 * M)) 256k" "aio_flush" "read -P 0xab 0 2M")
for i in $(seq 0 31); do
	cmds+=("read -P 0x$(printf %02x $((0x20 + i))) $((4 * M + i * 512)) 512")
done
cmds+=("read -P 0x78 $((5 * M)) 256k")
qio "${cmds[@]}"

# 2. Overlapping writes, 512-aligned but not 4K-aligned, one after the other:
#    the later one wins exactly over its own range.
qio "write -P 0xcd 1536 2560" \
	"write -P 0xce 7680 1024" \
	"write -P 0xcf $((64 * K - 512)) 1536" \
	"flush" \
	"read -P 0xab 0 1536" \
	"read -P 0xcd 1536 2560" \
	"read -P 0xab 4096 3584" \
	"read -P 0xce 7680 1024" \
	"read -P 0xab 8704 $((64 * K - 512 - 8704))" \
	"read -P 0xcf $((64 * K - 512)) 1536" \
	"read -P 0xab $((65 * K)) $((M - 65 * K))"

# 3. Below the 512-byte block: qemu reads, modifies, writes back; the bytes
#    around must survive.
qio "write -P 0x99 $((M + 100)) 50" \
	"read -P 0xab $M 100" \
	"read -P 0x99 $((M + 100)) 50" \
	"read -P 0xab $((M + 150)) $((4096 - 150))"

# 4. FUA writes (sync and aio).
qio "write -f -P 0x77 $((3 * M)) 64k" \
	"aio_write -f -P 0x76 $((3 * M + 64 * K)) 64k" \
	"aio_flush" \
	"read -P 0x77 $((3 * M)) 64k" \
	"read -P 0x76 $((3 * M + 64 * K)) 64k"

# 5. WRITE_ZEROES: plain, may-unmap (-u), with FUA (-f), and unaligned to 4K;
#    neighbours keep their data.
qio "write -z 64k 128k" \
	"write -z -u 320k 64k" \
	"write -z -f 448k 32k" \
	"write -z 1536k 1536" \
	"read -P 0 64k 128k" \
	"read -P 0 320k 64k" \
	"read -P 0 448k 32k" \
	"read -P 0 1536k 1536" \
	"read -P 0xab 192k 128k" \
	"read -P 0xab 384k 64k" \
	"read -P 0xab 480k 32k" \
	"read -P 0xab $((1536 * K + 1536)) 2560"

# 6. TRIM: this server punches holes, which read back as zeros.
qio "discard 512k 256k" \
	"read -P 0 512k 256k" \
	"read -P 0xab 768k 256k" \
	"read -P 0xab $((512 * K - 4096)) 4096"

# 7. A new connection sees all of it (nothing was per-connection state).
qio "read -P 0xab 0 1536" \
	"read -P 0xcd 1536 2560" \
	"read -P 0x99 $((M + 100)) 50" \
	"read -P 0x77 $((3 * M)) 64k" \
	"read -P 0x3f $((4 * M + 31 * 512)) 512" \
	"read -P 0 64k 128k" \
	"read -P 0 512k 256k" \
	"read -P 0x78 $((5 * M)) 256k" \
	"read -P 0 $((6 * M)) $((10 * M))"

# 8. Out of range: the request fails cleanly and the node goes on.
rc=0
qemu-io -f raw "$NBD_URI" -c "read $((16 * M)) 4k" >"$T/oor.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "a read past the end succeeded: $(cat "$T/oor.out")"
check_alive "out-of-range read"

stop_node
