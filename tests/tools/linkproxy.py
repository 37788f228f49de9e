#!/usr/bin/env python3
"""linkproxy: a user-space TCP link proxy for the integration tests.

It sits on the replication link between two daemons on loopback so a test
can cut, blackhole, delay and restore that link without root or iptables.

Proxy mode:
  linkproxy.py --listen 127.0.0.1:PORT --target 127.0.0.1:PORT \
               --control /path/ctl.sock [--pidfile F] [--verbose]

  Accepts TCP connections on --listen; for each one it opens a connection to
  --target and forwards bytes both ways (a FIN is passed on as a half-close,
  an RST as an RST). Prints "ready" on stdout once both the TCP port and the
  control socket are listening; runs until SIGTERM/SIGINT, then closes
  everything and exits 0.

Client mode:
  linkproxy.py --control /path/ctl.sock --cmd "cut"

  Sends one command, prints the reply line, exits 0 if it starts with "ok",
  1 otherwise.

Control protocol: one line in, one line out ("ok ..." or "error ..."), then
the server closes the connection. A line may hold several commands separated
by ';', applied together. Commands:

  cut       partition: stop forwarding both ways. Nothing is read from
            either side, nothing is written, no FIN and no RST is sent: the
            endpoints only notice by their own timeouts. New connections are
            accepted but held (nothing connected upstream) until restore.
  drop      like cut; in addition every connection that exists now is
            closed with RST on both sides when restore comes (a partition
            long enough for TCP to give up).
  restore   forward again: held connections get their upstream, queued
            bytes flow, connections doomed by drop are reset.
  reset     close every current connection at once on both sides with RST
            (SO_LINGER 0). New connections are accepted and forwarded as
            usual; a cut stays in force.
  halfreset up|down
            close every current connection with RST on one side only (up:
            towards --target, down: towards the client that connected); the
            other side hears nothing more from that connection, as if it
            were cut, until restore resets it too. With a cut first: a close
            seen at one end only (a reset by a middlebox) while the link
            stays down.
  delay MS  add MS milliseconds of one-way delay to every forwarded chunk in
            each direction (so a round trip grows by 2*MS); 0 = none. Order
            is kept and the delayed chunks are pipelined.
  rate BPS  at most BPS bytes per second in each direction of each
            connection (a link of that bandwidth, after the delay); 0 = no
            limit. Chunks leave the proxy whole, each once the previous
            one's bytes have had their time.
  stats     "ok conns=N bytes_ab=N bytes_ba=N state=forwarding|cut"

While forwarding, the proxy answers for the target as a router would: when
an upstream connection closes or a connect upstream fails, it tries the
target once, and if nothing listens there (refused) it stops listening
itself, so that new connections are refused too, until the target accepts
again (tried every 20 ms). A daemon that is killed is then seen as gone
through the proxy as it would be directly. (During a cut nothing is tried:
a cut link answers nothing.)
            (ab = listen side -> target, ba = target -> listen side;
            counted when written to the other side).

Python 3 standard library only.
"""

import argparse
import asyncio
import collections
import errno
import os
import signal
import socket
import struct
import sys

READ_SIZE = 256 * 1024          # bytes per read from a socket
WRITE_HIGH = 1024 * 1024        # transport write-buffer high water
WRITE_LOW = 256 * 1024
# Bytes a direction may hold in the proxy (delay queue or blocked writer)
# before the source stops being read: a base plus room for ~256 MB/s times
# the configured delay, so a delayed link still carries bulk traffic.
QUEUE_BASE = 4 * 1024 * 1024
QUEUE_PER_MS = 256 * 1024

VERBOSE = False


def log(msg):
    if VERBOSE:
        print("linkproxy: " + msg, file=sys.stderr, flush=True)


def warn(msg):
    print("linkproxy: " + msg, file=sys.stderr, flush=True)


def hard_reset(transport):
    """Close a transport with RST (SO_LINGER 0), dropping unsent data."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                            struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


class Side(asyncio.Protocol):
    """One TCP endpoint of a proxied connection ("down" = accepted on
    --listen, "up" = our connection to --target)."""

    def __init__(self, conn, name):
        self.conn = conn
        self.name = name
        self.transport = None
        self.lost = False
        self.got_eof = False
        self.write_paused = False
        self.out = None     # Pipe reading from this side
        self.inp = None     # Pipe writing to this side

    def usable(self):
        return (self.transport is not None and not self.lost
                and not self.transport.is_closing())

    def connection_made(self, transport):
        self.transport = transport
        try:
            transport.set_write_buffer_limits(high=WRITE_HIGH, low=WRITE_LOW)
        except Exception:
            pass
        # Large reads (asyncio's selector transport reads max_size at once).
        if hasattr(transport, "max_size"):
            transport.max_size = READ_SIZE
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.conn.side_made(self)

    def data_received(self, data):
        self.out.push("data", data)
        conn = self.conn
        if not conn.proxy.forwarding or conn.state != "established":
            conn.update_reading(self)   # stay paused (older asyncio)

    def target_first(self):
        """The target, not the client, ends this connection."""
        down = self.conn.down
        return (self is self.conn.up and not down.lost and not down.got_eof
                and not self.conn.muted)

    def eof_received(self):
        if self.target_first():
            self.conn.proxy.target_check()
        self.got_eof = True
        self.out.push("eof", None)
        return True         # keep our write half open: this is a half-close

    def connection_lost(self, exc):
        if self.target_first():
            self.conn.proxy.target_check()
        self.lost = True
        # Whatever was still going to this side cannot be delivered.
        self.inp.discard()
        # Tell the other side, in order after the data already read.
        self.out.push("lost", exc)
        self.conn.side_lost(self, exc)

    def pause_writing(self):
        self.write_paused = True

    def resume_writing(self):
        self.write_paused = False
        # Not from inside the transport's write callback: a flush may reset
        # this very transport, which asyncio does not expect at that point.
        self.conn.proxy.loop.call_soon(self.inp.flush)


class Pipe:
    """One direction of a connection: an ordered queue of events read from
    src (data, eof, lost) that are applied to dst when forwarding is on and
    their delay has passed."""

    def __init__(self, conn, src, dst, counter):
        self.conn = conn
        self.proxy = conn.proxy
        self.loop = conn.proxy.loop
        self.src = src
        self.dst = dst
        self.counter = counter      # "bytes_ab" or "bytes_ba"
        self.q = collections.deque()
        self.pending = 0            # data bytes in q
        self.flow_paused = False
        self.timer = None
        self.timer_when = 0.0
        self.eof_sent = False
        self.dead = False           # dst is gone: drop everything
        self.rate_next = 0.0        # rate: when the link is free again

    def discard(self):
        self.dead = True
        self.q.clear()
        self.pending = 0
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.conn.update_reading(self.src)

    def _can_write(self):
        return self.proxy.forwarding and self.dst.usable()

    def push(self, kind, payload):
        if self.dead:
            return
        delay = self.proxy.delay
        rate = self.proxy.rate
        if (kind == "data" and not self.q and delay == 0 and rate == 0
                and self._can_write() and not self.dst.write_paused):
            self._write(payload)        # fast path, nothing queued
            return
        due = self.loop.time() + delay
        if rate and kind == "data":
            due = max(due, self.rate_next)
            self.rate_next = due + len(payload) / rate
        self.q.append((due, kind, payload))
        if kind == "data":
            self.pending += len(payload)
        self.flush()

    def _write(self, data):
        self.dst.transport.write(data)
        setattr(self.proxy, self.counter,
                getattr(self.proxy, self.counter) + len(data))

    def _schedule(self, when):
        if self.timer is not None:
            if self.timer_when <= when:
                return
            self.timer.cancel()
        self.timer_when = when
        self.timer = self.loop.call_at(when, self._on_timer)

    def _on_timer(self):
        self.timer = None
        self.flush()

    def flush(self):
        if self.dead:
            return
        now = self.loop.time()
        while self.q:
            if not self.proxy.forwarding or self.dst.transport is None:
                break
            if not self.dst.usable():
                if self.dst.lost or self.conn.resetting:
                    self.discard()
                    return
                break       # dst closing gracefully; nothing more to do
            due, kind, payload = self.q[0]
            if kind == "data" and self.dst.write_paused:
                break       # resume_writing will call flush again
            if due > now:
                self._schedule(due)
                break
            self.q.popleft()
            if kind == "data":
                self.pending -= len(payload)
                self._write(payload)
            elif kind == "eof":
                self.eof_sent = True
                tr = self.dst.transport
                try:
                    if tr.can_write_eof():
                        tr.write_eof()
                except OSError:     # dst already reset by its peer
                    self.conn.reset()
                    return
                self.conn.check_done()
            else:   # lost
                if payload is not None:
                    log("conn %d: %s side error (%s), resetting"
                        % (self.conn.id, self.src.name, payload))
                    self.conn.reset()
                    return
                self.dst.transport.close()
        self.conn.update_reading(self.src)


class Conn:
    def __init__(self, proxy):
        proxy.next_id += 1
        self.id = proxy.next_id
        self.proxy = proxy
        self.down = Side(self, "down")
        self.up = Side(self, "up")
        self.ab = Pipe(self, self.down, self.up, "bytes_ab")
        self.ba = Pipe(self, self.up, self.down, "bytes_ba")
        self.down.out = self.ab
        self.down.inp = self.ba
        self.up.out = self.ba
        self.up.inp = self.ab
        # held -> connecting -> established | failed
        self.state = "held"
        self.doomed = False         # reset on restore (drop)
        self.resetting = False
        self.muted = False          # halfreset: nothing forwarded any more
        self.finished = False

    # -- lifecycle ---------------------------------------------------------

    def side_made(self, side):
        if side is self.down:
            self.proxy.conns.add(self)
            log("conn %d: accepted" % self.id)
            self.update_reading(self.down)      # paused until upstream is up
            if self.proxy.forwarding:
                self.start_connect()
        else:
            self.state = "established"
            log("conn %d: upstream connected" % self.id)
            if self.resetting:
                hard_reset(self.up.transport)
                return
            self.update_reading(self.down)
            self.update_reading(self.up)
            self.ab.flush()
            self.ba.flush()

    def start_connect(self):
        if self.state != "held" or self.down.lost or self.resetting:
            return
        self.state = "connecting"
        self.proxy.loop.create_task(self._connect())

    async def _connect(self):
        host, port = self.proxy.target
        try:
            await self.proxy.loop.create_connection(
                lambda: self.up, host, port)
        except (OSError, asyncio.TimeoutError) as e:
            log("conn %d: upstream connect failed: %s" % (self.id, e))
            self.proxy.target_check()
            self.state = "failed"
            if self.down.usable():
                hard_reset(self.down.transport)
            self._maybe_finish()

    def side_lost(self, side, exc):
        log("conn %d: %s side closed%s" % (self.id, side.name,
                                           " (%s)" % exc if exc else ""))
        self._maybe_finish()

    def _maybe_finish(self):
        if self.finished:
            return
        if not self.down.lost:
            return
        if self.state in ("held", "failed") or self.up.lost:
            self.finished = True
            self.proxy.conns.discard(self)

    def check_done(self):
        """Both directions have passed their FIN on: close both."""
        if self.ab.eof_sent and self.ba.eof_sent:
            for s in (self.down, self.up):
                if s.usable():
                    s.transport.close()

    def half_reset(self, side):
        """RST one side now; the other hears nothing until restore."""
        self.muted = True
        self.doomed = True
        self.ab.discard()
        self.ba.discard()
        if side.transport is not None and not side.lost:
            hard_reset(side.transport)

    def reset(self):
        """RST both sides now (and the upstream as soon as it connects)."""
        self.resetting = True
        self.ab.discard()
        self.ba.discard()
        for s in (self.down, self.up):
            if s.transport is not None and not s.lost:
                hard_reset(s.transport)
        self._maybe_finish()

    # -- flow control ------------------------------------------------------

    def update_reading(self, side):
        t = side.transport
        if t is None or side.lost or t.is_closing():
            return
        pipe = side.out
        high = QUEUE_BASE + int(self.proxy.delay_ms * QUEUE_PER_MS)
        if pipe.pending > high:
            pipe.flow_paused = True
        elif pipe.pending <= high // 2:
            pipe.flow_paused = False
        want = (self.proxy.forwarding and self.state == "established"
                and not side.got_eof and not pipe.flow_paused
                and not self.resetting and not self.muted)
        if want:
            t.resume_reading()
        else:
            t.pause_reading()

    def resume(self):
        if self.state == "held":
            self.start_connect()
            return
        self.update_reading(self.down)
        self.update_reading(self.up)
        self.ab.flush()
        self.ba.flush()


class Proxy:
    def __init__(self, loop, listen, target):
        self.loop = loop
        self.listen = listen
        self.target = target
        self.forwarding = True
        self.delay = 0.0
        self.delay_ms = 0.0
        self.rate = 0.0             # bytes/s per direction, 0 = no limit
        self.conns = set()
        self.next_id = 0
        self.bytes_ab = 0
        self.bytes_ba = 0
        self.server = None      # the listening server; None while the target refuses
        self.stopping = False

    def target_refuses(self):
        s = socket.socket(socket.AF_INET6 if ":" in self.target[0]
                          else socket.AF_INET)
        s.settimeout(0.2)
        try:
            s.connect(self.target)
            return False
        except ConnectionRefusedError:
            return True
        except OSError:
            return False        # no answer: says nothing
        finally:
            s.close()

    def target_check(self):
        """The target may be gone: if it refuses, refuse too (see above)."""
        if not self.forwarding or self.server is None or self.stopping:
            return
        if not self.target_refuses():
            return
        log("target refuses connections: not listening until it is back")
        self.server.close()
        self.server = None
        self.loop.call_later(0.02, self._relisten)

    def _relisten(self):
        if self.stopping:
            return
        if not self.forwarding or self.target_refuses():
            self.loop.call_later(0.02, self._relisten)
            return
        self.loop.create_task(self._listen_again())

    async def _listen_again(self):
        try:
            self.server = await self.loop.create_server(
                self.new_connection, self.listen[0], self.listen[1],
                reuse_address=True, backlog=1024)
            log("target accepts again: listening")
        except OSError as e:
            warn("cannot listen again on %s:%d: %s" % (self.listen[0],
                                                    self.listen[1], e))
            self.loop.call_later(0.02, self._relisten)

    def new_connection(self):
        return Conn(self).down

    def command(self, line):
        """One command, or several separated by ';' (applied at once, in
        order, up to the first error)."""
        reply = "error empty command"
        for part in line.split(";"):
            reply = self.command1(part)
            if not reply.startswith("ok"):
                break
        return reply

    def command1(self, line):
        words = line.split()
        if not words:
            return "error empty command"
        cmd, args = words[0].lower(), words[1:]
        if cmd == "halfreset":
            if len(args) != 1 or args[0] not in ("up", "down"):
                return "error usage: halfreset up|down"
            cs = list(self.conns)
            for c in cs:
                c.half_reset(c.up if args[0] == "up" else c.down)
            return "ok halfreset %s conns=%d" % (args[0], len(cs))
        if cmd == "delay":
            if len(args) != 1:
                return "error usage: delay MS"
            try:
                ms = float(args[0])
            except ValueError:
                return "error bad delay %r" % args[0]
            if not 0 <= ms <= 3600 * 1000:
                return "error delay out of range"
            self.delay_ms = ms
            self.delay = ms / 1000.0
            return "ok delay %s" % args[0]
        if cmd == "rate":
            if len(args) != 1:
                return "error usage: rate BYTES_PER_SEC"
            try:
                bps = int(args[0])
            except ValueError:
                return "error bad rate %r" % args[0]
            if not 0 <= bps <= 1 << 40:
                return "error rate out of range"
            self.rate = float(bps)
            return "ok rate %d" % bps
        if args:
            return "error %s takes no arguments" % cmd
        if cmd == "cut":
            self._cut()
            return "ok cut conns=%d" % len(self.conns)
        if cmd == "drop":
            self._cut()
            for c in self.conns:
                c.doomed = True
            return "ok drop conns=%d" % len(self.conns)
        if cmd == "restore":
            self.forwarding = True
            nreset = 0
            for c in list(self.conns):
                if c.doomed:
                    nreset += 1
                    c.reset()
            for c in list(self.conns):
                if not c.resetting:
                    c.resume()
            return "ok restore reset=%d" % nreset
        if cmd == "reset":
            cs = list(self.conns)
            for c in cs:
                c.reset()
            return "ok reset conns=%d" % len(cs)
        if cmd == "stats":
            return "ok conns=%d bytes_ab=%d bytes_ba=%d state=%s" % (
                len(self.conns), self.bytes_ab, self.bytes_ba,
                "forwarding" if self.forwarding else "cut")
        return "error unknown command %r" % cmd

    def _cut(self):
        self.forwarding = False
        for c in self.conns:
            c.update_reading(c.down)
            c.update_reading(c.up)

    async def control_client(self, reader, writer):
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            reply = self.command(line.decode("utf-8", "replace").strip())
            log("control: %r -> %r" % (line.strip(), reply))
            writer.write((reply + "\n").encode())
            await writer.drain()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                ValueError):
            pass
        finally:
            try:
                writer.close()
                await writer.wait_closed()
            except OSError:
                pass

    def close_all(self):
        for c in list(self.conns):
            for s in (c.down, c.up):
                if s.transport is not None and not s.lost:
                    s.transport.abort()


def parse_addr(s, what):
    host, sep, port = s.rpartition(":")
    if not sep or not host:
        raise SystemExit("linkproxy: bad %s address %r (want HOST:PORT)"
                         % (what, s))
    try:
        p = int(port)
    except ValueError:
        raise SystemExit("linkproxy: bad %s port %r" % (what, port))
    if not 0 <= p <= 65535:
        raise SystemExit("linkproxy: bad %s port %r" % (what, port))
    return host.strip("[]"), p


QUIET_ERRNOS = {errno.ENOTCONN, errno.EPIPE, errno.ECONNRESET,
                errno.ECONNABORTED, errno.ETIMEDOUT}


def exception_handler(loop, context):
    exc = context.get("exception")
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return      # a peer went away: a normal disconnect
    if isinstance(exc, OSError) and exc.errno in QUIET_ERRNOS:
        return
    msg = context.get("message", "unexpected error")
    warn("%s%s" % (msg, ": %r" % exc if exc else ""))


async def run_proxy(args):
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(exception_handler)
    listen = parse_addr(args.listen, "--listen")
    target = parse_addr(args.target, "--target")
    proxy = Proxy(loop, listen, target)

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    try:
        server = await loop.create_server(
            proxy.new_connection, listen[0], listen[1],
            reuse_address=True, backlog=1024)
    except OSError as e:
        warn("cannot listen on %s: %s" % (args.listen, e))
        return 2
    proxy.server = server
    try:
        if os.path.exists(args.control):
            os.unlink(args.control)     # stale socket from an earlier run
        ctl = await asyncio.start_unix_server(proxy.control_client,
                                              args.control)
    except OSError as e:
        warn("cannot listen on control socket %s: %s" % (args.control, e))
        proxy.server.close()
        return 2
    if args.pidfile:
        with open(args.pidfile, "w") as f:
            f.write("%d\n" % os.getpid())

    print("ready", flush=True)
    await stop.wait()

    log("shutting down")
    proxy.stopping = True
    if proxy.server is not None:
        proxy.server.close()
    ctl.close()
    proxy.close_all()
    for _ in range(3):
        await asyncio.sleep(0)      # let the transports finish closing
    for path in (args.control, args.pidfile):
        if path:
            try:
                os.unlink(path)
            except OSError:
                pass
    return 0


def run_client(args):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(args.control)
        s.sendall(args.cmd.strip().encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        s.close()
    except OSError as e:
        print("error control socket %s: %s" % (args.control, e), flush=True)
        return 1
    reply = buf.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    if not reply:
        reply = "error no reply"
    print(reply, flush=True)
    return 0 if reply.startswith("ok") else 1


def main():
    global VERBOSE
    ap = argparse.ArgumentParser(
        description="User-space TCP link proxy with cut/reset/delay control.")
    ap.add_argument("--listen", help="HOST:PORT to accept connections on")
    ap.add_argument("--target", help="HOST:PORT to forward them to")
    ap.add_argument("--control", required=True,
                    help="unix socket path for control commands")
    ap.add_argument("--pidfile", help="write our pid here")
    ap.add_argument("--cmd", help="client mode: send this command, print "
                    "the reply, exit 0 on ok")
    ap.add_argument("--verbose", action="store_true",
                    help="log connection events on stderr")
    args = ap.parse_args()
    VERBOSE = args.verbose

    if args.cmd is not None:
        return run_client(args)
    if not args.listen or not args.target:
        ap.error("--listen and --target are required (or --cmd for client "
                 "mode)")
    try:
        return asyncio.run(run_proxy(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
