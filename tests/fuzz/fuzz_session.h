/* Whole client sessions against a real front-end (the NBD or iSCSI server
 * of src/, a real single-node volume on a RAM data area behind it), for the
 * stateful harnesses fuzz_nbd_session and fuzz_iscsi_session. The server is
 * made once; every input is one new connection (the net stub of the engine
 * unit tests stands in for the socket): after a mode byte, the input is
 * what the client sends, in up to four pieces with loop passes between
 * them, so that replies, state changes and task management interleave with
 * what follows; then the client closes its side. Mode byte:
 *   bits 0-1: the input is cut into 1 + (bits) pieces of equal size;
 *   bit 2:    the client does not read (its output stays queued, as
 *             behind a full socket) until it has sent everything.
 * Properties: no sanitizer report, and the connection is closed within 3 s
 * of the client's FIN (no hang; a request is answered or dropped, never
 * left waiting). The harnesses only differ in how the server is made.
 * (Test code: the target lives in statics for the process's life.) */
#ifndef TANDEM_FUZZ_SESSION_H
#define TANDEM_FUZZ_SESSION_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/common/util.h"
#include "../../src/config/config.h"
#include "../../src/ev/ev.h"
#include "../../src/vol/vol.h"
#include "../unit/support/net_stub.h"

#include "fuzz.h"

#define SESSION_ADDR "127.0.0.1:3260"
#define SESSION_WAIT_NS (3ull * 1000000000ull)

struct session_target {
	struct ev_loop *ev;
	struct cfg *cfg;
	struct vol *vols[1];
	void *srv;
	unsigned (*conns)(const void *srv);
};

static char session_dir[64];

/* At exit: the metadata directory in /dev/shm goes. */
static inline void session_cleanup(void)
{
	char sub[128], path[512];
	DIR *d;
	struct dirent *e;

	snprintf(sub, sizeof(sub), "%s/a", session_dir);
	d = opendir(sub);
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", sub, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(sub);
	rmdir(session_dir);
}

/* Makes the configuration and the volume; the harness then makes srv. */
static inline void session_base(struct session_target *t, const char *frontend)
{
	char dir[] = "/dev/shm/tandem-fuzz-session.XXXXXX", sub[128], text[1024], err[256];

	if (!mkdtemp(dir))
		abort();
	snprintf(session_dir, sizeof(session_dir), "%s", dir);
	atexit(session_cleanup);
	snprintf(sub, sizeof(sub), "%s/a", dir);
	if (mkdir(sub, 0700))
		abort();
	snprintf(text, sizeof(text),
		 "[cluster]\nname = fz\n"
		 "[node a]\n%s = %s\ncontrol = %s/a.sock\ndata-dir = %s/a\n"
		 "[volume vol0]\nsize = 4194304\nnodes = a\ndisk.a = ram:\n",
		 frontend, SESSION_ADDR, dir, dir);
	if (cfg_parse_string(text, "fuzz", &t->cfg, err, sizeof(err)))
		abort();
	t->ev = ev_new(256);
	if (!t->ev)
		abort();
	if (vol_open(t->ev, t->cfg, 0, 0, &t->vols[0], err, sizeof(err)))
		abort();
}

static inline void session_run(struct session_target *t, const uint8_t *data, size_t size)
{
	struct stub_conn *s;
	unsigned pieces;
	bool plug;
	size_t off = 0;
	uint64_t t0;

	if (size < 1)
		return;
	pieces = 1u + (data[0] & 3u);
	plug = data[0] & 4u;
	data++;
	size--;
	if (stub_accept(SESSION_ADDR, eventfd(0, EFD_CLOEXEC)))
		abort();
	s = stub_conn_at(stub_nconns() - 1);
	CHECK(s && s->accepted);
	if (plug)
		stub_plug(s, true);
	for (unsigned i = 0; i < pieces; i++) {
		size_t n = i + 1 == pieces ? size - off : size / pieces;
		if (!s->c)
			break; /* the server closed it */
		stub_push(s, data + off, n);
		off += n;
		for (int k = 0; k < 4; k++)
			ev_run_once(t->ev, 0);
	}
	if (s->c) {
		if (plug)
			stub_plug(s, false);
		stub_fin(s);
	}
	t0 = now_ns();
	while (t->conns(t->srv)) {
		CHECK(now_ns() - t0 < SESSION_WAIT_NS); /* a hang */
		ev_run_once(t->ev, 1000000ull);
	}
	ev_run_once(t->ev, 0);
	stub_forget_closed();
}

#endif
