#!/usr/bin/env bash
# An orderly `disconnect` on an in-sync primary marks out of sync only what
# the peer may lack, not the whole activity log. The primary first sends the
# peer a FLUSH; once it is back, only the regions written since it was sent
# (and those in flight then) count as out of sync (repl.h R7); tandemctl
# returns once the connection is down. A connection
# that is cut instead (crash, link loss) still marks every AL extent.
# Part 1: random 4K writes over a 256M volume fill the activity log; right
# after them, disconnect: a shows 0 bytes out of sync (the whole AL, about
# 256M here, without the drain); 1M written alone then shows as 1M; after
# connect the resync copies that 1M and the replicas are equal.
# Part 2: the same disconnect while fio is still writing (writes in flight
# during the drain): after connect and resync the replicas are equal byte for
# byte, i.e. nothing written around the drain was left unmarked, and a
# logs no error for acks that came after the FLUSH's (they must share its
# batch to matter, which is rare: none did in 3 runs without the guard).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio nbdcopy python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=256M
write_config2 "$T/c.ini"
start_pair

fio --name=fill --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=4k --iodepth=16 \
	--size=256M --io_size=16M --randrepeat=0 --output="$T/fio1.out" >/dev/null 2>&1 ||
	fail "fio before the disconnect failed: $(cat "$T/fio1.out")"
ctl_on a disconnect vol0 || fail "disconnect on a failed"
# tandemctl disconnect returns once the connection is down.
[ "$(jfield a "p['connection']")" = standalone ] || fail "disconnect returned with a $(jfield a "p['connection']")"
oos=$(jfield a "p['out_of_sync_bytes']")
log "after an orderly disconnect with 16M of random writes just made: $oos bytes out of sync"
[ "$oos" = 0 ] || fail "a marked $oos bytes out of sync on an orderly disconnect (expected 0)"
put a $((100 << 20)) $((1 << 20))
oos=$(jfield a "p['out_of_sync_bytes']")
[ "$oos" = $((1 << 20)) ] || fail "1M written alone shows as $oos bytes out of sync (expected 1048576)"
ctl_on a connect vol0 || fail "connect on a failed"
wait_for a "p['replication'] == 'established'" 30
grep -o 'resync to b done.*' "$T/a.log" | tail -n 1 | grep -q "done: 1048576 bytes" ||
	fail "the resync did not copy exactly 1M: $(grep -o 'resync to b done.*' "$T/a.log" | tail -n 1)"
compare_replicas 60

fio --name=during --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=4k --iodepth=16 \
	--size=256M --time_based --runtime=30 --randrepeat=0 --output="$T/fio2.out" >/dev/null 2>&1 &
FPID=$!
track "$FPID"
sleep 1
ctl_on a disconnect vol0 || fail "disconnect on a failed"
# tandemctl disconnect returns once the connection is down.
[ "$(jfield a "p['connection']")" = standalone ] || fail "disconnect returned with a $(jfield a "p['connection']")"
sleep 0.5
kill -INT "$FPID"
wait "$FPID" || true # interrupted: its own exit code says so
_forget "$FPID"
grep -q "err= 0" "$T/fio2.out" || { cat "$T/fio2.out" >&2; fail "fio during the disconnect failed"; }
log "disconnect during writes: $(jfield a "p['out_of_sync_bytes']") bytes out of sync"
# The acks that followed the FLUSH's in the same batch are not errors.
! grep -q "unknown request" "$T/a.log" || fail "a logged a bogus error: $(grep "unknown request" "$T/a.log")"
[ -z "$(jfield a "p.get('error') or ''")" ] || fail "a reports an error after an orderly disconnect: $(jfield a "p['error']")"
ctl_on a connect vol0 || fail "connect on a failed"
wait_for a "p['replication'] == 'established'" 60
compare_replicas 60
stop b
stop a
log "ok"
