#!/usr/bin/env bash
# The replication tests' iSCSI variant: a connected pair (a primary, b
# secondary), each node with its own iSCSI portal.
#  1. qemu-img converts a random image onto a's LUN; after wait-sync both data
#     areas are identical byte for byte and the LUN equals the image.
#  2. The secondary b: SendTargets discovery lists the target, and on a session
#     to its LUN (a small raw initiator written here, see below) INQUIRY,
#     REPORT LUNS and READ CAPACITY 16 answer GOOD while TEST UNIT READY, READ,
#     WRITE and SYNCHRONIZE CACHE get CHECK CONDITION, NOT READY, 04/0B
#     (logical unit not accessible, target port in standby state); the refused
#     WRITE changed nothing. qemu (libiscsi) cannot open b's LUN at all and
#     says NOT READY 04/0B.
#  3. Planned switchover (secondary on a, then primary on b without --force);
#     writes over iSCSI on b (1 to 8 MiB each, then a flush) are on both data
#     areas; a now refuses medium access the same way, b accepts it.
#  4. FLUSH path on the new primary b: qemu-io writes a 0x5a pattern and
#     flushes (SYNCHRONIZE CACHE 10 from qemu's iscsi driver); the raw initiator
#     sends SYNCHRONIZE CACHE 10 and 16 too (GOOD). After wait-sync the pattern
#     is in both data files (a secondary refuses reads, so the files are
#     compared), and the replicas are identical.
#  5. Persistent reservations survive a switchover: on the primary b the raw
#     initiator (I_T nexus with ISID 1) registers a key and takes a WRITE
#     EXCLUSIVE reservation; after switching back to a, a reports the key
#     and the reservation (PERSISTENT RESERVE IN), and enforces it: a second
#     nexus (ISID 2) may read but its WRITE gets RESERVATION CONFLICT, while
#     the holder writes; then the holder releases and unregisters.
#
# Why a raw initiator for the secondary: libiscsi (iscsi-inq,
# iscsi-readcapacity16, iscsi-test-cu, qemu's iscsi driver) ends every login
# with TEST UNIT READY and treats NOT READY 04/0B as a failed login, so none of
# its tools gets to send INQUIRY or READ to a port in standby; `iscsi-ls -s`
# lists the target and then fails on that TEST UNIT READY. The probe below logs
# in (operational stage only, AuthMethod not offered: none configured) and
# sends single commands, checking status and fixed-format sense itself.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-img qemu-io iscsi-ls cmp python3

export VOL_SIZE=64M
M=$((1 << 20))
SIZE=$((64 * M))
IQN=iqn.2026-11.org.tandem:it.vol0
INIT=iqn.2026-12.test:init

write_config2 "$T/c.ini"
# each node's iSCSI portal goes into its own [node X] section, after its nbd
# line (free_port: a port distinct from the five write_config2 drew)
declare -A ISCP=()
for n in a b; do
	ISCP[$n]=$(free_port)
	sed -i "s|^nbd = 127.0.0.1:${NBDP[$n]}\$|&\niscsi = 127.0.0.1:${ISCP[$n]}|" "$CFG"
done
[ "$(grep -c '^iscsi = ' "$CFG")" -eq 2 ] || { cat "$CFG" >&2; fail "iscsi lines not in the config"; }

lun() { echo "iscsi://127.0.0.1:${ISCP[$1]}/$IQN/0"; }

# ---- the raw initiator (tests/integration/iscsi_initiator.py) ----
# python3 $T/probe.py PORT IQN MODE [EXPECT_FILE LBA [ISID]]
#   standby: INQUIRY, REPORT LUNS, READ CAPACITY 16 GOOD; REQUEST SENSE
#            reports NOT READY 04/0B; TEST UNIT READY, READ 10/16, WRITE 10
#            (one block of 0xA5 at LBA, immediate data), SYNCHRONIZE CACHE
#            10/16 get CHECK CONDITION NOT READY 04/0B.
#   active:  the same commands are GOOD, except that no WRITE is sent; READ 10
#            of 16 blocks at LBA returns what EXPECT_FILE holds there.
#   pr-set:  REGISTER a key, RESERVE WRITE EXCLUSIVE; then as pr-other without
#            the WRITE. pr-other: READ KEYS and READ RESERVATION show them; a
#            WRITE at LBA gets RESERVATION CONFLICT, a READ is GOOD.
#   pr-holder: the holder's WRITE at LBA is GOOD; RELEASE, unregister.
#   pr-clear: no registration and no reservation remain.
cat >"$T/probe.py" <<'PY'
import struct, sys
import iscsi_initiator as ini
from iscsi_initiator import Session, die, sense_key as keyq

port, iqn, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
expect = sys.argv[4] if len(sys.argv) > 4 else None
lba = int(sys.argv[5]) if len(sys.argv) > 5 else 0
isid_last = int(sys.argv[6]) if len(sys.argv) > 6 else 1
KEY = 0x54414e44454d3031  # "TANDEM01"
SIZE = 64 << 20
ini.NAME = "probe (%s on port %d)" % (mode, port)

sess = Session(port, iqn, isid=isid_last)
if sess.login_status != (0, 0):
    die("login refused: status class %d detail %d" % sess.login_status)

def cmd(cdb, edtl=0, read=False, data=b""):
    st, buf, sense, rejects = sess.cmd(cdb, edtl, read, data)
    if rejects:
        die("Reject for CDB %s" % cdb.hex())
    return st, buf, sense

NOT_READY = (2, 0x04, 0x0b)
res = []

def good(name, cdb, edtl=0, read=False, data=b""):
    st, buf, sense = cmd(cdb, edtl, read, data)
    if st != 0:
        die("%s: status 0x%02x, sense %s, expected GOOD" % (name, st, keyq(sense)))
    res.append(name + " GOOD")
    return buf

def not_ready(name, cdb, edtl=0, read=False, data=b""):
    st, buf, sense = cmd(cdb, edtl, read, data)
    if st != 0x02:
        die("%s: status 0x%02x, expected CHECK CONDITION" % (name, st))
    if keyq(sense) != NOT_READY:
        die("%s: sense %s (%s), expected NOT READY 04/0B" % (name, keyq(sense), sense.hex()))
    if buf:
        die("%s: %d bytes of data came with NOT READY" % (name, len(buf)))
    res.append(name + " NOT READY 04/0B")

inq = good("INQUIRY", bytes([0x12, 0, 0, 0, 96, 0]), 96, read=True)
if inq[8:16].rstrip() != b"TANDEM" or (inq[0] & 0xe0):
    die("INQUIRY data: %s" % inq[:36])
good("REPORT LUNS", bytes([0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0]), 16, read=True)
cap = good("READ CAPACITY 16", bytes([0x9e, 0x10] + [0] * 8 + [0, 0, 0, 32, 0, 0]), 32, read=True)
last, blen = struct.unpack_from(">QI", cap, 0)
if (last, blen) != (SIZE // 512 - 1, 512):
    die("READ CAPACITY 16: last LBA %d, block %d" % (last, blen))
st, rs, _ = cmd(bytes([0x03, 0, 0, 0, 18, 0]), 18, read=True)
if st != 0:
    die("REQUEST SENSE: status 0x%02x" % st)
want = NOT_READY if mode == "standby" else (0, 0, 0)
if keyq(rs) != want:
    die("REQUEST SENSE reports %s, expected %s" % (keyq(rs), want))
res.append("REQUEST SENSE %s" % ("NOT READY 04/0B" if mode == "standby" else "NO SENSE"))

def prout(sa, rtype, rkey, sakey):
    cdb = bytes([0x5f, sa, rtype, 0, 0, 0, 0, 0, 24, 0])
    return cmd(cdb, 24, data=struct.pack(">QQ", rkey, sakey) + bytes(8))

def prin(sa):
    cdb = bytes([0x5e, sa, 0, 0, 0, 0, 0, 0x10, 0, 0])
    st, buf, sense = cmd(cdb, 4096, read=True)
    if st != 0:
        die("PERSISTENT RESERVE IN %d: status 0x%02x sense %s" % (sa, st, keyq(sense)))
    return buf

w_one = bytes([0x2a, 0]) + struct.pack(">I", lba) + bytes([0, 0, 1, 0])
if mode in ("pr-set", "pr-holder", "pr-other", "pr-clear"):
    if mode == "pr-set":
        for name, (st, _, sense) in (("REGISTER", prout(0, 0, 0, KEY)),
                                     ("RESERVE WE", prout(1, 1, KEY, 0))):
            if st != 0:
                die("%s: status 0x%02x sense %s" % (name, st, keyq(sense)))
            res.append(name + " GOOD")
    keys = prin(0)
    gen, n = struct.unpack_from(">II", keys, 0)
    rsv = prin(1)
    if mode == "pr-clear":
        if n or struct.unpack_from(">I", rsv, 4)[0]:
            die("registrations or a reservation remain: %s / %s" % (keys.hex(), rsv.hex()))
        res.append("no registration, no reservation (generation %d)" % gen)
    else:
        if n != 8 or struct.unpack_from(">Q", keys, 8)[0] != KEY:
            die("READ KEYS: %s" % keys[:16 + n].hex())
        if struct.unpack_from(">I", rsv, 4)[0] != 16 or struct.unpack_from(">Q", rsv, 8)[0] != KEY or (rsv[21] & 0x0f) != 1:
            die("READ RESERVATION: %s" % rsv[:24].hex())
        res.append("READ KEYS: key %016x (generation %d); READ RESERVATION: WRITE EXCLUSIVE" % (KEY, gen))
    if mode == "pr-other":
        st, _, _ = cmd(w_one, 512, data=b"\x3c" * 512)
        if st != 0x18:
            die("WRITE from a second nexus: status 0x%02x, expected RESERVATION CONFLICT" % st)
        res.append("WRITE from another nexus: RESERVATION CONFLICT")
        good("READ 10 from another nexus", bytes([0x28, 0]) + struct.pack(">I", lba) + bytes([0, 0, 1, 0]), 512, read=True)
    if mode == "pr-holder":
        good("WRITE 10 by the holder", w_one, 512, data=b"\x3c" * 512)
        for name, (st, _, sense) in (("RELEASE", prout(2, 1, KEY, 0)),
                                     ("UNREGISTER", prout(0, 0, KEY, 0))):
            if st != 0:
                die("%s: status 0x%02x sense %s" % (name, st, keyq(sense)))
            res.append(name + " GOOD")
    mode = "done"

tur = bytes(6)
r10 = bytes([0x28, 0]) + struct.pack(">I", lba) + bytes([0, 0, 16, 0])
r16 = bytes([0x88, 0]) + struct.pack(">QI", lba, 16) + bytes(2)
sc10 = bytes([0x35] + [0] * 9)
sc16 = bytes([0x91] + [0] * 15)
if mode == "done":
    pass
elif mode == "standby":
    not_ready("TEST UNIT READY", tur)
    not_ready("READ 10", r10, 8192, read=True)
    not_ready("READ 16", r16, 8192, read=True)
    w10 = bytes([0x2a, 0]) + struct.pack(">I", lba) + bytes([0, 0, 1, 0])
    not_ready("WRITE 10 (immediate data)", w10, 512, data=b"\xa5" * 512)
    not_ready("SYNCHRONIZE CACHE 10", sc10)
    not_ready("SYNCHRONIZE CACHE 16", sc16)
else:
    good("TEST UNIT READY", tur)
    with open(expect, "rb") as f:
        f.seek(lba * 512)
        want = f.read(8192)
    if good("READ 10", r10, 8192, read=True) != want:
        die("READ 10 at LBA %d: not what was written" % lba)
    if good("READ 16", r16, 8192, read=True) != want:
        die("READ 16 at LBA %d: not what was written" % lba)
    good("SYNCHRONIZE CACHE 10", sc10)
    good("SYNCHRONIZE CACHE 16", sc16)

sess.logout()
print("; ".join(res))
PY

# standby NODE WHAT: discovery lists the target, the probe finds medium access
# refused with NOT READY 04/0B (and its WRITE lands nowhere), and qemu cannot
# open the LUN, saying NOT READY 04/0B.
standby()
{
	local n=$1 what=$2
	iscsi-ls -i "$INIT" "iscsi://127.0.0.1:${ISCP[$n]}" >"$T/ls.out" 2>&1 ||
		fail "discovery on $n ($what) failed: $(cat "$T/ls.out")"
	grep -q "Target:$IQN Portal:127.0.0.1:${ISCP[$n]},1" "$T/ls.out" ||
		fail "discovery on $n ($what) does not list $IQN: $(cat "$T/ls.out")"
	PYTHONPATH=$_root/tests/integration python3 "$T/probe.py" "${ISCP[$n]}" "$IQN" standby "" 4096 >"$T/probe.out" ||
		fail "$n ($what) does not refuse medium access as a standby port should"
	log "$n ($what): $(cat "$T/probe.out")"
	if qemu-io -f raw -c 'read 0 4k' "$(lun "$n")" >"$T/qio.out" 2>&1; then
		cat "$T/qio.out" >&2
		fail "qemu-io read from the LUN of $n ($what) succeeded"
	fi
	if ! grep -q 'NOT READY' "$T/qio.out" || ! grep -qi '0x040b' "$T/qio.out"; then
		cat "$T/qio.out" >&2
		fail "qemu-io on $n ($what) did not fail with NOT READY 04/0B"
	fi
	log "$n ($what): qemu-io: $(head -n 1 "$T/qio.out")"
}

# active NODE LBA: the probe's commands are GOOD on NODE and READ returns what
# expect.img holds at LBA.
active()
{
	PYTHONPATH=$_root/tests/integration python3 "$T/probe.py" "${ISCP[$1]}" "$IQN" active "$T/expect.img" "$2" >"$T/probe.out" ||
		fail "$1 (primary) does not serve its LUN"
	log "$1 (primary): $(cat "$T/probe.out")"
}

# roles A_ROLE B_ROLE: as reported on both sides, connected and established.
roles()
{
	wait_for a "v['role'] == '$1' and p['role'] == '$2' and p['connection'] == 'connected' and p['replication'] == 'established'" 10
	wait_for b "v['role'] == '$2' and p['role'] == '$1' and p['connection'] == 'connected' and p['replication'] == 'established'" 10
}

# ---- the scenario ----

t0=$(date +%s.%N)
start a
start b
wait_connected 30
roles primary secondary

# 1. Random data over iSCSI onto the primary a.
head -c "$SIZE" /dev/urandom >"$T/expect.img"
ts=$(date +%s.%N)
qemu-img convert -n -f raw -O raw "$T/expect.img" "$(lun a)" 2>"$T/conv.err" ||
	fail "qemu-img convert onto a's LUN failed: $(cat "$T/conv.err")"
log "qemu-img convert of 64 MiB onto a's LUN: $(python3 -c "import sys,time; print('%.2f s' % (time.time() - float(sys.argv[1])))" "$ts")"
ctl_on a wait-sync vol0 --timeout 30 || fail "a: wait-sync failed after the convert"
compare_replicas 30
qemu-img compare -f raw -F raw "$T/expect.img" "$(lun a)" >"$T/cmp.out" 2>&1 ||
	fail "image and a's LUN differ: $(cat "$T/cmp.out")"
cmp -n "$SIZE" "$T/expect.img" "$T/b/vol0.img" >&2 || fail "b's data area is not the image"
active a 8192

# 2. The secondary b refuses medium access; its refused WRITE changed nothing.
standby b "secondary"
cmp -n "$SIZE" "$T/expect.img" "$T/b/vol0.img" >&2 || fail "the WRITE refused on b changed b's data area"
cmp -n "$SIZE" "$T/expect.img" "$T/a/vol0.img" >&2 || fail "the WRITE refused on b changed a's data area"
roles primary secondary

# 3. Planned switchover a -> b, then writes over iSCSI on b.
ctl_on a secondary vol0 || fail "a: secondary failed"
ctl_on b primary vol0 || fail "b: primary (without --force) failed right after a became secondary"
roles secondary primary
cmds=()
# (offset, length) in MiB, written by one qemu-io run and flushed
for r in "4 8" "20 1" "40 2" "63 1"; do
	read -r off len <<<"$r"
	head -c $((len * M)) /dev/urandom >"$T/chunk$off"
	cmds+=(-c "write -s $T/chunk$off $((off * M)) $((len * M))")
	dd if="$T/chunk$off" of="$T/expect.img" bs=1M seek="$off" conv=notrunc status=none
done
qemu-io -f raw "$(lun b)" "${cmds[@]}" -c flush >"$T/qio.out" 2>&1 ||
	{ cat "$T/qio.out" >&2; fail "qemu-io writes on b's LUN failed"; }
[ "$(grep -c '^wrote .* bytes at offset' "$T/qio.out")" -eq 4 ] ||
	{ cat "$T/qio.out" >&2; fail "qemu-io writes on b's LUN not all acknowledged"; }
ctl_on b wait-sync vol0 --timeout 30 || fail "b: wait-sync failed after the writes on b"
compare_replicas 30
cmp -n "$SIZE" "$T/expect.img" "$T/a/vol0.img" >&2 || fail "a's data area lacks what was written on b"
qemu-img compare -f raw -F raw "$T/expect.img" "$(lun b)" >"$T/cmp.out" 2>&1 ||
	fail "expected image and b's LUN differ: $(cat "$T/cmp.out")"
active b 8192
standby a "secondary after the switchover"

# 4. FLUSH path on the primary b: a pattern written and flushed by qemu-io
# (SYNCHRONIZE CACHE 10), then SYNCHRONIZE CACHE 10/16 from the probe.
qemu-io -f raw "$(lun b)" -c "write -P 0x5a 1M 64k" -c flush >"$T/qio.out" 2>&1 ||
	{ cat "$T/qio.out" >&2; fail "qemu-io write + flush on b's LUN failed"; }
grep -q '^wrote 65536/65536 bytes at offset 1048576' "$T/qio.out" ||
	{ cat "$T/qio.out" >&2; fail "qemu-io pattern write on b not acknowledged"; }
python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(1 << 20); f.write(b"\x5a" * 65536)' "$T/expect.img"
active b 2048
ctl_on b wait-sync vol0 --timeout 30 || fail "b: wait-sync failed after the flush"
for n in a b; do
	python3 - "$T/$n/vol0.img" <<'PY' || fail "the 0x5a pattern is not in $n's data file"
import sys
with open(sys.argv[1], "rb") as f:
    f.seek(1 << 20)
    sys.exit(0 if f.read(65536) == b"\x5a" * 65536 else 1)
PY
done
compare_replicas 30
cmp -n "$SIZE" "$T/expect.img" "$T/a/vol0.img" >&2 || fail "a's data area is not what was written"
for n in a b; do
	[ "$(jfield $n "p['out_of_sync_bytes']")" = 0 ] || fail "$n reports bytes out of sync at the end"
done
roles secondary primary

# 5. Persistent reservations across a switchover (b -> a).
pr() { PYTHONPATH=$_root/tests/integration python3 "$T/probe.py" "${ISCP[$1]}" "$IQN" "$2" "" 100 "$3" >"$T/probe.out" ||
	fail "$1: reservations ($2, ISID $3) not as expected"; log "$1 $2 (ISID $3): $(cat "$T/probe.out")"; }
pr b pr-set 1
ctl_on b wait-sync vol0 --timeout 30 || fail "b: wait-sync failed after the reservation"
ctl_on b secondary vol0 || fail "b: secondary failed"
ctl_on a primary vol0 || fail "a: primary failed"
roles primary secondary
pr a pr-other 2
pr a pr-holder 1
pr a pr-clear 2
python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(100 * 512); f.write(b"\x3c" * 512)' "$T/expect.img"
ctl_on a wait-sync vol0 --timeout 30 || fail "a: wait-sync failed after the holder's write"
compare_replicas 30
cmp -n "$SIZE" "$T/expect.img" "$T/a/vol0.img" >&2 || fail "a's data area is not what was written"

stop b
stop a
log "ok in $(python3 -c "import sys,time; print('%.1f s' % (time.time() - float(sys.argv[1])))" "$t0")"
