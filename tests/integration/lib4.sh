# shellcheck shell=bash
# The primary's disk fails under a running fio verify job (tests 780-782):
# sourced after lib.sh, lib2.sh and lib3.sh.
#
# primary_disk_fails KIND: a and b with a witness, a primary; fio writes
# 4 KiB blocks at random over 48 MiB of a with crc32c headers, then reads
# every one back and checks it. While it writes, a's disk fails:
#   xfs     a's image is on XFS on a loop device that is shut down
#           (`xfs_io -x -c shutdown`: every later I/O fails with EIO);
#   enospc  a's image is a sparse file on XFS that a filler leaves 12 MiB
#           of room (writes to new blocks fail with ENOSPC);
#   inject  `tandemctl inject vol0 write` (fault-injection = on): every
#           later write to a's store fails with EIO.
# Then, in each case:
#  1. fio saw no error, and its verify pass read every block back right
#     (through b: a's disk is gone).
#  2. a says `diskless`, and why: disk_error {error, op, time}, the
#     disk-error event, the log. The peer stays uptodate and established.
#  3. The witness record stays synced and names a.
#  4. (xfs) `attach` of a device with 4 KiB sectors is refused. Then
#     `tandemctl attach vol0 --disk NEW` on a, under a second fio job that
#     writes and checks 16 MiB: a fills the new disk from b in the
#     background (status synctarget) while it serves; the job sees no
#     error; a's disk ends uptodate, its new file identical to b's, and the
#     first job's verify pass over a (its own disk now) finds every block.
#  5. a is killed: b takes over by itself (no --force), and fio's verify
#     pass over b finds every block.

primary_disk_fails()
{
	local kind=$1 img_a=$T/a/vol0.img want_err=EIO free
	need fio python3
	export VOL_SIZE=64M
	case $kind in
	xfs | enospc)
		need mkfs.xfs losetup xfs_io fallocate
		xfs_loop "$T/xfs"
		img_a=$T/xfs/vol0.img
		write_config3 "$T/cluster.ini" "disk.a = $img_a"
		;;
	inject)
		write_config3 "$T/cluster.ini"
		sed -i "s|^nbd = 127.0.0.1:${NBDP[a]}\$|&\nfault-injection = on|" "$CFG"
		grep -q '^fault-injection = on' "$CFG" || fail "fault-injection not in the config"
		;;
	*) fail "primary_disk_fails: no kind $kind" ;;
	esac
	start_trio
	wait_for a "v['role'] == 'primary'"
	wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 30
	events_follow a "$T/events.a"
	[ "$(wrec "r['synced']")" = True ] || fail "the witness record is not synced before the failure"
	if [ "$kind" = enospc ]; then
		# room for 12 MiB of new blocks: fio's 48 MiB run out of it
		free=$(($(stat -f -c '%a * %S' "$T/xfs") - (12 << 20)))
		fallocate -l "$free" "$T/xfs/filler" || fail "fallocate of the filler failed"
		want_err=ENOSPC
	fi

	local fio_args=(--name=v --ioengine=nbd --uri="$(uri a)" --rw=randwrite --bs=4k
		--iodepth=8 --size=48M --rate_iops=2500 --verify=crc32c --verify_fatal=1
		--do_verify=1 --randseed=780 --output-format=json)
	timeout -k 5 120 fio "${fio_args[@]}" --output="$T/fio.json" >"$T/fio.err" 2>&1 &
	local fpid=$!
	track "$fpid"
	sleep 2
	alive "$fpid" || fail "fio ended before the disk failed: $(cat "$T/fio.err")"
	case $kind in
	xfs) xfs_io -x -c "shutdown" "$T/xfs" || fail "xfs_io shutdown failed" ;;
	inject) ctl_on a inject vol0 write || fail "inject refused" ;;
	esac
	wait_for a "v['disk'] == 'diskless'" 30
	log "a is diskless while fio runs: $(jfield a "v['disk_error']")"
	wait "$fpid" || fail "fio failed: $(cat "$T/fio.err") $(head -c 2000 "$T/fio.json" 2>/dev/null)"
	_forget "$fpid"
	python3 - "$T/fio.json" <<'EOF' || fail "fio saw errors"
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
w, r = j["write"], j["read"]
print("fio: error %d, %d writes, %d blocks read back and verified" % (j["error"], w["total_ios"], r["total_ios"]))
sys.exit(1 if j["error"] or w["total_ios"] < 12288 or r["total_ios"] < 12288 else 0)
EOF
	# 2. why, in status, event and log
	[ "$(jfield a "v['disk_error']['error']")" = "$want_err" ] ||
		fail "a's disk_error is $(jfield a "v['disk_error']"), expected $want_err"
	local op
	op=$(jfield a "v['disk_error']['op']")
	case $op in read | write | flush) ;; *) fail "a's disk_error names the operation '$op'" ;; esac
	[ "$(jfield a "v['disk_error']['time'] is not None")" = True ] || fail "a's disk_error has no time"
	this_run a | grep -q "the disk failed: $op of the local store" ||
		fail "a's log does not say why its disk failed"
	this_run a | grep -q "the failed disk is detached; the volume is served through its peer" ||
		fail "a's log does not say it serves through its peer"
	grep -q '"event":"disk-error","error":"'"$want_err"'"' "$T/events.a" ||
		fail "no disk-error event: $(cat "$T/events.a")"
	[ "$(jfield a "v['role'] == 'primary' and p['replication'] == 'established' and p['disk'] == 'uptodate'")" = True ] ||
		fail "a and b are not as they were: $(ctl_on a status vol0)"
	# 3. the record stays synced: b holds every write a acknowledged
	[ "$(wrec "r['synced'] and r['primary'] == 'a'")" = True ] ||
		fail "the witness record changed: $(witness_status)"

	# 4. a new disk, attached online under load; first one that is refused:
	# a device with 4 KiB sectors under a volume of 512-byte blocks (a's
	# XFS image takes O_DIRECT I/O in 512 bytes), and a's disk stays failed
	if [ "$kind" = xfs ]; then
		local l4k out
		truncate -s 65M "$T/l4k.img" # the volume (64M) and its disk label fit
		l4k=$(losetup -f --show --sector-size 4096 "$T/l4k.img") ||
			fail "no loop device with 4 KiB sectors"
		AT_EXIT+=("losetup -d '$l4k'")
		! out=$(ctl_on a attach vol0 --disk "$l4k" 2>&1) || fail "a 4 KiB-sector device was attached"
		echo "$out" | grep -q "needs 4096-byte alignment, the volume 512" ||
			fail "the refusal does not say why: $out"
		[ "$(jfield a "v['disk']")" = diskless ] || fail "a's disk is not diskless after the refusal"
	fi
	local fio2=(--name=w2 --ioengine=nbd --uri="$(uri a)" --rw=randrw --bs=16k --iodepth=4
		--offset=48M --size=16M --time_based --runtime=5 --verify=crc32c --verify_backlog=64
		--verify_fatal=1 --randseed=784 --output-format=json)
	timeout -k 5 60 fio "${fio2[@]}" --output="$T/fio2.json" >"$T/fio2.err" 2>&1 &
	fpid=$!
	track "$fpid"
	sleep 1
	local t0 t1 seen=no
	t0=$(date +%s.%N)
	ctl_on a attach vol0 --disk "$T/a/new.img" || fail "attach on a failed"
	for ((i = 0; i < 600; i++)); do
		case $(jfield a "v['disk'] + ' ' + p['replication']") in
		"inconsistent synctarget") seen=yes ;;
		"uptodate "*) break ;;
		esac
		sleep 0.1
	done
	t1=$(date +%s.%N)
	wait_for a "v['disk'] == 'uptodate' and p['replication'] == 'established'" 30
	[ "$seen" = yes ] || log "(the copy was over before status showed it)"
	wait "$fpid" || fail "fio during the attach failed: $(cat "$T/fio2.err")"
	_forget "$fpid"
	log "a's new disk is up to date $(echo "$t1 - $t0" | bc) s after attach, under load: $(python3 -c "
import json; j = json.load(open('$T/fio2.json'))['jobs'][0]
print('%d writes, %d reads, error %d' % (j['write']['total_ios'], j['read']['total_ios'], j['error']))")"
	[ "$(jfield a "v['disk_error']")" = None ] || fail "a still shows a disk error"
	this_run a | grep -q "the attached disk is up to date" || fail "a's log does not say the disk is up to date"
	IMG_A=$T/a/new.img compare_replicas
	fio_args[2]=--uri=$(uri a)
	timeout -k 5 120 fio "${fio_args[@]}" --verify_only --output="$T/fio-a.json" >"$T/fio-a.err" 2>&1 ||
		fail "fio's verify pass over a's new disk failed: $(cat "$T/fio-a.err")"
	[ "$(wrec "r['synced'] and r['primary'] == 'a'")" = True ] ||
		fail "the witness record changed: $(witness_status)"

	# 5. a dies: b takes over by itself, and holds every block fio wrote
	log "killing the diskless primary a"
	crash a
	wait_for b "v['role'] == 'primary' and v['disk'] == 'uptodate'" 20
	this_run b | grep -q "the witness agrees" || fail "b's log does not show the failover"
	grep -q -- '--force' "$T/b.log" && fail "b needed --force"
	[ "$(wrec "r['primary']")" = b ] || fail "the witness does not name b primary"
	fio_args[2]=--uri=$(uri b)
	timeout -k 5 120 fio "${fio_args[@]}" --verify_only --output="$T/fio-b.json" >"$T/fio-b.err" 2>&1 ||
		fail "fio's verify pass over b failed: $(cat "$T/fio-b.err")"
	log "fio's verify pass over b: every block as written"
	stop b
	kill_witness TERM
}
