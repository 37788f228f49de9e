"""A small raw iSCSI initiator for the integration tests: one session, login
straight to the full feature phase (operational stage only: no CHAP), SCSI
commands one at a time or pipelined, CRC32C header and data digests when
negotiated. It checks every PDU the target sends (digests, framing) and calls
die() on anything unexpected. libiscsi cannot do what these tests need: talk to
a port in standby, send corrupt digests or data, pipeline COMPARE AND WRITEs.
"""
import hashlib
import socket
import struct
import sys

# CRC32C (Castagnoli, reflected 0x82F63B78), as RFC 7143 11.1 specifies it
_TAB = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TAB.append(_c)


def crc32c(b):
    c = 0xffffffff
    for x in b:
        c = _TAB[(c ^ x) & 0xff] ^ (c >> 8)
    return c ^ 0xffffffff


assert crc32c(b"123456789") == 0xe3069283

NAME = "probe"


def die(msg):
    print("%s: %s" % (NAME, msg), file=sys.stderr)
    sys.exit(1)


CONNECT_TIMEOUT = 20  # seconds: connect and login (a caller may lower it)


def sense_key(sense):
    """(key, ASC, ASCQ) of fixed-format sense, or None."""
    if len(sense) < 14:
        return None
    return sense[2] & 0x0f, sense[12], sense[13]


class Session:
    def __init__(self, port, iqn, isid=1, initiator="iqn.2026-12.test:probe", keys=(),
                 chap=None):
        """keys: extra or replacing "Key=Value" strings for the login. chap:
        (user, secret) to pass a security stage with one-way CHAP (MD5) first;
        a refused login leaves login_status non-zero (the target closes)."""
        self.s = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT)
        self.hd = self.dd = False
        self.isid, self.statsn = isid, 0
        base = {"InitiatorName": initiator, "TargetName": iqn, "SessionType": "Normal",
                "HeaderDigest": "None", "DataDigest": "None", "ImmediateData": "Yes",
                "InitialR2T": "Yes", "MaxRecvDataSegmentLength": "262144"}
        for kv in keys:
            k, v = kv.split("=", 1)
            base[k] = v
        if chap:
            names = {k: base.pop(k) for k in ("InitiatorName", "TargetName", "SessionType")}
            names["AuthMethod"] = "CHAP"
            for step in ("method", "challenge", "response"):
                if step == "challenge":
                    names = {"CHAP_A": "5"}
                elif step == "response":
                    ident, chal = int(self.answer["CHAP_I"]), bytes.fromhex(self.answer["CHAP_C"][2:])
                    digest = hashlib.md5(bytes([ident]) + chap[1].encode() + chal).hexdigest()
                    names = {"CHAP_N": chap[0], "CHAP_R": "0x" + digest}
                h = self.login_pdu(0x80 | (0 << 2) | 1, names)  # T, CSG security, NSG operational
                if self.login_status != (0, 0):
                    return
            if (h[1] & 0x83) != 0x81:
                die("CHAP did not reach the operational stage (flags 0x%02x)" % h[1])
        h = self.login_pdu(0x80 | (1 << 2) | 3, base)  # T, CSG operational, NSG full feature
        if self.login_status == (0, 0) and (h[1] & 0x83) != 0x83:
            die("login did not reach the full feature phase (flags 0x%02x)" % h[1])
        self.statsn = struct.unpack_from(">I", h, 24)[0] + 1
        self.cmdsn, self.itt = 1, 100
        # digests start with the first PDU after the final login response
        self.hd = self.answer.get("HeaderDigest") == "CRC32C"
        self.dd = self.answer.get("DataDigest") == "CRC32C"

    def login_pdu(self, flags, keys):
        """One Login Request (immediate) with keys; the response's BHS. Sets
        login_status and answer (the response's keys)."""
        bhs = bytearray(48)
        bhs[0] = 0x43                      # immediate, login request
        bhs[1] = flags
        bhs[8:14] = bytes([0x80, 0, 0, 0x25, 0x0b, self.isid])
        struct.pack_into(">IHHII", bhs, 16, 1, 0, 0, 1, self.statsn)
        text = "".join("%s=%s\0" % kv for kv in keys.items())
        self.send(bhs, text.encode())
        op, h, d = self.recv()
        if op != 0x23:
            die("login: opcode 0x%02x in answer" % op)
        self.login_status = (h[36], h[37])
        self.answer = dict(kv.split("=", 1) for kv in d.decode().split("\0") if "=" in kv)
        self.statsn = struct.unpack_from(">I", h, 24)[0] + 1
        return h

    def exact(self, n):
        b = b""
        while len(b) < n:
            d = self.s.recv(n - len(b))
            if not d:
                raise EOFError("connection closed by the target")
            b += d
        return b

    def recv(self):
        h = self.exact(48)
        if self.hd and struct.unpack("<I", self.exact(4))[0] != crc32c(h):
            die("header digest of a target PDU is wrong")
        ahs = h[4] * 4
        self.exact(ahs)
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

    def submit(self, cdb, edtl=0, read=False, data=b"", bad_hd=False, bad_dd=False):
        """Sends one SCSI command (immediate data: all of data); returns its ITT."""
        self.itt += 1
        bhs = bytearray(48)
        bhs[0] = 0x01
        bhs[1] = 0x80 | (0x40 if read else 0) | (0x20 if data else 0) | 1  # F, R, W, simple
        struct.pack_into(">IIII", bhs, 16, self.itt, edtl, self.cmdsn, self.statsn)
        bhs[32:32 + len(cdb)] = cdb
        self.cmdsn += 1
        self.send(bhs, data, bad_hd=bad_hd, bad_dd=bad_dd)
        return self.itt

    def collect(self, n):
        """The next n answers: {itt: (status, data, sense, rejects)}. NOP-In pings
        are answered; Reject reasons are kept for the next answer."""
        out, bufs, rejects = {}, {}, []
        while len(out) < n:
            op, h, d = self.recv()
            itt = struct.unpack_from(">I", h, 16)[0]
            if op == 0x20:  # NOP-In: answer a ping of the target
                ttt = struct.unpack_from(">I", h, 20)[0]
                if ttt != 0xffffffff:
                    p = bytearray(48)
                    p[0] = 0x40
                    p[1] = 0x80
                    struct.pack_into(">IIII", p, 16, 0xffffffff, ttt, self.cmdsn, self.statsn)
                    self.send(p)
                continue
            if op == 0x3f:  # Reject
                rejects.append(h[2])
                continue
            if op == 0x31:
                die("unexpected R2T")
            if op == 0x25:  # Data-In, possibly with status
                if struct.unpack_from(">I", h, 40)[0] != len(bufs.get(itt, b"")):
                    die("Data-In out of order")
                bufs[itt] = bufs.get(itt, b"") + d
                if h[1] & 0x01:
                    self.statsn = struct.unpack_from(">I", h, 24)[0] + 1
                    out[itt] = (h[3], bufs.pop(itt), b"", rejects)
                    rejects = []
                continue
            if op == 0x21:  # SCSI Response
                if h[2]:
                    die("iSCSI response 0x%02x" % h[2])
                self.statsn = struct.unpack_from(">I", h, 24)[0] + 1
                sense = d[2:2 + struct.unpack_from(">H", d, 0)[0]] if len(d) >= 2 else b""
                out[itt] = (h[3], bufs.pop(itt, b""), sense, rejects)
                rejects = []
                continue
            die("unexpected opcode 0x%02x" % op)
        return out

    def cmd(self, cdb, edtl=0, read=False, data=b"", bad_hd=False, bad_dd=False):
        """One command, waited for: (status, data, sense, rejects)."""
        itt = self.submit(cdb, edtl, read, data, bad_hd, bad_dd)
        r = self.collect(1)
        if itt not in r:
            die("answer for another task tag")
        return r[itt]

    def tmf(self, function, rtt=0xffffffff):
        """A task management function request (immediate), waited for: its
        response code. Answers to other tasks arriving first call die()."""
        self.itt += 1
        bhs = bytearray(48)
        bhs[0] = 0x42                      # immediate, task management request
        bhs[1] = 0x80 | function
        struct.pack_into(">IIII", bhs, 16, self.itt, rtt, self.cmdsn, self.statsn)
        self.send(bhs)
        op, h, _ = self.recv()
        if op != 0x22 or struct.unpack_from(">I", h, 16)[0] != self.itt:
            die("TMF 0x%02x: opcode 0x%02x in answer" % (function, op))
        self.statsn = struct.unpack_from(">I", h, 24)[0] + 1
        return h[2]

    def logout(self):
        bhs = bytearray(48)
        bhs[0] = 0x46
        bhs[1] = 0x80
        struct.pack_into(">IIII", bhs, 16, 1, 0, self.cmdsn, self.statsn)
        self.send(bhs)
        op, h, _ = self.recv()
        if op != 0x26 or h[2]:
            die("logout: opcode 0x%02x response %d" % (op, h[2]))
