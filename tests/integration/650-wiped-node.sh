#!/usr/bin/env bash
# Data, not names, decides (SPEC guarantee 8; WITNESS.md W1/W3, I1/I2): a
# node whose data directory was emptied (a replaced disk, a new host with
# the same name) never serves in place of the data, and resyncs fully.
#  1. With the witness: a (primary, the node the witness names) and b hold
#     acknowledged writes. Both fail at once; a's directory is emptied; a starts
#     alone: it stays secondary and inconsistent, its NBD export is
#     refused, the witness still names a with the old generation. b starts:
#     a resyncs fully from b and becomes primary again (N7 once it holds the
#     data); every acknowledged write is there.
#  2. With the witness, the other node: b (secondary) stops, its directory
#     is emptied, it starts: it resyncs fully; a primary throughout.
#  3. Without a witness: both fail at once, a's directory is emptied, a starts:
#     secondary, nothing served; b starts: a resyncs fully from b, neither
#     is made primary by itself; `primary` on b works, the data is there.
# Before, a came up primary after step 1's restart and served zeros.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M

refused()
{
	python3 - "${NBDP[$1]}" <<'PY'
import os, sys
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
from nbdclient import connect
try:
    connect("127.0.0.1", int(sys.argv[1]), timeout=5)
except ConnectionError as e:
    sys.exit(0)
sys.exit(1)
PY
}

# lose_both_wipe_a: both nodes lost at once, in sync (a power cut: frozen
# first, so that neither sees the other go and writes on alone); a's data
# directory emptied; a started again alone.
lose_both_wipe_a()
{
	kill -STOP "${NPID[a]}" "${NPID[b]}"
	crash a
	crash b
	rm -rf "$T/a"
	mkdir "$T/a"
	start a
}

# ---- 1: the named node wiped, with the witness ----
write_config3 "$T/cluster.ini"
start_trio
wait_for a "v['role'] == 'primary' and v.get('lease', True)"
client_start a
wait_acked "$T/acked" 300
client_stop
ctl_on a wait-sync vol0 --timeout 30 || fail "not in sync before the stop"
gen=$(wrec "r['generation']")
lose_both_wipe_a
sleep 3
[ "$(jfield a "v['role']")" = secondary ] || fail "the wiped node a became primary"
[ "$(jfield a "v['disk']")" = inconsistent ] || fail "the wiped node a is $(jfield a "v['disk']"), not inconsistent"
refused a || fail "the wiped node a serves its (empty) export"
[ "$(wrec "r['primary']")" = a ] || fail "the witness no longer names a"
[ "$(wrec "r['generation']")" = "$gen" ] || fail "the witness took the wiped node's generation"
log "1: wiped a stays secondary and inconsistent, serves nothing"
start b
wait_connected 30
wait_for a "v['role'] == 'primary' and v['disk'] == 'uptodate'" 60
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
grep -q "full sync" "$T/a.log" "$T/b.log" || fail "no full sync was logged"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" --nbd "127.0.0.1:${NBDP[a]}" \
	"$T/a/vol0.img" "$T/b/vol0.img" || fail "acknowledged writes are missing after a's resync"
compare_replicas
log "1: a resynced fully from b and is primary again"

# ---- 2: the other node wiped, with the witness ----
stop b
rm -rf "$T/b"
mkdir "$T/b"
start b
wait_connected 30
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
[ "$(jfield a "v['role']")" = primary ] || fail "a is no longer primary"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/b/vol0.img" ||
	fail "acknowledged writes are missing on the wiped b"
log "2: wiped b resynced fully"
stop a
stop b
kill_witness TERM

# ---- 3: without a witness ----
rm -rf "$T/a" "$T/b" "$T/acked"
mkdir "$T/a" "$T/b"
write_config2 "$T/c2.ini"
start a
start b
wait_connected 30
wait_for a "v['role'] == 'primary'" 20
client_start a
wait_acked "$T/acked" 300
client_stop
ctl_on a wait-sync vol0 --timeout 30 || fail "not in sync before the stop"
lose_both_wipe_a
sleep 2
[ "$(jfield a "v['role']")" = secondary ] || fail "3: the wiped node a became primary"
refused a || fail "3: the wiped node a serves its (empty) export"
start b
wait_connected 30
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
[ "$(jfield a "v['role']")" = secondary ] || fail "3: a became primary"
[ "$(jfield b "v['role']")" = secondary ] || fail "3: b became primary by itself"
ctl_on b primary vol0 >/dev/null || fail "3: primary on b failed"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" --nbd "127.0.0.1:${NBDP[b]}" \
	"$T/a/vol0.img" "$T/b/vol0.img" || fail "3: acknowledged writes are missing"
compare_replicas
stop a
stop b
log "ok"
