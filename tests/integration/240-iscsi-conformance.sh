#!/usr/bin/env bash
# libiscsi's conformance suite (iscsi-test-cu) against one node's iSCSI
# target (128M volume), compared with a checked-in list of expected results.
#
# Every top-level family (the ALL.<Family> entries of `iscsi-test-cu --list`)
# runs in its own iscsi-test-cu process, under its own timeout: libiscsi 1.19
# leaves a PDU hook active after CompareAndWrite.InvalidDataOutSize that
# corrupts later 16-byte CDBs of the same process. --dataloss and
# --allow-sanitize are on (the
# volume is scratch). Families that use a second I_T nexus (MultipathIO, the
# reservation families, PreventAllow) get the target URL twice, the second
# session logging in with the second initiator name.
#
# Results come from CUnit's verbose output: "Test: Name ...passed|FAILED";
# a passed test that printed "[SKIPPED]" before its result is SKIP (libiscsi
# skips by CU_PASS, which CUnit counts as passed); a test cut off by the
# timeout is FAIL. A skip that libiscsi does not also print is invisible in
# CUnit's output and is recorded as PASS (MultipathIO.CompareAndWrite skips
# that way while the target does not implement COMPARE AND WRITE).
#
# tests/iscsi/expected.txt has one line per test, "Family.Test PASS|FAIL|SKIP".
# This test fails when an expected PASS does not pass (regression), or when a
# listed test did not run at all. Tests that newly pass, and other changes,
# are printed; they do not fail the test.
#   UPDATE_EXPECTED=1 bash tests/integration/240-iscsi-conformance.sh
# rewrites the file from this run (review the diff before committing it).
# Other knobs: FAMILY_TIMEOUT (seconds per family, default 60), FAMILIES
# (space-separated subset, for debugging; the comparison then only covers
# those families), EXPECTED (another expected-results file), KEEP_OUTPUT (a
# directory that receives each family's raw output and parsed results).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need iscsi-test-cu qemu-io python3 timeout stdbuf

EXPECTED=${EXPECTED:-$_root/tests/iscsi/expected.txt}
FAMILY_TIMEOUT=${FAMILY_TIMEOUT:-60}
INIT1=iqn.2026-12.test:conformance-1
INIT2=iqn.2026-12.test:conformance-2

export VOL_SIZE=128M
write_config_iscsi "$T/c.ini"
start_node

URL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN/0

iscsi-test-cu --list >"$T/list.txt" 2>&1 || fail "iscsi-test-cu --list: $(cat "$T/list.txt")"
if [ -n "${FAMILIES:-}" ]; then
	read -r -a families <<<"$FAMILIES"
else
	mapfile -t families < <(sed -n 's/^ALL\.\([^.][^.]*\)$/\1/p' "$T/list.txt")
fi
[ "${#families[@]}" -gt 0 ] || fail "no test families in iscsi-test-cu --list"

# parse FAMILY < cunit-output: "Family.Test PASS|FAIL|SKIP" lines on stdout;
# the first assertion failures of each failed test go to $T/details.
parse()
{
	awk -v fam="$1" -v details="$T/details" '
	function finish(res) {
		if (res == "PASS" && skipped)
			res = "SKIP"
		print fam "." name, res
		intest = 0
		if (res == "FAIL") {
			for (i = 0; i < nmsg; i++)
				print "    " fam "." name ": " msg[i] >> details
			nfail = 0
			collect = 1
		}
	}
	# "passed" / "FAILED" closes the running test: either right after the
	# "..." of its Test line or at the start of a later line (once the test
	# printed something of its own).
	function status(s) {
		if (s ~ /^passed/) { finish("PASS"); return 1 }
		if (s ~ /^FAILED/) { finish("FAIL"); return 1 }
		if (index(s, "[SKIPPED]"))
			skipped = 1
		if (index(s, "[FAILED]") && nmsg < 3) {
			m = s
			sub(/^ +/, "", m)
			for (i = 0; i < nmsg && msg[i] != m; i++)
				;
			if (i == nmsg)
				msg[nmsg++] = m
		}
		return 0
	}
	/^  Test: [^ ]+ \.\.\./ {
		if (intest)
			finish("FAIL")
		collect = 0
		name = $2
		rest = $0
		sub(/^  Test: [^ ]+ \.\.\./, "", rest)
		intest = 1
		skipped = 0
		nmsg = 0
		status(rest)
		next
	}
	/^Run Summary:/ { collect = 0 }
	intest { status($0); next }
	collect && /^ +[0-9]+\. / && nfail < 5 {
		m = $0
		sub(/^ +/, "", m)
		print "    " fam "." name ": " m >> details
		nfail++
	}
	END {
		if (intest)
			finish("FAIL")   # cut off (timeout, crash)
	}'
}

: >"$T/results.txt"
: >"$T/details"
run_start=$(date +%s)
for fam in "${families[@]}"; do
	urls=("$URL")
	case $fam in
	MultipathIO | Reserve6 | PreventAllow | Prout* | Prin*) urls+=("$URL") ;;
	esac
	# Every family starts from a blank LUN (zeroed through the target, WRITE
	# SAME with UNMAP), whatever the families before it wrote: families are
	# independent of each other and of their order. (MultipathIO.CompareAndWrite
	# in libiscsi 1.19 zeroes blocks 0-255 and then compares block 256 too.)
	qemu-io -f raw -c "write -z -u 0 $VOL_SIZE" "$URL" >/dev/null 2>"$T/zero.err" ||
		fail "zeroing the LUN before $fam: $(head -c 300 "$T/zero.err")"
	t0=$(date +%s.%N)
	rc=0
	timeout -k 5 "$FAMILY_TIMEOUT" stdbuf -oL iscsi-test-cu --dataloss --allow-sanitize -i "$INIT1" -I "$INIT2" \
		-t "ALL.$fam" "${urls[@]}" >"$T/$fam.out" 2>"$T/$fam.err" </dev/null || rc=$?
	parse "$fam" <"$T/$fam.out" >"$T/$fam.res"
	cat "$T/$fam.res" >>"$T/results.txt"
	n=$(wc -l <"$T/$fam.res")
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	note=""
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		note=" TIMED OUT after ${FAMILY_TIMEOUT}s"
	fi
	# CUnit's own count must agree with the parse (the Ran column).
	ran=$(awk '$1 == "tests" { print $3 }' "$T/$fam.out")
	if [ -n "$ran" ] && [ "$ran" != "$n" ]; then
		note="$note (CUnit says $ran ran, parsed $n)"
	fi
	if [ "$n" -eq 0 ] && [ -s "$T/$fam.err" ]; then
		note="$note stderr: $(head -c 200 "$T/$fam.err" | tr '\n' ' ')"
	fi
	log "$(printf '%-26s %3d tests %2d fail %2d skip %5ss exit %d%s' "$fam" "$n" \
		"$(grep -c ' FAIL$' "$T/$fam.res" || true)" "$(grep -c ' SKIP$' "$T/$fam.res" || true)" \
		"$secs" "$rc" "$note")"
	if [ -n "${KEEP_OUTPUT:-}" ]; then
		mkdir -p "$KEEP_OUTPUT"
		cp "$T/$fam.out" "$T/$fam.err" "$T/$fam.res" "$KEEP_OUTPUT"/
	fi
	alive "$NODE_PID" || fail "tandemd died during family $fam"
done
log "suite time: $(($(date +%s) - run_start)) s"

ran=$(wc -l <"$T/results.txt")
passed=$(grep -c ' PASS$' "$T/results.txt" || true)
failed=$(grep -c ' FAIL$' "$T/results.txt" || true)
skipped=$(grep -c ' SKIP$' "$T/results.txt" || true)
log "totals: $ran ran, $passed passed, $failed failed, $skipped skipped"
[ "$ran" -gt 0 ] || fail "no test ran"

stop_node
check_log

if [ "${UPDATE_EXPECTED:-0}" = 1 ]; then
	mkdir -p "$(dirname "$EXPECTED")"
	{
		echo "# Expected results of libiscsi's iscsi-test-cu against tandemd's iSCSI target,"
		echo "# one line per test: Family.Test PASS|FAIL|SKIP."
		echo "# Used by tests/integration/240-iscsi-conformance.sh; regenerate with"
		echo "#   UPDATE_EXPECTED=1 bash tests/integration/240-iscsi-conformance.sh"
		echo "# libiscsi-bin $(dpkg-query -W -f='${Version}' libiscsi-bin 2>/dev/null || echo '?')"
		echo "# $ran ran, $passed passed, $failed failed, $skipped skipped"
		LC_ALL=C sort "$T/results.txt"
	} >"$EXPECTED.tmp"
	mv "$EXPECTED.tmp" "$EXPECTED"
	log "wrote $EXPECTED"
	log "ok"
	exit 0
fi

[ -f "$EXPECTED" ] || fail "no expected-results file $EXPECTED (UPDATE_EXPECTED=1 creates it)"

# Compare. Only the families that ran are compared when FAMILIES is set.
python3 - "$EXPECTED" "$T/results.txt" "$T/details" "${FAMILIES:-}" <<'PY' || fail "conformance regressions (see above)"
import sys
exp_path, res_path, det_path, subset = sys.argv[1:5]
subset = set(subset.split())
def load(path):
    d = {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, res = line.split()
        d[name] = res
    return d
exp, got = load(exp_path), load(res_path)
if subset:
    exp = {k: v for k, v in exp.items() if k.split(".")[0] in subset}
details = {}
for line in open(det_path):
    key = line.strip().split(":", 1)[0]
    details.setdefault(key, []).append(line.rstrip())
regress = sorted(k for k, v in exp.items() if v == "PASS" and got.get(k, "PASS") != "PASS")
missing = sorted(k for k in exp if k not in got)
newpass = sorted(k for k, v in got.items() if v == "PASS" and exp.get(k) in ("FAIL", "SKIP"))
changed = sorted(k for k, v in got.items() if k in exp and exp[k] != "PASS" and v != "PASS" and v != exp[k])
unlisted = sorted(k for k in got if k not in exp)
for k in regress:
    print(f"REGRESSION: {k}: expected PASS, got {got[k]}")
    for d in details.get(k, []):
        print(d)
for k in missing:
    print(f"NOT RUN: {k} (expected {exp[k]})")
for k in newpass:
    print(f"NEWLY PASSING: {k} (expected {exp[k]})")
for k in changed:
    print(f"CHANGED: {k}: expected {exp[k]}, got {got[k]}")
for k in unlisted:
    print(f"NOT IN EXPECTED FILE: {k} {got[k]}")
if newpass or changed or unlisted:
    print("to accept these results: UPDATE_EXPECTED=1 bash tests/integration/240-iscsi-conformance.sh")
fails = [k for k, v in got.items() if v == "FAIL"]
print(f"expected failures still failing: {len([k for k in fails if exp.get(k) == 'FAIL'])}")
sys.exit(1 if regress or missing else 0)
PY
log "ok"
