#!/usr/bin/env bash
# A new, empty peer joining a node whose disk already holds data gets a full
# sync, never "equal" (docs/SPEC.md, "When a disk is up to date"):
#  1. a volume that ran on node a alone is made replicated by adding node b;
#  2. a replicated volume is created on a disk.a that already holds data
#     (a pre-filled image, as a block device with a filesystem would be).
# In both cases b must end byte-for-byte equal to a, and a failover to b
# serves a's data.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy python3

export VOL_SIZE=32M
# 1. single node first: the same ports, only "nodes = a".
write_config2 "$T/pair.ini"
sed 's/^nodes = a b$/nodes = a/' "$T/pair.ini" >"$T/single.ini"
start a "$T/single.ini"
head -c 24M /dev/urandom >"$T/data"
nbdcopy "$T/data" "nbd://127.0.0.1:${NBDP[a]}/vol0" || fail "writing to the single-node a failed"
CFG=$T/single.ini stop a
CFG=$T/pair.ini
start a
start b
wait_connected
grep -q "connected to b (.*full sync)" "$T/a.log" ||
	fail "b joined a volume holding data without a full sync"
compare_replicas
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b is not uptodate after its full sync"
# Fail over to b: it serves a's data.
ctl_on a secondary vol0 || fail "a: secondary failed"
ctl_on b primary vol0 || fail "b: primary failed"
nbdcopy "$(uri b)" "$T/back" || fail "reading b failed"
cmp -n $((24 << 20)) "$T/data" "$T/back" || fail "b does not serve what was written on a"
stop b
stop a

# 2. a replicated volume created on a data area that already holds data.
rm -rf "$T/a" "$T/b" "$T/a.log" "$T/b.log"
mkdir -p "$T/a" "$T/pre"
head -c 32M /dev/urandom >"$T/pre/disk-a.img"
write_config2 "$T/pre.ini" "disk.a = $T/pre/disk-a.img"
start a
start b
wait_connected
grep -q "connected to b (.*full sync)" "$T/a.log" ||
	fail "a volume created on a disk holding data was not fully synced to b"
ctl_on a wait-sync vol0 --timeout 60 || fail "a: wait-sync did not succeed"
ctl_on b wait-sync vol0 --timeout 60 || fail "b: wait-sync did not succeed"
cmp -n "$(vol_bytes)" "$T/pre/disk-a.img" "$T/b/vol0.img" || fail "b does not hold the data of disk.a"
stop b
stop a
