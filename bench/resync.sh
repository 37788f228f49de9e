#!/usr/bin/env bash
# Resync under load over a shaped link: what a returning peer costs the front end.
#
# Two network namespaces joined by a veth pair (10.231.43.1 in A, .2 in B)
# stand for two sites; the link is shaped with tbf on both veth ends' egress
# (bandwidth only, no added delay), like bench/repl.sh, whose namespaces
# (tbr-*, 10.231.42.x) this script's (tbs-*, 10.231.43.x) do not collide with.
# A Tandem pair runs on it: tandemd node a in A (primary, NBD), node b in B,
# volume vol0 with replication = sync, bitmap-granularity and resync-rate left
# at their defaults (64K, auto). fio (nbd engine) runs in A. Measurements:
#   (a) baseline   pair connected and in sync: 4 KiB random write QD8 for
#                  RUNTIME s (random data refilled for every write); IOPS and
#                  completion latency p50, p99, max
#   (b) under load `tandemctl disconnect vol0` on a, RESYNC_MB MiB written
#                  sequentially (1 MiB, random data) from offset 0, `connect`,
#                  and at once the job of (a) while the resync runs; status
#                  --json of node a sampled every 0.5 s. Reported: IOPS and p99
#                  against (a), the worst request, the resync's throughput while
#                  the job ran (from out_of_sync_bytes) as a fraction of the
#                  link and of what the foreground leaves of it, and the time
#                  from connect to in sync (tandemctl wait-sync)
#   (c) idle       the same disconnect / write / connect with no foreground
#                  load: resync MB/s as a fraction of the link rate, and on the
#                  unshaped link as a fraction of the local disk's sequential
#                  write rate (fio, O_DIRECT, 1 MiB QD4, 10 s, on a file in the
#                  work directory)
#   (d) seed replay disconnect, SEED_MB MiB sequential 1 MiB writes, connect,
#                  and keep writing sequentially (1 MiB QD1) until in sync or
#                  SEED_LIMIT s: the longest foreground request (stall) while
#                  the resync ran, and how long the resync took
#   (e) anchor     the same on qemu's side, in the same namespaces and on the
#                  same link, Tandem idle: qemu-storage-daemon in A exports a
#                  raw file of ANCHOR_MB MiB (random data, written locally
#                  first, so the mirror copies all of it) over NBD (port 10810)
#                  and mirrors it (blockdev-mirror sync=full copy-mode=
#                  write-blocking) to qemu-nbd in B (10810), both O_DIRECT +
#                  io_uring as in bench/repl.sh. The job of (a) starts as soon
#                  as the mirror job exists (and TCP_NODELAY is set, below), so
#                  it runs during the copy; query-block-jobs is sampled every
#                  0.5 s on one QMP connection. Then, once the mirror is READY
#                  (at most SYNC_TIMEOUT s after the job), the job again, in
#                  sync: the anchor's baseline. Reported: both, the ratios to
#                  that baseline, the copy's rate while the job ran (the fall
#                  of len - offset: active writes add to both) as a fraction
#                  of the link and of its leftover, mirror start -> READY, and
#                  Tandem/anchor during the resync/copy with (b)'s figures.
#                  TCP_NODELAY goes on the target's end of the mirror's
#                  connection right after blockdev-mirror returns (the
#                  connection exists from blockdev-add on; repl.sh sets it
#                  after READY, which here would be after the copy); see
#                  bench/repl.sh for why (ANCHOR_NODELAY=0: stock qemu).
# The whole volume is written once on the unshaped link before anything is
# measured (PREFILL=0 skips), so no job meets unallocated blocks.
#
#   bench/resync.sh                                   link 100 Mbit/s, ~7 min ((e) ~2)
#   LINK=0 bench/resync.sh                            unshaped link only
#   RUNTIME=5 RESYNC_MB=128 SEED_MB=256 SIZE_MB=512 bench/resync.sh   smoke run
# Knobs: LINK (Mbit/s, default 100, 0 = unshaped), RUNTIME (s of the 4 KiB
# job, default 20), SIZE_MB (volume, default 1024), RESYNC_MB (written while
# disconnected in (b) and (c), default 512; make it large enough for the
# resync to outlast the job of (b)), SEED_MB (default 1024), SEED_LIMIT (s the
# writer of (d) runs at most, default 60), SYNC_TIMEOUT (s to wait for in sync
# after the load stopped, default 180), IDLE_UNSHAPED=0 (no unshaped run of
# (c) when LINK is shaped), PREFILL=0, LINKCHECK=0 (skip the TCP goodput check
# of the link), SETTLE (s without writes before each disconnect, default 6:
# a connection loss marks every 4 MiB extent of recent writes out of sync and
# connect merges the peer's uncleaned bits, which after random writes or a
# resync is the whole volume; idle, both are cleaned every 2 s), TANDEM_TIMEOUT
# (s to wait for the pair to connect, default 60),
# PARTS (default "a b c d e": which measurements run; (b) needs (a) for its
# ratios), ANCHOR_MB (the anchor's volume in (e), default SIZE_MB: a full copy
# of 1 GiB at 100 Mbit/s takes ~90 s; make it large enough for the copy to
# outlast the job, and small enough to copy within SYNC_TIMEOUT), ANCHOR_NODELAY
# (default 1), IDLE_RUNS (unshaped idle resyncs, each after its own disk
# measurement, default 3), RESULTS=DIR (keep the result lines, fio's JSON and latency logs, the status
# samples and the daemons' logs there), TANDEM_BUILD (default build).
#
# MB = 10^6 bytes; a link of R Mbit/s carries at most R/8 MB/s. Connect -> in
# sync is known to 0.1 s (wait-sync polls) and includes the ~0.2 s before a
# dials b; (c) divides by the resync's own span from node a's log (-> syncsource
# to -> established) when those lines are there. The resync rate of (b) is the
# fall of out_of_sync_bytes; status's resync_bytes_per_sec counts what was
# sent, regions sent again after foreground writes included. Never asserts
# timings. Exit 0 when it ran, 77 when a tool is missing, 1 when setting up
# failed; a missing qemu-storage-daemon or qemu-nbd skips (e) with a note (77
# when PARTS is "e" alone). Needs root (ip netns, tc).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib-anchor.sh
. bench/lib-anchor.sh # (anchor_nodelay_tool only: (e) keeps its own QMP sampler)
BIN=${TANDEM_BUILD:-build}
LINK=${LINK:-100}
RUNTIME=${RUNTIME:-20}
PARTS=${PARTS:-a b c d e}
IDLE_RUNS=${IDLE_RUNS:-3}
SIZE_MB=${SIZE_MB:-1024}
ANCHOR_MB=${ANCHOR_MB:-$SIZE_MB}
ANCHOR_NODELAY=${ANCHOR_NODELAY:-1}
RESYNC_MB=${RESYNC_MB:-512}
SEED_MB=${SEED_MB:-1024}
SEED_LIMIT=${SEED_LIMIT:-60}
SYNC_TIMEOUT=${SYNC_TIMEOUT:-180}
IDLE_UNSHAPED=${IDLE_UNSHAPED:-1}
PREFILL=${PREFILL:-1}
LINKCHECK=${LINKCHECK:-1}
TANDEM_TIMEOUT=${TANDEM_TIMEOUT:-60}
DISK_S=10     # s of the local disk's sequential write measurement
INTERVAL=0.5  # s between status samples
SETTLE=${SETTLE:-6}

skip() { echo "bench: $*" >&2; exit 77; }
die() { echo "bench: $*" >&2; exit 1; }

for v in LINK RUNTIME SIZE_MB ANCHOR_MB RESYNC_MB SEED_MB SEED_LIMIT SYNC_TIMEOUT TANDEM_TIMEOUT SETTLE; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v: '${!v}' is not a number"
	[ "${!v}" -gt 0 ] || [ "$v" = LINK ] || [ "$v" = SETTLE ] || die "$v must be positive"
done
[ "$RESYNC_MB" -le "$SIZE_MB" ] || die "RESYNC_MB ($RESYNC_MB) exceeds SIZE_MB ($SIZE_MB)"
[ "$SEED_MB" -le "$SIZE_MB" ] || die "SEED_MB ($SEED_MB) exceeds SIZE_MB ($SIZE_MB)"

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, tc)"
for c in fio ip tc python3 nbdinfo timeout ps; do
	command -v $c >/dev/null || skip "$c missing (scripts/deps.sh --bench)"
done
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
DISK_ENGINE=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || DISK_ENGINE=libaio
fio --enghelp=$DISK_ENGINE >/dev/null 2>&1 || skip "fio has neither io_uring nor libaio"
for c in tandemd tandemctl; do [ -x "$BIN/$c" ] || skip "$BIN/$c missing (run make)"; done
part() { [[ " $PARTS " == *" $1 "* ]]; }
ANCHOR_MISSING=
if part e; then
	for c in qemu-storage-daemon qemu-nbd; do
		command -v $c >/dev/null || ANCHOR_MISSING="$c missing (scripts/deps.sh --bench)"
	done
	if [ -n "$ANCHOR_MISSING" ] && [ -z "$(echo " $PARTS " | sed 's/ e / /g' | tr -d ' ')" ]; then
		skip "$ANCHOR_MISSING"
	fi
fi

NA=tbs-a-$$ NB=tbs-b-$$
NET=10.231.43
IPA=$NET.1 IPB=$NET.2
W=$(mktemp -d /var/tmp/tandem-resync.XXXXXX)
PIDS=()
NS_MADE=()
mine() { # PID: still running and our child (so never a reused pid)
	[ "$(ps -o ppid= -p "$1" 2>/dev/null | tr -d ' ')" = "$$" ]
}
running() { # PID: our child and not yet exited (a zombie passes kill -0)
	local s
	mine "$1" || return 1
	s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $s != Z* ]]
}
cleanup() {
	local p alive live=()
	trap - ERR
	set +e
	for p in "${PIDS[@]}"; do mine "$p" && live+=("$p"); done
	for p in "${live[@]}"; do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 50); do
		alive=0
		for p in "${live[@]}"; do running "$p" && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for p in "${live[@]}"; do mine "$p" && kill -9 "$p" 2>/dev/null; done
	for p in "${live[@]}"; do wait "$p" 2>/dev/null || true; done
	# Deleting a namespace takes its veth end, and so its qdisc, with it.
	for p in "${NS_MADE[@]}"; do ip netns del "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "bench: failed at line $LINENO: $BASH_COMMAND" >&2; exit 1' ERR

# ---------------------------------------------------------------- helpers
cat > "$W/goodput.py" <<'PY'
# TCP goodput from A to B: goodput.py recv HOST PORT  |  goodput.py send HOST PORT SECONDS
import os, socket, sys, time
if sys.argv[1] == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[2], int(sys.argv[3]))); s.listen(1); s.settimeout(30)
    c, _ = s.accept(); c.settimeout(30); n = 0; t0 = time.monotonic()
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        n += len(b)
    print(n * 8 / (time.monotonic() - t0) / 1e6)
else:
    for _ in range(100):
        try:
            c = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=30); break
        except OSError:
            time.sleep(0.05)
    buf = os.urandom(1 << 16); end = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < end:
        c.sendall(buf)
    c.close()
PY

cat > "$W/sample.py" <<'PY'
# sample.py OUT INTERVAL CMD...: runs CMD (tandemctl ... status --json) every
# INTERVAL s and appends "UNIXTIME OUTPUT" lines to OUT (the time is the
# middle of the call), until SIGTERM.
import signal, subprocess, sys, time
out, interval, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # subprocess.run kills its child
f = open(out, "a", buffering=1)
nxt = time.monotonic()
while True:
    t0 = time.time()
    try:
        s = subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout
    except subprocess.TimeoutExpired:
        s = ""
    t1 = time.time()
    f.write(f"{(t0 + t1) / 2:.3f} {' '.join(s.split())}\n")
    nxt += interval
    time.sleep(max(0.0, nxt - time.monotonic()))
PY

cat > "$W/waiter.py" <<'PY'
# waiter.py OUT CMD...: runs CMD (tandemctl ... wait-sync) and writes
# "EXITCODE UNIXTIME" to OUT when it returns; SIGTERM ends CMD too.
import signal, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(cmd)
def term(*_):
    p.terminate()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
    sys.exit(143)
signal.signal(signal.SIGTERM, term)
rc = p.wait()
t = time.time()
with open(out + ".tmp", "w") as f:
    f.write(f"{rc} {t:.3f}\n")
import os
os.rename(out + ".tmp", out)
PY

cat > "$W/qmp.py" <<'PY'
# QMP client for qemu-storage-daemon's monitor socket (part e); the monitor
# takes one client at a time.
#   qmp.py SOCK mirror HOST PORT EXPORT OUT INTERVAL
#       adds the NBD target, starts mirror m0 (sync=full, copy-mode=
#       write-blocking) and writes "UNIXTIME start" to OUT; then, every INTERVAL
#       s, "UNIXTIME job OFFSET LEN READY STATUS" (query-block-jobs; the time is
#       the middle of the call), "UNIXTIME event NAME [STATUS]" for each job
#       event (qemu's own timestamp) and, once, "UNIXTIME ready" (the
#       BLOCK_JOB_READY event's time, else the first sample showing it), until
#       SIGTERM; "UNIXTIME gone" and exit 1 if m0 disappears.
#   qmp.py SOCK check      prints m0; exit 1 unless it is READY
import json, signal, socket, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
def connect(path, on_event):
    for _ in range(100):
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(path); break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit(f"qmp: cannot connect to {path}")
    f = s.makefile("rwb")
    def recv():
        while True:
            line = f.readline()
            if not line:
                sys.exit("qmp: monitor closed the connection")
            m = json.loads(line)
            if "event" not in m:
                return m
            on_event(m)
    def cmd(name, **args):
        f.write(json.dumps({"execute": name, "arguments": args}).encode() + b"\n"); f.flush()
        m = recv()
        if "error" in m:
            sys.exit(f"qmp: {name}: {m['error'].get('desc')}")
        return m["return"]
    recv()  # greeting
    cmd("qmp_capabilities")
    return cmd
if sys.argv[2] == "mirror":
    host, port, export, out, interval = sys.argv[3:8]
    interval = float(interval)
    o = open(out, "a", buffering=1)
    ready = False
    def mark_ready(t):
        global ready
        if not ready:
            ready = True
            o.write(f"{t:.6f} ready\n")
    def on_event(m):
        if m["event"] not in ("JOB_STATUS_CHANGE", "BLOCK_JOB_READY", "BLOCK_JOB_COMPLETED",
                              "BLOCK_JOB_ERROR", "BLOCK_JOB_CANCELLED"):
            return
        t = m["timestamp"]["seconds"] + m["timestamp"]["microseconds"] / 1e6
        d = m.get("data", {})
        o.write(f"{t:.6f} event {m['event']} {d.get('status', '')}".rstrip() + "\n")
        if m["event"] == "BLOCK_JOB_READY" and d.get("device") == "m0":
            mark_ready(t)
    cmd = connect(sys.argv[1], on_event)
    cmd("blockdev-add", **{"driver": "nbd", "node-name": "tgt", "export": export,
                           "server": {"type": "inet", "host": host, "port": port}})
    cmd("blockdev-mirror", **{"job-id": "m0", "device": "src", "target": "tgt",
                              "sync": "full", "copy-mode": "write-blocking",
                              "filter-node-name": "mtop"})
    o.write(f"{time.time():.6f} start\n")
    nxt = time.monotonic()
    while True:
        t0 = time.time()
        jobs = [j for j in cmd("query-block-jobs") if j["device"] == "m0"]
        t = (t0 + time.time()) / 2
        if not jobs:
            o.write(f"{t:.6f} gone\n")
            sys.exit(1)
        j = jobs[0]
        o.write(f"{t:.6f} job {j['offset']} {j['len']} {int(bool(j.get('ready')))} {j.get('status')}\n")
        if j.get("ready"):
            mark_ready(t)
        nxt += interval
        time.sleep(max(0.0, nxt - time.monotonic()))
elif sys.argv[2] == "check":
    cmd = connect(sys.argv[1], lambda m: None)
    jobs = [j for j in cmd("query-block-jobs") if j["device"] == "m0"]
    print(json.dumps(jobs))
    sys.exit(0 if jobs and jobs[0].get("ready") and jobs[0].get("status") == "ready" else 1)
PY

anchor_nodelay_tool

cat > "$W/an.py" <<'PY'
# Analysis of one measurement; prints one JSON object (a result line). The
# resync's context comes from the environment: T_CONN (UNIX time of
# `connect`), OOS_DISC and OOS0 (node a's out_of_sync_bytes right after
# `disconnect` and right before `connect`), LINK (Mbit/s), ALOG and LOGPOS
# (node a's log and its line count before `connect`).
import json, os, re, statistics, sys

def fio_write(path):
    t = open(path).read()
    return json.loads(t[t.index("{"):])["jobs"][0]["write"]  # skips the nbd engine's first line

def fio_stats(path):
    w = fio_write(path)
    c = w["clat_ns"]
    p = c.get("percentile", {})
    return {"iops": w["iops"], "bw": w["bw_bytes"], "ios": w["total_ios"],
            "p50": p.get("50.000000", 0) / 1e9, "p99": p.get("99.000000", 0) / 1e9,
            "max": c["max"] / 1e9}

def lat_log(path):
    """fio's per-I/O completion latency log written with log_unix_epoch:
    [(completion UNIX time s, latency s, bytes)], sorted."""
    r = []
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        if len(f) >= 4:
            r.append((int(f[0]) / 1e3, int(f[1]) / 1e9, int(f[3])))
    r.sort()
    return r

def samples(path):
    """status samples of node a: [(UNIX time, replication, oos bytes, sync %, resync B/s)]"""
    r = []
    for line in open(path):
        t, _, js = line.partition(" ")
        try:
            p = json.loads(js)["volumes"][0]["peers"][0]
            r.append((float(t), p["replication"], int(p["out_of_sync_bytes"]),
                      float(p["sync_percent"]), int(p["resync_bytes_per_sec"])))
        except (ValueError, KeyError, IndexError):
            pass
    return r

def oos_at(ss, t):
    """out_of_sync_bytes at time t, linear between the samples around it"""
    if t <= ss[0][0]:
        return ss[0][2]
    for a, b in zip(ss, ss[1:]):
        if a[0] <= t <= b[0]:
            return a[2] + (b[2] - a[2]) * (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else b[2]
    return ss[-1][2]

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100 * len(xs)))] if xs else None

def synced(path):
    """(wait-sync's exit code, UNIX time it returned)"""
    rc, t = open(path).read().split()
    return int(rc), float(t)

def rate_field(ss, t0, t1):
    """median resync_bytes_per_sec that status showed between t0 and t1 while syncsource"""
    v = [s[4] for s in ss if t0 <= s[0] <= t1 and s[1] == "syncsource" and s[4]]
    return statistics.median(v) if v else None

def logspan():
    """From node a's log since LOGPOS: (bytes the resync copied, seconds from
    syncsource to established); None where the lines are not there."""
    def tod(s):
        h, m, x = s.split(":")
        return int(h) * 3600 + int(m) * 60 + float(x)
    t0 = t1 = n = None
    try:
        lines = open(E["ALOG"], errors="replace").readlines()[int(E["LOGPOS"]):]
    except OSError:
        return None, None
    for line in lines:
        try:
            ts = tod(line.split(" ", 1)[0])
        except ValueError:
            continue
        m = re.search(r"resync to \S+ done: (\d+) bytes", line)
        if m and n is None:
            n = int(m.group(1))
        if t0 is None and "-> syncsource" in line:
            t0 = ts
        elif t0 is not None and t1 is None and "syncsource -> established" in line:
            t1 = ts
    return n, ((t1 - t0) % 86400 if t0 is not None and t1 is not None else None)

E = os.environ
cmd, a = sys.argv[1], sys.argv[2:]
out = {"kind": cmd}
if cmd in ("during", "idle", "seed"):
    t_conn, oos0, mbit = float(E["T_CONN"]), int(E["OOS0"]), int(E["LINK"])
    link = mbit * 1e6 / 8
    ss = [s for s in samples(E["SAMPLES"]) if s[0] > t_conn]
    rc, t_sync = synced(E["SYNCFILE"])
    rs_bytes, rs_log_s = logspan()
    # What the resync had to copy: what a marked, or more when the peer's
    # bitmap (merged on connect) adds regions; it only shrinks from there.
    total = max([oos0] + [s[2] for s in ss])
    ss = [(t_conn, "off", total, 0.0, 0)] + ss
    out.update(mbit=mbit, link=link, oos_disc=int(E["OOS_DISC"]), oos0=oos0, total=total,
               rs_bytes=rs_bytes, rs_log_s=rs_log_s, in_sync=rc == 0,
               sync_s=t_sync - t_conn if rc == 0 else None,
               status_rate=rate_field(ss, t_conn, t_sync))
if cmd == "fio":  # JSON LABEL
    out.update(fio_stats(a[0]), label=a[1])
elif cmd == "disk":  # JSON
    out.update(fio_stats(a[0]))
elif cmd == "during":  # JSON LATLOG
    log = lat_log(a[1])
    start = min(t - l for t, l, _ in log)
    end = log[-1][0]
    ov_end = min(end, t_sync) if rc == 0 else end
    ov = max(0.0, ov_end - start)
    win = [x for x in log if x[0] <= ov_end]
    out.update(fio_stats(a[0]), job_s=end - start, overlap_s=ov,
               overlap=ov / (end - start) if end > start else 0.0,
               start_after_connect_s=start - t_conn, status_rate=rate_field(ss, start, ov_end))
    if ov > 0 and win:
        lats = [l for _, l, _ in win]
        fg = sum(b for _, _, b in win) / ov
        done = 0 if ov_end == t_sync else oos_at(ss, ov_end)
        rs = (oos_at(ss, start) - done) / ov
        out.update(ov_iops=len(win) / ov, ov_p50=pct(lats, 50), ov_p99=pct(lats, 99),
                   ov_max=max(lats), fg_bps=fg, resync_bps=rs,
                   resync_of_link=rs / link if link else None,
                   leftover=link - fg if link else None,
                   resync_of_leftover=rs / (link - fg) if link and link > fg else None)
elif cmd == "idle":  # DISK_BPS MIXED_BPS
    disk = float(a[0])
    mixed = float(a[1])
    if rc == 0:
        n = rs_bytes if rs_bytes is not None else total
        d = rs_log_s if rs_log_s else t_sync - t_conn
        out.update(bytes=n, secs=d, resync_bps=n / d, of_link=n / d / link if link else None,
                   disk_bps=disk or None, of_disk=n / d / disk if disk else None,
                   mixed_bps=mixed or None, of_mixed=n / d / mixed if mixed else None)
elif cmd == "seed":  # JSON LATLOG T_STOP STOPPED LIMIT
    t_stop = float(a[2])
    log = lat_log(a[1])
    start = min(t - l for t, l, _ in log) if log else t_conn
    w_end = min(t_sync, t_stop) if rc == 0 else t_stop  # the part of the job the resync ran
    win = [x for x in log if x[0] <= w_end]
    times = [start] + [t for t, _, _ in win] + [w_end]
    began = [l for t, l, _ in log if t - l < w_end]  # every request issued while resyncing
    out.update(fio_stats(a[0]), stopped=a[3], limit=int(a[4]), fio_s=t_stop - start,
               win_ios=len(win), win_max=max(began, default=None),
               win_gap=max(y - x for x, y in zip(times, times[1:])),
               fg_bps=sum(b for _, _, b in win) / (w_end - start) if w_end > start else None)
elif cmd == "anchor":  # JSON LATLOG QMP_SAMPLES MB (part e; LINK from the environment)
    mbit = int(E["LINK"])
    link = mbit * 1e6 / 8
    js, t_mirror, t_ready = [], None, None  # js: (UNIX time, offset, len, ready)
    for line in open(a[2]):
        f = line.split()
        if len(f) >= 6 and f[1] == "job":
            js.append((float(f[0]), int(f[2]), int(f[3]), f[4] == "1"))
        elif len(f) >= 2 and f[1] == "start":
            t_mirror = float(f[0])
        elif len(f) >= 2 and f[1] == "ready" and t_ready is None:
            t_ready = float(f[0])
    log = lat_log(a[1])
    start = min(t - l for t, l, _ in log)
    end = log[-1][0]
    ov_end = min(end, t_ready) if t_ready is not None else end
    ov = max(0.0, ov_end - start)
    win = [x for x in log if x[0] <= ov_end]
    # len - offset: what the copy still has to write (active writes add to
    # both while in flight). len is 0 until the job has scanned the source;
    # only samples after that count.
    rs = [(t, ln - off) for t, off, ln, _ in js if ln > 0]
    def rem_at(t):
        if t_ready is not None and t >= t_ready:
            return 0
        if not rs or t < rs[0][0]:
            return None
        for x, y in zip(rs, rs[1:]):
            if x[0] <= t <= y[0]:
                return x[1] + (y[1] - x[1]) * (t - x[0]) / (y[0] - x[0]) if y[0] > x[0] else y[1]
        return rs[-1][1]
    at_end = min(js, key=lambda j: abs(j[0] - end)) if js else None
    out.update(fio_stats(a[0]), mb=int(a[3]), mbit=mbit, link=link, job_s=end - start,
               overlap_s=ov, overlap=ov / (end - start) if end > start else 0.0,
               start_after_mirror_s=start - t_mirror if t_mirror else None,
               ready_s=t_ready - t_mirror if t_ready is not None and t_mirror else None,
               running_at_end=t_ready is None or t_ready > end,
               end_offset=at_end and at_end[1], end_len=at_end and at_end[2],
               end_sample_dt=at_end and at_end[0] - end)
    if ov > 0 and win:
        lats = [l for _, l, _ in win]
        fg = sum(b for _, _, b in win) / ov
        out.update(ov_iops=len(win) / ov, ov_p50=pct(lats, 50), ov_p99=pct(lats, 99),
                   ov_max=max(lats), fg_bps=fg)
        c0 = max(start, rs[0][0]) if rs else None
        if c0 is not None and ov_end > c0 and rem_at(c0) is not None:
            cp = (rem_at(c0) - rem_at(ov_end)) / (ov_end - c0)
            out.update(copy_bps=cp, copy_s=ov_end - c0, copy_of_link=cp / link if link else None,
                       leftover=link - fg if link else None,
                       copy_of_leftover=cp / (link - fg) if link and link > fg else None)
print(json.dumps(out))
PY

# Background processes are started as `ip netns exec NS CMD &` or `CMD &`
# (never through a shell function, which would fork a subshell), so $! is CMD.
inA() { ip netns exec "$NA" "$@"; }
now() { date +%s.%N; }
alive_or_die() { # PID NAME LOG
	running "$1" && return 0
	echo "bench: $2 exited; its log:" >&2
	tail -n 20 "$3" >&2 || true
	exit 1
}
wait_nbd() { # NS URI PID NAME LOG
	for _ in $(seq 100); do
		ip netns exec "$1" nbdinfo --size "$2" >/dev/null 2>&1 && return 0
		alive_or_die "$3" "$4" "$5"
		sleep 0.1
	done
	die "$4: $2 did not come up (log: $(tail -n 5 "$5" | tr '\n' ' '))"
}
stop_pid() { # PID: end one of our background helpers and reap it
	if mine "$1"; then kill "$1" 2>/dev/null || true; fi
	wait "$1" 2>/dev/null || true
}

# ---------------------------------------------------------------- the link
ip netns add "$NA"
NS_MADE+=("$NA")
ip netns add "$NB"
NS_MADE+=("$NB")
ip link add va netns "$NA" type veth peer name vb netns "$NB"
ip -n "$NA" addr add "$IPA/24" dev va
ip -n "$NB" addr add "$IPB/24" dev vb
for n in "$NA" "$NB"; do ip -n "$n" link set lo up; done
ip -n "$NA" link set va up
ip -n "$NB" link set vb up

# tbf: burst at least rate/HZ (HZ=250 here) and a 64 KiB GSO packet, here
# 10 ms of the rate; limit 40 ms of the rate, at least 256 KiB. With these a
# single TCP stream gets 96-97% of the rate as goodput.
tbf_args() { # MBIT
	python3 -c 'import sys; r=int(sys.argv[1])*125000
print(f"rate {sys.argv[1]}mbit burst {max(65536, r//100)} limit {max(262144, r*4//100)}")' "$1"
}
shape() { # MBIT (0 = unshaped)
	local a
	tc -n "$NA" qdisc del dev va root 2>/dev/null || true
	tc -n "$NB" qdisc del dev vb root 2>/dev/null || true
	[ "$1" = 0 ] && return 0
	a=$(tbf_args "$1")
	# shellcheck disable=SC2086
	tc -n "$NA" qdisc add dev va root tbf $a
	# shellcheck disable=SC2086
	tc -n "$NB" qdisc add dev vb root tbf $a
}
goodput() { # -> Mbit/s of one TCP stream A -> B over 3 s
	local p
	ip netns exec "$NB" python3 "$W/goodput.py" recv "$IPB" 5201 > "$W/goodput.out" &
	p=$!
	PIDS+=("$p")
	inA timeout 60 python3 "$W/goodput.py" send "$IPB" 5201 3
	wait "$p"
	cat "$W/goodput.out"
}

# ---------------------------------------------------------------- the pair
PORT=10809
URI=nbd://$IPA:$PORT/vol0
CONF=$W/tandem.ini
ctl() { timeout 60 "$BIN/tandemctl" -c "$CONF" -n a "$@"; }
peer_field() { # FIELD: of node a's peer in status --json
	ctl status --json | python3 -c 'import json, sys
print(json.load(sys.stdin)["volumes"][0]["peers"][0][sys.argv[1]])' "$1"
}

start_tandem() {
	cat > "$CONF" <<INI
[cluster]
name = bench-resync
secret = bench-$$-$RANDOM

[node a]
replication = $IPA:7789
nbd = $IPA:$PORT
control = $W/a.sock
data-dir = $W/a

[node b]
replication = $IPB:7789
nbd = $IPB:$PORT
control = $W/b.sock
data-dir = $W/b

[volume vol0]
size = ${SIZE_MB}M
nodes = a b
replication = sync
INI
	ip netns exec "$NA" "$BIN/tandemd" -c "$CONF" -n a -f 2> "$W/tandem-a.log" &
	PID_TA=$!
	PIDS+=("$PID_TA")
	ip netns exec "$NB" "$BIN/tandemd" -c "$CONF" -n b -f 2> "$W/tandem-b.log" &
	PID_TB=$!
	PIDS+=("$PID_TB")
	wait_nbd "$NA" "$URI" "$PID_TA" "tandemd a" "$W/tandem-a.log"
	# The pair is ready once a sees b connected and replication established.
	local st="" end=$((SECONDS + TANDEM_TIMEOUT))
	while [ $SECONDS -lt $end ]; do
		alive_or_die "$PID_TA" "tandemd a" "$W/tandem-a.log"
		alive_or_die "$PID_TB" "tandemd b" "$W/tandem-b.log"
		st=$(ctl status --json 2>&1) || true
		if python3 -c 'import json,sys
try:
    p = json.loads(sys.argv[1])["volumes"][0]["peers"][0]
except Exception:
    sys.exit(1)
sys.exit(0 if p.get("connection") == "connected" and p.get("replication") == "established" else 1)' "$st"; then
			return 0
		fi
		sleep 0.2
	done
	echo "bench: the Tandem pair did not reach connection=connected, replication=established" \
		"within ${TANDEM_TIMEOUT}s. Last 'tandemctl -n a status --json':" >&2
	echo "  $st" >&2
	echo "tandemd a log:" >&2; tail -n 10 "$W/tandem-a.log" >&2 || true
	echo "tandemd b log:" >&2; tail -n 10 "$W/tandem-b.log" >&2 || true
	exit 1
}
check_daemons() {
	alive_or_die "$PID_TA" "tandemd a" "$W/tandem-a.log"
	alive_or_die "$PID_TB" "tandemd b" "$W/tandem-b.log"
}
# in_sync SECONDS: wait-sync on a; on failure notes why and returns 1.
in_sync() {
	check_daemons
	timeout $(($1 + 30)) "$BIN/tandemctl" -c "$CONF" -n a wait-sync vol0 --timeout "$1" \
		> /dev/null 2> "$W/wait-sync.err" && return 0
	echo "{\"kind\": \"note\", \"text\": \"vol0 not in sync within $1 s ($(tr '\n"' ' ' < "$W/wait-sync.err")); later measurements skipped\"}" >> "$RES"
	echo "# vol0 not in sync within $1 s: $(cat "$W/wait-sync.err")" >&2
	return 1
}

# ---------------------------------------------------------------- fio
fio_nbd() { # ARGS... -> fio JSON on stdout (foreground only)
	inA timeout -k 10 "${FIO_LIMIT:-900}" fio --name=j --ioengine=nbd --uri="$URI" \
		--size="${SIZE_MB}M" --randrepeat=0 --refill_buffers --norandommap \
		--output-format=json "$@" 2> "$W/fio.err"
}
# The foreground job of (a) and (b): 4 KiB random writes, QD8, every
# completion logged with its UNIX time, so (b) can cut the job where the
# resync ended.
JOB=(--rw=randwrite --bs=4k --iodepth=8 --time_based --runtime="$RUNTIME" --log_unix_epoch=1)
fg_job() { # NAME
	FIO_LIMIT=$((RUNTIME + 120)) fio_nbd "${JOB[@]}" --write_lat_log="$W/fio-$1" \
		> "$W/fio-$1.json" || die "fio $1 failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
}
write_seq() { # MIB: sequential 1 MiB writes of random data from offset 0
	FIO_LIMIT=900 fio_nbd --rw=write --bs=1M --iodepth=4 --size="${1}M" > /dev/null ||
		die "writing $1 MiB failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
}
# disconnect_write MIB: disconnect a from b and write MIB MiB on a alone.
# First SETTLE s without writes: a connection loss marks out of sync every
# 4 MiB extent still in the activity log, and on connect a merges in the
# bitmap bits the peer has not cleaned yet; both are cleaned (after a flush on
# both nodes) every 2 s once idle. Without the pause, a disconnect right after
# random writes (or a resync) resyncs the whole volume. Sets OOS_DISC (out of
# sync right after the disconnect, before writing) and OOS0 (before connect).
disconnect_write() {
	sleep "$SETTLE"
	ctl disconnect vol0 > /dev/null || die "tandemctl disconnect vol0 failed"
	OOS_DISC=$(peer_field out_of_sync_bytes)
	write_seq "$1"
	OOS0=$(peer_field out_of_sync_bytes)
	[ "$OOS0" -gt 0 ] || die "after disconnect and $1 MiB written, a shows no out-of-sync data" \
		"(status: $(ctl status --json))"
}
start_sampler() { # OUT [INTERVAL]
	python3 "$W/sample.py" "$1" "${2:-$INTERVAL}" "$BIN/tandemctl" -c "$CONF" -n a status --json &
	PID_SAMPLE=$!
	PIDS+=("$PID_SAMPLE")
}
start_waiter() { # OUT TIMEOUT
	rm -f "$1"
	python3 "$W/waiter.py" "$1" "$BIN/tandemctl" -c "$CONF" -n a wait-sync vol0 \
		--timeout "$2" 2> "$1.err" &
	PID_WAIT=$!
	PIDS+=("$PID_WAIT")
}
# connect_now: node a's log position and the time, then `connect` (which
# returns at once; a dials b after its minimum retry delay).
connect_now() {
	LOGPOS=$(wc -l < "$W/tandem-a.log")
	T_CONN=$(now)
	ctl connect vol0 > /dev/null || die "tandemctl connect vol0 failed"
}
analyze() { # SAMPLES SYNCFILE KIND ARGS...: one result line
	local smp=$1 syn=$2
	shift 2
	SAMPLES=$smp SYNCFILE=$syn T_CONN=$T_CONN OOS0=$OOS0 OOS_DISC=$OOS_DISC LINK=$LINK \
		ALOG=$W/tandem-a.log LOGPOS=$LOGPOS python3 "$W/an.py" "$@" >> "$RES"
}

# ---------------------------------------------------------------- measurements
phase_a() {
	echo "# (a) baseline: 4 KiB random write QD8, ${RUNTIME} s, in sync" >&2
	fg_job a-base
	python3 "$W/an.py" fio "$W/fio-a-base.json" baseline >> "$RES"
}

phase_b() {
	echo "# (b) disconnect, write $RESYNC_MB MiB, connect, the job of (a) during the resync" >&2
	disconnect_write "$RESYNC_MB"
	start_sampler "$W/samples-b.txt"
	sleep 0.3
	connect_now
	start_waiter "$W/sync-b.txt" $((RUNTIME + SYNC_TIMEOUT))
	fg_job b-resync
	echo "# (b) job done; waiting for in sync" >&2
	wait "$PID_WAIT" || true
	sleep 0.6  # one more sample after the end
	stop_pid "$PID_SAMPLE"
	[ -s "$W/sync-b.txt" ] || die "wait-sync helper ended without a result ($(cat "$W/sync-b.txt.err"))"
	analyze "$W/samples-b.txt" "$W/sync-b.txt" during "$W/fio-b-resync.json" \
		"$W/fio-b-resync_clat.1.log"
}

DISK_BPS=0
MIXED_BPS=0
measure_disk() {
	echo "# local disk: sequential write, $DISK_ENGINE, O_DIRECT, 1 MiB QD4, ${DISK_S} s" >&2
	timeout -k 10 $((DISK_S + 300)) fio --name=disk --filename="$W/disk.test" \
		--ioengine=$DISK_ENGINE --direct=1 --rw=write --bs=1M --iodepth=4 --size="${SIZE_MB}M" \
		--time_based --runtime=$DISK_S --output-format=json > "$W/fio-disk.json" 2> "$W/fio.err" ||
		die "fio on the local disk failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
	python3 "$W/an.py" disk "$W/fio-disk.json" >> "$RES"
	DISK_BPS=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["bw"])' "$RES")
	# What a resync on one shared disk needs: reading one file while writing
	# another, at the same time (O_DIRECT, 1 MiB QD4 each): node a's image
	# (written by the prefill) is read while the file just written is
	# overwritten.
	echo "# local disk: concurrent read + write, 1 MiB QD4 each, ${DISK_S} s" >&2
	timeout -k 10 $((DISK_S + 300)) fio --ioengine=$DISK_ENGINE --direct=1 --bs=1M --iodepth=4 \
		--time_based --runtime=$DISK_S --output-format=json \
		--name=rd --filename="$W/a/vol0.img" --rw=read --size="${SIZE_MB}M" \
		--name=wr --filename="$W/disk.test" --rw=write --size="${SIZE_MB}M" \
		> "$W/fio-mixed.json" 2> "$W/fio.err" ||
		die "fio on the local disk failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
	rm -f "$W/disk.test"
	python3 - "$W/fio-mixed.json" >> "$RES" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"]
r = j[0]["read"]["bw_bytes"]; w = j[1]["write"]["bw_bytes"]
print(json.dumps({"kind": "mixed", "read_bw": r, "write_bw": w}))
PY
	MIXED_BPS=$(python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).readlines()[-1]); print(min(d["read_bw"], d["write_bw"]))' "$RES")
}

phase_c() { # MBIT
	echo "# (c) link $1: disconnect, write $RESYNC_MB MiB, connect, resync with no load" >&2
	disconnect_write "$RESYNC_MB"
	if [ "$1" = 0 ]; then start_sampler "$W/samples-c$1.txt" 0.1; else start_sampler "$W/samples-c$1.txt"; fi
	sleep 0.3
	connect_now
	start_waiter "$W/sync-c$1.txt" "$SYNC_TIMEOUT"
	wait "$PID_WAIT" || true
	stop_pid "$PID_SAMPLE"
	[ -s "$W/sync-c$1.txt" ] || die "wait-sync helper ended without a result ($(cat "$W/sync-c$1.txt.err"))"
	local d=0 m=0
	[ "$1" = 0 ] && d=$DISK_BPS && m=$MIXED_BPS
	LINK=$1 analyze "$W/samples-c$1.txt" "$W/sync-c$1.txt" idle "$d" "$m"
}

phase_d() {
	local pid t_stop stopped
	echo "# (d) seed replay: disconnect, write $SEED_MB MiB, connect, keep writing 1 MiB QD1 (<= ${SEED_LIMIT} s)" >&2
	disconnect_write "$SEED_MB"
	start_sampler "$W/samples-d.txt"
	sleep 0.3
	connect_now
	start_waiter "$W/sync-d.txt" $((SEED_LIMIT + SYNC_TIMEOUT))
	ip netns exec "$NA" timeout -k 10 $((SEED_LIMIT + 120)) fio --name=j --ioengine=nbd \
		--uri="$URI" --size="${SIZE_MB}M" --refill_buffers --output-format=json \
		--rw=write --bs=1M --iodepth=1 --time_based --runtime="$SEED_LIMIT" --log_unix_epoch=1 \
		--write_lat_log="$W/fio-d-seed" > "$W/fio-d-seed.json" 2> "$W/fio-d.err" &
	pid=$!
	PIDS+=("$pid")
	while running "$pid" && [ ! -s "$W/sync-d.txt" ]; do sleep 0.1; done
	t_stop=$(now)
	stopped=limit
	if running "$pid"; then
		stopped=in-sync
		kill -TERM "$pid"  # timeout passes it on to fio, which stops and writes its JSON
	fi
	wait "$pid" || true
	[ "$stopped" = limit ] && echo "# (d) writer stopped after ${SEED_LIMIT} s; waiting for in sync" >&2
	wait "$PID_WAIT" || true
	stop_pid "$PID_SAMPLE"
	grep -q '"jobs"' "$W/fio-d-seed.json" ||
		die "fio of (d) failed: $(tail -n 3 "$W/fio-d.err" | tr '\n' ' ')"
	[ -s "$W/sync-d.txt" ] || die "wait-sync helper ended without a result ($(cat "$W/sync-d.txt.err"))"
	analyze "$W/samples-d.txt" "$W/sync-d.txt" seed "$W/fio-d-seed.json" \
		"$W/fio-d-seed_clat.1.log" "$t_stop" "$stopped" "$SEED_LIMIT"
}

# (e) the anchor: qemu-storage-daemon in A, its write-blocking mirror to
# qemu-nbd in B, on the link of the Tandem pair (idle meanwhile); port 10810 on
# both ends, files anchor-a.img and anchor-b.img, all removed afterwards.
APORT=10810
AURI=nbd://$IPA:$APORT/vol0
anote() { # TEXT: a note among the results
	python3 -c 'import json, sys; print(json.dumps({"kind": "note", "text": sys.argv[1]}))' "$1" >> "$RES"
}
phase_e() {
	local mb=$ANCHOR_MB pid_qn pid_qsd pid_qmp end ok=0
	echo "# (e) anchor: qemu-storage-daemon, write-blocking mirror of $mb MiB to qemu-nbd in B;" \
		"the job of (a) during the copy, then in sync" >&2
	echo "# (e) writing $mb MiB of random data into the source file" >&2
	timeout -k 10 600 fio --name=src --filename="$W/anchor-a.img" --ioengine=$DISK_ENGINE \
		--direct=1 --rw=write --bs=1M --iodepth=4 --size="${mb}M" --refill_buffers \
		--output-format=json > /dev/null 2> "$W/fio.err" ||
		die "writing the anchor's source failed: $(tail -n 3 "$W/fio.err" | tr '\n' ' ')"
	truncate -s "${mb}M" "$W/anchor-b.img"
	# The mirror target: qemu-nbd in B, O_DIRECT + io_uring like the source.
	ip netns exec "$NB" qemu-nbd -f raw -x vol0 -b "$IPB" -p "$APORT" --persistent -e 4 \
		--cache=none --aio=io_uring "$W/anchor-b.img" 2> "$W/qemu-nbd.log" &
	pid_qn=$!
	PIDS+=("$pid_qn")
	wait_nbd "$NB" "nbd://$IPB:$APORT/vol0" "$pid_qn" "qemu-nbd (B)" "$W/qemu-nbd.log"
	# The source: qsd in A exporting node "src"; blockdev-mirror puts its
	# filter above src and moves the export onto it (see bench/repl.sh).
	ip netns exec "$NA" qemu-storage-daemon \
		--blockdev "driver=file,node-name=f0,filename=$W/anchor-a.img,cache.direct=on,aio=io_uring" \
		--blockdev driver=raw,node-name=src,file=f0 \
		--nbd-server "addr.type=inet,addr.host=$IPA,addr.port=$APORT" \
		--export type=nbd,id=exp0,node-name=src,name=vol0,writable=on \
		--chardev "socket,id=qmp0,path=$W/qmp.sock,server=on,wait=off" \
		--monitor chardev=qmp0 2> "$W/qsd.log" &
	pid_qsd=$!
	PIDS+=("$pid_qsd")
	wait_nbd "$NA" "$AURI" "$pid_qsd" "qemu-storage-daemon (A)" "$W/qsd.log"
	# One QMP connection from here until READY: it adds the target, starts
	# the mirror and samples the job.
	python3 "$W/qmp.py" "$W/qmp.sock" mirror "$IPB" "$APORT" vol0 "$W/samples-e.txt" "$INTERVAL" \
		2> "$W/qmp.err" &
	pid_qmp=$!
	PIDS+=("$pid_qmp")
	for _ in $(seq 300); do
		grep -q ' start$' "$W/samples-e.txt" 2>/dev/null && break
		running "$pid_qmp" || break
		sleep 0.1
	done
	grep -q ' start$' "$W/samples-e.txt" 2>/dev/null ||
		die "qemu-storage-daemon: the mirror did not start ($(tr '\n' ' ' < "$W/qmp.err"); log: $(tail -n 5 "$W/qsd.log" | tr '\n' ' '))"
	if [ "$ANCHOR_NODELAY" = 1 ]; then
		if python3 "$W/nodelay.py" "$pid_qn" "$APORT" > /dev/null 2> "$W/nodelay.err"; then
			anote "(e) anchor: TCP_NODELAY set on the mirror target's socket as soon as the mirror job existed (qemu-nbd leaves Nagle on; ANCHOR_NODELAY=0 for stock qemu)"
		else
			anote "(e) anchor: could not set TCP_NODELAY on the target's socket ($(tr '\n' ' ' < "$W/nodelay.err")): stock qemu, Nagle on"
		fi
	else
		anote "(e) anchor: stock qemu (ANCHOR_NODELAY=0): Nagle on at the target's NBD server"
	fi
	echo "# (e) the job of (a) during the copy" >&2
	URI=$AURI SIZE_MB=$mb fg_job e-copy
	echo "# (e) job done; waiting for the mirror to be READY (<= ${SYNC_TIMEOUT} s)" >&2
	end=$((SECONDS + SYNC_TIMEOUT))
	while [ $SECONDS -lt $end ]; do
		grep -q ' ready$' "$W/samples-e.txt" && { ok=1; break; }
		running "$pid_qmp" || break
		sleep 0.2
	done
	sleep 0.6  # one more sample
	stop_pid "$pid_qmp"
	LINK=$LINK python3 "$W/an.py" anchor "$W/fio-e-copy.json" "$W/fio-e-copy_clat.1.log" \
		"$W/samples-e.txt" "$mb" >> "$RES"
	if [ $ok = 1 ]; then
		echo "# (e) mirror READY; the job again, in sync" >&2
		URI=$AURI SIZE_MB=$mb fg_job e-base
		python3 "$W/an.py" fio "$W/fio-e-base.json" anchor-baseline >> "$RES"
		# Sanity: with every write acknowledged, the replicas must be identical.
		python3 "$W/qmp.py" "$W/qmp.sock" check > "$W/mirror-e.json" 2>&1 ||
			anote "WARNING: (e) anchor mirror not READY after its baseline: $(cat "$W/mirror-e.json")"
		cmp -s "$W/anchor-a.img" "$W/anchor-b.img" ||
			anote "WARNING: (e) anchor replicas differ (anchor-a.img vs anchor-b.img)"
	else
		anote "(e) anchor: mirror not READY within ${SYNC_TIMEOUT} s after the job ($(tail -n 1 "$W/samples-e.txt" 2>/dev/null); $(tr '\n' ' ' < "$W/qmp.err")): no baseline; lower ANCHOR_MB or raise SYNC_TIMEOUT"
	fi
	stop_pid "$pid_qsd"
	stop_pid "$pid_qn"
	rm -f "$W/anchor-a.img" "$W/anchor-b.img" "$W/qmp.sock"
}

# ---------------------------------------------------------------- run
echo "# work dir $W, namespaces $NA $NB, link $IPA <-> $IPB" >&2
RES=$W/results.txt
: > "$RES"
shape 0
start_tandem
if [ "$PREFILL" = 1 ]; then
	echo "# prefill: ${SIZE_MB} MiB sequential on the unshaped link" >&2
	write_seq "$SIZE_MB"
fi
OK=1
in_sync "$SYNC_TIMEOUT" || OK=0
shape "$LINK"
if [ "$LINK" = 0 ]; then
	echo "{\"kind\": \"link\", \"mbit\": 0, \"qdisc\": \"none\"}" >> "$RES"
else
	g=null
	if [ "$LINKCHECK" = 1 ]; then
		g=$(goodput)
		printf '# link %s Mbit/s: TCP goodput %.1f Mbit/s\n' "$LINK" "$g" >&2
	fi
	echo "{\"kind\": \"link\", \"mbit\": $LINK, \"qdisc\": \"$(tbf_args "$LINK")\", \"goodput\": $g}" >> "$RES"
fi

# The disk's rates swing from one minute to the next here: each unshaped idle
# resync is preceded by its own disk measurement, IDLE_RUNS times.
idle_unshaped() {
	local i
	for ((i = 1; i <= IDLE_RUNS; i++)); do
		[ $OK = 1 ] || return 0
		[ "$i" = 1 ] || { in_sync "$SYNC_TIMEOUT" || { OK=0; return 0; }; }
		measure_disk
		phase_c 0
	done
}
part a && [ $OK = 1 ] && phase_a
[ $OK = 1 ] && { in_sync "$SYNC_TIMEOUT" || OK=0; }
part b && [ $OK = 1 ] && phase_b
[ $OK = 1 ] && { in_sync "$SYNC_TIMEOUT" || OK=0; }
if ! part c; then
	:
elif [ "$LINK" = 0 ] && [ $OK = 1 ]; then
	idle_unshaped
elif [ $OK = 1 ]; then
	phase_c "$LINK"
	if [ "$IDLE_UNSHAPED" = 1 ]; then
		in_sync "$SYNC_TIMEOUT" || OK=0
		shape 0
		[ $OK = 1 ] && idle_unshaped
		shape "$LINK"
	fi
fi
[ $OK = 1 ] && { in_sync "$SYNC_TIMEOUT" || OK=0; }
part d && [ $OK = 1 ] && phase_d
SYNCED=0  # (e) shares the link: only with the pair in sync (idle)
if [ $OK = 1 ] && in_sync "$SYNC_TIMEOUT"; then SYNCED=1; fi
if ! part e; then
	:
elif [ -n "$ANCHOR_MISSING" ]; then
	anote "(e) anchor skipped: $ANCHOR_MISSING"
elif [ $SYNCED = 1 ]; then
	phase_e
fi
check_daemons
shape 0

# Sanity: once in sync, the replicas must be identical.
if [ $OK = 1 ] && ! cmp -s "$W/a/vol0.img" "$W/b/vol0.img"; then
	echo "{\"kind\": \"note\", \"text\": \"WARNING: replicas differ after the last resync (a/vol0.img vs b/vol0.img)\"}" >> "$RES"
fi
if [ -n "${RESULTS:-}" ]; then
	mkdir -p "$RESULTS"
	cp "$RES" "$W"/fio-* "$W"/*.log "$W"/*.ini "$W"/samples-* "$W"/sync-* "$RESULTS"/ 2>/dev/null || true
fi

python3 - "$RES" "$RUNTIME" "$SIZE_MB" "$RESYNC_MB" "$SEED_MB" <<'PY'
import json, sys
res, runtime, size_mb, resync_mb, seed_mb = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
R = [json.loads(l) for l in open(res) if l.strip()]
def one(kind, **kw):
    for r in R:
        if r["kind"] == kind and all(r.get(k) == v for k, v in kw.items()):
            return r
    return None
def f(x, fmt, dash="-"):
    return format(x, fmt) if x is not None else dash
def ms(x):
    return f(x and x * 1e3, ".2f")
def ratio(a, b):
    return a / b if a is not None and b else None
link = one("link")
mbit = link["mbit"] if link else 0
print("Resync under load: Tandem pair (replication = sync, resync-rate auto, bitmap-granularity default)")
if mbit:
    g = link.get("goodput")
    gs = f"; one TCP stream: {g:.1f} Mbit/s" if g else ""
    print(f"link {mbit} Mbit/s = {mbit / 8:.1f} MB/s (tbf on both veth ends: {link['qdisc']}{gs})")
else:
    print("link unshaped (veth, no qdisc)")
print(f"vol0 {size_mb} MiB; fio nbd engine in namespace A; foreground job: 4 KiB random write QD8, "
      f"{runtime} s, random data; {resync_mb} MiB written while disconnected in (b) and (c), "
      f"{seed_mb} MiB in (d)")
print("MB = 10^6 bytes; latencies are fio's completion latencies (clat); resync rates from the fall of "
      "out_of_sync_bytes ('status:' the median resync_bytes_per_sec shown meanwhile); 'resynced' = what "
      "node a's resync copied (its log; else the largest out_of_sync_bytes after connect)")
print()
rows, notes = [], []
def row(name, val, rel=""):
    rows.append((name, val, rel))
def copied(r):
    return r["rs_bytes"] if r.get("rs_bytes") is not None else r["total"]
def extra(tag, r, written_mb):
    """notes on out-of-sync data the writes while disconnected do not explain"""
    if r["oos_disc"]:
        notes.append(f"note {tag}: {r['oos_disc'] / 1e6:.1f} MB were out of sync right after "
                     "`disconnect`, before writing (activity log extents of recent writes)")
    if r["total"] > r["oos0"]:
        notes.append(f"note {tag}: a had {r['oos0'] / 1e6:.1f} MB out of sync before `connect` "
                     f"({written_mb * 1.048576:.1f} MB written); the peer's bitmap merged on connect "
                     f"raised it to {r['total'] / 1e6:.1f} MB")
base, dur = one("fio", label="baseline"), one("during")
if base:
    row("(a) baseline, in sync",
        f"{base['iops']:.0f} IOPS  p50 {ms(base['p50'])} ms  p99 {ms(base['p99'])} ms  max {base['max']:.3f} s")
if dur:
    row("(b) same job during resync",
        f"{dur['iops']:.0f} IOPS  p50 {ms(dur['p50'])} ms  p99 {ms(dur['p99'])} ms  max {dur['max']:.3f} s",
        f"IOPS {f(ratio(dur['iops'], base and base['iops']), '.2f')}x  "
        f"p99 {f(ratio(dur['p99'], base and base['p99']), '.1f')}x of (a); "
        f"overlap {dur['overlap'] * 100:.0f}% of the job")
    if dur["overlap"] < 0.99 and dur.get("ov_iops") is not None:
        row("(b)   overlap only (fio lat log)",
            f"{dur['ov_iops']:.0f} IOPS  p50 {ms(dur['ov_p50'])} ms  p99 {ms(dur['ov_p99'])} ms  "
            f"max {dur['ov_max']:.3f} s",
            f"IOPS {f(ratio(dur['ov_iops'], base and base['iops']), '.2f')}x  "
            f"p99 {f(ratio(dur['ov_p99'], base and base['p99']), '.1f')}x of (a)")
    if dur.get("ov_max") is not None:
        row("(b) worst request during resync", f"{dur['ov_max']:.3f} s")
    if dur.get("resync_bps") is not None:
        rel = ""
        if dur.get("leftover") is not None:
            rel = (f"{dur['resync_of_link']:.2f} of link; {f(dur['resync_of_leftover'], '.2f')} of the "
                   f"leftover ({dur['link'] / 1e6:.2f} - foreground {dur['fg_bps'] / 1e6:.2f} MB/s)")
        sr = dur.get("status_rate")
        row("(b) resync while the job ran",
            f"{dur['resync_bps'] / 1e6:.2f} MB/s over {dur['overlap_s']:.1f} s"
            + (f" (status: {sr / 1e6:.2f})" if sr is not None else ""), rel)
    if dur["sync_s"] is not None:
        row("(b) connect -> in sync", f"{dur['sync_s']:.1f} s", f"{copied(dur) / 1e6:.1f} MB resynced")
    else:
        row("(b) connect -> in sync", "not in sync (wait-sync timed out)")
    extra("(b)", dur, float(resync_mb))
    if dur["overlap"] < 0.75:
        notes.append(f"WARNING: (b) the resync ended after {dur['overlap'] * 100:.0f}% of the job; "
                     "the 'during resync' ratios mix in time without resync: raise RESYNC_MB")
for c in [r for r in R if r["kind"] == "idle"]:
    name = f"(c) idle resync, link {c['mbit']}" if c["mbit"] else "(c) idle resync, unshaped"
    if not c["in_sync"]:
        row(name, "not in sync (wait-sync timed out)")
        continue
    sr = c.get("status_rate")
    val = (f"{c['bytes'] / 1e6:.1f} MB in {c['secs']:.2f} s = {c['resync_bps'] / 1e6:.2f} MB/s"
           + (f" (status: {sr / 1e6:.2f})" if sr is not None else ""))
    if c["mbit"]:
        rel = f"{c['of_link']:.2f} of link rate"
    elif c.get("of_disk") is not None:
        rel = f"{c['of_disk']:.2f} of local disk seq write ({c['disk_bps'] / 1e6:.0f} MB/s)"
        if c.get("of_mixed") is not None:
            rel += (f", {c['of_mixed']:.2f} of its rate reading and writing at once "
                    f"({c['mixed_bps'] / 1e6:.0f} MB/s each way)")
    else:
        rel = ""
    rel += f"; connect -> in sync {c['sync_s']:.2f} s"
    row(name, val, rel)
    extra(name[:3] + (f" link {c['mbit']}" if c["mbit"] else " unshaped"), c, float(resync_mb))
for disk, mx in zip([r for r in R if r["kind"] == "disk"], [r for r in R if r["kind"] == "mixed"]):
    row("    local disk seq write (fio)", f"{disk['bw'] / 1e6:.1f} MB/s", "O_DIRECT, 1 MiB QD4, 10 s")
    row("    local disk read + write (fio)", f"{mx['read_bw'] / 1e6:.1f} + {mx['write_bw'] / 1e6:.1f} MB/s",
        "two files at once, 1 MiB QD4 each: what a resync on one shared disk has")
un = [c for c in R if c["kind"] == "idle" and not c["mbit"] and c.get("of_disk") is not None]
if len(un) > 1:
    med = lambda xs: sorted(xs)[len(xs) // 2]
    row(f"(c) unshaped, median of {len(un)}", f"{med([c['resync_bps'] for c in un]) / 1e6:.0f} MB/s",
        f"{med([c['of_disk'] for c in un]):.2f} of local disk seq write, "
        f"{med([c['of_mixed'] for c in un if c.get('of_mixed')] or [0]):.2f} of its read + write rate")
s = one("seed")
if s:
    row("(d) seed replay: longest request",
        f"{f(s['win_max'], '.3f')} s  (longest gap between completions {s['win_gap']:.3f} s)",
        f"{s['win_ios']} writes of 1 MiB while resyncing, {f(s['fg_bps'] and s['fg_bps'] / 1e6, '.2f')} MB/s")
    if s["sync_s"] is not None:
        how = ("writer ran until in sync" if s["stopped"] == "in-sync" else
               f"writer stopped at its limit ({s['limit']} s), the rest without load")
        row("(d) seed replay: connect -> in sync", f"{s['sync_s']:.1f} s, {copied(s) / 1e6:.1f} MB resynced", how)
    else:
        row("(d) seed replay: connect -> in sync", "not in sync (wait-sync timed out)")
    row("    for comparison", "Open-E: front-end I/O stalled for the whole resync")
    extra("(d)", s, float(seed_mb))
ab, an = one("fio", label="anchor-baseline"), one("anchor")
def during(r):
    """(IOPS, p99, what) of a job during a resync or copy: the whole job, or
    the part the resync/copy overlapped when it ended earlier"""
    if r is None:
        return None
    if r["overlap"] >= 0.99 or r.get("ov_iops") is None:
        return r["iops"], r["p99"], "whole job"
    return r["ov_iops"], r["ov_p99"], "overlap only"
if an:
    print(f"(e) anchor: qemu-storage-daemon mirroring (blockdev-mirror sync=full copy-mode=write-blocking) "
          f"a {an['mb']} MiB raw file of random data to qemu-nbd in B; same link and job; the Tandem pair idle")
    print()
if ab:
    row("(e) anchor: baseline in sync",
        f"{ab['iops']:.0f} IOPS  p50 {ms(ab['p50'])} ms  p99 {ms(ab['p99'])} ms  max {ab['max']:.3f} s",
        "mirror READY")
if an:
    row("(e) anchor: same job during its copy",
        f"{an['iops']:.0f} IOPS  p50 {ms(an['p50'])} ms  p99 {ms(an['p99'])} ms  max {an['max']:.3f} s",
        f"IOPS {f(ratio(an['iops'], ab and ab['iops']), '.2f')}x  "
        f"p99 {f(ratio(an['p99'], ab and ab['p99']), '.1f')}x  max "
        f"{f(ratio(an['max'], ab and ab['max']), '.1f')}x of its baseline; "
        f"overlap {an['overlap'] * 100:.0f}% of the job")
    if an["overlap"] < 0.99 and an.get("ov_iops") is not None:
        row("(e)   overlap only (fio lat log)",
            f"{an['ov_iops']:.0f} IOPS  p50 {ms(an['ov_p50'])} ms  p99 {ms(an['ov_p99'])} ms  "
            f"max {an['ov_max']:.3f} s",
            f"IOPS {f(ratio(an['ov_iops'], ab and ab['iops']), '.2f')}x  "
            f"p99 {f(ratio(an['ov_p99'], ab and ab['p99']), '.1f')}x of its baseline")
    if an.get("ov_max") is not None:
        row("(e) anchor: worst request during its copy", f"{an['ov_max']:.3f} s")
    if an.get("copy_bps") is not None:
        rel = ""
        if an.get("leftover") is not None:
            rel = (f"{an['copy_of_link']:.2f} of link; {f(an['copy_of_leftover'], '.2f')} of the "
                   f"leftover ({an['link'] / 1e6:.2f} - foreground {an['fg_bps'] / 1e6:.2f} MB/s)")
        row("(e) anchor: copy while the job ran",
            f"{an['copy_bps'] / 1e6:.2f} MB/s over {an['copy_s']:.1f} s", rel)
    if an["running_at_end"] and an.get("end_len") is not None:
        row("(e) anchor: at the job's end", "copy still running",
            f"offset/len {an['end_offset'] / 1e6:.1f}/{an['end_len'] / 1e6:.1f} MB (query-block-jobs "
            f"{an['end_sample_dt']:+.2f} s from the end)")
    elif not an["running_at_end"]:
        row("(e) anchor: at the job's end", "copy done (READY)",
            f"{an['overlap_s']:.1f} s of {an['job_s']:.1f} s of the job ran during the copy")
    if an.get("ready_s") is not None:
        row("(e) anchor: mirror start -> READY", f"{an['ready_s']:.1f} s",
            f"{an['mb'] * 1.048576:.1f} MB copied; the job started "
            f"{f(an['start_after_mirror_s'], '.2f')} s after blockdev-mirror")
    else:
        row("(e) anchor: mirror start -> READY", "not READY (timed out)")
    if an["overlap"] < 0.75:
        notes.append(f"WARNING: (e) the anchor's copy ended after {an['overlap'] * 100:.0f}% of the job; "
                     "the 'during its copy' ratios mix in time in sync: raise ANCHOR_MB")
w = max(len(r[0]) for r in rows) if rows else 0
v = max(len(r[1]) for r in rows) if rows else 0
for n, val, rel in rows:
    print(f"{n:{w}s}  {val:{v}s}  {rel}".rstrip())
def rf(x):  # a ratio: 2 decimals, 2 significant digits below 0.1
    return "-" if x is None else format(x, ".2f" if x >= 0.1 or x == 0 else ".2g")
if an:
    t, q = during(dur), during(an)
    if t and q:
        print(f"Tandem/anchor during resync: IOPS {rf(ratio(t[0], q[0]))}, "
              f"p99 {rf(ratio(t[1], q[1]))}  ((b) {t[2]} vs (e) {q[2]})")
    else:
        print("Tandem/anchor during resync: - ((b) did not run)")
    if base and ab:
        print(f"Tandem/anchor in sync:        IOPS {rf(ratio(base['iops'], ab['iops']))}, "
              f"p99 {rf(ratio(base['p99'], ab['p99']))}  ((a) vs (e) baseline)")
for r in R:
    if r["kind"] == "note":
        notes.append(r["text"])
for x in notes:
    print(x)
PY
