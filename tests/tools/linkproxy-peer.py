#!/usr/bin/env python3
"""linkproxy-peer: both ends of a link for tests/tools/test-linkproxy.sh.

  linkproxy-peer.py serve PORT
      The far end (linkproxy's --target): listens on 127.0.0.1:PORT, prints
      "ready", serves each connection by the first line the client sends:
        discard          read to EOF, answer "BYTES"
        sink [PATH]      answer "go" at once, read to EOF (saved to PATH),
                         answer "BYTES SHA256"
        window WARM DUR  read; as soon as WARM+DUR s have passed since the
                         first byte, answer "WINDOW TOTAL": WINDOW = bytes
                         that arrived from WARM s after the first one to
                         WARM+DUR s after it, TOTAL = all until then; then
                         read on to EOF
        source SECONDS   send as fast as the link takes for SECONDS
        send N PATH      send N random bytes (saved to PATH first), close
        echo             send back what arrives
      Runs until SIGTERM.

  linkproxy-peer.py CHECK --port PROXY_PORT --control SOCK [ARGS]
      The near end: connects through the proxy, runs one check, prints one
      line of figures, exits 1 (with the reason on stderr) on failure.
        throughput MIB
        rates WARM DUR AB_MBIT BA_MBIT TOLERANCE QUEUE_MAX SLACK PID
        rtt N MIN_MS MAX_MS
        order SECONDS
        loss KIB RTO_MS
        corrupt KIB DIR
        capture KIB DIR PATH
        idle KIB PATH
      (see each function).

Python 3 standard library only; loopback only.
"""

import argparse
import hashlib
import os
import signal
import socket
import struct
import sys
import threading
import time

BUF = 256 * 1024


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def nodelay(s):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def readline(s):
    line = b""
    while not line.endswith(b"\n"):
        b = s.recv(1)
        if not b:
            break
        line += b
    return line.decode().strip()


def recv_all(s, on_data=None):
    """Read to EOF; on_data(data) per read. Returns the byte count."""
    n = 0
    buf = bytearray(BUF)
    view = memoryview(buf)
    while True:
        k = s.recv_into(buf)
        if not k:
            return n
        n += k
        if on_data is not None:
            on_data(view[:k])


class Window:
    """Bytes that arrived between WARM and WARM+DUR s after the first."""

    def __init__(self, warm, dur):
        self.warm, self.dur = warm, dur
        self.t0 = None
        self.total = 0
        self.start = None       # total when the window opened
        self.end = None
        self.told = False

    def add(self, n):
        now = time.monotonic()
        if self.t0 is None:
            self.t0 = now
        t = now - self.t0
        # the count at a moment is the count of the last read before it
        if self.start is None and t >= self.warm:
            self.start = self.total
        if self.end is None and t >= self.warm + self.dur:
            self.end = self.total
        self.total += n

    def bytes(self):
        if self.start is None or self.end is None:
            return -1
        return self.end - self.start


# -- the far end -----------------------------------------------------------

def serve_one(c):
    try:
        nodelay(c)
        words = readline(c).split()
        if not words:
            return
        mode = words[0]
        if mode == "discard":
            n = recv_all(c)
            c.sendall(b"%d\n" % n)
        elif mode == "sink":
            c.sendall(b"go\n")
            h = hashlib.sha256()
            f = open(words[1], "wb") if len(words) > 1 else None

            def got(data):
                h.update(data)
                if f is not None:
                    f.write(data)
            n = recv_all(c, got)
            if f is not None:
                f.close()
            c.sendall(b"%d %s\n" % (n, h.hexdigest().encode()))
        elif mode == "window":
            win = Window(float(words[1]), float(words[2]))

            def got(data):
                win.add(len(data))
                if win.end is not None and not win.told:
                    win.told = True
                    c.sendall(b"%d %d\n" % (win.bytes(), win.end))
            recv_all(c, got)
        elif mode == "source":
            end = time.monotonic() + float(words[1])
            data = b"\xa5" * BUF
            while time.monotonic() < end:
                c.sendall(data)
        elif mode == "send":
            data = os.urandom(int(words[1]))
            with open(words[2], "wb") as f:
                f.write(data)
            c.sendall(data)
        elif mode == "echo":
            while True:
                data = c.recv(BUF)
                if not data:
                    break
                c.sendall(data)
    except OSError:
        pass            # the near end went away: its check says why
    finally:
        c.close()


def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print("ready", flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve_one, args=(c,), daemon=True).start()


# -- the near end ----------------------------------------------------------

class Near:
    def __init__(self, port, control):
        self.port = port
        self.control = control

    def connect(self, mode):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        nodelay(s)
        s.sendall(mode.encode() + b"\n")
        if mode.split()[0] == "sink" and readline(s) != "go":
            fail("%s: no go from the far end" % mode)
        return s

    def command(self, line):
        """A control command that must succeed."""
        u = socket.socket(socket.AF_UNIX)
        u.settimeout(10)
        u.connect(self.control)
        u.sendall(line.encode() + b"\n")
        reply = readline(u)
        u.close()
        if not reply.startswith("ok"):
            fail("%s: %r" % (line, reply))
        return reply

    def stats(self):
        """The proxy's stats as a dict of strings."""
        line = self.command("stats")
        return dict(w.split("=", 1) for w in line.split()[1:])


def throughput(near, mib):
    """Sends MIB MiB through the proxy, prints MB/s (end to end)."""
    data = b"\x00" * (1 << 20)
    t0 = time.monotonic()
    s = near.connect("discard")
    for _ in range(mib):
        s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got = int(readline(s) or -1)
    dt = time.monotonic() - t0
    s.close()
    if got != mib << 20:
        fail("throughput: %d bytes arrived of %d" % (got, mib << 20))
    print("unshaped: %d MiB in %.2f s, %.0f MB/s" % (mib, dt,
                                                     (mib << 20) / dt / 1e6))


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def hard_close(s):
    """Close with RST: nothing left to drain through a slow link."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
    except OSError:
        pass
    s.close()


def rates(near, warm, dur, mbit_ab, mbit_ba, tol, qmax, slack, pid):
    """Both directions at once, each as fast as its sender can: ab (we
    send, the far end measures) and ba (the far end sends, we measure).
    Checks that each carried its MBIT Mbit/s within TOL % from WARM s after
    the first byte to WARM+DUR s after it; that the bytes queued in the
    proxy never went over QUEUE_MAX; and that our sender was held back:
    when the window closed, its socket had taken less than SLACK bytes
    beyond those that had arrived. PID: the proxy, whose RSS is shown.
    More than TOL % over the rate fails (status 1); only under it, with
    everything else holding, ends with status 3."""
    res = {}

    def ab():
        s = near.connect("window %g %g" % (warm, dur))
        stop = threading.Event()
        sent = [0]

        def send():
            data = b"\x5a" * 65536
            try:
                while not stop.is_set():
                    s.sendall(data)
                    sent[0] += len(data)
            except OSError:
                pass
        t = threading.Thread(target=send)
        t.start()
        s.settimeout(warm + dur + 30)
        reply = readline(s).split()
        taken = sent[0]
        stop.set()
        s.shutdown(socket.SHUT_RDWR)
        t.join()
        hard_close(s)
        res["ab"] = (int(reply[0]), taken, int(reply[1]))

    def ba():
        s = near.connect("source %g" % (warm + dur + 30))
        s.settimeout(30)
        win = Window(warm, dur)
        buf = bytearray(BUF)
        while win.end is None:
            n = s.recv_into(buf)
            if not n:
                break
            win.add(n)
        hard_close(s)
        res["ba"] = (win.bytes(),)

    threads = [threading.Thread(target=f) for f in (ab, ba)]
    for t in threads:
        t.start()
    qab = qba = rss = 0
    while any(t.is_alive() for t in threads):
        st = near.stats()
        qab = max(qab, int(st["queued_ab"]))
        qba = max(qba, int(st["queued_ba"]))
        rss = max(rss, rss_kib(pid))
        time.sleep(0.05)
    for t in threads:
        t.join()
    if "ab" not in res or "ba" not in res:
        fail("rates: a transfer failed")
    got_ab = res["ab"][0] * 8 / dur / 1e6
    got_ba = res["ba"][0] * 8 / dur / 1e6
    taken, arrived = res["ab"][1], res["ab"][2]
    print("rate ab %gmbit ba %gmbit: ab %.2f Mbit/s, ba %.2f Mbit/s; most "
          "queued ab %d ba %d bytes; sender ahead by %.1f MB (%.1f MB "
          "taken, %.1f MB arrived); proxy RSS at most %d KiB"
          % (mbit_ab, mbit_ba, got_ab, got_ba, qab, qba,
             (taken - arrived) / 1e6, taken / 1e6, arrived / 1e6, rss))
    short = []
    for d, got, want in (("ab", got_ab, mbit_ab), ("ba", got_ba, mbit_ba)):
        if got > want * (1 + tol / 100):
            fail("rate %s %gmbit: carried %.2f Mbit/s" % (d, want, got))
        if got < want * (1 - tol / 100):
            short.append("rate %s %gmbit: carried %.2f Mbit/s" % (d, want, got))
    if max(qab, qba) > qmax:
        fail("rates: %d bytes queued (at most %d expected)"
             % (max(qab, qba), qmax))
    if taken - arrived > slack:
        fail("rates: the sender was not held back: %d bytes taken, %d "
             "arrived" % (taken, arrived))
    if short:
        # Only short of the rate, every other check held: the proxy or a
        # peer may have been short of CPU (a loaded machine), which a run
        # again can tell from a shaping fault. Status 3 says so.
        print("SHORT: " + "; ".join(short), file=sys.stderr, flush=True)
        sys.exit(3)


def rtt(near, count, lo, hi):
    """COUNT round trips of 64 bytes through the echo: each within
    [LO, HI] ms, and not all alike (jitter)."""
    s = near.connect("echo")
    msg = b"p" * 64
    times = []
    for _ in range(count):
        t0 = time.monotonic()
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            b = s.recv(len(msg) - len(got))
            if not b:
                fail("rtt: echo closed")
            got += b
        times.append((time.monotonic() - t0) * 1000)
        if got != msg:
            fail("rtt: echo changed the bytes")
    s.close()
    mean = sum(times) / len(times)
    print("round trips: %d, min %.1f ms, mean %.1f ms, max %.1f ms"
          % (count, min(times), mean, max(times)))
    if min(times) < lo or max(times) > hi:
        fail("rtt: round trips outside [%g, %g] ms" % (lo, hi))
    if max(times) - min(times) < (hi - lo) / 4:
        fail("rtt: round trips hardly vary: no jitter?")


def order(near, seconds):
    """Many small writes (one segment each), 0.25 ms apart, for SECONDS:
    the far end must get exactly the same bytes in the same order."""
    s = near.connect("sink")
    h = hashlib.sha256()
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        data = os.urandom(100)
        s.sendall(data)
        h.update(data)
        n += 1
        time.sleep(0.00025)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(30)
    got, digest = readline(s).split()
    s.close()
    print("order: %d writes of 100 bytes, %s" % (n, "same bytes in order"
          if digest == h.hexdigest() else "CHANGED"))
    if int(got) != n * 100 or digest != h.hexdigest():
        fail("order: %s bytes arrived of %d, or not the same" % (got, n * 100))


def loss(near, kib, rto_ms):
    """KIB KiB of random bytes through the lossy link: all arrive
    unchanged and in order, each lost segment cost a stall of RTO_MS."""
    data = os.urandom(kib << 10)
    before = int(near.stats()["stalls_ab"])
    t0 = time.monotonic()
    s = near.connect("sink")
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(60)
    got, digest = readline(s).split()
    dt = time.monotonic() - t0
    s.close()
    stalls = int(near.stats()["stalls_ab"]) - before
    print("loss: %d KiB in %.2f s (%.2f MB/s), %d stalls of %g ms, %s"
          % (kib, dt, len(data) / dt / 1e6, stalls, rto_ms,
             "same bytes" if digest == hashlib.sha256(data).hexdigest()
             else "CHANGED"))
    if int(got) != len(data) or digest != hashlib.sha256(data).hexdigest():
        fail("loss: the bytes that arrived are not the bytes sent")
    if stalls < 1:
        fail("loss: no segment was lost")
    if dt < stalls * rto_ms / 1000 * 0.9:
        fail("loss: %d stalls of %g ms took only %.2f s" % (stalls, rto_ms,
                                                            dt))


def compare(sent, got):
    """Offsets where two equal-sized byte strings differ, and the XORs."""
    if len(sent) != len(got):
        return None
    diffs = []
    step = 1 << 16
    for i in range(0, len(sent), step):
        if sent[i:i + step] != got[i:i + step]:
            for j in range(i, min(i + step, len(sent))):
                if sent[j] != got[j]:
                    diffs.append((j, sent[j] ^ got[j]))
    return diffs


def transfer(near, kib, direction, tmp, before=None):
    """KIB KiB of random bytes in DIRECTION: returns (sent, received, the
    bytes that went ahead of them in that direction: our request). The
    control command BEFORE is given once the request has passed."""
    if direction == "ab":
        sent = os.urandom(kib << 10)
        head = "sink %s/received" % tmp
        s = near.connect(head)
        if before:
            near.command(before)
        s.sendall(sent)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(30)
        readline(s)
        s.close()
        with open(tmp + "/received", "rb") as f:
            return sent, f.read(), head.encode() + b"\n"
    if before:
        near.command(before)
    s = near.connect("send %d %s/sent" % (kib << 10, tmp))
    s.settimeout(30)
    got = bytearray()
    recv_all(s, got.extend)
    s.close()
    with open(tmp + "/sent", "rb") as f:
        return f.read(), bytes(got), b""


def corrupt(near, kib, direction, tmp):
    """With "corrupt DIRECTION 1" (given once our request has passed, so
    that it alters data): exactly one byte of the transfer is changed, by
    XOR 0x01, and the proxy has no more chunks to alter."""
    sent, got, _ = transfer(near, kib, direction, tmp,
                            "corrupt %s 1" % direction)
    diffs = compare(sent, got)
    print("corrupt %s: %s" % (direction, "%d bytes arrived, differing at %s"
                              % (len(got), ", ".join("offset %d (xor 0x%02x)"
                                                     % d for d in diffs))
                              if diffs is not None else
                              "%d bytes arrived of %d" % (len(got), len(sent))))
    if diffs is None or len(diffs) != 1 or diffs[0][1] != 0x01:
        fail("corrupt %s: want exactly one byte changed by XOR 0x01"
             % direction)
    if near.stats()["corrupt_" + direction] != "0":
        fail("corrupt %s: the proxy still has chunks to alter" % direction)


def capture(near, kib, direction, tmp, path):
    """Under "capture DIRECTION PATH": PATH grows by exactly the bytes
    forwarded (our request line, if it went that way, and the data), and
    the data arrived unchanged."""
    size0 = os.path.getsize(path) if os.path.exists(path) else 0
    sent, got, head = transfer(near, kib, direction, tmp)
    with open(path, "rb") as f:
        f.seek(size0)
        cap = f.read()
    ok = sent == got and cap == head + got
    print("capture %s: %d bytes sent, %d arrived, %d captured (%d of them "
          "the request), %s" % (direction, len(sent), len(got), len(cap),
                                len(head), "all equal" if ok else "NOT EQUAL"))
    if not ok:
        fail("capture %s: the capture is not the bytes forwarded" % direction)


def idle(near, kib, tmp, path):
    """With capture off: a transfer both ways leaves PATH as it was."""
    size0 = os.path.getsize(path)
    transfer(near, kib, "ab", tmp)
    transfer(near, kib, "ba", tmp)
    size1 = os.path.getsize(path)
    print("capture off: %s stays at %d bytes" % (os.path.basename(path),
                                                 size1))
    if size1 != size0:
        fail("capture off: %s grew from %d to %d bytes" % (path, size0,
                                                           size1))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("check")
    ap.add_argument("args", nargs="*")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--tmp", default="/tmp")
    a = ap.parse_args()
    near = Near(a.port, a.control)
    x = a.args
    if a.check == "throughput":
        throughput(near, int(x[0]))
    elif a.check == "rates":
        rates(near, float(x[0]), float(x[1]), float(x[2]), float(x[3]),
              float(x[4]), int(x[5]), int(x[6]), int(x[7]))
    elif a.check == "rtt":
        rtt(near, int(x[0]), float(x[1]), float(x[2]))
    elif a.check == "order":
        order(near, float(x[0]))
    elif a.check == "loss":
        loss(near, int(x[0]), float(x[1]))
    elif a.check == "corrupt":
        corrupt(near, int(x[0]), x[1], a.tmp)
    elif a.check == "capture":
        capture(near, int(x[0]), x[1], a.tmp, x[2])
    elif a.check == "idle":
        idle(near, int(x[0]), a.tmp, x[1])
    else:
        ap.error("unknown check %r" % a.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
