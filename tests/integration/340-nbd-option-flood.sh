#!/usr/bin/env bash
# An NBD client in the handshake that loops over NBD_OPT_LIST and never
# reads the replies cannot grow the daemon's memory: the server stops
# reading its socket once a few hundred KiB of option replies wait, so the
# client's sends block. VmRSS must stay under 512 MiB (it grew without bound
# before), and meanwhile nbdinfo still gets the export and tandemctl status
# answers.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3 nbdinfo

export ASAN_OPTIONS=$ASAN_OPTIONS:quarantine_size_mb=16
write_config "$T/c.ini"
start_node

cat >"$T/flood.py" <<'PY'
import socket, struct, subprocess, sys, time

port, pid, uri = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
LIMIT = 512 << 20
IHAVEOPT, OPT_LIST = 0x49484156454F5054, 3

def die(msg):
    print("option-flood: " + msg, file=sys.stderr)
    sys.exit(1)

def rss():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    die("no VmRSS")

s = socket.create_connection(("127.0.0.1", port), timeout=10)
greeting = b""
while len(greeting) < 18:
    greeting += s.recv(18 - len(greeting))
s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
s.settimeout(3)
batch = struct.pack(">QII", IHAVEOPT, OPT_LIST, 0) * 65536  # 1 MiB of options
start, peak, sent, blocked = rss(), rss(), 0, False
for i in range(256):  # up to 16M options
    try:
        s.sendall(batch)
    except socket.timeout:
        blocked = True
        break
    sent += 65536
    peak = max(peak, rss())
    if peak > LIMIT:
        die("%d options sent unread: VmRSS %d MiB > %d MiB" % (sent, peak >> 20, LIMIT >> 20))
time.sleep(0.5)
peak = max(peak, rss())
if peak > LIMIT:
    die("%d options sent unread: VmRSS %d MiB > %d MiB" % (sent, peak >> 20, LIMIT >> 20))
if not blocked:
    die("16M options sent and the server never stopped reading (VmRSS %d MiB)" % (peak >> 20))
r = subprocess.run(["nbdinfo", uri], capture_output=True, text=True, timeout=20)
if r.returncode:
    die("nbdinfo during the flood: " + r.stderr)
print("server stopped reading after about %d options; VmRSS %d -> %d MiB; nbdinfo served"
      % (sent, start >> 20, peak >> 20))
s.close()
PY

timeout 300 python3 "$T/flood.py" "$NBD_PORT" "$NODE_PID" "$NBD_URI" >"$T/out.txt" 2>&1 ||
	fail "$(cat "$T/out.txt")"
cat "$T/out.txt" >&2
ctl status >/dev/null || fail "tandemctl status failed after the flood"
check_alive "the option flood"
stop_node
