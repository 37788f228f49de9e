#!/usr/bin/env python3
"""linkproxy: a user-space TCP link proxy for the integration tests.

It sits on the replication link between two daemons on loopback so a test
can cut, blackhole, delay and restore that link without root or iptables,
and a test or a bench can give it the rate, jitter and loss of a slower
link (the kernel here has no netem).

Proxy mode:
  linkproxy.py --listen 127.0.0.1:PORT --target 127.0.0.1:PORT \
               --control /path/ctl.sock [--pidfile F] [--verbose] \
               [--rate R] [--delay MS] [--jitter MS] [--loss PCT] \
               [--rto MS] [--queue BYTES]

  Accepts TCP connections on --listen; for each one it opens a connection to
  --target and forwards bytes both ways (a FIN is passed on as a half-close,
  an RST as an RST). Prints "ready" on stdout once both the TCP port and the
  control socket are listening; runs until SIGTERM/SIGINT, then closes
  everything and exits 0.

  --rate, --delay, --jitter, --loss, --rto and --queue take what the command
  of the same name takes and apply it before "ready"; --rate, --loss and
  --queue may be given more than once, applied in order ("--rate 10mbit
  --rate 'ba 1mbit'"). A value that the command refuses ends the proxy with
  status 2.

Client mode:
  linkproxy.py --control /path/ctl.sock --cmd "cut"

  Sends one command, prints the reply line, exits 0 if it starts with "ok",
  1 otherwise.

Control protocol: one line in, one line out ("ok ..." or "error ..."), then
the server closes the connection. A line may hold several commands separated
by ';', applied together. Directions: ab = listen side -> target, ba =
target -> listen side. Commands:

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
  jitter MS each forwarded chunk gets, on top of the delay, a further delay
            drawn uniformly from [0, MS] ms; 0 = none. Order is still kept:
            a chunk never leaves before the one ahead of it, so a chunk
            drawn short waits for a longer one ahead.
  rate [ab|ba] R
            bandwidth of the link in each direction (both without ab|ba), in
            bits/s: a number with an optional unit kbit, mbit or gbit (10^3,
            10^6, 10^9: 500kbit, 10mbit, 1gbit, 2.5mbit; 1kbit..100gbit), or
            0 or off for unlimited (the default). The limit belongs to the link: every
            connection in that direction shares it (in turns). A token
            bucket of max(R x 10 ms, 16 KiB) paces the bytes out, in pieces
            of at most half of it (a larger chunk is split): after an idle
            moment at most 1.5 times the bucket goes out at once (when the
            proxy itself wakes late, short of CPU, while bytes wait, it
            makes up for up to 100 ms of rate in one go). Delay and
            jitter count from the moment a piece has passed the rate limit,
            as on a slow link with a long wire behind it.
  queue [ab|ba] BYTES|auto
            the buffer in front of the rate limit (BYTES with an optional k,
            m or g for KiB, MiB, GiB; 1..1g). While more than BYTES wait there in
            one direction, the proxy stops reading from every source of
            that direction, until they are down to half: the senders' TCP
            sockets fill and block them, as in front of a slow link. auto
            (the default): max(256 KiB, R x 50 ms); 4 MiB when R is
            unlimited (bytes wait there then only behind a lost segment,
            and during a cut while rate or loss is set).
  loss [ab|ba] PCT
            packet loss as TCP sees it: a TCP stream loses no bytes, it
            waits for the retransmission. The stream of each connection in
            each direction is cut into segments of 1448 bytes, counted from
            its first byte; each segment is lost with probability PCT/100,
            independently, drawn when its first byte is next to pass the
            rate limit (or to go on, with no rate). A lost segment stalls
            that connection in that direction for rto ms; then the segment
            goes (it is not lost again) and the bytes behind it follow.
            Other connections and the other direction go on meanwhile, and
            the stalled bytes count in the queue. No byte is dropped,
            changed or reordered. 0 = none (the default). (A segment begun
            when loss is set, or changed, is not lost.)
  rto MS    the stall of a lost segment, 1..60000 ms (default 200).
  corrupt ab|ba [N]
            flip one byte (XOR 0x01, at the middle of the chunk) in each of
            the next N chunks (default 1; 0 cancels) forwarded in that
            direction, whichever connection they belong to.
  capture ab|ba PATH
            append every byte forwarded in that direction from now on, as
            written (after corrupt), to PATH, all connections in turn;
            "capture ab|ba off" stops one, "capture off" both. The proxy
            opens PATH (relative to its own working directory: an absolute
            path is best); it holds no blank and no ';'.
  stats     "ok conns=N bytes_ab=N bytes_ba=N state=forwarding|cut
            queued_ab=N queued_ba=N rate_ab=BITS rate_ba=BITS queue_ab=BYTES
            queue_ba=BYTES delay=MS jitter=MS loss_ab=PCT loss_ba=PCT rto=MS
            stalls_ab=N stalls_ba=N corrupt_ab=N corrupt_ba=N
            capture_ab=PATH|off capture_ba=PATH|off" on one line. bytes_*
            are counted when written to the other side; queued_* are the
            bytes read and not yet written to the other side (in the queue,
            in the delay, or waiting for a blocked writer); rate 0 is
            unlimited; stalls_* counts lost segments; corrupt_* the chunks
            still to be altered.

The settings apply to every connection, those open now and those to come,
and stay until changed; a chunk is what the proxy forwards at once (one read
from a socket, or a piece of it), so with jitter and corrupt its size varies
with the traffic. A direction holds at most a bounded number of bytes: the
queue above, plus, after the rate limit, 4 MiB + 256 KiB per ms of delay and
jitter (in flight, or waiting for a slow receiver); beyond either its
sources are not read (each may overshoot by one read of 256 KiB).

While forwarding, the proxy answers for the target as a router would: when
an upstream connection closes or a connect upstream fails, it tries the
target once, and if nothing listens there (refused) it stops listening
itself, so that new connections are refused too, until the target accepts
again (tried every 20 ms). A daemon that is killed is then seen as gone
through the proxy as it would be directly. (During a cut nothing is tried:
a cut link answers nothing.)

Python 3 standard library only.
"""

import argparse
import asyncio
import collections
import ctypes
import errno
import math
import os
import random
import select
import selectors
import signal
import socket
import struct
import sys
import time

READ_SIZE = 256 * 1024          # bytes per read from a socket
WRITE_HIGH = 1024 * 1024        # transport write-buffer high water
WRITE_LOW = 256 * 1024
# Bytes a direction may hold in the proxy after the rate limit (delay queue
# or blocked writer) before the source stops being read: a base plus room
# for ~256 MB/s times the configured delay and jitter, so a delayed link
# still carries bulk traffic.
QUEUE_BASE = 4 * 1024 * 1024
QUEUE_PER_MS = 256 * 1024
# The queue in front of the rate limit ("queue auto"): max(QUEUE_MIN, rate
# x QUEUE_TIME), QUEUE_BASE when the rate is unlimited.
QUEUE_MIN = 256 * 1024
QUEUE_TIME = 0.050
# Token bucket: a burst of max(rate x BURST_TIME, BURST_MIN) bytes. While
# bytes wait, a wakeup that comes late (the proxy short of CPU) is made up
# for, up to CATCH_UP late: the link keeps its rate, in a larger burst.
BURST_TIME = 0.010
BURST_MIN = 16 * 1024
CATCH_UP = 0.100
SEGMENT = 1448                  # bytes per TCP segment, for loss
DIRS = ("ab", "ba")

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


class Link:
    """One direction of the emulated link, shared by every connection: its
    settings and counters, and the rate limit with the queue in front of
    it. The pipes that have bytes waiting in that queue take turns."""

    def __init__(self, proxy, name):
        self.proxy = proxy
        self.loop = proxy.loop
        self.name = name
        self.bytes = 0              # forwarded (written to the other side)
        self.rate = 0               # bits/s, 0 = unlimited
        self.bps = 0.0              # the same in bytes/s
        self.queue_set = None       # "queue", None = auto
        self.loss = 0.0             # probability per segment
        self.stalls = 0             # lost segments so far
        self.corrupt = 0            # chunks still to alter
        self.capture = None         # file the forwarded bytes go to
        self.capture_path = None
        self.queued = 0             # bytes in the pipes' rate queues
        self.blocked = False        # queued went over limit(): sources paused
        self.turns = collections.deque()
        self.credit = 0.0           # token bucket, bytes (negative: debt)
        self.last = self.loop.time()
        self.busy = False           # bytes waited when last pumped
        self.timer = None
        self.timer_when = 0.0
        self.pumping = False

    def shaping(self):
        """Bytes go through the rate queue (else straight to the delay)."""
        return self.bps > 0 or self.loss > 0

    def limit(self):
        if self.queue_set is not None:
            return self.queue_set
        if self.bps > 0:
            return max(QUEUE_MIN, int(self.bps * QUEUE_TIME))
        return QUEUE_BASE

    def burst(self):
        return max(self.bps * BURST_TIME, BURST_MIN)

    def set_rate(self, bits):
        self.rate = bits
        self.bps = bits / 8.0
        self.credit = 0.0
        self.last = self.loop.time()
        self.pump()
        self.check_blocked()

    def set_queue(self, nbytes):
        self.queue_set = nbytes
        self.check_blocked()

    def set_loss(self, p):
        self.loss = p
        for c in self.proxy.conns:
            (c.ab if self.name == "ab" else c.ba).loss_at = None
        self.pump()

    def set_capture(self, path):
        """Capture to path from now on (None: stop). Returns an error or
        None."""
        f = None
        if path is not None:
            try:
                f = open(path, "ab", buffering=0)
            except OSError as e:
                return "cannot open %s: %s" % (path, e.strerror or e)
        self.stop_capture()
        self.capture = f
        self.capture_path = path
        return None

    def stop_capture(self):
        if self.capture is not None:
            try:
                self.capture.close()
            except OSError:
                pass
        self.capture = None
        self.capture_path = None

    def save(self, data):
        try:
            view = memoryview(data)
            while view:
                n = self.capture.write(view)
                view = view[n:]
        except OSError as e:
            warn("capture %s to %s stopped: %s" % (self.name, self.capture_path,
                                                   e))
            self.stop_capture()

    def take_turn(self, pipe):
        if (not pipe.in_turns and pipe.rq and pipe.stall is None
                and not pipe.dead):
            pipe.in_turns = True
            self.turns.append(pipe)

    def leave(self, pipe):
        if pipe.in_turns:
            pipe.in_turns = False
            try:
                self.turns.remove(pipe)
            except ValueError:
                pass

    def _schedule(self, when):
        if self.timer is not None:
            if self.timer_when <= when:
                return
            self.timer.cancel()
        self.timer_when = when
        self.timer = self.loop.call_at(when, self._on_timer)

    def _on_timer(self):
        self.timer = None
        self.pump()

    def pump(self):
        """Let bytes through the rate limit: the waiting pipes in turn, a
        piece of at most half the burst each, while the token bucket holds
        credit (all at once when the rate is unlimited). A piece may take
        the bucket into debt, which the next wakeup waits out; if bytes
        waited meanwhile, credit for a late wakeup is kept up to CATCH_UP,
        so that the rate holds when the proxy is short of CPU."""
        if self.pumping:
            return
        if not self.proxy.forwarding:
            self.busy = False       # a cut is no late wakeup
            return
        self.pumping = True
        try:
            now = self.loop.time()
            piece = None
            if self.bps > 0:
                burst = self.burst()
                cap = burst
                if self.busy:
                    cap = max(burst, self.bps * CATCH_UP)
                self.credit = min(cap, self.credit
                                  + (now - self.last) * self.bps)
                piece = max(1, int(burst / 2))
            self.last = now
            while self.turns:
                if self.bps > 0 and self.credit <= 0:
                    self._schedule(now - self.credit / self.bps)
                    break
                pipe = self.turns[0]
                n = pipe.release(now, piece)
                if pipe.in_turns and self.turns and self.turns[0] is pipe:
                    if pipe.rq and pipe.stall is None and not pipe.dead:
                        self.turns.rotate(-1)
                    else:
                        self.turns.popleft()
                        pipe.in_turns = False
                if self.bps > 0:
                    self.credit -= n
            self.busy = bool(self.turns)
        finally:
            self.pumping = False
        self.check_blocked()

    def check_blocked(self):
        """Read the sources again once the queue is down to half."""
        if self.blocked and self.queued <= self.limit() // 2:
            self.blocked = False
            for c in list(self.proxy.conns):
                c.update_reading(c.down if self.name == "ab" else c.up)


class Pipe:
    """One direction of a connection: an ordered queue of events read from
    src (data, eof, lost) that are applied to dst when forwarding is on and
    their delay has passed. When its link shapes (rate, loss) they first
    wait in the rate queue (rq) for their turn through the rate limit."""

    def __init__(self, conn, src, dst, link):
        self.conn = conn
        self.proxy = conn.proxy
        self.loop = conn.proxy.loop
        self.src = src
        self.dst = dst
        self.link = link
        self.q = collections.deque()    # (due, kind, payload), due in order
        self.pending = 0            # data bytes in q
        self.last_due = 0.0
        self.rq = collections.deque()   # (kind, payload) before the limit
        self.rq_off = 0             # bytes of rq[0] already gone
        self.rq_bytes = 0           # data bytes in rq (less rq_off)
        self.in_turns = False       # in link.turns
        self.sent = 0               # data bytes through the rate queue
        self.loss_at = None         # stream offset of the next lost segment
        self.stall = None           # timer: a lost segment is being resent
        self.flow_paused = False
        self.timer = None
        self.timer_when = 0.0
        self.eof_sent = False
        self.dead = False           # dst is gone: drop everything

    def discard(self):
        self.dead = True
        self.q.clear()
        self.pending = 0
        self.rq.clear()
        self.rq_off = 0
        self.link.queued -= self.rq_bytes
        self.rq_bytes = 0
        self.link.leave(self)
        for t in (self.timer, self.stall):
            if t is not None:
                t.cancel()
        self.timer = None
        self.stall = None
        self.conn.update_reading(self.src)
        self.link.check_blocked()

    def _can_write(self):
        return self.proxy.forwarding and self.dst.usable()

    def push(self, kind, payload):
        if self.dead:
            return
        link = self.link
        if self.rq or self.stall is not None or link.shaping():
            self.rq.append((kind, payload))
            if kind == "data":
                self.rq_bytes += len(payload)
                link.queued += len(payload)
                if link.queued > link.limit():
                    link.blocked = True
            link.take_turn(self)
            link.pump()
            self.conn.update_reading(self.src)
            return
        proxy = self.proxy
        if (kind == "data" and not self.q and proxy.delay == 0
                and proxy.jitter == 0 and self._can_write()
                and not self.dst.write_paused):
            self._write(payload)        # fast path, nothing queued
            return
        self._enqueue(self.loop.time(), kind, payload)
        self.flush()

    def _enqueue(self, now, kind, payload):
        """Into the delay queue: due after delay and jitter, and never
        before the event ahead of it."""
        due = now + self.proxy.delay
        if self.proxy.jitter > 0:
            due += random.uniform(0, self.proxy.jitter)
        if due < self.last_due:
            due = self.last_due
        self.last_due = due
        self.q.append((due, kind, payload))
        if kind == "data":
            self.pending += len(payload)

    def _draw_loss(self, first):
        """The next lost segment: segments first, first+1, ... are each
        lost with probability link.loss (a geometric draw)."""
        p = self.link.loss
        good = 0
        if p < 1:
            good = int(math.log(1.0 - random.random()) / math.log1p(-p))
        self.loss_at = (first + good) * SEGMENT

    def release(self, now, piece):
        """From the rate queue on to the delay queue: the events at its
        head and up to piece data bytes (all when piece is None), unless a
        lost segment stalls the stream first. Returns the data bytes
        moved."""
        link = self.link
        moved = 0
        while self.rq and not self.dead and self.stall is None:
            kind, payload = self.rq[0]
            if kind != "data":
                self.rq.popleft()
                self._enqueue(now, kind, payload)
                continue
            if piece is not None and moved >= piece:
                break
            off = self.rq_off
            n = len(payload) - off
            if piece is not None:
                n = min(n, piece - moved)
            if link.loss > 0:
                if self.loss_at is None or self.loss_at < self.sent:
                    self._draw_loss(-(-self.sent // SEGMENT))
                if self.loss_at == self.sent:
                    # Lost: resent after rto, and not lost again.
                    link.stalls += 1
                    self._draw_loss(self.sent // SEGMENT + 1)
                    self.stall = self.loop.call_at(now + self.proxy.rto,
                                                   self._unstall)
                    break
                n = min(n, self.loss_at - self.sent)
            if off == 0 and n == len(payload):
                chunk = payload
                self.rq.popleft()
            else:
                chunk = memoryview(payload)[off:off + n]
                if off + n == len(payload):
                    self.rq.popleft()
                    self.rq_off = 0
                else:
                    self.rq_off = off + n
            self.sent += n
            self.rq_bytes -= n
            link.queued -= n
            moved += n
            self._enqueue(now, "data", chunk)
        self.flush()
        return moved

    def _unstall(self):
        self.stall = None
        if self.dead:
            return
        self.link.take_turn(self)
        self.link.pump()

    def _write(self, data):
        link = self.link
        if link.corrupt > 0:
            link.corrupt -= 1
            data = bytearray(data)
            data[len(data) // 2] ^= 0x01
        if link.capture is not None:
            link.save(data)
        self.dst.transport.write(data)
        link.bytes += len(data)

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
        self.ab = Pipe(self, self.down, self.up, proxy.links["ab"])
        self.ba = Pipe(self, self.up, self.down, proxy.links["ba"])
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
        high = QUEUE_BASE + int((self.proxy.delay_ms + self.proxy.jitter_ms)
                                * QUEUE_PER_MS)
        if pipe.pending > high:
            pipe.flow_paused = True
        elif pipe.pending <= high // 2:
            pipe.flow_paused = False
        want = (self.proxy.forwarding and self.state == "established"
                and not side.got_eof and not pipe.flow_paused
                and not pipe.link.blocked
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
        self.jitter = 0.0
        self.jitter_ms = 0.0
        self.rto = 0.2
        self.rto_ms = 200.0
        self.conns = set()
        self.next_id = 0
        self.links = {d: Link(self, d) for d in DIRS}
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
        if cmd in ("jitter", "rto"):
            lo = 0 if cmd == "jitter" else 1
            hi = 3600 * 1000 if cmd == "jitter" else 60 * 1000
            if len(args) != 1:
                return "error usage: %s MS" % cmd
            ms = parse_number(args[0])
            if ms is None:
                return "error bad %s %r" % (cmd, args[0])
            if not lo <= ms <= hi:
                return "error %s out of range (%d..%d ms)" % (cmd, lo, hi)
            if cmd == "jitter":
                self.jitter_ms = ms
                self.jitter = ms / 1000.0
            else:
                self.rto_ms = ms
                self.rto = ms / 1000.0
            return "ok %s %g" % (cmd, ms)
        if cmd in ("rate", "queue", "loss"):
            return self.link_setting(cmd, args)
        if cmd == "corrupt":
            if len(args) not in (1, 2) or args[0] not in DIRS:
                return "error usage: corrupt ab|ba [N]"
            n = 1
            if len(args) == 2:
                try:
                    n = int(args[1])
                except ValueError:
                    n = -1
                if n < 0:
                    return "error bad count %r" % args[1]
            self.links[args[0]].corrupt = n
            return "ok corrupt %s %d" % (args[0], n)
        if cmd == "capture":
            if args == ["off"]:
                for link in self.links.values():
                    link.stop_capture()
                return "ok capture off"
            if len(args) != 2 or args[0] not in DIRS:
                return "error usage: capture ab|ba PATH|off, capture off"
            link = self.links[args[0]]
            if args[1] == "off":
                link.stop_capture()
            else:
                err = link.set_capture(args[1])
                if err is not None:
                    return "error " + err
            return "ok capture %s %s" % (args[0], args[1])
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
            for link in self.links.values():
                link.pump()
            return "ok restore reset=%d" % nreset
        if cmd == "reset":
            cs = list(self.conns)
            for c in cs:
                c.reset()
            return "ok reset conns=%d" % len(cs)
        if cmd == "stats":
            return self.stats()
        return "error unknown command %r" % cmd

    def link_setting(self, cmd, args):
        """rate, queue or loss [ab|ba] VALUE."""
        dirs = DIRS
        if args and args[0] in DIRS:
            dirs, args = (args[0],), args[1:]
        if cmd == "rate":
            usage, parse = "R", parse_rate
        elif cmd == "queue":
            usage, parse = "BYTES|auto", parse_queue
        else:
            usage, parse = "PCT", parse_loss
        if len(args) != 1:
            return "error usage: %s [ab|ba] %s" % (cmd, usage)
        try:
            value = parse(args[0])
        except ValueError as e:
            return "error bad %s %r%s" % (cmd, args[0],
                                          ": %s" % e if str(e) else "")
        for d in dirs:
            link = self.links[d]
            if cmd == "rate":
                link.set_rate(value)
            elif cmd == "queue":
                link.set_queue(value)
            else:
                link.set_loss(value / 100.0)
        shown = []
        for d in dirs:
            link = self.links[d]
            shown.append("%s=%s" % (d, link.rate if cmd == "rate" else
                                    link.limit() if cmd == "queue" else
                                    "%g" % (link.loss * 100)))
        return "ok %s %s" % (cmd, " ".join(shown))

    def stats(self):
        ab, ba = self.links["ab"], self.links["ba"]
        qab = ab.queued + sum(c.ab.pending for c in self.conns)
        qba = ba.queued + sum(c.ba.pending for c in self.conns)
        return ("ok conns=%d bytes_ab=%d bytes_ba=%d state=%s"
                " queued_ab=%d queued_ba=%d rate_ab=%d rate_ba=%d"
                " queue_ab=%d queue_ba=%d delay=%g jitter=%g"
                " loss_ab=%g loss_ba=%g rto=%g stalls_ab=%d stalls_ba=%d"
                " corrupt_ab=%d corrupt_ba=%d capture_ab=%s capture_ba=%s"
                % (len(self.conns), ab.bytes, ba.bytes,
                   "forwarding" if self.forwarding else "cut",
                   qab, qba, ab.rate, ba.rate, ab.limit(), ba.limit(),
                   self.delay_ms, self.jitter_ms,
                   ab.loss * 100, ba.loss * 100, self.rto_ms,
                   ab.stalls, ba.stalls, ab.corrupt, ba.corrupt,
                   ab.capture_path or "off", ba.capture_path or "off"))

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
        for link in self.links.values():
            link.stop_capture()
        for c in list(self.conns):
            for s in (c.down, c.up):
                if s.transport is not None and not s.lost:
                    s.transport.abort()


def parse_number(s):
    """A finite float, or None."""
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse_rate(s):
    """bits/s from "10mbit", "500kbit", "1gbit", "2.5mbit", "1000000";
    0 for "0" or "off" (unlimited)."""
    t = s.lower()
    if t == "off":
        return 0
    mult = 1
    for unit, m in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3),
                    ("bit", 1)):
        if t.endswith(unit):
            t, mult = t[:-len(unit)], m
            break
    v = parse_number(t)
    if v is None or v < 0:
        raise ValueError("want a number of bits/s, kbit, mbit or gbit")
    bits = int(round(v * mult))
    if bits != 0 and not 1000 <= bits <= 100 * 10**9:
        raise ValueError("out of range (1kbit..100gbit)")
    return bits


def parse_queue(s):
    """Bytes from "262144", "256k", "4m", "1g"; None for "auto"."""
    t = s.lower()
    if t == "auto":
        return None
    mult = 1
    for unit, m in (("kib", 1 << 10), ("mib", 1 << 20), ("gib", 1 << 30),
                    ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30)):
        if t.endswith(unit):
            t, mult = t[:-len(unit)], m
            break
    v = parse_number(t)
    if v is None:
        raise ValueError("want bytes (k, m, g: KiB, MiB, GiB) or auto")
    n = int(v * mult)
    if not 1 <= n <= 1 << 30:
        raise ValueError("out of range (1..1g)")
    return n


def parse_loss(s):
    v = parse_number(s)
    if v is None or not 0 <= v <= 100:
        raise ValueError("want a percentage, 0..100")
    return v


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
    for name, values in (("rate", args.rate), ("delay", [args.delay]),
                         ("jitter", [args.jitter]), ("loss", args.loss),
                         ("rto", [args.rto]), ("queue", args.queue)):
        for v in values or []:
            if v is None:
                continue
            reply = proxy.command1("%s %s" % (name, v))
            if not reply.startswith("ok"):
                warn("--%s %s: %s" % (name, v, reply))
                return 2

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


# PreciseSelector polls instead of sleeping this close to a timer.
SPIN_S = 0.0003


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class PreciseSelector(selectors.EpollSelector):
    """epoll waits in whole milliseconds (Python rounds a timeout up), which
    turned a delay of 0.5 ms into 1-2 ms. Here a timerfd armed with the exact
    timeout sits in the same epoll set, so the loop wakes just before the next
    timer is due, then polls for the last SPIN_S. The timerfd is not a
    registered key: select() never returns it."""

    _libc = None

    def __init__(self):
        super().__init__()
        if PreciseSelector._libc is None:
            PreciseSelector._libc = ctypes.CDLL(None, use_errno=True)
            # PR_SET_TIMERSLACK: 1 ns instead of 50 us for this process
            PreciseSelector._libc.prctl(29, 1, 0, 0, 0)
        # CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC
        self._tfd = self._libc.timerfd_create(1, os.O_NONBLOCK | os.O_CLOEXEC)
        if self._tfd < 0:
            e = ctypes.get_errno()
            super().close()
            raise OSError(e, os.strerror(e))
        self._selector.register(self._tfd, select.EPOLLIN)

    def _arm(self, seconds):
        spec = _Itimerspec()
        if seconds > 0:
            ns = max(1, int(seconds * 1e9))
            spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(ns, 1000000000)
        self._libc.timerfd_settime(self._tfd, 0, ctypes.byref(spec), None)

    def select(self, timeout=None):
        if timeout is None or timeout <= 0:
            return super().select(timeout)
        deadline = time.monotonic() + timeout
        if timeout > SPIN_S:
            self._arm(timeout - SPIN_S)
            try:
                ready = super().select(timeout)
            finally:
                self._arm(0)
                try:
                    os.read(self._tfd, 8)
                except OSError:
                    pass
            if ready:
                return ready
        # the last SPIN_S before a timer: poll, so that waking an idle CPU
        # (a few hundred microseconds in a VM) does not add to the delay
        while True:
            ready = super().select(0)
            if ready or time.monotonic() >= deadline:
                return ready

    def close(self):
        if self._tfd >= 0:
            os.close(self._tfd)
            self._tfd = -1
        super().close()


def precise_loop():
    """An event loop whose timers fire on time (PreciseSelector), or the
    default one where timerfd is missing."""
    try:
        return asyncio.SelectorEventLoop(PreciseSelector())
    except (OSError, AttributeError):
        return asyncio.new_event_loop()


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
        description="User-space TCP link proxy with cut/reset/delay control "
        "and rate, jitter, loss and corruption.")
    ap.add_argument("--listen", help="HOST:PORT to accept connections on")
    ap.add_argument("--target", help="HOST:PORT to forward them to")
    ap.add_argument("--control", required=True,
                    help="unix socket path for control commands")
    ap.add_argument("--pidfile", help="write our pid here")
    ap.add_argument("--cmd", help="client mode: send this command, print "
                    "the reply, exit 0 on ok")
    ap.add_argument("--verbose", action="store_true",
                    help="log connection events on stderr")
    ap.add_argument("--rate", action="append", metavar="[ab|ba] R",
                    help="start with this rate (as the rate command)")
    ap.add_argument("--delay", metavar="MS",
                    help="start with this delay (as the delay command)")
    ap.add_argument("--jitter", metavar="MS",
                    help="start with this jitter (as the jitter command)")
    ap.add_argument("--loss", action="append", metavar="[ab|ba] PCT",
                    help="start with this loss (as the loss command)")
    ap.add_argument("--rto", metavar="MS",
                    help="start with this rto (as the rto command)")
    ap.add_argument("--queue", action="append", metavar="[ab|ba] BYTES",
                    help="start with this queue (as the queue command)")
    args = ap.parse_args()
    VERBOSE = args.verbose

    if args.cmd is not None:
        return run_client(args)
    if not args.listen or not args.target:
        ap.error("--listen and --target are required (or --cmd for client "
                 "mode)")
    try:
        with asyncio.Runner(loop_factory=precise_loop) as runner:
            return runner.run(run_proxy(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
