#!/usr/bin/env bash
# A metadata write that fails is handled, not logged and ignored (docs/SPEC.md,
# "Metadata errors"): a's metadata file is made immutable (chattr +i: every
# write to it fails), b goes away, and a's next write needs a new data
# generation (gen_branch). That write must fail and a's disk must be failed,
# rather than the write being acknowledged under a generation that was never
# recorded.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-io python3 chattr

export VOL_SIZE=32M
write_config2 "$T/c.ini"
start_pair
put a 0 $((1 << 20))
chattr +i "$T/a/vol0.md" 2>/dev/null || { echo "SKIP: chattr +i does not work on $T" >&2; exit 77; }
AT_EXIT+=("chattr -i '$T/a/vol0.md'")
stop b
wait_for a "p['connection'] != 'connected'" 10
rc=0
qemu-io -f raw "$(uri a)" -c "write -P 0x33 0 64k" -c flush >"$T/qio.out" 2>&1 || rc=$?
if grep -q "^wrote 65536/65536 bytes" "$T/qio.out"; then
	fail "a acknowledged a write although its new generation could not be recorded"
fi
grep -q "writing metadata: .*the disk is failed" "$T/a.log" || fail "a did not report the metadata write failure"
[ "$(jfield a "v['disk']")" = failed ] || fail "a's disk is $(jfield a "v['disk']"), expected failed"
chattr -i "$T/a/vol0.md"
stop a
grep -q "metadata not marked clean" "$T/a.log" || fail "a marked its metadata clean after a failed write"
