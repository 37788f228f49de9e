#!/usr/bin/env bash
# Digest-first resync (resync-checksum = yes): the same scenario runs twice,
# on a fresh pair each time, once with resync-checksum = no and once = yes.
# a dials b through the link proxy, which counts the bytes it forwards.
# 64M of random data is written to a while connected; a is disconnected
# (`tandemctl disconnect` on a) and rewrites exactly the same bytes at the
# same offsets, so 64M is marked out of sync although b already holds it.
# In the yes run, three 1M regions are also changed for real meanwhile (two
# inside the rewritten 64M, one outside). On `connect`, b is resynced; the
# bytes that crossed the link during the resync are counted.
# Asserts: without digests the whole 64M is sent as data; with them less
# than a quarter of that crosses the link, most of it is found equal by
# digest (resync_same_bytes), the three changed regions are copied; both
# data areas end equal byte for byte and equal to what was written.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy qemu-io python3

export VOL_SIZE=128M
M=$((1 << 20))
DATA_MB=64
head -c "${DATA_MB}M" /dev/urandom >"$T/data"

link_bytes()
{
	python3 "$_root/tests/tools/linkproxy.py" --control "$T/proxy.sock" --cmd stats |
		sed -n 's/.*bytes_ab=\([0-9]*\) bytes_ba=\([0-9]*\).*/\1 \2/p'
}

# run_case CS: the scenario with resync-checksum = CS; sets LINK_AB,
# LINK_BA (bytes a->b and b->a during the resync), SENT, SAME, ZERO (a's
# counters), DONE (bytes resynced by a's log) and SECS.
run_case()
{
	local cs=$1 ab0 ba0 ab1 ba1 t0 t1 oos n
	rm -rf "$T/a" "$T/b" "$T/a.log" "$T/b.log" "$T/expect"
	PROXY=1 write_config2 "$T/c.ini" "resync-checksum = $cs"
	proxy_start
	start a
	start b
	wait_connected
	wait_for a "p['replication'] == 'established'"

	nbdcopy "$T/data" "$(uri a)" || fail "[$cs] writing ${DATA_MB}M to a failed"
	compare_replicas
	cp "$T/data" "$T/expect"
	truncate -s "$VOL_SIZE" "$T/expect"

	ctl_on a disconnect vol0 || fail "[$cs] disconnect on a failed"
	wait_for a "p['connection'] != 'connected'" 15
	wait_for b "p['connection'] != 'connected'" 15
	# The same bytes again, at the same offsets: marked, but equal on b.
	nbdcopy "$T/data" "$(uri a)" || fail "[$cs] rewriting ${DATA_MB}M on a failed"
	if [ "$cs" = yes ]; then
		# Real changes too: two inside the rewritten area, one outside.
		put a $((8 * M)) "$M" "$T/expect"
		put a $((40 * M)) "$M" "$T/expect"
		put a $((100 * M)) "$M" "$T/expect"
	fi
	oos=$(jfield a "p['out_of_sync_bytes']")
	[ "$oos" -ge $((DATA_MB * M)) ] || fail "[$cs] a marks only $oos bytes out of sync after rewriting ${DATA_MB}M"

	read -r ab0 ba0 < <(link_bytes)
	t0=$(date +%s.%N)
	ctl_on a connect vol0 || fail "[$cs] connect on a failed"
	wait_connected
	compare_replicas 60
	wait_for a "p['replication'] == 'established'" 30
	t1=$(date +%s.%N)
	read -r ab1 ba1 < <(link_bytes)
	LINK_AB=$((ab1 - ab0))
	LINK_BA=$((ba1 - ba0))
	SECS=$(python3 -c "print('%.2f' % ($t1 - $t0))")
	read -r SENT SAME ZERO < <(jfield a "p['resync_sent_bytes'], p['resync_same_bytes'], p['resync_zero_bytes']")
	n=$(sed -n 's/.*resync to b done: \([0-9]*\) bytes.*/\1/p' "$T/a.log" | tail -n 1)
	[ -n "$n" ] || fail "[$cs] a did not log 'resync to b done: N bytes'"
	DONE=$n
	grep -q "replication with b: off -> syncsource" "$T/a.log" || fail "[$cs] a never became syncsource"
	grep -q "full sync" "$T/a.log" && fail "[$cs] the reconnection caused a full sync"
	cmp -n "$(vol_bytes)" "$T/expect" "$T/a/vol0.img" || fail "[$cs] a's data area is not what was written"
	cmp -n "$(vol_bytes)" "$T/expect" "$T/b/vol0.img" || fail "[$cs] b's data area is not what was written"
	[ "$(jfield a "p['out_of_sync_bytes']")" = 0 ] || fail "[$cs] a still reports bytes out of sync"
	log "resync-checksum = $cs: $oos bytes marked, resynced $DONE in $SECS s; sent as data $SENT, equal by digest $SAME, zero extents $ZERO; link a->b $LINK_AB, b->a $LINK_BA bytes"

	stop b
	stop a
	kill -TERM "$PROXY_PID"
	wait "$PROXY_PID" 2>/dev/null || true
	_forget "$PROXY_PID"
	mv "$T/a.log" "$T/a-$cs.log"
	mv "$T/b.log" "$T/b-$cs.log"
}

run_case no
NO_LINK=$((LINK_AB + LINK_BA)) NO_SENT=$SENT NO_SAME=$SAME
[ "$NO_SENT" -ge $((DATA_MB * M)) ] ||
	fail "resync-checksum = no sent only $NO_SENT bytes as data of the ${DATA_MB}M marked"
[ "$NO_SAME" = 0 ] || fail "resync-checksum = no found $NO_SAME bytes equal by digest"
[ "$NO_LINK" -ge $((DATA_MB * M)) ] ||
	fail "resync-checksum = no: only $NO_LINK bytes crossed the link for ${DATA_MB}M sent (the proxy does not count?)"

run_case yes
YES_LINK=$((LINK_AB + LINK_BA)) YES_SENT=$SENT YES_SAME=$SAME
log "bytes on the link during the resync: checksum=no $NO_LINK, checksum=yes $YES_LINK ($(python3 -c "print('%.1f%%' % (100.0 * $YES_LINK / $NO_LINK))"))"
[ "$YES_LINK" -lt $((NO_LINK / 4)) ] ||
	fail "resync-checksum = yes moved $YES_LINK bytes on the link, not less than a quarter of the $NO_LINK without"
[ "$YES_SAME" -gt 0 ] || fail "resync-checksum = yes found no bytes equal by digest"
[ "$YES_SAME" -ge $(((DATA_MB - 8) * M)) ] ||
	fail "resync-checksum = yes found only $YES_SAME bytes equal by digest of the ${DATA_MB}M rewritten unchanged"
[ "$YES_SENT" -ge $((3 * M)) ] ||
	fail "resync-checksum = yes sent only $YES_SENT bytes as data: the 3M changed for real were not all copied"
[ "$YES_SENT" -lt $((DATA_MB * M / 4)) ] ||
	fail "resync-checksum = yes sent $YES_SENT bytes as data for 3M changed"
