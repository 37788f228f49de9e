#!/usr/bin/env bash
# InitiatorNames are kept whole in the I_T nexus. Two sessions whose
# initiator port names differ only at their very end are two nexuses:
#  1. the longest legal name (223 bytes, RFC 7143 4.2.7.1), ISIDs differing
#     in the last hex digit: A's RESERVE(6) gives B RESERVATION CONFLICT;
#  2. 223-byte names differing in their last byte: likewise;
#  3. a name longer than 223 bytes (up to 255, what a text value may hold)
#     is refused at login with an initiator error (class 2), not cut.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3

export VOL_SIZE=16M
write_config_iscsi "$T/c.ini"
start_node

cat >"$T/names.py" <<'PY'
import sys
import iscsi_initiator as ini
from iscsi_initiator import Session, die

ini.NAME = "long-names"
port, iqn = int(sys.argv[1]), sys.argv[2]
GOOD, CONFLICT = 0x00, 0x18
READ10 = bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0])
RESERVE6, RELEASE6 = bytes([0x16, 0, 0, 0, 0, 0]), bytes([0x17, 0, 0, 0, 0, 0])

def name(length, last):
    base = "iqn.2026-12.test:"
    return base + "x" * (length - len(base) - 1) + last

def login(n, isid):
    s = Session(port, iqn, isid=isid, initiator=n)
    if s.login_status != (0, 0):
        die("login of a %d-byte name refused: %s" % (len(n), s.login_status))
    s.cmd(bytes(6))  # the power-on unit attention
    return s

def expect(s, who, cdb, status):
    st, _, sense, _ = s.cmd(cdb, 512 if cdb[0] == 0x28 else 0, read=cdb[0] == 0x28)
    if st != status:
        die("%s: status 0x%02x (sense %s), 0x%02x expected" % (who, st, sense.hex(), status))

def distinct(what, a, b):
    expect(a, what + ": A RESERVE(6)", RESERVE6, GOOD)
    expect(b, what + ": B READ while A holds the reservation", READ10, CONFLICT)
    expect(a, what + ": A RELEASE(6)", RELEASE6, GOOD)
    expect(b, what + ": B READ after the release", READ10, GOOD)
    print("%s: two I_T nexuses" % what)

n = name(223, "a")
assert len(n) == 223
distinct("223-byte name, ISIDs ...01 and ...02", login(n, 1), login(n, 2))
distinct("223-byte names differing in the last byte", login(n, 3), login(name(223, "b"), 3))
for length in (224, 255):
    s = Session(port, iqn, isid=4, initiator=name(length, "a"))
    if s.login_status[0] != 2:
        die("login with a %d-byte InitiatorName: status %s, class 2 expected"
            % (length, s.login_status))
    print("%d-byte InitiatorName: login refused (status %d/%d)" % ((length,) + s.login_status))
PY

PYTHONPATH=$_root/tests/integration python3 "$T/names.py" "$ISCSI_PORT" "$IQN" >"$T/out.txt" 2>&1 ||
	fail "$(cat "$T/out.txt")"
cat "$T/out.txt" >&2
stop_node
