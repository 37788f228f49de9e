#!/usr/bin/env bash
# on-disk-failure = handover: a primary whose disk fails hands the primary
# role to its up-to-date peer (H1) instead of serving through it.
#  1. The stamped checker writes to the pair over NBD (it fails over by
#     itself). Every write of a's store fails from some point on
#     (`inject vol0 write`): a's disk fails, a says so (log, handover
#     event) and hands over: b becomes primary, a secondary, with no
#     --force; the witness names b.
#  2. The checker goes on against b; every block through b and in b's
#     image is at its last acknowledged version or a later attempted one.
#  3. `attach vol0` on a (the old disk) fills it from b with a full
#     resync; the replicas end identical.
# A config value other than serve or handover is refused at start.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M
write_config3 "$T/cluster.ini"
sed -i "s|^secret = .*|&\non-disk-failure = handover|" "$CFG"
fault_injection_on a

# a wrong value is refused with the key named
sed "s|^on-disk-failure = handover|on-disk-failure = maybe|" "$CFG" >"$T/bad.ini"
out=$("$BIN/tandemd" -c "$T/bad.ini" -n a -f 2>&1) && fail "tandemd took on-disk-failure = maybe"
echo "$out" | grep -q "on-disk-failure.*not serve or handover" ||
	fail "the error does not name the key: $out"

start_trio
wait_for a "v['role'] == 'primary' and p['disk'] == 'uptodate'" 30
events_follow a "$T/events.a"
BLOCKS=2048
checker_start 794
ctl_on a inject vol0 write >/dev/null || fail "inject refused"
wait_for b "v['role'] == 'primary'" 30
wait_for a "v['role'] == 'secondary'" 10
this_run a | grep -q "handing the primary role to b (on-disk-failure = handover)" ||
	fail "a's log does not say it hands over"
grep -q '"event":"handover","peer":"b"' "$T/events.a" || fail "no handover event: $(cat "$T/events.a")"
this_run b | grep -q "the witness agrees" || fail "b did not take over through the witness"
[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b"
log "a handed over to b: a's disk $(jfield a "v['disk']"), $(jfield a "v['disk_error']['error']")"
sleep 2
checker_stop
python3 "$TANDEM_TOOLS/checker.py" verify --state "$T/check.json" \
	--nodes "127.0.0.1:${NBDP[b]}" "$T/b/vol0.img" ||
	fail "the checker found acknowledged writes lost"

# the old disk back on a, filled from b
out=$(ctl_on a attach vol0 2>&1) || fail "attach failed: $out"
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas 90
python3 "$TANDEM_TOOLS/checker.py" verify --state "$T/check.json" "$T/a/vol0.img" ||
	fail "a's disk lacks acknowledged writes after the attach"
stop a
stop b
kill_witness TERM
log "ok"
