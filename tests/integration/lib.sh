# shellcheck shell=bash
# Sourced by every integration test: a private temp dir, a one-node config on
# free loopback ports, start/stop of tandemd with readiness by polling
# `tandemctl ping`, and cleanup of only the pids this test started.
# It must never touch processes it did not start (no pkill/killall) and never
# send traffic anywhere but 127.0.0.1.
set -euo pipefail

# Binaries under test; relative paths are taken from the repository root so
# that a test can be run from anywhere.
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${TANDEM_BUILD:-build}
case $BIN in /*) ;; *) BIN=$_root/$BIN ;; esac
BIN=$(cd "$BIN" && pwd)
export BIN

# Only the sanitized daemon reads these; a leak or UB report must end the
# process with a status stop_node can see.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:exitcode=66
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

TEST_NAME=${TANDEM_TEST_NAME:-$(basename "$0" .sh)} # (a wrapper that runs another test names itself)
T=$(mktemp -d "${TMPDIR:-/tmp}/tandem-it-$TEST_NAME.XXXXXX")
export T
# Clients that drop files in the working directory (fio's verify state) do
# it here, never in the source tree.
cd "$T"
PIDS=()      # every background pid this test started
NODE_PID=""  # the running tandemd, if any
AT_EXIT=()   # commands run at exit once the processes are gone (umount ...)

log() { printf '%s: %s\n' "$TEST_NAME" "$*" >&2; }

fail()
{
	printf 'FAIL: %s\n' "$*" >&2
	exit 1
}

# Exit 77 (skip) when a client the scenario needs is not installed.
need()
{
	local c
	for c in "$@"; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "SKIP: $c is not installed" >&2
			exit 77
		fi
	done
}

# write_config_iscsi FILE [LINE...]: write_config, plus an iSCSI portal on a
# free port (ISCSI_PORT) in the node's section; IQN names vol0's target.
write_config_iscsi()
{
	write_config "$@"
	ISCSI_PORT=$(free_port)
	sed -i "s|^nbd = .*|&\niscsi = 127.0.0.1:$ISCSI_PORT|" "$CFG"
	IQN=iqn.2026-11.org.tandem:it.vol0
	export ISCSI_PORT IQN
}

# mount_tmpfs DIR SIZE: a tmpfs of SIZE (mount's syntax) at DIR, unmounted at
# exit; skips the test (77) where that is not allowed (not root, no mounts).
mount_tmpfs()
{
	[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to mount a tmpfs" >&2; exit 77; }
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2" tmpfs "$1" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs" >&2; exit 77; }
	AT_EXIT+=("umount '$1'")
}

# Records a background pid for cleanup: `some_client & track $!`.
track() { PIDS+=("$1"); }

# True while PID runs. kill -0 alone also succeeds on an unreaped zombie,
# which is exactly what a crashed child of this shell looks like.
alive()
{
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ]
}

_cleanup()
{
	local rc=$? p i
	set +e
	# timeout(1) signals the test and then its whole process group: a second
	# SIGTERM must not cut the cleanup short (daemons left, $T left).
	trap - EXIT
	trap '' TERM INT
	for p in "${PIDS[@]}"; do
		alive "$p" && kill -TERM "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		# A few seconds to exit cleanly, then SIGKILL.
		for ((i = 0; i < 50; i++)); do
			alive "$p" || break
			sleep 0.1
		done
		alive "$p" && kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	for p in "${AT_EXIT[@]}"; do
		eval "$p"
	done
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -s "$T/a.log" ]; then
		echo "--- tail of $T/a.log ---" >&2
		tail -n 40 "$T/a.log" >&2
	fi
	_release_ports
	# TANDEM_KEEP=DIR: a failed test's files (logs, configs) are kept there
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "${TANDEM_KEEP:-}" ]; then
		mkdir -p "$TANDEM_KEEP" && cp -r "$T" "$TANDEM_KEEP/$TEST_NAME" 2>/dev/null
	fi
	rm -rf "$T"
	exit "$rc"
}
trap _cleanup EXIT
# timeout(1) sends SIGTERM; turn it into an exit so the EXIT trap still runs.
trap 'exit 143' TERM
trap 'exit 130' INT

# free_port: a loopback TCP port nobody listens on, claimed for this test
# until it exits. Tests run side by side (tests/run-integration.sh), and a
# port is unbound between free_port and the daemon's bind, and again while a
# killed node is down: so every port drawn is recorded in PORT_DIR with the
# pid of the test's shell, and no other live test gets it (nor does this one,
# twice). Ports come from below the kernel's ephemeral range, where no
# client's connect() lands on them either.
PORT_DIR=${TANDEM_PORT_DIR:-${TMPDIR:-/tmp}/tandem-it-ports}
free_port()
{
	python3 - "$PORT_DIR" "$$" <<'EOF'
import errno, fcntl, os, random, socket, sys
d, owner = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)
lock = os.open(os.path.join(d, ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(lock, fcntl.LOCK_EX)
lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
ports = range(10000, lo) if lo - 10000 >= 2000 else range(lo, hi + 1)
def claimed(port):
    try:
        with open(os.path.join(d, str(port))) as f:
            pid = f.read().strip()
    except FileNotFoundError:
        return False
    # a test killed before its cleanup leaves its claims behind
    return pid.isdigit() and os.path.exists("/proc/" + pid)
def bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError as e:
        if e.errno in (errno.EADDRINUSE, errno.EACCES):
            return False
        raise
    finally:
        s.close()
for _ in range(1000):
    port = random.choice(ports)
    if not claimed(port) and bindable(port):
        with open(os.path.join(d, str(port)), "w") as f:
            f.write(owner + "\n")
        print(port)
        sys.exit(0)
sys.exit("free_port: no free port found in 1000 tries")
EOF
}

# Gives back the ports this test claimed (at exit).
_release_ports()
{
	local f
	for f in "$PORT_DIR"/[0-9]*; do
		[ -e "$f" ] && [ "$(cat "$f" 2>/dev/null)" = "$$" ] && rm -f "$f"
	done
	return 0
}

# write_config FILE [LINE...]: a one-node cluster on free ports; the extra
# lines land in the [volume vol0] section.
write_config()
{
	local file=$1 line
	shift
	NBD_PORT=$(free_port)
	{
		echo "[cluster]"
		echo "name = it"
		echo "secret = test-secret"
		echo
		echo "[node a]"
		echo "nbd = 127.0.0.1:$NBD_PORT"
		echo "control = $T/a.sock"
		echo "data-dir = $T/a"
		echo
		echo "[volume vol0]"
		echo "size = ${VOL_SIZE:-256M}"
		echo "nodes = a"
		for line in "$@"; do
			echo "$line"
		done
	} >"$file"
	CFG=$file
	NBD_URI=nbd://127.0.0.1:$NBD_PORT/vol0
	export CFG NBD_PORT NBD_URI
}

ctl() { "$BIN/tandemctl" -c "$CFG" -n a "$@"; }

start_node()
{
	local i
	[ -n "${CFG:-}" ] || fail "start_node: write_config first"
	echo "=== start $(date +%T.%N)" >>"$T/a.log"
	"$BIN/tandemd" -c "$CFG" -n a -f >>"$T/a.log" 2>&1 &
	NODE_PID=$!
	track "$NODE_PID"
	# Ready when the control socket answers: no fixed sleep.
	for ((i = 0; i < 200; i++)); do
		if ! alive "$NODE_PID"; then
			cat "$T/a.log" >&2
			fail "tandemd exited during startup"
		fi
		ctl ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	cat "$T/a.log" >&2
	fail "tandemd did not answer ping within 20 s"
}

# Fails unless the daemon log is free of sanitizer reports.
check_log()
{
	if grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' "$T/a.log"; then
		cat "$T/a.log" >&2
		fail "sanitizer report in the tandemd log"
	fi
}

_forget_node()
{
	local p keep=()
	for p in "${PIDS[@]}"; do
		[ "$p" = "$NODE_PID" ] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
	NODE_PID=""
}

stop_node()
{
	local i rc=0
	[ -n "$NODE_PID" ] || fail "stop_node: no node running"
	kill -TERM "$NODE_PID" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		alive "$NODE_PID" || break
		sleep 0.1
	done
	alive "$NODE_PID" && fail "tandemd did not exit within 30 s of SIGTERM"
	wait "$NODE_PID" || rc=$?
	_forget_node
	if [ "$rc" -ne 0 ]; then
		cat "$T/a.log" >&2
		fail "tandemd exited with status $rc after SIGTERM"
	fi
	check_log
}

# A crash: SIGKILL, no chance to flush or mark anything clean.
# The kernel tears a dead process's io_uring down asynchronously, and the
# listening sockets with it: for some ms after the process is reaped the NBD
# port still LISTENs and the control socket still accepts. Wait (polling, up
# to 10 s) until both are released, as a supervisor's restart delay would.
kill_node()
{
	[ -n "$NODE_PID" ] || fail "kill_node: no node running"
	kill -KILL "$NODE_PID"
	wait "$NODE_PID" 2>/dev/null || true
	_forget_node
	wait_released "$T/a.sock" "$NBD_PORT"
}

# wait_released SOCKET PORT...: until the control socket no longer answers
# and every TCP port can be bound again (10 s at most), after a SIGKILL.
wait_released()
{
	python3 - "$@" <<'EOF' || fail "the killed node's sockets were not released within 10 s"
import socket, sys, time
path, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
def released():
    for port in ports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
        finally:
            s.close()
    u = socket.socket(socket.AF_UNIX)
    try:
        u.connect(path)
        return False
    except OSError:
        return True
    finally:
        u.close()
deadline = time.time() + 10
while not released():
    if time.time() > deadline:
        sys.exit(1)
    time.sleep(0.01)
EOF
}

# The node still runs and a fresh client still gets the export.
check_alive()
{
	alive "$NODE_PID" || fail "tandemd died${1:+ after: $1}"
	nbdinfo "$NBD_URI" >/dev/null 2>"$T/nbdinfo.err" ||
		fail "nbdinfo failed${1:+ after: $1}: $(cat "$T/nbdinfo.err")"
}
