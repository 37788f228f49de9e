#!/usr/bin/env bash
# A primary alone whose disk fails, then gets its old disk back (P7):
#  1. b is stopped; a writes alone (the stamped checker, acknowledged);
#     then every write of a's store fails (inject): its disk is failed
#     and, with no peer to serve through, requests fail (EIO, no hang).
#  2. `attach vol0` (the old disk) while b is away: no write went only to
#     the peer since the disk failed, so the old disk holds every
#     acknowledged write: it is up to date at once and a serves again.
#     The checker finds every acknowledged write through a.
#  3. b returns and is resynced from a: the replicas end identical.
#  4. Then the other case: a's disk fails while b serves (writes go only
#     to b), b is stopped: `attach vol0` is refused (the old disk lacks
#     what b took), and b's return lets it fill.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3 qemu-io

export VOL_SIZE=64M
write_config3 "$T/cluster.ini"
fault_injection_on a
start_trio
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 30

check_run()
{
	rm -f "$T/stop"
	python3 "$TANDEM_TOOLS/checker.py" run --nodes "127.0.0.1:${NBDP[a]}" --blocks 2048 \
		--state "$T/check.json" --resume --seed "$1" --count "$2" --flush-every 16 \
		--timeout 5 --give-up 20 >"$T/checker.out" 2>"$T/checker.err" ||
		fail "checker: $(cat "$T/checker.err")"
}

# 1. a alone, then its disk fails
stop b
check_run 1 1500
log "a alone: $(cat "$T/checker.out")"
ctl_on a inject vol0 write >/dev/null || fail "inject refused"
qemu-io -f raw "$(uri a)" -c "write -P 0x77 0 4k" >"$T/w1.out" 2>&1 &&
	fail "a write succeeded on a failed disk with no peer"
wait_for a "v['disk'] in ('failed', 'diskless')" 10
log "a's disk failed with no peer: $(grep -o 'Input/output error' "$T/w1.out" | head -n 1)"

# 2. the old disk back, at once
ctl_on a attach vol0 || fail "attach of the old disk was refused"
wait_for a "v['disk'] == 'uptodate'" 5
this_run a | grep -q "the old disk is back and up to date" || fail "a does not say why"
python3 "$TANDEM_TOOLS/checker.py" verify --state "$T/check.json" --nodes "127.0.0.1:${NBDP[a]}" ||
	fail "acknowledged writes missing after the old disk came back"
check_run 2 2000
log "the old disk is back and serves: $(cat "$T/checker.out")"

# 3. b returns
start b
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
compare_replicas
python3 "$TANDEM_TOOLS/checker.py" verify --state "$T/check.json" "$T/a/vol0.img" \
	"$T/b/vol0.img" || fail "a replica lacks acknowledged writes"
log "b resynced from a: replicas identical, every acknowledged write on both"

# 4. writes only b has: the old disk alone is refused
ctl_on a inject vol0 write >/dev/null || fail "inject refused"
check_run 3 2300
wait_for a "v['disk'] == 'diskless'" 10
stop b
if ctl_on a attach vol0 >"$T/attach.out" 2>&1; then
	fail "attach of the old disk succeeded though b alone had writes"
fi
grep -q "no up-to-date peer" "$T/attach.out" || fail "attach refused, but: $(cat "$T/attach.out")"
log "with writes only b took, the old disk alone is refused: $(cat "$T/attach.out")"
start b
wait_for a "p['connection'] == 'connected'" 30
wait_for a "p['disk'] == 'uptodate'" 30
ctl_on a attach vol0 || fail "attach with b back was refused"
wait_for a "v['disk'] == 'uptodate'" 60
compare_replicas
python3 "$TANDEM_TOOLS/checker.py" verify --state "$T/check.json" --nodes "127.0.0.1:${NBDP[a]}" \
	"$T/a/vol0.img" "$T/b/vol0.img" || fail "acknowledged writes missing"
log "b back: the old disk filled from b, replicas identical"
stop a
stop b
kill_witness TERM
log "ok"
