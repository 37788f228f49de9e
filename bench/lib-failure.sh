# shellcheck shell=bash
# What bench/host-failure.sh and bench/disk-failure.sh share: a pair a (NBD,
# primary) and b in two network namespaces, one volume written once in full,
# a status poller, and fio's 4k randrw 70/30 QD8 load logged per second
# (bench/failure_report.py reads the logs). Sourced after bench/lib-link.sh,
# with BIN, LINK, SIZE_MB and RUNTIME set.

# failure_pair NAME SUBNET [LINE_FOR_A]: checks the tools, makes $W, the link
# (SUBNET.1 in A, .2 in B, shaped to LINK), $W/pair.ini and $URI; LINE_FOR_A
# goes into node a's section.
failure_pair()
{
	local name=$1 net=$2 extra=${3:-}
	for v in LINK SIZE_MB RUNTIME; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v: '${!v}' is not a number"
	done
	[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, tc)"
	for c in fio ip tc python3 nbdinfo timeout; do
		command -v $c >/dev/null || skip "$c missing (scripts/deps.sh --bench)"
	done
	fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
	for c in tandemd tandemctl; do [ -x "$BIN/$c" ] || skip "$BIN/$c missing (run make)"; done

	W=$(mktemp -d "/var/tmp/tandem-$name.XXXXXX")
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
	trap 'echo "bench: failed at line $LINENO: $BASH_COMMAND" >&2; exit 1' ERR

	link_up "t${name:0:3}" "$net"
	shape "$LINK"
	PORT=10809
	URI=nbd://$IPA:$PORT/vol0
	cat >"$W/pair.ini" <<INI
[cluster]
name = $name
secret = $name-$$-$RANDOM

[node a]
replication = $IPA:7789
nbd = $IPA:$PORT
control = $W/a.sock
data-dir = $W/a
$extra

[node b]
replication = $IPB:7789
nbd = $IPB:$PORT
control = $W/b.sock
data-dir = $W/b

[volume vol0]
size = ${SIZE_MB}M
nodes = a b
replication = sync
INI
	chmod 600 "$W/pair.ini"
	echo "# work dir $W, namespaces $NA $NB, link ${LINK:-0} Mbit/s (0 = unshaped)" >&2
}

status_json() { timeout 10 "$BIN/tandemctl" -c "$W/pair.ini" -n a status vol0 --json 2>/dev/null || true; }
ctl_a() { "$BIN/tandemctl" -c "$W/pair.ini" -n a "$@"; }

# vol_is EXPR: True when the python EXPR holds on a's volume (v) and its peer (p).
vol_is()
{
	python3 -c 'import json, sys
try:
    v = json.loads(sys.argv[1])["volumes"][0]
    p = v["peers"][0]
    print(bool(eval(sys.argv[2])))
except Exception:
    print(False)' "$(status_json)" "$1"
}

# wait_is SECONDS EXPR: until vol_is EXPR; sets WHEN (epoch s, "" if never).
wait_is()
{
	local end=$((SECONDS + $1))
	WHEN=""
	while [ $SECONDS -lt $end ]; do
		if [ "$(vol_is "$2")" = True ]; then
			WHEN=$EPOCHREALTIME
			return 0
		fi
		sleep 0.2
	done
}
# a's peer established, up to date, nothing out of sync (full redundancy)
WHOLE="p['connection'] == 'connected' and p['replication'] == 'established' and \
p['disk'] == 'uptodate' and p['out_of_sync_bytes'] == 0 and v['disk'] == 'uptodate'"

start_node() { # NODE: tandemd in its namespace; PID_<NODE>
	local ns=$NA
	[ "$1" = b ] && ns=$NB
	ip netns exec "$ns" "$BIN/tandemd" -c "$W/pair.ini" -n "$1" -f 2>>"$W/tandem-$1.log" &
	printf -v "PID_$1" '%s' "$!"
	PIDS+=("$!")
}

# failure_start: both nodes, in sync, the volume written once in full, caches dropped.
failure_start()
{
	start_node a
	start_node b
	# shellcheck disable=SC2154 # set by start_node
	wait_nbd "$NA" "$URI" "$PID_a" "tandemd a" "$W/tandem-a.log"
	wait_is 60 "$WHOLE"
	[ -n "$WHEN" ] || die "the pair did not connect and sync within 60 s: $(status_json)"
	echo "# writing the volume once (${SIZE_MB} MiB)" >&2
	fg_wait ip netns exec "$NA" fio --name=prefill --ioengine=nbd --uri="$URI" --rw=write --bs=1M \
		--iodepth=4 --size="${SIZE_MB}M" --refill_buffers --output="$W/prefill.out" >/dev/null
	wait_is 120 "$WHOLE"
	[ -n "$WHEN" ] || die "not in sync after the prefill: $(status_json)"
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
}

# failure_load: fio 4k randrw 70/30 QD8 on a for RUNTIME s, IOPS logged per
# second ($W/load_iops.*.log); FIO its pid, T0 its start.
failure_load()
{
	# shellcheck disable=SC2034 # the bench scripts report from it
	T0=$EPOCHREALTIME
	ip netns exec "$NA" fio --name=load --ioengine=nbd --uri="$URI" --rw=randrw --rwmixread=70 \
		--bs=4k --iodepth=8 --size="${SIZE_MB}M" --time_based --runtime="$RUNTIME" --refill_buffers \
		--write_iops_log="$W/load" --log_avg_msec=1000 --output-format=json \
		--output="$W/fio.json" >/dev/null 2>"$W/fio.err" &
	FIO=$!
	PIDS+=("$FIO")
}

# failure_end: waits for fio; RESULTS=DIR keeps the logs.
failure_end()
{
	wait "$FIO" || die "fio failed: $(tail -n 3 "$W/fio.err")"
	forget "$FIO"
	if [ -n "${RESULTS:-}" ]; then
		mkdir -p "$RESULTS"
		cp "$W"/load_iops.*.log "$W"/fio.json "$W"/tandem-*.log "$W/pair.ini" "$RESULTS"/ 2>/dev/null || true
	fi
}
