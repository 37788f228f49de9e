#!/usr/bin/env bash
# Makes the seed corpora of the session harnesses (fuzz_nbd_session,
# fuzz_iscsi_session) from real clients: one tandemd node with NBD and iSCSI
# on loopback, a link proxy in front of each that captures what the client
# sends, and real clients (nbdinfo, qemu-io; iscsi-inq, iscsi-ls,
# qemu-io, and the test initiator's task management). Each capture, with a
# leading mode byte of 0, becomes one seed in tests/fuzz/corpus/.
#   bash tests/fuzz/session-seeds.sh [BUILD]      (needs the tools above)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build}
tools=$root/tests/tools
work=$(mktemp -d /tmp/tandem-seeds.XXXXXX)
pids=()
cleanup()
{
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
[ -n "${SEEDS_DEBUG:-}" ] && trap - EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
nbd=$(port) iscsi=$(port) pn=$(port) pi=$(port)
iqn=iqn.2026-11.org.tandem:seed.vol0
mkdir -p "$work/a"
cat >"$work/c.ini" <<EOF
[cluster]
name = seed
[node a]
nbd = 127.0.0.1:$nbd
iscsi = 127.0.0.1:$iscsi
control = $work/a.sock
data-dir = $work/a
[volume vol0]
size = 4M
nodes = a
disk.a = ram:
EOF
"$bin/tandemd" -c "$work/c.ini" -n a -f >"$work/a.log" 2>&1 &
pids+=($!)
for l in n i; do
	t=$([ $l = n ] && echo "$nbd" || echo "$iscsi")
	p=$([ $l = n ] && echo "$pn" || echo "$pi")
	python3 "$tools/linkproxy.py" --listen "127.0.0.1:$p" --target "127.0.0.1:$t" \
		--control "$work/px-$l.sock" >"$work/px-$l.log" 2>&1 &
	pids+=($!)
done
sleep 1

# seed KIND NAME CMD...: runs CMD with the capture of KIND's proxy on
seed()
{
	local kind=$1 name=$2 l out
	shift 2
	l=$([ "$kind" = nbd_session ] && echo n || echo i)
	out=$root/tests/fuzz/corpus/$kind/$name
	mkdir -p "${out%/*}"
	rm -f "$work/cap"
	python3 "$tools/linkproxy.py" --control "$work/px-$l.sock" --cmd "capture ab $work/cap" >/dev/null
	"$@" >/dev/null 2>&1 || echo "session-seeds: $name: the client failed (kept what it sent)" >&2
	sleep 0.3
	python3 "$tools/linkproxy.py" --control "$work/px-$l.sock" --cmd "capture off" >/dev/null
	{ printf '\0'; cat "$work/cap"; } >"$out"
	echo "$out: $(($(stat -c %s "$out") - 1)) bytes"
}

u=nbd://127.0.0.1:$pn/vol0
seed nbd_session info nbdinfo "$u"
seed nbd_session list nbdinfo --list "nbd://127.0.0.1:$pn"
seed nbd_session rw qemu-io -f raw "$u" -c "write -P 0x5a 0 4k" -c "read -P 0x5a 0 4k" \
	-c "flush" -c "discard 64k 64k" -c "write -z 128k 64k"
seed nbd_session map nbdinfo --map "$u"

i=iscsi://127.0.0.1:$pi
seed iscsi_session inq iscsi-inq "$i/$iqn/0"
seed iscsi_session ls iscsi-ls -s "$i"
seed iscsi_session rw qemu-io -f raw "$i/$iqn/0" -c "write -P 0x5a 0 8k" -c "read -P 0x5a 0 8k" \
	-c "flush" -c "discard 128k 64k"
# the test initiator: a write with solicited data (R2T), a read, an ABORT
# TASK, a LUN RESET, a NOP and a logout
seed iscsi_session tmf python3 - "$pi" "$iqn" "$root/tests/integration" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[3])
import iscsi_initiator as ii
s = ii.Session(int(sys.argv[1]), sys.argv[2], initiator="iqn.2026-12.test:seed",
               keys=("InitialR2T=Yes", "ImmediateData=No"))
s.cmd(struct.pack(">BBIBHB", 0x2a, 0, 8, 0, 16, 0), edtl=8192, data=b"\x33" * 8192)
s.cmd(struct.pack(">BBIBHB", 0x28, 0, 8, 0, 16, 0), edtl=8192, read=True)
s.cmd(struct.pack(">BBIBHB", 0x35, 0, 0, 0, 0, 0))
s.tmf(1, rtt=0x1234)
s.tmf(5)
s.cmd(bytes([0, 0, 0, 0, 0, 0]))
s.logout()
PY
