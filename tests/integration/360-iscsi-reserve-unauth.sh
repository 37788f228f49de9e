#!/usr/bin/env bash
# A login that fails never touches the logical unit. With CHAP on the target,
# session A (CHAP passed) holds an SPC-2 reservation; then connections with
# A's initiator name and ISID (A's I_T nexus, were they logged in) fail
# their login: a wrong CHAP secret, no CHAP at all, and one that stops after
# the CHAP challenge. Each closes. A must still hold the reservation (its
# READ is GOOD) and B, another initiator, must still get RESERVATION
# CONFLICT. Once with RESERVE(6), once with RESERVE(10).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3

export VOL_SIZE=16M
write_config_iscsi "$T/c.ini" "auth = chap" "chap-user = alice" "chap-secret = alice-secret-12"
start_node

cat >"$T/unauth.py" <<'PY'
import struct, sys, time
import iscsi_initiator as ini
from iscsi_initiator import Session, die

ini.NAME = "reserve-unauth"
port, iqn = int(sys.argv[1]), sys.argv[2]
GOOD, CONFLICT = 0x00, 0x18
CHAP = ("alice", "alice-secret-12")
NAME_A, NAME_B = "iqn.2026-12.test:holder", "iqn.2026-12.test:other"
READ10 = bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0])

def login(name, isid):
    s = Session(port, iqn, isid=isid, initiator=name, chap=CHAP)
    if s.login_status != (0, 0):
        die("%s: CHAP login refused: %s" % (name, s.login_status))
    s.cmd(bytes(6))  # the power-on unit attention
    return s

def expect(s, who, cdb, status, edtl=0, read=False):
    st, _, sense, _ = s.cmd(cdb, edtl, read=read)
    if st != status:
        die("%s, CDB %s: status 0x%02x (sense %s), 0x%02x expected"
            % (who, cdb[:1].hex(), st, sense.hex(), status))

def failed_logins():
    """Connections with A's name and ISID whose login fails, then close."""
    bad = Session(port, iqn, isid=1, initiator=NAME_A, chap=("alice", "wrong-secret-12"))
    if bad.login_status != (2, 1):
        die("wrong CHAP secret: login status %s, (2, 1) expected" % (bad.login_status,))
    bad.s.close()
    skip = Session(port, iqn, isid=1, initiator=NAME_A)  # no security stage
    if skip.login_status != (2, 1):
        die("login without CHAP: status %s, (2, 1) expected" % (skip.login_status,))
    skip.s.close()
    # stops half way: after the challenge, then closes
    half = Session.__new__(Session)
    half.s = ini.socket.create_connection(("127.0.0.1", port), timeout=20)
    half.hd = half.dd = False
    half.isid, half.statsn = 1, 0
    half.login_pdu(0x81, {"InitiatorName": NAME_A, "TargetName": iqn,
                          "SessionType": "Normal", "AuthMethod": "CHAP"})
    half.login_pdu(0x81, {"CHAP_A": "5"})
    if "CHAP_C" not in half.answer:
        die("no CHAP challenge: %s" % half.answer)
    half.s.close()
    time.sleep(0.5)  # the target has seen the closes

a, b = login(NAME_A, 1), login(NAME_B, 2)
for reserve, release in ((bytes([0x16, 0, 0, 0, 0, 0]), bytes([0x17, 0, 0, 0, 0, 0])),
                         (bytes([0x56]) + bytes(9), bytes([0x57]) + bytes(9))):
    what = "RESERVE(%d)" % len(reserve)
    expect(a, "A " + what, reserve, GOOD)
    expect(b, "B before the failed logins", READ10, CONFLICT, 512, read=True)
    failed_logins()
    expect(a, "A after the failed logins", READ10, GOOD, 512, read=True)
    expect(b, "B after the failed logins (%s must still be held)" % what, READ10, CONFLICT,
           512, read=True)
    expect(a, "A RELEASE", release, GOOD)
    expect(b, "B after A's RELEASE", READ10, GOOD, 512, read=True)
    print("%s: held across 3 failed logins of the same I_T nexus" % what)
PY

PYTHONPATH=$_root/tests/integration python3 "$T/unauth.py" "$ISCSI_PORT" "$IQN" >"$T/out.txt" 2>&1 ||
	fail "$(cat "$T/out.txt")"
cat "$T/out.txt" >&2
grep -q "login of iqn.2026-12.test:holder refused" "$T/a.log" || fail "the failed logins were not logged"
stop_node
