#!/usr/bin/env bash
# resync-link-rate caps the resyncs of all volumes to one peer together:
# two volumes (vol0, vol1) each get 24M written while b is down; when b
# returns both resync at once, and the sum of their progress, sampled from
# status each second, stays near the cap (2M/s) instead of near 2 x what
# one resync can do. Both end in sync, byte-identical.
# tandem-test: plain-only
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need qemu-io python3

export VOL_SIZE=128M
write_config2 "$T/c.ini" "resync-min-rate = 0"
sed -i 's/^\[cluster\]$/[cluster]\nresync-link-rate = 2M/' "$T/c.ini"
printf '\n[volume vol1]\nsize = 128M\nnodes = a b\nresync-min-rate = 0\n' >>"$T/c.ini"
start_pair
wait_for a "p['replication'] == 'established'"
stop b
for v in vol0 vol1; do
	qemu-io -f raw "nbd://127.0.0.1:${NBDP[a]}/$v" -c "write -P 0x3c 0 24M" >/dev/null ||
		fail "write to $v failed"
done
oos() { ctl_on a status --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(sum(v['peers'][0]['out_of_sync_bytes'] for v in d['volumes']))"; }
o0=$(oos)
[ "$o0" -ge $((48 << 20)) ] || fail "only $o0 bytes out of sync after writing 48M"
start b
wait_for a "p['replication'] == 'syncsource'" 30
sleep 1
t1=$(date +%s.%N) o1=$(oos)
sleep 5
t2=$(date +%s.%N) o2=$(oos)
rate=$(python3 -c "print(int(($o1 - $o2) / ($t2 - $t1)))")
log "two resyncs together: $rate bytes/s (cap 2M)"
[ "$rate" -gt $((512 << 10)) ] || fail "the resyncs hardly moved: $rate bytes/s"
[ "$rate" -lt $((3 << 20)) ] || fail "the resyncs went $rate bytes/s, above the link cap of 2M"
for v in vol0 vol1; do
	ctl_on a wait-sync "$v" --timeout 90 || fail "$v did not get in sync"
done
compare_replicas
IMG_A=$T/a/vol1.img IMG_B=$T/b/vol1.img compare_replicas
stop b
stop a
