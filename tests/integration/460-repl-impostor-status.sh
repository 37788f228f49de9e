#!/usr/bin/env bash
# A host that reaches b's replication port while a is connected, claims to be
# node a and sends a wrong MAC is refused and logged, but does not change b's
# status error or events: only an authenticated peer's refusal, or that of
# the connection b dialed, is the volume's error.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=32M
write_config2 "$T/c.ini"
start_pair
events_follow b "$T/b.events"
python3 - "${REPP[b]}" <<'PY' || fail "the impostor client failed"
import os, socket, struct, sys
def msg(t, body):
    return struct.pack("<IHHII", 0x4c505254, t, 0, len(body), 0) + body
name = lambda s: s.encode().ljust(64, b"\0")
hello = struct.pack("<QHHIQ", 0x31504552444e4154, 1, 1, 0, 3) + name("it") + name("a") + \
        name("vol0") + os.urandom(32) + bytes(32)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(msg(1, hello) + msg(2, bytes(32)))   # HELLO, AUTH with a wrong MAC
try:
    while s.recv(65536):
        pass
except OSError:
    pass
PY
for ((i = 0; i < 50; i++)); do
	grep -q "refused: authentication failed" "$T/b.log" && break
	sleep 0.1
done
grep -q "refused: authentication failed" "$T/b.log" || fail "b did not refuse the impostor"
sleep 0.3
[ "$(jfield b "p['error']")" = "" ] || fail "an unauthenticated host set b's status error: $(jfield b "p['error']")"
grep -q '"event":"refused"' "$T/b.events" && fail "an unauthenticated host caused a refused event on b"
[ "$(jfield b "p['connection']")" = connected ] || fail "b lost its real peer"
stop b
stop a
