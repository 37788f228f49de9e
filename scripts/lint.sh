#!/usr/bin/env bash
# make lint: the static checks CI runs before the tests.
#   1. clang-format (.clang-format) on the C lines changed since LINT_BASE
#      (default: the commit before HEAD, plus uncommitted changes);
#   2. shellcheck (.shellcheckrc) on every shell script;
#   3. cppcheck on src/, cli/ and witness/;
#   4. the include layering of docs/ARCHITECTURE.md, no cycles
#      (scripts/check-includes.py);
#   5. one writer per state field, which checks the transition
#      (the state-writers list in docs/ARCHITECTURE.md, scripts/check-state-writers.py);
#   6. no banned C functions (unbounded copies, unchecked conversions);
#   7. every integration test over 60 s (tests/integration/durations) says
#      why in a `# Slow:` comment.
# Prints what it finds and one line "lint: N passed, N failed"; exits 1 on any finding.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
passed=0 failed=0
step()
{
	local name=$1
	shift
	if "$@"; then
		echo "lint: $name ok"
		passed=$((passed + 1))
	else
		echo "lint: $name FAILED"
		failed=$((failed + 1))
	fi
}

format_check()
{
	local base=${LINT_BASE:-}
	if [ -z "$base" ]; then
		base=$(git rev-parse -q --verify HEAD~1 2>/dev/null) || base=$(git rev-parse HEAD)
	fi
	local out
	out=$(git diff -U0 --no-color "$base" -- '*.c' '*.h' | clang-format-diff -p1 2>&1) || return 1
	[ -z "$out" ] && return 0
	printf '%s\n' "$out"
	echo "(clang-format -i FILE, or apply the changes above; LINT_BASE=$base)"
	return 1
}

shell_check()
{
	# shellcheck disable=SC2046 # one argument per file
	shellcheck -f gcc $(git ls-files '*.sh' .ci/run)
}

cpp_check()
{
	cppcheck --quiet --enable=warning,portability --inline-suppr --error-exitcode=1 \
		-I include src cli witness
}

# Each of these has a bounded or checked counterpart in use: snprintf, memcpy
# after a length check, strtoul/strtoull with an end pointer.
banned()
{
	local hits
	hits=$(git grep -nE '\b(strcpy|strcat|sprintf|vsprintf|gets|atoi|atol|atoll|atof|strtok|tmpnam|mktemp)[[:space:]]*\(' \
		-- 'src/*.c' 'src/*.h' 'cli/*.c' 'witness/*.c' 'bench/*.c' | grep -vE '\b(snprintf|vsnprintf)\(')
	[ -z "$hits" ] && return 0
	printf '%s\n' "$hits"
	echo "(banned functions: use snprintf, memcpy after a length check, strtoul with an end pointer)"
	return 1
}

slow_tests()
{
	local secs name bad=0
	while read -r secs name; do
		case $secs in '' | \#*) continue ;; esac
		[ "$secs" -gt 60 ] || continue
		[ -e "tests/integration/$name.sh" ] || continue
		if ! grep -q '^# Slow: ' "tests/integration/$name.sh"; then
			echo "tests/integration/$name.sh: takes ${secs} s; say why in a '# Slow:' comment, or make it shorter"
			bad=1
		fi
	done <tests/integration/durations
	return "$bad"
}

step format format_check
step shellcheck shell_check
step cppcheck cpp_check
step includes python3 scripts/check-includes.py
step state-writers python3 scripts/check-state-writers.py
step banned-functions banned
step slow-tests slow_tests
echo "lint: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
