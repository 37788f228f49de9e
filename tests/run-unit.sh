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

logs=$(mktemp -d "${TMPDIR:-/tmp}/tandem-unit.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# The binaries run side by side (UNIT_JOBS, default the number of CPUs: the
# engine tests mostly wait on their loop's timers), each into a log of its
# own; the results are printed in name order.
jobs=${UNIT_JOBS:-$(nproc 2>/dev/null || echo 2)}
run=()
for bin in "${bins[@]}"; do
	{ [ -x "$bin" ] && [ -f "$bin" ]; } || continue
	case $bin in *.d | *.o) continue ;; esac
	name=${bin##*/}
	run+=("$name")
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	# cmocka writes per-test lines to stdout and the summary to stderr.
	# (a hang is a failure: no unit binary takes 10 minutes)
	(
		timeout -k 5 600 "$bin" >"$logs/$name.log" 2>&1
		echo $? >"$logs/$name.rc"
	) &
done
wait

for name in "${run[@]}"; do
	log=$logs/$name.log
	rc=$(cat "$logs/$name.rc" 2>/dev/null || echo 1)
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
