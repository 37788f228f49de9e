#!/usr/bin/env bash
# Connection limits of the front-ends ([cluster] max-connections,
# max-connections-per-address, handshake-timeout) and running out of file
# descriptors.
#  1. max-connections = 12, max-connections-per-address = 5,
#     handshake-timeout = 3, on the NBD and on the iSCSI port: 8 idle
#     connections from 127.0.0.1 get 5 served and 3 closed at once; 5 more
#     from 127.0.0.2 and 5 from 127.0.0.3 (to 127.0.0.1 all) get 6 served
#     (12 in all with the trickling client of 2.) and 4 closed. tandemctl
#     status answers meanwhile.
#  2. The idle ones, and a client that trickles a byte of its handshake
#     (NBD) / login (iSCSI) every half second, are closed by the daemon
#     between 2.5 and 5.5 s after they connected. Then nbdinfo, an iSCSI
#     login and tandemctl status work.
#  3. Restarted with generous caps and RLIMIT_NOFILE 120: of 60 NBD
#     connections the front-end serves only what leaves NET_FD_RESERVE (64)
#     descriptors free and closes the rest; tandemctl status works. Then 100 idle control connections run
#     the process out of descriptors: the control listener pauses instead of
#     spinning (under 0.5 s of CPU in 2 s) and serves again once they close.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3 nbdinfo

export VOL_SIZE=16M
write_config_iscsi "$T/c.ini"
sed -i "s|^secret = test-secret|&\nmax-connections = 12\nmax-connections-per-address = 5\nhandshake-timeout = 3|" "$CFG"
start_node

cat >"$T/limits.py" <<'PY'
import select, socket, subprocess, sys, threading, time
import iscsi_initiator as ini
from iscsi_initiator import Session, die

ini.NAME = "conn-limits"
nbd_port, iscsi_port, iqn, uri, ctl = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]

def status_ok(when):
    r = subprocess.run(ctl + ["status"], capture_output=True, text=True, timeout=20)
    if r.returncode:
        die("tandemctl status %s: %s" % (when, r.stderr))

def open_from(src, port, n):
    out = []
    for _ in range(n):
        s = socket.socket()
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        out.append((s, time.monotonic()))
    return out

def states(socks, wait=0.5):
    """For each socket 'open' (a greeting, or silence for `wait` s) or
    'closed' (EOF, reset), all waited for together."""
    time.sleep(wait)
    ready = select.select(socks, [], [], 0)[0]
    out = []
    for s in socks:
        st = "open"
        if s in ready:
            try:
                if s.recv(64, socket.MSG_PEEK) == b"":
                    st = "closed"
            except ConnectionResetError:
                st = "closed"
        out.append(st)
    return out

def caps(name, port):
    a = open_from("127.0.0.1", port, 8)
    got = states([s for s, _ in a])
    if got.count("open") != 5:
        die("%s: 8 connections from 127.0.0.1 with 5 per address: %s" % (name, got))
    b = open_from("127.0.0.2", port, 5) + open_from("127.0.0.3", port, 5)
    got2 = states([s for s, _ in b])
    # 12 per listener, one taken by the trickling client
    if got2.count("open") != 6 or got2[:5] != ["open"] * 5:
        die("%s: 10 more from 127.0.0.2-3 with 12 per listener: %s" % (name, got2))
    print("%s: 5 of 8 from one address, then 6 of 10 from two others served" % name)
    return [c for c, st in zip(a + b, got + got2) if st == "open"]

def trickle(port, first, label, res):
    s = socket.socket()
    s.bind(("127.0.0.4", 0))
    s.connect(("127.0.0.1", port))
    t0 = time.monotonic()
    s.settimeout(0.5)
    junk = first  # sent a byte every half second
    for i in range(40):
        try:
            if s.recv(64) == b"":
                break
        except socket.timeout:
            pass
        except ConnectionResetError:
            break
        try:
            s.sendall(junk[i:i + 1])
        except OSError:
            break
    res[label] = time.monotonic() - t0

res = {}
# NBD: client flags, then an NBD_OPT_EXPORT_NAME with a 32-byte name;
# iSCSI: a Login Request header
NBD_HS = b"\0\0\0\3IHAVEOPT\0\0\0\1\0\0\0\x20" + b"n" * 32
ISCSI_HS = b"\x43\x87" + bytes(46)
ts = [threading.Thread(target=trickle, args=(nbd_port, NBD_HS, "nbd trickle", res)),
      threading.Thread(target=trickle, args=(iscsi_port, ISCSI_HS, "iscsi trickle", res))]
for t in ts:
    t.start()
time.sleep(0.3)
nbd_idle = caps("nbd", nbd_port)
iscsi_idle = caps("iscsi", iscsi_port)
status_ok("with every front-end slot taken")
for name, conns in (("nbd", nbd_idle), ("iscsi", iscsi_idle)):
    for s, t0 in conns:
        s.settimeout(8)
        try:
            while s.recv(64):
                pass
        except socket.timeout:
            die("%s: an idle connection is still open after 8 s" % name)
        except ConnectionResetError:
            pass
        took = time.monotonic() - t0
        if not 2.5 <= took <= 5.5:
            die("%s: an idle connection closed after %.1f s (handshake-timeout 3 s)" % (name, took))
        s.close()
for t in ts:
    t.join()
for label in ("nbd trickle", "iscsi trickle"):
    if not 2.5 <= res.get(label, 99) <= 5.5:
        die("%s: closed after %s s (handshake-timeout 3 s)" % (label, res.get(label)))
print("idle and trickling handshakes closed after %.1f / %.1f s" % (res["nbd trickle"], res["iscsi trickle"]))
time.sleep(0.2)
r = subprocess.run(["nbdinfo", uri], capture_output=True, text=True, timeout=20)
if r.returncode:
    die("nbdinfo after the limits: " + r.stderr)
s = Session(iscsi_port, iqn, isid=7)
if s.login_status != (0, 0):
    die("iSCSI login after the limits: %s" % (s.login_status,))
s.cmd(bytes(6))
if s.cmd(bytes(6))[0] != 0:
    die("TEST UNIT READY after the limits failed")
s.logout()
status_ok("after the limits")
print("nbdinfo, an iSCSI login and tandemctl status work afterwards")
PY

PYTHONPATH=$_root/tests/integration timeout 120 python3 "$T/limits.py" "$NBD_PORT" "$ISCSI_PORT" \
	"$IQN" "$NBD_URI" "$BIN/tandemctl" -c "$CFG" -n a >"$T/out.txt" 2>&1 || fail "$(cat "$T/out.txt")"
cat "$T/out.txt" >&2
grep -q "max-connections-per-address reached" "$T/a.log" || fail "per-address refusals not logged"
grep -q "handshake-timeout" "$T/a.log" || fail "handshake timeouts not logged"
stop_node

# 3. descriptors
sed -i "s|^max-connections = 12|max-connections = 1000|; s|^max-connections-per-address = 5|max-connections-per-address = 1000|" "$CFG"
# The daemon alone gets 120 descriptors (io_uring's accept checks the limit
# the process started with, so it is set before, not with prlimit after).
nofile=$(ulimit -S -n)
ulimit -S -n 120
start_node
ulimit -S -n "$nofile"
cat >"$T/fds.py" <<'PY'
import os, resource, socket, subprocess, sys, time

pid, nbd_port, sock, uri, ctl = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]

def die(msg):
    print("conn-limits fds: " + msg, file=sys.stderr)
    sys.exit(1)

def cpu():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def status(timeout=20):
    return subprocess.run(ctl + ["status"], capture_output=True, text=True, timeout=timeout).returncode

limit = resource.prlimit(pid, resource.RLIMIT_NOFILE)[0]
if limit != 120:
    die("the daemon's RLIMIT_NOFILE is %d, 120 expected" % limit)
conns, served = [], 0
for _ in range(60):
    s = socket.create_connection(("127.0.0.1", nbd_port))
    s.settimeout(1)
    try:
        if len(s.recv(18)) == 18:
            served += 1
    except (socket.timeout, ConnectionResetError):
        pass
    conns.append(s)
if not 5 <= served <= 120 - 64:
    die("60 NBD connections, 120 descriptors, 64 kept in reserve: %d served" % served)
if status():
    die("tandemctl status with the front-end at its descriptor reserve failed")
print("60 NBD connections, %d served; the reserve kept the control socket working" % served)
# Now run the process out of descriptors through the control socket.
ctls = []
for _ in range(100):
    u = socket.socket(socket.AF_UNIX)
    u.connect(sock)
    ctls.append(u)
time.sleep(0.5)
c0 = cpu()
time.sleep(2)
used = cpu() - c0
if used > 0.5:
    die("out of descriptors, the daemon used %.2f s of CPU in 2 s (spinning)" % used)
for u in ctls + conns:
    u.close()
deadline = time.time() + 5
while status(5):
    if time.time() > deadline:
        die("tandemctl status fails 5 s after the descriptors were released")
    time.sleep(0.2)
r = subprocess.run(["nbdinfo", uri], capture_output=True, text=True, timeout=20)
if r.returncode:
    die("nbdinfo after the descriptor shortage: " + r.stderr)
print("out of descriptors: %.2f s of CPU in 2 s; status and nbdinfo work once they are back" % used)
PY
timeout 120 python3 "$T/fds.py" "$NODE_PID" "$NBD_PORT" "$T/a.sock" "$NBD_URI" \
	"$BIN/tandemctl" -c "$CFG" -n a >"$T/out.txt" 2>&1 || fail "$(cat "$T/out.txt")"
cat "$T/out.txt" >&2
grep -q "file descriptors are running out" "$T/a.log" || fail "descriptor refusals not logged"
grep -q "Too many open files.*pausing this listener" "$T/a.log" || fail "the control listener never ran out of descriptors"
stop_node
