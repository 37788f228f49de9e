#!/usr/bin/env bash
# A primary paused longer than its lease (SIGSTOP: a VM pause, a hung host)
# under a running writer, then resumed (SIGCONT):
#  1. a (primary) is paused while the failclient writes through a or b;
#     a read of a block written before is queued on a's NBD connection
#     while it is paused.
#  2. b takes over (failover within 5 s) and acknowledges a new version of
#     that block.
#  3. a resumes: the queued read is not answered with the old version
#     (a node resumed after its lease ran out serves nothing before it
#     renews: it checks its lease on a fresh clock); a yields to b without
#     "split brain" (L6), resyncs, and `wait-sync` on b succeeds at once,
#     without retries.
#  4. Every acknowledged write is on both replicas.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

QUORUM_TIMEOUT=30 write_config3 "$T/cluster.ini"
start_trio
wait_for a "v['role'] == 'primary' and v.get('lease', True)"
client_start a b
wait_acked "$T/acked" 200

cat >"$T/queued.py" <<'PY'
"""Writes v1 to a block through a; once told (the node is paused), sends a
read of it; prints what the reply said once it came (or 'gone')."""
import os, socket, struct, sys, time
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import connect, recvall
port, tdir = int(sys.argv[1]), sys.argv[2]
OFF, BS = 100 << 20, 4096
s, _ = connect("127.0.0.1", port, timeout=5)
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 1, OFF, BS) + b"\x11" * BS)
assert struct.unpack(">IIQ", recvall(s, 16))[1] == 0, "write of v1 failed"
open(os.path.join(tdir, "q.ready"), "w").close()
while not os.path.exists(os.path.join(tdir, "q.go")):
    time.sleep(0.02)
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, 2, OFF, BS))
s.settimeout(30)
try:
    magic, err, h = struct.unpack(">IIQ", recvall(s, 16))
    if err:
        print("error %d" % err)
    else:
        d = recvall(s, BS)
        print("v1" if d == b"\x11" * BS else "v2" if d == b"\x22" * BS else "other")
except (socket.timeout, ConnectionError, OSError) as e:
    print("gone " + type(e).__name__)
PY
python3 "$T/queued.py" "${NBDP[a]}" "$T" >"$T/q.out" 2>&1 &
QPID=$!
track "$QPID"
wait_file "$T/q.ready" "$QPID"

kill -STOP "${NPID[a]}"
t0=$(date +%s.%N)
touch "$T/q.go" # the read waits in a's socket while a is paused
wait_for b "v['role'] == 'primary'" 10
t1=$(date +%s.%N)
log "b primary $(python3 -c "print('%.2f' % ($t1 - $t0))") s after a was paused"
python3 - "${NBDP[b]}" <<'PY' || fail "b did not acknowledge version 2"
import os, struct, sys, time
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import connect, recvall
s, _ = connect("127.0.0.1", int(sys.argv[1]), timeout=5)
for i in range(50):
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 1, 100 << 20, 4096) + b"\x22" * 4096)
    if struct.unpack(">IIQ", recvall(s, 16))[1] == 0:
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY
sleep 1
kill -CONT "${NPID[a]}"
wait_acked "$T/acked" $(($(acked "$T/acked") + 100)) 20
wait "$QPID" || true
_forget "$QPID"
q=$(cat "$T/q.out")
log "the read queued on a while it was paused: $q"
case $q in v1*) fail "a answered the queued read with the old version" ;; esac

wait_for a "v['role'] == 'secondary'" 20
wait_connected 30
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
ctl_on b wait-sync vol0 --timeout 30 || fail "wait-sync on b failed"
grep -q "split brain" "$T/a.log" "$T/b.log" && fail "split brain was declared: $(grep -h "split brain" "$T/a.log" "$T/b.log" | head -n 2)"
[ "$(jfield b "p['split_brain']")" = False ] || fail "b reports split brain"
end_trio
log "ok"
