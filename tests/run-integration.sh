#!/usr/bin/env bash
# Runs every tests/integration/[0-9]*.sh against the binaries in BUILD_DIR,
# each under a timeout, up to JOBS at a time (each test starts its own
# daemons on ports it claims from free_port in lib.sh, in its own temp dir).
# Prints PASS/FAIL/SKIP per test as it ends, a failed test's output indented
# under it, and one summary line that tests/summary.sh adds up; exits
# non-zero if any test failed. It must never interleave two tests' output.
#
# JOBS: TANDEM_TEST_JOBS, else the number of CPUs but at most 2 (the tests
# wait on timeouts more than they compute, but some measure latency and
# peer timeouts are 2 s: more than one test per core is not what they were
# written for). Longest first (tests/integration/durations), so that the
# last ones to end are short. A test with the line `# tandem-test: plain-only`
# is skipped when BUILD_DIR is a sanitizer build (.../asan): it measures
# rates or times, which the sanitizers only slow down. A test with the line `# tandem-test: serial`
# runs alone, after the others: it measures time or CPU use, or changes
# something the whole machine shares.
set -uo pipefail

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [NUMBER...]  (NUMBER: only the tests NUMBER-*.sh)" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=$1
shift
only=("$@")
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
if [ ! -x "$build/tandemd" ] || [ ! -x "$build/tandemctl" ]; then
	echo "$0: no tandemd/tandemctl in $build (run make first)" >&2
	exit 2
fi
export TANDEM_BUILD=$build
limit=${TANDEM_TEST_TIMEOUT:-300}
cpus=$(nproc 2>/dev/null || echo 1)
jobs=${TANDEM_TEST_JOBS:-$((cpus < 2 ? cpus : 2))}
case $jobs in '' | *[!0-9]* | 0)
	echo "$0: TANDEM_TEST_JOBS must be a positive number" >&2
	exit 2
	;;
esac

declare -A hint=()
while read -r secs name; do
	case $secs in '' | \#*) continue ;; esac
	hint[$name]=$secs
done <"$here/integration/durations"

# "SECONDS NAME" of every test, longest first; the serial ones apart.
parallel=() serial=()
while read -r _ t; do
	if [[ $build == */asan ]] && grep -qx '# tandem-test: plain-only' "$t"; then
		continue
	elif grep -qx '# tandem-test: serial' "$t"; then
		serial+=("$t")
	else
		parallel+=("$t")
	fi
done < <(for t in "$here"/integration/[0-9]*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	if [ ${#only[@]} -gt 0 ]; then
		case " ${only[*]} " in *" ${name%%-*} "*) ;; *) continue ;; esac
	fi
	echo "${hint[$name]:-60} $t"
done | sort -k1,1rn -k2,2)

dir=$(mktemp -d "${TMPDIR:-/tmp}/tandem-run-integration.XXXXXX")
declare -A running=() # test name -> 1 while it runs
pass=0 failed=0 skip=0

# start TEST: runs it in the background; NAME.out gets its output, NAME.pid
# the pid of its timeout(1), NAME.rc "STATUS SECONDS" once it has ended.
start()
{
	local name
	name=$(basename "$1" .sh)
	running[$name]=1
	(
		begin=$(date +%s)
		# -k: a test that ignores SIGTERM still ends.
		timeout -k 10 "$limit" bash "$1" >"$dir/$name.out" 2>&1 </dev/null &
		echo $! >"$dir/$name.pid"
		wait $!
		rc=$?
		echo "$rc $(($(date +%s) - begin))" >"$dir/$name.rc.new"
		mv "$dir/$name.rc.new" "$dir/$name.rc"
	) &
}

report()
{
	local name=$1 rc secs out=$dir/$1.out
	read -r rc secs <"$dir/$name.rc"
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
}

# Waits until at least one running test has ended and reports every one
# that has.
reap()
{
	local name done=0 w
	while [ "$done" -eq 0 ]; do
		wait -n 2>/dev/null
		w=$?
		for name in "${!running[@]}"; do
			# No child left yet no status: its job died before writing one.
			[ "$w" -eq 127 ] && [ ! -e "$dir/$name.rc" ] && echo "125 0" >"$dir/$name.rc"
			[ -e "$dir/$name.rc" ] || continue
			report "$name"
			unset "running[$name]"
			done=1
		done
	done
}

# Ctrl-C or SIGTERM: every running test gets SIGTERM from its timeout(1)
# and cleans up (lib.sh's trap); no summary line, the run is incomplete.
interrupted()
{
	local name
	trap - INT TERM
	for name in "${!running[@]}"; do
		[ -s "$dir/$name.pid" ] && kill -TERM "$(cat "$dir/$name.pid")" 2>/dev/null
	done
	wait
	echo "integration: interrupted" >&2
	exit 130
}
trap 'rm -rf "$dir"' EXIT
trap interrupted INT TERM

for t in "${parallel[@]}"; do
	while [ "${#running[@]}" -ge "$jobs" ]; do
		reap
	done
	start "$t"
done
while [ "${#running[@]}" -gt 0 ]; do
	reap
done
for t in "${serial[@]}"; do
	start "$t"
	reap
done
echo "integration: $pass passed, $failed failed, $skip skipped"
[ "$failed" -eq 0 ]
