#!/usr/bin/env bash
# COMPARE AND WRITE is atomic against every other write of the volume.
#  1. Two iSCSI sessions each pipeline 32 COMPARE AND WRITEs of one block, all
#     comparing with the block's current content A and writing their own new
#     content: exactly one of the 64 may succeed, every other must see
#     MISCOMPARE (a CAW that read A while another was between its read and
#     write would also succeed: a lost update, as VMware's ATS locking would
#     suffer it). The block then holds the winner's content. Ten rounds.
#  2. CAW against plain writes: session 1 pipelines a chain of 64 CAWs, each
#     expecting what the one before wrote (C0 -> C1 -> ... -> C64), while
#     session 2 writes other content into the block between them and qemu-io
#     writes there over NBD. Plain content never equals a chain step, so once a
#     plain write lands the chain is broken for good: the CAWs that succeed
#     must be a prefix of the chain, every other one MISCOMPARE, and the block
#     ends with one whole content (the last chain step that succeeded, or a
#     plain write's). Without the range lock, part 1 fails within a round.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3 qemu-io

export VOL_SIZE=16M
write_config_iscsi "$T/c.ini"
start_node

cat >"$T/caw.py" <<'PY'
import struct, subprocess, sys
import iscsi_initiator as ini
from iscsi_initiator import Session, die, sense_key

ini.NAME = "caw probe"
port, iqn, mode, nbd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
BLK, LBA = 512, 777
KEYS = ["InitiatorName=iqn.2026-12.test:caw", "InitialR2T=No", "FirstBurstLength=65536",
        "MaxRecvDataSegmentLength=65536"]

def read_block(s):
    st, data, _, _ = s.cmd(bytes([0x28, 0]) + struct.pack(">I", LBA) + bytes([0, 0, 1, 0]), BLK, read=True)
    if st != 0:
        die("READ: status 0x%02x" % st)
    return data

def write_cdb():
    return bytes([0x2a, 0]) + struct.pack(">I", LBA) + bytes([0, 0, 1, 0])

def write_block(s, content):
    st, _, sense, _ = s.cmd(write_cdb(), BLK, data=content)
    if st != 0:
        die("WRITE: status 0x%02x sense %s" % (st, sense.hex()))

def caw_cdb():
    return bytes([0x89, 0]) + struct.pack(">Q", LBA) + bytes([0, 0, 0, 1, 0, 0])

def content(tag, i):
    unit = b"%s-%05d-" % (tag, i)
    return (unit * (BLK // len(unit) + 1))[:BLK]

def miscompare(st, sense):
    return st == 0x02 and sense_key(sense) == (0x0e, 0x1d, 0x00)

s1, s2 = Session(port, iqn, isid=1, keys=KEYS), Session(port, iqn, isid=2, keys=KEYS)
if mode == "race":
    for rnd in range(10):
        a = content(b"BASE", rnd)
        write_block(s1, a)
        itts = {}
        for i in range(32):
            for who, s in ((b"S1", s1), (b"S2", s2)):
                new = content(who + b"r%d" % rnd, i)
                itts[(s, s.submit(caw_cdb(), 2 * BLK, data=a + new))] = new
        got = {}
        for s in (s1, s2):
            for itt, r in s.collect(32).items():
                got[(s, itt)] = r
        wins = [k for k, (st, _, _, _) in got.items() if st == 0]
        bad = [k for k, (st, _, sense, _) in got.items() if st != 0 and not miscompare(st, sense)]
        if bad:
            die("round %d: %d CAWs failed other than by MISCOMPARE" % (rnd, len(bad)))
        if len(wins) != 1:
            die("round %d: %d of 64 COMPARE AND WRITEs succeeded against the same content (1 expected)" % (rnd, len(wins)))
        if read_block(s2) != itts[wins[0]]:
            die("round %d: the block does not hold the winner's content" % rnd)
    print("10 rounds of 64 racing COMPARE AND WRITEs from 2 sessions: exactly 1 success each, the rest MISCOMPARE")
else:
    chain = [content(b"CHAIN", i) for i in range(65)]
    write_block(s1, chain[0])
    # plain writes of other content, from session 2 between the CAWs and from
    # NBD at the same time
    plain = [content(b"PLAIN", i) for i in range(4)]
    args = ["qemu-io", "-f", "raw", nbd]
    for i in range(16):
        args += ["-c", "write -P 0x4e %d %d" % (LBA * BLK, BLK)]
    itts = []
    p = None
    for i in range(64):
        itts.append(s1.submit(caw_cdb(), 2 * BLK, data=chain[i] + chain[i + 1]))
        if i % 16 == 8:
            s2.submit(write_cdb(), BLK, data=plain[i // 16])
        if i == 40:
            p = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    r2 = s2.collect(4)
    if any(r[0] != 0 for r in r2.values()):
        die("plain WRITEs failed")
    if p.wait() != 0:
        die("qemu-io writes over NBD failed")
    res = s1.collect(64)
    ok = [res[itt][0] == 0 for itt in itts]
    for itt in itts:
        st, _, sense, _ = res[itt]
        if st != 0 and not miscompare(st, sense):
            die("a CAW failed other than by MISCOMPARE")
    k = ok.index(False) if False in ok else 64
    if any(ok[k:]):
        die("a CAW succeeded after the chain was broken: %s" % "".join("1" if x else "0" for x in ok))
    final = read_block(s1)
    if final not in plain + [b"\x4e" * BLK] + chain:
        die("the block holds a mixture")
    if final in chain and final != chain[k]:
        die("the block holds chain[%d] but %d CAWs succeeded" % (chain.index(final), k))
    print("CAW chain against plain iSCSI and NBD writes: %d of 64 succeeded as a prefix, the rest MISCOMPARE; the block holds whole content" % k)
PY

for mode in race chain; do
	PYTHONPATH=$_root/tests/integration python3 "$T/caw.py" "$ISCSI_PORT" "$IQN" "$mode" "$NBD_URI" >"$T/caw.out" 2>&1 ||
		fail "COMPARE AND WRITE atomicity ($mode): $(cat "$T/caw.out")"
	log "$(cat "$T/caw.out")"
done
stop_node
check_log
log "ok"
