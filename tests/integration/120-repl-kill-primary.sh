#!/usr/bin/env bash
# The primary dies (SIGKILL) in the middle of writes. A small NBD client
# writes a distinct pattern to each of many distinct 4K blocks (several
# connections, one write in flight each) and logs every write once its reply
# has arrived. b is frozen (SIGSTOP) 0.3 s before a dies: every
# acknowledged write must already be in b's data area (sync: acknowledged
# only once both have it), and in a's. Then b runs on and notices the loss;
# a restarts as secondary (consistent, then uptodate once it reaches b), is promoted back, resyncs
# the regions that were in flight to b, and then every acknowledged write
# reads back through NBD on a and from b's data area, and both data areas
# are equal.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3 qemu-io

export VOL_SIZE=256M
PEER_TIMEOUT=${PEER_TIMEOUT:-2}
BS=4096
FIRST=$((8 * 1024 * 1024))   # the client writes from here ...
NBLOCKS=61440                # ... 240M worth of 4K blocks, each at most once
NWORKERS=6
RATE=1500                    # writes/s per connection at most: the blocks last > 6 s
KILL_AT=2.5                  # s of writes before a is killed
FREEZE=0.3                   # s b is frozen before a is killed (<< PEER_TIMEOUT)

# nbdw.py: a minimal fixed-newstyle NBD client (OPT_GO with block sizes,
# simple replies).
#   write HOST PORT LOGPREFIX NWORKERS FIRST BS NBLOCKS RATE
#     worker w writes blocks w, w+NWORKERS, ... (one request in flight per
#     connection, at most RATE writes/s) and appends the offset of each
#     acknowledged write to LOGPREFIX.w, flushed per line. Stops at the end
#     of its blocks or when the connection fails (prints why on stderr).
#   check SPEC LOGPREFIX BS FILE...
#     every logged offset holds its pattern in each FILE; SPEC, when not '-',
#     is HOST:PORT of an NBD server whose export is read as well.
# Pattern of the block at offset o: sha256("tandem-120:<o>") repeated.
cat >"$T/nbdw.py" <<'EOF'
import glob, hashlib, os, socket, struct, sys, threading, time

def pattern(off, bs):
    d = hashlib.sha256(b"tandem-120:%d" % off).digest()
    return d * (bs // len(d))

sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import connect, recvall  # noqa: E402

handle = [0]
def request(s, cmd, off, length, data=b""):
    handle[0] += 1
    h = handle[0]
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, cmd, h, off, length) + data)
    magic, err, rh = struct.unpack(">IIQ", recvall(s, 16))
    if magic != 0x67446698 or rh != h:
        raise ConnectionError("bad reply magic %x or handle %d (sent %d)" % (magic, rh, h))
    if err:
        raise IOError("NBD error %d for cmd %d at %d+%d" % (err, cmd, off, length))
    return recvall(s, length) if cmd == 0 else None

def worker(host, port, logp, w, nw, first, bs, nblocks, rate, res):
    try:
        s, _ = connect(host, port)
    except Exception as e:
        res[w] = "connect: %s" % e
        return
    with open("%s.%d" % (logp, w), "w") as log:
        try:
            t0 = time.monotonic()
            for n, blk in enumerate(range(w, nblocks, nw)):
                ahead = t0 + n / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
                off = first + blk * bs
                request(s, 1, off, bs, pattern(off, bs))
                log.write("%d\n" % off)
                log.flush()
            res[w] = "done"
        except Exception as e:
            res[w] = "%s: %s" % (type(e).__name__, e)

def main():
    if sys.argv[1] == "write":
        host, port, logp = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        nw, first, bs, nblocks, rate = map(int, sys.argv[5:10])
        res = [None] * nw
        ts = [threading.Thread(target=worker, args=(host, port, logp, w, nw, first, bs, nblocks, rate, res))
              for w in range(nw)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for w, r in enumerate(res):
            print("worker %d: %s" % (w, r), file=sys.stderr)
        sys.exit(0)
    spec, logp, bs, files = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
    offs = sorted(int(l) for p in glob.glob(logp + ".*") for l in open(p) if l.strip())
    sources = [(f, open(f, "rb")) for f in files]
    conn = None
    if spec != "-":
        host, port = spec.rsplit(":", 1)
        conn, _ = connect(host, int(port))
    bad = {}
    for off in offs:
        want = pattern(off, bs)
        for name, f in sources:
            f.seek(off)
            if f.read(bs) != want:
                bad.setdefault(name, []).append(off)
        if conn is not None and request(conn, 0, off, bs) != want:
            bad.setdefault("nbd://" + spec, []).append(off)
    for name, offs_bad in bad.items():
        print("%s: %d of %d acknowledged writes missing, first at %s" %
              (name, len(offs_bad), len(offs), ", ".join(hex(o) for o in offs_bad[:8])), file=sys.stderr)
    print("checked %d acknowledged writes in %s%s" % (len(offs), " ".join(files),
          " and over NBD" if conn else ""), file=sys.stderr)
    sys.exit(1 if bad or not offs else 0)

main()
EOF

write_config2 "$T/c.ini"
start_pair

python3 "$T/nbdw.py" write 127.0.0.1 "${NBDP[a]}" "$T/acked" "$NWORKERS" "$FIRST" "$BS" "$NBLOCKS" "$RATE" \
	2>"$T/writer.err" &
WPID=$!
track "$WPID"

nacked() { cat "$T"/acked.* 2>/dev/null | wc -l; }
sleep "$KILL_AT"
# The kill must land in the middle of writes: the client is still writing.
n1=$(nacked)
sleep 0.3
n2=$(nacked)
alive "$WPID" || { cat "$T/writer.err" >&2; fail "the client ended before a was killed"; }
[ "$n2" -gt "$n1" ] || { cat "$T/writer.err" >&2; fail "no write completed in the 0.3 s before the kill"; }
# b is frozen (SIGSTOP) shortly before a dies, so that it applies nothing
# more of what a had only sent: what b's data area holds then is what b had
# written when a died. A write acknowledged to the client must be in it. In
# the FREEZE seconds between, well below the peer timeout, a must not
# acknowledge anything (b answers nothing): a primary that acknowledged
# before its peer had the write would do so, and be caught.
kill -STOP "${NPID[b]}"
sleep "$FREEZE"
crash a
grep -q "did not answer" "$T/a.log" &&
	{ kill -CONT "${NPID[b]}"; fail "a declared b gone within the $FREEZE s it was frozen (machine too slow?): the check below would be void"; }
log "a killed after $n2+ acknowledged writes"

# The client's connections die with a; it must end by itself.
for ((i = 0; i < 100; i++)); do
	alive "$WPID" || break
	sleep 0.1
done
if alive "$WPID"; then
	kill -CONT "${NPID[b]}"
	fail "the client still runs 10 s after a was killed"
fi
wait "$WPID" || true
_forget "$WPID"
total=$(nacked)
log "$total writes acknowledged before a died"
rc=0
python3 "$T/nbdw.py" check - "$T/acked" "$BS" "$T/b/vol0.img" || rc=$?
kill -CONT "${NPID[b]}"
[ "$rc" -eq 0 ] || fail "writes acknowledged by a are missing on b when a dies"
grep -q "worker.*: done" "$T/writer.err" && { cat "$T/writer.err" >&2; fail "a worker ran out of blocks before the kill: raise NBLOCKS"; }
grep -qE "IOError|NBD error|refused" "$T/writer.err" &&
	{ cat "$T/writer.err" >&2; fail "a write failed before a was killed"; }
[ "$total" -ge 200 ] || fail "only $total writes acknowledged: the test means little"

# b lost its primary: not connected, its disk outdated (repl.h), still
# secondary; a's data area holds every acknowledged write too.
wait_for b "p['connection'] != 'connected'" $((PEER_TIMEOUT + 10))
[ "$(jfield b "v['role']")" = secondary ] || fail "b changed role by itself"
[ "$(jfield b "v['disk']")" = outdated ] || fail "b: disk is $(jfield b "v['disk']"), expected outdated"
python3 "$T/nbdw.py" check - "$T/acked" "$BS" "$T/a/vol0.img" ||
	fail "acknowledged writes are missing in a's data area after its crash"

# a comes back as secondary with its disk consistent (it has not reached b
# yet); the connect to b (outdated) makes it uptodate, and it is promoted back.
start a
[ "$(jfield a "v['role']")" = secondary ] || fail "a restarted as $(jfield a "v['role']"), expected secondary"
this_run a | grep -c "volume vol0: secondary, consistent," >/dev/null ||
	fail "a did not restart with its disk consistent"
wait_for a "v['disk'] == 'uptodate'" 30
ctl_on a primary vol0 >"$T/promote.out" 2>&1 ||
	{ cat "$T/promote.out" >&2; fail "the daemon refused to promote a (disk uptodate) after its restart"; }
[ "$(jfield a "v['role']")" = primary ] || fail "a is not primary after 'primary vol0'"
wait_connected 30
ctl_on a wait-sync vol0 --timeout 60 || fail "a: wait-sync did not succeed"
ctl_on b wait-sync vol0 --timeout 60 || fail "b: wait-sync did not succeed"
# The regions that were in flight may differ: a, the crashed primary, copies
# them to b.
grep -q "replication with b: off -> syncsource" "$T/a.log" || fail "a never resynced to b after its restart"
grep -q "full sync" "$T/a.log" "$T/b.log" && fail "a's restart caused a full sync"
[ "$(jfield b "v['disk']")" = uptodate ] || fail "b: disk not uptodate after the resync"

python3 "$T/nbdw.py" check "127.0.0.1:${NBDP[a]}" "$T/acked" "$BS" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing after a's restart and the resync"
compare_replicas 60

# Replication carries on: new writes on a reach b.
qemu-io -f raw "$(uri a)" -c "write -P 0x5a 0 1M" -c "write -P 0xa5 $((FIRST + 4096)) 64k" \
	-c "flush" >/dev/null || fail "qemu-io writes to the promoted a failed"
compare_replicas 60
stop b
stop a
