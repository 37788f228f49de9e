#!/usr/bin/env bash
# Sync replication through a link of limited bandwidth, with and without
# compression: a pair on loopback (RAM stores), a's link to b through the
# tests' link proxy with `rate` set, fio over NBD on a writing fio's
# 50%-compressible buffers (each write new data). One line per codec and job.
#   bench/pack-link.sh                 RATES="50000000 12500000" (bytes/s per direction)
#   RUNTIME=8 CODECS="none lz4 zstd" JOBS="write,1M,4 randwrite,4k,32" bench/pack-link.sh
# Loopback only; the proxy is Python, so rates much above 100 MB/s measure it.
# shellcheck source=../tests/integration/lib.sh
. "$(dirname "$0")/../tests/integration/lib.sh"
# shellcheck source=../tests/integration/lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio python3
RATES=${RATES:-"50000000 12500000"}
CODECS=${CODECS:-"none lz4 zstd"}
JOBS=${JOBS:-"write,1M,4 randwrite,4k,32"}
RUNTIME=${RUNTIME:-8}
export VOL_SIZE=512M

printf '%-10s %-6s %-16s %10s %12s\n' "link" "codec" "job" "MB/s" "wire/data"
for rate in $RATES; do
	for codec in $CODECS; do
		extra=("disk.a = ram:" "disk.b = ram:")
		[ "$codec" = none ] || extra+=("compression = $codec")
		PROXY=1 write_config2 "$T/c.ini" "${extra[@]}"
		proxy_start
		proxy rate "$((rate * 8))" # the proxy takes bits/s
		start_pair
		for job in $JOBS; do
			IFS=, read -r rw bs qd <<<"$job"
			w0=$(jfield a "p['link']['wire_bytes']")
			d0=$(jfield a "p['link']['data_bytes']")
			fio --name=j --ioengine=nbd --uri="$(uri a)" --time_based --runtime="$RUNTIME" \
				--ramp_time=1 --rw="$rw" --bs="$bs" --iodepth="$qd" --size=256M \
				--refill_buffers --buffer_compress_percentage=50 --output-format=json \
				--output="$T/f.json" >/dev/null 2>&1 || fail "fio $job ($codec)"
			w1=$(jfield a "p['link']['wire_bytes']")
			d1=$(jfield a "p['link']['data_bytes']")
			python3 -c "
import json, sys
w = json.load(open(sys.argv[1]))['jobs'][0]['write']
print('%-10s %-6s %-16s %10.1f %12.3f' % ('%.1fMB/s' % (int(sys.argv[2]) / 1e6), sys.argv[3],
      sys.argv[4], w['bw_bytes'] / 1e6, (int(sys.argv[6]) - int(sys.argv[5])) /
      max(1, int(sys.argv[8]) - int(sys.argv[7]))))" \
				"$T/f.json" "$rate" "$codec" "$rw-$bs-qd$qd" "$w0" "$w1" "$d0" "$d1"
		done
		stop b
		stop a
		kill "$PROXY_PID" 2>/dev/null
		wait "$PROXY_PID" 2>/dev/null
		rm -rf "$T/a" "$T/b"
	done
done
