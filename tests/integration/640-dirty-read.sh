#!/usr/bin/env bash
# No dirty read (SPEC guarantee 7; vol.h V6): a write that is written on the
# primary's disk but not acknowledged (waiting for its peer, then held for
# quorum) is never seen by a reader, and once it fails nobody ever saw it.
#  1. a primary, b secondary, the witness killed (a keeps its lease through
#     b). A block holds version 1.
#  2. The link a-b is cut (no FIN): a's write of version 2 reaches a's disk
#     but no acknowledgement; a reader on a reads the block again and again.
#  3. a loses its lease, holds the write for quorum, and fails it after
#     quorum-timeout (EIO). No read ever returned version 2.
# Before, the reader saw version 2 at once (it was on a's disk).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

QUORUM_TIMEOUT=4 write_config3 "$T/cluster.ini"
start_trio
wait_for a "v['role'] == 'primary' and v.get('lease', True)"
kill_witness
wait_for a "not v['witness']['session']" 10
wait_for a "v['role'] == 'primary' and v.get('lease', True)" 10

cat >"$T/dirty.py" <<'PY'
"""v1 written through a; then, once told, a write of v2 on one connection
and reads on another until the write's reply came (and 2 s more)."""
import os, socket, struct, sys, threading, time
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import connect, recvall
port, tdir = int(sys.argv[1]), sys.argv[2]
OFF, BS = 2 << 20, 4096
V1, V2 = b"\x11" * BS, b"\x22" * BS

def req(s, h, cmd, data=b""):
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, cmd, h, OFF, BS) + data)
    magic, err, rh = struct.unpack(">IIQ", recvall(s, 16))
    if err:
        return "error %d" % err
    return recvall(s, BS) if cmd == 0 else "ok"

w, _ = connect("127.0.0.1", port, timeout=5)
r, _ = connect("127.0.0.1", port, timeout=5)
assert req(w, 1, 1, V1) == "ok", "write of v1 failed"
assert req(r, 1, 0) == V1, "v1 not read back"
reads = {"v1": 0, "v2": 0, "error": 0, "other": 0}
for i in range(10):  # served while the lease holds, before the write
    reads["v1" if req(r, 3, 0) == V1 else "other"] += 1
open(os.path.join(tdir, "d.ready"), "w").close()
while not os.path.exists(os.path.join(tdir, "d.go")):
    time.sleep(0.02)
done = []
def writer():
    w.settimeout(60)
    try:
        done.append(req(w, 2, 1, V2))
    except (socket.timeout, ConnectionError, OSError) as e:
        done.append("gone " + type(e).__name__)
t = threading.Thread(target=writer)
t.start()
time.sleep(0.05)
r.settimeout(60)
end = None
while end is None or time.time() < end:
    if done and end is None:
        end = time.time() + 2
    try:
        x = req(r, 3, 0)
    except (socket.timeout, ConnectionError, OSError):
        reads["error"] += 1
        break
    k = "v1" if x == V1 else "v2" if x == V2 else "error" if isinstance(x, str) else "other"
    reads[k] += 1
    time.sleep(0.01)
t.join()
print("write: %s; reads: %s" % (done[0], " ".join("%s=%d" % kv for kv in sorted(reads.items()))))
sys.exit(0 if reads["v2"] == 0 and reads["other"] == 0 else 1)
PY
python3 "$T/dirty.py" "${NBDP[a]}" "$T" >"$T/d.out" 2>&1 &
DPID=$!
track "$DPID"
wait_file "$T/d.ready" "$DPID"
link ab cut
touch "$T/d.go"
wait "$DPID" || fail "a reader saw data of a write not acknowledged: $(cat "$T/d.out")"
_forget "$DPID"
log "$(cat "$T/d.out")"
grep -q "^write: error" "$T/d.out" || fail "the write held for quorum did not fail: $(cat "$T/d.out")"
grep -Eq "reads: error=[0-9]+ other=0 v1=[1-9]" "$T/d.out" || fail "no read was served before the lease ran out"
link ab restore
stop a
stop b
log "ok"
