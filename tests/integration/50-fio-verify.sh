#!/usr/bin/env bash
# fio's nbd engine (libnbd, one connection per job): 4 jobs of random 4K
# writes at queue depth 32, each in its own region, with crc32c verify; then a
# separate verify-only pass; then a sequential 1M mixed read/write job.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need fio python3
fio --enghelp=nbd >/dev/null 2>&1 || { echo "SKIP: fio has no nbd engine" >&2; exit 77; }

export VOL_SIZE=128M
write_config "$T/c.ini"
start_node

# fio_run NAME NJOBS ARGS...: JSON output; every job must report error 0,
# and the I/O direction named by $WANT must have moved bytes.
fio_run()
{
	local name=$1 njobs=$2
	shift 2
	fio --name="$name" --ioengine=nbd --uri="$NBD_URI" --output-format=json \
		--output="$T/$name.json" "$@" >"$T/$name.err" 2>&1 ||
		{ cat "$T/$name.err" "$T/$name.json" >&2; fail "fio $name exited non-zero"; }
	python3 - "$T/$name.json" "$njobs" "$WANT" <<'EOF' ||
import json, sys
d = json.load(open(sys.argv[1]))
njobs, want = int(sys.argv[2]), sys.argv[3].split(",")
jobs = d["jobs"]
bad = []
if len(jobs) != njobs:
    bad.append("%d jobs reported, expected %d" % (len(jobs), njobs))
for j in jobs:
    if j["error"] != 0:
        bad.append("job %s: err=%d" % (j["jobname"], j["error"]))
    for w in want:
        if j[w]["io_bytes"] == 0:
            bad.append("job %s: no %s I/O" % (j["jobname"], w))
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
		{ cat "$T/$name.err" >&2; fail "fio $name: a job failed or did no I/O"; }
	grep -qiE 'verify:|bad magic|crc32c: verify failed' "$T/$name.err" &&
		{ cat "$T/$name.err" >&2; fail "fio $name reported a verify error"; }
	return 0
}

# Region i is [i*16M, (i+1)*16M): offset_increment keeps the jobs apart, so
# verify failures can only come from the server.
rand=(--rw=randwrite --bs=4k --size=16M --offset_increment=16M --iodepth=32 --numjobs=4
	--verify=crc32c --verify_fatal=1 --randseed=4242)
WANT="write,read" fio_run randwrite 4 "${rand[@]}" --do_verify=1
# A new set of connections re-reads and checks every block written above.
WANT="read" fio_run verify 4 "${rand[@]}" --verify_only=1

# Sequential 1M mixed reads and writes in the upper 64M; fio checks what it wrote.
WANT="write,read" fio_run seqmix 1 --rw=rw --rwmixread=30 --bs=1M --offset=64M --size=64M \
	--iodepth=8 --verify=crc32c --verify_fatal=1 --do_verify=1

check_alive "fio"
stop_node
