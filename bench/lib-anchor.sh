# shellcheck shell=bash
# Sourced by bench scripts (after lib-link.sh): the anchor of synchronous
# replication, qemu-storage-daemon in namespace A exporting a raw file over
# NBD, its writes mirrored synchronously (blockdev-mirror
# copy-mode=write-blocking, READY before any measurement) to qemu-nbd in B;
# with "tls", the mirror's NBD connection runs TLS 1.3 with a pre-shared key.
#
#   anchor_tools                 writes $W/qmp.py and $W/nodelay.py (once)
#   anchor_nodelay_tool          writes $W/nodelay.py alone
#   start_anchor [tls]           fresh $W/anchor-{a,b}.img of SIZE_MB, both
#                                servers, mirror READY; sets PID_QN, PID_QSD
#   stop_anchor
#
# Uses W, NA, NB, IPA, IPB, PORT_Q, URI_anchor, SIZE_MB, RES, PIDS and
# ANCHOR_NODELAY (1: TCP_NODELAY on the target's end of the mirror's
# connection, set from outside once READY: qemu 7.2's NBD server leaves
# Nagle on for the sockets it accepts, which costs a 40 ms delayed ACK per
# short segment with two or more writes in flight).
ANCHOR_NOTE=0

anchor_tools() {
cat > "$W/qmp.py" <<'PY'
# Minimal QMP client for qemu-storage-daemon's monitor socket.
#   qmp.py SOCK mirror HOST PORT EXPORT TIMEOUT [TLS_CREDS]
#                                                 add the NBD target (over TLS with the
#                                                 credentials object TLS_CREDS), start the
#                                                 write-blocking mirror, wait READY
#   qmp.py SOCK check                             print the job's state; exit 1 if not ready
import json, socket, sys, time
def connect(path):
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
    def cmd(name, **args):
        f.write(json.dumps({"execute": name, "arguments": args}).encode() + b"\n"); f.flush()
        m = recv()
        if "error" in m:
            sys.exit(f"qmp: {name}: {m['error'].get('desc')}")
        return m["return"]
    recv()  # greeting
    cmd("qmp_capabilities")
    return cmd
cmd = connect(sys.argv[1])
if sys.argv[2] == "mirror":
    host, port, export, timeout = sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6])
    tgt = {"driver": "nbd", "node-name": "tgt", "export": export,
           "server": {"type": "inet", "host": host, "port": port}}
    if len(sys.argv) > 7:
        tgt["tls-creds"] = sys.argv[7]
    cmd("blockdev-add", **tgt)
    cmd("blockdev-mirror", **{"job-id": "m0", "device": "src", "target": "tgt",
                              "sync": "full", "copy-mode": "write-blocking",
                              "filter-node-name": "mtop"})
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        jobs = [j for j in cmd("query-block-jobs") if j["device"] == "m0"]
        if not jobs:
            sys.exit("qmp: mirror job m0 vanished")
        if jobs[0].get("ready"):
            print(f"mirror m0 ready: {jobs[0]['offset']}/{jobs[0]['len']} bytes copied")
            sys.exit(0)
        time.sleep(0.2)
    sys.exit(f"qmp: mirror not READY after {timeout:.0f} s: {jobs}")
elif sys.argv[2] == "check":
    jobs = [j for j in cmd("query-block-jobs") if j["device"] == "m0"]
    print(json.dumps(jobs))
    sys.exit(0 if jobs and jobs[0].get("ready") and jobs[0].get("status") == "ready" else 1)
PY
anchor_nodelay_tool
}

# anchor_nodelay_tool: writes $W/nodelay.py (also for bench/resync.sh).
anchor_nodelay_tool() {
cat > "$W/nodelay.py" <<'PY'
# nodelay.py PID PORT: sets TCP_NODELAY on PID's connected TCP sockets whose
# local port is PORT, through duplicates taken with pidfd_getfd(2).
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
pid, port, done = int(sys.argv[1]), int(sys.argv[2]), 0
pfd = os.pidfd_open(pid)
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
            continue
    except OSError:
        continue
    dup = libc.syscall(438, pfd, int(fd), 0)  # SYS_pidfd_getfd
    if dup < 0:
        sys.exit(f"nodelay: pidfd_getfd: {os.strerror(ctypes.get_errno())}")
    s = socket.socket(fileno=dup)
    try:
        if s.family == socket.AF_INET and s.type == socket.SOCK_STREAM and s.getsockname()[1] == port:
            s.getpeername()  # listening sockets raise here
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            done += 1
    except OSError:
        pass
    finally:
        s.close()  # the duplicate only; the socket stays open in PID
print(done)
sys.exit(0 if done else 1)
PY
}

start_anchor() {
	local tls_srv=() tls_cli=() creds=()
	rm -f "$W/anchor-a.img" "$W/anchor-b.img" "$W/qmp.sock"
	truncate -s "${SIZE_MB}M" "$W/anchor-a.img" "$W/anchor-b.img"
	if [ "${1:-}" = tls ]; then
		# TLS 1.3 with a pre-shared key (qemu's tls-creds-psk, GnuTLS),
		# AES-128-GCM as Tandem's: a fresh key per start
		mkdir -p "$W/psk"
		echo "qemu:$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$W/psk/keys.psk"
		local prio=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM
		tls_srv=(--object "tls-creds-psk,id=tls0,endpoint=server,dir=$W/psk,priority=$prio" --tls-creds tls0)
		tls_cli=(--object "tls-creds-psk,id=tls0,endpoint=client,dir=$W/psk,username=qemu,priority=$prio")
		creds=(tls0)
	fi
	# The mirror target: qemu-nbd in B, O_DIRECT + io_uring like the source.
	ip netns exec "$NB" qemu-nbd -f raw -x vol0 -b "$IPB" -p "$PORT_Q" --persistent -e 4 \
		--cache=none --aio=io_uring "${tls_srv[@]}" "$W/anchor-b.img" 2> "$W/qemu-nbd.log" &
	PID_QN=$!
	PIDS+=("$PID_QN")
	if [ ${#creds[@]} = 0 ]; then
		wait_nbd "$NB" "nbd://$IPB:$PORT_Q/vol0" "$PID_QN" "qemu-nbd (B)" "$W/qemu-nbd.log"
	else # (nbdinfo speaks no PSK: wait for the port)
		local end=$((SECONDS + 30))
		until ip netns exec "$NB" ss -Hltn "sport = :$PORT_Q" | grep -q .; do
			alive_or_die "$PID_QN" "qemu-nbd (B)" "$W/qemu-nbd.log"
			[ $SECONDS -lt $end ] || die "qemu-nbd (B) does not listen on $PORT_Q"
			sleep 0.1
		done
	fi
	# The source: qsd in A exporting node "src". blockdev-mirror inserts its
	# filter above src and moves every parent of src, the export included, onto
	# it, so NBD writes go through the mirror from then on.
	ip netns exec "$NA" qemu-storage-daemon "${tls_cli[@]}" \
		--blockdev "driver=file,node-name=f0,filename=$W/anchor-a.img,cache.direct=on,aio=io_uring" \
		--blockdev driver=raw,node-name=src,file=f0 \
		--nbd-server "addr.type=inet,addr.host=$IPA,addr.port=$PORT_Q" \
		--export type=nbd,id=exp0,node-name=src,name=vol0,writable=on \
		--chardev "socket,id=qmp0,path=$W/qmp.sock,server=on,wait=off" \
		--monitor chardev=qmp0 2> "$W/qsd.log" &
	PID_QSD=$!
	PIDS+=("$PID_QSD")
	wait_nbd "$NA" "${URI_anchor:?}" "$PID_QSD" "qemu-storage-daemon (A)" "$W/qsd.log"
	python3 "$W/qmp.py" "$W/qmp.sock" mirror "$IPB" "$PORT_Q" vol0 120 "${creds[@]}" >&2 ||
		die "qemu-storage-daemon: mirror did not start (log: $(tail -n 5 "$W/qsd.log" | tr '\n' ' '))"
	local note
	if [ "$ANCHOR_NODELAY" = 1 ]; then
		if python3 "$W/nodelay.py" "$PID_QN" "$PORT_Q" > /dev/null 2> "$W/nodelay.err"; then
			note="note anchor: TCP_NODELAY set on the mirror target's socket (qemu-nbd leaves Nagle on; ANCHOR_NODELAY=0 for stock qemu)"
		else
			note="note anchor: could not set TCP_NODELAY on the target's socket ($(tr '\n' ' ' < "$W/nodelay.err")): stock qemu, Nagle on"
		fi
	else
		note="note anchor: stock qemu (ANCHOR_NODELAY=0): Nagle on at the target's NBD server"
	fi
	[ "$ANCHOR_NOTE" = 1 ] || echo "$note" >> "$RES"
	ANCHOR_NOTE=1
}

stop_anchor() {
	stop_pids "$PID_QSD" "$PID_QN"
	forget "$PID_QSD" "$PID_QN"
}
