#!/usr/bin/env bash
# No stale read from a cut-off primary (SPEC guarantee 7; docs/WITNESS.md
# L1-L6), over NBD and iSCSI:
#  1. a (primary) writes version 1 of a block; a reader holds an NBD
#     connection and an iSCSI session to a.
#  2. Every link of a is cut (no FIN, no RST): a is silent to b and to the
#     witness. b takes over and acknowledges version 2 of the block.
#  3. From then on, no read through a returns version 1 (they fail, with a
#     retryable error, or wait), and no write through a is acknowledged;
#     a's iSCSI port is in transition (04/0A) or standby (04/0B).
#  4. Links restored: a steps down, resyncs from b, no split brain; both
#     replicas hold version 2.
# Before leases, a served version 1 until quorum-timeout after the cut.
# A close seen at one end only (a reset on the way) is no proof that the
# other end stopped serving; two variants cut one of a's links, then 1.3 s
# later cut the other and reset it towards the far end only, while a's
# lease from that link (renewed within the last 0.5 s) still runs:
#   LEASE_FAULT=close-peer (670): b sees its connection to a close. Before
#     LE4, b claimed at once and the witness granted it as soon as a's
#     session had been silent for witness-timeout.
#   LEASE_FAULT=close-witness (680): the witness sees a's session close.
#     Before L2 kept a's last message, it granted b's claim at once.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M
IQN=iqn.2026-11.org.tandem:it.vol0
QUORUM_TIMEOUT=30 write_config3 "$T/c.ini"
declare -A ISCP=()
for n in a b; do
	ISCP[$n]=$(free_port)
	sed -i "s|^nbd = 127.0.0.1:${NBDP[$n]}\$|&\niscsi = 127.0.0.1:${ISCP[$n]}|" "$CFG"
done
start_trio
wait_for a "v['role'] == 'primary' and v.get('lease', True)"

cat >"$T/probe.py" <<'PY'
"""Reads one block through a (NBD and iSCSI) until told to stop; logs each
read: start time, end time, what came back (v1, v2, error, timeout)."""
import os, socket, struct, sys, time
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
sys.path.insert(0, os.environ["IT_DIR"])
from nbdclient import connect, recvall
import iscsi_initiator as ii

nbd_a, isc_a, iqn, tdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
OFF, BS = 1 << 20, 4096
V1, V2 = b"\x11" * BS, b"\x22" * BS
h = [0]

def nbd_req(s, cmd, data=b""):
    h[0] += 1
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, cmd, h[0], OFF, BS) + data)
    magic, err, rh = struct.unpack(">IIQ", recvall(s, 16))
    if err:
        return "error %d" % err
    return recvall(s, BS) if cmd == 0 else "ok"

def name(buf):
    return "v1" if buf == V1 else "v2" if buf == V2 else buf if isinstance(buf, str) else "other"

s, _ = connect("127.0.0.1", nbd_a, timeout=5)
assert nbd_req(s, 1, V1) == "ok", "write of v1 failed"
assert nbd_req(s, 0) == V1, "v1 not read back"
sess = ii.Session(isc_a, iqn, initiator="iqn.2026-12.test:probe")
assert sess.login_status == (0, 0), "login refused"
st, rd, sense, _ = sess.cmd(struct.pack(">BBIBHB", 0x28, 0, OFF // 512, 0, BS // 512, 0), edtl=BS, read=True)
assert st == 0 and rd == V1, "iSCSI read of v1 failed"
s.settimeout(4)
sess.s.settimeout(4)
open(os.path.join(tdir, "probe.ready"), "w").close()
out = open(os.path.join(tdir, "probe.log"), "w")
nbd_ok = isc_ok = True
while not os.path.exists(os.path.join(tdir, "probe.stop")):
    if nbd_ok:
        t0 = time.time()
        try:
            r = name(nbd_req(s, 0))
        except (socket.timeout, ConnectionError, OSError) as e:
            r, nbd_ok = "gone " + type(e).__name__, False
        out.write("nbd %.6f %.6f %s\n" % (t0, time.time(), r))
    if isc_ok:
        t0 = time.time()
        try:
            st, rd, sense, _ = sess.cmd(struct.pack(">BBIBHB", 0x28, 0, OFF // 512, 0, BS // 512, 0),
                                        edtl=BS, read=True)
            r = name(rd) if st == 0 else "status %d sense %s" % (st, ii.sense_key(sense))
        except (socket.timeout, ConnectionError, OSError, SystemExit) as e:
            r, isc_ok = "gone " + type(e).__name__, False
        out.write("iscsi %.6f %.6f %s\n" % (t0, time.time(), r))
    out.flush()
    time.sleep(0.02)
# a write through a now: never acknowledged
if nbd_ok:
    t0 = time.time()
    try:
        r = nbd_req(s, 1, b"\x33" * BS)
    except (socket.timeout, ConnectionError, OSError) as e:
        r = "gone " + type(e).__name__
    out.write("write %.6f %.6f %s\n" % (t0, time.time(), r))
out.close()
PY
IT_DIR=$_root/tests/integration python3 "$T/probe.py" "${NBDP[a]}" "${ISCP[a]}" "$IQN" "$T" \
	>"$T/probe.out" 2>&1 &
PPID_=$!
track "$PPID_"
wait_file "$T/probe.ready" "$PPID_"

case ${LEASE_FAULT:-cut} in
cut)
	link aw cut
	link ab cut
	;;
close-peer | close-witness)
	first=aw second=ab
	[ "$LEASE_FAULT" = close-witness ] && first=ab second=aw
	link "$first" cut
	# a notices the first cut after peer-timeout (2 s) and, for ab, would
	# report writing alone, which stops b's claim (W3.1): the second link
	# goes well before that (both commands in one control line)
	sleep 1.3
	link "$second" "cut; halfreset up"
	;;
*) fail "LEASE_FAULT=$LEASE_FAULT: want cut, close-peer or close-witness" ;;
esac
log "a cut off (${LEASE_FAULT:-cut})"
wait_for b "v['role'] == 'primary'" 20
python3 - "${NBDP[b]}" "$T/acked_at" <<'PY' || fail "b did not acknowledge version 2"
import os, struct, sys, time
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import connect, recvall
s, _ = connect("127.0.0.1", int(sys.argv[1]), timeout=5)
for i in range(100):
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 1, 1 << 20, 4096) + b"\x22" * 4096)
    magic, err, h = struct.unpack(">IIQ", recvall(s, 16))
    if not err:
        open(sys.argv[2], "w").write("%.6f\n" % time.time())
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY
log "b acknowledged version 2"
sleep 4
touch "$T/probe.stop"
wait "$PPID_" || fail "the probe failed: $(cat "$T/probe.out")"
_forget "$PPID_"
acked_at=$(cat "$T/acked_at")
python3 - "$T/probe.log" "$acked_at" <<'PY' || fail "a served stale data (above)"
import sys
acked = float(sys.argv[2])
bad = after = 0
for line in open(sys.argv[1]):
    kind, t0, t1, what = line.split(None, 3)
    what = what.strip()
    if float(t0) > acked:
        after += 1
        if kind == "write" and what == "ok":
            print("a write through a was acknowledged after b's:", line.strip()); bad += 1
        if kind != "write" and what == "v1":
            print("stale read through a:", line.strip()); bad += 1
print("%d requests to a after b acknowledged, %d wrong" % (after, bad))
sys.exit(1 if bad or not after else 0)
PY
grep -q "lease lost" "$T/a.log" || fail "a does not say it lost its lease"
# (one grep: with pipefail, `grep | grep -q` fails when -q exits before the
# first grep has written all it found)
grep -Eq '^iscsi .*sense \(2, 4, 1[01]\)' "$T/probe.log" ||
	fail "a's iSCSI port never said NOT READY 04/0A or 04/0B: $(tail -n 3 "$T/probe.log")"

link aw restore
link ab restore
wait_for a "v['role'] == 'secondary'" 30
wait_connected 60
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
[ "$(jfield b "p['split_brain']")" = False ] || fail "b reports split brain"
compare_replicas
python3 - "$T/b/vol0.img" <<'PY' || fail "version 2 is not on b"
import sys
f = open(sys.argv[1], "rb"); f.seek(1 << 20)
sys.exit(0 if f.read(4096) == b"\x22" * 4096 else 1)
PY
stop a
stop b
kill_witness TERM
log "ok"
