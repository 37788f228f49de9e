#!/usr/bin/env bash
# iSCSI front-end with libiscsi's and qemu's real initiators: SendTargets
# discovery lists the volume's target; INQUIRY (standard, VPD 0x80 and 0x83
# with the NAA identifier) and READ CAPACITY 16 answer; qemu-img converts a
# random image onto the LUN and compares it (and the same bytes read back over
# NBD); garbage, a command before login, a command beyond the CmdSN window
# (Reject), an oversized data segment and a cut BHS are refused or dropped
# while the target keeps serving.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need qemu-img iscsi-ls iscsi-inq iscsi-readcapacity16 python3

export VOL_SIZE=64M
write_config_iscsi "$T/c.ini"
start_node

PORTAL=127.0.0.1:$ISCSI_PORT
LUN_URL=iscsi://$PORTAL/$IQN/0

# discovery
iscsi-ls -i iqn.2026-12.test:init "iscsi://$PORTAL" >"$T/ls.out" 2>&1 || fail "iscsi-ls failed: $(cat "$T/ls.out")"
grep -q "Target:$IQN Portal:$PORTAL,1" "$T/ls.out" || fail "discovery does not list $IQN: $(cat "$T/ls.out")"
iscsi-ls -s -i iqn.2026-12.test:init "iscsi://$PORTAL" >"$T/ls2.out" 2>&1 ||
	fail "iscsi-ls -s failed: $(cat "$T/ls2.out")"
grep -q "Lun:0" "$T/ls2.out" || fail "iscsi-ls -s shows no LUN 0: $(cat "$T/ls2.out")"
log "discovery: $(tr '\n' ' ' <"$T/ls2.out")"

# INQUIRY and capacity
iscsi-inq -i iqn.2026-12.test:init "$LUN_URL" >"$T/inq.out" 2>&1 || fail "iscsi-inq failed: $(cat "$T/inq.out")"
grep -q "Vendor:TANDEM" "$T/inq.out" || fail "standard INQUIRY: $(cat "$T/inq.out")"
iscsi-inq -i iqn.2026-12.test:init -e 1 -c 128 "$LUN_URL" >"$T/vpd80.out" 2>&1 ||
	fail "VPD 0x80 failed: $(cat "$T/vpd80.out")"
iscsi-inq -i iqn.2026-12.test:init -e 1 -c 131 "$LUN_URL" >"$T/vpd83.out" 2>&1 ||
	fail "VPD 0x83 failed: $(cat "$T/vpd83.out")"
grep -qi "NAA" "$T/vpd83.out" || fail "VPD 0x83 has no NAA designator: $(cat "$T/vpd83.out")"
iscsi-readcapacity16 -i iqn.2026-12.test:init "$LUN_URL" >"$T/cap.out" 2>&1 ||
	fail "READ CAPACITY 16 failed: $(cat "$T/cap.out")"
grep -q "LOGICAL BLOCK LENGTH IN BYTES:512" "$T/cap.out" || fail "block length: $(cat "$T/cap.out")"
grep -q "RETURNED LOGICAL BLOCK ADDRESS:$((64 * 2048 - 1))" "$T/cap.out" || fail "last LBA: $(cat "$T/cap.out")"

# data through qemu's initiator, checked through both front-ends
head -c 64M /dev/urandom >"$T/img.raw"
dd if=/dev/zero of="$T/img.raw" bs=1M seek=20 count=4 conv=notrunc status=none
qemu-img convert -n -f raw -O raw "$T/img.raw" "$LUN_URL" 2>"$T/conv.err" ||
	fail "qemu-img convert onto iSCSI failed: $(cat "$T/conv.err")"
qemu-img compare -f raw -F raw "$T/img.raw" "$LUN_URL" >"$T/cmp.out" 2>&1 ||
	fail "image and LUN differ (iSCSI): $(cat "$T/cmp.out")"
qemu-img compare -f raw -F raw "$T/img.raw" "$NBD_URI" >"$T/cmp2.out" 2>&1 ||
	fail "image and volume differ (read over NBD): $(cat "$T/cmp2.out")"
log "qemu-img convert + compare over iscsi:// and nbd:// ok"

# garbage, and a SCSI command before login: dropped, the target serves on
python3 - "$ISCSI_PORT" <<'PY' || fail "hostile input check failed"
import os, socket, sys, struct
port = int(sys.argv[1])
def dropped(payload):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(payload)
    try:
        while True:
            d = s.recv(4096)
            if not d:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
garbage = os.urandom(4096)
assert dropped(garbage), "random bytes: connection not dropped"
bhs = bytearray(48)
bhs[0] = 0x01; bhs[1] = 0x80                 # SCSI command, final
struct.pack_into(">I", bhs, 20, 512)         # expected length
bhs[32] = 0x28                               # READ(10)
assert dropped(bytes(bhs)), "command before login: connection not dropped"
bhs = bytearray(48); bhs[0] = 0x03; bhs[5:8] = b"\xff\xff\xff"   # login, 16M data
assert dropped(bytes(bhs)), "login with a huge data segment: connection not dropped"
PY
# in a session: a command beyond the CmdSN window gets a Reject (protocol
# error) and is not run; a data segment beyond MaxRecvDataSegmentLength ends
# the connection; a connection closed in the middle of a BHS leaves no trace
PYTHONPATH=$_root/tests/integration python3 - "$ISCSI_PORT" "$IQN" <<'PY' || fail "hostile input in a session"
import socket, struct, sys
import iscsi_initiator as ini
from iscsi_initiator import Session, die
ini.NAME = "hostile session"
port, iqn = int(sys.argv[1]), sys.argv[2]
s = Session(port, iqn, isid=3, initiator="iqn.2026-12.test:hostile")
if s.login_status != (0, 0):
    die("login refused")
s.cmdsn += 100000                      # far beyond MaxCmdSN
itt = s.submit(bytes(6))               # TEST UNIT READY
op, h, _ = s.recv()
if op != 0x3f or h[2] != 0x04:
    die("a command beyond the CmdSN window: opcode 0x%02x reason %d, expected Reject 4" % (op, h[2]))
s.cmdsn -= 100001                      # back in the window: the session goes on
st, _, _, _ = s.cmd(bytes(6))
if st != 0:
    die("TEST UNIT READY after the Reject: status 0x%02x" % st)
bhs = bytearray(48)
bhs[0] = 0x01; bhs[1] = 0xa1
struct.pack_into(">IIII", bhs, 16, 999, 1 << 24, s.cmdsn, s.statsn)
bhs[32] = 0x2a
bhs[5:8] = (1 << 24 - 1).to_bytes(3, "big")   # 8 MiB of immediate data announced
s.s.sendall(bytes(bhs))
try:
    while s.recv():
        pass
except (EOFError, ConnectionResetError):
    pass
t = socket.create_connection(("127.0.0.1", port), timeout=5)
t.sendall(bytes(20))                   # part of a BHS, then gone
t.close()
print("CmdSN beyond the window: Reject, session goes on; oversized segment: dropped; cut BHS: nothing")
PY
iscsi-inq -i iqn.2026-12.test:init "$LUN_URL" >/dev/null 2>&1 || fail "target stopped serving after hostile input"

stop_node
check_log
log "ok"
