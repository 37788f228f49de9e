#!/usr/bin/env bash
# One initiator cannot make the target hold unbounded memory. A raw client
# logs in, then sends 400 READ(16) of 32 MiB (CmdSN counting up, as if the
# window were endless) and never reads its socket. The daemon's resident
# memory (VmRSS) must stay under 512 MiB while it does (the target stops
# reading that socket and opens MaxCmdSN only as tasks end), and meanwhile
# another initiator still reads and writes and nbdinfo still gets the export.
# The same with immediate READs (the I bit), which skip the CmdSN window,
# and with Login Requests that have the C bit (each answered) in a loop.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3 nbdinfo

# ASan keeps freed memory in quarantine (256 MiB by default): that is not
# memory a client holds.
export ASAN_OPTIONS=$ASAN_OPTIONS:quarantine_size_mb=16
export VOL_SIZE=64M
write_config_iscsi "$T/c.ini"
start_node

cat >"$T/flood.py" <<'PY'
import socket, struct, subprocess, sys, time
import iscsi_initiator as ini
from iscsi_initiator import Session, die

ini.NAME = "memory-cap"
port, iqn, pid, uri = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
LIMIT = 512 << 20
XFER = 32 << 20

def rss():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    die("no VmRSS for pid %d" % pid)

def read16_pdu(itt, cmdsn, immediate):
    bhs = bytearray(48)
    bhs[0] = 0x01 | (0x40 if immediate else 0)
    bhs[1] = 0x80 | 0x40 | 1                       # F, R, simple
    struct.pack_into(">IIII", bhs, 16, itt, XFER, cmdsn, 0)
    cdb = bytes([0x88, 0]) + struct.pack(">QIBB", 0, XFER // 512, 0, 0)
    bhs[32:48] = cdb
    return bytes(bhs)

def other_client(tag):
    """Another initiator and an NBD client are served while the flood waits."""
    s = Session(port, iqn, isid=9, initiator="iqn.2026-12.test:bystander-" + tag)
    if s.login_status != (0, 0):
        die("bystander login refused: %s" % (s.login_status,))
    s.cmd(bytes(6))  # the power-on unit attention
    st, _, sense, _ = s.cmd(bytes([0x2a, 0, 0, 0, 0, 8, 0, 1, 0, 0]), 512, data=b"\x5a" * 512)
    if st:
        die("bystander WRITE: status 0x%02x sense %s" % (st, sense.hex()))
    st, data, sense, _ = s.cmd(bytes([0x28, 0, 0, 0, 0, 8, 0, 1, 0, 0]), 512, read=True)
    if st or data != b"\x5a" * 512:
        die("bystander READ: status 0x%02x, data %s..." % (st, data[:8].hex()))
    s.logout()
    r = subprocess.run(["nbdinfo", uri], capture_output=True, text=True, timeout=20)
    if r.returncode:
        die("nbdinfo during the flood: %s" % r.stderr)

def flood(immediate):
    what = "immediate READ(16)" if immediate else "READ(16)"
    f = Session(port, iqn, isid=1, initiator="iqn.2026-12.test:flood")
    if f.login_status != (0, 0):
        die("flood login refused: %s" % (f.login_status,))
    f.s.settimeout(3)
    peak, sent, blocked = rss(), 0, False
    for i in range(400):
        try:
            f.s.sendall(read16_pdu(1000 + i, f.cmdsn if immediate else f.cmdsn + i, immediate))
        except socket.timeout:
            blocked = True
            break
        sent += 1
        if i % 4 == 3:
            time.sleep(0.05)
            peak = max(peak, rss())
            if peak > LIMIT:
                die("%s flood: %d sent unread, VmRSS %d MiB > %d MiB"
                    % (what, sent, peak >> 20, LIMIT >> 20))
    for _ in range(20):  # what was read is being served: let it settle
        time.sleep(0.1)
        peak = max(peak, rss())
    if peak > LIMIT:
        die("%s flood: %d sent unread, VmRSS %d MiB > %d MiB" % (what, sent, peak >> 20, LIMIT >> 20))
    other_client("imm" if immediate else "win")
    peak = max(peak, rss())
    print("%s flood: %d of 400 sent, none of the answers read%s; peak VmRSS %d MiB"
          % (what, sent, " (sends blocked)" if blocked else "", peak >> 20))
    f.s.close()
    return peak

def login_flood():
    """Login Requests with the C (continue) bit and no text: each gets an
    answer. Sent in 1 MiB batches, never read."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    bhs = bytearray(48)
    bhs[0] = 0x43
    bhs[1] = 0x40 | (1 << 2) | 3                    # C, CSG operational, NSG full
    bhs[8:14] = bytes([0x80, 0, 0, 0x25, 0x0b, 5])
    struct.pack_into(">IHHII", bhs, 16, 1, 0, 0, 1, 0)
    batch = bytes(bhs) * ((1 << 20) // 48)
    s.settimeout(3)
    peak, sent, blocked = rss(), 0, False
    for _ in range(200):
        try:
            s.sendall(batch)
        except socket.timeout:
            blocked = True
            break
        sent += len(batch) // 48
        peak = max(peak, rss())
        if peak > LIMIT:
            die("login flood: %d sent unread, VmRSS %d MiB > %d MiB" % (sent, peak >> 20, LIMIT >> 20))
    if not blocked:
        die("login flood: %d sent and the target never stopped reading" % sent)
    other_client("login")
    print("login flood: the target stopped reading after about %d PDUs; peak VmRSS %d MiB"
          % (sent, peak >> 20))
    s.close()

flood(False)
flood(True)
login_flood()
PY

PYTHONPATH=$_root/tests/integration timeout 300 python3 "$T/flood.py" "$ISCSI_PORT" "$IQN" \
	"$NODE_PID" "$NBD_URI" >"$T/out.txt" 2>&1 || fail "$(cat "$T/out.txt")"
cat "$T/out.txt" >&2
ctl status >/dev/null || fail "tandemctl status failed after the floods"
stop_node
