#!/usr/bin/env bash
# Task management reaches the tasks it should, and only those (SAM-5 7, with
# the control mode page's TST=0: one task set shared by every I_T nexus, and
# TAS=0: aborted tasks get no answer). Two sessions A and B; each round A
# starts a WRITE of one block whose data waits for an R2T, then B sends a task
# management function, then A sends the data:
#  1. CLEAR TASK SET from B: A's WRITE is aborted (its data dropped, no answer,
#     the block unchanged) and A's next command gets UNIT ATTENTION, COMMANDS
#     CLEARED BY ANOTHER INITIATOR (2F/00); B gets nothing.
#  2. ABORT TASK SET from B: only B's own tasks; A's WRITE completes.
#  3. LUN RESET from B: A's WRITE is aborted; both get BUS DEVICE RESET
#     FUNCTION OCCURRED (29/03).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3

export VOL_SIZE=16M
write_config_iscsi "$T/c.ini"
start_node

cat >"$T/ts.py" <<'PY'
import struct, sys
import iscsi_initiator as ini
from iscsi_initiator import Session, die, sense_key

ini.NAME = "task set probe"
port, iqn = int(sys.argv[1]), sys.argv[2]
BLK, LBA = 512, 9
GOOD, CHECK = 0x00, 0x02
CLEAR_TASK_SET, ABORT_TASK_SET, LUN_RESET = 4, 2, 5

def session(tag, isid):
    return Session(port, iqn, isid=isid, initiator="iqn.2026-12.test:ts-" + tag,
                   keys=["ImmediateData=Yes", "InitialR2T=Yes"])

A, B = session("a", 1), session("b", 2)
NAMES = {id(A): "A", id(B): "B"}

def tur(s, status=GOOD, ua=None):
    st, _, sense, _ = s.cmd(bytes(6))
    if st != status or (ua is not None and sense_key(sense) != (0x06, ua >> 8, ua & 0xff)):
        die("%s, TEST UNIT READY: status 0x%02x sense %s; 0x%02x%s expected"
            % (NAMES[id(s)], st, sense.hex(), status, " UA %04x" % ua if ua else ""))

def write_cdb():
    return bytes([0x2a, 0]) + struct.pack(">I", LBA) + bytes([0, 0, 1, 0])

def read_block():
    st, data, _, _ = B.cmd(bytes([0x28, 0]) + struct.pack(">I", LBA) + bytes([0, 0, 1, 0]), BLK, read=True)
    if st != GOOD:
        die("READ: status 0x%02x" % st)
    return data

def waiting_write():
    """A's WRITE, stopped at its R2T: (itt, ttt)."""
    itt = A.submit(write_cdb(), BLK)
    op, h, _ = A.recv()
    if op != 0x31:
        die("A: opcode 0x%02x where the R2T for its WRITE was expected" % op)
    return itt, struct.unpack_from(">I", h, 20)[0]

def data_out(itt, ttt, data):
    d = bytearray(48)
    d[0], d[1] = 0x05, 0x80
    struct.pack_into(">IIIII", d, 16, itt, ttt, 0, A.statsn, 0)
    A.send(d, data)

def tmf(fn):
    r = B.tmf(fn)
    if r != 0:
        die("B: task management function %d answered %d" % (fn, r))

X, Y, Z = b"X" * BLK, b"Y" * BLK, b"Z" * BLK
st, _, _, _ = A.cmd(write_cdb(), BLK, data=X)
if st != GOOD:
    die("WRITE X: status 0x%02x" % st)

# 1. CLEAR TASK SET clears A's task too (any answer to it would come before
# the TEST UNIT READY's and make cmd() fail)
itt, ttt = waiting_write()
tmf(CLEAR_TASK_SET)
data_out(itt, ttt, Y)
tur(A, CHECK, 0x2f00)
tur(A)
tur(B)
if read_block() != X:
    die("CLEAR TASK SET: A's cleared WRITE was written")

# 2. ABORT TASK SET is B's own
itt, ttt = waiting_write()
tmf(ABORT_TASK_SET)
data_out(itt, ttt, Y)
r = A.collect(1)
if itt not in r or r[itt][0] != GOOD:
    die("ABORT TASK SET from B touched A's WRITE: %r" % (r,))
tur(A)
if read_block() != Y:
    die("ABORT TASK SET: A's WRITE did not land")

# 3. LUN RESET: everyone's tasks, everyone told
itt, ttt = waiting_write()
tmf(LUN_RESET)
data_out(itt, ttt, Z)
tur(A, CHECK, 0x2903)
tur(B, CHECK, 0x2903)
tur(A)
tur(B)
if read_block() != Y:
    die("LUN RESET: A's WRITE was written")
A.logout()
B.logout()
print("CLEAR TASK SET and LUN RESET from B aborted A's waiting WRITE (told 2F/00, 29/03); ABORT TASK SET from B left it alone")
PY

PYTHONPATH=$_root/tests/integration python3 "$T/ts.py" "$ISCSI_PORT" "$IQN" >"$T/ts.out" 2>&1 ||
	fail "task sets: $(cat "$T/ts.out")"
log "$(cat "$T/ts.out")"
stop_node
check_log
log "ok"
