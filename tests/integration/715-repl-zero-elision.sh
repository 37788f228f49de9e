#!/usr/bin/env bash
# Zero elision on the write path: 64M of all-zero data written as ordinary
# writes (fio --zero_buffers, not WRITE_ZEROES) over a region that held
# random data crosses the link as zero extents: the link statistics show
# them as zero_bytes, data_bytes does not grow, and the wire carries
# headers only. The same in async mode. The replicas end byte-identical
# (the zeros did reach b, over the random data).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need fio nbdcopy python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=128M
write_config2 "$T/c.ini"
start_pair
head -c 64M /dev/urandom >"$T/rand"
nbdcopy --flush "$T/rand" "$(uri a)" || fail "random data to a failed"
for mode in sync async; do
	ctl_on a set vol0 replication=$mode >/dev/null || fail "set replication=$mode failed"
	w0=$(jfield a "p['link']['wire_bytes']")
	d0=$(jfield a "p['link']['data_bytes']")
	z0=$(jfield a "p['link']['zero_bytes']")
	fio --name=zeros --ioengine=nbd --uri="$(uri a)" --rw=write --bs=1M --iodepth=4 \
		--size=64M --zero_buffers --output-format=json >"$T/fio-$mode.json" 2>"$T/fio.err" ||
		{ cat "$T/fio.err" >&2; fail "fio zeros ($mode) failed"; }
	ctl_on a wait-sync vol0 --timeout 60 || fail "not in sync after the zeros ($mode)"
	w=$(($(jfield a "p['link']['wire_bytes']") - w0))
	d=$(($(jfield a "p['link']['data_bytes']") - d0))
	z=$(($(jfield a "p['link']['zero_bytes']") - z0))
	log "$mode: 64M of zeros: $z bytes as zero extents, $d as data, $w on the wire"
	[ "$z" -ge $((64 << 20)) ] || fail "$mode: only $z bytes went as zero extents"
	[ "$d" = 0 ] || fail "$mode: $d bytes of zeros went as data"
	[ "$w" -lt $((1 << 20)) ] || fail "$mode: $w bytes on the wire for 64M of zeros"
	compare_replicas
	nbdcopy --flush "$T/rand" "$(uri a)" || fail "random data to a failed"
done
stop b
stop a
