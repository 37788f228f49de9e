#!/usr/bin/env bash
# The first field report's workload over a WAN: 1 GiB written sequentially in
# 1 MiB requests at queue depth 1 (as `dd bs=1M` does), through the NBD
# front-end of a Tandem pair whose replication link is shaped.
#
# Two network namespaces joined by a veth pair (10.231.43.1 in A, .2 in B;
# bench/lib-link.sh) stand for two sites; tbf on both veth ends shapes the
# link (bandwidth only, no added delay). Node a (primary, NBD) runs in A,
# node b in B, fio's nbd engine in A. Every cell starts a fresh pair on empty
# data files in the work directory and stops it afterwards, so no cell
# inherits another's backlog or resync.
#
# Data kinds (KINDS), all ordinary writes:
#   zeros         --zero_buffers (not WRITE_ZEROES or trim: a plain write of
#                 zeros, which the link carries as a zero extent)
#   random        --refill_buffers
#   compressible  --buffer_compress_percentage=50 --refill_buffers
# Modes (MODES):
#   sync          replication = sync
#   async         replication = async, async-backlog = ASYNC_BACKLOG (default
#                 1.25 x SIZE_MB: room for the whole burst), on-congestion = ahead
#   async-small   the same with async-backlog = SMALL_BACKLOG (default 64M):
#                 the burst overflows it, the regions are marked out of sync
#                 and a live resync copies them
#   async-tls     async with tls = on in [cluster]
#   sync-tls      sync with tls = on
#   anchor        the anchor of synchronous replication (bench/lib-anchor.sh):
#                 qemu-storage-daemon in A, its writes mirrored synchronously
#                 (blockdev-mirror copy-mode=write-blocking) to qemu-nbd in B
#   anchor-tls    the same with the mirror's NBD connection in TLS 1.3
#                 (pre-shared key, AES-128-GCM): what TLS costs a user-space
#                 synchronous mirror on this machine, beside sync-tls / sync
# The -tls modes run on the links in TLS_LINKS only (default 0, unshaped;
# "all" = every link), the anchors on ANCHOR_LINKS (default 0). Baseline: a single-node Tandem volume in A (the
# "single-node figure"), each kind, once per run; beside it the same volume
# with a FLUSH every FLUSH_MB (default 32) MiB (fio --fsync). A replicated
# primary makes its activity log durable before it writes to new regions
# (once per 32 MiB of a sequential stream: the log's window, bitmap.c B6);
# where the disk has a volatile write cache and no FUA, every such flush also
# waits for all the data written before it, so the flushed figure is the
# disk's ceiling for a replicated primary. Async cells start writing once
# the backlog's memory is resident (status backlog_resident_bytes), as on a
# pair that has run for a while.
# COMPRESSION=none|lz4|zstd goes into [cluster] for every replicated cell.
# Unset, it is lz4 when this tandemd accepts the key and none (with a note)
# when it does not; set to lz4 or zstd and not accepted, the replicated cells
# are skipped with a note. Before any cell, tandemd is started once with each
# mode's configuration: a mode it refuses (a config error, e.g. tls = on on a
# build without TLS) has its cells skipped with the error as the note.
#
# Per cell: the front-end's seconds and MB/s (fio's elapsed time and bytes),
# and for replicated cells the time from the end of the writes until
# `tandemctl wait-sync` returned, whether the two data files are then
# byte-identical (cmp), and the link's wire bytes from status. A cell is
# capped at CELL_MAX seconds (default 120) of writing (fio --runtime): its
# MB/s is what it wrote in that time, and its seconds for SIZE_MB are
# extrapolated (marked "~"). The same cap bounds the wait for convergence:
# "not converged within N s (X% in sync)", X = share of the written bytes the
# peer has (1 - lag_bytes / written). The page cache is dropped before every
# cell (sync; echo 3 > /proc/sys/vm/drop_caches).
#
#   bench/seed-wan.sh                                   the whole matrix (long)
#   SIZE_MB=128 LINKS="0 10" MODES="sync async" KINDS="zeros random" CELL_MAX=30 bench/seed-wan.sh
#
# Knobs: LINKS (Mbit/s, 0 = unshaped; default "0 100 50 10"), MODES, KINDS,
# SIZE_MB (default 1024, also the volume size), CELL_MAX, RUNS (medians of N,
# default 1), COMPRESSION, TLS_LINKS, ASYNC_BACKLOG, SMALL_BACKLOG,
# LINKCHECK=0 (skip the TCP goodput check of each link), FLUSH_MB, TANDEM_TIMEOUT (s to
# wait for the pair to connect, default 60), RESULTS=DIR (keep the result
# lines, fio's JSON, the configurations and the daemons' logs there),
# TANDEM_BUILD (default build).
#
# MB = 10^6 bytes. Prints medians and the ratios the acceptance asks for,
# beside the seed's figures; never asserts timings. Exit 0 when it ran, 77
# when a tool is missing, 1 when setting up (or a cell) failed. Needs root.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib-link.sh
. bench/lib-link.sh
# shellcheck source=lib-anchor.sh
. bench/lib-anchor.sh
BIN=${TANDEM_BUILD:-build}
RUNS=${RUNS:-1}
SIZE_MB=${SIZE_MB:-1024}
LINKS=${LINKS:-0 100 50 10}
MODES=${MODES:-sync async async-small async-tls sync-tls anchor anchor-tls}
KINDS=${KINDS:-zeros random compressible}
CELL_MAX=${CELL_MAX:-120}
COMPRESSION=${COMPRESSION:-}
TLS_LINKS=${TLS_LINKS:-0}
ANCHOR_LINKS=${ANCHOR_LINKS:-0}
ANCHOR_NODELAY=${ANCHOR_NODELAY:-1}
ASYNC_BACKLOG=${ASYNC_BACKLOG:-$((SIZE_MB * 5 / 4 + 1))M}
SMALL_BACKLOG=${SMALL_BACKLOG:-64M}
LINKCHECK=${LINKCHECK:-1}
FLUSH_MB=${FLUSH_MB:-32}
TANDEM_TIMEOUT=${TANDEM_TIMEOUT:-60}

for l in $LINKS; do [[ $l =~ ^[0-9]+$ ]] || die "LINKS: '$l' is not a number of Mbit/s (0 = unshaped)"; done
[ "$TLS_LINKS" = all ] && TLS_LINKS=$LINKS
[ "$ANCHOR_LINKS" = all ] && ANCHOR_LINKS=$LINKS
for l in $TLS_LINKS $ANCHOR_LINKS; do [[ $l =~ ^[0-9]+$ ]] || die "TLS_LINKS, ANCHOR_LINKS: '$l' is not a number of Mbit/s"; done
for m in $MODES; do
	case $m in sync | async | async-small | async-tls | sync-tls | anchor | anchor-tls) ;;
	*) die "MODES: unknown mode '$m'" ;;
	esac
done
for k in $KINDS; do
	case $k in zeros | random | compressible) ;; *) die "KINDS: unknown kind '$k'" ;; esac
done
case $COMPRESSION in "" | none | lz4 | zstd) ;; *) die "COMPRESSION: '$COMPRESSION' is not none, lz4 or zstd" ;; esac
for v in RUNS SIZE_MB CELL_MAX TANDEM_TIMEOUT FLUSH_MB; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v: '${!v}' is not a positive number"
done
for v in ASYNC_BACKLOG SMALL_BACKLOG; do
	[[ ${!v} =~ ^[0-9]+[KMGT]?$ ]] || die "$v: '${!v}' is not a size"
done

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, tc)"
for c in fio ip tc python3 nbdinfo timeout cmp; do
	command -v $c >/dev/null || skip "$c missing (scripts/deps.sh --bench)"
done
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
for c in tandemd tandemctl; do [ -x "$BIN/$c" ] || skip "$BIN/$c missing (run make)"; done

W=$(mktemp -d /var/tmp/tandem-seed.XXXXXX)
trap bench_cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "bench: failed at line $LINENO: $BASH_COMMAND" >&2; exit 1' ERR
RES=$W/results.txt
: > "$RES"

link_up tsw 10.231.43
PORT_T=10809 PORT_Q=10810 PORT_S=10811
URI_pair=nbd://$IPA:$PORT_T/vol0
URI_single=nbd://$IPA:$PORT_S/vol0
URI_anchor=nbd://$IPA:$PORT_Q/vol0
SIZE_BYTES=$((SIZE_MB << 20))

# ---------------------------------------------------------------- servers
# write_pair MODE [FILE]: the pair's configuration for MODE, in FILE
# (default $W/pair.ini).
write_pair() {
	local backlog=$ASYNC_BACKLOG repl=async
	case $1 in sync*) repl=sync ;; esac
	[ "$1" = async-small ] && backlog=$SMALL_BACKLOG
	{
		echo "[cluster]"
		echo "name = seed"
		echo "secret = seed-$$-$RANDOM"
		[[ $1 == *-tls ]] && echo "tls = on"
		[ "$COMP" != none ] && echo "compression = $COMP"
		for n in a b; do
			echo
			echo "[node $n]"
			echo "replication = $([ $n = a ] && echo "$IPA" || echo "$IPB"):7789"
			echo "nbd = $([ $n = a ] && echo "$IPA" || echo "$IPB"):$PORT_T"
			echo "control = $W/$n.sock"
			echo "data-dir = $W/$n"
		done
		echo
		echo "[volume vol0]"
		echo "size = ${SIZE_MB}M"
		echo "nodes = a b"
		echo "replication = $repl"
		if [ $repl = async ]; then
			echo "async-backlog = $backlog"
			echo "on-congestion = ahead"
		fi
	} > "${2:-$W/pair.ini}"
}

# ---------------------------------------------------------------- probes
# accepts INI: see accepts_in in bench/lib-link.sh; node a starts in namespace A.
accepts() { accepts_in "$1" ip netns exec "$NA"; }

# Compression first (unset: lz4 if accepted, else none), then each mode's
# whole configuration: a mode whose configuration this tandemd refuses (tls =
# on before TLS, async keys before async) has its cells skipped.
COMP=${COMPRESSION:-lz4} COMP_SKIP=""
if [ "$COMP" != none ]; then
	write_pair sync "$W/probe.ini"
	if accepts "$W/probe.ini"; then
		echo "note compression = $COMP in [cluster] for every replicated cell" >> "$RES"
	elif [ -z "$COMPRESSION" ]; then
		echo "note compression: this tandemd does not accept compression = lz4 ($(cat "$W/probe.why")); every cell runs without compression" >> "$RES"
		COMP=none
	else
		COMP_SKIP="this tandemd does not accept compression = $COMP ($(cat "$W/probe.why"))"
		echo "note compression: $COMP_SKIP; replicated cells skipped (COMPRESSION=none runs them uncompressed)" >> "$RES"
	fi
else
	echo "note compression: none (COMPRESSION=none)" >> "$RES"
fi
declare -A MODE_SKIP=()
for m in $MODES; do
	if [[ $m == anchor* ]]; then
		for c in qemu-storage-daemon qemu-nbd ss; do
			command -v $c >/dev/null && continue
			MODE_SKIP[$m]="$c missing (scripts/deps.sh --bench)"
			echo "note $m: ${MODE_SKIP[$m]}; its cells are skipped" >> "$RES"
			break
		done
		[ -n "${MODE_SKIP[$m]:-}" ] || anchor_tools
		continue
	fi
	[ -z "$COMP_SKIP" ] || { MODE_SKIP[$m]=$COMP_SKIP; continue; }
	write_pair "$m" "$W/probe.ini"
	accepts "$W/probe.ini" && continue
	MODE_SKIP[$m]="this tandemd refuses the configuration of $m: $(cat "$W/probe.why")"
	echo "note $m: ${MODE_SKIP[$m]}; its cells are skipped" >> "$RES"
done
[[ " $MODES " != *-tls* ]] || echo "note -tls modes run on links: $TLS_LINKS (TLS_LINKS)" >> "$RES"
[[ " $MODES " != *anchor* ]] || echo "note anchors run on links: $ANCHOR_LINKS (ANCHOR_LINKS)" >> "$RES"

status_json() { timeout 10 "$BIN/tandemctl" -c "$W/pair.ini" -n a status vol0 --json 2>/dev/null || true; }
peer_field() { # JSON EXPR on p (the first peer); prints "" when it cannot
	python3 -c 'import json, sys
try:
    p = json.loads(sys.argv[1])["volumes"][0]["peers"][0]
    print(eval(sys.argv[2]))
except Exception:
    pass' "$1" "$2"
}

# start_pair MODE CELL: fresh data, a in A, b in B, until a sees b connected
# and replication established.
start_pair() {
	local st="" end
	rm -rf "$W/a" "$W/b"
	write_pair "$1"
	echo "=== $2" >> "$W/tandem-a.log"
	echo "=== $2" >> "$W/tandem-b.log"
	ip netns exec "$NA" "$BIN/tandemd" -c "$W/pair.ini" -n a -f 2>> "$W/tandem-a.log" &
	PID_A=$!
	PIDS+=("$PID_A")
	ip netns exec "$NB" "$BIN/tandemd" -c "$W/pair.ini" -n b -f 2>> "$W/tandem-b.log" &
	PID_B=$!
	PIDS+=("$PID_B")
	wait_nbd "$NA" "$URI_pair" "$PID_A" "tandemd a" "$W/tandem-a.log"
	end=$((SECONDS + TANDEM_TIMEOUT))
	while [ $SECONDS -lt $end ]; do
		alive_or_die "$PID_A" "tandemd a" "$W/tandem-a.log"
		alive_or_die "$PID_B" "tandemd b" "$W/tandem-b.log"
		st=$(status_json)
		# established, and the backlog's memory resident (reserved when
		# the volume starts: a pair that has run a while has it)
		[ "$(peer_field "$st" "p['connection'] == 'connected' and p['replication'] == 'established' and p.get('backlog_resident_bytes', 0) >= p.get('backlog_reserved_bytes', 0)")" = True ] &&
			return 0
		sleep 0.2
	done
	echo "bench: $2: the pair did not reach connection=connected, replication=established" \
		"(and the async backlog's memory resident) within ${TANDEM_TIMEOUT}s. Last status: $st" >&2
	tail -n 10 "$W/tandem-a.log" "$W/tandem-b.log" >&2 || true
	exit 1
}
stop_pair() {
	stop_pids "$PID_A" "$PID_B"
	forget "$PID_A" "$PID_B"
	rm -rf "$W/a" "$W/b"
}

start_single() { # CELL
	rm -rf "$W/s"
	cat > "$W/single.ini" <<INI
[cluster]
name = seed-single

[node a]
nbd = $IPA:$PORT_S
control = $W/s.sock
data-dir = $W/s

[volume vol0]
size = ${SIZE_MB}M
nodes = a
INI
	echo "=== $1" >> "$W/single.log"
	ip netns exec "$NA" "$BIN/tandemd" -c "$W/single.ini" -n a -f 2>> "$W/single.log" &
	PID_S=$!
	PIDS+=("$PID_S")
	wait_nbd "$NA" "$URI_single" "$PID_S" "tandemd (single node)" "$W/single.log"
}
stop_single() {
	stop_pids "$PID_S"
	forget "$PID_S"
	rm -rf "$W/s"
}

DROP_NOTE=0
drop_caches() {
	sync
	if ! echo 3 2>/dev/null > /proc/sys/vm/drop_caches; then
		[ $DROP_NOTE = 1 ] || echo "note could not drop the page cache (/proc/sys/vm/drop_caches not writable)" >> "$RES"
		DROP_NOTE=1
	fi
}

# ---------------------------------------------------------------- fio
kind_args() {
	case $1 in
	zeros) echo "--zero_buffers" ;;
	random) echo "--refill_buffers" ;;
	compressible) echo "--buffer_compress_percentage=50 --refill_buffers" ;;
	esac
}
# write_all URI KIND OUT [FIO ARGS...]: SIZE_MB in 1 MiB writes at QD1, at
# most CELL_MAX s; sets BYTES and MS (bytes written, fio's runtime in ms).
write_all() {
	local v uri=$1 kind=$2 out=$3
	shift 3
	# shellcheck disable=SC2046
	fg_wait ip netns exec "$NA" timeout -k 10 $((CELL_MAX + 180)) fio --name=seed \
		--ioengine=nbd --uri="$uri" --rw=write --bs=1M --iodepth=1 --size="${SIZE_MB}M" \
		--runtime="$CELL_MAX" $(kind_args "$kind") "$@" --output-format=json > "$out" 2> "$W/fio.err" ||
		die "fio ($kind) against $uri failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
	v=$(python3 - "$out" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
w = json.loads(t[t.index("{"):])["jobs"][0]["write"]  # skips the nbd engine's first line
print(w["io_bytes"], w["runtime"])
PY
)
	read -r BYTES MS <<< "$v"
}

# converge: waits up to CELL_MAX s from now for the replicas to converge:
# wait-sync returns 0 and a's status shows nothing in the backlog, no lag and
# nothing out of sync (wait-sync alone has been seen to answer while an async
# backlog was still in flight). Sets CONV (yes/no), CSECS, and EARLY (the
# backlog bytes when wait-sync first said yes with a backlog left, or 0).
converge() {
	local t0 t1 end left st
	t0=${EPOCHREALTIME/./}
	end=$((SECONDS + CELL_MAX))
	CONV=no CSECS=$CELL_MAX EARLY=0
	while left=$((end - SECONDS)) && [ $left -gt 0 ]; do
		fg_wait timeout $((left + 30)) "$BIN/tandemctl" -c "$W/pair.ini" -n a wait-sync vol0 \
			--timeout "$left" > /dev/null 2> "$W/wait.err" || return 0
		t1=${EPOCHREALTIME/./}
		st=$(status_json)
		if [ "$(peer_field "$st" "p.get('backlog_bytes', 0) == 0 and p.get('lag_bytes', 0) == 0 and p['out_of_sync_bytes'] == 0")" = True ]; then
			CONV=yes CSECS=$(printf '%d.%02d' $(((t1 - t0) / 1000000)) $(((t1 - t0) % 1000000 / 10000)))
			return 0
		fi
		[ "$EARLY" != 0 ] || EARLY=$(peer_field "$st" "max(p.get('backlog_bytes', 0), 1)")
		sleep 0.1
	done
}

# cell RUN MODE LINK KIND: one replicated cell; appends its "cell" line.
cell() {
	local r=$1 m=$2 l=$3 k=$4 bytes ms pct=100 same=- st wire data zero pend cong
	start_pair "$m" "run $r $m link $l $k"
	drop_caches
	write_all "$URI_pair" "$k" "$W/fio-r$r-$m-l$l-$k.json"
	bytes=$BYTES ms=$MS
	st=$(status_json)
	pend=$(peer_field "$st" "p.get('lag_bytes', 0)")
	cong=$(peer_field "$st" "p.get('congestion', 'none')")
	converge
	local conv=$CONV csecs=$CSECS
	st=$(status_json)
	if [ $conv = no ]; then
		pct=$(peer_field "$st" "f\"{max(0.0, 100 * (1 - max(p.get('lag_bytes', 0), p['out_of_sync_bytes']) / max($bytes, 1))):.1f}\"")
	else
		same=identical
		cmp -s "$W/a/vol0.img" "$W/b/vol0.img" || same=differ
	fi
	wire=$(peer_field "$st" "p['link']['wire_bytes']")
	data=$(peer_field "$st" "p['link']['data_bytes']")
	zero=$(peer_field "$st" "p['link']['zero_bytes']")
	echo "cell $r $m $l $k $bytes $ms $conv $csecs ${pct:-?} $same ${wire:-0} ${data:-0} ${zero:-0} ${EARLY:-0} ${pend:-0} ${cong:-none}" >> "$RES"
	report "$r" "$m" "$l" "$k" "$bytes" "$ms" "$conv" "$csecs" "${pct:-?}" "$same" "${wire:-0}" "${pend:-0}" "${cong:-none}"
	[ "${EARLY:-0}" = 0 ] || echo "#   (wait-sync answered in sync while a's backlog held ${EARLY} bytes)" >&2
	stop_pair
}
# anchor_cell RUN MODE LINK KIND: the anchor (anchor or anchor-tls); its
# mirror is synchronous, so the replicas are compared right after the writes
# (with the job still READY).
anchor_cell() {
	local r=$1 m=$2 l=$3 k=$4 same=identical tls=""
	[ "$m" = anchor-tls ] && tls=tls
	start_anchor $tls
	drop_caches
	write_all "$URI_anchor" "$k" "$W/fio-r$r-$m-l$l-$k.json"
	python3 "$W/qmp.py" "$W/qmp.sock" check > "$W/mirror.json" ||
		die "$m: the mirror job is not READY after the writes: $(cat "$W/mirror.json")"
	cmp -s "$W/anchor-a.img" "$W/anchor-b.img" || same=differ
	echo "cell $r $m $l $k $BYTES $MS yes 0.00 100 $same 0 0 0 0 0 none" >> "$RES"
	report "$r" "$m" "$l" "$k" "$BYTES" "$MS" yes 0.00 100 "$same" - 0 none
	stop_anchor
	rm -f "$W/anchor-a.img" "$W/anchor-b.img"
}
# single_cell RUN KIND: the single-node baseline, as it is (single) and with
# a FLUSH every FLUSH_MB (single-flush): the ceiling this machine's disk puts
# on a writer that makes something durable as it goes, as a replicated
# primary's activity log does.
single_cell() {
	local r=$1 k=$2 m f
	for m in single single-flush; do
		f=()
		[ $m = single ] || f=(--fsync="$FLUSH_MB")
		start_single "run $r $m $k"
		drop_caches
		write_all "$URI_single" "$k" "$W/fio-r$r-$m-$k.json" "${f[@]}"
		baseline_line "$r" $m "$k"
		stop_single
	done
}
baseline_line() { # RUN MODE KIND, from BYTES and MS
	echo "cell $1 $2 0 $3 $BYTES $MS - - - - 0 0 0 0 0 -" >> "$RES"
	report "$1" "$2" 0 "$3" "$BYTES" "$MS" - - - - - 0 -
}
report() { # RUN MODE LINK KIND BYTES MS CONV CSECS PCT SAME WIRE PENDING CONGESTION
	python3 - "$SIZE_BYTES" "$@" <<'PY' >&2
import sys
size, r, m, l, k, b, ms, conv, cs, pct, same, wire, pend, cong = sys.argv[1:]
size, b, ms = int(size), int(b), max(int(ms), 1)
mbs = b / ms / 1e3
if b < size:
    t = f"capped: {b / 2**20:.0f} MiB in {ms / 1e3:.1f} s, ~{size / (b / ms) / 1e3:.0f} s extrapolated"
else:
    t = f"{ms / 1e3:.1f} s"
s = f"# run {r} {m:12s} link {l:>4s} {k:13s} {t}, {mbs:.2f} MB/s"
if int(pend):
    s += f"; {int(pend) / 1e6:.0f} MB not yet at the peer" + (f" (congestion {cong})" if cong != "none" else "")
if conv == "yes":
    s += f"; converged after {cs} s, replicas {same}"
elif conv == "no":
    s += f"; not converged within {cs} s ({pct}% in sync)"
if wire != "-":
    s += f"; {int(wire) / 1e6:.0f} MB on the wire"
print(s)
PY
}

# ---------------------------------------------------------------- run
echo "# work dir $W, namespaces $NA $NB, link $IPA <-> $IPB" >&2
for r in $(seq "$RUNS"); do
	for k in $KINDS; do single_cell "$r" "$k"; done
	for l in $LINKS; do
		shape "$l"
		if [ "$r" = 1 ]; then
			if [ "$l" = 0 ]; then echo "link 0 qdisc none" >> "$RES"; else echo "link $l qdisc $(tbf_args "$l")" >> "$RES"; fi
			if [ "$LINKCHECK" = 1 ]; then
				g=$(goodput)
				echo "link $l goodput $g" >> "$RES"
				printf '# link %s Mbit/s: TCP goodput %.1f Mbit/s\n' "$l" "$g" >&2
			fi
		fi
		for m in $MODES; do
			if [[ $m == *-tls ]] && [[ " $TLS_LINKS " != *" $l "* ]]; then
				continue
			fi
			if [[ $m == anchor* ]] && [[ " $ANCHOR_LINKS " != *" $l "* ]]; then
				continue
			fi
			for k in $KINDS; do
				if [ -n "${MODE_SKIP[$m]:-}" ]; then
					[ "$r" = 1 ] && echo "skip $m $l $k ${MODE_SKIP[$m]}" >> "$RES"
					continue
				fi
				if [[ $m == anchor* ]]; then
					anchor_cell "$r" "$m" "$l" "$k"
				else
					cell "$r" "$m" "$l" "$k"
				fi
			done
		done
	done
done
shape 0
if [ -n "${RESULTS:-}" ]; then
	mkdir -p "$RESULTS"
	cp "$RES" "$W"/fio-* "$W"/*.log "$W"/*.ini "$RESULTS"/ 2>/dev/null || true
fi

python3 - "$RES" "$SIZE_MB" "$CELL_MAX" "$COMP" "$MODES" "$KINDS" "$FLUSH_MB" <<'PY'
import collections, statistics, sys
res, size_mb, cap, comp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
modes, kinds, flush_mb = sys.argv[5].split(), sys.argv[6].split(), int(sys.argv[7])
BASE = ("single", "single-flush")
size = size_mb << 20
cells = collections.defaultdict(list)
qdisc, goodput, notes, skips, links, earlies = {}, {}, [], {}, [], []
for line in open(res):
    f = line.split()
    if f[0] == "cell":
        r, m, l, k, b, ms, conv, cs, pct, same, wire, data, zero, early, pend, cong = f[1:]
        cells[(m, int(l), k)].append(dict(b=int(b), ms=max(int(ms), 1), conv=conv,
                                          cs=float(cs) if conv != "-" else None,
                                          pct=pct, same=same, wire=int(wire), pend=int(pend),
                                          ahead=cong == "ahead"))
        if int(early):
            earlies.append(f"run {r} {m} link {l} {k}: {int(early) / 1e6:.1f} MB")
        if m not in BASE and int(l) not in links:
            links.append(int(l))
    elif f[0] == "skip":
        skips[(f[1], int(f[2]), f[3])] = " ".join(f[4:])
        if int(f[2]) not in links:
            links.append(int(f[2]))
    elif f[0] == "link" and f[2] == "qdisc":
        qdisc[int(f[1])] = " ".join(f[3:])
    elif f[0] == "link" and f[2] == "goodput":
        goodput[int(f[1])] = float(f[3])
    elif f[0] == "note":
        notes.append(" ".join(f[1:]))

def fig(m, l, k):
    """Medians of a cell: MB/s, seconds for SIZE_MB (extrapolated?), convergence."""
    v = cells.get((m, l, k))
    if not v:
        return None
    bps = statistics.median(x["b"] / x["ms"] * 1e3 for x in v)
    capped = any(x["b"] < size for x in v)
    secs = statistics.median(size / (x["b"] / x["ms"] * 1e3) for x in v)
    out = dict(mbs=bps / 1e6, secs=secs, capped=capped, n=len(v),
               wire=statistics.median(x["wire"] for x in v),
               pend=statistics.median(x["pend"] for x in v),
               ahead=sum(x["ahead"] for x in v))
    conv = [x for x in v if x["conv"] == "yes"]
    if v[0]["conv"] == "-":
        out["conv"] = None
    elif len(conv) == len(v):
        out["conv"] = f"{statistics.median(x['cs'] for x in v):.2f} s"
    else:
        pcts = [x["pct"] for x in v if x["conv"] == "no"]
        out["conv"] = (f"not converged within {cap} s ({'/'.join(pcts)}% in sync)" +
                       (f" in {len(v) - len(conv)}/{len(v)} runs" if len(v) > 1 else ""))
    sames = [x["same"] for x in v if x["same"] != "-"]
    out["same"] = ("-" if not sames else "identical" if all(s == "identical" for s in sames)
                   else f"DIFFER ({sames.count('differ')}/{len(sames)})")
    out["converged"] = out["conv"] is not None and len(conv) == len(v)
    return out

def secs_str(x):
    if x["capped"]:
        return f"~{x['secs']:.0f}"
    return f"{x['secs']:.2f}" if x["secs"] < 10 else f"{x['secs']:.1f}"

runs = max((len(v) for v in cells.values()), default=0)
print(f"Seed workload over a WAN: {size_mb} MiB written sequentially in 1 MiB requests at QD1 "
      f"(as dd does), fio nbd engine in namespace A, node a in A, node b in B")
print(f"medians of {runs} run(s); each cell a fresh pair on empty files; cap {cap} s of writing "
      f"and {cap} s for convergence per cell; MB = 10^6 bytes")
print("seconds: fio's elapsed time for the whole size; ~N = extrapolated from what a capped cell "
      "wrote in the cap; converged: from the end of the writes until wait-sync returned and a's "
      "backlog was empty; replicas: cmp of the two data files once converged")
print("wire MB: bytes a sent on the link (status link.wire_bytes); pending: MB not yet at the peer "
      "when the writes ended (lag_bytes; 'a': the stream had gone ahead)")
print("the seed (Open-E DSS, DRBD inside, synchronous replication): 1 GiB dd in 83 s over "
      "gigabit, 1620 s over 10 Mbit/s")
for n in notes:
    print(n)

print()
print("== single node (one Tandem volume in A, no replication): the baseline; beside it the same")
print(f"   with a FLUSH every {flush_mb} MiB: what this machine's disk allows a writer that makes a")
print("   record durable as it goes (a replicated primary's activity log does, before new regions)")
print(f"{'kind':14s}{'seconds':>10s}{'MB/s':>10s}{'+flush s':>10s}{'MB/s':>10s}")
for k in kinds:
    row = f"{k:14s}"
    for m in BASE:
        x = fig(m, 0, k)
        row += f"{secs_str(x):>10s}{x['mbs']:10.2f}" if x else f"{'-':>10s}{'-':>10s}"
    print(row)

for l in links:
    print()
    g = goodput.get(l)
    if l:
        gs = f"; one TCP stream: {g:.1f} Mbit/s" if g else ""
        print(f"== link {l} Mbit/s (tbf on both veth ends: {qdisc.get(l, '?')}{gs})")
        if l == 10:
            print("   seed over 10 Mbit/s: 1620 s (sync)")
    else:
        gs = f"; one TCP stream: {g:.0f} Mbit/s" if g else ""
        print(f"== link unshaped (veth, no qdisc{gs})")
        print("   seed over gigabit: 83 s (sync)")
    print(f"{'mode':13s}{'kind':14s}{'seconds':>9s}{'MB/s':>10s}{'wire MB':>9s}{'pending':>9s}  "
          f"{'replicas':<11s}converged after the writes")
    for m in modes:
        for k in kinds:
            if (m, l, k) in skips:
                print(f"{m:13s}{k:14s}  skipped: {skips[(m, l, k)]}")
                continue
            x = fig(m, l, k)
            if not x:
                continue
            pend = f"{x['pend'] / 1e6:.0f}" + ("a" if x["ahead"] else "")
            print(f"{m:13s}{k:14s}{secs_str(x):>9s}{x['mbs']:10.2f}{x['wire'] / 1e6:9.0f}{pend:>9s}  "
                  f"{x['same']:<11s}{x['conv'] or '-'}")

def why(m, l, k):
    if (m, l, k) in skips:
        return f"n/a ({m} skipped: {skips[(m, l, k)]})"
    return f"n/a ({m}, {k}, link {l or 'unshaped'} not run)"
def ratio(a, b, goal):
    if not a or not b:
        return None
    q = a["mbs"] / b["mbs"]
    return f"{q:.3f}   goal >= {goal}: {'met' if q >= goal else 'NOT met'}"

print()
print("Acceptance (printed, never asserted):")
z = fig("sync", 10, "zeros")
if z:
    s1 = z["secs"] * 1024 / size_mb
    scaled = ("" if size_mb == 1024 else
              f" (scaled from {'~' if z['capped'] else ''}{z['secs']:.2f} s for {size_mb} MiB)")
    print(f"  sync, zeros, 10 Mbit/s: {'~' if z['capped'] else ''}{s1:.1f} s for 1 GiB{scaled}   "
          f"goal <= 30 s: {'met' if s1 <= 30 else 'NOT met'}  (seed: 1620 s)")
else:
    print(f"  sync, zeros, 10 Mbit/s: {why('sync', 10, 'zeros')}")
base, ceil = fig("single", 0, "random"), fig("single-flush", 0, "random")
if base and ceil:
    print(f"  this machine's disk: single node, random, a FLUSH every {flush_mb} MiB / none: "
          f"{ceil['mbs'] / base['mbs']:.2f}")
for m in ("async", "async-small"):
    x = fig(m, 10, "random")
    r = ratio(x, base, 0.9)
    if r:
        line = f"  {m}, random, 10 Mbit/s front-end / single node unshaped: {r}"
        rc = ratio(x, ceil, 0.9)
        if rc:
            line += f"\n    / single node with a FLUSH every {flush_mb} MiB (the disk's ceiling): {rc}"
        if m == "async-small":
            line += ("\n    converged without operator action: " +
                     (f"yes, {x['conv']} after the writes" if x["converged"] else f"no ({x['conv']})"))
        print(line)
    else:
        print(f"  {m}, random, 10 Mbit/s / single node: " +
              (why(m, 10, "random") if not x else "n/a (no single-node random cell)"))
a, b = fig("sync", 10, "compressible"), fig("sync", 10, "random")
r = ratio(a, b, 1.5)
print(f"  sync, 10 Mbit/s, compressible / random (compression {comp}): " +
      (r if r else why("sync", 10, "compressible" if not a else "random")))
for t, p in (("async-tls", "async"), ("sync-tls", "sync")):
    lines = []
    for k in kinds:
        a, b = fig(t, 0, k), fig(p, 0, k)
        r = ratio(a, b, 0.8)
        if r:
            lines.append(f"  {t} / {p}, {k}, unshaped: {r}")
    if not lines:
        k = kinds[0]
        lines.append(f"  {t} / {p}, unshaped: " + why(t if not fig(t, 0, k) else p, 0, k))
    print("\n".join(lines))
for k in kinds:
    a, b = fig("anchor-tls", 0, k), fig("anchor", 0, k)
    if not (a and b):
        continue
    qa = a["mbs"] / b["mbs"]
    def per_mib(x, y):  # ms that TLS adds to each 1 MiB write
        return (2**20 / x["mbs"] - 2**20 / y["mbs"]) / 1e3
    line = (f"  anchor-tls / anchor, {k}, unshaped: {qa:.3f}   (what TLS costs qemu's synchronous "
            f"mirror here: {b['mbs']:.0f} -> {a['mbs']:.0f} MB/s, +{per_mib(a, b):.2f} ms per 1 MiB write)")
    t, p = fig("sync-tls", 0, k), fig("sync", 0, k)
    if t and p:
        line += (f"\n    Tandem's sync-tls / sync against it: "
                 f"{(t['mbs'] / p['mbs']) / qa:.3f}  (1 = the same share lost to TLS); TLS adds "
                 f"{per_mib(t, p):.2f} ms per 1 MiB write to Tandem")
    print(line)
if earlies:
    print()
    print("wait-sync answered in sync while a's async backlog still held data (convergence above "
          "waits for an empty backlog too): " + "; ".join(earlies))
PY
