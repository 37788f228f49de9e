#!/usr/bin/env bash
# Every class of bad configuration is one line on stderr that names the file
# (and the line and key where there is one), exit status 1, nothing on stdout,
# and no daemon left behind. Usage errors exit 2. tandemctl against a stopped
# node says so and exits 1.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

P=$(free_port)
P2=$(free_port)

# Every case runs even when an earlier one fails, so that one report lists
# all broken classes; the test fails at the end if any did.
PROBLEMS=()
problem()
{
	PROBLEMS+=("$*")
	log "PROBLEM: $*"
}

# run_bad STATUS PREFIX CONTAINS... -- ARGS: tandemd -f ARGS must exit with
# STATUS within 10 s, printing exactly one stderr line that starts with
# "tandemd: PREFIX" and contains every CONTAINS (all fixed strings).
run_bad()
{
	local want=$1 prefix=$2 c rc=0 pid i n line what
	local -a contains=()
	shift 2
	while [ "$1" != -- ]; do
		contains+=("$1")
		shift
	done
	shift
	what="tandemd $*"
	rm -f "$T/x.sock"
	# -f: were the config accepted, the daemon would stay in the foreground,
	# where it can be seen and killed; never a stray daemonized node.
	"$BIN/tandemd" "$@" >"$T/out" 2>"$T/err" &
	pid=$!
	track "$pid"
	# Rejected: it exits. Accepted: its control socket shows up (all the
	# configs here use $T/x.sock), or at worst it still runs 10 s later.
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || break
		[ -S "$T/x.sock" ] && break
		sleep 0.1
	done
	if alive "$pid"; then
		kill -TERM "$pid"
		wait "$pid" 2>/dev/null || true
		problem "$what: config accepted, the node started: $(head -c 300 "$T/err" | tr '\n' ' ')"
		return 0
	fi
	wait "$pid" || rc=$?
	line=$(cat "$T/err")
	[ "$rc" -eq "$want" ] || { problem "$what: exit $rc, expected $want: $line"; return 0; }
	[ -s "$T/out" ] && { problem "$what: printed on stdout: $(cat "$T/out")"; return 0; }
	[ -e "$T/x.sock" ] && { problem "$what: created its control socket"; return 0; }
	[ "$want" -eq 2 ] && return 0 # usage text may span lines
	n=$(wc -l <"$T/err")
	[ "$n" -eq 1 ] || { problem "$what: $n lines on stderr, expected 1: $line"; return 0; }
	[[ $line == "tandemd: $prefix"* ]] ||
		{ problem "$what: message does not start with 'tandemd: $prefix': $line"; return 0; }
	for c in "${contains[@]}"; do
		[[ $line == *"$c"* ]] || { problem "$what: message lacks '$c': $line"; return 0; }
	done
	log "ok: $line"
}

# bad NAME PREFIX CONTAINS...: the config on stdin, as $T/NAME.ini; PREFIX
# is relative to that path (e.g. ":8: [node a] bogus: ").
bad()
{
	local prefix=$2 f=$T/$1.ini
	shift 2
	cat >"$f"
	run_bad 1 "$f$prefix" "$@" -- -c "$f" -n a -f
}

bad unknown-key ":8: [node a] bogus: " "unknown key" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x
bogus = 1

[volume vol0]
size = 64M
nodes = a
EOF

bad unknown-section ":9: " "unknown section [disk x]" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[disk x]
size = 1
EOF

# A section with no keys at all is still input: it must not be ignored.
bad empty-unknown-section ":13: " "unknown section [disk x]" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a

[disk x]
EOF

bad empty-volume ":13: " "[volume vol1]" "size" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a

[volume vol1]
EOF

bad bad-size ":10: [volume vol0] size: " "12Q" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 12Q
nodes = a
EOF

bad size-not-4k ":10: [volume vol0] size: " "4K" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 1000
nodes = a
EOF

bad no-cluster ": " "[cluster]" <<EOF
[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a
EOF

bad no-size ":9: " "[volume vol0]" "size" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
nodes = a
EOF

bad undefined-node ":11: [volume vol0] nodes: " "zz" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a zz
EOF

# Two nodes on one host:port: the message points at both lines.
bad dup-port-nodes ":13: [node b] nbd: " "127.0.0.1:$P" "[node a] nbd" "(line 6)" <<EOF
[cluster]
name = it
secret = s

[node a]
nbd = 127.0.0.1:$P
replication = 127.0.0.1:$P2
control = $T/x.sock
data-dir = $T/x

[node b]
replication = 127.0.0.1:$((P2 + 1))
nbd = 127.0.0.1:$P
control = $T/y.sock
data-dir = $T/y

[volume vol0]
size = 64M
nodes = a
EOF

# Two keys of one node on one host:port.
bad dup-port-keys ":7: [node a] metrics: " "127.0.0.1:$P" "[node a] nbd" "(line 5)" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
metrics = 127.0.0.1:$P
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a
EOF

bad dup-key ":12: [volume vol0] size: " "twice" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a
size = 128M
EOF

# The repeated section right after the first, with a key not given before:
# it must be refused, not merged into the first.
bad dup-section ":9: " "[node a]" "twice" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[node a]
metrics = 127.0.0.1:$P2

[volume vol0]
size = 64M
nodes = a
EOF

bad dup-section-apart ":13: " "[node a]" "twice" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a

[node a]
metrics = 127.0.0.1:$P2
EOF

bad bad-address ":5: [node a] nbd: " "127.0.0.1" "host:port" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a
EOF

bad bad-port ":5: [node a] nbd: " "127.0.0.1:99999" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:99999
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a
EOF

bad syntax ":8: " "syntax error" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x
this line is not ini

[volume vol0]
size = 64M
nodes = a
EOF

bad outside-section ":1: " "outside" <<EOF
name = it
[cluster]
name = it
EOF

bad bad-replication ":12: [volume vol0] replication: " "sometimes" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a
replication = sometimes
EOF

# data-dir below a regular file can be neither used nor created (as root,
# permission bits would not stop it; a file in the path does). The check
# happens after parsing and still names the key's line.
touch "$T/plainfile"
bad bad-datadir ":7: [node a] data-dir: " "$T/plainfile/sub" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/plainfile/sub

[volume vol0]
size = 64M
nodes = a
EOF

# A well-formed config for the argument checks below.
write_config "$T/good.ini"
run_bad 1 "$T/good.ini: " "[node zz]" -- -c "$T/good.ini" -n zz -f
run_bad 1 "$T/missing.ini: " "cannot open" "No such file" -- -c "$T/missing.ini" -n a -f
run_bad 2 "" -- 
run_bad 2 "" -- -c "$T/good.ini" -f
run_bad 2 "" -- -c "$T/good.ini" -n a -f extra-arg
run_bad 2 "" -- -x

# tandemctl: no node running, bad config, usage.
[ ! -e "$T/a.sock" ] || fail "stale control socket"
rc=0
"$BIN/tandemctl" -c "$CFG" -n a status >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 1 ] || fail "tandemctl against a stopped node: exit $rc, expected 1"
if [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -q "cannot reach the node at $T/a.sock" "$T/err"; then
	fail "tandemctl against a stopped node: unclear message: $(cat "$T/err")"
fi
[ -s "$T/out" ] && fail "tandemctl printed on stdout: $(cat "$T/out")"
rc=0
"$BIN/tandemctl" -c "$T/unknown-key.ini" -n a ping >"$T/out" 2>"$T/err" || rc=$?
if [ "$rc" -ne 1 ] || [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -qF "$T/unknown-key.ini:8:" "$T/err"; then
	fail "tandemctl with a bad config: exit $rc: $(cat "$T/err")"
fi
rc=0
"$BIN/tandemctl" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] || fail "tandemctl without arguments: exit $rc, expected 2"

# A control path that names a regular file: refused, and the file is kept.
echo "precious" >"$T/precious.txt"
sed "s#^control = .*#control = $T/precious.txt#" "$CFG" >"$T/ctlfile.ini"
rc=0
"$BIN/tandemd" -c "$T/ctlfile.ini" -n a -f >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 1 ] || fail "control path on a regular file: exit $rc, expected 1"
grep -q "precious" "$T/precious.txt" || fail "tandemd replaced or removed the file named by control"
grep -qF "[node a] control" "$T/err" || fail "control path on a regular file: unclear: $(cat "$T/err")"

# Two volumes naming the same disk: refused, naming the line and both volumes.
cat >"$T/samedisk.ini" <<EOF
[cluster]
name = it

[node a]
nbd = 127.0.0.1:$P
control = $T/x.sock
data-dir = $T/x

[volume vol0]
size = 64M
nodes = a
disk.a = $T/shared.img

[volume vol1]
size = 64M
nodes = a
disk.a = $T/shared.img
EOF
rc=0
"$BIN/tandemd" -c "$T/samedisk.ini" -n a -f >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 1 ] || fail "two volumes on one disk: exit $rc, expected 1"
grep -qF "$T/samedisk.ini:12: [volume vol0] disk.a: $T/shared.img is also the disk of volume vol1" "$T/err" ||
	fail "two volumes on one disk: $(cat "$T/err")"

# The good config really is good: the checks above failed for their reasons.
start_node
stop_node

if [ ${#PROBLEMS[@]} -gt 0 ]; then
	printf '  %s\n' "${PROBLEMS[@]}" >&2
	fail "${#PROBLEMS[@]} bad-config case(s) misbehave"
fi
