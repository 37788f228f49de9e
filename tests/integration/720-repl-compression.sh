#!/usr/bin/env bash
# Compression of replicated data (`compression`), with fio writing through
# the primary's NBD front-end. For lz4 (set in [volume]) and zstd (set in
# [cluster]), each on a fresh pair:
#  1. 50%-compressible data (fio buffer_compress_percentage=50), in 256K and
#     4K writes: the link object of a shows what was compressed and that the
#     wire carried clearly less than the data (below 3/4 of it); b
#     decompressed it all; the replicas are identical.
#  2. Random data: tested and sent as is (compress_skipped_bytes), nothing
#     compressed, the wire carries at least the data; replicas identical.
#  3. A resync with compression: b disconnects, a writes compressible data,
#     b connects: the resync's RS_DATA goes compressed; replicas identical.
# Then a mixed pair, each node with its own config file: a `lz4`, b `none`.
# a primary sends compressed, b takes it although it does not compress
# itself; after a switchover b (primary) sends raw and a takes that. Both
# ways the replicas end identical.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=128M
M=$((1 << 20))

# lk NODE: the link counters of NODE's peer entry, in this order.
LK_KEYS="wire_bytes data_bytes compressed_in_bytes compressed_out_bytes compress_skipped_bytes decompressed_bytes"
lk()
{
	jfield "$1" "' '.join(str(p['link'][k]) for k in '$LK_KEYS'.split())"
}

# fio_write NODE OFFSET_MB SIZE_MB BS KIND: writes through NODE's NBD export;
# KIND half: 50% compressible, random: not compressible. Each write new data.
fio_write()
{
	local n=$1 off=$2 size=$3 bs=$4 kind=$5 extra=()
	[ "$kind" = half ] && extra=(--buffer_compress_percentage=50 --buffer_compress_chunk=512)
	timeout -k 5 120 fio --name=w --ioengine=nbd --uri="$(uri "$n")" --rw=write --bs="$bs" \
		--iodepth=8 --offset="${off}M" --size="${size}M" --refill_buffers "${extra[@]}" \
		>"$T/fio.out" 2>&1 || { cat "$T/fio.out" >&2; fail "fio ($kind, $bs) on $n failed"; }
}

# delta BEFORE AFTER: the per-key differences of two lk lines.
delta()
{
	python3 -c "import sys; a, b = sys.argv[1].split(), sys.argv[2].split(); print(' '.join(str(int(y) - int(x)) for x, y in zip(a, b)))" "$1" "$2"
}

ratio() { python3 -c "import sys; print('%.3f' % (int(sys.argv[1]) / max(1, int(sys.argv[2]))))" "$1" "$2"; }

one_codec()
{
	local codec=$1 where=$2 a0 a1 b0 b1 wire data cin cout skip dec
	rm -rf "$T/a" "$T/b"
	if [ "$where" = cluster ]; then
		write_config2 "$T/c.ini"
		sed -i "s/^\[cluster\]$/&\ncompression = $codec/" "$T/c.ini"
	else
		write_config2 "$T/c.ini" "compression = $codec"
	fi
	start_pair
	[ "$(jfield a "p['link']['compression']")" = "$codec" ] ||
		fail "$codec: a does not say it compresses with $codec: $(jfield a "p['link']")"

	# ---- 1. compressible ----
	a0=$(lk a) b0=$(lk b)
	fio_write a 0 32 256k half
	fio_write a 32 4 4k half
	compare_replicas
	a1=$(lk a) b1=$(lk b)
	read -r wire data cin cout skip _ < <(delta "$a0" "$a1")
	read -r _ _ _ _ _ dec < <(delta "$b0" "$b1")
	log "$codec, 36M of 50%-compressible data: $data data bytes, $wire on the wire ($(ratio "$wire" "$data")); compressed $cin into $cout ($(ratio "$cout" "$cin")), skipped $skip; b decompressed $dec; cpu ms a/b: $(jfield a "p['link']['compress_cpu_ms']") / $(jfield b "p['link']['decompress_cpu_ms']")"
	[ "$data" -ge $((36 * M)) ] || fail "$codec: a sent only $data data bytes for 36M written"
	[ "$cin" -ge $((34 * M)) ] || fail "$codec: only $cin of 36M compressible bytes went compressed"
	[ "$wire" -lt $((data * 3 / 4)) ] ||
		fail "$codec: $wire bytes on the wire for $data bytes of 50%-compressible data"
	[ "$cout" -lt $((cin * 3 / 4)) ] || fail "$codec: $cin compressed into $cout"
	[ "$dec" = "$cin" ] || fail "$codec: b decompressed $dec bytes, a compressed $cin"

	# ---- 2. random ----
	a0=$a1 b0=$b1
	fio_write a 40 16 256k random
	fio_write a 56 2 4k random
	compare_replicas
	a1=$(lk a) b1=$(lk b)
	read -r wire data cin cout skip _ < <(delta "$a0" "$a1")
	log "$codec, 18M of random data: $data data bytes, $wire on the wire; compressed $cin, skipped $skip"
	[ "$skip" -ge $((18 * M)) ] || fail "$codec: only $skip of 18M random bytes were skipped"
	[ "$cin" -le $((M / 4)) ] || fail "$codec: $cin bytes of random data went compressed"
	[ "$wire" -ge "$data" ] || fail "$codec: $wire bytes on the wire for $data of random data"

	# ---- 3. resync ----
	ctl_on b disconnect vol0 || fail "disconnect on b failed"
	wait_for a "p['connection'] != 'connected'" 15
	fio_write a 64 16 256k half
	marked=$(jfield a "p['out_of_sync_bytes']")
	[ "$marked" -ge $((16 * M)) ] || fail "$codec: only $marked bytes marked after 16M written alone"
	a0=$(lk a) b0=$(lk b)
	ctl_on b connect vol0 || fail "connect on b failed"
	wait_connected
	compare_replicas 60
	wait_for a "p['replication'] == 'established' and p['out_of_sync_bytes'] == 0" 30
	a1=$(lk a) b1=$(lk b)
	read -r wire data cin cout skip _ < <(delta "$a0" "$a1")
	read -r _ _ _ _ _ dec < <(delta "$b0" "$b1")
	sent=$(jfield a "p['resync_sent_bytes']")
	log "$codec, resync of $marked marked bytes: $sent sent as data, $wire on the wire; compressed $cin into $cout, skipped $skip; b decompressed $dec"
	[ "$cin" -ge $((16 * M)) ] || fail "$codec: the resync compressed only $cin bytes"
	[ "$wire" -lt "$data" ] || fail "$codec: the resync put $wire bytes on the wire for $data"
	[ "$dec" = "$cin" ] || fail "$codec: b decompressed $dec bytes of the resync, a compressed $cin"
	[ "$(jfield b "v['disk']")" = uptodate ] || fail "$codec: b is not uptodate after the resync"
	grep -qE "decompress|malformed|bad message" "$T/a.log" "$T/b.log" &&
		fail "$codec: a connection failed on a compressed message"
	stop b
	stop a
}

one_codec lz4 volume
one_codec zstd cluster

# ---- mixed: a lz4, b none ----
rm -rf "$T/a" "$T/b"
write_config2 "$T/a.ini" "compression = lz4"
sed '/^compression = /d' "$T/a.ini" >"$T/b.ini"
start a "$T/a.ini"
start b "$T/b.ini"
wait_connected
wait_for a "p['replication'] == 'established'"
[ "$(jfield a "p['link']['compression']")" = lz4 ] || fail "mixed: a does not compress"
[ "$(jfield b "p['link']['compression']")" = none ] || fail "mixed: b says it compresses"
a0=$(lk a) b0=$(lk b)
fio_write a 0 16 256k half
compare_replicas
a1=$(lk a) b1=$(lk b)
read -r _ _ cin _ _ _ < <(delta "$a0" "$a1")
read -r _ _ _ _ _ dec < <(delta "$b0" "$b1")
log "mixed, a (lz4) primary: compressed $cin, b (none) decompressed $dec"
if [ "$cin" -lt $((15 * M)) ] || [ "$dec" != "$cin" ]; then
	fail "mixed: a compressed $cin, b decompressed $dec"
fi

ctl_on a switchover vol0 b || fail "switchover to b failed"
wait_for b "v['role'] == 'primary'" 15
wait_for b "p['replication'] == 'established'"
a0=$(lk a) b0=$(lk b)
fio_write b 32 16 256k half
compare_replicas
a1=$(lk a) b1=$(lk b)
read -r wire data cin _ skip _ < <(delta "$b0" "$b1")
read -r _ _ _ _ _ dec < <(delta "$a0" "$a1")
log "mixed, b (none) primary: $data data bytes, $wire on the wire; compressed $cin, skipped $skip; a decompressed $dec"
[ "$data" -ge $((16 * M)) ] || fail "mixed: b sent only $data data bytes"
if [ "$cin" != 0 ] || [ "$skip" != 0 ] || [ "$dec" != 0 ]; then
	fail "mixed: b (compression = none) compressed $cin, tested $skip; a decompressed $dec"
fi
[ "$wire" -ge "$data" ] || fail "mixed: b put $wire bytes on the wire for $data raw"
stop b
stop a
