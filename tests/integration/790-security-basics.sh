#!/usr/bin/env bash
# Security basics of a node (docs/SECURITY.md, "On the machine"):
#  1. The control socket is 0600 (root only), also with a umask that would
#     leave it open; control-mode = 0660 widens it on purpose.
#  2. A config file that holds a secret and that every user can read draws a
#     SECURITY warning at start; at mode 600 there is none.
#  3. No secret (the cluster secret, the CHAP secrets) appears in the logs,
#     in status, in events or in the witness's status, through a start, I/O,
#     a lost and regained peer, and a stop.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3 qemu-io

export SECRET=cluster-Sekr1t-4d8e0c
CHAP=chap-Sekr1t-7f3a9b21
MCHAP=mutual-Sekr1t-5e2c1d44
write_config3 "$T/cluster.ini" "auth = chap" "chap-user = init" "chap-secret = $CHAP" \
	"chap-mutual-user = tgt" "chap-mutual-secret = $MCHAP"
chmod 644 "$T/cluster.ini"
umask 000 # a careless service manager: the socket must still be 0600
start_trio
umask 022
wait_for a "v['role'] == 'primary'"
wait_for a "p['replication'] == 'established' and p['disk'] == 'uptodate'" 30

# 1. the control sockets
for n in a b; do
	m=$(stat -c %a "$T/$n.sock")
	[ "$m" = 600 ] || fail "$n's control socket has mode $m, expected 600"
done

# 2. the warning, with the file readable by every user
for n in a b w; do
	this_run $n | grep -q "SECURITY: $T/cluster.ini holds a secret and every user on this machine can read it (mode 0644)" ||
		fail "$n did not warn about the world-readable config"
done

# 3. I/O, status, events, a lost and regained peer
events_follow a "$T/events.a"
qemu-io -f raw "$(uri a)" -c "write -P 0x5a 0 1M" >/dev/null || fail "write to a failed"
link ab cut
wait_for a "p['connection'] != 'connected'" 20
link ab restore
wait_for a "p['replication'] == 'established'" 30
for n in a b; do
	ctl_on $n status vol0 --json >"$T/status.$n"
	ctl_on $n status vol0 >>"$T/status.$n"
done
witness_status >"$T/wstatus" 2>&1 || fail "witness-status failed: $(cat "$T/wstatus")"
stop b
stop a
kill_witness TERM
for f in "$T"/a.log "$T"/b.log "$T"/w.log "$T"/status.a "$T"/status.b "$T"/wstatus "$T"/events.a; do
	for s in "$SECRET" "$CHAP" "$MCHAP"; do
		grep -q -a -- "$s" "$f" && fail "$(basename "$f") holds a secret: $(grep -a -- "$s" "$f" | head -n 2)"
	done
done

# 2 again and 1 widened: mode 600 and control-mode = 0660
chmod 600 "$T/cluster.ini"
sed -i "s|^control = $T/a.sock|&\ncontrol-mode = 0660|" "$T/cluster.ini"
start a
[ "$(stat -c %a "$T/a.sock")" = 660 ] || fail "control-mode = 0660: the socket has mode $(stat -c %a "$T/a.sock")"
this_run a | grep -q "SECURITY:" && fail "a warned about a config of mode 600"
stop a
log "ok"
