#!/usr/bin/env bash
# Runs every libFuzzer harness in build/fuzz for a fixed time, one after the
# other (the machine may be small), each on a scratch copy of its seed corpus
# so that the committed corpus only changes by hand.
#   tests/run-fuzz.sh SECONDS        (make fuzz-run FUZZ_SECONDS=N)
# Prints pass/fail per harness, then exactly one line
#   fuzz: N passed, N failed, 0 skipped
# and exits non-zero when any harness crashed, leaked, timed out or hit a
# property check. A crashing input is kept in build/fuzz/artifacts/.
set -u

secs=${1:?usage: tests/run-fuzz.sh SECONDS}
case $secs in '' | *[!0-9]*) echo "run-fuzz: SECONDS must be a number" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
bindir=build/fuzz
artifacts=$bindir/artifacts
passed=0 failed=0

shopt -s nullglob
bins=("$bindir"/fuzz_*)
if [ ${#bins[@]} -eq 0 ]; then
	echo "run-fuzz: no harnesses in $bindir (make fuzz-build)" >&2
	echo "fuzz: 0 passed, 1 failed, 0 skipped"
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tandem-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"

for bin in "${bins[@]}"; do
	{ [ -f "$bin" ] && [ -x "$bin" ]; } || continue
	name=${bin##*/}
	short=${name#fuzz_}
	seeds=$here/fuzz/corpus/$short
	corpus=$work/$short
	mkdir -p "$corpus" "$work/art-$short"
	[ -d "$seeds" ] && cp -r "$seeds"/. "$corpus"/
	nseeds=$(find "$corpus" -type f | wc -l)
	log=$work/$short.log
	# -timeout: one input taking over 10 s is a hang, i.e. a failure.
	# UBSan stops at the first report so that libFuzzer keeps the input.
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/art-$short/" "$corpus" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	if [ "$rc" -eq 0 ] && ! grep -q -E '^==[0-9]+==ERROR|^SUMMARY: ' "$log"; then
		passed=$((passed + 1))
		printf '%-16s pass   %s runs, %s seeds, corpus now %s\n' "$name" "${runs:-?}" \
			"$nseeds" "$(find "$corpus" -type f | wc -l)"
	else
		failed=$((failed + 1))
		printf '%-16s FAIL   exit %s after %s runs\n' "$name" "$rc" "${runs:-?}"
		grep -E 'ERROR|SUMMARY|runtime error|deadly signal|Test unit written|#[0-9]+ 0x' "$log" |
			head -n 12 | sed 's/^/    /'
		for a in "$work/art-$short"/*; do
			cp "$a" "$artifacts/" && echo "    input kept: $artifacts/${a##*/}"
		done
	fi
done

echo "fuzz: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
