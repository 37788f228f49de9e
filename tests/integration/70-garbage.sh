#!/usr/bin/env bash
# Hostile and broken NBD clients, written inline in python: garbage and
# truncated handshakes, bad magics, oversized options and payloads, requests
# out of range, unknown commands, clients that vanish mid-payload, and 50
# stuck connections at once. After each one the daemon must still run and
# serve fresh clients; errors that the protocol answers must get exactly the
# right error and leave the connection usable.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3 nbdinfo nbdcopy cmp

export VOL_SIZE=32M
SIZE=$((32 * 1024 * 1024))
write_config "$T/c.ini"
start_node

cat >"$T/nbdc.py" <<'EOF'
import os, socket, struct, sys, time

PORT, SIZE, CASE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
T = os.environ["T"]
NBDMAGIC, IHAVEOPT, REPMAGIC = 0x4E42444D41474943, 0x49484156454F5054, 0x0003E889045565A9
REQ, SIMPLE = 0x25609513, 0x67446698
OPT_LIST, OPT_GO = 3, 7
REP_ACK, REP_ERR = 1, 0x80000000
ERR_UNSUP, ERR_INVALID = 0x80000001, 0x80000003
OPT_EXPORT_NAME, OPT_ABORT, OPT_STARTTLS, OPT_INFO = 1, 2, 5, 6
OPT_STRUCTURED, OPT_LIST_META, OPT_SET_META = 8, 9, 10
ERR_POLICY, ERR_UNKNOWN = 0x80000002, 0x80000006
READ, WRITE, DISC, FLUSH, TRIM, CACHE, ZERO, BLOCK_STATUS = 0, 1, 2, 3, 4, 5, 6, 7
STRUCT = 0x668E33EF
MIN_BLOCK = 1
EINVAL, ENOSPC, EOVERFLOW = 22, 28, 75


def die(msg):
    print("case %s: %s" % (CASE, msg), file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        die(msg)


def connect():
    return socket.create_connection(("127.0.0.1", PORT), timeout=20)


def recvn(s, n):
    b = bytearray()
    while len(b) < n:
        k = s.recv(min(n - len(b), 1 << 20))
        if not k:
            die("server closed the connection (got %d of %d bytes)" % (len(b), n))
        b += k
    return bytes(b)


def send_quietly(s, data):
    """For garbage the server may rightly close on before reading it all."""
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def expect_close(s, after):
    s.settimeout(20)
    try:
        while s.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except socket.timeout:
        die("server kept the connection open after %s" % after)
    s.close()


def greeting(s):
    m, o, f = struct.unpack(">QQH", recvn(s, 18))
    check(m == NBDMAGIC and o == IHAVEOPT, "bad greeting %x %x" % (m, o))
    check(f & 1, "server is not fixed newstyle")


def opt(s, o, data=b"", length=None):
    s.sendall(struct.pack(">QII", IHAVEOPT, o, len(data) if length is None else length) + data)


def opt_reply(s, want_opt):
    m, o, t, l = struct.unpack(">QIII", recvn(s, 20))
    check(m == REPMAGIC and o == want_opt, "bad option reply magic %x / option %d" % (m, o))
    return t, recvn(s, l)


def handshake(s):
    greeting(s)
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES


def go(s, name=b"vol0", o=OPT_GO):
    """Returns the export's minimum block size (1 if not announced)."""
    global MIN_BLOCK
    opt(s, o, struct.pack(">I", len(name)) + name + struct.pack(">H", 1) + struct.pack(">H", 3))
    minb = 1
    while True:
        t, d = opt_reply(s, o)
        if t == REP_ACK:
            MIN_BLOCK = minb
            return minb
        check(not t & REP_ERR, "GO refused: %x %r" % (t, d))
        if t == 3 and len(d) == 14 and struct.unpack(">H", d[:2])[0] == 3:
            minb = struct.unpack(">I", d[2:6])[0]


def open_xmit():
    s = connect()
    handshake(s)
    go(s)
    return s


def req(s, typ, off, length, cookie, flags=0, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ, flags, typ, cookie, off, length) + payload)


def reply(s, cookie, rlen=0):
    m, e, c = struct.unpack(">IIQ", recvn(s, 16))
    check(m == SIMPLE, "bad reply magic %x" % m)
    check(c == cookie, "reply cookie %d, expected %d" % (c, cookie))
    return e, (recvn(s, rlen) if e == 0 and rlen else b"")


def expect_err(s, typ, off, length, cookie, want, flags=0, payload=b"", what=""):
    req(s, typ, off, length, cookie, flags, payload)
    e, _ = reply(s, cookie)
    if want is None:
        check(e != 0, "%s: succeeded, expected an error" % what)
    else:
        check(e == want, "%s: error %d, expected %d" % (what, e, want))


def good_read(s, off, cookie, length=4096):
    req(s, READ, off, length, cookie)
    e, d = reply(s, cookie, length)
    check(e == 0, "valid READ at %d after the error failed: %d" % (off, e))
    return d


def good_write(s, off, data, cookie):
    req(s, WRITE, off, len(data), cookie, payload=data)
    e, _ = reply(s, cookie)
    check(e == 0, "valid WRITE at %d failed: %d" % (off, e))


if CASE == "random":
    # Garbage instead of client flags, both before and after reading the greeting.
    s = connect()
    send_quietly(s, os.urandom(65536))
    s.close()
    s = connect()
    greeting(s)
    send_quietly(s, b"\xff\xff\xff\xff" + os.urandom(4096))
    expect_close(s, "unknown client flags")

elif CASE == "truncated":
    for cut in (b"\x00\x00", struct.pack(">I", 3) + struct.pack(">Q", IHAVEOPT)[:5]):
        s = connect()
        greeting(s)
        s.sendall(cut)
        s.close()
    s = connect()  # and one that says nothing at all
    s.close()

elif CASE == "optmagic":
    s = connect()
    handshake(s)
    s.sendall(struct.pack(">QII", IHAVEOPT ^ 1, OPT_GO, 0))
    expect_close(s, "a bad option magic")

elif CASE == "optlen":
    # Over the 64 KiB limit: closed without reading the data.
    s = connect()
    handshake(s)
    opt(s, OPT_GO, b"", length=64 * 1024 + 1)
    send_quietly(s, b"\0" * 4096)
    expect_close(s, "an option of 64 KiB + 1")
    s = connect()
    handshake(s)
    opt(s, OPT_GO, b"", length=0xFFFFFFFF)
    expect_close(s, "an option of 4 GiB - 1")
    # At the limit: read in full, answered with an error, connection usable.
    s = connect()
    handshake(s)
    opt(s, OPT_GO, b"\0" * (64 * 1024))
    t, _ = opt_reply(s, OPT_GO)
    check(t == ERR_INVALID, "malformed 64 KiB GO got reply %x, expected ERR_INVALID" % t)
    opt(s, 99)
    t, _ = opt_reply(s, 99)
    check(t == ERR_UNSUP, "unknown option got %x, expected ERR_UNSUP" % t)
    opt(s, OPT_LIST, b"x")
    t, _ = opt_reply(s, OPT_LIST)
    check(t == ERR_INVALID, "LIST with data got %x, expected ERR_INVALID" % t)
    go(s)
    good_read(s, 0, 1)
    s.close()

elif CASE == "reqmagic":
    s = open_xmit()
    good_read(s, 0, 1)
    s.sendall(struct.pack(">IHHQQI", 0xDEADBEEF, 0, READ, 2, 0, 4096))
    expect_close(s, "a request with a bad magic")

elif CASE == "readrange":
    s = open_xmit()
    expect_err(s, READ, SIZE, 4096, 1, EINVAL, what="READ at the end")
    expect_err(s, READ, SIZE - 512, 4096, 2, EINVAL, what="READ across the end")
    expect_err(s, READ, (1 << 64) - 512, 1024, 3, EINVAL, what="READ at 2^64-512 (wraps)")
    d = good_read(s, SIZE - 4096, 4)
    check(len(d) == 4096, "short read")
    good_read(s, 0, 5)
    s.close()

elif CASE == "bigwrite":
    # 64 MiB > the 32 MiB maximum: the server must drain the payload, answer
    # with an error, keep the stream framed, and not have written anything.
    s = open_xmit()
    good_write(s, 0, b"\x11" * 4096, 1)
    req(s, WRITE, 0, 64 << 20, 2, payload=b"\x5a" * (64 << 20))
    e, _ = reply(s, 2)
    check(e in (EOVERFLOW, EINVAL), "64 MiB WRITE got error %d, expected EOVERFLOW or EINVAL" % e)
    d = good_read(s, 0, 3)
    check(d == b"\x11" * 4096, "the rejected 64 MiB WRITE changed the data")
    # Exactly the maximum is fine.
    good_write(s, 0, b"\x22" * (32 << 20), 4)
    check(good_read(s, (32 << 20) - 4096, 5) == b"\x22" * 4096, "32 MiB WRITE not read back")
    s.close()

elif CASE == "writerange":
    s = open_xmit()
    good_write(s, SIZE - 4096, b"\x33" * 4096, 1)
    expect_err(s, WRITE, SIZE - 4096, 8192, 2, ENOSPC, payload=b"\x44" * 8192,
               what="WRITE across the end")
    expect_err(s, WRITE, SIZE, 512, 3, ENOSPC, payload=b"\x44" * 512, what="WRITE at the end")
    expect_err(s, TRIM, SIZE - 4096, 8192, 6, ENOSPC, what="TRIM across the end")
    expect_err(s, ZERO, SIZE - 4096, 8192, 7, ENOSPC, what="WRITE_ZEROES across the end")
    check(good_read(s, SIZE - 4096, 4) == b"\x33" * 4096, "rejected WRITE changed the last block")
    good_write(s, 4096, b"\x55" * 4096, 5)
    s.close()

elif CASE == "badcmd":
    s = open_xmit()
    expect_err(s, 99, 0, 0, 1, EINVAL, what="command type 99")
    good_read(s, 0, 2)
    expect_err(s, 99, 0, 4096, 3, EINVAL, what="command type 99 with a length")
    expect_err(s, READ, 0, 4096, 4, EINVAL, flags=1 << 15, what="READ with an unknown flag")
    expect_err(s, READ, 0, 0, 5, EINVAL, what="READ of length 0")
    expect_err(s, FLUSH, 4096, 0, 6, EINVAL, what="FLUSH with an offset")
    expect_err(s, CACHE, SIZE, 4096, 8, EINVAL, what="CACHE past the end")
    expect_err(s, BLOCK_STATUS, 0, 4096, 9, EINVAL, what="BLOCK_STATUS without structured replies")
    expect_err(s, ZERO, 0, 0, 10, EINVAL, what="WRITE_ZEROES of length 0")
    good_read(s, 0, 7)
    s.close()

elif CASE == "vanish":
    # Gone in the middle of a WRITE payload, and right after a WRITE header.
    s = open_xmit()
    req(s, WRITE, 0, 1 << 20, 1, payload=b"\x66" * (100 * 1024))
    s.close()
    s = open_xmit()
    req(s, WRITE, 1 << 20, 1 << 20, 1)
    s.close()
    # Gone with replies still owed.
    s = open_xmit()
    for i in range(32):
        req(s, READ, i * 65536, 65536, i)
    s.close()

elif CASE == "halfclose":
    # Requests, then FIN: every request sent before the FIN is still answered
    # (with its data) before the server closes.
    s = open_xmit()
    for i in range(8):
        req(s, READ, i << 20, 1 << 20, i)
    s.shutdown(socket.SHUT_WR)
    got = set()
    for _ in range(8):
        m, e, c = struct.unpack(">IIQ", recvn(s, 16))
        check(m == SIMPLE and e == 0, "reply after FIN: magic %x error %d" % (m, e))
        recvn(s, 1 << 20)
        got.add(c)
    check(got == set(range(8)), "cookies answered after FIN: %r" % sorted(got))
    check(s.recv(1) == b"", "server did not close after answering")
    s.close()

elif CASE == "resetflood":
    # A client that never reads 100 replies of 1 MiB and then resets: the
    # server pauses it (backpressure), then frees it without touching freed
    # memory (the ASan build checks).
    s = open_xmit()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    for i in range(100):
        req(s, READ, (i % 32) << 20, 1 << 20, i)
    time.sleep(0.3)
    s.close()
    time.sleep(0.2)

elif CASE == "pipeline":
    # 64 requests in one burst, good and bad mixed: each cookie answered once.
    s = open_xmit()
    burst, want = b"", {}
    for i in range(64):
        if i % 4 == 3:
            burst += struct.pack(">IHHQQI", REQ, 0, READ, 1000 + i, SIZE, 4096)
            want[1000 + i] = EINVAL
        else:
            burst += struct.pack(">IHHQQI", REQ, 0, READ, 1000 + i, i * 4096, 4096)
            want[1000 + i] = 0
    s.sendall(burst)
    for _ in range(64):
        m, e, c = struct.unpack(">IIQ", recvn(s, 16))
        check(m == SIMPLE and c in want, "unexpected reply magic %x cookie %d" % (m, c))
        check(e == want.pop(c), "cookie %d: error %d" % (c, e))
        if e == 0:
            recvn(s, 4096)
    # DISC after a WRITE: the WRITE is answered, then the server closes.
    req(s, WRITE, 8192, 4096, 7, payload=b"\x77" * 4096)
    req(s, DISC, 0, 0, 8)
    e, _ = reply(s, 7)
    check(e == 0, "WRITE before DISC failed: %d" % e)
    expect_close(s, "NBD_CMD_DISC")

elif CASE == "options":
    # Option-phase requests the server must answer, not choke on.
    s = connect()
    handshake(s)
    opt(s, OPT_STARTTLS)
    t, _ = opt_reply(s, OPT_STARTTLS)
    check(t == ERR_POLICY, "STARTTLS got %x, expected ERR_POLICY" % t)
    opt(s, OPT_LIST_META, struct.pack(">I", 4) + b"vol0" + struct.pack(">I", 0))
    t, _ = opt_reply(s, OPT_LIST_META)
    check(t & REP_ERR, "LIST_META_CONTEXT before STRUCTURED_REPLY succeeded")
    opt(s, OPT_INFO, struct.pack(">I", 4) + b"nope" + struct.pack(">H", 0))
    t, _ = opt_reply(s, OPT_INFO)
    check(t == ERR_UNKNOWN, "INFO for an unknown export got %x" % t)
    opt(s, OPT_GO, struct.pack(">I", 100) + b"vol0")  # name length lies
    t, _ = opt_reply(s, OPT_GO)
    check(t == ERR_INVALID, "GO with a lying name length got %x" % t)
    go(s, o=OPT_INFO)  # INFO then GO on the same connection
    go(s)
    good_read(s, 0, 1)
    s.close()
    s = connect()
    handshake(s)
    opt(s, OPT_ABORT)
    t, _ = opt_reply(s, OPT_ABORT)
    check(t == REP_ACK, "ABORT got %x" % t)
    expect_close(s, "NBD_OPT_ABORT")

elif CASE == "exportname":
    # The old NBD_OPT_EXPORT_NAME, with and without NO_ZEROES; unknown names close.
    for flags, n in ((3, 10), (1, 134)):
        s = connect()
        greeting(s)
        s.sendall(struct.pack(">I", flags))
        opt(s, OPT_EXPORT_NAME, b"vol0")
        d = recvn(s, n)
        size, tf = struct.unpack(">QH", d[:10])
        check(size == SIZE and tf & 1, "EXPORT_NAME: size %d flags %x" % (size, tf))
        check(d[10:] == b"\0" * (n - 10), "EXPORT_NAME: padding is not zeros")
        good_read(s, 0, 1, 512)
        s.close()
    s = connect()
    handshake(s)
    opt(s, OPT_EXPORT_NAME, b"nope")
    expect_close(s, "EXPORT_NAME of an unknown export")

elif CASE == "structured":
    # With structured replies, errors come as an ERROR chunk; block status works.
    s = connect()
    handshake(s)
    opt(s, OPT_STRUCTURED)
    t, _ = opt_reply(s, OPT_STRUCTURED)
    check(t == REP_ACK, "STRUCTURED_REPLY got %x" % t)
    q = b"base:allocation"
    opt(s, OPT_SET_META, struct.pack(">I", 4) + b"vol0" + struct.pack(">I", 1) +
        struct.pack(">I", len(q)) + q)
    ctx = None
    while True:
        t, d = opt_reply(s, OPT_SET_META)
        if t == REP_ACK:
            break
        check(t == 4 and d[4:] == q, "SET_META_CONTEXT reply %x %r" % (t, d))
        ctx = struct.unpack(">I", d[:4])[0]
    check(ctx is not None, "base:allocation was not selected")
    go(s)

    def chunks(cookie):
        out = []
        while True:
            m, fl, ty, c, ln = struct.unpack(">IHHQI", recvn(s, 20))
            check(m == STRUCT and c == cookie, "bad structured reply %x cookie %d" % (m, c))
            out.append((ty, recvn(s, ln)))
            if fl & 1:
                return out

    good_write(s, 0, b"\x99" * 8192, 1)
    req(s, READ, 0, 8192, 2)
    data = bytearray(8192)
    for ty, d in chunks(2):
        check(ty in (1, 2), "READ chunk type %d" % ty)
        off = struct.unpack(">Q", d[:8])[0]
        if ty == 1:
            data[off:off + len(d) - 8] = d[8:]
    check(bytes(data) == b"\x99" * 8192, "structured READ returned wrong data")
    for cookie, off, ln in ((3, SIZE, 4096), (4, SIZE - 512, 4096)):
        req(s, READ, off, ln, cookie)
        c = chunks(cookie)
        check(len(c) == 1 and c[0][0] == 0x8001, "READ out of range: chunks %r" % c)
        check(struct.unpack(">I", c[0][1][:4])[0] == EINVAL, "READ out of range: not EINVAL")
    req(s, BLOCK_STATUS, 0, SIZE, 5)
    c = chunks(5)
    check(c[0][0] == 5 and struct.unpack(">I", c[0][1][:4])[0] == ctx, "BLOCK_STATUS %r" % c[:1])
    ext = c[0][1][4:]
    first_len, first_fl = struct.unpack(">II", ext[:8])
    check(first_len >= 8192 and first_fl == 0, "first extent %d/%x is not data" % (first_len, first_fl))
    req(s, BLOCK_STATUS, SIZE, 4096, 6)
    c = chunks(6)
    check(c[0][0] == 0x8001, "BLOCK_STATUS past the end was not an error")
    s.close()

elif CASE == "unaligned":
    # Below the announced minimum block: rejected (and a WRITE's payload drained).
    s = open_xmit()
    if MIN_BLOCK > 1:
        expect_err(s, READ, 100, 512, 1, EINVAL, what="READ at offset 100")
        expect_err(s, WRITE, 512, 100, 2, EINVAL, payload=b"\xaa" * 100, what="WRITE of 100 bytes")
        expect_err(s, ZERO, 0, 100, 3, EINVAL, what="WRITE_ZEROES of 100 bytes")
    good_read(s, 0, 4)
    s.close()

elif CASE == "slots":
    # 300 READs in one burst (beyond the per-connection request limit), then
    # 6 x 32 MiB READs and WRITEs at once (beyond the buffer limit): the server
    # must pause and resume reading, and answer every one of them.
    import threading
    s = open_xmit()
    burst = b"".join(struct.pack(">IHHQQI", REQ, 0, READ, i, (i * 4096) % SIZE, 4096)
                     for i in range(300))
    s.sendall(burst)
    seen = set()
    for _ in range(300):
        m, e, c = struct.unpack(">IIQ", recvn(s, 16))
        check(m == SIMPLE and e == 0 and c not in seen, "burst reply %x %d %d" % (m, e, c))
        seen.add(c)
        recvn(s, 4096)
    big = 32 << 20
    good_write(s, 0, b"\xbb" * big, 1000)

    def sender():
        for i in range(6):
            req(s, WRITE, 0, big, 2000 + i, payload=bytes([0xc0 + i]) * big)
    th = threading.Thread(target=sender)
    th.start()
    for _ in range(6):
        m, e, c = struct.unpack(">IIQ", recvn(s, 16))
        check(m == SIMPLE and e == 0 and 2000 <= c < 2006, "big WRITE reply %x %d %d" % (m, e, c))
    th.join()
    good_write(s, 0, b"\xdd" * big, 3000)
    s.sendall(b"".join(struct.pack(">IHHQQI", REQ, 0, READ, 4000 + i, 0, big) for i in range(6)))
    for _ in range(6):
        m, e, c = struct.unpack(">IIQ", recvn(s, 16))
        check(m == SIMPLE and e == 0, "big READ reply %x %d" % (m, e))
        check(recvn(s, big) == b"\xdd" * big, "big READ returned wrong data")
    s.close()

elif CASE == "hold":
    # Connections in every state, held while the shell stops the daemon.
    socks = []
    for i in range(20):
        s = connect()
        if i % 4 >= 1:
            handshake(s)
        if i % 4 == 2:
            s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, 100) + b"\0" * 10)
        if i % 4 == 3:
            go(s)
            req(s, WRITE, 0, 65536, 1, payload=b"\x01" * 1000)
        socks.append(s)
    open(T + "/hold.ready", "w").close()
    deadline = time.time() + 60
    while not os.path.exists(T + "/hold.release") and time.time() < deadline:
        time.sleep(0.05)
    for s in socks:
        s.close()

elif CASE == "many":
    # 50 connections in every handshake state and in transmission, held open
    # while the shell runs nbdcopy; the transmission ones must still work after.
    socks, xmit = [], []
    for i in range(50):
        k = i % 5
        if k == 0:
            s = connect()  # says nothing
        elif k == 1:
            s = connect()
            greeting(s)
        elif k == 2:
            s = connect()
            handshake(s)
        elif k == 3:
            s = connect()
            handshake(s)
            s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, 100) + b"\0" * 10)  # half an option
        else:
            s = open_xmit()
            # half a payload; completed after the release, at the end of the volume
            req(s, WRITE, SIZE - 65536, 65536, 1, payload=b"\x88" * 1000)
            xmit.append(s)
            s = open_xmit()
            xmit.append(s)
        socks.append(s)
    open(T + "/many.ready", "w").close()
    deadline = time.time() + 120
    while not os.path.exists(T + "/many.release"):
        check(time.time() < deadline, "never released")
        time.sleep(0.05)
    for n, s in enumerate(xmit):
        if n % 2 == 0:
            s.sendall(b"\x88" * (65536 - 1000))  # finish the payload
            e, _ = reply(s, 1)
            check(e == 0, "held WRITE failed: %d" % e)
        good_read(s, 0, 2)
    for s in socks:
        s.close()

else:
    die("unknown case")
EOF

for c in random truncated optmagic optlen options exportname reqmagic readrange \
	structured unaligned bigwrite writerange badcmd vanish halfclose resetflood pipeline \
	slots; do
	log "case $c"
	python3 "$T/nbdc.py" "$NBD_PORT" "$SIZE" "$c" || fail "case $c"
	check_alive "case $c"
done

# 50 connections stuck in every state while a real client copies data.
head -c 8M /dev/urandom >"$T/blob"
python3 "$T/nbdc.py" "$NBD_PORT" "$SIZE" many &
many=$!
track "$many"
for ((i = 0; i < 300; i++)); do
	[ -e "$T/many.ready" ] && break
	alive "$many" || break
	sleep 0.1
done
[ -e "$T/many.ready" ] || fail "the 50 connections were not set up"
nbdcopy --flush "$NBD_URI" "$T/full.img" || fail "nbdcopy out with 50 connections open failed"
python3 - "$T/full.img" "$T/blob" <<'PY'
import sys
# Put the blob at 16M locally, then copy the whole image back in.
with open(sys.argv[1], "r+b") as f:
    f.seek(16 << 20)
    f.write(open(sys.argv[2], "rb").read())
PY
nbdcopy --flush "$T/full.img" "$NBD_URI" || fail "nbdcopy in with 50 connections open failed"
nbdcopy "$NBD_URI" "$T/full2.img" || fail "nbdcopy out with 50 connections open failed"
cmp "$T/full.img" "$T/full2.img" || fail "data differs with 50 connections open"
touch "$T/many.release"
wait "$many" || fail "case many"
check_alive "case many"
# The held WRITEs finished after the release: 64 KiB of 0x88 at the end.
python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-65536, 2); f.write(b"\x88" * 65536)' "$T/full2.img"
nbdcopy "$NBD_URI" "$T/full3.img" || fail "nbdcopy out after the 50 connections failed"
cmp "$T/full2.img" "$T/full3.img" || fail "data differs after the 50 connections closed"

# SIGTERM with connections open in every state, one with half a WRITE
# payload: the node must still exit 0, promptly, without leaks.
python3 "$T/nbdc.py" "$NBD_PORT" "$SIZE" hold &
hold=$!
track "$hold"
for ((i = 0; i < 300; i++)); do
	[ -e "$T/hold.ready" ] && break
	alive "$hold" || break
	sleep 0.1
done
[ -e "$T/hold.ready" ] || fail "the held connections were not set up"
stop_node
touch "$T/hold.release"
wait "$hold" || fail "case hold"
