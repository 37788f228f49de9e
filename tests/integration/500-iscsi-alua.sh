#!/usr/bin/env bash
# ALUA on a replicated pair with a witness (SPEC "ALUA"): each node is one
# target port group (ids 1 for a, 2 for b). Sessions on both nodes, kept
# open throughout (tests/integration/iscsi_initiator.py):
#  1. Both ports: INQUIRY says TPGS 11b; VPD 0x83 has the same NAA id on both
#     and each node's relative target port and port group; REPORT TARGET PORT
#     GROUPS agrees on both: a active/optimized, b standby. The standby b
#     serves INQUIRY, REPORT LUNS, MODE SENSE, PERSISTENT RESERVE IN, REQUEST
#     SENSE and READ CAPACITY, and refuses TEST UNIT READY and READ with NOT
#     READY 04/0B.
#  2. SET TARGET PORT GROUPS sent to b (group 2 active/optimized) switches
#     the roles: GOOD, b is primary, a secondary; the session on each node
#     gets ASYMMETRIC ACCESS STATE CHANGED (2A/06); the port groups agree.
#     A node may report the other's old role for a moment, then tells its
#     sessions 2A/06 again; two groups are never active/optimized at once.
#  3. kill -9 of b: a takes over through the witness; a's session gets 2A/06
#     and a reports itself active/optimized, b unavailable. b restarts and
#     rejoins as secondary: both report a active/optimized, b standby.
#  4. Software write protect on the primary a: SWP is changeable in the
#     control mode page; set, a WRITE gets DATA PROTECT 27/00 and MODE SENSE
#     shows WP; another session gets MODE PARAMETERS CHANGED (2A/01);
#     cleared, the WRITE is GOOD.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M
IQN=iqn.2026-11.org.tandem:it.vol0
write_config3 "$T/c.ini"
declare -A ISCP=()
for n in a b; do
	ISCP[$n]=$(free_port)
	sed -i "s|^nbd = 127.0.0.1:${NBDP[$n]}\$|&\niscsi = 127.0.0.1:${ISCP[$n]}|" "$CFG"
done
[ "$(grep -c '^iscsi = ' "$CFG")" -eq 2 ] || { cat "$CFG" >&2; fail "iscsi lines not in the config"; }

start_trio
wait_for a "v['role'] == 'primary'"

cat >"$T/alua.py" <<'PY'
import os, struct, sys, time
import iscsi_initiator as ini
from iscsi_initiator import Session, die, sense_key as keyq

pa, pb, iqn, tdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ini.NAME = "alua"
NOT_READY, UA_ALUA, UA_MODE = (2, 0x04, 0x0b), (6, 0x2a, 0x06), (6, 0x2a, 0x01)
AO, S, U = 0, 2, 3
names = {AO: "active/optimized", S: "standby", U: "unavailable"}

def login(port, isid, who):
    s = Session(port, iqn, isid=isid, initiator="iqn.2026-12.test:" + who)
    if s.login_status != (0, 0):
        die("login to port %d refused: %s" % (port, s.login_status))
    return s

def cmd(s, cdb, edtl=0, read=False, data=b""):
    st, buf, sense, rej = s.cmd(cdb, edtl, read, data)
    if rej:
        die("Reject for CDB %s" % cdb.hex())
    return st, buf, keyq(sense) if st == 2 else None

def good(s, name, cdb, edtl=0, read=False, data=b""):
    st, buf, k = cmd(s, cdb, edtl, read, data)
    if st != 0:
        die("%s: status 0x%02x sense %s, expected GOOD" % (name, st, k))
    return buf

def expect(s, name, want, cdb, edtl=0, read=False, data=b""):
    st, buf, k = cmd(s, cdb, edtl, read, data)
    if st != 2 or k != want:
        die("%s: status 0x%02x sense %s, expected %s" % (name, st, k, want))

def past_ua(s, what, cdb, edtl=0, read=False, data=b""):
    """The command, after the unit attentions it meets (returned as a list)."""
    seen = []
    for _ in range(8):
        st, buf, k = cmd(s, cdb, edtl, read, data)
        if st == 2 and k and k[0] == 6:
            seen.append(k)
            continue
        return st, buf, k, seen
    die("%s: unit attentions without end: %s" % (what, seen))

INQ = bytes([0x12, 0, 0, 0x10, 0, 0])
VPD83 = bytes([0x12, 1, 0x83, 0x10, 0, 0])
RTPG = bytes([0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0])
RTPG_EXT = bytes([0xa3, 0x2a, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0])
TUR = bytes(6)
R10 = bytes([0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0])
W10 = bytes([0x2a, 0, 0, 0, 0, 8, 0, 0, 1, 0])

def groups(s, who, ext=False):
    st, buf, k, seen = past_ua(s, who, RTPG_EXT if ext else RTPG, 4096, read=True)
    if st != 0:
        die("%s: REPORT TARGET PORT GROUPS status 0x%02x sense %s" % (who, st, k))
    n, p = struct.unpack_from(">I", buf, 0)[0], 8 if ext else 4
    if ext and buf[4] != 0x10:
        die("%s: extended header format byte 0x%02x" % (who, buf[4]))
    if len(buf) != n + 4:
        die("%s: RTPG length %d for %d bytes" % (who, n, len(buf)))
    g = {}
    while p < len(buf):
        state, sup, gid, cnt = buf[p] & 0x0f, buf[p + 1], struct.unpack_from(">H", buf, p + 2)[0], buf[p + 7]
        ports = [struct.unpack_from(">H", buf, p + 8 + 4 * i + 2)[0] for i in range(cnt)]
        if sup & 0x0d != 0x0d or ports != [gid]:
            die("%s: group %d: supported 0x%02x ports %s" % (who, gid, sup, ports))
        g[gid] = state
        p += 8 + 4 * cnt
    return g, seen

def agree(sa, sb, want, what):
    """Each node reports want. A node learns the other's new role by a
    message after its own changed, so it may report the old one for a
    moment; it then tells every session again (2A/06), and an initiator
    asks again. Two groups active/optimized at once is never right."""
    for s, who in ((sa, "a"), (sb, "b")):
        if s is None:
            continue
        t0 = time.time()
        while True:
            g, seen = groups(s, who)
            if sum(1 for v in g.values() if v == AO) > 1:
                die("%s (%s): two groups active/optimized: %s" % (who, what, g))
            if g == want:
                break
            if time.time() - t0 > 5:
                die("%s (%s): port groups %s, expected %s" % (who, what, g, want))
            time.sleep(0.05)
    return "%s: %s" % (what, ", ".join("group %d %s" % (k, names[v]) for k, v in sorted(want.items())))

def identity(s, who, gid):
    inq = good(s, who + " INQUIRY", INQ, 4096, read=True)
    if inq[5] & 0x30 != 0x30:
        die("%s: INQUIRY TPGS bits 0x%02x" % (who, inq[5]))
    d = good(s, who + " VPD 0x83", VPD83, 4096, read=True)
    p, found, naa = 4, {}, None
    while p + 4 <= len(d):
        typ, assoc, ln = d[p + 1] & 0x0f, (d[p + 1] >> 4) & 3, d[p + 3]
        if typ == 3 and assoc == 0:
            naa = d[p + 4:p + 4 + ln]
        if typ in (4, 5) and assoc == 1:
            found[typ] = struct.unpack_from(">H", d, p + 6)[0]
        p += 4 + ln
    if found != {4: gid, 5: gid} or not naa:
        die("%s: VPD 0x83 designators %s naa %s" % (who, found, naa))
    return naa

def keep(sessions, step):
    """Asks the shell for step, keeping the sessions busy until it is done."""
    open(os.path.join(tdir, "want-" + step), "w").close()
    done = os.path.join(tdir, "done-" + step)
    t0 = time.time()
    while not os.path.exists(done):
        if time.time() - t0 > 90:
            die("the shell did not do %s" % step)
        for s in sessions:
            good(s, "INQUIRY (keepalive)", INQ, 4096, read=True)
        time.sleep(0.5)

out = []
sa, sb = login(pa, 1, "host-1"), login(pb, 1, "host-1")
if identity(sa, "a", 1) != identity(sb, "b", 2):
    die("the NAA identifiers of a and b differ")
out.append(agree(sa, sb, {1: AO, 2: S}, "start"))
g, _ = groups(sb, "b", ext=True)
if g != {1: AO, 2: S}:
    die("b (extended header): %s" % g)
good(sb, "b REPORT LUNS", bytes([0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0]), 16, read=True)
good(sb, "b MODE SENSE", bytes([0x1a, 0, 0x3f, 0, 255, 0]), 255, read=True)
good(sb, "b PR IN", bytes([0x5e, 0, 0, 0, 0, 0, 0, 0x10, 0, 0]), 4096, read=True)
good(sb, "b READ CAPACITY 10", bytes([0x25] + [0] * 9), 8, read=True)
rs = good(sb, "b REQUEST SENSE", bytes([0x03, 0, 0, 0, 18, 0]), 18, read=True)
if keyq(rs) != NOT_READY:
    die("b REQUEST SENSE: %s" % (keyq(rs),))
expect(sb, "b TEST UNIT READY", NOT_READY, TUR)
expect(sb, "b READ 10", NOT_READY, R10, 512, read=True)
out.append("standby b: INQUIRY, REPORT LUNS, RTPG, MODE SENSE, PR IN, READ CAPACITY, REQUEST SENSE served; TUR, READ NOT READY 04/0B")

# 2. SET TARGET PORT GROUPS on b: group 2 active/optimized.
t0 = time.time()
good(sb, "b SET TARGET PORT GROUPS", bytes([0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0]), 8,
     data=bytes([0, 0, 0, 0, AO, 0, 0, 2]))
dt = time.time() - t0
for s, who, want in ((sb, "b", 0), (sa, "a", 2)):
    st, _, k, seen = past_ua(s, who, TUR)
    if UA_ALUA not in seen:
        die("%s: no ASYMMETRIC ACCESS STATE CHANGED after SET TARGET PORT GROUPS (%s)" % (who, seen))
    if st != want:
        die("%s: TEST UNIT READY status 0x%02x after the switch" % (who, st))
out.append("SET TARGET PORT GROUPS on b: GOOD in %.3f s; 2A/06 on a and b" % dt)
out.append(agree(sa, sb, {1: S, 2: AO}, "after STPG"))
expect(sa, "a TEST UNIT READY (now standby)", NOT_READY, TUR)

# 3. kill -9 of the primary b: a takes over.
keep([sa], "kill-b")
st, _, k, seen = past_ua(sa, "a", TUR)
if UA_ALUA not in seen or st != 0:
    die("a after the failover: TUR 0x%02x, unit attentions %s" % (st, seen))
out.append(agree(sa, None, {1: AO, 2: U}, "b killed, a took over"))
keep([sa], "restart-b")
sb = login(pb, 1, "host-1")
out.append(agree(sa, sb, {1: AO, 2: S}, "b rejoined"))

# 4. Software write protect on a.
sa2 = login(pa, 2, "host-2")
good(sa2, "a TUR (second session)", TUR)
ch = good(sa, "MODE SENSE changeable control", bytes([0x1a, 0, 0x4a, 0, 255, 0]), 255, read=True)
if ch[4 + ch[3] + 4] & 0x08 == 0:
    die("SWP is not changeable: %s" % ch.hex())
cur = good(sa, "MODE SENSE control", bytes([0x1a, 0, 0x0a, 0, 255, 0]), 255, read=True)
page = bytearray(cur[4 + cur[3]:])
page[0] &= 0x3f
def swp(on):
    page[4] = (page[4] & ~0x08) | (0x08 if on else 0)
    plist = bytes(4) + bytes(page)
    good(sa, "MODE SELECT SWP=%d" % on, bytes([0x15, 0x10, 0, 0, len(plist), 0]), len(plist), data=plist)
swp(1)
expect(sa, "WRITE 10 with SWP", (7, 0x27, 0x00), W10, 512, data=b"\x5a" * 512)
hdr = good(sa, "MODE SENSE with SWP", bytes([0x1a, 0x08, 0x0a, 0, 255, 0]), 255, read=True)
if not hdr[2] & 0x80:
    die("MODE SENSE header without WP while SWP is set")
st, _, k, seen = past_ua(sa2, "a (second session)", TUR)
if UA_MODE not in seen:
    die("the second session got %s, not MODE PARAMETERS CHANGED" % seen)
swp(0)
good(sa, "WRITE 10 after SWP cleared", W10, 512, data=b"\x5a" * 512)
out.append("SWP: WRITE refused with DATA PROTECT 27/00, WP shown, 2A/01 on the other session; cleared: WRITE GOOD")
for s in (sa, sa2, sb):
    s.logout()
print("\n".join(out))
PY

PYTHONPATH=$_root/tests/integration python3 "$T/alua.py" "${ISCP[a]}" "${ISCP[b]}" "$IQN" "$T" \
	>"$T/alua.out" 2>"$T/alua.err" &
APID=$!
track "$APID"

# wait_step NAME: until the script asks for NAME (or ends).
wait_step()
{
	local i
	for ((i = 0; i < 1200; i++)); do
		[ -e "$T/want-$1" ] && return 0
		alive "$APID" || { cat "$T/alua.err" >&2; fail "the ALUA script ended before $1"; }
		sleep 0.05
	done
	fail "the ALUA script never asked for $1"
}

wait_step kill-b
wait_for b "v['role'] == 'primary'" 5
wait_for a "v['role'] == 'secondary'" 5
crash b
wait_for a "v['role'] == 'primary' and v['disk'] == 'uptodate'" 15
touch "$T/done-kill-b"
wait_step restart-b
start b
wait_connected
wait_for b "v['role'] == 'secondary'"
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
touch "$T/done-restart-b"
wait "$APID" || fail "ALUA: $(cat "$T/alua.err")"
_forget "$APID"
while read -r line; do log "$line"; done <"$T/alua.out"
compare_replicas
stop a
stop b
kill_witness TERM
log "ok"
