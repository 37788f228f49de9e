#!/usr/bin/env bash
# Data outlives the daemon: after a clean stop (SIGTERM) and after a crash
# (SIGKILL once the client's FLUSH was acknowledged), a restarted node serves
# exactly what was written, and reports itself primary and uptodate.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need nbdcopy cmp python3

export VOL_SIZE=32M
write_config "$T/c.ini"

# status --json must show vol0 primary and uptodate.
check_status()
{
	ctl status --json >"$T/status.json" || fail "tandemctl status --json failed ($1)"
	python3 - "$T/status.json" <<'EOF' || fail "status after $1 is wrong: $(cat "$T/status.json")"
import json, sys
d = json.load(open(sys.argv[1]))
v = [v for v in d["volumes"] if v["name"] == "vol0"]
ok = d["node"] == "a" and len(v) == 1 and v[0]["role"] == "primary" \
     and v[0]["disk"] == "uptodate" and v[0]["size"] == 32 * 1024 * 1024
sys.exit(0 if ok else 1)
EOF
}

start_node
check_status "first start"

# 1. Clean restart.
head -c 32M /dev/urandom >"$T/a.img"
nbdcopy --flush "$T/a.img" "$NBD_URI" || fail "nbdcopy in failed"
stop_node
start_node
check_status "clean restart"
nbdcopy "$NBD_URI" "$T/a.out" || fail "nbdcopy out failed"
cmp "$T/a.img" "$T/a.out" || fail "data changed across a clean restart"

# 2. Crash after a flushed write: nbdcopy --flush returns only after the
#    server acknowledged NBD_CMD_FLUSH, so all of it must survive SIGKILL.
head -c 32M /dev/urandom >"$T/b.img"
nbdcopy --flush "$T/b.img" "$NBD_URI" || fail "nbdcopy in failed"
kill_node
# The dead daemon left its control socket behind; the new one must cope.
start_node
check_status "SIGKILL restart"
nbdcopy "$NBD_URI" "$T/b.out" || fail "nbdcopy out after crash failed"
cmp "$T/b.img" "$T/b.out" || fail "flushed data lost or changed across SIGKILL"

# 3. And once more cleanly, so the post-crash state also stops and starts.
stop_node
start_node
nbdcopy "$NBD_URI" "$T/c.out" || fail "nbdcopy out failed"
cmp "$T/b.img" "$T/c.out" || fail "data changed across restart after a crash"
check_status "restart after crash"
stop_node
