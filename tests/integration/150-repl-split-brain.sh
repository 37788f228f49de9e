#!/usr/bin/env bash
# Split brain: detected, never "resolved" by copying data on its own, and
# resolved by the operator.
#  - A connected pair (a primary) gets common data; both sides `disconnect`;
#    a writes on; b is outdated, so `primary` without --force is refused there
#    (exit 1, message about --force), and with --force it is promoted; b writes
#    other data, partly over a's.
#  - `connect` on both: both report split_brain true in status --json with an
#    error saying so, stay unconnected, neither data area changes (hashes
#    before, right after detection and a few seconds of reconnect attempts
#    later), and wait-sync fails with exit 1 at once instead of waiting.
#  - `secondary` on b: still split brain (the generations, not the two
#    primaries, tell it now), nothing copied either way.
#  - `invalidate` on b: b gets everything from a; established; replicas
#    identical and equal to a's data, which never changed; a later write on a
#    reaches b.
# Every request written here is at most 1 MiB (see put).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy nbdinfo qemu-io cmp sha256sum timeout python3

export VOL_SIZE=64M
M=$((1 << 20))
SIZE=$((64 * M))

# ---- helpers (local to this test) ----

# check NODE EXPECT WHAT: the volume read through NBD on NODE equals EXPECT.
check()
{
	rm -f "$T/read.img"
	nbdcopy "$(uri "$1")" "$T/read.img" || fail "nbdcopy from $1 failed ($3)"
	cmp "$2" "$T/read.img" >&2 || fail "data read through NBD on $1 is not what was written there ($3)"
}

refuses() { nbdinfo "$(uri "$1")" >/dev/null 2>&1 && fail "$1 (secondary) served the export"; return 0; }
h() { head -c "$(vol_bytes)" "$T/$1/vol0.img" | sha256sum | cut -d' ' -f1; }

# split WHAT: both nodes report split brain with an error saying so, and
# neither is connected.
split()
{
	local n s
	for n in a b; do
		# one status call: split_brain|unconnected and not replicating|error
		s=$(jfield $n "'%s|%s|%s' % (p['split_brain'], p['connection'] != 'connected' and p['replication'] == 'off', p['error'])")
		case $s in
		True\|True\|*) ;;
		True\|*) ctl_on $n status vol0 >&2; fail "$n: connected/replicating despite split brain ($1)" ;;
		*) ctl_on $n status vol0 >&2; fail "$n: split_brain is not true ($1)" ;;
		esac
		printf '%s\n' "${s#*|*|}" | grep -qi 'split' ||
			fail "$n: status error does not say split brain ($1): '${s#*|*|}'"
	done
}

# unchanged WHAT: neither data area differs from when the split was complete.
unchanged()
{
	[ "$(h a)" = "$HA" ] || fail "a's data area changed ($1)"
	[ "$(h b)" = "$HB" ] || fail "b's data area changed ($1)"
}

# wait_sync_fails NODE: wait-sync (no timeout of its own) must exit 1 within
# 10 s, saying why; a hang is caught by timeout(1) at 30 s.
wait_sync_fails()
{
	local rc=0 t0=$SECONDS
	timeout 30 "$BIN/tandemctl" -c "$CFG" -n "$1" wait-sync vol0 >/dev/null 2>"$T/ws.err" || rc=$?
	[ "$rc" -ne 124 ] || fail "$1: wait-sync hangs during split brain"
	[ "$rc" -eq 1 ] || { cat "$T/ws.err" >&2; fail "$1: wait-sync exited $rc during split brain, expected 1"; }
	[ $((SECONDS - t0)) -le 10 ] || fail "$1: wait-sync took $((SECONDS - t0)) s to fail during split brain"
	grep -qi 'split' "$T/ws.err" || { cat "$T/ws.err" >&2; fail "$1: wait-sync does not say split brain"; }
	log "$1: wait-sync: $(cat "$T/ws.err")"
}

# ---- the scenario ----

write_config2 "$T/c.ini"
start a
start b
wait_connected
truncate -s "$SIZE" "$T/exp_a.img"
truncate -s "$SIZE" "$T/exp_b.img"

# 1. Common data, on both.
log "[${SECONDS}s] step 1"
put a 0 $((16 * M)) "$T/exp_a.img" "$T/exp_b.img"
check a "$T/exp_a.img" "common data"
compare_replicas

# 2. Split: both leave replication.
log "[${SECONDS}s] step 2"
ctl_on a disconnect vol0 || fail "a: disconnect failed"
ctl_on b disconnect vol0 || fail "b: disconnect failed"
wait_for a "p['connection'] == 'standalone'" 10
wait_for b "p['connection'] == 'standalone'" 10
wait_for b "v['disk'] == 'outdated'" 10

# 3. a writes on.
log "[${SECONDS}s] step 3"
put a $((4 * M)) $((4 * M)) "$T/exp_a.img"
put a $((32 * M)) $((2 * M)) "$T/exp_a.img"
check a "$T/exp_a.img" "a's writes while disconnected"

# 4. b is outdated: promotion needs --force.
log "[${SECONDS}s] step 4"
rc=0
ctl_on b primary vol0 2>"$T/p.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$T/p.err" >&2; fail "b (outdated): primary without --force exited $rc, expected 1"; }
grep -q -- '--force' "$T/p.err" || { cat "$T/p.err" >&2; fail "b: the refusal does not mention --force"; }
log "b: primary refused: $(cat "$T/p.err")"
[ "$(jfield b "v['role'], v['disk']")" = "secondary outdated" ] || fail "b: a refused promotion changed its state"
refuses b
ctl_on b primary vol0 --force || fail "b: primary --force failed"
[ "$(jfield b "v['role']")" = primary ] || fail "b: not primary after primary --force"
put b $((6 * M)) $((4 * M)) "$T/exp_b.img"
put b $((40 * M)) $((2 * M)) "$T/exp_b.img"
check b "$T/exp_b.img" "b's writes after --force"
check a "$T/exp_a.img" "a while b writes"
cmp -n "$SIZE" "$T/exp_a.img" "$T/a/vol0.img" >&2 || fail "a's data area is not what was written on a"
cmp -n "$SIZE" "$T/exp_b.img" "$T/b/vol0.img" >&2 || fail "b's data area is not what was written on b"
HA=$(h a)
HB=$(h b)
[ "$HA" != "$HB" ] || fail "the test wrote the same data on both"

# 5. Reconnect: split brain, detected on both, nothing copied.
log "[${SECONDS}s] step 5"
ctl_on a connect vol0 || fail "a: connect failed"
ctl_on b connect vol0 || fail "b: connect failed"
wait_for a "p['split_brain']" 20
wait_for b "p['split_brain']" 20
split "detection"
unchanged "right after the split brain was detected"
log "a: $(jfield a "p['error']")"
log "b: $(jfield b "p['error']")"
# A few seconds of reconnect attempts (the dialer backs off up to 2 s).
for ((i = 0; i < 8; i++)); do
	sleep 0.5
	split "while reconnecting"
done
unchanged "after a few seconds of reconnect attempts"
wait_sync_fails a
wait_sync_fails b
check a "$T/exp_a.img" "a during split brain"
check b "$T/exp_b.img" "b during split brain"

# 6. b steps down: still split brain (both wrote), still nothing copied.
log "[${SECONDS}s] step 6"
ctl_on b secondary vol0 || fail "b: secondary failed"
refuses b
for ((i = 0; i < 10; i++)); do
	sleep 0.5
	split "after b became secondary"
done
unchanged "after b became secondary and a few reconnect attempts"
log "after b became secondary, a: $(jfield a "p['error']")"
log "after b became secondary, b: $(jfield b "p['error']")"

# 7. Resolve: b's changes are discarded, a's data is what both hold.
log "[${SECONDS}s] step 7"
# `invalidate` throws all local data away (SPEC.md), not only what the change
# bitmaps name: a region neither node wrote is scribbled on b's data area
# behind the idle daemon's back (O_DIRECT, as the daemon's own I/O); the full
# resync must overwrite it too.
head -c "$M" /dev/urandom >"$T/scribble"
dd if="$T/scribble" of="$T/b/vol0.img" bs=1M seek=50 count=1 oflag=direct conv=notrunc status=none ||
	fail "could not scribble on b's data area"
ctl_on b invalidate vol0 || fail "b: invalidate failed"
wait_connected 30
wait_for a "p['replication'] == 'established'" 60
wait_for b "p['replication'] == 'established' and v['disk'] == 'uptodate'" 60
for n in a b; do
	[ "$(jfield $n "p['split_brain']")" = False ] || fail "$n: still split brain after the resolution"
done
compare_replicas
[ "$(h a)" = "$HA" ] || fail "a's data area changed during the resolution"
cmp -n "$SIZE" "$T/exp_a.img" "$T/b/vol0.img" >&2 || fail "b does not hold a's data after invalidate"
check a "$T/exp_a.img" "a after the resolution"
refuses b
[ "$(jfield a "v['role']") $(jfield b "v['role']")" = "primary secondary" ] || fail "roles changed by the resolution"

# 8. Replication works again.
log "[${SECONDS}s] step 8"
put a $((40 * M)) $((1 * M)) "$T/exp_a.img"
put a $((60 * M)) $((2 * M)) "$T/exp_a.img"
compare_replicas
cmp -n "$SIZE" "$T/exp_a.img" "$T/b/vol0.img" >&2 || fail "b lacks the writes made after the resolution"
for n in a b; do
	[ "$(jfield $n "p['out_of_sync_bytes']")" = 0 ] || fail "$n reports bytes out of sync at the end"
done
stop b
stop a
