/* libFuzzer harness: whole NBD sessions (handshake, options, transmission,
 * disconnect) against the real NBD server and volume; see fuzz_session.h.
 * Seeds: client sides of real sessions (nbdinfo, qemu-io, nbdcopy). */
#include "../../src/nbd/nbd_server.h"

#include "fuzz_session.h"

static unsigned conns(const void *srv)
{
	return nbd_server_conns(srv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct session_target t;

	if (!t.ev) {
		struct nbd_server *srv;
		session_base(&t, "nbd");
		if (nbd_server_new(t.ev, SESSION_ADDR, t.cfg, t.vols, 1, &srv))
			abort();
		t.srv = srv;
		t.conns = conns;
	}
	session_run(&t, data, size);
	return 0;
}
