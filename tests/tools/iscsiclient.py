"""Minimal iSCSI client for the test tools (failclient.py, checker.py): one
session through tests/integration/iscsi_initiator.py, and the block
requests of nbdclient.Conn: req(cmd, off, length, data) with cmd 0 READ(10),
1 WRITE(10), 3 SYNCHRONIZE CACHE(10), over whole 512-byte blocks. A unit
attention is answered by sending the command again on the same session."""
import os
import struct
import sys


class Conn:
    def __init__(self, host, port, iqn, timeout=30, initiator="iqn.2026-12.test:client",
                 connect_max=20, ua_retries=4):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "..", "integration"))
        import iscsi_initiator as ii
        self.ii = ii
        self.ua_retries = ua_retries
        ii.CONNECT_TIMEOUT = min(connect_max, timeout)
        try:
            # (the portals of the tests are on loopback: the host is not used)
            self.sess = ii.Session(port, iqn, initiator=initiator)
        except SystemExit:
            raise ConnectionError("login failed")
        if self.sess.login_status != (0, 0):
            raise ConnectionError("login refused")
        self.sess.s.settimeout(timeout)

    def close(self):
        try:
            self.sess.s.close()
        except Exception:
            pass

    def req(self, cmd, off, length, data=b""):
        if cmd == 3:
            cdb = struct.pack(">BBIBHB", 0x35, 0, 0, 0, 0, 0)
        else:
            cdb = struct.pack(">BBIBHB", 0x2a if cmd == 1 else 0x28, 0, off // 512, 0,
                              length // 512, 0)
        for _ in range(self.ua_retries):
            try:
                if cmd == 1:
                    st, _, sense, _ = self.sess.cmd(cdb, edtl=length, data=data)
                    rd = None
                elif cmd == 3:
                    st, _, sense, _ = self.sess.cmd(cdb, edtl=0)
                    rd = None
                else:
                    st, rd, sense, _ = self.sess.cmd(cdb, edtl=length, read=True)
            except SystemExit:
                raise ConnectionError("session failed")
            k = self.ii.sense_key(sense) if st else None
            if st == 0:
                return rd
            if k and k[0] == 6:
                continue  # unit attention: once more
            raise IOError("status 0x%02x sense %s" % (st, k))
        raise IOError("unit attentions without end")
