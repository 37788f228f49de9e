# shellcheck shell=bash
# Sourced after lib.sh by the replication tests: a two-node cluster (a, b) on
# free loopback ports, start/stop/kill of either node, the link proxy between
# them, waiting for states, and the byte-for-byte comparison of both data
# areas that every replication test ends with.
#
# Traffic from a to b's replication port goes through tests/tools/linkproxy.py
# when PROXY=1 (a dials b: the node whose name sorts first dials), so a test
# can cut, blackhole and restore the link.

# Python helpers of the tests (tests/tools/nbdclient.py) for scripts written to $T.
# (_root: set by lib.sh, sourced first)
# shellcheck disable=SC2154
export TANDEM_TOOLS=$_root/tests/tools
declare -A NPID=()   # node name -> pid
declare -A NBDP=()   # node name -> NBD port
declare -A REPP=()   # node name -> replication port

# write_config2 FILE [LINE...]: nodes a and b, volume vol0 on both; extra
# lines land in [volume vol0]. TANDEM_TLS=on: tls = on in [cluster] (every
# replication and witness test then runs over TLS).
write_config2()
{
	local file=$1 line n
	shift
	# free_port never hands the same test one port twice: all five differ.
	for n in a b; do
		NBDP[$n]=$(free_port)
		REPP[$n]=$(free_port)
	done
	PROXY_PORT=$(free_port)
	{
		echo "[cluster]"
		echo "name = it"
		echo "secret = ${SECRET:-test-secret}"
		echo "peer-timeout = ${PEER_TIMEOUT:-2}"
		[ -z "${TANDEM_TLS:-}" ] || echo "tls = $TANDEM_TLS"
		for n in a b; do
			echo
			echo "[node $n]"
			echo "replication = 127.0.0.1:${REPP[$n]}"
			if [ "$n" = b ] && [ "${PROXY:-0}" = 1 ]; then
				echo "replication-advertise = 127.0.0.1:$PROXY_PORT"
			fi
			echo "nbd = 127.0.0.1:${NBDP[$n]}"
			echo "control = $T/$n.sock"
			echo "data-dir = $T/$n"
		done
		echo
		echo "[volume vol0]"
		echo "size = ${VOL_SIZE:-128M}"
		echo "nodes = a b"
		echo "replication = ${REPL_MODE:-sync}"
		for line in "$@"; do
			echo "$line"
		done
	} >"$file"
	CFG=$file
	export CFG PROXY_PORT
}

uri() { echo "nbd://127.0.0.1:${NBDP[$1]}/vol0"; }
# fault_injection_on NODE...: `fault-injection = on` in those nodes' sections
# of $CFG (after their nbd line), so that `tandemctl inject` works there.
fault_injection_on()
{
	local n
	for n in "$@"; do
		sed -i "s|^nbd = 127.0.0.1:${NBDP[$n]}\$|&\nfault-injection = on|" "$CFG"
	done
	[ "$(grep -c '^fault-injection = on' "$CFG")" = $# ] || fail "fault-injection not in the config"
}
ctl_on() { local n=$1; shift; "$BIN/tandemctl" -c "$CFG" -n "$n" "$@"; }

# start NODE [CFGFILE]: starts tandemd for NODE (log $T/NODE.log) and waits
# for its control socket.
start()
{
	local n=$1 cfg=${2:-$CFG} i pid
	echo "=== start $(date +%T.%N)" >>"$T/$n.log"
	"$BIN/tandemd" -c "$cfg" -n "$n" -f >>"$T/$n.log" 2>&1 &
	pid=$!
	track "$pid"
	NPID[$n]=$pid
	for ((i = 0; i < 200; i++)); do
		alive "$pid" || { tail -n 30 "$T/$n.log" >&2; fail "tandemd $n exited during startup"; }
		"$BIN/tandemctl" -c "$cfg" -n "$n" ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "tandemd $n did not answer ping within 20 s"
}

# this_run NODE: NODE's log since its last start.
# (`|| true`: in `this_run a | grep -q X`, grep may exit before awk has
# written all, and under pipefail awk's SIGPIPE would fail the check)
this_run() { awk '/^=== start /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' "$T/$1.log" || true; }

_forget()
{
	local p keep=() pid=$1
	for p in "${PIDS[@]}"; do
		[ "$p" = "$pid" ] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
}

check_log_of()
{
	if grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' "$T/$1.log"; then
		cat "$T/$1.log" >&2
		fail "sanitizer report in the log of $1"
	fi
}

# stop NODE: SIGTERM, must exit 0 within 30 s with a clean log.
stop()
{
	local n=$1 pid=${NPID[$1]:-} i rc=0
	[ -n "$pid" ] || fail "stop: $n is not running"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	alive "$pid" && fail "tandemd $n did not exit within 30 s of SIGTERM"
	wait "$pid" || rc=$?
	_forget "$pid"
	NPID[$n]=""
	[ "$rc" -eq 0 ] || { tail -n 40 "$T/$n.log" >&2; fail "tandemd $n exited with $rc"; }
	check_log_of "$n"
}

# crash NODE: SIGKILL, then wait until its ports are free again.
crash()
{
	local n=$1 pid=${NPID[$1]:-}
	[ -n "$pid" ] || fail "crash: $n is not running"
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null || true
	_forget "$pid"
	NPID[$n]=""
	wait_released "$T/$n.sock" "${NBDP[$n]}" "${REPP[$n]}"
}

# jfield NODE EXPR: evaluates a python expression on the status JSON of vol0
# (v: the volume object, p: its first peer).
jfield()
{
	local n=$1 expr=$2
	ctl_on "$n" status vol0 --json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
v = d['volumes'][0]
p = v['peers'][0] if v['peers'] else {}
print($expr)"
}

# wait_for NODE EXPR [SECONDS]: until jfield prints True.
wait_for()
{
	local n=$1 expr=$2 secs=${3:-30} i
	for ((i = 0; i < secs * 10; i++)); do
		[ "$(jfield "$n" "$expr" 2>/dev/null)" = True ] && return 0
		sleep 0.1
	done
	ctl_on "$n" status vol0 >&2 || true
	fail "on $n, '$expr' did not hold within $secs s"
}

# events_follow NODE FILE: follows NODE's `tandemctl events` in FILE; returns
# once its first line says the subscription is live, so no event is missed.
events_follow()
{
	local n=$1 f=$2 i
	ctl_on "$n" events >"$f" 2>&1 &
	track $!
	for ((i = 0; i < 100; i++)); do
		head -n 1 "$f" | grep -q '^{"time":[0-9.]*,"node":"'"$n"'","event":"subscribed"}$' && return 0
		grep -q '^tandemctl:' "$f" && fail "events on $n: $(cat "$f")"
		sleep 0.05
	done
	fail "events on $n: no subscription within 5 s: $(cat "$f")"
}

wait_connected()
{
	wait_for a "p['connection'] == 'connected'" "${1:-30}"
	wait_for b "p['connection'] == 'connected'" "${1:-30}"
}

# start_pair: both nodes up, connected, and a's replication established.
start_pair()
{
	start a
	start b
	wait_connected
	wait_for a "p['replication'] == 'established'"
}

# Both data areas equal byte for byte (after wait-sync on both). Prints the
# first differing regions when they are not. IMG_A, IMG_B: other image paths.
# vol_bytes: the volume's size in bytes (VOL_SIZE): the data area of an
# image, which its disk label (4 KiB) follows.
vol_bytes() { numfmt --from=iec "${VOL_SIZE:-128M}"; }

compare_replicas()
{
	ctl_on a wait-sync vol0 --timeout "${1:-60}" || fail "a: wait-sync did not succeed"
	ctl_on b wait-sync vol0 --timeout "${1:-60}" || fail "b: wait-sync did not succeed"
	python3 - "${IMG_A:-$T/a/vol0.img}" "${IMG_B:-$T/b/vol0.img}" "${VOL_SIZE_BYTES:-0}" <<'EOF' || fail "the replicas differ"
import os, sys
# Holes read as zeros in both files: only the data extents of either (their
# union, found with SEEK_DATA/SEEK_HOLE) are read and compared.
fa, fb = os.open(sys.argv[1], os.O_RDONLY), os.open(sys.argv[2], os.O_RDONLY)
# The data area only: a disk label (4 KiB, "TANDLAB1") follows it, and
# names each disk as its own.
def data_len(fd):
    n = os.fstat(fd).st_size
    if n >= 4096 and os.pread(fd, 8, n - 4096) == b"TANDLAB1":
        return n - 4096
    return n
size = max(data_len(fa), data_len(fb))
def extents(fd):
    out, off, end = [], 0, data_len(fd)
    while off < end:
        try:
            d = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            break
        h = min(os.lseek(fd, d, os.SEEK_HOLE), end)
        if d >= end:
            break
        out.append((d, h))
        off = h
    return out
spans = sorted(extents(fa) + extents(fb))
merged = []
for s0, e0 in spans:
    if merged and s0 <= merged[-1][1]:
        merged[-1][1] = max(merged[-1][1], e0)
    else:
        merged.append([s0, e0])
bad, chunk = [], 1 << 20
for s0, e0 in merged:
    s0 -= s0 % 4096
    for off in range(s0, e0, chunk):
        n = min(chunk, e0 - off)
        x, y = os.pread(fa, n, off).ljust(n, b'\0'), os.pread(fb, n, off).ljust(n, b'\0')
        if x != y:
            for i in range(0, n, 4096):
                if x[i:i+4096] != y[i:i+4096]:
                    bad.append(off + i)
if bad:
    print("replicas differ in %d blocks of 4K; first at: %s" % (len(bad), ", ".join(hex(o) for o in bad[:10])), file=sys.stderr)
    sys.exit(1)
print("replicas identical: %d bytes" % size, file=sys.stderr)
EOF
}

# put NODE OFF LEN EXPECT...: LEN random bytes at byte offset OFF through NBD
# on NODE, one 1 MiB request each (M=1 MiB), then a flush; every EXPECT file (an image
# of what some node must hold) gets them too. OFF and LEN: multiples of 1 MiB.
put()
{
	local n=$1 off=$2 len=$3 k cmds=() e M=$((1 << 20))
	shift 3
	for ((k = 0; k < len / M; k++)); do
		head -c "$M" /dev/urandom >"$T/chunk$k"
		cmds+=(-c "write -s $T/chunk$k $((off + k * M)) $M")
	done
	qemu-io -f raw "$(uri "$n")" "${cmds[@]}" -c flush >"$T/qio.out" 2>&1 ||
		{ cat "$T/qio.out" >&2; fail "qemu-io: write $len at $off on $n failed"; }
	[ "$(grep -c "^wrote $M/$M bytes at offset" "$T/qio.out")" -eq $((len / M)) ] ||
		{ cat "$T/qio.out" >&2; fail "qemu-io: write $len at $off on $n not acknowledged"; }
	for e in "$@"; do
		for ((k = 0; k < len / M; k++)); do
			dd if="$T/chunk$k" of="$e" bs=1M seek=$((off / M + k)) conv=notrunc status=none
		done
	done
}

# The link proxy between a and b (PROXY=1 in write_config2).
proxy_start()
{
	local pid
	python3 "$_root/tests/tools/linkproxy.py" --listen "127.0.0.1:$PROXY_PORT" \
		--target "127.0.0.1:${REPP[b]}" --control "$T/proxy.sock" >"$T/proxy.out" 2>"$T/proxy.log" &
	pid=$!
	track "$pid"
	# shellcheck disable=SC2034 # for the tests that stop the proxy
	PROXY_PID=$pid
	for ((i = 0; i < 100; i++)); do
		grep -q ready "$T/proxy.out" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "link proxy did not start"
}
proxy() { python3 "$_root/tests/tools/linkproxy.py" --control "$T/proxy.sock" --cmd "$*" >/dev/null || fail "proxy $*"; }

# On failure, show both logs (lib.sh's trap shows only a.log); a sanitizer
# report in either log fails the test.
_show_logs()
{
	local rc=$? n
	set +e
	trap - EXIT
	trap '' TERM INT # as in _cleanup
	for n in a b w; do
		if [ -s "$T/$n.log" ] && grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' "$T/$n.log"; then
			echo "FAIL: sanitizer report in the log of $n" >&2
			rc=1
		fi
	done
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		for n in a b w; do
			[ -s "$T/$n.log" ] && { echo "--- tail of $n.log ---" >&2; tail -n 40 "$T/$n.log" >&2; }
		done
	fi
	(exit "$rc")
	_cleanup
}
trap _show_logs EXIT

# wait_file FILE PID: until a helper started in the background (PID) made
# FILE, its sign that it is ready (10 s at most).
wait_file()
{
	local i
	for ((i = 0; i < 200; i++)); do
		[ -e "$1" ] && return 0
		alive "$2" || break
		sleep 0.05
	done
	fail "$(basename "$1") did not appear"
}

# xfs_loop DIR [MKFS.XFS OPTION...]: an XFS filesystem of XFS_SIZE (default
# 512M) on a loop device over DIR.img, mounted at DIR, undone at exit. Exits
# 77 (skip) where loop devices or XFS mounts do not work.
xfs_loop()
{
	local dir=$1 loop
	shift
	truncate -s "${XFS_SIZE:-512M}" "$dir.img"
	loop=$(losetup -f --show "$dir.img" 2>/dev/null) || { echo "SKIP: no loop device" >&2; exit 77; }
	AT_EXIT+=("losetup -d '$loop'")
	mkfs.xfs -q "$@" "$loop" || fail "mkfs.xfs failed"
	mkdir -p "$dir"
	mount "$loop" "$dir" 2>/dev/null || { echo "SKIP: cannot mount XFS" >&2; exit 77; }
	AT_EXIT=("umount '$dir'" "${AT_EXIT[@]}")
}

# throttle_writes NODE BPS: the node's threads join a blkio cgroup (v1)
# that limits writes to the device under its data file to BPS bytes/s; 0
# lifts the limit. Exits 77 (skip) where that cannot be done here.
BLKIO_G=
throttle_writes()
{
	local n=$1 cg=/sys/fs/cgroup/blkio dev tid
	dev=$(stat -c '%Hd:%Ld' "$T/$n/vol0.img")
	if [ -z "$BLKIO_G" ]; then
		[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for a blkio cgroup" >&2; exit 77; }
		if [ ! -w "$cg/cgroup.procs" ] || [ ! -e "$cg/blkio.throttle.write_bps_device" ]; then
			echo "SKIP: no writable blkio cgroup (v1) here" >&2
			exit 77
		fi
		BLKIO_G=$cg/tandem-it-$$
		mkdir "$BLKIO_G" || { echo "SKIP: cannot make a blkio cgroup" >&2; exit 77; }
		AT_EXIT+=("cat '$BLKIO_G/cgroup.procs' 2>/dev/null | while read -r p; do echo \$p > '$cg/cgroup.procs'; done; rmdir '$BLKIO_G'")
	fi
	echo "$dev $2" >"$BLKIO_G/blkio.throttle.write_bps_device" ||
		{ echo "SKIP: cannot throttle device $dev" >&2; exit 77; }
	for tid in /proc/"${NPID[$n]}"/task/*; do
		echo "${tid##*/}" >"$BLKIO_G/cgroup.procs" 2>/dev/null || true
	done
}

# Tests 812 and 813 (up to date means a prefix, ASYNC.md A7-A9), with
# NBLK set: prefix_at_uptodate LINK...: a stamped writer on a, whose burst
# ends once a went ahead, then 100 writes a second; LINK... (`proxy`, or
# `link ab`) shapes the link from a to b to 2 Mbit/s during the burst, so
# that a loaded machine still overflows the backlog, and to 8 Mbit/s from
# then on. The moment b turns `inconsistent -> uptodate` (RS_DONE arrived)
# the link is cut and a killed, as a site lost then. prefix_check: once b
# is primary and stopped, its image is a prefix of a's acknowledged writes.
prefix_at_uptodate()
{
	local wpid i
	"$@" rate ab 2mbit
	events_follow a "$T/a.events"
	events_follow b "$T/b.events"
	STAMP_BURST_STOP=$T/ahead python3 "$TANDEM_TOOLS/stampwriter.py" write "${NBDP[a]}" \
		"$NBLK" "$T/acked" 12000 100 2>"$T/writer.err" &
	wpid=$!
	track "$wpid"
	for ((i = 0; i < 18000; i++)); do
		if [ ! -e "$T/ahead" ] && grep -q '"event":"congestion".*"to":"ahead"' "$T/a.events"; then
			touch "$T/ahead"
			"$@" rate 8mbit
		fi
		grep -q '"event":"disk".*"from":"inconsistent","to":"uptodate"' "$T/b.events" && break
		sleep 0.01
	done
	"$@" cut
	crash a
	wait "$wpid" 2>/dev/null || true
	[ -e "$T/ahead" ] || fail "a never went ahead"
	grep -q '"event":"disk".*"from":"inconsistent","to":"uptodate"' "$T/b.events" ||
		fail "b never turned uptodate within 180 s"
	log "the link cut and a killed at b's uptodate"
}
prefix_check()
{
	wait_for b "v['role'] == 'primary'" 30
	stop b
	python3 "$TANDEM_TOOLS/stampwriter.py" check "$T/b/vol0.img" "$NBLK" "$(cat "$T/acked")" \
		2>"$T/check.out" || fail "b's image is not a prefix of a's writes: $(cat "$T/check.out")"
	log "$(cat "$T/check.out")"
}
