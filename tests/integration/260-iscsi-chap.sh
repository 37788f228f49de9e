#!/usr/bin/env bash
# CHAP on the iSCSI login: discovery with the cluster's credentials, a target
# with its own (one-way and mutual); a wrong secret, a missing one and a
# target that cannot prove itself are refused at login, and the refusal is
# logged.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need iscsi-ls iscsi-inq

export VOL_SIZE=32M
write_config_iscsi "$T/c.ini" "auth = chap" "chap-user = alice" "chap-secret = alice-secret-12" \
	"chap-mutual-user = tgt" "chap-mutual-secret = target-secret-12"
sed -i "s|^secret = test-secret|&\nauth = chap\nchap-user = disc\nchap-secret = disc-secret-12|" "$CFG"
start_node

P=127.0.0.1:$ISCSI_PORT
LUN=$P/iqn.2026-11.org.tandem:it.vol0/0
I=(-i iqn.2026-12.test:chap)

expect_refused() { # WHAT CMD...
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "$what: login succeeded: $out"
	fi
	echo "$out" | grep -qiE "auth|CHAP" || fail "$what: refused, but not for authentication: $out"
	log "$what: refused ($(echo "$out" | tail -n 1))"
}

expect_refused "discovery without credentials" iscsi-ls "${I[@]}" "iscsi://$P"
expect_refused "discovery with a wrong secret" iscsi-ls "${I[@]}" "iscsi://disc%wrong-secret-1@$P"
iscsi-ls "${I[@]}" "iscsi://disc%disc-secret-12@$P" >"$T/ls.out" 2>&1 || fail "discovery with CHAP: $(cat "$T/ls.out")"
grep -q "iqn.2026-11.org.tandem:it.vol0" "$T/ls.out" || fail "discovery lists no target: $(cat "$T/ls.out")"

expect_refused "target without credentials" iscsi-inq "${I[@]}" "iscsi://$LUN"
expect_refused "target with the discovery secret" iscsi-inq "${I[@]}" "iscsi://disc%disc-secret-12@$LUN"
expect_refused "target with a wrong secret" iscsi-inq "${I[@]}" "iscsi://alice%wrong-secret-1@$LUN"
iscsi-inq "${I[@]}" "iscsi://alice%alice-secret-12@$LUN" >"$T/inq.out" 2>&1 ||
	fail "one-way CHAP: $(cat "$T/inq.out")"
grep -q "Vendor:TANDEM" "$T/inq.out" || fail "one-way CHAP: no INQUIRY data: $(cat "$T/inq.out")"
LIBISCSI_CHAP_TARGET_USERNAME=tgt LIBISCSI_CHAP_TARGET_PASSWORD=target-secret-12 \
	iscsi-inq "${I[@]}" "iscsi://alice%alice-secret-12@$LUN" >"$T/inq2.out" 2>&1 ||
	fail "mutual CHAP: $(cat "$T/inq2.out")"
grep -q "Vendor:TANDEM" "$T/inq2.out" || fail "mutual CHAP: no INQUIRY data"
# the initiator checks the target: a target answering with another secret fails
if LIBISCSI_CHAP_TARGET_USERNAME=tgt LIBISCSI_CHAP_TARGET_PASSWORD=not-the-target-1 \
	iscsi-inq "${I[@]}" "iscsi://alice%alice-secret-12@$LUN" >"$T/inq3.out" 2>&1; then
	fail "mutual CHAP with a different target secret succeeded"
fi
grep -qi "CHAP_R" "$T/inq3.out" || fail "mutual CHAP mismatch not detected by the initiator: $(cat "$T/inq3.out")"

grep -q "CHAP: wrong user name or secret" "$T/a.log" || fail "a wrong CHAP secret is not logged"
stop_node
check_log
log "ok"
