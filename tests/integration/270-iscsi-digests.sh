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
ISCSI_PORT=$(free_port)
write_config "$T/c.ini"
sed -i "s|^nbd = .*|&\niscsi = 127.0.0.1:$ISCSI_PORT|" "$CFG"
start_node

IQN=iqn.2026-11.org.tandem:it.vol0
URL="iscsi://127.0.0.1:$ISCSI_PORT/$IQN/0?header_digest=crc32c"
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
import socket, struct, sys

port, iqn = int(sys.argv[1]), sys.argv[2]

def die(msg):
    print("digest probe: " + msg, file=sys.stderr)
    sys.exit(1)

# CRC32C (Castagnoli, reflected 0x82F63B78), as RFC 7143 11.1 specifies it
TAB = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TAB.append(c)

def crc32c(b):
    c = 0xffffffff
    for x in b:
        c = TAB[(c ^ x) & 0xff] ^ (c >> 8)
    return c ^ 0xffffffff

assert crc32c(b"123456789") == 0xe3069283

def connect():
    return socket.create_connection(("127.0.0.1", port), timeout=10)

class Sess:
    def __init__(self, hd_list, dd_list, isid):
        self.s = connect()
        self.hd = self.dd = False
        keys = ["InitiatorName=iqn.2026-12.test:digests", "TargetName=" + iqn,
                "SessionType=Normal", "HeaderDigest=" + hd_list, "DataDigest=" + dd_list,
                "ImmediateData=Yes", "InitialR2T=Yes", "MaxRecvDataSegmentLength=65536"]
        bhs = bytearray(48)
        bhs[0] = 0x43
        bhs[1] = 0x80 | (1 << 2) | 3
        bhs[8:14] = bytes([0x80, 0, 0, 0x27, 0x0d, isid])
        struct.pack_into(">IHHII", bhs, 16, 1, 0, 0, 1, 0)
        self.send(bhs, ("\0".join(keys) + "\0").encode())
        op, h, d = self.recv()
        if op != 0x23:
            die("login: opcode 0x%02x" % op)
        self.login_status = (h[36], h[37])
        self.answer = dict(kv.split("=", 1) for kv in d.decode().split("\0") if "=" in kv)
        self.statsn = struct.unpack_from(">I", h, 24)[0] + 1
        self.cmdsn, self.itt = 1, 100
        # digests start with the first PDU after the final login response
        self.hd = self.answer.get("HeaderDigest") == "CRC32C"
        self.dd = self.answer.get("DataDigest") == "CRC32C"

    def exact(self, n):
        b = b""
        while len(b) < n:
            d = self.s.recv(n - len(b))
            if not d:
                raise EOFError
            b += d
        return b

    def recv(self):
        h = self.exact(48)
        if self.hd and struct.unpack("<I", self.exact(4))[0] != crc32c(h):
            die("header digest of a target PDU is wrong")
        dsl = int.from_bytes(h[5:8], "big")
        d = self.exact((dsl + 3) & ~3) if dsl else b""
        if dsl and self.dd and struct.unpack("<I", self.exact(4))[0] != crc32c(d):
            die("data digest of a target PDU is wrong")
        return h[0] & 0x3f, h, d[:dsl]

    def send(self, bhs, data=b"", bad_hd=False, bad_dd=False):
        bhs[5:8] = len(data).to_bytes(3, "big")
        out = bytes(bhs)
        if self.hd:
            out += struct.pack("<I", crc32c(bhs) ^ (1 if bad_hd else 0))
        if data:
            padded = data + b"\0" * (-len(data) % 4)
            out += padded
            if self.dd:
                out += struct.pack("<I", crc32c(padded) ^ (1 if bad_dd else 0))
        self.s.sendall(out)

    def cmd(self, cdb, edtl=0, read=False, data=b"", bad_dd=False, bad_hd=False):
        self.itt += 1
        bhs = bytearray(48)
        bhs[0] = 0x01
        bhs[1] = 0x80 | (0x40 if read else 0) | (0x20 if data else 0) | 1
        struct.pack_into(">IIII", bhs, 16, self.itt, edtl, self.cmdsn, self.statsn)
        bhs[32:32 + len(cdb)] = cdb
        self.cmdsn += 1
        self.send(bhs, data, bad_hd=bad_hd, bad_dd=bad_dd)
        buf, rejects = b"", []
        while True:
            op, h, d = self.recv()
            if op == 0x3f:  # Reject
                rejects.append(h[2])
                continue
            if op == 0x25:
                buf += d
                if h[1] & 0x01:
                    return h[3], buf, b"", rejects
                continue
            if op == 0x21:
                sense = d[2:2 + struct.unpack_from(">H", d, 0)[0]] if len(d) >= 2 else b""
                return h[3], buf, sense, rejects
            if op == 0x20:
                continue
            die("unexpected opcode 0x%02x" % op)

res = []
s = Sess("CRC32C,None", "CRC32C,None", 1)
if s.login_status != (0, 0) or not (s.hd and s.dd):
    die("login with both digests: status %s, answer %s" % (s.login_status, s.answer))
res.append("login: HeaderDigest=%s DataDigest=%s" % (s.answer["HeaderDigest"], s.answer["DataDigest"]))
lba = 2048
pattern = bytes((i * 7 + 3) & 0xff for i in range(4096))
w = bytes([0x2a, 0]) + struct.pack(">I", lba) + bytes([0, 0, 8, 0])
st, _, sense, rej = s.cmd(w, 4096, data=pattern)
if st != 0 or rej:
    die("WRITE 10 with digests: status 0x%02x rejects %s" % (st, rej))
r = bytes([0x28, 0]) + struct.pack(">I", lba) + bytes([0, 0, 8, 0])
st, data, _, _ = s.cmd(r, 4096, read=True)
if st != 0 or data != pattern:
    die("READ 10 with digests: status 0x%02x, %s" % (st, "same data" if data == pattern else "other data"))
res.append("WRITE 10 + READ 10 of 4 KiB: GOOD, data and digests right")
st, _, sense, rej = s.cmd(w, 4096, data=b"\xee" * 4096, bad_dd=True)
if rej != [0x02] or st != 0x02 or (sense[2] & 0x0f, sense[12], sense[13]) != (0x0b, 0x47, 0x05):
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
t = Sess("X-md5", "None", 2)
if t.login_status[0] != 2 and t.answer.get("HeaderDigest") != "Reject":
    die("HeaderDigest=X-md5: login status %s, answer %s" % (t.login_status, t.answer))
res.append("HeaderDigest=X-md5: login refused (status %d/%d)" % t.login_status)
print("; ".join(res))
PY
python3 "$T/dg.py" "$ISCSI_PORT" "$IQN" >"$T/dg.out" || fail "digest probe failed"
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
