#!/usr/bin/env bash
# CRC32C header and data digests (RFC 7143 11.1) on iSCSI sessions.
#  1. libiscsi with HeaderDigest=CRC32C (it has no data digests): qemu-img
#     copies an image onto the LUN and compares it back (qemu's iSCSI driver
#     with header-digest=crc32c; libiscsi's own tools always offer
#     "None,CRC32C", which agrees on None).
#  2. A raw initiator (below) negotiating both digests: WRITE 10 with immediate
#     data and READ 10 of it (every PDU the target sends is checked: header
#     and data digests); a WRITE whose data digest is wrong gets a Reject
#     (data digest error) and CHECK CONDITION ABORTED COMMAND 47/05 and
#     changes nothing, the session goes on; a PDU whose header digest is wrong
#     ends the connection; a session with digests refused at login (a list
#     without None or CRC32C) is answered Reject.
#  3. The log says which sessions run with digests; the node keeps serving.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need qemu-img python3

export VOL_SIZE=32M
write_config_iscsi "$T/c.ini"
start_node

OPTS="driver=iscsi,transport=tcp,portal=127.0.0.1:$ISCSI_PORT,target=$IQN,lun=0,header-digest=crc32c,initiator-name=iqn.2026-12.test:qemu"

# 1. header digests from libiscsi, through qemu (libiscsi's own tools always
# offer "None,CRC32C", which agrees on None)
head -c $((8 << 20)) /dev/urandom >"$T/img"
qemu-img convert -n -f raw --target-image-opts "$T/img" "$OPTS" 2>"$T/conv.err" ||
	fail "qemu-img convert with header digests: $(cat "$T/conv.err")"
qemu-img compare --image-opts "driver=file,filename=$T/img" "$OPTS" >"$T/cmp.out" 2>&1 ||
	fail "qemu-img compare with header digests: $(cat "$T/cmp.out")"
grep -q "iqn.2026-12.test:qemu logged in to target vol0, header digest CRC32C" "$T/a.log" ||
	fail "qemu's sessions did not use header digests"
log "qemu-img convert + compare of 8 MiB with header digests: $(tail -n 1 "$T/cmp.out")"

# 2. both digests, from a raw initiator
cat >"$T/dg.py" <<'PY'
import struct, sys
import iscsi_initiator as ini
from iscsi_initiator import Session, die, sense_key

ini.NAME = "digest probe"
port, iqn = int(sys.argv[1]), sys.argv[2]
both = ["InitiatorName=iqn.2026-12.test:digests", "HeaderDigest=CRC32C,None",
        "DataDigest=CRC32C,None", "MaxRecvDataSegmentLength=65536"]
res = []
s = Session(port, iqn, isid=1, keys=both)
if s.login_status != (0, 0) or not (s.hd and s.dd):
    die("login with both digests: status %s, answer %s" % (s.login_status, s.answer))
res.append("login: HeaderDigest=%s DataDigest=%s" % (s.answer["HeaderDigest"], s.answer["DataDigest"]))
lba = 2048
pattern = bytes((i * 7 + 3) & 0xff for i in range(4096))
w = bytes([0x2a, 0]) + struct.pack(">I", lba) + bytes([0, 0, 8, 0])
r = bytes([0x28, 0]) + struct.pack(">I", lba) + bytes([0, 0, 8, 0])
st, _, _, rej = s.cmd(w, 4096, data=pattern)
if st != 0 or rej:
    die("WRITE 10 with digests: status 0x%02x rejects %s" % (st, rej))
st, data, _, _ = s.cmd(r, 4096, read=True)
if st != 0 or data != pattern:
    die("READ 10 with digests: status 0x%02x, %s" % (st, "same data" if data == pattern else "other data"))
res.append("WRITE 10 + READ 10 of 4 KiB: GOOD, data and digests right")
st, _, sense, rej = s.cmd(w, 4096, data=b"\xee" * 4096, bad_dd=True)
if rej != [0x02] or st != 0x02 or sense_key(sense) != (0x0b, 0x47, 0x05):
    die("WRITE with a bad data digest: rejects %s status 0x%02x sense %s" % (rej, st, sense.hex()))
st, data, _, _ = s.cmd(r, 4096, read=True)
if st != 0 or data != pattern:
    die("the WRITE with a bad data digest changed the blocks")
res.append("bad data digest: Reject (reason 2) + ABORTED COMMAND 47/05, nothing written, session goes on")
try:
    s.cmd(bytes(6), bad_hd=True)
    die("a PDU with a bad header digest was answered")
except (EOFError, ConnectionResetError):
    res.append("bad header digest: connection closed")
t = Session(port, iqn, isid=2, keys=["InitiatorName=iqn.2026-12.test:digests", "HeaderDigest=X-md5"])
if t.login_status[0] != 2 and t.answer.get("HeaderDigest") != "Reject":
    die("HeaderDigest=X-md5: login status %s, answer %s" % (t.login_status, t.answer))
res.append("HeaderDigest=X-md5: login refused (status %d/%d)" % t.login_status)
print("; ".join(res))
PY
PYTHONPATH=$_root/tests/integration python3 "$T/dg.py" "$ISCSI_PORT" "$IQN" >"$T/dg.out" || fail "digest probe failed"
log "$(cat "$T/dg.out")"
grep -q 'iqn.2026-12.test:digests logged in to target vol0, header digest CRC32C, data digest CRC32C' "$T/a.log" ||
	fail "the log does not show the session with both digests"
grep -q 'data digest error' "$T/a.log" || fail "the data digest error is not logged"
grep -q 'header digest error' "$T/a.log" || fail "the header digest error is not logged"

# 3. still serving: the LUN is the image plus the probe's 4 KiB at LBA 2048
python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(2048 * 512); f.write(bytes((i * 7 + 3) & 0xff for i in range(4096)))' "$T/img"
qemu-img compare --image-opts "driver=file,filename=$T/img" "$OPTS" >"$T/cmp.out" 2>&1 ||
	fail "after the digest errors: $(cat "$T/cmp.out")"
stop_node
check_log
log "ok"
