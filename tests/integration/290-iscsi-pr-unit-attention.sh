#!/usr/bin/env bash
# Persistent reservations tell the other initiators what happened to them
# (SPC-4 5.13.11), and PREEMPT AND ABORT fences the preempted one. Three
# sessions A, B, C register; A reserves WRITE EXCLUSIVE and writes X into a
# block, then starts a second WRITE of that block whose data waits for an R2T.
#  1. B sends PREEMPT AND ABORT naming A's key: GOOD. A's waiting WRITE is
#     aborted: the Y data A sends for it afterwards is dropped, no answer ever
#     comes for it, and the block still holds X.
#  2. A's next command gets UNIT ATTENTION, REGISTRATIONS PREEMPTED (2A/05),
#     once; its WRITEs now get RESERVATION CONFLICT. C, untouched, gets nothing.
#  3. B preempts itself into WRITE EXCLUSIVE - REGISTRANTS ONLY (a type change):
#     C gets RESERVATIONS RELEASED (2A/04); A, unregistered, nothing.
#  4. B releases the registrants-only reservation: C gets 2A/04 again; B,
#     who sent it, nothing.
#  5. C sends CLEAR: B gets RESERVATIONS PREEMPTED (2A/03).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3

export VOL_SIZE=16M
write_config_iscsi "$T/c.ini"
start_node

cat >"$T/pr.py" <<'PY'
import struct, sys
import iscsi_initiator as ini
from iscsi_initiator import Session, die, sense_key

ini.NAME = "pr probe"
port, iqn = int(sys.argv[1]), sys.argv[2]
BLK, LBA = 512, 5
GOOD, CHECK, CONFLICT = 0x00, 0x02, 0x18
WE, WERO = 0x1, 0x5

def session(tag, isid):
    return Session(port, iqn, isid=isid, initiator="iqn.2026-12.test:pr-" + tag,
                   keys=["ImmediateData=Yes", "InitialR2T=Yes"])

A, B, C = session("a", 1), session("b", 2), session("c", 3)
NAMES = {id(A): "A", id(B): "B", id(C): "C"}

def expect(s, what, got, status, ua=None):
    st, _, sense, _ = got
    if st != status:
        die("%s, %s: status 0x%02x (sense %s), 0x%02x expected"
            % (NAMES[id(s)], what, st, sense.hex(), status))
    if ua is not None and sense_key(sense) != (0x06, ua >> 8, ua & 0xff):
        die("%s, %s: sense %s, UNIT ATTENTION %04x expected" % (NAMES[id(s)], what, sense.hex(), ua))

def prout(s, sa, typ, key, sark=0):
    cdb = bytes([0x5f, sa, typ, 0, 0]) + struct.pack(">I", 24) + bytes([0])
    param = struct.pack(">QQ", key, sark) + bytes(8)
    expect(s, "PROUT 0x%x" % sa, s.cmd(cdb, 24, data=param), GOOD)

def tur(s, status=GOOD, ua=None):
    expect(s, "TEST UNIT READY", s.cmd(bytes(6)), status, ua)

def write_cdb():
    return bytes([0x2a, 0]) + struct.pack(">I", LBA) + bytes([0, 0, 1, 0])

def read_block(s):
    st, data, _, _ = s.cmd(bytes([0x28, 0]) + struct.pack(">I", LBA) + bytes([0, 0, 1, 0]), BLK, read=True)
    if st != GOOD:
        die("READ: status 0x%02x" % st)
    return data

X, Y = b"X" * BLK, b"Y" * BLK
for s, k in ((A, 0xa), (B, 0xb), (C, 0xc)):
    prout(s, 0x06, 0, 0, k)              # REGISTER AND IGNORE EXISTING KEY
prout(A, 0x01, WE, 0xa)                  # RESERVE, WRITE EXCLUSIVE
expect(A, "WRITE X", A.cmd(write_cdb(), BLK, data=X), GOOD)

# a WRITE of A that waits for its data (InitialR2T=Yes, no immediate data)
itt = A.submit(write_cdb(), BLK)
op, h, _ = A.recv()
if op != 0x31:
    die("A: opcode 0x%02x where the R2T for its WRITE was expected" % op)
ttt = struct.unpack_from(">I", h, 20)[0]

# 1. B: PREEMPT AND ABORT of A's key; then A sends the data for its WRITE
prout(B, 0x05, WE, 0xb, 0xa)
dout = bytearray(48)
dout[0], dout[1] = 0x05, 0x80            # Data-Out, F
struct.pack_into(">IIIII", dout, 16, itt, ttt, 0, A.statsn, 0)
struct.pack_into(">I", dout, 40, 0)
A.send(dout, Y)

# 2. A: the unit attention once (any answer to the aborted WRITE would come
# first and make cmd() fail), then the reservation rules
tur(A, CHECK, 0x2a05)
tur(A)
expect(A, "WRITE after the preempt", A.cmd(write_cdb(), BLK, data=Y), CONFLICT)
if read_block(B) != X:
    die("the block does not hold X: the aborted WRITE (or a refused one) was written")
tur(C)
tur(B)

# 3. a type change by PREEMPT: the other registrant is told
prout(B, 0x04, WERO, 0xb, 0xb)
tur(C, CHECK, 0x2a04)
tur(C)
tur(A)

# 4. RELEASE of a registrants-only reservation
prout(B, 0x02, WERO, 0xb)
tur(C, CHECK, 0x2a04)
tur(B)

# 5. CLEAR
prout(C, 0x03, 0, 0xc)
tur(B, CHECK, 0x2a03)
tur(B)
tur(C)
tur(A)
for s in (A, B, C):
    s.logout()
print("PREEMPT AND ABORT aborted the waiting WRITE and told A (2A/05); a type change and a RELEASE told C (2A/04); CLEAR told B (2A/03); nobody else was told anything")
PY

PYTHONPATH=$_root/tests/integration python3 "$T/pr.py" "$ISCSI_PORT" "$IQN" >"$T/pr.out" 2>&1 ||
	fail "reservation unit attentions: $(cat "$T/pr.out")"
log "$(cat "$T/pr.out")"
stop_node
check_log
log "ok"
