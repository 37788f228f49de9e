#!/usr/bin/env bash
# One node, one daemon (docs/SPEC.md, guarantee 10):
#  1. node a runs and has served a write; a second `tandemd -n a`, in the
#     foreground and as a daemon, exits 1 at once naming the running pid, and
#     a's metadata file is byte for byte and by mtime what it was;
#  2. the first daemon still serves (a write and its read-back over NBD);
#  3. that daemon is killed (SIGKILL): the restart sees the unclean stop
#     ("was not shut down cleanly"), which a second daemon that rewrote the
#     metadata (marking it clean on its way out) used to hide;
#  4. a second tandem-witness on the state file of a running one exits 1 at
#     once naming the running pid, the state file unchanged.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3 timeout

WPORT=$(free_port)
write_config "$T/c.ini"
sed -i "s|^name = it\$|&\nwitness = 127.0.0.1:$WPORT\nwitness-dir = $T/w|" "$CFG"
grep -q "^witness-dir = $T/w\$" "$CFG" || fail "the witness lines are not in the config"
MD=$T/a/vol0.md

# nbd_rw BYTE: writes 64 KiB of BYTE at 1 MiB over NBD, flushes, reads it back.
nbd_rw()
{
	TANDEM_TOOLS=$_root/tests/tools python3 - "$NBD_PORT" "$1" <<'PY' ||
import os, sys
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import Conn
c = Conn("127.0.0.1", int(sys.argv[1]), timeout=10)
data = bytes([int(sys.argv[2])]) * 65536
c.req(1, 1 << 20, len(data), data)   # WRITE
c.req(3, 0, 0)                       # FLUSH
assert c.req(0, 1 << 20, len(data)) == data, "read back differs"
PY
		fail "write and read-back over NBD ($1) failed"
}

md_state() { echo "$(md5sum <"$MD") $(stat -c %y "$MD")"; }

start_node
nbd_rw 17
before=$(md_state)
log "a runs as pid $NODE_PID; metadata: $before"

# 1. the second daemon, foreground then daemon mode
for mode in -f ""; do
	rc=0
	start_ns=$(date +%s%N)
	# shellcheck disable=SC2086
	timeout 10 "$BIN/tandemd" -c "$CFG" -n a $mode >"$T/second.out" 2>&1 || rc=$?
	ms=$((($(date +%s%N) - start_ns) / 1000000))
	log "second tandemd ${mode:-(daemon)}: status $rc after $ms ms: $(cat "$T/second.out")"
	[ "$rc" -eq 1 ] || fail "a second tandemd ${mode:-(daemon)} exited with $rc, not 1"
	[ "$ms" -lt 5000 ] || fail "a second tandemd took $ms ms to give up"
	grep -q "node a is already running (pid $NODE_PID, lock $T/a/tandemd.lock)" "$T/second.out" ||
		fail "the refusal does not name the running pid $NODE_PID: $(cat "$T/second.out")"
	[ "$(md_state)" = "$before" ] || fail "the second tandemd changed a's metadata ($(md_state))"
done

# 2. the first still serves
alive "$NODE_PID" || fail "the running tandemd died"
nbd_rw 34

# 3. a crash of the first daemon is seen as one
kill_node
start_node
awk '/^=== start /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' "$T/a.log" |
	grep -q "volume vol0: was not shut down cleanly" ||
	fail "the restart after SIGKILL did not see an unclean stop"
nbd_rw 51
stop_node

# 4. the witness
"$BIN/tandem-witness" -c "$CFG" --init it -f >"$T/w.log" 2>&1 &
WPID=$!
track "$WPID"
for ((i = 0; i < 100; i++)); do
	alive "$WPID" || fail "tandem-witness exited: $(cat "$T/w.log")"
	grep -q 'tandem-witness: ready' "$T/w.log" && break
	sleep 0.05
done
grep -q 'tandem-witness: ready' "$T/w.log" || fail "tandem-witness did not start"
ST=$T/w/witness-it.state
[ -e "$ST" ] || fail "no state file $ST"
wbefore="$(md5sum <"$ST") $(stat -c %y "$ST")"
for mode in -f ""; do
	rc=0
	# shellcheck disable=SC2086
	timeout 10 "$BIN/tandem-witness" -c "$CFG" $mode >"$T/second.out" 2>&1 || rc=$?
	log "second tandem-witness ${mode:-(daemon)}: status $rc: $(cat "$T/second.out")"
	[ "$rc" -eq 1 ] || fail "a second tandem-witness ${mode:-(daemon)} exited with $rc, not 1"
	grep -q "already served by the witness with pid $WPID " "$T/second.out" ||
		fail "the refusal does not name the running witness $WPID: $(cat "$T/second.out")"
	[ "$(md5sum <"$ST") $(stat -c %y "$ST")" = "$wbefore" ] ||
		fail "the second tandem-witness changed the state file"
done
alive "$WPID" || fail "the running tandem-witness died"
kill -TERM "$WPID"
wait "$WPID" || fail "tandem-witness exited with $? after SIGTERM"
check_log
log "ok"
