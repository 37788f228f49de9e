#!/usr/bin/env bash
# Adds up every "unit: N passed, N failed, N skipped" and
# "integration: ...", "fuzz: ..." and "model: N passed, N failed, N skipped" line found in the given logs
# and prints the total as one last line. A missing log counts as nothing
# (the make target already reports the failure); always exits 0.
p=0 f=0 s=0
for log in "$@"; do
	[ -r "$log" ] || continue
	while read -r a b c; do
		p=$((p + a)) f=$((f + b)) s=$((s + c))
	done < <(sed -nE 's/.*(unit|integration|fuzz|model): ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\2 \3 \4/p' "$log")
done
echo "$p passed, $f failed, $s skipped"
exit 0
