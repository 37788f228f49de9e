#!/usr/bin/env bash
# Prints gcov's line and branch coverage of the C files in the given source
# folders, from a --coverage build (make coverage):
#   scripts/coverage.sh BUILD DIR...
# One line per file and a total per folder: lines run, branches taken.
set -euo pipefail
build=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-28s %14s %16s\n' file "lines run" "branches taken"
for dir in "$@"; do
	tl=0 tL=0 tb=0 tB=0
	for src in "$dir"/*.c; do
		obj=$build/obj/${src%.c}.o
		[ -f "${obj%.o}.gcda" ] || { printf '%-28s %14s\n' "$src" "(not run)"; continue; }
		out=$(cd "$work" && gcov -b -n -o "$OLDPWD/${obj%/*}" "$OLDPWD/$src" 2>/dev/null |
			awk -v f="$src" '$0 ~ "^File .*"f"'"'"'" {on=1; next} on && /^File/ {on=0}
				on && /^Lines executed/ {split($2, a, "[:%]"); l=a[2]; n=$4}
				on && /^Taken at least once/ {split($4, b, "[:%]"); t=b[2]; m=$6}
				END {printf "%s %s %s %s\n", l, n, t, m}')
		read -r lp ln bp bn <<<"$out"
		[ -n "$ln" ] || continue
		bn=${bn:-0} bp=${bp:-0}
		printf '%-28s %6s%% of %4s %7s%% of %4s\n' "$src" "$lp" "$ln" "$bp" "$bn"
		tl=$(awk -v a="$tl" -v p="$lp" -v n="$ln" 'BEGIN{printf "%.0f", a + p * n / 100}')
		tL=$((tL + ln))
		tb=$(awk -v a="$tb" -v p="$bp" -v n="$bn" 'BEGIN{printf "%.0f", a + p * n / 100}')
		tB=$((tB + bn))
	done
	[ "$tL" -gt 0 ] && printf '%-28s %6.1f%% of %4s %7.1f%% of %4s\n' "$dir (all)" \
		"$(awk -v a="$tl" -v n="$tL" 'BEGIN{print 100 * a / n}')" "$tL" \
		"$(awk -v a="$tb" -v n="$tB" 'BEGIN{print (n ? 100 * a / n : 0)}')" "$tB"
done
