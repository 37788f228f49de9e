/* libFuzzer harness: whole iSCSI sessions (login and negotiation, SCSI
 * commands with immediate, unsolicited and solicited data, task management,
 * NOP, text, logout) against the real target and volume; see
 * fuzz_session.h. Seeds: initiator sides of real sessions (libiscsi's
 * iscsi-inq, iscsi-ls, qemu-io). */
#include "../../src/iscsi/iscsi_server.h"

#include "fuzz_session.h"

static unsigned conns(const void *srv)
{
	return iscsi_server_conns(srv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct session_target t;

	if (!t.ev) {
		struct iscsi_server *srv;
		session_base(&t, "iscsi");
		if (iscsi_server_new(t.ev, SESSION_ADDR, t.cfg, t.vols, 1, &srv))
			abort();
		t.srv = srv;
		t.conns = conns;
	}
	session_run(&t, data, size);
	return 0;
}
