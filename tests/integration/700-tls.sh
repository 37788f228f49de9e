#!/usr/bin/env bash
# TLS 1.3 on the replication and witness links (tls = on, the key derived
# from the cluster secret). Both links come up over TLS and the replicas are
# identical after writes; a capture of the replication and witness links
# holds none of the data written nor the protocols' plaintext magics; a byte
# flipped on the link in either direction ends the connection (the log says
# so), nothing of it reaches a disk, and after the reconnect and resync the
# replicas are identical again; tandemctl witness-status works over TLS.
# Then one node with tls = off: both ends say which side lacks TLS (log and
# status), with the witness too.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need qemu-io nbdcopy nbdinfo python3

export VOL_SIZE=64M
TANDEM_TLS=on write_config3 "$T/c.ini"
grep -q '^tls = on$' "$T/c.ini" || fail "the config has no tls = on"
px() { python3 "$_root/tests/tools/linkproxy.py" --control "$T/px-$1.sock" --cmd "$2"; }

link_start ab "${REPP[b]}"
link_start aw "$WPORT"
link_start bw "$WPORT"
# Captured from the first byte: the handshakes are in it too.
px ab "capture ab $T/cap-ab" >/dev/null || fail "proxy capture ab"
px ab "capture ba $T/cap-ba" >/dev/null || fail "proxy capture ba"
px aw "capture ab $T/cap-aw" >/dev/null || fail "proxy capture aw"
start_witness
start a
start b
wait_connected
wait_for a "p['replication'] == 'established'"
wait_for a "v['witness']['session'] and v['witness']['primary'] == 'a'"
wait_for b "v['witness']['session']"

# Both links of each node, and the witness's side, over TLS 1.3 with the
# cluster key: two handshakes on a node (peer, witness), two at the witness.
for n in a b w; do
	k=$(this_run "$n" | grep -c 'TLS with 127.0.0.1: TLSv1.3, TLS_AES_128_GCM_SHA256, cluster key (PSK)')
	[ "$k" -ge 1 ] || fail "$n: no TLS 1.3 handshake in its log"
done
[ "$(this_run a | grep -c 'TLS with .*TLSv1.3')" -ge 2 ] || fail "a: not both links over TLS"
[ "$(this_run w | grep -c 'TLS with .*TLSv1.3')" -ge 2 ] || fail "w: not both sessions over TLS"
this_run a | grep -q 'replication on .*(TLS 1.3, cluster key)' || fail "a: replication not over TLS"
for n in a b; do
	[ "$(jfield $n "p['link']['tls']")" = "TLSv1.3 TLS_AES_128_GCM_SHA256" ] ||
		fail "$n: status does not show the link in TLS 1.3"
done
# tandemctl witness-status speaks TLS to the witness too
[ "$(wrec "s['a'] and s['b'] and r['primary'] == 'a'")" = True ] ||
	fail "witness-status over TLS: $(witness_status 2>&1)"

# A recognisable pattern (1 MiB repeated), then random data; both replicas
# equal.
python3 -c "import sys; sys.stdout.write('TANDEM-PLAINTEXT-CANARY-7e1f9c ' * 33825)" |
	head -c 1M >"$T/canary"
qemu-io -f raw "$(uri a)" -c "write -s $T/canary 0 1M" -c "write -s $T/canary 4M 1M" \
	-c flush >/dev/null || fail "qemu-io canary write failed"
head -c 16M /dev/urandom >"$T/rnd.img"
nbdcopy --flush "$T/rnd.img" "$(uri a)" ||
	fail "nbdcopy to a failed"
qemu-io -f raw "$(uri a)" -c "write -s $T/canary 20M 1M" -c flush >/dev/null ||
	fail "qemu-io canary write failed"
compare_replicas
grep -q 'TANDEM-PLAINTEXT-CANARY' "$T/b/vol0.img" || fail "b does not hold the pattern"

# The witness session again, on a new connection, inside the capture.
link aw reset
wait_for a "v['witness']['session']"
px ab "capture off" >/dev/null || fail "proxy capture off"
px aw "capture off" >/dev/null || fail "proxy capture off (aw)"
sz=$(stat -c %s "$T/cap-ab")
[ "$sz" -gt $((18 << 20)) ] || fail "the capture a -> b holds $sz bytes, less than was written"
{ [ -s "$T/cap-ba" ] && [ -s "$T/cap-aw" ]; } || fail "a capture is empty"
for f in cap-ab cap-ba cap-aw; do
	# the data pattern, the replication and witness HELLO magics
	for s in TANDEM-PLAINTEXT-CANARY TANDREP1 TANDWIT1; do
		k=$(grep -c -a "$s" "$T/$f" || true)
		[ "$k" = 0 ] || fail "$f: '$s' crossed the link in the clear"
	done
done
log "captures: a->b $sz bytes, b->a $(stat -c %s "$T/cap-ba"), a->w $(stat -c %s "$T/cap-aw"): no plaintext"

# A byte flipped a -> b: b's TLS layer drops the connection.
px ab "corrupt ab 1" >/dev/null || fail "proxy corrupt ab"
head -c 4M /dev/urandom >"$T/rnd2.img"
nbdcopy "$T/rnd2.img" "$(uri a)" || fail "nbdcopy to a failed"
for ((i = 0; i < 100; i++)); do
	this_run b | grep -q 'TLS with 127.0.0.1: .*connection dropped' && break
	sleep 0.1
done
this_run b | grep 'TLS with 127.0.0.1: .*connection dropped' >&2 ||
	fail "b: no TLS error after a byte flipped a -> b"
wait_for a "p['replication'] == 'established'"
compare_replicas
# A byte flipped b -> a (acknowledgements): a drops the connection.
px ab "corrupt ba 1" >/dev/null || fail "proxy corrupt ba"
head -c 4M /dev/urandom >"$T/rnd3.img"
nbdcopy "$T/rnd3.img" "$(uri a)" || fail "nbdcopy to a failed"
for ((i = 0; i < 100; i++)); do
	this_run a | grep -q 'TLS with 127.0.0.1: .*connection dropped' && break
	sleep 0.1
done
this_run a | grep 'TLS with 127.0.0.1: .*connection dropped' >&2 ||
	fail "a: no TLS error after a byte flipped b -> a"
wait_for a "p['replication'] == 'established'"
compare_replicas
[ "$(jfield a "p['out_of_sync_bytes']")" = 0 ] || fail "a reports bytes out of sync"
stop b
stop a

# Mismatch: b with tls = off, a (and the witness) with tls = on. a dials b.
sed '/^tls = on$/d' "$T/c.ini" >"$T/plain.ini"
start a
start b "$T/plain.ini"
wait_for a "'does not speak TLS' in p['error']"
ctl_on a status vol0 | grep -i tls >&2 || true
for ((i = 0; i < 100; i++)); do
	this_run b | grep -q 'the peer speaks TLS: set tls = on here' && break
	sleep 0.1
done
this_run b | grep -q 'the peer speaks TLS: set tls = on here' || fail "b: no word of the peer's TLS"
for ((i = 0; i < 100; i++)); do
	this_run b | grep -q 'the witness refused: this witness has tls = on' && break
	sleep 0.1
done
this_run b | grep -q 'the witness refused: this witness has tls = on' ||
	fail "b: no word of the witness's TLS"
this_run w | grep -q 'does not speak TLS' || fail "w: no word of b's plaintext"
[ "$(jfield b "p['connection']")" != connected ] || fail "b connected without TLS"
stop b
stop a
# The other way round: a (the dialer) with tls = off. Its HELLO crosses in
# the clear: the capture check above would have seen it.
px ab "capture ab $T/cap-plain" >/dev/null || fail "proxy capture (plain)"
start a "$T/plain.ini"
start b
wait_for a "'has tls = on' in p['error']"
px ab "capture off" >/dev/null || fail "proxy capture off"
[ "$(grep -c -a TANDREP1 "$T/cap-plain" || true)" -ge 1 ] ||
	fail "the capture of a plaintext HELLO does not show it: the capture check proves nothing"
ctl_on a status vol0 | grep -i tls >&2 || true
this_run b | grep -q 'TLS with 127.0.0.1: the peer does not speak TLS' ||
	fail "b: no word of the peer's plaintext"
[ "$(jfield a "p['connection']")" != connected ] || fail "a connected without TLS"
stop b
stop a
kill_witness TERM
check_log_of w
