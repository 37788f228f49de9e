#!/usr/bin/env bash
# The disk carries its identity (SPEC guarantee 8; ondisk.h, the disk
# label): a disk that is not the one its metadata describes is never taken
# as consistent, whatever the metadata beside it says. With the witness:
#  a. disk.b points at a new, empty file, b's metadata kept: b starts
#     inconsistent (never up to date before a full sync from a), gets the
#     full sync; then a dies: the witness promotes b, which serves every
#     acknowledged write.
#  b. the image of another replica (a's, with its label) copied over a's
#     secondary disk: inconsistent, full sync.
#  c. a truncated disk: inconsistent, full sync.
#  d. an old copy of the secondary's own disk restored after more writes:
#     older than its metadata: inconsistent, full sync, every write there.
#  e. a single-node volume whose disk was emptied refuses to start.
#  f. a block device without room for the label (size + 4 KiB) is refused.
# Before, b came up up to date on the empty file (equal generations), the
# witness promoted it when a died, and it served zeros.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M

# fresh_start NODE WHAT: NODE started on a disk that is not its metadata's:
# it says what it found, starts secondary and inconsistent, and gets a full
# sync from its (primary) peer, after which both are up to date.
fresh_start()
{
	local n=$1 what=$2 p
	[ "$n" = a ] && p=b || p=a
	start "$n"
	this_run "$n" | grep -q "volume vol0: secondary, inconsistent" ||
		fail "$n did not start inconsistent: $(this_run "$n" | grep 'volume vol0: ' | head -n 3)"
	this_run "$n" | grep -q "disk .* $what.*: inconsistent, full sync from the peer" ||
		fail "$n did not say its disk $what: $(this_run "$n" | grep -i disk | head -n 5)"
	wait_connected 30
	wait_for "$p" "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
	this_run "$p" | grep -q "connected to $n (.*full sync)" || fail "$n got no full sync"
	# up to date only once the sync began (never on its own word)
	this_run "$n" | awk '/full sync|syncsource|synctarget/ {s = 1} /-> uptodate/ && !s {bad = 1} END {exit bad}' ||
		fail "$n was up to date before its sync: $(this_run "$n" | grep -- '-> uptodate')"
}

# more_writes NODE FIRST N LOG: N acknowledged writes from byte FIRST on.
more_writes()
{
	python3 "$TANDEM_TOOLS/failclient.py" write --nodes "127.0.0.1:${NBDP[$1]}" --log "$4" \
		--first "$2" --count "$3" >/dev/null || fail "writing on $1 failed"
}

mkdir -p "$T/disks"
write_config3 "$T/cluster.ini" "disk.b = $T/disks/b1.img"
start_trio
wait_for a "v['role'] == 'primary' and v.get('lease', True)"
client_start a
wait_acked "$T/acked" 300
client_stop
ctl_on a wait-sync vol0 --timeout 30 || fail "not in sync before the swap"

# ---- a: disk.b swapped for a new, empty file; b's metadata kept ----
stop b
sed -i "s|^disk.b = .*|disk.b = $T/disks/b2.img|" "$CFG"
fresh_start b "is missing (created empty)"
log "a: b on a new disk started inconsistent and was fully synced"
crash a
wait_for b "v['role'] == 'primary'" 30
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" --nbd "127.0.0.1:${NBDP[b]}" \
	"$T/disks/b2.img" || fail "a: acknowledged writes are missing on the promoted b"
log "a: a died, b was promoted and serves every acknowledged write"
start a
wait_connected 30
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
# b is primary now; the secondary a takes the other cases.

# ---- b: another replica's image (a copy of b's disk, with its label) ----
stop a
cp --sparse=always "$T/disks/b2.img" "$T/a/vol0.img"
fresh_start a "carries the label of another volume or node"
log "b: another disk's image started inconsistent and was fully synced"

# ---- c: a truncated disk ----
stop a
truncate -s 32M "$T/a/vol0.img"
fresh_start a "is truncated (33554432 bytes"
log "c: a truncated disk started inconsistent and was fully synced"

# ---- d: an old copy of a's own disk restored ----
stop a
cp --sparse=always "$T/a/vol0.img" "$T/old.img"
start a
wait_connected 30
wait_for b "p['replication'] == 'established' and p['disk'] == 'uptodate'" 60
this_run a | grep -Eq "volume vol0: secondary, (consistent|outdated)," ||
	fail "d: a did not start on its own disk as it was: $(this_run a | grep 'volume vol0: ' | head -n 3)"
! this_run a | grep -q "full sync from the peer" || fail "d: a's own disk was not taken back"
more_writes b $((40 << 20)) 200 "$T/acked2"
ctl_on b wait-sync vol0 --timeout 30 || fail "d: not in sync after the writes"
stop a
cp --sparse=always "$T/old.img" "$T/a/vol0.img"
fresh_start a "is older than its metadata"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked2" "$T/a/vol0.img" ||
	fail "d: the writes after the copy are missing on a after its sync"
python3 "$TANDEM_TOOLS/failclient.py" check --log "$T/acked" "$T/a/vol0.img" ||
	fail "d: acknowledged writes are missing on a after its sync"
IMG_A=$T/a/vol0.img IMG_B=$T/disks/b2.img compare_replicas
log "d: an old copy of a's disk started inconsistent and was fully synced"
stop a
stop b
kill_witness TERM

# ---- e: a single-node volume on an emptied disk refuses to start ----
mkdir -p "$T/s"
sp=$(free_port)
cat >"$T/single.ini" <<EOF
[cluster]
name = one

[node s]
nbd = 127.0.0.1:$sp
control = $T/s.sock
data-dir = $T/s

[volume vol0]
size = 16M
nodes = s
EOF
# single: tandemd of the single node; 0 once it answered ping (then stopped
# with SIGTERM), 1 when it exited first.
single()
{
	local pid i rc=1
	"$BIN/tandemd" -c "$T/single.ini" -n s -f >>"$T/s.log" 2>&1 &
	pid=$!
	track "$pid"
	for ((i = 0; i < 200; i++)); do
		alive "$pid" || break
		if "$BIN/tandemctl" -c "$T/single.ini" -n s ping >/dev/null 2>&1; then
			rc=0
			kill -TERM "$pid"
			break
		fi
		sleep 0.1
	done
	wait "$pid" 2>/dev/null || true
	_forget "$pid"
	return "$rc"
}
single || fail "e: the single node did not start: $(tail -n 5 "$T/s.log")"
truncate -s 0 "$T/s/vol0.img"
truncate -s 16M "$T/s/vol0.img" # a new file of the volume's size
! single || fail "e: a single node started on an emptied disk"
grep -q "carries no label (new or emptied disk); a single-node volume has no peer" "$T/s.log" ||
	fail "e: the refusal does not say why: $(tail -n 5 "$T/s.log")"
log "e: a single node on an emptied disk refused to start"

# ---- f: a block device with no room for the label is refused ----
truncate -s 16M "$T/dev.img"
if loop=$(losetup -f --show "$T/dev.img" 2>/dev/null); then
	AT_EXIT+=("losetup -d '$loop'")
	echo "disk.s = $loop" >>"$T/single.ini"
	! single || fail "f: a 16M device was taken for a 16M volume"
	grep -q "disk.s $loop: 16777216 bytes, needs 16781312 (size + 4 KiB label)" "$T/s.log" ||
		fail "f: the refusal does not say what the device needs: $(tail -n 3 "$T/s.log")"
	log "f: a block device without room for the label was refused"
else
	log "f: skipped (no loop device)"
fi
log "ok"
