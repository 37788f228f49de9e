#!/usr/bin/env bash
# One UNMAP descriptor of 6 GiB (VPD B0 allows it) on a replicated volume:
# the trim reaches the peer in pieces, the replication link stays up (no
# reconnect, no resync), and both replicas end equal. Before, such a request
# was not sent: the primary cut the link and resynced the activity log.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-io python3

export VOL_SIZE=8G
write_config2 "$T/c.ini"
ISCP=$(free_port)
sed -i "s|^nbd = 127.0.0.1:${NBDP[a]}\$|&\niscsi = 127.0.0.1:$ISCP|" "$CFG"
IQN=iqn.2026-11.org.tandem:it.vol0
start_pair
put a $((2 << 30)) $((1 << 20))
put a $((5 << 30)) $((1 << 20))
put a $((7 << 30)) $((1 << 20))
ctl_on a wait-sync vol0 --timeout 30 || fail "a: wait-sync"
PYTHONPATH=$_root/tests/integration python3 - "$ISCP" "$IQN" <<'PY' || fail "UNMAP of 6 GiB failed"
import struct, sys
from iscsi_initiator import Session, die
sess = Session(int(sys.argv[1]), sys.argv[2])
if sess.login_status != (0, 0):
    die("login refused: %s" % (sess.login_status,))
st, buf, sense, rej = sess.cmd(bytes([0x9e, 0x10]) + bytes(8) + struct.pack(">I", 32) + bytes(2), 32, read=True)
if st != 0:
    die("READ CAPACITY 16: status %d" % st)
bs = struct.unpack_from(">I", buf, 8)[0]
lba, n = (1 << 30) // bs, (6 << 30) // bs
desc = struct.pack(">QI4x", lba, n)
plist = struct.pack(">HH4x", 6 + len(desc), len(desc)) + desc
st, _, sense, rej = sess.cmd(bytes([0x42, 0, 0, 0, 0, 0, 0]) + struct.pack(">H", len(plist)) + bytes(1),
                             len(plist), data=plist)
if st != 0:
    die("UNMAP: status %d sense %s" % (st, sense.hex()))
sess.logout()
PY
grep -E "cannot be sent|reconnecting" "$T/a.log" && fail "the UNMAP made the replication link start over"
grep -q "connected -> connecting" "$T/a.log" && fail "the link dropped during the UNMAP"
grep -q "established -> syncsource" "$T/a.log" && fail "the UNMAP caused a resync"
for off in 2 5; do
	qemu-io -f raw "$(uri a)" -c "read -P 0 $((off << 30)) 1M" >/dev/null || fail "a: ${off}G not zero after the UNMAP"
done
compare_replicas
stop b
stop a
