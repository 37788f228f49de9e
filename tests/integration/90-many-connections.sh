#!/usr/bin/env bash
# 8 clients of 3 kinds write 8 regions of one volume at the same time
# (nbdcopy through an nbdkit offset view, qemu-img convert into a raw offset
# view, qemu-io single large and many aio writes); every region must then hold
# exactly its client's data. While clients are connected, `tandemctl status`
# shows vol0 primary and uptodate.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need nbdcopy nbdkit qemu-img qemu-io cmp mkfifo
nbdkit nbd --version >/dev/null 2>&1 || { echo "SKIP: nbdkit has no nbd plugin" >&2; exit 77; }

export VOL_SIZE=128M
R=$((16 * 1024 * 1024)) # region size; region i is [i*R, (i+1)*R)
write_config "$T/c.ini"
start_node

# A connection held open for the whole test: qemu-io reading commands from a
# fifo. Its first write being answered proves it is connected.
mkfifo "$T/hold.fifo"
qemu-io -f raw "$NBD_URI" <"$T/hold.fifo" >"$T/hold.out" 2>&1 &
track $!
hold=$!
exec 3>"$T/hold.fifo"
echo "write -P 0x5e $((8 * R - 4096)) 4096" >&3
for ((i = 0; i < 200; i++)); do
	grep -q 'wrote 4096/4096' "$T/hold.out" 2>/dev/null && break
	alive "$hold" || break
	sleep 0.1
done
grep -q 'wrote 4096/4096' "$T/hold.out" || fail "holding client did not connect: $(cat "$T/hold.out")"

for i in 0 1 2 3 4 5; do
	head -c "$R" /dev/urandom >"$T/r$i"
done
# Regions 6 and 7 are written as 64 aio writes of 256 KiB with patterns;
# build the same bytes locally. The holder's last 4 KiB are inside region 7.
python3 - "$T" "$R" <<'EOF'
import sys
t, r = sys.argv[1], int(sys.argv[2])
for i in (6, 7):
    b = bytearray()
    for k in range(64):
        b += bytes([(i * 64 + k) % 251 + 1]) * (256 * 1024)
    if i == 7:
        b[r - 4096:] = b"\x5e" * 4096
    open("%s/r%d" % (t, i), "wb").write(b)
EOF

pids=()
view="file.driver=nbd,file.server.type=inet,file.server.host=127.0.0.1"
view+=",file.server.port=$NBD_PORT,file.export=vol0"
for i in 0 1; do
	nbdcopy --flush "$T/r$i" -- [ nbdkit --exit-with-parent --filter=offset nbd \
		hostname=127.0.0.1 port="$NBD_PORT" export=vol0 offset=$((i * R)) range="$R" ] \
		>"$T/c$i.out" 2>&1 &
	pids+=($!)
done
for i in 2 3; do
	qemu-img convert -n -f raw "$T/r$i" --target-image-opts \
		"driver=raw,offset=$((i * R)),size=$R,$view" >"$T/c$i.out" 2>&1 &
	pids+=($!)
done
for i in 4 5; do
	qemu-io -f raw "$NBD_URI" -c "write -s $T/r$i $((i * R)) $R" -c flush >"$T/c$i.out" 2>&1 &
	pids+=($!)
done
for i in 6 7; do
	cmds=()
	for k in $(seq 0 63); do
		cmds+=(-c "aio_write -P $(((i * 64 + k) % 251 + 1)) $((i * R + k * 256 * 1024)) 256k")
	done
	# The holder's block (last 4 KiB of region 7) is not rewritten here.
	[ "$i" = 7 ] && cmds[127]="aio_write -P $(((7 * 64 + 63) % 251 + 1)) $((8 * R - 256 * 1024)) $((252 * 1024))"
	qemu-io -f raw "$NBD_URI" "${cmds[@]}" -c aio_flush >"$T/c$i.out" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do
	track "$p"
done

# Status while clients are connected (the holder at least, usually all 9).
ctl status >"$T/status.txt" || fail "tandemctl status failed"
grep -Eq '^vol0 +128M +primary +uptodate' "$T/status.txt" ||
	fail "status does not show vol0 primary uptodate: $(cat "$T/status.txt")"
ctl status vol0 >/dev/null || fail "tandemctl status vol0 failed"
if ctl status novol >/dev/null 2>&1; then
	fail "tandemctl status of an unknown volume succeeded"
fi

i=0
for p in "${pids[@]}"; do
	wait "$p" || fail "client $i failed: $(cat "$T/c$i.out")"
	if grep -qiE 'fail|error' "$T/c$i.out"; then
		fail "client $i reported an error: $(cat "$T/c$i.out")"
	fi
	i=$((i + 1))
done

# The holder is still connected and works after all that.
echo "read -P 0x5e $((8 * R - 4096)) 4096" >&3
echo "quit" >&3
exec 3>&-
wait "$hold" || fail "holding client failed: $(cat "$T/hold.out")"
grep -q 'Pattern verification failed' "$T/hold.out" && fail "holder's block changed: $(cat "$T/hold.out")"
grep -q 'read 4096/4096' "$T/hold.out" || fail "holder's final read missing: $(cat "$T/hold.out")"

nbdcopy "$NBD_URI" "$T/full.img" || fail "nbdcopy out failed"
for i in 0 1 2 3 4 5 6 7; do
	cmp -i $((i * R)):0 -n "$R" "$T/full.img" "$T/r$i" || fail "region $i holds the wrong data"
done

stop_node
