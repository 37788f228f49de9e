#!/usr/bin/env bash
# The replication link fails under load: a dials b through the link proxy,
# and while a client keeps writing to a (4 connections, 8 writes in flight
# each, over a 64M region, so blocks are rewritten during resyncs) the link
# is cut (blackhole: only the peer timeout tells) and restored four times,
# and reset (RST) twice: once while connected and in sync, once as soon as
# a starts resyncing after the last reconnection. Every write must complete
# without error and none may take longer than the peer timeout plus a
# margin; writes complete while a is alone; each time the link is back the
# nodes reconnect and resync; at the end every block holds its last
# acknowledged write on both nodes and the data areas are equal byte for
# byte.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=128M
export PEER_TIMEOUT=${PEER_TIMEOUT:-2}
BS=4096
FIRST=$((32 * 1024 * 1024))  # the client writes [FIRST, FIRST + NBLOCKS * BS): 64M
NBLOCKS=16384
NWORKERS=4
QD=8
CUTS=4
ALONE=1.5   # s a keeps writing alone before the link is restored
# No write may take longer than the peer timeout plus this margin (s), nor
# may the writes as a whole stop completing for longer: generous, the
# machine is shared.
LAT_MARGIN=4

# nbdload.py: a minimal fixed-newstyle NBD client (OPT_GO with block sizes,
# simple replies).
#   run HOST PORT LOGPREFIX NWORKERS QD FIRST BS NBLOCKS STOPFILE
#     worker w owns blocks w, w+NWORKERS, ... and writes them round and
#     round, QD writes in flight on its own connection (a block is never in
#     flight twice: a worker owns far more blocks than QD), until STOPFILE
#     exists; then it waits for every reply and sends a FLUSH. Each reply is
#     logged in LOGPREFIX.w as "t_sent t_acked offset gen". Exit 0 only if
#     every write succeeded.
#   check SPEC LOGPREFIX BS FILE...
#     the last acknowledged write of every block is what each FILE holds,
#     and, when SPEC is not '-', what the NBD server at HOST:PORT returns.
# Pattern of write (offset o, generation g): sha256("tandem-130:o:g") repeated.
cat >"$T/nbdload.py" <<'EOF'
import glob, hashlib, os, socket, struct, sys, threading, time

def pattern(off, gen, bs):
    d = hashlib.sha256(b"tandem-130:%d:%d" % (off, gen)).digest()
    return d * (bs // len(d))

sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import connect, recvall  # noqa: E402

def hdr(cmd, h, off, length):
    return struct.pack(">IHHQQI", 0x25609513, 0, cmd, h, off, length)

def worker(host, port, logp, w, nw, qd, first, bs, nblocks, stopfile, res):
    try:
        s, _ = connect(host, port)
    except Exception as e:
        res[w] = "connect: %s" % e
        return
    slots = threading.Semaphore(qd)
    lock = threading.Lock()
    inflight = {}
    FLUSH_H = 1 << 62
    rx_err = []
    log = open("%s.%d" % (logp, w), "w")

    def rx():
        try:
            while True:
                magic, err, h = struct.unpack(">IIQ", recvall(s, 16))
                if magic != 0x67446698:
                    raise ConnectionError("bad reply magic %x" % magic)
                now = time.time()
                if h == FLUSH_H:
                    if err:
                        raise IOError("NBD error %d on FLUSH" % err)
                    return
                with lock:
                    off, gen, t = inflight.pop(h)
                if err:
                    raise IOError("NBD error %d on the write at %d" % (err, off))
                log.write("%.6f %.6f %d %d\n" % (t, now, off, gen))
                slots.release()
        except Exception as e:
            rx_err.append("%s: %s" % (type(e).__name__, e))
            for _ in range(qd + 1):
                slots.release()

    rt = threading.Thread(target=rx)
    rt.start()
    blocks = list(range(w, nblocks, nw))
    h = gen = 0
    try:
        while not os.path.exists(stopfile) and not rx_err:
            for blk in blocks:
                slots.acquire()
                if rx_err:
                    break
                off = first + blk * bs
                gen += 1
                h += 1
                with lock:
                    inflight[h] = (off, gen, time.time())
                s.sendall(hdr(1, h, off, bs) + pattern(off, gen, bs))
                if gen % 64 == 0:
                    log.flush()
                    if os.path.exists(stopfile):
                        break
        for _ in range(qd):
            slots.acquire()
        if not rx_err:
            s.sendall(hdr(3, FLUSH_H, 0, 0))
    except Exception as e:
        rx_err.append("send: %s: %s" % (type(e).__name__, e))
    rt.join()
    log.close()
    res[w] = rx_err[0] if rx_err else "ok (%d writes)" % gen

def main():
    if sys.argv[1] == "run":
        host, port, logp = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        nw, qd, first, bs, nblocks = map(int, sys.argv[5:10])
        stopfile = sys.argv[10]
        res = [None] * nw
        ts = [threading.Thread(target=worker, args=(host, port, logp, w, nw, qd, first, bs, nblocks, stopfile, res))
              for w in range(nw)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for w, r in enumerate(res):
            print("worker %d: %s" % (w, r), file=sys.stderr)
        sys.exit(0 if all(r and r.startswith("ok") for r in res) else 1)
    spec, logp, bs, files = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
    last = {}
    for p in glob.glob(logp + ".*"):
        for l in open(p):
            t0, t1, off, gen = l.split()
            off, gen = int(off), int(gen)
            if gen > last.get(off, 0):
                last[off] = gen
    sources = [(f, open(f, "rb")) for f in files]
    conn = None
    if spec != "-":
        host, port = spec.rsplit(":", 1)
        conn, _ = connect(host, int(port))
    bad = {}
    for h, off in enumerate(sorted(last), 1):
        want = pattern(off, last[off], bs)
        for name, f in sources:
            f.seek(off)
            if f.read(bs) != want:
                bad.setdefault(name, []).append(off)
        if conn is not None:
            conn.sendall(hdr(0, h, off, bs))
            magic, err, rh = struct.unpack(">IIQ", recvall(conn, 16))
            if magic != 0x67446698 or err or rh != h or recvall(conn, bs) != want:
                bad.setdefault("nbd://" + spec, []).append(off)
    for name, offs in bad.items():
        print("%s: %d of %d blocks lack their last acknowledged write, first at %s" %
              (name, len(offs), len(last), ", ".join(hex(o) for o in sorted(offs)[:8])), file=sys.stderr)
    print("checked the last acknowledged write of %d blocks" % len(last), file=sys.stderr)
    sys.exit(1 if bad or not last else 0)

main()
EOF

now() { date +%s.%N; }
# Events on the same clock as the client's log: "name time".
event() { echo "$1 $(now)" >>"$T/events"; }
transitions() { grep -c "connection to b: connected -> connecting" "$T/a.log" || true; }
syncsources() { grep -c "replication with b: off -> syncsource" "$T/a.log" || true; }

PROXY=1 write_config2 "$T/c.ini"
proxy_start
start_pair

python3 "$T/nbdload.py" run 127.0.0.1 "${NBDP[a]}" "$T/acks" "$NWORKERS" "$QD" "$FIRST" "$BS" \
	"$NBLOCKS" "$T/stop" 2>"$T/load.err" &
LPID=$!
track "$LPID"
event start
sleep 1.5

# reset_link NAME: RST on both sides of the link; a must notice at once.
reset_link()
{
	local before k
	before=$(transitions)
	event "$1"
	proxy reset
	for ((k = 0; k < 100; k++)); do
		[ "$(transitions)" -gt "$before" ] && return 0
		sleep 0.1
	done
	fail "$1: a did not notice the reset of the link within 10 s"
}

for ((i = 1; i <= CUTS; i++)); do
	wait_for b "p['replication'] == 'established'" 60
	sleep 1.5
	if [ "$i" -eq "$CUTS" ]; then
		# A reset while connected and in sync.
		reset_link reset1
		wait_connected 30
		wait_for a "p['replication'] == 'established'" 60
		wait_for b "p['replication'] == 'established'" 60
		sleep 1.5
	fi
	alive "$LPID" || { cat "$T/load.err" >&2; fail "the client ended early"; }
	before=$(transitions)
	event "cut$i"
	proxy cut
	# A blackhole: both sides notice only by the peer timeout.
	wait_for a "p['connection'] != 'connected'" $((PEER_TIMEOUT + 10))
	event "alone$i"
	wait_for b "p['connection'] != 'connected'" $((PEER_TIMEOUT + 10))
	[ "$(jfield b "v['disk']")" = outdated ] || fail "cut $i: b's disk is $(jfield b "v['disk']"), expected outdated"
	[ "$(jfield a "v['role']")" = primary ] || fail "cut $i: a is no longer primary"
	sleep "$ALONE"
	oos=$(jfield a "p['out_of_sync_bytes']")
	[ "$oos" -gt 0 ] || fail "cut $i: a shows no bytes out of sync while writing alone"
	[ "$(transitions)" -gt "$before" ] || fail "cut $i: a never left 'connected'"
	nsrc=$(syncsources)
	event "restore$i"
	proxy restore
	if [ "$i" -eq "$CUTS" ]; then
		# The link is reset as soon as a starts resyncing to b (often
		# while the resync runs, depending on timing).
		for ((k = 0; k < 3000; k++)); do
			[ "$(syncsources)" -gt "$nsrc" ] && break
			sleep 0.01
		done
		[ "$(syncsources)" -gt "$nsrc" ] || fail "cut $i: a did not start resyncing within 30 s of the restore"
		reset_link reset2
	fi
	wait_connected 30
	event "back$i"
	log "cut $i: a alone with $oos bytes out of sync; reconnected"
	wait_for a "p['replication'] == 'established'" 60
done

# The client stops right after the last resync, so that the last write of
# many blocks is one made while it ran (later writes would hide a resync
# that left stale data on b).
event stop
touch "$T/stop"
for ((k = 0; k < 300; k++)); do
	alive "$LPID" || break
	sleep 0.1
done
alive "$LPID" && { cat "$T/load.err" >&2; fail "the client's writes did not complete within 30 s of the end"; }
rc=0
wait "$LPID" || rc=$?
_forget "$LPID"
[ "$rc" -eq 0 ] || { cat "$T/load.err" >&2; fail "the client's writes failed"; }

# Latencies: no write, and no pause of all writes, beyond the bound; writes
# completed during every period a was alone.
python3 - "$T/acks" "$T/events" "$PEER_TIMEOUT" "$LAT_MARGIN" <<'EOF' ||
import glob, sys
logp, evf, tmo, margin = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
limit = tmo + margin
ev = {}
for l in open(evf):
    name, t = l.split()
    ev[name] = float(t)
acks, worst = [], (0.0, 0.0, 0)
for p in glob.glob(logp + ".*"):
    for l in open(p):
        t0, t1, off, gen = l.split()
        t0, t1 = float(t0), float(t1)
        acks.append(t1)
        if t1 - t0 > worst[0]:
            worst = (t1 - t0, t0, int(off))
acks.sort()
bad = []
rel = lambda t: t - ev["start"]
if worst[0] > limit:
    bad.append("a write took %.2f s (sent at +%.2f s, offset %#x); limit %.1f s" % (worst[0], rel(worst[1]), worst[2], limit))
gap = max(((b - a), a) for a, b in zip(acks, acks[1:]))
if gap[0] > limit:
    bad.append("no write completed for %.2f s from +%.2f s; limit %.1f s" % (gap[0], rel(gap[1]), limit))
i = 1
while "alone%d" % i in ev:
    a, r = ev["alone%d" % i], ev["restore%d" % i]
    n = sum(1 for t in acks if a < t < r)
    if n < 10:
        bad.append("only %d writes completed while a was alone after cut %d (+%.2f .. +%.2f s)" % (n, i, rel(a), rel(r)))
    i += 1
timeline = " ".join("%s=+%.1f" % (k, rel(v)) for k, v in sorted(ev.items(), key=lambda x: x[1]))
print("client: %d writes, worst latency %.3f s, longest pause %.3f s; %s" % (len(acks), worst[0], gap[0], timeline), file=sys.stderr)
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
	fail "writes on a stalled while the link failed"

wait_connected 30
compare_replicas 60
python3 "$T/nbdload.py" check "127.0.0.1:${NBDP[a]}" "$T/acks" "$BS" "$T/a/vol0.img" "$T/b/vol0.img" ||
	fail "blocks lack their last acknowledged write"
n=$(transitions)
log "a left 'connected' $n times ($CUTS cuts, 2 resets)"
[ "$n" -ge $((CUTS + 2)) ] || fail "a left 'connected' only $n times"
[ "$(jfield a "p['out_of_sync_bytes']")" = 0 ] || fail "a still reports bytes out of sync"
stop b
stop a
