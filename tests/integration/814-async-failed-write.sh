#!/usr/bin/env bash
# A failed write has one fate (SPEC guarantee 7, ASYNC.md A11). a streams
# async to b over an 8 Mbit/s link; 4M of writes keep the stream backed up
# when a's store starts failing every write (`tandemctl inject vol0 write`).
# 64 more writes, each of its own block with its own data, follow. A write
# whose local part failed takes its stream entry's fate: it succeeds once b
# applied it (a's disk is detached and a serves through b) and fails only if
# b did not. So, once the stream has drained:
#  - every acknowledged write reads back through a, and is in b's image;
#  - no write answered with an error is anywhere: not through a, not on b.
# Before, such a write was answered EIO and still went to b: b's image (and
# a failover to it) held data of writes the client saw fail.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=64M PROXY=1 PEER_TIMEOUT=10 REPL_MODE=async
write_config2 "$T/c.ini" "async-backlog = 16M"
fault_injection_on a
proxy_start
start_pair
proxy rate 8mbit

# writes: 4M at offset 32M (the backlog), then, after the store fails, 64
# blocks of 4K at 0, 4K, ... each stamped with its number; results in
# $T/results (one line per block: ok or the error)
python3 - "${NBDP[a]}" "$T/results" "$BIN/tandemctl" "$CFG" <<'PY' || fail "the writer failed"
import os, subprocess, sys
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import Conn
port, out, ctl, cfg = sys.argv[1:]
c = Conn("127.0.0.1", int(port), timeout=120)
for k in range(64):
    c.req(1, (32 << 20) + k * 65536, 65536, os.urandom(65536))
subprocess.run([ctl, "-c", cfg, "-n", "a", "inject", "vol0", "write"], check=True)
with open(out, "w") as f:
    for k in range(64):
        data = (b"%08d" % (k + 1)) * 512
        try:
            c.req(1, k * 4096, 4096, data)
            f.write("ok\n")
        except IOError as e:
            f.write("error %s\n" % e)
PY
log "writes after the failure: $(sort "$T/results" | uniq -c | tr '\n' ' ')"
wait_for a "p['backlog_bytes'] == 0" 60

# every block: through a, and in b's image once b stopped
python3 - "${NBDP[a]}" "$T/results" through-a <<'PY' || fail "a serves a failed write, or lacks an acknowledged one"
import os, sys
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import Conn
c = Conn("127.0.0.1", int(sys.argv[1]))
res = open(sys.argv[2]).read().split("\n")
bad = []
for k in range(64):
    got = c.req(0, k * 4096, 4096)
    mine = got == (b"%08d" % (k + 1)) * 512
    if res[k] == "ok" and not mine:
        bad.append("block %d: acknowledged, not there" % k)
    if res[k] != "ok" and mine:
        bad.append("block %d: failed (%s), yet there" % (k, res[k]))
if bad:
    sys.exit("%s: %d wrong: %s" % (sys.argv[3], len(bad), "; ".join(bad[:5])))
PY
disk=$(jfield a "v['disk']")
stop a
stop b
python3 - "$T/b/vol0.img" "$T/results" <<'PY' || fail "b's image holds a failed write, or lacks an acknowledged one"
import sys
img = open(sys.argv[1], "rb").read(64 * 4096)
res = open(sys.argv[2]).read().split("\n")
bad = []
for k in range(64):
    mine = img[k * 4096:(k + 1) * 4096] == (b"%08d" % (k + 1)) * 512
    if res[k] == "ok" and not mine:
        bad.append("block %d: acknowledged, not there" % k)
    if res[k] != "ok" and mine:
        bad.append("block %d: failed (%s), yet there" % (k, res[k]))
if bad:
    sys.exit("b's image: %d wrong: %s" % (len(bad), "; ".join(bad[:5])))
PY
[ "$disk" = diskless ] || fail "a's disk is $disk after its store failed writes, not diskless"
grep -q '^ok$' "$T/results" || fail "no write after the failure succeeded"
