#!/usr/bin/env bash
# Zero-aware resync: regions that are holes or read back as all zeros on the
# resync source go to the target as zero extents, without payload. a dials b
# through the link proxy, which counts the bytes it forwards.
#  1. The pair holds 64M of random data in [0, 64M). b is disconnected
#     (`tandemctl disconnect` on b); a overwrites [0, 60M) with zeros by
#     ordinary NBD writes (data that happens to be zero, not WRITE_ZEROES)
#     and [60M, 64M) with new random data. On `connect` the 64M marked are
#     resynced: less than a quarter of that crosses the link, at least the
#     60M zeroed are sent as zero extents (resync_zero_bytes), the 4M of data
#     as data; b ends equal to a and to what was written (zeros where they
#     were written).
#     Only [0, 64M) was ever written: on the connection loss a also marks
#     the extents of its activity log (recently written, bitmap.h), which
#     lie there too, so exactly 64M are marked whatever the timing.
#  2. b's disk is replaced by an empty one (data-dir wiped while b is down):
#     the full sync of the 128M volume, of which only 4M hold data (the rest
#     zeros written in 1., or never written: holes), moves little more than
#     those 4M over the link.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy qemu-io python3

export VOL_SIZE=128M
M=$((1 << 20))
VOL=$((128 * M))
ZERO_MB=60
DATA_MB=64

link_total()
{
	python3 "$_root/tests/tools/linkproxy.py" --control "$T/proxy.sock" --cmd stats |
		sed -n 's/.*bytes_ab=\([0-9]*\) bytes_ba=\([0-9]*\).*/\1 \2/p' | {
		read -r ab ba
		echo $((ab + ba))
	}
}

PROXY=1 write_config2 "$T/c.ini"
proxy_start
start_pair

head -c "${DATA_MB}M" /dev/urandom >"$T/data"
nbdcopy "$T/data" "$(uri a)" || fail "writing ${DATA_MB}M to a failed"
compare_replicas
cp "$T/data" "$T/expect"
truncate -s "$VOL" "$T/expect"

# ---- 1. zeros written as data while b is away ----
ctl_on b disconnect vol0 || fail "disconnect on b failed"
wait_for a "p['connection'] != 'connected'" 15
cmds=()
for ((k = 0; k < ZERO_MB; k++)); do
	cmds+=(-c "write -P 0 $((k * M)) $M")
done
qemu-io -f raw "$(uri a)" "${cmds[@]}" -c flush >"$T/qio.out" 2>&1 ||
	{ cat "$T/qio.out" >&2; fail "writing ${ZERO_MB}M of zeros to a failed"; }
[ "$(grep -c "^wrote $M/$M bytes at offset" "$T/qio.out")" -eq "$ZERO_MB" ] ||
	{ cat "$T/qio.out" >&2; fail "the zero writes on a were not all acknowledged"; }
dd if=/dev/zero of="$T/expect" bs=1M count="$ZERO_MB" conv=notrunc status=none
put a $((ZERO_MB * M)) $(((DATA_MB - ZERO_MB) * M)) "$T/expect"
marked=$(jfield a "p['out_of_sync_bytes']")
[ "$marked" = $((DATA_MB * M)) ] || fail "a marks $marked bytes out of sync after ${DATA_MB}M written, expected exactly that"

l0=$(link_total)
t0=$(date +%s.%N)
ctl_on b connect vol0 || fail "connect on b failed"
wait_connected
compare_replicas 60
wait_for a "p['replication'] == 'established' and p['out_of_sync_bytes'] == 0" 30
t1=$(date +%s.%N)
link=$(($(link_total) - l0))
read -r sent zero same < <(jfield a "p['resync_sent_bytes'], p['resync_zero_bytes'], p['resync_same_bytes']")
grep -q "full sync" "$T/a.log" && fail "the reconnection caused a full sync"
cmp -n "$(vol_bytes)" "$T/expect" "$T/b/vol0.img" || fail "b's data area is not what was written"
log "resync of $marked marked bytes (${ZERO_MB}M zeros, $((DATA_MB - ZERO_MB))M data) in $(python3 -c "print('%.2f' % ($t1 - $t0))") s: $sent sent as data, $zero as zero extents; $link bytes on the link ($(python3 -c "print('%.1f%%' % (100.0 * $link / $marked))") of marked)"
[ "$same" = 0 ] || fail "$same bytes found equal by digest, but resync-checksum is off by default"
[ "$zero" -ge $((ZERO_MB * M)) ] || fail "only $zero bytes went as zero extents, of the ${ZERO_MB}M zeroed"
[ "$sent" -ge $(((DATA_MB - ZERO_MB) * M)) ] || fail "only $sent bytes went as data: the $((DATA_MB - ZERO_MB))M of random data were not all sent"
[ "$link" -lt $((marked / 4)) ] ||
	fail "$link bytes crossed the link for $marked marked, ${ZERO_MB}M of them zeros: not less than a quarter"

# ---- 2. a new empty disk for b: a full sync of a volume mostly without data ----
# a holds data in [60M, 64M) only: zeros below (written in 1.), holes above.
data_bytes=$(((DATA_MB - ZERO_MB) * M))
stop b
rm -rf "$T/b"
l0=$(link_total)
t0=$(date +%s.%N)
start b
wait_connected
grep -q "connected to b (.*full sync)" "$T/a.log" || fail "the replaced disk did not get a full sync"
compare_replicas 60
wait_for a "p['replication'] == 'established' and p['out_of_sync_bytes'] == 0" 30
t1=$(date +%s.%N)
link=$(($(link_total) - l0))
read -r sent zero < <(jfield a "p['resync_sent_bytes'], p['resync_zero_bytes']")
n=$(sed -n 's/.*resync to b done: \([0-9]*\) bytes.*/\1/p' "$T/a.log" | tail -n 1)
cmp -n "$(vol_bytes)" "$T/expect" "$T/b/vol0.img" || fail "b's new data area is not what a holds"
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b is not uptodate after its full sync"
log "full sync of the ${VOL} byte volume ($data_bytes bytes of data) in $(python3 -c "print('%.2f' % ($t1 - $t0))") s: resynced $n, $sent sent as data, $zero as zero extents; $link bytes on the link"
[ "$n" = "$VOL" ] || fail "the full sync resynced $n bytes, not the whole $VOL"
[ "$sent" -ge "$data_bytes" ] || fail "the full sync sent only $sent bytes as data, of the $data_bytes that hold data"
[ "$sent" -le $((data_bytes + M)) ] || fail "the full sync sent $sent bytes as data, for $data_bytes that hold data"
[ "$zero" -ge $((VOL - data_bytes - M)) ] || fail "the full sync sent only $zero bytes as zero extents"
[ "$link" -lt $((data_bytes + 4 * M)) ] ||
	fail "the full sync moved $link bytes over the link for $data_bytes bytes of data"
stop b
stop a
