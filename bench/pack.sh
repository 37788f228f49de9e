#!/usr/bin/env bash
# What `compression` gives on fio's 50%-compressible buffers, and what data
# that does not compress costs: fio writes 64 MiB of each kind to files
# (buffer_compress_percentage=50 with its default 512-byte chunks, and plain
# random buffers; every buffer new), then build/pack-bench compresses them
# in payloads of 4K to 1M with lz4 and zstd, one core, as the link does.
#   bench/pack.sh            (SIZE_MB=64 ROUNDS=3 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${SIZE_MB:-64}
ROUNDS=${ROUNDS:-3}
command -v fio >/dev/null || { echo "bench/pack.sh: needs fio" >&2; exit 1; }
make --no-print-directory build/pack-bench >/dev/null
T=$(mktemp -d "${TMPDIR:-/tmp}/tandem-pack.XXXXXX")
trap 'rm -rf "$T"' EXIT
gen()
{
	fio --name=gen --ioengine=sync --filename="$T/$1" --rw=write --bs=1M --size="${SIZE_MB}M" \
		--refill_buffers "${@:2}" >/dev/null
}
gen half --buffer_compress_percentage=50
gen random
echo "== fio buffer_compress_percentage=50, ${SIZE_MB} MiB"
build/pack-bench "$T/half" "$ROUNDS"
echo "== fio random buffers, ${SIZE_MB} MiB"
build/pack-bench "$T/random" "$ROUNDS"
