#!/usr/bin/env bash
# Planned switchover of a connected pair, and back.
#  - Refusals first: `primary` on b while a is primary fails (exit 1, a message
#    about the primary), with --force too (never two primaries);
#    `invalidate` on the primary a fails (exit 1) and changes nothing.
#  - Data written on a (requests of up to 8 MiB); then, while fio keeps writes
#    in flight on a and the link is slowed down (proxy delay), `secondary` on a
#    returns (in-flight writes done, peer told) and `primary`
#    on b right away succeeds without --force. a now refuses the NBD export, b
#    serves exactly what a had (including every write a completed under fio).
#  - Writes continue on b; switch back to a (again without --force); a serves
#    everything b wrote; more writes on a.
#  - The link stays up throughout: no node ever writes without its peer, so
#    the data generation stays the same on both and no bitmap generation
#    appears (repl_gen.h); nothing out of sync; replicas identical; and the
#    data read through NBD equals what was written at every step.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy nbdinfo qemu-io fio cmp python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=64M
M=$((1 << 20))
SIZE=$((64 * M))

# ---- helpers (local to this test) ----

# put NODE OFF LEN: LEN random bytes at byte offset OFF through NBD on NODE
# (qemu-io, then a flush); $T/expect.img follows every acknowledged write.
put()
{
	local n=$1 off=$2 len=$3
	head -c "$len" /dev/urandom >"$T/chunk"
	qemu-io -f raw "$(uri "$n")" -c "write -s $T/chunk $off $len" -c flush \
		>"$T/qio.out" 2>&1 || { cat "$T/qio.out" >&2; fail "qemu-io: write $len at $off on $n failed"; }
	grep -q "^wrote $len/$len bytes at offset $off" "$T/qio.out" ||
		{ cat "$T/qio.out" >&2; fail "qemu-io: write $len at $off on $n not acknowledged"; }
	dd if="$T/chunk" of="$T/expect.img" bs=1M seek="$off" oflag=seek_bytes conv=notrunc status=none
}

# check NODE WHAT: the whole volume read through NBD on NODE equals expect.img.
check()
{
	rm -f "$T/read.img"
	nbdcopy "$(uri "$1")" "$T/read.img" || fail "nbdcopy from $1 failed ($2)"
	cmp "$T/expect.img" "$T/read.img" >&2 ||
		fail "data read through NBD on $1 is not what was written ($2)"
}

# expect_refused NODE PATTERN WHAT ARGS...: `tandemctl ARGS` on NODE must exit
# 1 with a message on stderr matching PATTERN (extended regex, any case).
expect_refused()
{
	local n=$1 pat=$2 what=$3 rc=0
	shift 3
	ctl_on "$n" "$@" >"$T/ctl.out" 2>"$T/ctl.err" || rc=$?
	[ "$rc" -eq 1 ] || { cat "$T/ctl.out" "$T/ctl.err" >&2; fail "$what: exit $rc, expected 1"; }
	grep -qiE "$pat" "$T/ctl.err" ||
		{ cat "$T/ctl.err" >&2; fail "$what: no clear message (want /$pat/)"; }
	log "$what: refused: $(head -c 300 "$T/ctl.err")"
}

# roles A_ROLE B_ROLE: both sides report these roles, disks uptodate, the
# link connected and established, each knowing the other's role.
roles()
{
	local ra=$1 rb=$2
	[ "$(jfield a "v['role']")" = "$ra" ] || fail "a: role $(jfield a "v['role']"), expected $ra"
	[ "$(jfield b "v['role']")" = "$rb" ] || fail "b: role $(jfield b "v['role']"), expected $rb"
	wait_for a "p['role'] == '$rb'" 10
	wait_for b "p['role'] == '$ra'" 10
	for n in a b; do
		[ "$(jfield $n "(v['disk'], p['connection'], p['replication'], p['split_brain'])")" = \
			"('uptodate', 'connected', 'established', False)" ] ||
			{ ctl_on $n status vol0 >&2; fail "$n: not uptodate/connected/established"; }
	done
}

# serves NODE / refuses NODE: the NBD export is (not) available there.
serves() { nbdinfo "$(uri "$1")" >/dev/null 2>"$T/nbdinfo.err" || fail "$1 refused the export: $(cat "$T/nbdinfo.err")"; }
refuses() { nbdinfo "$(uri "$1")" >/dev/null 2>&1 && fail "$1 (secondary) served the export"; return 0; }

# gens: "own-generation own-bitmap-generation" of both nodes.
gens() { echo "$(jfield a "p['generation'], p['bitmap_generation']") $(jfield b "p['generation'], p['bitmap_generation']")"; }

# ---- the scenario ----

# The link runs through the proxy, so that both switchovers can run with a
# slow link: then a `secondary` that returned before the peer heard of it (or
# before the writes in flight to it were done) is caught by the `primary`
# right after it, or by what b serves.
export PROXY=1
write_config2 "$T/c.ini"
proxy_start
start a
start b
wait_connected
roles primary secondary
truncate -s "$SIZE" "$T/expect.img"
check a "fresh volume"
refuses b

# 1. Data on a. A first small write: by now a pair created empty has left
# the shared "empty" generation (repl_gen.h). From here on the link must stay
# up, so the generation must never change again: a node writing without its
# peer would start a new one (gen_branch), and a resync hands that on.
put a $((62 * M)) 4096
wait_for a "p['generation'] not in ('0000000000000000', '0000000000000001') and p['bitmap_generation'] == '0000000000000000'" 10
ga=$(jfield a "p['generation']")
wait_for b "p['generation'] == '$ga' and p['bitmap_generation'] == '0000000000000000'" 10
G0=$(gens)
[ "$G0" = "$ga 0000000000000000 $ga 0000000000000000" ] || fail "generations after the first write: $G0"
# Requests of several MiB, as qemu-io sends one request per command (the NBD
# server advertises a maximum payload of 32 MiB).
put a 0 $((8 * M))
put a $((20 * M)) $((4 * M))
put a $((63 * M)) $((1 * M))
check a "after the first writes"
roles primary secondary
[ "$(gens)" = "$G0" ] || fail "the replication link dropped during the writes on a: generations (own, bitmap; a then b) went from $G0 to $(gens)"

# 2. Refusals: no second primary, no invalidate of a primary.
expect_refused b 'primary' "b primary while a is primary" primary vol0
expect_refused b 'primary' "b primary --force while a is primary" primary vol0 --force
expect_refused a 'primary' "invalidate on the primary a" invalidate vol0
roles primary secondary
[ "$(gens)" = "$G0" ] || fail "a refused command changed the generations: $G0 -> $(gens)"
refuses b
check a "after the refused commands"

# 3. Switchover a -> b while fio keeps writes in flight on a (upper half).
fio --name=load --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=64k --iodepth=16 \
	--offset=32M --size=32M --time_based --runtime=60 --randseed=140 \
	>"$T/fio.out" 2>&1 </dev/null &
FIO=$!
track "$FIO"
# Until fio has written something (a's write counter is not in status: watch
# the data file change instead).
h0=$(python3 -c 'import hashlib,sys; f=open(sys.argv[1],"rb"); f.seek(32<<20); print(hashlib.sha256(f.read()).hexdigest())' "$T/a/vol0.img")
for ((i = 0; i < 100; i++)); do
	alive "$FIO" || { cat "$T/fio.out" >&2; fail "fio ended before the switchover"; }
	h=$(python3 -c 'import hashlib,sys; f=open(sys.argv[1],"rb"); f.seek(32<<20); print(hashlib.sha256(f.read()).hexdigest())' "$T/a/vol0.img")
	[ "$h" != "$h0" ] && break
	sleep 0.1
done
[ "$h" != "$h0" ] || fail "fio wrote nothing within 10 s"
sleep 0.5
alive "$FIO" || { cat "$T/fio.out" >&2; fail "fio ended before the switchover"; }
proxy delay 150
sleep 0.5
t0=$(date +%s.%N)
ctl_on a secondary vol0 || fail "a: secondary failed"
# No pause: once `secondary` returned, b has heard of it.
ctl_on b primary vol0 || fail "b: primary (without --force) failed right after a became secondary"
proxy delay 0
log "switchover a -> b took $(python3 -c "import sys,time; print('%.2f s' % (time.time() - float(sys.argv[1])))" "$t0")"
# fio's writes on a are refused now: it must end by itself.
for ((i = 0; i < 300; i++)); do
	alive "$FIO" || break
	sleep 0.1
done
alive "$FIO" && fail "fio still runs 30 s after a became secondary (writes hang on a?)"
wait "$FIO" && { cat "$T/fio.out" >&2; fail "fio on a succeeded although a became secondary under it"; }
grep -qiE 'error|err=' "$T/fio.out" || { cat "$T/fio.out" >&2; fail "fio did not report the refused writes"; }
log "fio on a ended with: $(grep -m1 -iE 'error|err=' "$T/fio.out")"
roles secondary primary
refuses a
serves b
# Whatever a completed under fio is what b must now serve.
dd if="$T/a/vol0.img" of="$T/expect.img" bs=1M skip=32 seek=32 count=32 conv=notrunc status=none
check b "after the switchover a -> b"

# 4. Writes continue on b.
put b $((4 * M)) $((8 * M))
put b $((40 * M)) $((2 * M))
qemu-io -f raw "$(uri b)" -c "write -z $((50 * M)) $((1 * M))" -c flush >/dev/null ||
	fail "qemu-io: write zeroes on b failed"
dd if=/dev/zero of="$T/expect.img" bs=1M seek=50 count=1 conv=notrunc status=none
check b "after the writes on b"
refuses a
roles secondary primary
[ "$(gens)" = "$G0" ] || fail "the switchover changed the generations (someone wrote without its peer): $G0 -> $(gens)"
for n in a b; do
	[ "$(jfield $n "p['out_of_sync_bytes']")" = 0 ] || fail "$n reports bytes out of sync after the writes on b"
done
cmp -n "$SIZE" "$T/expect.img" "$T/a/vol0.img" >&2 || fail "a's data area lacks what b wrote (synchronous replication)"

# 5. Switch back b -> a.
proxy delay 150
ctl_on b secondary vol0 || fail "b: secondary failed"
ctl_on a primary vol0 || fail "a: primary (without --force) failed right after b became secondary"
proxy delay 0
roles primary secondary
refuses b
serves a
check a "after the switch back b -> a"
put a $((10 * M)) $((6 * M))
put a $((41 * M)) $((4 * M))
check a "after the writes on a"
refuses b
[ "$(gens)" = "$G0" ] || fail "the switch back changed the generations: $G0 -> $(gens)"
expect_refused b 'primary' "b primary after the switch back" primary vol0

compare_replicas
cmp -n "$SIZE" "$T/expect.img" "$T/b/vol0.img" >&2 || fail "b's data area is not what was written"
for n in a b; do
	[ "$(jfield $n "p['out_of_sync_bytes']")" = 0 ] || fail "$n reports bytes out of sync at the end"
done
stop b
stop a
