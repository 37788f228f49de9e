#!/usr/bin/env bash
# Checks the Promela model of the witness protocol (docs/model/witness.pml)
# with spin: the model must show no violation, and every seeded mutant
# (MUT_* below) must show one. Prints a line per check and
# "model: P passed, F failed, S skipped"; exit 0 when nothing failed, 77
# when spin or a C compiler is missing.
set -u
cd "$(dirname "$0")/../.." || exit 1
MODEL=docs/model/witness.pml
CC=${CC:-cc}
if ! command -v spin >/dev/null || ! command -v "$CC" >/dev/null; then
	echo "model: spin or $CC is missing"
	echo "model: 0 passed, 0 failed, 1 skipped"
	exit 77
fi
W=$(mktemp -d /tmp/tandem-model.XXXXXX)
trap 'rm -rf "$W"' EXIT
PANFLAGS=(-O2 -DSAFETY -DCOLLAPSE -DVECTORSZ=2048 -DMEMLIM=1800)
pass=0 fail=0

# check NAME EXPECT [-DMACRO...]: EXPECT is "clean" or "violation"
check() {
	local name=$1 expect=$2 d="$W/$1" t0 t1 errs states
	shift 2
	mkdir -p "$d"
	cp "$MODEL" "$d/m.pml"
	t0=$(date +%s.%N)
	if ! (cd "$d" && spin -a "$@" m.pml >spin.out 2>&1 &&
		"$CC" "${PANFLAGS[@]}" -o pan pan.c >cc.out 2>&1); then
		printf 'model %-34s FAIL   could not build the verifier\n' "$name"
		tail -n 20 "$d/spin.out" "$d/cc.out" 2>/dev/null | sed 's/^/    /'
		fail=$((fail + 1))
		return
	fi
	(cd "$d" && timeout "${MODEL_TIMEOUT:-180}" ./pan -m100000 >pan.out 2>&1)
	t1=$(date +%s.%N)
	errs=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' "$d/pan.out" | tail -n 1)
	states=$(sed -nE 's/^ *([0-9.e+]+) states, stored.*/\1/p' "$d/pan.out" | tail -n 1)
	local secs
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	if [ "$expect" = clean ]; then
		if [ "${errs:-x}" = 0 ] && ! grep -qE "max search depth too small|Search not completed" "$d/pan.out"; then
			printf 'model %-34s pass   %s states, %s s\n' "$name" "$states" "$secs"
			pass=$((pass + 1))
			return
		fi
	elif [ -n "$errs" ] && [ "$errs" -gt 0 ]; then
		printf 'model %-34s pass   violation found as expected (%s s)\n' "$name" "$secs"
		pass=$((pass + 1))
		return
	fi
	printf 'model %-34s FAIL   expected %s, pan says errors: %s\n' "$name" "$expect" "${errs:-?}"
	tail -n 25 "$d/pan.out" | sed 's/^/    /'
	fail=$((fail + 1))
}

# The model, searched exhaustively with one fault and one operator command
# (the larger bounds do not fit in 1.8 GB); each seeded bug at the model's
# default bounds (two faults), where spin stops at the first violation.
check witness clean -DMAXF=1 -DMAXOPS=1
for m in MUT_NO_SYNCED_CHECK MUT_ACK_BEFORE_REPORT MUT_NO_LIVE_SESSION_CHECK MUT_NO_PERSIST; do
	check "mutant $m" violation "-D$m"
done
echo "model: $pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
