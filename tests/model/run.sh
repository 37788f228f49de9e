#!/usr/bin/env bash
# Checks the Promela models (docs/model/): the witness protocol
# (witness.pml) and the async stream with its live resync (async.pml), with
# spin: each model in each configuration must hold every property (errors:
# 0, the search complete); every reachability probe and every seeded bug
# (mutant) must make spin report a violation.
#
#   bash tests/model/run.sh          the set make test runs (about 4 minutes
#                                    on 2 cores)
#   bash tests/model/run.sh --full   also the larger configurations and the
#                                    mutants found only late (make model;
#                                    hours)
#   MODEL_ONLY=REGEX                 only the checks whose name matches
#
# Runs MODEL_JOBS checks at a time (default: the number of CPUs, at most 2;
# a check needs up to 4 GB, with --full up to 12 GB). Prints one line per check,
# in a fixed order, and "model: P passed, F failed, S skipped"; exits 0 when
# nothing failed, 1 otherwise, 77 when spin or cc is missing.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
models=$here/../../docs/model
# the model of the checks that follow: docs/model/$pml.pml (each check takes
# the value it has when check is called)
pml=witness

full=0
for arg in "$@"; do
	case $arg in
	--full) full=1 ;;
	*)
		echo "usage: $0 [--full]" >&2
		exit 2
		;;
	esac
done

if ! command -v spin >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
	echo "model: spin or cc not found"
	echo "model: 0 passed, 0 failed, 1 skipped"
	exit 77
fi

cpus=$(nproc 2>/dev/null || echo 1)
jobs=${MODEL_JOBS:-$((cpus < 2 ? cpus : 2))}
case $jobs in '' | *[!0-9]* | 0)
	echo "$0: MODEL_JOBS must be a positive number" >&2
	exit 2
	;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/tandem-model.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# pan: exhaustive search, states stored exactly (COLLAPSE). -O0: the
# verifier compiles in 6 s instead of 40, and searches about a third slower.
CC_FLAGS=(-O0 -w -DSAFETY -DCOLLAPSE -DVECTORSZ=2048 -DMEMLIM=4000)
# the full operator configuration needs about 4.3 GB
[ "$full" -eq 1 ] && CC_FLAGS=(-O0 -w -DSAFETY -DCOLLAPSE -DVECTORSZ=2048 -DMEMLIM=12000)
PAN_FLAGS=(-m200000 -w24)
# a seeded bug that a search finds late: bitstate, a fixed random order, a
# depth bound (a violation found so is still a real one)
CC_BITSTATE=(-O0 -w -DSAFETY -DBITSTATE -DRANDOMIZE=1 -DVECTORSZ=2048 -DMEMLIM=1800)
PAN_BITSTATE=(-m300 -k3 -w27)
# liveness: the ltl claim `live` (witness.pml), acceptance cycles under weak
# fairness; states stored exactly
CC_LIVENESS=(-O0 -w -DCOLLAPSE -DNFAIR=4 -DVECTORSZ=2048 -DMEMLIM=4000)
PAN_LIVENESS=(-a -f -m200000 -w24)

# The configurations (bounds and kinds of faults; witness.pml has the list).
# The faults of issue 22 (a wiped node, the witness's end of a session
# dropped alone) are in LEASE, DROP and WIPE; the older configurations
# leave them out to stay within their time.
FAULTS=(-DMAXW=1 -DMAXF=2 -DMAXOPS=0 -DMSG_LOSS -DNO_WIPE -DNO_WDROP)
LEASE=(-DMAXW=1 -DMAXF=1 -DMAXOPS=0 -DMSG_LOSS)
OPERATOR_B=(-DMAXW=0 -DMAXF=1 -DMAXOPS=2 -DOPERATOR=B -DNO_WIPE -DNO_WDROP)
OPERATOR_B_FULL=(-DMAXW=1 -DMAXF=1 -DMAXOPS=2 -DOPERATOR=B -DNO_WIPE -DNO_WDROP)
OPERATOR=(-DMAXW=1 -DMAXF=1 -DMAXOPS=2 -DNO_WIPE -DNO_WDROP)
WRITES=(-DMAXW=2 -DMAXF=1 -DMAXOPS=1 -DNO_WIPE -DNO_WDROP)
RESTART=(-DMAXW=0 -DMAXF=2 -DMAXOPS=1 -DNO_NODE_CRASH -DNO_CUT_W -DNO_ISOLATE -DNO_READS
	-DNO_OP_PRIMARY -DNO_OP_DEMOTE -DNO_WDROP)
# one node cut off from both (the leases run out, the other takes over)
ISOLATE=(-DMAXW=1 -DMAXF=1 -DMAXOPS=0 -DNO_NODE_CRASH -DNO_WITNESS_CRASH -DNO_CUT_W
	-DNO_CUT_AB -DNO_WIPE -DNO_WDROP)
# the A-B link cut, and the witness's end of a session dropped alone
DROP=(-DMAXW=1 -DMAXF=2 -DMAXOPS=0 -DNO_NODE_CRASH -DNO_WITNESS_CRASH -DNO_CUT_W -DNO_ISOLATE
	-DNO_WIPE)
# node crashes and wiped disks, A writes
WIPE=(-DMAXW=1 -DMAXF=2 -DMAXOPS=0 -DNO_WITNESS_CRASH -DNO_CUT_W -DNO_ISOLATE -DNO_WDROP
	-DNO_CUT_AB -DWRITER=A -DNO_READS)
# an isolated node, the other's witness link cut, B writes (L6)
HSCONF=(-DMAXW=1 -DMAXF=2 -DMAXOPS=0 -DNO_NODE_CRASH -DNO_WITNESS_CRASH -DNO_CUT_AB -DNO_WIPE
	-DNO_WDROP -DWRITER=B -DNO_READS)
# smaller sets for the probes and mutants that a larger one finds only late:
# no reads, no wipe, no drop (and no lost message, no isolated node)
FAULTS_S=(-DMAXW=1 -DMAXF=2 -DMAXOPS=0 -DNO_READS -DNO_WIPE -DNO_WDROP -DNO_ISOLATE)
FAULTS_SL=(-DMAXW=1 -DMAXF=2 -DMAXOPS=0 -DMSG_LOSS -DNO_READS -DNO_WIPE -DNO_WDROP -DNO_ISOLATE
	-DNO_CUT_W)
# liveness: no writes, one fault, no operator, no wipe (a wiped node that
# held writes acknowledged alone rightly never serves again)
LIVE=(-DMAXW=0 -DMAXF=1 -DMAXOPS=0 -DNO_READS -DNO_WIPE)

names=()

# check NAME EXPECT(hold|violation) MODE(exhaustive|bitstate) SPIN_FLAGS...
# Runs in the background; its line goes to $work/NAME/result.
check() {
	local name=$1 expect=$2 mode=$3
	shift 3
	local dir
	# MODEL_ONLY=REGEX: only the checks whose name matches
	if [ -n "${MODEL_ONLY:-}" ] && ! [[ $name =~ $MODEL_ONLY ]]; then
		return
	fi
	dir=$work/$(printf '%03d' ${#names[@]})
	names+=("$dir")
	mkdir -p "$dir"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n 2>/dev/null || true
	done
	run_one "$dir" "$name" "$expect" "$mode" "$@" &
}

report() { # dir, name, pass|FAIL, text
	printf 'model %-38s %-6s %s\n' "$2" "$3" "$4" >"$1/result"
}

fail() { # dir, name, text, output file
	report "$1" "$2" FAIL "$3"
	if [ -f "$4" ]; then
		tail -n 25 "$4" | sed 's/^/    /' >>"$1/result"
	fi
}

run_one() {
	local dir=$1 name=$2 expect=$3 mode=$4
	shift 4
	local out=$dir/pan.out cc_flags pan_flags t0 t1 secs states
	cp "$models/$pml.pml" "$dir/$pml.pml"
	if [ "$mode" = bitstate ]; then
		cc_flags=("${CC_BITSTATE[@]}")
		pan_flags=("${PAN_BITSTATE[@]}")
	elif [ "$mode" = liveness ]; then
		cc_flags=("${CC_LIVENESS[@]}")
		pan_flags=("${PAN_LIVENESS[@]}")
		set -- "$@" -DLIVENESS
	else
		cc_flags=("${CC_FLAGS[@]}")
		pan_flags=("${PAN_FLAGS[@]}")
	fi
	if ! (cd "$dir" && spin -a "$@" "$pml.pml" >spin.out 2>&1); then
		fail "$dir" "$name" "spin -a failed" "$dir/spin.out"
		return
	fi
	if ! (cd "$dir" && cc "${cc_flags[@]}" -o pan pan.c >cc.out 2>&1); then
		fail "$dir" "$name" "cc failed" "$dir/cc.out"
		return
	fi
	t0=$(date +%s.%N)
	(cd "$dir" && timeout 900 ./pan "${pan_flags[@]}" >"$out" 2>&1)
	t1=$(date +%s.%N)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' "$out" | head -n 1)
	if [ "$expect" = hold ]; then
		if ! grep -q 'errors: 0$' "$out"; then
			fail "$dir" "$name" "spin reports a violation" "$out"
			(cd "$dir" && spin -t "$@" "$pml.pml" 2>&1 |
				grep -v '^\s*\(queue\|[a-z_0-9]*\[\|[a-z_0-9]* =\|proc \|#processes\)' |
				tail -n 40 | sed 's/^/    trail: /') >>"$dir/result"
		elif grep -q -e 'max search depth too small' -e 'MEMLIM' -e 'Search not completed' \
			-e 'out of memory' "$out"; then
			fail "$dir" "$name" "search incomplete (depth or memory bound)" "$out"
		else
			report "$dir" "$name" pass "${states:-?} states, $secs s"
		fi
	elif grep -q -e 'assertion violated' -e 'acceptance cycle' "$out" &&
		grep -q 'errors: [1-9]' "$out"; then
		report "$dir" "$name" pass "violation found as expected (${states:-?} states, $secs s)"
	else
		fail "$dir" "$name" "no violation found: the model is too weak for this check" "$out"
	fi
	rm -f "$dir/pan" "$dir/pan.c" "$dir/pan.b" "$dir/pan.t" "$dir/pan.m" "$dir/pan.p" \
		"$dir/pan.h" "$dir"/*.trail 2>/dev/null
}

# the longest first, so that the two jobs end together
check "witness lease" hold exhaustive "${LEASE[@]}"
check "witness operator (B)" hold exhaustive "${OPERATOR_B[@]}"
check "witness restart" hold exhaustive "${RESTART[@]}"
check "witness isolate" hold exhaustive "${ISOLATE[@]}"
check "liveness" hold liveness "${LIVE[@]}"
if [ "$full" -eq 1 ]; then
	check "witness faults" hold exhaustive "${FAULTS[@]}"
	check "witness operator (B) writes" hold exhaustive "${OPERATOR_B_FULL[@]}"
	check "witness operator" hold exhaustive "${OPERATOR[@]}"
	check "witness writes" hold exhaustive "${WRITES[@]}"
	check "witness drop" hold exhaustive "${DROP[@]}"
	check "witness wipe" hold exhaustive "${WIPE[@]}"
	check "availability CHECK_N6" hold exhaustive -DMAXW=0 -DMAXF=1 -DMAXOPS=2 -DNO_OP_FORCE \
		-DCHECK_N6
	# (15 million states, 3.5 min: found at depth 208)
	check "mutant MUT_RS_DONE_UPTODATE" violation exhaustive "${OPERATOR[@]}" \
		-DMUT_RS_DONE_UPTODATE
fi

# The async stream (async.pml): NR regions, NW writes. 3 and 5: 1.9 million
# states, 10 s; 3 and 6 (make model): 28 million states, 3.3 GB, 200 s.
pml=async
if [ "$full" -eq 1 ]; then
	check "async 3 regions 6 writes" hold exhaustive -DNR=3 -DNW=6
fi
check "async 3 regions 5 writes" hold exhaustive -DNR=3 -DNW=5
pml=witness

check "probe 1 acknowledged-alone" violation exhaustive "${FAULTS[@]}" -DPROBE=1
check "probe 2 failover-after-writes" violation exhaustive "${FAULTS[@]}" -DPROBE=2
check "probe 3 claim-waits" violation exhaustive "${FAULTS[@]}" -DPROBE=3
check "probe 4 resync-from-new-primary" violation exhaustive "${FAULTS[@]}" -DPROBE=4
check "probe 6 read-after-failover" violation exhaustive "${ISOLATE[@]}" -DPROBE=6
check "probe 7 claim-waits-peer-lease" violation exhaustive "${ISOLATE[@]}" -DPROBE=7
check "probe 8 wiped-node-primary-again" violation exhaustive "${WIPE[@]}" -DPROBE=8

check "mutant MUT_NO_LIVE_SESSION_CHECK" violation exhaustive "${OPERATOR[@]}" \
	-DMUT_NO_LIVE_SESSION_CHECK
check "mutant MUT_NO_GRACE" violation exhaustive "${RESTART[@]}" -DMUT_NO_GRACE
check "mutant MUT_READ_NO_LEASE" violation exhaustive "${ISOLATE[@]}" -DMUT_READ_NO_LEASE
check "mutant MUT_DIRTY_READ" violation exhaustive "${ISOLATE[@]}" -DMUT_DIRTY_READ
check "mutant MUT_WIT_CLOSE_AT_ONCE" violation exhaustive "${ISOLATE[@]}" -DMUT_WIT_CLOSE_AT_ONCE
check "mutant MUT_PEER_CLOSE_AT_ONCE" violation exhaustive "${ISOLATE[@]}" -DMUT_PEER_CLOSE_AT_ONCE
check "mutant MUT_HS_BOTH_STEP_DOWN" violation exhaustive "${HSCONF[@]}" -DMUT_HS_BOTH_STEP_DOWN
check "mutant MUT_FORCE_BEFORE_GRANT" violation exhaustive "${OPERATOR_B[@]}" \
	-DMUT_FORCE_BEFORE_GRANT
check "mutant MUT_GRANT_BY_NAME" violation bitstate "${WIPE[@]}" -DMUT_GRANT_BY_NAME
check "mutant MUT_ALONE_STALE_GEN" violation bitstate "${WIPE[@]}" -DMUT_ALONE_STALE_GEN
check "mutant MUT_RELEASE_WITHDRAWN" violation liveness "${LIVE[@]}" -DMUT_RELEASE_WITHDRAWN
check "mutant MUT_DROP_WITHDRAWN_GRANT" violation liveness "${LIVE[@]}" -DMUT_DROP_WITHDRAWN_GRANT

# the async stream's probes and mutants, at 2 regions and 4 writes
pml=async
check "async probe 1 done-before-stream" violation exhaustive -DPROBE=1
check "async probe 2 data-overtakes-queue" violation exhaustive -DPROBE=2
check "async mutant MUT_DONE_AT_ONCE" violation exhaustive -DMUT_DONE_AT_ONCE
check "async mutant MUT_NO_A7" violation exhaustive -DMUT_NO_A7
check "async mutant MUT_STREAM_BEFORE_START" violation exhaustive -DMUT_STREAM_BEFORE_START
pml=witness

# Found only after millions of states (1 to 7 minutes each): make model.
if [ "$full" -eq 1 ]; then
	check "probe 5 alone-on-stale-session" violation exhaustive "${FAULTS_S[@]}" -DPROBE=5
	check "probe 9 wiped-named-node-releases" violation exhaustive "${WIPE[@]}" -DPROBE=9
	check "mutant MUT_NO_SYNCED_CHECK" violation exhaustive "${FAULTS_S[@]}" -DMUT_NO_SYNCED_CHECK
	check "mutant MUT_ACK_BEFORE_REPORT" violation exhaustive "${FAULTS_SL[@]}" \
		-DMUT_ACK_BEFORE_REPORT
	check "mutant MUT_NO_PERSIST" violation bitstate "${FAULTS[@]}" -DMUT_NO_PERSIST
	check "mutant MUT_W1_ANY" violation exhaustive "${OPERATOR[@]}" -DMUT_W1_ANY
	check "mutant MUT_W2_KEEP_GEN" violation exhaustive "${OPERATOR[@]}" -DMUT_W2_KEEP_GEN
	check "mutant MUT_ADMIN_LATCH" violation exhaustive "${OPERATOR[@]}" -DMUT_ADMIN_LATCH
	check "mutant MUT_ADMIN_FORCE" violation bitstate "${OPERATOR[@]}" -DMUT_ADMIN_FORCE
	check "mutant MUT_LEASE_RECV_ANCHOR" violation bitstate "${DROP[@]}" -DMUT_LEASE_RECV_ANCHOR
fi
wait

passed=0
failed=0
for dir in "${names[@]}"; do
	if [ -f "$dir/result" ]; then
		cat "$dir/result"
		if grep -q '^model .* pass ' "$dir/result"; then
			passed=$((passed + 1))
		else
			failed=$((failed + 1))
		fi
	else
		printf 'model %-38s %-6s %s\n' "${dir##*/}" FAIL "no result"
		failed=$((failed + 1))
	fi
done
echo "model: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
