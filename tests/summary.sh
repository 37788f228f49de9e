#!/usr/bin/env bash
# Adds up every "unit: N passed, N failed, N skipped" and
# "integration: ...", "fuzz: ..." and "model: N passed, N failed, N skipped" line found in the given logs
# and prints the total as one last line. A missing log counts as nothing
# (the make target already reports the failure); always exits 0. Before it:
# the 20 slowest integration tests, and with TEST_T0 (epoch seconds of the
# start) the whole run's time.
p=0 f=0 s=0
for log in "$@"; do
	[ -r "$log" ] || continue
	while read -r a b c; do
		p=$((p + a)) f=$((f + b)) s=$((s + c))
	done < <(sed -nE 's/.*(unit|integration|fuzz|model): ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\2 \3 \4/p' "$log")
done
# Where the time went: the slowest integration tests of every log given
# (the log's name says the build), with their share of all test time.
python3 - "$@" <<'PY'
import os, re, sys
runs = []
for log in sys.argv[1:]:
    if not os.access(log, os.R_OK):
        continue
    build = re.sub(r"^build-test-|\.log$", "", os.path.basename(log))
    for line in open(log, errors="replace"):
        m = re.match(r"^(PASS|FAIL) (\S+) \((?:exit \d+, )?(\d+)s\)", line)
        if m:
            runs.append((int(m.group(3)), m.group(2), build))
total = sum(r[0] for r in runs)
if total:
    print("slowest integration tests (of %d s of test time, %d runs):" % (total, len(runs)))
    for sec, name, build in sorted(runs, reverse=True)[:20]:
        print("  %4d s %5.1f%%  %s (%s)" % (sec, 100.0 * sec / total, name, build))
PY
if [ -n "${TEST_T0:-}" ]; then
	t=$(($(date +%s) - TEST_T0))
	echo "make test took $((t / 60)) min $((t % 60)) s"
fi
echo "$p passed, $f failed, $s skipped"
exit 0
