#!/usr/bin/env bash
# Runs every tests/integration/[0-9]*.sh against the binaries in BUILD_DIR,
# one at a time (each starts its own daemon on its own ports), each under a
# timeout. Prints PASS/FAIL/SKIP per test and one summary line that
# tests/summary.sh adds up; exits non-zero if any test failed.
set -uo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=$1
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
if [ ! -x "$build/tandemd" ] || [ ! -x "$build/tandemctl" ]; then
	echo "$0: no tandemd/tandemctl in $build (run make first)" >&2
	exit 2
fi
export TANDEM_BUILD=$build
limit=${TANDEM_TEST_TIMEOUT:-300}

pass=0 failed=0 skip=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in "$here"/integration/[0-9]*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	start=$(date +%s)
	# -k: a test that ignores SIGTERM still ends.
	timeout -k 10 "$limit" bash "$t" >"$out" 2>&1 </dev/null
	rc=$?
	secs=$(($(date +%s) - start))
	case $rc in
	0)
		echo "PASS $name (${secs}s)"
		pass=$((pass + 1))
		;;
	77)
		echo "SKIP $name ($(grep -m1 '^SKIP' "$out" || echo 'exit 77'))"
		skip=$((skip + 1))
		;;
	*)
		[ "$rc" -eq 124 ] && echo "(timed out after ${limit}s)" >>"$out"
		echo "FAIL $name (exit $rc, ${secs}s)"
		sed 's/^/    /' "$out"
		failed=$((failed + 1))
		;;
	esac
done
echo "integration: $pass passed, $failed failed, $skip skipped"
[ "$failed" -eq 0 ]
