#!/usr/bin/env bash
# Runs every cmocka unit test binary of a build and sums up the results.
#   tests/run-unit.sh BUILD_DIR      (make unit passes build or build/asan)
# Prints one status line per binary, then exactly one line
#   unit: N passed, N failed, N skipped
# and exits non-zero when any test failed or any binary crashed or exited
# non-zero without a cmocka summary (an ASan report, a signal).
set -u

build=${1:?usage: tests/run-unit.sh BUILD_DIR}
dir=$build/tests
passed=0 failed=0 skipped=0 bad=0

shopt -s nullglob
bins=("$dir"/test_*)
if [ ${#bins[@]} -eq 0 ]; then
	echo "run-unit: no test binaries in $dir" >&2
	echo "unit: 0 passed, 1 failed, 0 skipped"
	exit 1
fi

log=$(mktemp "${TMPDIR:-/tmp}/tandem-unit.XXXXXX")
trap 'rm -f "$log"' EXIT

for bin in "${bins[@]}"; do
	{ [ -x "$bin" ] && [ -f "$bin" ]; } || continue
	case $bin in *.d | *.o) continue ;; esac
	name=${bin##*/}
	# cmocka writes per-test lines to stdout and the summary to stderr.
	# (a hang is a failure: no unit binary takes 10 minutes)
	timeout -k 5 600 "$bin" >"$log" 2>&1
	rc=$?
	p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s).*/\1/p' "$log" | tail -n 1)
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test(s).*/\1/p' "$log" | tail -n 1)
	p=${p:-0} f=${f:-0} s=${s:-0}
	status=ok
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		# Died or failed outside cmocka's accounting: count the binary as one failure.
		f=1
		status="crashed (exit $rc)"
	elif [ "$f" -gt 0 ]; then
		status=FAILED
	fi
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	printf '%-24s %-18s %3d passed, %d failed, %d skipped\n' "$name" "$status" "$p" "$f" "$s"
	if [ "$status" != ok ]; then
		bad=1
		# Show what went wrong: the failing tests and their messages.
		grep -E '^\[  (FAILED|ERROR) |^\[   LINE   \]|^expected |ERROR: |SUMMARY: |runtime error' "$log" |
			sed 's/^/    /' | head -n 40
	fi
done

echo "unit: $passed passed, $failed failed, $skipped skipped"
[ "$bad" -eq 0 ] && [ "$failed" -eq 0 ]
