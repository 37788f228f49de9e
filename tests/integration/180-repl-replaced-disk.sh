#!/usr/bin/env bash
# A new, empty disk replaces b's (its data-dir wiped while b is down): on
# start it is recognised as empty, gets a full sync from a in the background
# while a keeps serving, and ends identical. Then the pair is independent of
# "created empty": b diverging from scratch while apart is a split brain, not
# silently overwritten.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need nbdcopy qemu-io python3

export VOL_SIZE=64M
write_config2 "$T/c.ini"
start_pair
head -c 48M /dev/urandom >"$T/data"
nbdcopy "$T/data" "$(uri a)" || fail "writing to a failed"
compare_replicas

# b's disk and metadata are replaced by empty ones.
stop b
rm -rf "$T/b"
start b
wait_for a "p['connection'] == 'connected'" 30
grep -q "connected to b (.*full sync)" "$T/a.log" || fail "the replaced disk did not get a full sync"
# a serves writes during/after the full sync; they reach b too.
qemu-io -f raw "$(uri a)" -c "write -P 0x5a 60M 1M" >/dev/null || fail "write on a failed"
compare_replicas
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b is not uptodate after its full sync"

# Both sides write while apart: a split brain, nothing copied.
ctl_on a disconnect vol0
ctl_on b disconnect vol0
qemu-io -f raw "$(uri a)" -c "write -P 0x11 0 1M" >/dev/null || fail "write on a failed"
ctl_on b primary vol0 --force || fail "forced promotion of b failed"
qemu-io -f raw "$(uri b)" -c "write -P 0x22 0 1M" >/dev/null || fail "write on b failed"
ha=$(head -c "$(vol_bytes)" "$T/a/vol0.img" | sha256sum)
hb=$(head -c "$(vol_bytes)" "$T/b/vol0.img" | sha256sum)
ctl_on a connect vol0
ctl_on b connect vol0
wait_for a "p['split_brain'] == True" 20
wait_for b "p['split_brain'] == True" 20
[ "$(head -c "$(vol_bytes)" "$T/a/vol0.img" | sha256sum)" = "$ha" ] || fail "a's data changed in a split brain"
[ "$(head -c "$(vol_bytes)" "$T/b/vol0.img" | sha256sum)" = "$hb" ] || fail "b's data changed in a split brain"
stop b
stop a
