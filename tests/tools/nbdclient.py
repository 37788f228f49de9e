"""Minimal NBD client for the integration tests: fixed newstyle handshake,
NBD_OPT_GO for one export, nothing else (the tests speak the transmission
phase themselves, to control exactly what is in flight)."""
import socket
import struct


def recvall(s, n):
    b = bytearray()
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise ConnectionError("connection closed by the server")
        b += x
    return bytes(b)


def connect(host, port, name=b"vol0", timeout=120):
    """Returns (socket, export size or None) once NBD_OPT_GO is acknowledged."""
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    magic, opt, hflags = struct.unpack(">QQH", recvall(s, 18))
    assert magic == 0x4e42444d41474943 and opt == 0x49484156454f5054, "not an NBD server"
    s.sendall(struct.pack(">I", 3))                  # FIXED_NEWSTYLE | NO_ZEROES
    data = struct.pack(">I", len(name)) + name + struct.pack(">HH", 1, 3)  # want BLOCK_SIZE
    s.sendall(struct.pack(">QII", 0x49484156454f5054, 7, len(data)) + data)  # OPT_GO
    size = None
    while True:
        rmagic, ropt, rtype, rlen = struct.unpack(">QIII", recvall(s, 20))
        body = recvall(s, rlen)
        assert rmagic == 0x3e889045565a9, "bad option reply magic"
        if rtype == 1:                               # ACK
            return s, size
        if rtype & 0x80000000:
            raise ConnectionError("NBD_OPT_GO refused: type %x %r" % (rtype, body[4:]))
        if rtype == 3 and struct.unpack(">H", body[:2])[0] == 0:
            size = struct.unpack(">Q", body[2:10])[0]


class Conn:
    """One export, one request at a time: req(cmd, off, length, data)."""

    def __init__(self, host, port, timeout=30):
        self.s, _ = connect(host, port, timeout=min(2, timeout))
        self.s.settimeout(timeout)
        self.h = 0

    def req(self, cmd, off, length, data=b""):
        self.h += 1
        self.s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, cmd, self.h, off, length) + data)
        magic, err, rh = struct.unpack(">IIQ", recvall(self.s, 16))
        if magic != 0x67446698 or rh != self.h:
            raise ConnectionError("bad reply")
        if err:
            raise IOError("NBD error %d" % err)
        return recvall(self.s, length) if cmd == 0 else None
