#!/usr/bin/env bash
# SIGHUP stops nothing (docs/SPEC.md, guarantee 10): a (primary), b and the
# witness run;
#  1. SIGHUP to a's tandemd and to tandem-witness: both log that they ignore
#     it and keep running;
#  2. for longer than peer-timeout and witness-timeout, writes to a over NBD
#     go on succeeding; a stays primary with its peer connected and its
#     witness session up, b stays secondary, and neither node reports a
#     role change, a connection change or a failover;
#  3. SIGTERM then stops a cleanly (status 0, "stopped" logged), and the
#     witness too.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

write_config3 "$T/cluster.ini"
start_trio
wait_for a "v['role'] == 'primary'"
events_follow a "$T/a.events"
events_follow b "$T/b.events"

# 1. the signals
kill -HUP "${NPID[a]}"
kill -HUP "$WPID"
for ((i = 0; i < 100; i++)); do
	this_run a | grep -q "SIGHUP ignored" && this_run w | grep -q "SIGHUP ignored" && break
	alive "${NPID[a]}" || fail "tandemd a died of SIGHUP"
	alive "$WPID" || fail "tandem-witness died of SIGHUP"
	sleep 0.05
done
this_run a | grep -q "SIGHUP ignored: reload is not supported" || fail "a did not log the ignored SIGHUP"
this_run w | grep -q "SIGHUP ignored: reload is not supported" || fail "the witness did not log the ignored SIGHUP"

# 2. 4 s of writes (twice the peer and witness timeouts): each acknowledged
python3 - "${NBDP[a]}" <<'PY' || fail "a write to a failed after the SIGHUP"
import os, sys, time
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import Conn
c = Conn("127.0.0.1", int(sys.argv[1]), timeout=10)
end, n = time.time() + 4, 0
while time.time() < end:
    data = bytes([n % 251 + 1]) * 4096
    c.req(1, (n % 256) * 4096, 4096, data)   # WRITE
    c.req(3, 0, 0)                           # FLUSH
    assert c.req(0, (n % 256) * 4096, 4096) == data, "read back differs"
    n += 1
print("%d writes" % n)
PY
alive "${NPID[a]}" || fail "tandemd a died"
alive "$WPID" || fail "tandem-witness died"
[ "$(jfield a "v['role'] == 'primary' and p['connection'] == 'connected' and v['witness']['session']")" = True ] ||
	fail "a is not the connected primary with a witness session: $(ctl_on a status vol0)"
[ "$(jfield b "v['role'] == 'secondary' and v['witness']['session']")" = True ] ||
	fail "b is not a secondary with a witness session: $(ctl_on b status vol0)"
if grep -E '"event":"(role|failover|connection|stepped-down|quorum|handover)"' "$T/a.events" "$T/b.events"; then
	fail "the SIGHUP changed a role or a connection"
fi
this_run a | grep -q "shutting down" && fail "a logged a shutdown"

# 3. SIGTERM: clean stops
stop a
this_run a | grep -q "signal 15: shutting down" || fail "a did not log the SIGTERM"
this_run a | grep -q "tandemd info: stopped" || fail "a did not log 'stopped'"
stop b
kill -TERM "$WPID"
rc=0
wait "$WPID" || rc=$?
_forget "$WPID"
[ "$rc" -eq 0 ] || fail "tandem-witness exited with $rc after SIGTERM"
this_run w | grep -q "stopped" || fail "the witness did not log 'stopped'"
check_log_of w
log "ok"
