/* The replication engine (src/repl) end to end inside one process: nodes a
 * and b, each a real struct vol over a RAM data area ("ram:") with its
 * metadata file in a mkdtemp directory under /dev/shm (RAM), and a real
 * repl per node on one event loop. Their connection is the net stub
 * (tests/unit/support/net_stub.c): what one side sends, the other receives,
 * and a test can hold, plug or cut the link and read every byte that went.
 * Generations are set in the superblocks before the engines start; the
 * outcome is read through repl_get_status, the volumes and the stub's logs.
 * No socket is made: a's dial (net_dial) completes in the stub with an
 * eventfd, and the test hands b's stubbed listener another one. */
#include "engine.h"

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "../../include/proto/repl.h"
#include "../../src/common/crash.h"
#include "../../src/config/config.h"
#include "../../src/md/md.h"
#include "../../src/repl/repl.h"
#include "../../src/repl/repl_codec.h"
#include "../../src/repl/repl_pack.h"
#include "../../src/wit/wit_client.h"
#include "../../src/wit/wit_server.h"
#include "support/net_stub.h"
#include "support/alloc_fault.h"

#define KIB 1024ull
#define VOL_SIZE (4ull << 20)
#define GRAN 4096u /* bitmap granularity: an activity-log extent is 256 KiB */
#define NA 0
#define NB 1
#define WAIT_MS 5000ull
#define WIT_ADDR "127.0.0.1:7" /* the witness of pair_open_cfg2 */
#define ADDR_A "127.0.0.1:1"   /* a's replication address */

struct pair;

struct node {
	struct pair *p;
	unsigned ix;
	struct vol *v;
	struct repl_server *srv;
	bool started;
	char events[16384]; /* every vol_event fragment, one per line */
	size_t elen;
};

struct pair {
	struct ev_loop *ev;
	struct cfg *cfg;
	char *dir;
	char addr_b[64];
	unsigned seen; /* stub records already looked at by link_dials */
	struct node n[2];
	/* called on every event of either node (from inside the engine) */
	void (*on_event)(struct pair *p, unsigned node, const char *json);
	unsigned completions;  /* writes completed so far (their order) */
	struct rec_bs *hold_a; /* a's store, for hold_on_syncsource */
	bool virt;             /* the loop runs on vnow (pair_virtual) */
	bool witness;          /* a witness in this process (pair_open_cfg2) */
	bool witness_down;     /* pair_witness_down: its listener and sessions are gone */
	bool wc_down[2];       /* that node's witness client was shut down */
	unsigned handovers;    /* a's "handover" events, and when (virtual clock) */
	uint64_t handover_ns[4];
	uint64_t quorum_lost_ns; /* a's "quorum" event to false, on the virtual clock */
	struct wit_server *ws;
	struct wit_client *wc[2];
	uint64_t vnow;
};

/* ---- the two nodes ---- */

static void event_cb(void *ctx, const char *json)
{
	struct node *n = ctx;
	size_t k = strlen(json);

	if (n->elen + k + 2 < sizeof(n->events)) {
		memcpy(n->events + n->elen, json, k);
		n->elen += k;
		n->events[n->elen++] = '\n';
		n->events[n->elen] = '\0';
	}
	if (n->p->on_event)
		n->p->on_event(n->p, n->ix, json);
}

/* Config (with extra lines for [volume vol0]), loop and both volumes (not
 * yet replicated: pair_start does that), so that a test can set up their
 * metadata first. */
/* The pair's configuration text into BUF: cluster CLUSTER, data under
 * DIR/a and DIR/b, b's replication address ADDR_B, a volume of SIZE bytes,
 * then EXTRA (more volume settings). */
static void pair_cfg_text2(char *buf, size_t len, const char *cluster, const char *dir,
			   const char *addr_b, unsigned long long size, const char *cluster_extra,
			   const char *extra)
{
	int n = snprintf(
		buf, len,
		"[cluster]\nname = %s\nsecret = unit-secret\npeer-timeout = 10\n%s"
		"[node a]\nreplication = 127.0.0.1:1\ncontrol = %s/a.sock\ndata-dir = %s/a\n"
		"[node b]\nreplication = %s\ncontrol = %s/b.sock\ndata-dir = %s/b\n"
		"[volume vol0]\nsize = %llu\nnodes = a b\nreplication = sync\n"
		"bitmap-granularity = %u\ndisk.a = ram:\ndisk.b = ram:\n%s",
		cluster, cluster_extra, dir, dir, addr_b, dir, dir, size, GRAN, extra);

	assert_true(n > 0 && (size_t)n < len);
}

static void pair_cfg_text(char *buf, size_t len, const char *cluster, const char *dir,
			  const char *addr_b, unsigned long long size, const char *extra)
{
	pair_cfg_text2(buf, len, cluster, dir, addr_b, size, "", extra);
}

/* With witness lines (cluster_extra, after them) the pair has a witness
 * (pair_repl makes it, in this process, on the pair's loop). */
static void pair_open_cfg2(struct pair *p, const char *witness_lines, const char *extra)
{
	char text[4096], err[256], sub[512], wl[1024] = "";

	memset(p, 0, sizeof(*p));
	stub_reset(); /* what a failed test left (its teardown did not run) */
	p->dir = eng_mkdtemp("repl-engine");
	for (int i = 0; i < 2; i++) {
		snprintf(sub, sizeof(sub), "%s/%c", p->dir, 'a' + i);
		assert_int_equal(mkdir(sub, 0700), 0);
	}
	/* both listeners are the stub's: no port is ever bound */
	snprintf(p->addr_b, sizeof(p->addr_b), "127.0.0.1:9");
	if (witness_lines) {
		snprintf(wl, sizeof(wl), "witness = %s\nwitness-dir = %s/w\n%s", WIT_ADDR, p->dir,
			 witness_lines);
		p->witness = true;
	}
	pair_cfg_text2(text, sizeof(text), "ut", p->dir, p->addr_b, VOL_SIZE, wl, extra);
	if (cfg_parse_string(text, "unit", &p->cfg, err, sizeof(err)))
		fail_msg("config: %s", err);
	p->ev = ev_new(256);
	assert_non_null(p->ev);
	for (unsigned i = 0; i < 2; i++) {
		struct node *n = &p->n[i];
		n->p = p;
		n->ix = i;
		if (vol_open(p->ev, p->cfg, 0, i, &n->v, err, sizeof(err)))
			fail_msg("vol_open: %s", err);
		/* A new disk starts secondary and inconsistent (I1); these tests
		 * start from a pair that was in sync, a primary. */
		vol_set_disk(n->v, VOL_UPTODATE);
		if (i == NA) {
			vol_set_role(n->v, VOL_PRIMARY);
			n->v->md->sb.flags |= TANDEM_MD_F_PRIMARY;
			assert_int_equal(vol_md_write(n->v), 0);
		}
		n->v->event_fn = event_cb;
		n->v->event_ctx = n;
	}
}

static void pair_open_cfg(struct pair *p, const char *extra)
{
	pair_open_cfg2(p, NULL, extra);
}

static void pair_open(struct pair *p)
{
	pair_open_cfg(p, "");
}

/* Replication objects and listeners of both nodes (not started). */
static void pair_repl(struct pair *p)
{
	char err[256];

	for (unsigned i = 0; i < 2; i++) {
		struct node *n = &p->n[i];
		if (repl_new(p->ev, p->cfg, 0, i, n->v, err, sizeof(err)))
			fail_msg("repl_new: %s", err);
		assert_int_equal(repl_server_new(p->ev, p->cfg, i, &n->v, 1, &n->srv), 0);
	}
	if (p->witness) {
		const struct cfg *cfgs[1] = { p->cfg };
		bool init[1] = { true };
		if (wit_server_new(p->ev, cfgs, init, 1, &p->ws, err, sizeof(err)))
			fail_msg("wit_server_new: %s", err);
		for (unsigned i = 0; i < 2; i++) {
			assert_int_equal(wit_client_new(p->ev, p->cfg, i, &p->wc[i]), 0);
			assert_int_equal(repl_use_witness(p->n[i].v->repl, p->wc[i]), 0);
		}
	}
}

static void pair_go(struct pair *p)
{
	for (unsigned i = 0; i < 2; i++) {
		if (p->wc[i])
			wit_client_start(p->wc[i]);
		repl_start(p->n[i].v->repl);
		p->n[i].started = true;
	}
}

/* A connection a dialed is accepted at b's address (the stub's listener of
 * b's repl_server) and wired to it. */
static void link_dials(struct pair *p)
{
	unsigned n = stub_nconns();

	for (unsigned i = p->seen; i < n; i++) {
		struct stub_conn *s = stub_conn_at(i);
		const char *addr;
		unsigned made;
		int fd;
		if (s->accepted || !s->c || s->peer || s->broken)
			continue;
		fd = eventfd(0, EFD_CLOEXEC);
		assert_true(fd >= 0);
		/* to the listener dialed (b's replication, or the witness);
		 * one closed since the dial refuses it */
		addr = s->dial_addr[0] ? s->dial_addr : p->addr_b;
		made = stub_nconns();
		if (stub_accept(addr, fd) < 0) {
			close(fd);
			stub_break(s, -ECONNREFUSED);
			continue;
		}
		if (stub_nconns() == made) {
			/* b refused it (an allocation failed there, which
			 * closed the fd): the dialer sees a reset */
			stub_break(s, -ECONNRESET);
			continue;
		}
		stub_wire(s, stub_conn_at(stub_nconns() - 1));
		p->seen = i + 1;
	}
	p->seen = stub_nconns();
}

/* ---- the virtual clock: rules on time at their exact boundary ---- */

static uint64_t vclock(void *arg)
{
	return ((struct pair *)arg)->vnow;
}

/* From now on the pair's loop runs on a clock that moves only when the test
 * (or pass) steps it: from timer deadline to timer deadline, so that a rule
 * on time is seen at the tick where it strikes, in microseconds. */
static void pair_virtual(struct pair *p)
{
	p->vnow = now_ns();
	p->virt = true;
	ev_set_clock(p->ev, vclock, p);
}

/* One pass of the loop, waiting up to wait_ns of real time for I/O, and
 * the dials it made wired. */
static void step(struct pair *p, uint64_t wait_ns)
{
	assert_int_equal(ev_run_once(p->ev, wait_ns), 0);
	link_dials(p);
}

/* Runs STEP until COND, or fails after WAIT_MS of real time. */
#define LOOP_UNTIL(p, cond, STEP)                                            \
	do {                                                                 \
		uint64_t t0_ = now_ns();                                     \
		while (!(cond)) {                                            \
			if (now_ns() - t0_ > WAIT_MS * ENG_MS)               \
				fail_msg("timed out waiting for %s", #cond); \
			STEP;                                                \
		}                                                            \
	} while (0)

/* Everything due at vnow: completions, deferred work, timers, dials. */
static void settle(struct pair *p)
{
	for (unsigned i = 0; i < 4; i++)
		step(p, 0);
}

/* Runs the loop at vnow (the clock stands) until COND: disk I/O completes
 * in real time. */
#define SETTLE_UNTIL(p, cond) LOOP_UNTIL(p, cond, step(p, ENG_MS))

/* Steps the virtual clock to t, stopping at every timer deadline on the way. */
static void advance_to(struct pair *p, uint64_t t)
{
	settle(p);
	while (p->vnow < t) {
		uint64_t d = ev_next_deadline(p->ev);
		p->vnow = d < t ? MAX(d, p->vnow + 1) : t; /* (+1: a timer due, not run) */
		settle(p);
	}
}

/* On the virtual clock: to the next deadline, at most a second on. */
static void pass(struct pair *p)
{
	if (p->virt)
		advance_to(p, MIN(ev_next_deadline(p->ev), p->vnow + 1000 * ENG_MS));
	else
		step(p, 5 * ENG_MS);
}

#define WAIT_FOR(p, cond) LOOP_UNTIL(p, cond, pass(p))

/* Runs the loop for about ms milliseconds (for what must NOT happen). */
/* Runs the pair until COND holds or MS milliseconds have passed. */
#define RUN_UNTIL(p, ms, cond)                                  \
	do {                                                    \
		uint64_t t0_ = now_ns();                        \
		while (!(cond) && now_ns() - t0_ < (ms)*ENG_MS) \
			pass(p);                                \
	} while (0)

static void run_for(struct pair *p, uint64_t ms)
{
	RUN_UNTIL(p, ms, false);
}

static void pair_close(struct pair *p)
{
	uint64_t t0 = now_ns();

	for (unsigned i = 0; i < 2; i++)
		if (p->n[i].srv)
			repl_server_shutdown(p->n[i].srv);
	for (unsigned i = 0; i < 2; i++)
		if (p->n[i].v->repl)
			repl_shutdown(p->n[i].v->repl);
	for (unsigned i = 0; i < 2; i++)
		if (p->wc[i] && !p->wc_down[i])
			wit_client_shutdown(p->wc[i]);
	if (p->ws && !p->witness_down)
		wit_server_shutdown(p->ws);
	for (;;) {
		bool idle = true;
		for (unsigned i = 0; i < 2; i++)
			if (p->wc[i] && !wit_client_idle(p->wc[i]))
				idle = false;
		for (unsigned i = 0; i < 2; i++) {
			struct node *n = &p->n[i];
			if ((n->v->repl && !repl_idle(n->v->repl)) ||
			    (n->srv && repl_server_conns(n->srv)))
				idle = false;
		}
		if (idle)
			break;
		assert_true(now_ns() - t0 < WAIT_MS * ENG_MS);
		assert_int_equal(ev_run_once(p->ev, 5 * ENG_MS), 0);
	}
	assert_int_equal(ev_run_once(p->ev, 0), 0);
	for (unsigned i = 0; i < 2; i++) {
		repl_free(p->n[i].v->repl);
		vol_close(p->n[i].v);
		repl_server_free(p->n[i].srv);
		wit_client_free(p->wc[i]);
	}
	wit_server_free(p->ws);
	assert_int_equal(ev_run_once(p->ev, 0), 0);
	ev_free(p->ev);
	stub_reset();
	cfg_free(p->cfg);
	unit_rmtree(p->dir);
	free(p->dir);
}

static struct repl_status status(const struct pair *p, unsigned i)
{
	struct repl_status st;
	repl_get_status(p->n[i].v->repl, &st);
	return st;
}

static struct md_sb *sbp(struct pair *p, unsigned i)
{
	return &p->n[i].v->md->sb;
}

static void set_gens(struct pair *p, unsigned i, uint64_t cur, uint64_t bm, uint64_t hist0)
{
	struct md_sb *sb = sbp(p, i);

	sb->gen_current = cur;
	sb->gen_bitmap = bm;
	memset(sb->gen_history, 0, sizeof(sb->gen_history));
	sb->gen_history[0] = hist0;
	assert_int_equal(vol_md_write(p->n[i].v), 0);
}

/* The connection a dialed last (NULL if none alive). */
static struct stub_conn *a_conn(void)
{
	for (unsigned i = stub_nconns(); i-- > 0;) {
		struct stub_conn *s = stub_conn_at(i);
		if (!s->accepted && s->c)
			return s;
	}
	return NULL;
}

static bool connected(const struct pair *p, enum repl_rep_state ra, enum repl_rep_state rb)
{
	struct repl_status a = status(p, NA), b = status(p, NB);
	return a.conn == RC_CONNECTED && b.conn == RC_CONNECTED && a.rep == ra && b.rep == rb;
}

static bool in_sync(const struct pair *p)
{
	char msg[256];
	return connected(p, RR_ESTABLISHED, RR_ESTABLISHED) &&
	       repl_in_sync(p->n[NA].v->repl, msg, sizeof(msg)) == 1 &&
	       repl_in_sync(p->n[NB].v->repl, msg, sizeof(msg)) == 1;
}

/* ---- the wire ---- */

struct wmsg {
	uint16_t type;
	uint16_t flags; /* the header's: a codec (REPL_HF_*) */
	uint64_t seq, off;
	uint32_t len; /* WRITE, RS_DATA, RS_ZERO, TRIM, ZERO: the extent */
	const uint8_t *data;
	uint32_t data_len; /* payload bytes on the wire */
};

/* Splits what s sent into messages; returns how many (at most max). */
static unsigned wire(const struct stub_conn *s, struct wmsg *out, unsigned max)
{
	size_t at = 0;
	unsigned n = 0;

	while (at + sizeof(struct repl_hdr) <= s->out_len && n < max) {
		struct repl_hdr h;
		struct wmsg *m = &out[n++];
		memcpy(&h, s->out + at, sizeof(h));
		assert_int_equal(le32toh(h.magic), REPL_HDR_MAGIC);
		memset(m, 0, sizeof(*m));
		m->type = le16toh(h.type);
		m->flags = le16toh(h.flags);
		at += sizeof(h);
		if (m->type == REPL_WRITE || m->type == REPL_RS_DATA || m->type == REPL_RS_ZERO ||
		    m->type == REPL_TRIM || m->type == REPL_ZERO) {
			struct repl_io io;
			memcpy(&io, s->out + at, sizeof(io));
			m->seq = le64toh(io.seq);
			m->off = le64toh(io.off);
			m->len = le32toh(io.len);
			m->data = s->out + at + sizeof(io);
			m->data_len = le32toh(h.len) - (uint32_t)sizeof(io);
		}
		at += le32toh(h.len);
	}
	return n;
}

static unsigned count_type(const struct stub_conn *s, uint16_t type)
{
	static struct wmsg m[8192];
	unsigned n = wire(s, m, 8192), k = 0;

	for (unsigned i = 0; i < n; i++)
		k += m[i].type == type;
	return k;
}

/* ---- writes ---- */

struct wio {
	struct vol_io io;
	struct pair *p;
	int res, done;
	unsigned order; /* 1 for the first write of the test to complete, ... */
	uint8_t *buf;
};

static void wio_cb(struct vol_io *io, int res)
{
	struct wio *w = container_of(io, struct wio, io);
	w->res = res;
	w->done++;
	w->order = ++w->p->completions;
}

static void submit_write(struct pair *p, unsigned i, struct wio *w, uint64_t off, uint64_t len,
			 uint8_t fill)
{
	memset(w, 0, sizeof(*w));
	w->p = p;
	w->buf = aligned_alloc(4096, len);
	assert_non_null(w->buf);
	memset(w->buf, fill, len);
	w->io.type = BS_WRITE;
	w->io.off = off;
	w->io.len = len;
	w->io.buf = w->buf;
	w->io.cb = wio_cb;
	vol_submit(p->n[i].v, &w->io);
}

static void assert_bytes(struct pair *p, unsigned i, uint64_t off, uint64_t len, uint8_t want)
{
	uint8_t *buf = malloc(len);

	assert_non_null(buf);
	eng_read(p->ev, p->n[i].v, off, len, buf);
	for (uint64_t k = 0; k < len; k++)
		if (buf[k] != want)
			fail_msg("node %c byte %llu: %02x, expected %02x", 'a' + i,
				 (unsigned long long)(off + k), buf[k], want);
	free(buf);
}

/* Both data areas hold the same bytes. */
static void assert_same_data(struct pair *p)
{
	uint8_t *a = malloc(VOL_SIZE), *b = malloc(VOL_SIZE);

	assert_non_null(a);
	assert_non_null(b);
	eng_read(p->ev, p->n[NA].v, 0, VOL_SIZE, a);
	eng_read(p->ev, p->n[NB].v, 0, VOL_SIZE, b);
	for (uint64_t k = 0; k < VOL_SIZE; k++)
		if (a[k] != b[k])
			fail_msg("data differs at byte %llu: %02x on a, %02x on b",
				 (unsigned long long)k, a[k], b[k]);
	free(a);
	free(b);
}

/* ---- handshake outcomes ---- */

/* Both created empty (generation 1): established without a sync, then the
 * primary leaves the shared "empty" generation on both (SET_GEN). */
static void test_handshake_created_empty(void **state)
{
	struct pair p;
	struct repl_status a, b;
	(void)state;

	pair_open(&p);
	assert_int_equal(sbp(&p, NA)->gen_current, 1);
	assert_int_equal(sbp(&p, NB)->gen_current, 1);
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p,
		 connected(&p, RR_ESTABLISHED, RR_ESTABLISHED) && sbp(&p, NB)->gen_current != 1);
	a = status(&p, NA);
	b = status(&p, NB);
	assert_int_equal(a.gen_current, b.gen_current);
	assert_true(a.gen_current > 1);
	assert_int_equal(a.peer_role, 0);
	assert_int_equal(b.peer_role, 1);
	assert_int_equal(p.n[NA].v->disk, VOL_UPTODATE);
	assert_int_equal(p.n[NB].v->disk, VOL_UPTODATE);
	assert_int_equal(a.out_of_sync_bytes, 0);
	assert_false(a.split_brain);
	assert_int_equal(count_type(a_conn(), REPL_SET_GEN), 1);
	assert_int_equal(count_type(a_conn(), REPL_RS_DATA) + count_type(a_conn(), REPL_RS_ZERO),
			 0);
	assert_int_equal(count_type(a_conn(), REPL_RS_DONE), 0);
	WAIT_FOR(&p, in_sync(&p));
	pair_close(&p);
}

/* Same generation, no bits: established; the secondary, started consistent
 * (R9: not known up to date), becomes up to date; nothing is copied. */
static void test_handshake_equal(void **state)
{
	struct pair p;
	(void)state;

	pair_open(&p);
	set_gens(&p, NA, 0x1111, 0, 0);
	set_gens(&p, NB, 0x1111, 0, 0);
	/* as vol_open leaves a replica that restarts (R9): set, not a transition */
	p.n[NB].v->disk = VOL_CONSISTENT;
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p, in_sync(&p));
	assert_int_equal(p.n[NB].v->disk, VOL_UPTODATE);
	assert_int_equal(status(&p, NA).gen_current, 0x1111);
	assert_int_equal(status(&p, NB).gen_current, 0x1111);
	assert_int_equal(count_type(a_conn(), REPL_SET_GEN), 0);
	assert_int_equal(count_type(a_conn(), REPL_RS_DONE), 0);
	assert_non_null(strstr(p.n[NA].events, "\"to\":\"established\""));
	pair_close(&p);
}

/* K1: b's configuration differs from a's in a setting a guarantee rests on
 * (EDIT on b's copy): neither reaches the verdict, both say why with both
 * values, no STATE is acted on, and the dialer tries again. */
static void contract_refused(void (*edit)(struct cfg *), const char *key, const char *on_a,
			     const char *on_b)
{
	struct pair p;
	struct cfg *cb;
	char err[256];
	struct repl_status sa, sb;

	pair_open(&p);
	set_gens(&p, NA, 0x1111, 0, 0);
	set_gens(&p, NB, 0x1111, 0, 0);
	cb = malloc(sizeof(*cb));
	assert_non_null(cb);
	*cb = *p.cfg;
	edit(cb);
	for (unsigned i = 0; i < 2; i++) {
		struct node *n = &p.n[i];
		struct cfg *c = i == NB ? cb : p.cfg;
		if (repl_new(p.ev, c, 0, i, n->v, err, sizeof(err)))
			fail_msg("repl_new: %s", err);
		assert_int_equal(repl_server_new(p.ev, c, i, &n->v, 1, &n->srv), 0);
	}
	pair_go(&p);
	WAIT_FOR(&p, strstr(status(&p, NA).error, key) && strstr(status(&p, NB).error, key));
	/* a retries (RETRY_MIN_MS) and is refused again */
	run_for(&p, 600);
	sa = status(&p, NA);
	sb = status(&p, NB);
	assert_int_not_equal(sa.conn, RC_CONNECTED);
	assert_int_not_equal(sb.conn, RC_CONNECTED);
	assert_non_null(strstr(sa.error, on_a));
	assert_non_null(strstr(sa.error, on_b));
	assert_non_null(strstr(sb.error, on_a));
	assert_non_null(strstr(sb.error, on_b));
	assert_null(strstr(p.n[NA].events, "\"to\":\"established\""));
	assert_null(strstr(p.n[NB].events, "\"to\":\"established\""));
	assert_non_null(strstr(p.n[NA].events, "\"refused\""));
	pair_close(&p);
	free(cb);
}

static void edit_async(struct cfg *c)
{
	c->volumes[0].replication = CFG_REPL_ASYNC;
}

static void edit_peer_timeout(struct cfg *c)
{
	c->peer_timeout_ms = 9000;
}

static void edit_nodes(struct cfg *c)
{
	c->volumes[0].nodes[0] = 1;
	c->volumes[0].nodes[1] = 0;
}

static void edit_failover(struct cfg *c)
{
	c->volumes[0].failover_manual = true;
}

static void test_contract_mode_refused(void **state)
{
	(void)state;
	contract_refused(edit_async, "replication is", "sync on a", "async on b");
}

static void test_contract_others_refused(void **state)
{
	(void)state;
	contract_refused(edit_peer_timeout, "peer-timeout is", "10 s on a", "9 s on b");
	contract_refused(edit_nodes, "nodes is", "'a b' on a", "'b a' on b");
	contract_refused(edit_failover, "failover is", "auto on a", "manual on b");
}

/* K2: `set` on a connected node changes both; with the peer away it is
 * refused and changes nothing. */
static void test_contract_set_both(void **state)
{
	struct pair p;
	char msg[256];
	(void)state;

	pair_open(&p);
	set_gens(&p, NA, 0x1111, 0, 0);
	set_gens(&p, NB, 0x1111, 0, 0);
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p, in_sync(&p));
	assert_int_equal(repl_set(p.n[NA].v->repl, "replication", "async", msg, sizeof(msg)), 0);
	assert_true(status(&p, NA).async);
	WAIT_FOR(&p, status(&p, NB).async);
	assert_int_equal(repl_set(p.n[NB].v->repl, "on-congestion", "block", msg, sizeof(msg)), 0);
	assert_int_equal(repl_set(p.n[NB].v->repl, "replication", "sync", msg, sizeof(msg)), 0);
	WAIT_FOR(&p, !status(&p, NA).async);
	run_for(&p, 100); /* the answers: equal, the connection stays */
	assert_int_equal(status(&p, NA).conn, RC_CONNECTED);
	/* a's: the handshake's, its change, its answers to b's two */
	assert_int_equal(count_type(a_conn(), REPL_CONTRACT), 4);
	assert_int_equal(repl_set(p.n[NA].v->repl, "replication", "bogus", msg, sizeof(msg)),
			 -EINVAL);
	assert_int_equal(repl_disconnect(p.n[NB].v->repl, msg, sizeof(msg)), 0);
	WAIT_FOR(&p, status(&p, NA).conn != RC_CONNECTED);
	assert_int_equal(repl_set(p.n[NA].v->repl, "replication", "async", msg, sizeof(msg)),
			 -ENOTCONN);
	assert_non_null(strstr(msg, "not connected"));
	assert_false(status(&p, NA).async);
	pair_close(&p);
}

/* a wrote without b since generation 1111 (bitmap 1111, current 2222):
 * a is sync source, b sync target; RS_DONE gives b a's generation. */
static void test_handshake_a_newer(void **state)
{
	struct pair p;
	(void)state;

	pair_open(&p);
	set_gens(&p, NA, 0x2222, 0x1111, 0);
	set_gens(&p, NB, 0x1111, 0, 0);
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p, in_sync(&p));
	assert_non_null(strstr(p.n[NA].events, "\"from\":\"off\",\"to\":\"syncsource\""));
	assert_non_null(strstr(p.n[NB].events, "\"from\":\"off\",\"to\":\"synctarget\""));
	assert_null(strstr(p.n[NA].events, "synctarget"));
	assert_int_equal(status(&p, NB).gen_current, 0x2222);
	assert_int_equal(status(&p, NA).gen_bitmap, 0);
	assert_int_equal(sbp(&p, NA)->gen_history[0], 0x1111);
	assert_int_equal(sbp(&p, NB)->gen_history[0], 0x1111);
	assert_int_equal(count_type(a_conn(), REPL_RS_DONE), 1);
	assert_int_equal(p.n[NB].v->disk, VOL_UPTODATE);
	pair_close(&p);
}

/* Two secondaries: a outdated at generation 0x2222 (bitmap 0x1111), b
 * inconsistent at b_gen; connected, a is b's resync source (R13). */
static void outdated_source_pair(struct pair *p, uint64_t b_gen)
{
	pair_open(p);
	vol_set_role(p->n[NA].v, VOL_SECONDARY);
	sbp(p, NA)->flags &= ~TANDEM_MD_F_PRIMARY;
	set_gens(p, NA, 0x2222, 0x1111, 0);
	vol_set_disk(p->n[NA].v, VOL_OUTDATED);
	set_gens(p, NB, b_gen, 0, 0);
	vol_set_disk(p->n[NB].v, VOL_INCONSISTENT);
	pair_repl(p);
	pair_go(p);
}

/* R13: a resync from an outdated copy (two secondaries; a's may lack
 * writes a primary acknowledged alone) leaves the target outdated too, and
 * the source knows it: neither is promoted without --force. */
static void test_resync_from_outdated_source(void **state)
{
	struct pair p;
	(void)state;

	outdated_source_pair(&p, 0x1111);
	WAIT_FOR(&p, connected(&p, RR_ESTABLISHED, RR_ESTABLISHED) && a_conn() &&
			     count_type(a_conn(), REPL_RS_DONE) == 1);
	run_for(&p, 20);
	assert_non_null(strstr(p.n[NB].events, "\"to\":\"synctarget\""));
	assert_int_equal(p.n[NB].v->disk, VOL_OUTDATED);
	assert_int_equal(p.n[NA].v->disk, VOL_OUTDATED);
	assert_int_equal(status(&p, NA).peer_disk, VOL_OUTDATED);
	assert_int_equal(status(&p, NB).gen_current, 0x2222);
	assert_same_data(&p);
	pair_close(&p);
}

/* R13 after a forced promotion: a full resync from an outdated source to a
 * fresh disk leaves both outdated; `primary --force` on the source then
 * makes the target up to date as soon as the source's last marks are
 * cleaned from its disk. The STATE sent at the promotion still counts the
 * marks the resync cleared only in memory (a STATE speaks of the disk's);
 * the cleaner sends another when the last goes. Before, the target stayed
 * outdated beside a mark-free primary of its own generation. */
static void test_forced_source_makes_target_current(void **state)
{
	struct pair p;
	char msg[256];
	(void)state;

	outdated_source_pair(&p, 0); /* a fresh disk: a full sync, every bit marked */
	WAIT_FOR(&p, connected(&p, RR_ESTABLISHED, RR_ESTABLISHED) && a_conn() &&
			     count_type(a_conn(), REPL_RS_DONE) == 1 &&
			     p.n[NB].v->disk == VOL_OUTDATED);
	assert_int_equal(repl_promote(p.n[NA].v->repl, true, msg, sizeof(msg)), 0);
	assert_int_equal(p.n[NA].v->role, VOL_PRIMARY);
	WAIT_FOR(&p, p.n[NB].v->disk == VOL_UPTODATE);
	assert_int_equal(status(&p, NA).gen_current, status(&p, NB).gen_current);
	assert_same_data(&p);
	pair_close(&p);
}

/* R14: "crashed as primary" is settled by the first handshake both sides
 * confirm, and by a promotion. b crashed as primary once and came back as a
 * secondary beside primary a: after they connect, b's STATE no longer
 * claims the crash, or a later handshake of equal generations with marks on
 * both (a crashed while ahead) made b, up to date, the source of the
 * regions a alone had written, over a's acknowledged writes. */
static void test_crash_flag_settled_by_handshake(void **state)
{
	struct pair p;
	char msg[256];
	(void)state;

	pair_open(&p);
	p.n[NB].v->crashed_primary = true;
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p, in_sync(&p) && sbp(&p, NB)->gen_current != 1);
	run_for(&p, 20);
	assert_false(p.n[NB].v->crashed_primary);
	assert_int_equal(p.n[NA].v->role, VOL_PRIMARY);
	/* and a promotion: the node is the primary now, not the one that crashed */
	WAIT_FOR(&p, repl_demote(p.n[NA].v->repl, msg, sizeof(msg)) == 0);
	WAIT_FOR(&p, status(&p, NB).peer_role == VOL_SECONDARY);
	p.n[NB].v->crashed_primary = true;
	assert_int_equal(repl_promote(p.n[NB].v->repl, false, msg, sizeof(msg)), 0);
	assert_false(p.n[NB].v->crashed_primary);
	pair_close(&p);
}

/* b newer, and primary (a demoted, b promoted through the admin calls): a,
 * the dialer, becomes sync target. */
static void test_handshake_b_newer(void **state)
{
	struct pair p;
	char msg[256];
	(void)state;

	pair_open(&p);
	set_gens(&p, NA, 0x1111, 0, 0);
	set_gens(&p, NB, 0x3333, 0x1111, 0);
	pair_repl(&p);
	assert_int_equal(repl_demote(p.n[NA].v->repl, msg, sizeof(msg)), 0);
	assert_int_equal(repl_promote(p.n[NB].v->repl, false, msg, sizeof(msg)), 0);
	assert_int_equal(p.n[NA].v->role, VOL_SECONDARY);
	assert_int_equal(p.n[NB].v->role, VOL_PRIMARY);
	pair_go(&p);
	WAIT_FOR(&p, in_sync(&p));
	assert_non_null(strstr(p.n[NA].events, "\"from\":\"off\",\"to\":\"synctarget\""));
	assert_non_null(strstr(p.n[NB].events, "\"from\":\"off\",\"to\":\"syncsource\""));
	assert_non_null(strstr(p.n[NA].events, "\"to\":\"inconsistent\""));
	assert_int_equal(status(&p, NA).gen_current, 0x3333);
	assert_int_equal(p.n[NA].v->disk, VOL_UPTODATE);
	assert_int_equal(status(&p, NA).peer_role, 1);
	pair_close(&p);
}

static bool refused(const struct pair *p)
{
	return status(p, NA).error[0] && status(p, NB).error[0];
}

static void assert_refused(struct pair *p, const char *why, bool split)
{
	for (unsigned i = 0; i < 2; i++) {
		struct repl_status st = status(p, i);
		assert_true(unit_contains(st.error, why));
		assert_int_equal(st.split_brain, split);
		assert_int_not_equal(st.conn, RC_CONNECTED);
		assert_int_equal(st.rep, RR_OFF);
		assert_non_null(strstr(p->n[i].events, "\"event\":\"refused\""));
	}
	/* nothing was copied either way */
	for (unsigned i = 0; i < stub_nconns(); i++) {
		const struct stub_conn *s = stub_conn_at(i);
		assert_int_equal(count_type(s, REPL_RS_DATA) + count_type(s, REPL_RS_ZERO) +
					 count_type(s, REPL_WRITE),
				 0);
		assert_true(count_type(s, REPL_ERROR) <= 1);
	}
}

/* Both wrote since 1111 (same bitmap, different currents): refused on both
 * sides as split brain, no block touched, disks as they were. */
static void test_handshake_split_brain(void **state)
{
	struct pair p;
	(void)state;

	pair_open(&p);
	set_gens(&p, NA, 0x2222, 0x1111, 0);
	set_gens(&p, NB, 0x3333, 0x1111, 0);
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p, refused(&p) && status(&p, NA).split_brain && status(&p, NB).split_brain);
	assert_refused(&p, "split brain", true);
	assert_int_equal(p.n[NA].v->disk, VOL_UPTODATE);
	assert_int_equal(p.n[NB].v->disk, VOL_UPTODATE);
	assert_int_equal(status(&p, NA).gen_current, 0x2222);
	assert_int_equal(status(&p, NB).gen_current, 0x3333);
	pair_close(&p);
}

/* No common history: refused as unrelated data (not split brain). */
static void test_handshake_unrelated(void **state)
{
	struct pair p;
	(void)state;

	pair_open(&p);
	set_gens(&p, NA, 0x2222, 0, 0x4444);
	set_gens(&p, NB, 0x3333, 0, 0x5555);
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p, refused(&p));
	assert_refused(&p, "unrelated data", false);
	pair_close(&p);
}

/* Both primary: refused as split brain before generations are compared. */
static void test_handshake_both_primary(void **state)
{
	struct pair p;
	char msg[256];
	(void)state;

	pair_open(&p);
	set_gens(&p, NA, 0x2222, 0, 0);
	set_gens(&p, NB, 0x2222, 0, 0);
	pair_repl(&p);
	assert_int_equal(repl_promote(p.n[NB].v->repl, false, msg, sizeof(msg)), 0);
	pair_go(&p);
	WAIT_FOR(&p, refused(&p));
	assert_refused(&p, "both nodes are primary", true);
	pair_close(&p);
}

/* R8: a fresh peer (no data, generation 0, inconsistent) joining a node
 * whose disk holds data no bitmap knows of gets a full sync: every byte. */
static void test_handshake_fresh_peer_full_sync(void **state)
{
	struct pair p;
	struct repl_status a;
	uint8_t *pat = aligned_alloc(4096, 64 * KIB);
	struct eng_read w;
	(void)state;

	assert_non_null(pat);
	pair_open(&p);
	/* a's disk has content of its own, written below the volume */
	for (unsigned k = 0; k < 64 * KIB; k++)
		pat[k] = (uint8_t)(k * 7 + 3);
	memset(&w, 0, sizeof(w));
	w.io.type = BS_WRITE;
	w.io.off = 1024 * KIB;
	w.io.len = 64 * KIB;
	w.io.buf = pat;
	w.io.cb = eng_read_cb;
	bs_submit(p.n[NA].v->bs, &w.io);
	while (!w.done)
		assert_int_equal(ev_run_once(p.ev, 10 * ENG_MS), 0);
	assert_int_equal(w.res, 0);
	set_gens(&p, NA, 0x6666, 0, 0);
	set_gens(&p, NB, 0, 0, 0);
	vol_set_disk(p.n[NB].v, VOL_INCONSISTENT);
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p, in_sync(&p));
	assert_non_null(strstr(p.n[NA].events, "\"to\":\"syncsource\""));
	assert_non_null(strstr(p.n[NB].events, "\"to\":\"synctarget\""));
	a = status(&p, NA);
	/* the data as data, everything else as zero extents: the whole volume */
	assert_true(a.resync_sent_bytes >= 64 * KIB);
	assert_int_equal(a.resync_sent_bytes + a.resync_zero_bytes, VOL_SIZE);
	assert_int_equal(status(&p, NB).gen_current, 0x6666);
	assert_same_data(&p);
	free(pat);
	pair_close(&p);
}

/* ---- the write path ---- */

static void connect_empty_pair_cfg(struct pair *p, const char *extra)
{
	pair_open_cfg(p, extra);
	pair_repl(p);
	pair_go(p);
	WAIT_FOR(p, in_sync(p) && sbp(p, NB)->gen_current != 1);
}

static void connect_empty_pair(struct pair *p)
{
	pair_open(p);
	pair_repl(p);
	pair_go(p);
	WAIT_FOR(p, in_sync(p) && sbp(p, NB)->gen_current != 1);
}

/* ---- rules on time, on the virtual clock ---- */

/* A pair on the virtual clock (pair_virtual), connected and in sync; with
 * witness_lines (pair_open_cfg2) also both witness sessions up and a's
 * lease held. */
static void virtual_pair(struct pair *p, const char *witness_lines)
{
	pair_open_cfg2(p, witness_lines, "");
	pair_virtual(p);
	pair_repl(p);
	pair_go(p);
	WAIT_FOR(p, in_sync(p) && sbp(p, NB)->gen_current != 1 &&
			    (!witness_lines ||
			     (status(p, NA).witness_session && status(p, NB).witness_session &&
			      vol_lease_ok(p->n[NA].v))));
}

#define PEER_TIMEOUT_NS (10000ull * ENG_MS) /* the pair's peer-timeout */

/* peer-timeout: a connected peer silent for exactly peer-timeout (at the
 * tick that sees it) is still connected; one tick later the connection
 * fails, and its writes are marked out of sync. The silence starts at the
 * tick that last saw bytes come in (peer_silent_ns). */
static void test_vclock_peer_timeout(void **state)
{
	struct pair p;
	uint64_t last;
	(void)state;

	virtual_pair(&p, NULL);
	stub_hold_rx(a_conn(), true); /* a hears nothing more from b */
	advance_to(&p, p.vnow + 2 * REPL_TICK_NS);
	assert_true(status(&p, NA).peer_silent_ns >= REPL_TICK_NS);
	last = p.vnow - status(&p, NA).peer_silent_ns;
	advance_to(&p, last + PEER_TIMEOUT_NS);
	assert_int_equal(status(&p, NA).conn, RC_CONNECTED);
	assert_int_equal(status(&p, NA).peer_silent_ns, PEER_TIMEOUT_NS);
	advance_to(&p, last + PEER_TIMEOUT_NS + REPL_TICK_NS);
	assert_int_not_equal(status(&p, NA).conn, RC_CONNECTED);
	assert_non_null(strstr(status(&p, NA).error, "did not answer for 10.0 s"));
	pair_close(&p);
}

#define MAX_LAG_NS (10000ull * ENG_MS) /* async-max-lag in the next test */

/* async-max-lag (A6): a write waits once the oldest write the peer lacks is
 * 9/10 of the bound old (the tenth is the margin for writes already let in).
 * 1 ns before that a write goes; at that moment the next one waits, until
 * the stream drains. */
static void test_vclock_async_max_lag(void **state)
{
	struct pair p;
	struct wio w0, w1, w2;
	char msg[256];
	uint64_t t0;
	(void)state;

	virtual_pair(&p, NULL);
	assert_int_equal(repl_set(p.n[NA].v->repl, "replication", "async", msg, sizeof(msg)), 0);
	assert_int_equal(repl_set(p.n[NA].v->repl, "async-max-lag", "10", msg, sizeof(msg)), 0);
	WAIT_FOR(&p, status(&p, NB).async);
	stub_plug(a_conn(), true); /* nothing reaches b: the lag grows */
	t0 = p.vnow;
	submit_write(&p, NA, &w0, 0, 4 * KIB, 0x10);
	SETTLE_UNTIL(&p, w0.done);
	advance_to(&p, t0 + MAX_LAG_NS * 9 / 10 - 1);
	submit_write(&p, NA, &w1, 64 * KIB, 4 * KIB, 0x11);
	SETTLE_UNTIL(&p, w1.done);
	advance_to(&p, t0 + MAX_LAG_NS * 9 / 10);
	submit_write(&p, NA, &w2, 128 * KIB, 4 * KIB, 0x12);
	for (unsigned k = 0; k < 20; k++) /* 20 ms of real time: its disk write would be done */
		assert_int_equal(ev_run_once(p.ev, ENG_MS), 0);
	assert_false(w2.done);
	assert_true(status(&p, NA).blocked || status(&p, NA).lag_seconds >= 9.0);
	stub_plug(a_conn(), false);
	WAIT_FOR(&p, w2.done && in_sync(&p) && status(&p, NA).backlog_bytes == 0);
	assert_int_equal(w2.res, 0);
	assert_same_data(&p);
	free(w0.buf);
	free(w1.buf);
	free(w2.buf);
	pair_close(&p);
}

/* The witness stops: its listener closes and its sessions end (the nodes'
 * dials are refused from then on). */
static void pair_witness_down(struct pair *p)
{
	wit_server_shutdown(p->ws);
	p->witness_down = true;
}

/* The link between a and b is cut: both ends reset, new dials of either
 * replication address refused. */
static void pair_cut_ab(struct pair *p)
{
	struct stub_conn *s = a_conn();

	stub_refuse(p->addr_b, true);
	stub_refuse(ADDR_A, true);
	if (s && s->peer)
		stub_break(s->peer, -ECONNRESET);
	if (s)
		stub_break(s, -ECONNRESET);
}

static void note_quorum_lost(struct pair *p, unsigned node, const char *json)
{
	if (node == NA && strstr(json, "\"event\":\"quorum\"") && strstr(json, "\"to\":\"false\""))
		p->quorum_lost_ns = p->vnow;
}

#define QUORUM_TIMEOUT_NS (5000ull * ENG_MS) /* the next test's quorum-timeout */

/* quorum-timeout (Q1): a primary with neither its peer nor its witness keeps
 * the role for quorum-timeout from the tick that saw quorum go, and steps
 * down at the tick that reaches it: primary 1 ns before, secondary then. */
static void test_vclock_quorum_timeout(void **state)
{
	struct pair p;
	uint64_t t;
	(void)state;

	virtual_pair(&p, "witness-timeout = 2\nquorum-timeout = 5\n");
	WAIT_FOR(&p, status(&p, NA).quorum == 1);
	pair_witness_down(&p);
	WAIT_FOR(&p, !status(&p, NA).witness_session);
	assert_int_equal(status(&p, NA).quorum, 1); /* through b */
	p.on_event = note_quorum_lost;
	pair_cut_ab(&p);
	WAIT_FOR(&p, p.quorum_lost_ns);
	t = p.quorum_lost_ns;
	assert_int_equal(p.n[NA].v->role, VOL_PRIMARY);
	advance_to(&p, t + QUORUM_TIMEOUT_NS - 1);
	assert_int_equal(p.n[NA].v->role, VOL_PRIMARY);
	advance_to(&p, t + QUORUM_TIMEOUT_NS);
	assert_int_equal(p.n[NA].v->role, VOL_SECONDARY);
	p.on_event = NULL;
	pair_close(&p);
}

#define LEASE_NS (1500ull * ENG_MS) /* L1: 3/4 of min(peer-timeout 10 s, witness-timeout 2 s) */

/* A pair with a witness, in sync, a primary with its lease; then the
 * witness goes, so that only b renews a's lease. */
static void lease_pair(struct pair *p)
{
	virtual_pair(p, "witness-timeout = 2\nquorum-timeout = 30\n");
	pair_witness_down(p);
	WAIT_FOR(p, !status(p, NA).witness_session);
}

/* L1, L2 renewal: a primary whose peer answers keeps its lease without a
 * gap, whatever the ratio of peer-timeout to witness-timeout: here the
 * lease (1.5 s) is far shorter than peer-timeout/4 (2.5 s), the keepalive's
 * period before; the PINGs now come at most a third of a lease apart. */
static void test_vclock_lease_renewed(void **state)
{
	struct pair p;
	uint64_t t0;
	(void)state;

	lease_pair(&p);
	t0 = p.vnow;
	while (p.vnow < t0 + 3 * PEER_TIMEOUT_NS) {
		pass(&p);
		if (!vol_lease_ok(p.n[NA].v))
			fail_msg("a lost its lease %.3f s after the witness went, b connected",
				 (double)(p.vnow - t0) / 1e9);
	}
	assert_int_equal(status(&p, NA).conn, RC_CONNECTED);
	pair_close(&p);
}

/* L1, L2 expiry: the lease runs lease-time from when the answered PING was
 * sent. a sends a PING at P and b's PONG comes back; then nothing more
 * reaches a. The lease holds 1 ns before P + 3/4 of the shorter timeout and
 * is gone at it. */
static void test_vclock_lease_expires(void **state)
{
	struct pair p;
	unsigned pings;
	uint64_t sent;
	(void)state;

	lease_pair(&p);
	pings = count_type(a_conn(), REPL_PING);
	while (count_type(a_conn(), REPL_PING) == pings)
		advance_to(&p, MIN(ev_next_deadline(p.ev), p.vnow + REPL_TICK_NS));
	sent = p.vnow; /* the PING went out at this step */
	SETTLE_UNTIL(&p, status(&p, NA).link_rtt_ms >= 0 && vol_lease_ok(p.n[NA].v));
	settle(&p); /* b's PONG is in */
	stub_hold_rx(a_conn(), true);
	advance_to(&p, sent + LEASE_NS - 1);
	assert_true(vol_lease_ok(p.n[NA].v));
	advance_to(&p, sent + LEASE_NS);
	assert_false(vol_lease_ok(p.n[NA].v));
	pair_close(&p);
}

#define WITNESS_TIMEOUT_NS (2000ull * ENG_MS)

/* The witness's start-up grace (W3.3): a witness that starts again grants
 * nothing for witness-timeout, longer than any lease it gave before (its
 * state does not say when the primary's session was last heard). a is
 * primary; the witness restarts, a never reaches it again, and b, cut off
 * from a (whose address refuses: its daemon is gone), claims at once. The
 * claim waits: b is secondary 1 ns before witness-timeout after the start,
 * primary at it. */
static void test_vclock_witness_grace(void **state)
{
	struct pair p;
	const struct cfg *cfgs[1];
	bool init[1] = { false };
	char err[256];
	uint64_t start;
	(void)state;

	virtual_pair(&p, "witness-timeout = 2\nquorum-timeout = 30\n");
	WAIT_FOR(&p, !strcmp(status(&p, NA).witness_primary, "a"));
	wit_client_shutdown(p.wc[NA]); /* a never reaches the witness again */
	p.wc_down[NA] = true;
	wit_server_shutdown(p.ws);
	LOOP_UNTIL(&p, !status(&p, NB).witness_session, step(&p, ENG_MS));
	wit_server_free(p.ws);
	cfgs[0] = p.cfg;
	if (wit_server_new(p.ev, cfgs, init, 1, &p.ws, err, sizeof(err)))
		fail_msg("wit_server_new: %s", err);
	start = p.vnow;
	pair_cut_ab(&p);
	WAIT_FOR(&p, status(&p, NB).witness_session);
	advance_to(&p, start + WITNESS_TIMEOUT_NS - 1);
	assert_int_equal(p.n[NB].v->role, VOL_SECONDARY);
	advance_to(&p, start + WITNESS_TIMEOUT_NS);
	assert_int_equal(p.n[NB].v->role, VOL_PRIMARY);
	pair_close(&p);
}

static void note_handover(struct pair *p, unsigned node, const char *json)
{
	if (node == NA && strstr(json, "\"event\":\"handover\"") && p->handovers < 4)
		p->handover_ns[p->handovers++] = p->vnow;
}

#define SWITCH_MAX_NS (30000ull * ENG_MS) /* a switchover's bound (SW_MAX_NS) */
#define HANDOVER_RETRY_NS (5000ull * ENG_MS)

/* on-disk-failure = handover, and the handover fails: a's disk fails, a
 * hands the primary role to b, but b cannot be made primary (its witness is
 * gone). The attempt gives up a switchover's 30 s after it began, and the
 * next one starts 5 s after that: not 1 ns sooner, and at that tick. */
static void test_vclock_handover_retry(void **state)
{
	struct pair p;
	struct wio w;
	char msg[256];
	uint64_t again;
	(void)state;

	virtual_pair(&p, "witness-timeout = 2\nquorum-timeout = 300\non-disk-failure = handover\n");
	pair_witness_down(&p);
	WAIT_FOR(&p, !status(&p, NA).witness_session && !status(&p, NB).witness_session);
	p.on_event = note_handover;
	assert_int_equal(vol_inject(p.n[NA].v, "write", 0, EIO, false, msg, sizeof(msg)), 0);
	submit_write(&p, NA, &w, 0, 64 * KIB, 0x21);
	WAIT_FOR(&p, p.handovers == 1);
	again = p.handover_ns[0] + SWITCH_MAX_NS + HANDOVER_RETRY_NS;
	advance_to(&p, again - 1);
	assert_int_equal(p.handovers, 1);
	advance_to(&p, again);
	assert_int_equal(p.handovers, 2);
	p.on_event = NULL;
	free(w.buf);
	pair_close(&p);
}

/* R3 and R5: two overlapping writes on the primary. The second waits until
 * the first completed on both nodes; b receives and applies them in that
 * order; both volumes end with the second's bytes where they overlap. */
static void test_overlapping_writes_in_order(void **state)
{
	struct pair p;
	struct wio w1, w2;
	struct rec_bs *rb;
	struct wmsg m[256];
	unsigned n, first = 0, second = 0;
	int s1, c1, s2;
	(void)state;

	connect_empty_pair(&p);
	rb = rec_wrap(p.n[NB].v);
	rb->hold = true; /* b's disk stalls: W1 stays in flight there */
	submit_write(&p, NA, &w1, 0, 8 * KIB, 0xa1);
	submit_write(&p, NA, &w2, 4 * KIB, 8 * KIB, 0xb2);
	WAIT_FOR(&p, rec_find(rb, 0, 'S', BS_WRITE, 0) >= 0);
	run_for(&p, 50);
	assert_int_equal(count_type(a_conn(), REPL_WRITE), 1); /* W2 not sent: R3 */
	assert_int_equal(w1.done + w2.done, 0);
	assert_int_equal(rec_find(rb, 0, 'S', BS_WRITE, 4 * KIB), -1);
	rec_release(rb);
	WAIT_FOR(&p, w1.done && w2.done);
	assert_int_equal(w1.res, 0);
	assert_int_equal(w2.res, 0);
	assert_int_equal(w1.order, 1);
	assert_int_equal(w2.order, 2);
	/* on the wire: W1, then W2 */
	n = wire(a_conn(), m, 256);
	for (unsigned i = 0; i < n; i++) {
		if (m[i].type == REPL_WRITE && m[i].off == 0)
			first = i + 1;
		if (m[i].type == REPL_WRITE && m[i].off == 4 * KIB)
			second = i + 1;
	}
	assert_true(first && second && first < second);
	/* on b's disk: W1 issued and completed before W2 was issued */
	s1 = rec_find(rb, 0, 'S', BS_WRITE, 0);
	c1 = rec_find(rb, 0, 'C', BS_WRITE, 0);
	s2 = rec_find(rb, 0, 'S', BS_WRITE, 4 * KIB);
	assert_true(s1 >= 0 && c1 > s1 && s2 > c1);
	assert_int_equal(rb->ops[s1].first, 0xa1);
	assert_int_equal(rb->ops[s2].first, 0xb2);
	for (unsigned i = 0; i < 2; i++) {
		assert_bytes(&p, i, 0, 4 * KIB, 0xa1);
		assert_bytes(&p, i, 4 * KIB, 8 * KIB, 0xb2);
	}
	assert_same_data(&p);
	free(w1.buf);
	free(w2.buf);
	pair_close(&p);
}

/* Plugs a's link as soon as a becomes sync source: its resync data then
 * waits in the background queue, as behind a full socket. */
static void plug_on_syncsource(struct pair *p, unsigned node, const char *json)
{
	(void)p;
	if (node == NA && strstr(json, "\"event\":\"replication\"") &&
	    strstr(json, "\"to\":\"syncsource\""))
		stub_plug(a_conn(), true);
}

/* R4: a foreground write to a block whose resync data is already queued
 * goes after that data on the wire (not before it, as foreground output
 * otherwise overtakes background output); b ends with the write's bytes. */
static void test_write_overtakes_queued_resync(void **state)
{
	struct pair p;
	struct wio w0, w;
	struct wmsg m[512];
	struct rec_bs *rb;
	unsigned n;
	int rs_at = -1, wr_at = -1;
	int s_rs, s_wr;
	(void)state;

	pair_open(&p);
	pair_repl(&p);
	/* a writes 16 KiB at 64 KiB while alone: a new generation, bits set */
	submit_write(&p, NA, &w0, 64 * KIB, 16 * KIB, 0x11);
	WAIT_FOR(&p, w0.done);
	assert_int_equal(w0.res, 0);
	assert_true(status(&p, NA).out_of_sync_bytes >= 16 * KIB);
	rb = rec_wrap(p.n[NB].v);
	p.on_event = plug_on_syncsource;
	pair_go(&p);
	WAIT_FOR(&p, a_conn() && a_conn()->plugged && stub_queued(a_conn(), true) > 0);
	/* the write comes while the resync data of its block waits */
	submit_write(&p, NA, &w, 64 * KIB, 4 * KIB, 0x22);
	run_for(&p, 20);
	p.on_event = NULL;
	stub_plug(a_conn(), false);
	WAIT_FOR(&p, w.done && in_sync(&p));
	assert_int_equal(w.res, 0);
	n = wire(a_conn(), m, 512);
	for (unsigned i = 0; i < n; i++) {
		if (m[i].type == REPL_RS_DATA && m[i].off <= 64 * KIB &&
		    m[i].off + m[i].len > 64 * KIB && rs_at < 0)
			rs_at = (int)i;
		if (m[i].type == REPL_WRITE && m[i].off == 64 * KIB)
			wr_at = (int)i;
	}
	assert_true(rs_at >= 0);
	assert_true(wr_at >= 0);
	assert_true(rs_at < wr_at);
	assert_int_equal(m[rs_at].data[0], 0x11);
	/* b applied the resync data first, then the write */
	s_rs = rec_find(rb, 0, 'S', BS_WRITE, m[rs_at].off);
	s_wr = rec_find(rb, (unsigned)s_rs + 1, 'S', BS_WRITE, 64 * KIB);
	assert_true(s_rs >= 0 && s_wr > s_rs);
	assert_int_equal(rb->ops[s_wr].first, 0x22);
	assert_bytes(&p, NB, 64 * KIB, 4 * KIB, 0x22);
	assert_bytes(&p, NB, 68 * KIB, 12 * KIB, 0x11);
	assert_same_data(&p);
	free(w0.buf);
	free(w.buf);
	pair_close(&p);
}

/* Stalls a's store as soon as a becomes sync source: its resync reads are
 * then in flight when the foreground write comes. */
static void hold_on_syncsource(struct pair *p, unsigned node, const char *json)
{
	if (node == NA && strstr(json, "\"event\":\"replication\"") &&
	    strstr(json, "\"to\":\"syncsource\""))
		p->hold_a->hold = true;
}

/* R4, the other half: a resync read that a foreground write overlaps while
 * it is still reading is discarded, never sent: no resync data with the
 * old bytes of that block goes out; b ends with the write's bytes. */
static void test_write_discards_resync_read(void **state)
{
	struct pair p;
	struct wio w0, w;
	struct wmsg m[512];
	unsigned n;
	int wr_at = -1;
	(void)state;

	pair_open(&p);
	pair_repl(&p);
	submit_write(&p, NA, &w0, 64 * KIB, 16 * KIB, 0x11);
	WAIT_FOR(&p, w0.done);
	p.hold_a = rec_wrap(p.n[NA].v);
	p.on_event = hold_on_syncsource;
	pair_go(&p);
	WAIT_FOR(&p, rec_find(p.hold_a, 0, 'S', BS_READ, UINT64_MAX) >= 0);
	p.on_event = NULL;
	assert_int_equal(rec_find(p.hold_a, 0, 'C', BS_READ, UINT64_MAX), -1);
	submit_write(&p, NA, &w, 64 * KIB, 4 * KIB, 0x22);
	WAIT_FOR(&p, count_type(a_conn(), REPL_WRITE) == 1);
	rec_release(p.hold_a);
	WAIT_FOR(&p, w.done && in_sync(&p));
	assert_int_equal(w.res, 0);
	n = wire(a_conn(), m, 512);
	for (unsigned i = 0; i < n; i++) {
		if (m[i].type == REPL_WRITE && m[i].off == 64 * KIB)
			wr_at = (int)i;
		if (m[i].type == REPL_RS_DATA && m[i].off <= 64 * KIB &&
		    m[i].off + m[i].len > 64 * KIB) {
			/* only a read made after the write may be sent */
			assert_true(wr_at >= 0);
			assert_int_equal(m[i].data[64 * KIB - m[i].off], 0x22);
		}
	}
	assert_true(wr_at >= 0);
	assert_bytes(&p, NB, 64 * KIB, 4 * KIB, 0x22);
	assert_bytes(&p, NB, 68 * KIB, 12 * KIB, 0x11);
	assert_same_data(&p);
	free(w0.buf);
	free(w.buf);
	pair_close(&p);
}

/* R1, R7: the link dies with writes sent and not acknowledged. They
 * complete (on a's result), their regions are out of sync and a starts a
 * new generation; the reconnect resyncs them to b. */
static void test_peer_loss_writes_in_flight(void **state)
{
	struct pair p;
	struct wio w1, w2;
	struct stub_conn *old;
	struct repl_status a;
	uint64_t gen;
	(void)state;

	connect_empty_pair(&p);
	gen = status(&p, NA).gen_current;
	old = a_conn();
	stub_hold_rx(old->peer, true); /* b receives nothing more */
	submit_write(&p, NA, &w1, 0, 8 * KIB, 0x31);
	submit_write(&p, NA, &w2, 1024 * KIB, 8 * KIB, 0x32);
	WAIT_FOR(&p, count_type(old, REPL_WRITE) == 2);
	run_for(&p, 30);
	assert_int_equal(w1.done + w2.done, 0); /* waiting for b (R1) */
	stub_break(old, -ECONNRESET);
	WAIT_FOR(&p, w1.done && w2.done);
	assert_int_equal(w1.res, 0);
	assert_int_equal(w2.res, 0);
	a = status(&p, NA);
	assert_int_not_equal(a.conn, RC_CONNECTED);
	assert_int_equal(a.rep, RR_OFF);
	assert_true(a.out_of_sync_bytes >= 16 * KIB);
	assert_int_equal(a.gen_bitmap, gen); /* gen_branch (R7) */
	assert_int_not_equal(a.gen_current, gen);
	WAIT_FOR(&p, p.n[NB].v->disk == VOL_OUTDATED || a_conn() != old);
	/* a redials; the marked regions are copied */
	WAIT_FOR(&p, a_conn() != old && in_sync(&p));
	assert_true(count_type(a_conn(), REPL_RS_DATA) >= 2);
	assert_int_equal(status(&p, NA).out_of_sync_bytes, 0);
	assert_int_equal(status(&p, NB).out_of_sync_bytes, 0);
	assert_int_equal(status(&p, NB).gen_current, status(&p, NA).gen_current);
	assert_bytes(&p, NB, 0, 8 * KIB, 0x31);
	assert_bytes(&p, NB, 1024 * KIB, 8 * KIB, 0x32);
	assert_same_data(&p);
	free(w1.buf);
	free(w2.buf);
	pair_close(&p);
}

/* ---- compression (REPL_FEAT_COMPRESS, src/repl/repl_pack.c) ---- */

/* A write of len bytes no codec shrinks (xorshift64*, seeded). */
static void submit_noise(struct pair *p, unsigned i, struct wio *w, uint64_t off, uint64_t len,
			 uint64_t seed)
{
	uint64_t x = seed | 1;

	memset(w, 0, sizeof(*w));
	w->p = p;
	w->buf = aligned_alloc(4096, len);
	assert_non_null(w->buf);
	for (uint64_t k = 0; k < len; k++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		w->buf[k] = (uint8_t)((x * 0x2545f4914f6cdd1dull) >> 56);
	}
	w->io.type = BS_WRITE;
	w->io.off = off;
	w->io.len = len;
	w->io.buf = w->buf;
	w->io.cb = wio_cb;
	vol_submit(p->n[i].v, &w->io);
}

/* compression = lz4: a write that compresses crosses the link as LZ4, in
 * fewer bytes; one that does not goes as is; b applies both; status counts
 * what went which way, on both sides. */
static void test_compressed_writes(void **state)
{
	struct pair p;
	struct wio w1, w2;
	static struct wmsg m[256];
	struct repl_status a, b;
	unsigned n, packed = 0, raw = 0;
	(void)state;

	connect_empty_pair_cfg(&p, "compression = lz4\n");
	submit_write(&p, NA, &w1, 0, 64 * KIB, 0x5a);
	submit_noise(&p, NA, &w2, 256 * KIB, 16 * KIB, 2);
	WAIT_FOR(&p, w1.done && w2.done);
	assert_int_equal(w1.res, 0);
	assert_int_equal(w2.res, 0);
	n = wire(a_conn(), m, 256);
	for (unsigned i = 0; i < n; i++) {
		if (m[i].type != REPL_WRITE)
			continue;
		if (m[i].off == 0) {
			assert_int_equal(m[i].flags, REPL_HF_LZ4);
			assert_int_equal(m[i].len, 64 * KIB);
			assert_true(m[i].data_len < 8 * KIB);
			packed++;
		} else {
			assert_int_equal(m[i].flags, 0);
			assert_int_equal(m[i].data_len, 16 * KIB);
			raw++;
		}
	}
	assert_int_equal(packed, 1);
	assert_int_equal(raw, 1);
	a = status(&p, NA);
	b = status(&p, NB);
	assert_string_equal(a.link_compression, "lz4");
	assert_int_equal(a.link_compressed_in_bytes, 64 * KIB);
	assert_true(a.link_compressed_out_bytes > 0 && a.link_compressed_out_bytes < 8 * KIB);
	assert_int_equal(a.link_compress_skipped_bytes, 16 * KIB);
	assert_int_equal(a.link_data_bytes, 80 * KIB);
	assert_true(a.link_compress_cpu_ms >= 0);
	assert_int_equal(b.link_decompressed_bytes, 64 * KIB);
	assert_int_equal(a.link_decompressed_bytes, 0);
	assert_int_equal(b.link_compressed_in_bytes + b.link_compress_skipped_bytes, 0);
	assert_bytes(&p, NB, 0, 64 * KIB, 0x5a);
	assert_same_data(&p);
	free(w1.buf);
	free(w2.buf);
	pair_close(&p);
}

/* compression = zstd: a fresh peer's full sync sends its RS_DATA as zstd
 * frames; b ends with a's data. */
static void test_compressed_resync(void **state)
{
	struct pair p;
	struct repl_status a;
	uint8_t *pat = aligned_alloc(4096, 64 * KIB);
	static struct wmsg m[1024];
	struct eng_read w;
	unsigned n, rs = 0;
	(void)state;

	assert_non_null(pat);
	pair_open_cfg(&p, "compression = zstd\n");
	for (unsigned k = 0; k < 64 * KIB; k++)
		pat[k] = (uint8_t)(k * 7 + 3);
	memset(&w, 0, sizeof(w));
	w.io.type = BS_WRITE;
	w.io.off = 1024 * KIB;
	w.io.len = 64 * KIB;
	w.io.buf = pat;
	w.io.cb = eng_read_cb;
	bs_submit(p.n[NA].v->bs, &w.io);
	while (!w.done)
		assert_int_equal(ev_run_once(p.ev, 10 * ENG_MS), 0);
	assert_int_equal(w.res, 0);
	set_gens(&p, NA, 0x6666, 0, 0);
	set_gens(&p, NB, 0, 0, 0);
	vol_set_disk(p.n[NB].v, VOL_INCONSISTENT);
	pair_repl(&p);
	pair_go(&p);
	WAIT_FOR(&p, in_sync(&p));
	n = wire(a_conn(), m, 1024);
	for (unsigned i = 0; i < n; i++)
		if (m[i].type == REPL_RS_DATA) {
			assert_int_equal(m[i].flags, REPL_HF_ZSTD);
			assert_true(m[i].data_len < m[i].len / 8);
			rs++;
		}
	assert_true(rs >= 1);
	a = status(&p, NA);
	assert_true(a.link_compressed_in_bytes >= 64 * KIB);
	assert_int_equal(a.link_compressed_in_bytes, a.resync_sent_bytes);
	assert_int_equal(status(&p, NB).link_decompressed_bytes, a.link_compressed_in_bytes);
	assert_same_data(&p);
	free(pat);
	pair_close(&p);
}

/* A compressed payload that is not what its message says ends the
 * connection on b with the reason (b does not compress itself: it takes
 * compressed data all the same); the pair reconnects and ends in sync. */
static void test_compressed_garbage(void **state)
{
	struct pair p;
	uint8_t msg[sizeof(struct repl_hdr) + sizeof(struct repl_io) + 4096];
	uint8_t data[4096];
	struct repl_io io = { .seq = 1000000, .off = 0, .len = 4096 };
	struct pack *pk;
	size_t h = repl_enc_io(msg, REPL_WRITE, &io), z;
	(void)state;

	assert_int_equal(pack_new(&pk), 0);
	connect_empty_pair(&p);
	for (int round = 0; round < 2; round++) {
		struct stub_conn *old = a_conn();
		if (round == 0) { /* not LZ4 at all */
			z = 100;
			memset(msg + h, 0xff, z);
			repl_enc_packed(msg, REPL_HF_LZ4, (uint32_t)z);
		} else { /* a valid frame of 2048 bytes, said to be 4096 */
			memset(data, 0x77, sizeof(data));
			z = pack_compress(pk, REPL_HF_ZSTD, data, 2048, msg + h);
			assert_true(z > 0);
			repl_enc_packed(msg, REPL_HF_ZSTD, (uint32_t)z);
		}
		stub_push(old->peer, msg, h + z);
		WAIT_FOR(&p, strstr(status(&p, NB).error, "does not decompress"));
		assert_non_null(
			strstr(status(&p, NB).error, round ? "zstd payload" : "lz4 payload"));
		WAIT_FOR(&p, a_conn() != old && in_sync(&p));
	}
	assert_same_data(&p);
	pack_free(pk);
	pair_close(&p);
}

/* A peer that sends compressed data although this node's handshake did not
 * offer it: b reads a's first HELLO without the COMPRESS bit (as from a
 * build that does not know it), a compresses all the same; b ends the
 * connection with the reason, and the next connection brings the pair back
 * in sync. */
static void test_compressed_without_feature(void **state)
{
	struct pair p;
	struct stub_conn *s = NULL;
	struct wio w;
	uint64_t t0 = now_ns();
	(void)state;

	pair_open_cfg(&p, "compression = lz4\n");
	pair_repl(&p);
	pair_go(&p);
	while (!(s = a_conn()) || !s->peer) {
		assert_true(now_ns() - t0 < WAIT_MS * ENG_MS);
		pass(&p);
	}
	/* (wired in this pass: nothing delivered to b yet) */
	assert_int_equal(s->peer->in_off, 0);
	stub_hold_rx(s->peer, true);
	while (s->peer->in_len < sizeof(struct repl_hdr) + sizeof(struct repl_hello)) {
		assert_true(now_ns() - t0 < WAIT_MS * ENG_MS);
		pass(&p);
	}
	assert_int_equal(s->peer->in_off, 0);
	assert_int_equal(s->peer->in[4], REPL_HELLO);
	s->peer->in[sizeof(struct repl_hdr) + offsetof(struct repl_hello, features)] &=
		(uint8_t)~REPL_FEAT_COMPRESS;
	stub_hold_rx(s->peer, false);
	WAIT_FOR(&p, in_sync(&p) && sbp(&p, NB)->gen_current != 1);
	assert_string_equal(status(&p, NA).link_compression, "lz4");
	assert_string_equal(status(&p, NB).link_compression, "none");
	submit_write(&p, NA, &w, 0, 64 * KIB, 0x3c);
	WAIT_FOR(&p, strstr(status(&p, NB).error, "did not negotiate compression"));
	WAIT_FOR(&p, w.done);
	assert_int_equal(w.res, 0); /* a goes on alone: the region is marked */
	WAIT_FOR(&p, a_conn() != s && in_sync(&p));
	assert_bytes(&p, NB, 0, 64 * KIB, 0x3c);
	assert_same_data(&p);
	free(w.buf);
	pair_close(&p);
}

/* An admin call that must fail with err and a message (in msg) that says
 * words. */
#define REFUSED(call, err, words)                                 \
	do {                                                      \
		msg[0] = 0;                                       \
		assert_int_equal((call), (err));                  \
		if (!strstr(msg, (words)))                        \
			fail_msg("%s: message '%s'", #call, msg); \
	} while (0)

/* A peer that breaks the protocol: each message below, pushed into one
 * side's connection as if from the other, ends that connection with the
 * reason in status (never a crash, never data taken), and the next
 * connection brings the pair back in sync. */
static void test_protocol_violations(void **state)
{
	static const struct {
		unsigned to; /* the node that receives it */
		uint16_t type;
		uint64_t off;
		uint32_t len, body;
		const char *why;
	} cases[] = {
		{ NB, REPL_RS_DATA, 0, 4096, 4096, "resync data while not sync target" },
		{ NB, REPL_WRITE, 1ull << 40, 4096, 4096, "outside the volume or misaligned" },
		{ NB, REPL_WRITE, 100, 4096, 4096, "malformed message of type 10" },
		{ NB, REPL_BITMAP_END, 0, 0, 0, "unexpected message of type 5" },
		{ NB, REPL_SET_GEN, 0, 0, 0, "unexpected new generation" },
		{ NB, REPL_RDATA, 0, 4096, 4096, "read data for no read" },
		{ NA, REPL_WRITE, 0, 4096, 4096, "sent data while this node is primary" },
		{ NA, REPL_WRITE, 0, 4096, 1, "bad message header" },
		{ NA, REPL_ACK, 0, 0, 0, "length impossible for the type" },
		{ NA, 200, 0, 0, 0, "unknown type" },
		{ NB, REPL_RS_DONE, 0, 0, 0, "resync done while not sync target" },
		{ NA, REPL_RS_START, 0, 0, 0, "unexpected resync start" },
		{ NA, REPL_ACK, 0, 0, 2, "acknowledgement for unknown request" },
	};
	static uint8_t msg[sizeof(struct repl_hdr) + sizeof(struct repl_io) + 4096];
	struct pair p;
	(void)state;

	connect_empty_pair(&p);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct stub_conn *old = a_conn();
		struct repl_io io = { .seq = 1u << 30, .off = cases[i].off, .len = cases[i].len };
		size_t n;

		memset(msg, 0x5a, sizeof(msg));
		if (cases[i].type == REPL_ACK && cases[i].body == 2) { /* for no request */
			struct repl_ack_entry e = { .seq = 1u << 30, .res = 0 };
			n = repl_enc_ack_hdr(msg, 1);
			memcpy(msg + n, &e, sizeof(e));
			n += sizeof(e);
			repl_enc_hdr(msg, REPL_ACK, (uint32_t)(n - sizeof(struct repl_hdr)));
		} else if (cases[i].type == REPL_SET_GEN || cases[i].type == REPL_RS_DONE ||
			   cases[i].type == REPL_RS_START)
			n = repl_enc_gen(msg, cases[i].type, 0x1234, 0x5678);
		else if (cases[i].type == REPL_BITMAP_END)
			n = repl_enc_empty(msg, REPL_BITMAP_END);
		else if (cases[i].len)
			n = repl_enc_io(msg, cases[i].type, &io) + cases[i].body;
		else
			n = repl_enc_hdr(msg, cases[i].type, 0);
		if (cases[i].body == 1) /* a body too short for its type */
			n = repl_enc_hdr(msg, cases[i].type, 1) + 1;
		if (cases[i].type == REPL_WRITE || cases[i].type == REPL_RS_DATA ||
		    cases[i].type == REPL_RDATA)
			repl_enc_hdr(msg, cases[i].type, (uint32_t)(n - sizeof(struct repl_hdr)));
		stub_push(cases[i].to == NB ? old->peer : old, msg, n);
		WAIT_FOR(&p, strstr(status(&p, cases[i].to).error, cases[i].why));
		WAIT_FOR(&p, a_conn() != old && in_sync(&p));
	}
	assert_same_data(&p);
	pair_close(&p);
}

/* The disk calls refuse what the disk's state does not allow, each with
 * -errno and a message: fault and crash injection on a RAM store or a
 * failed disk, an unknown operation, invalidate of a failed disk, attach
 * of a store that cannot be opened; then attach (RAM: a new store) brings
 * b back in sync. */
static void test_disk_admin_refusals(void **state)
{
	struct pair p;
	struct vol *va, *vb;
	struct wio w;
	char msg[256];
	(void)state;

	connect_empty_pair(&p);
	va = p.n[NA].v;
	vb = p.n[NB].v;
	REFUSED(vol_inject_crash(vb, 0, 1, 1, msg, sizeof(msg)), -EOPNOTSUPP, "RAM store");
	REFUSED(vol_inject(vb, "scribble", 0, EIO, false, msg, sizeof(msg)), -EINVAL,
		"no operation 'scribble'");
	assert_int_equal(vol_inject_slow(vb, 0, msg, sizeof(msg)), 0); /* nothing to undo */
	assert_int_equal(vol_inject(vb, "write", 0, EIO, false, msg, sizeof(msg)), 0);
	submit_write(&p, NA, &w, 0, 64 * KIB, 0x21);
	WAIT_FOR(&p, w.done && vb->disk == VOL_FAILED && status(&p, NA).peer_disk == VOL_FAILED);
	assert_int_equal(w.res, 0); /* a goes on; b's disk is failed */
	free(w.buf);
	REFUSED(vol_inject_slow(vb, 10, msg, sizeof(msg)), -ENODEV, "the disk is failed");
	REFUSED(vol_inject_crash(vb, 0, 1, 1, msg, sizeof(msg)), -ENODEV, "the disk is failed");
	REFUSED(repl_invalidate(vb->repl, msg, sizeof(msg)), -EIO, "brings one back");
	REFUSED(repl_attach(vb->repl, "/nonexistent/dir/b.img", msg, sizeof(msg)), -ENOENT,
		"/nonexistent/dir/b.img");
	assert_int_equal(vb->disk, VOL_FAILED);
	assert_int_equal(repl_attach(vb->repl, NULL, msg, sizeof(msg)), 0);
	WAIT_FOR(&p, in_sync(&p));
	assert_int_equal(va->disk, VOL_UPTODATE);
	assert_same_data(&p);
	pair_close(&p);
}

/* Async replication (set at run time, as `tandemctl set` does) whose peer's
 * disk fails: the primary's writes complete, never an error; the stream's
 * writes that b failed come back as failures (R10) and are marked; b's disk
 * is failed and latched; its old disk, attached again, gets what it lacks
 * and both copies end identical. The settings' refusals on the way. */
static void test_async_peer_disk_fails(void **state)
{
	struct pair p;
	struct repl *ra;
	struct vol *vb;
	struct wio w[8];
	char msg[256];
	(void)state;

	connect_empty_pair(&p);
	ra = p.n[NA].v->repl;
	vb = p.n[NB].v;
	REFUSED(repl_set(ra, "replication", "semi", msg, sizeof(msg)), -EINVAL,
		"'semi' is not a valid value for replication");
	REFUSED(repl_set(ra, "async-backlog", "1k", msg, sizeof(msg)), -EINVAL,
		"not a valid value for async-backlog");
	REFUSED(repl_set(ra, "async-max-lag", "0.01", msg, sizeof(msg)), -EINVAL,
		"not a valid value for async-max-lag");
	REFUSED(repl_set(ra, "on-congestion", "drop", msg, sizeof(msg)), -EINVAL,
		"not a valid value for on-congestion");
	REFUSED(repl_set(ra, "colour", "blue", msg, sizeof(msg)), -EINVAL, "unknown setting");
	assert_int_equal(repl_set(ra, "async-backlog", "8M", msg, sizeof(msg)), 0);
	assert_int_equal(repl_set(ra, "async-max-lag", "5", msg, sizeof(msg)), 0);
	assert_int_equal(repl_set(ra, "replication", "async", msg, sizeof(msg)), 0);
	assert_int_equal(vol_inject(vb, "write", 0, EIO, false, msg, sizeof(msg)), 0);
	for (unsigned k = 0; k < 8; k++)
		submit_write(&p, NA, &w[k], (uint64_t)k * 256 * KIB, 64 * KIB, (uint8_t)(0x30 + k));
	for (unsigned k = 0; k < 8; k++) {
		WAIT_FOR(&p, w[k].done);
		assert_int_equal(w[k].res, 0);
		free(w[k].buf);
	}
	WAIT_FOR(&p, vb->disk == VOL_FAILED && status(&p, NA).peer_disk == VOL_FAILED);
	assert_true(status(&p, NA).out_of_sync_bytes > 0);
	assert_int_equal(repl_attach(vb->repl, NULL, msg, sizeof(msg)), 0);
	WAIT_FOR(&p, in_sync(&p) && vb->disk == VOL_UPTODATE);
	assert_same_data(&p);
	for (unsigned k = 0; k < 8; k++)
		assert_bytes(&p, NB, (uint64_t)k * 256 * KIB, 64 * KIB, (uint8_t)(0x30 + k));
	assert_int_equal(repl_set(ra, "replication", "sync", msg, sizeof(msg)), 0);
	pair_close(&p);
}

/* ---- the async stream overflowing: catch-up resyncs (CP1, A7-A10) ---- */

#define AS_W (32 * KIB) /* one stream write */
#define AS_FILL 96u     /* writes that fill the 3 MiB backlog of async_pair */
#define AS_SLOT(k) ((uint64_t)(k)*AS_W)

/* An async pair in sync with async-backlog 3M: of AS_FILL writes made while
 * the link is plugged, 1 MiB is handed to the connection (AB_NET_MAX) and
 * the rest waits in a's queue; one more overflows it (ahead). */
static void async_pair(struct pair *p)
{
	char msg[256];

	connect_empty_pair(p);
	assert_int_equal(repl_set(p->n[NA].v->repl, "async-backlog", "3M", msg, sizeof(msg)), 0);
	assert_int_equal(repl_set(p->n[NA].v->repl, "replication", "async", msg, sizeof(msg)), 0);
	WAIT_FOR(p, status(p, NB).async);
}

/* A write of AS_W bytes of fill at slot k on a, waited for (an async write
 * completes on a's disk alone). */
static void as_write(struct pair *p, struct wio *w, unsigned k, uint8_t fill)
{
	submit_write(p, NA, w, AS_SLOT(k), AS_W, fill);
	WAIT_FOR(p, w->done);
	assert_int_equal(w->res, 0);
}

/* AS_FILL writes at slots base.. (fill, fill + 1, ...), in that order. */
static void as_fill(struct pair *p, struct wio *w, unsigned base, uint8_t fill)
{
	for (unsigned k = 0; k < AS_FILL; k++)
		submit_write(p, NA, &w[k], AS_SLOT(base + k), AS_W, (uint8_t)(fill + k));
	for (unsigned k = 0; k < AS_FILL; k++) {
		WAIT_FOR(p, w[k].done);
		assert_int_equal(w[k].res, 0);
	}
}

static void as_free(struct wio *w, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		free(w[k].buf);
}

/* What a sent on its connection, parsed (one buffer for all callers). */
static struct wmsg *a_wire(unsigned *n)
{
	static struct wmsg m[8192];

	*n = wire(a_conn(), m, 8192);
	return m;
}

/* A store in front of a volume's that holds the requests of one type
 * overlapping a range while `on` (rec_bs holds them, in order, until
 * rec_release). */
static struct {
	bool on;
	enum bs_op type;
	uint64_t off, len;
} hold_range;

static void hold_range_submit(struct bs *bs, struct bs_io *io)
{
	struct rec_bs *r = container_of(bs, struct rec_bs, bs);

	r->hold = hold_range.on && io->type == hold_range.type &&
		  io->off < hold_range.off + hold_range.len && hold_range.off < io->off + io->len;
	rec_submit(bs, io);
	r->hold = false;
}

static const struct bs_ops hold_range_ops = {
	.name = "holding",
	.submit = hold_range_submit,
	.block_status = rec_block_status,
	.sync = rec_sync,
	.close = rec_close,
};

static struct rec_bs *hold_range_wrap(struct vol *v, enum bs_op type, uint64_t off, uint64_t len)
{
	struct rec_bs *r = rec_wrap(v);

	r->bs.ops = &hold_range_ops;
	hold_range.on = true;
	hold_range.type = type;
	hold_range.off = off;
	hold_range.len = len;
	return r;
}

static void hold_range_release(struct rec_bs *r)
{
	hold_range.on = false;
	rec_release(r);
}

/* Plugs a's link right behind the first resync data (RS_DATA, RS_ZERO) it
 * sends once armed: what a queues after it waits, as behind a full socket,
 * while b gets what went before. */
static struct {
	bool armed, fired;
} plug_rs;

static void plug_after_rs_data(struct stub_conn *to, uint8_t *buf, size_t len)
{
	struct repl_hdr h;
	uint16_t t;

	if (!plug_rs.armed || !to->accepted || len < sizeof(h))
		return;
	memcpy(&h, buf, sizeof(h));
	t = le16toh(h.type);
	if (t == REPL_RS_DATA || t == REPL_RS_ZERO) {
		stub_plug(to->peer, true);
		plug_rs.armed = false;
		plug_rs.fired = true;
	}
}

/* What a's backlog held when b's disk turned up to date. */
static struct {
	bool seen;
	uint64_t a_backlog;
	unsigned a_rep;
} b_up;

static void note_b_uptodate(struct pair *p, unsigned node, const char *json)
{
	if (node == NB && !b_up.seen && strstr(json, "\"event\":\"disk\"") &&
	    strstr(json, "\"to\":\"uptodate\"")) {
		b_up.seen = true;
		b_up.a_backlog = status(p, NA).backlog_bytes;
		b_up.a_rep = status(p, NA).rep;
	}
}

/* CP1: b keeps its image once the writes before RS_START are applied, and
 * reads nothing more until then: the resync data right behind RS_START,
 * already received, is not applied while those writes are still going to
 * b's disk (it would be in the kept image, which is then no prefix). */
static void test_rs_start_pause_stops_reading(void **state)
{
	struct pair p;
	struct wio w[AS_FILL], x;
	struct rec_bs *rb;
	int rs_at;
	(void)state;

	async_pair(&p);
	rb = rec_wrap(p.n[NB].v);
	stub_plug(a_conn(), true);
	as_fill(&p, w, 0, 0x10);
	as_write(&p, &x, 127, 0x01);
	WAIT_FOR(&p, status(&p, NA).rep == RR_SYNCSOURCE && stub_queued(a_conn(), true) > 0);
	rb->hold = true; /* b's writes stay in flight */
	stub_plug(a_conn(), false);
	WAIT_FOR(&p, status(&p, NB).rep == RR_SYNCTARGET);
	run_for(&p, 30);
	assert_int_equal(rec_find(rb, 0, 'S', BS_WRITE, AS_SLOT(127)), -1);
	rec_release(rb);
	WAIT_FOR(&p, in_sync(&p) && status(&p, NA).backlog_bytes == 0);
	rs_at = rec_find(rb, 0, 'S', BS_WRITE, AS_SLOT(127));
	assert_true(rs_at >= 0);
	for (unsigned k = 0; k < AS_FILL; k++) {
		int c = rec_find(rb, 0, 'C', BS_WRITE, AS_SLOT(k));
		assert_true(c >= 0 && c < rs_at);
	}
	assert_same_data(&p);
	as_free(w, AS_FILL);
	free(x.buf);
	pair_close(&p);
}

/* A7, A8: the catch-up resync that started when a went ahead is still
 * copying (b's disk holds its data of slot 127) when the stream overflows
 * again: slot 42 is marked while a's queue still holds an older entry of
 * slot 42 and 53 entries after it. The resync read of slot 42 goes only
 * behind that entry (A7); RS_DONE, and b's uptodate, only once b has
 * acknowledged every entry made before that read (A8), although the read's
 * data reached b long before the rest of the queue. */
static void test_async_done_waits_for_older_stream(void **state)
{
	struct pair p;
	struct wio w1[AS_FILL], w2[AS_FILL], x, y;
	struct rec_bs *rb;
	struct wmsg *m;
	unsigned n, nwr = 0, nstart = 0;
	int done_at = -1, old42_at = -1, rs42_at = -1;
	(void)state;

	async_pair(&p);
	rb = hold_range_wrap(p.n[NB].v, BS_WRITE, AS_SLOT(127), AS_W);
	/* first overflow: a goes ahead, the resync of slot 127 starts */
	stub_plug(a_conn(), true);
	as_fill(&p, w1, 0, 0x10);
	as_write(&p, &x, 127, 0x01);
	WAIT_FOR(&p, status(&p, NA).rep == RR_SYNCSOURCE && stub_queued(a_conn(), true) > 0);
	stub_plug(a_conn(), false);
	/* the stream drains; slot 127's resync data waits in b's store */
	WAIT_FOR(&p, !status(&p, NA).ahead && status(&p, NA).backlog_bytes == 0 &&
			     rec_find(rb, 0, 'S', BS_WRITE, AS_SLOT(127)) >= 0);
	assert_int_equal(status(&p, NA).rep, RR_SYNCSOURCE);
	assert_int_equal(p.n[NB].v->disk, VOL_INCONSISTENT);
	/* second overflow, at slot 42, whose entry waits in a's queue */
	stub_plug(a_conn(), true);
	as_fill(&p, w2, 0, 0xa0);
	as_write(&p, &y, 42, 0x02);
	WAIT_FOR(&p, stub_queued(a_conn(), true) > 0); /* slot 42's resync data */
	hold_range_release(rb);
	WAIT_FOR(&p, status(&p, NA).out_of_sync_bytes == AS_W); /* slot 127 is done */
	/* the link lets through what a handed to it before that resync data,
	 * and the data; then it is plugged again */
	memset(&b_up, 0, sizeof(b_up));
	p.on_event = note_b_uptodate;
	memset(&plug_rs, 0, sizeof(plug_rs));
	plug_rs.armed = true;
	stub_set_tamper(plug_after_rs_data);
	stub_plug(a_conn(), false);
	WAIT_FOR(&p, plug_rs.fired && status(&p, NA).out_of_sync_bytes == 0);
	run_for(&p, 50); /* what a does once b acknowledged slot 42's data */
	stub_set_tamper(NULL);
	/* nothing is left to copy, but older entries are not yet acknowledged:
	 * the resync goes on (A8) */
	assert_int_equal(status(&p, NA).rep, RR_SYNCSOURCE);
	assert_true(status(&p, NA).backlog_bytes > 0);
	assert_false(b_up.seen);
	stub_plug(a_conn(), false);
	WAIT_FOR(&p, in_sync(&p) && status(&p, NA).backlog_bytes == 0);
	p.on_event = NULL;
	/* b turned up to date only with every entry acknowledged */
	assert_true(b_up.seen);
	assert_int_equal(b_up.a_backlog, 0);
	m = a_wire(&n);
	for (unsigned i = 0; i < n; i++) {
		if (m[i].type == REPL_RS_START)
			nstart++;
		if (m[i].type == REPL_RS_DONE) {
			assert_int_equal(done_at, -1); /* one resync, one RS_DONE */
			done_at = (int)i;
		}
		if (m[i].type == REPL_WRITE) {
			nwr++;
			/* every entry was made before the last resync read */
			if (done_at >= 0)
				fail_msg("WRITE at %llu went after RS_DONE",
					 (unsigned long long)m[i].off);
			if (m[i].off == AS_SLOT(42) && m[i].data[0] == 0xa0 + 42)
				old42_at = (int)i;
		}
		if (m[i].type == REPL_RS_DATA && m[i].off <= AS_SLOT(42) &&
		    m[i].off + m[i].len > AS_SLOT(42))
			rs42_at = (int)i;
	}
	assert_int_equal(nstart, 1);
	assert_int_equal(nwr, 2 * AS_FILL);
	assert_true(done_at >= 0 && old42_at >= 0 && rs42_at >= 0);
	assert_true(old42_at < rs42_at); /* A7 */
	assert_int_equal(m[rs42_at].data[0], 0x02);
	assert_bytes(&p, NB, AS_SLOT(42), AS_W, 0x02);
	assert_bytes(&p, NB, AS_SLOT(127), AS_W, 0x01);
	assert_same_data(&p);
	as_free(w1, AS_FILL);
	as_free(w2, AS_FILL);
	free(x.buf);
	free(y.buf);
	pair_close(&p);
}

/* A9: the write that overflows the backlog starts the resync (RS_START)
 * only behind every entry queued before it, so that b, which keeps a
 * consistent image from RS_START on, keeps one with all of them. */
static void test_async_rs_start_behind_queue(void **state)
{
	struct pair p;
	struct wio w[AS_FILL], x;
	struct wmsg *m;
	unsigned n, nwr = 0;
	int start_at = -1;
	(void)state;

	async_pair(&p);
	stub_plug(a_conn(), true);
	as_fill(&p, w, 0, 0x10);
	/* 1 MiB of it is on the connection, the rest in a's queue */
	assert_true(stub_queued(a_conn(), false) < AS_FILL);
	as_write(&p, &x, 127, 0x01);
	WAIT_FOR(&p, status(&p, NA).rep == RR_SYNCSOURCE);
	stub_plug(a_conn(), false);
	WAIT_FOR(&p, in_sync(&p) && status(&p, NA).backlog_bytes == 0);
	m = a_wire(&n);
	for (unsigned i = 0; i < n; i++) {
		if (m[i].type == REPL_RS_START) {
			assert_int_equal(start_at, -1);
			start_at = (int)i;
			assert_int_equal(nwr, AS_FILL); /* every entry before it */
		}
		if (m[i].type == REPL_WRITE)
			nwr++;
	}
	assert_true(start_at >= 0);
	assert_int_equal(nwr, AS_FILL);
	assert_bytes(&p, NB, AS_SLOT(127), AS_W, 0x01);
	assert_same_data(&p);
	as_free(w, AS_FILL);
	free(x.buf);
	pair_close(&p);
}

/* A9: a write that overflows the backlog while a verify runs stops the
 * verify and starts the resync: RS_START reaches b before any later write
 * (b's verify reads are held, so the verify alone would never end). */
static void test_async_overflow_stops_verify(void **state)
{
	struct pair p;
	struct wio w[AS_FILL], x, z;
	struct rec_bs *rb;
	struct wmsg *m;
	unsigned n;
	int start_at = -1, z_at = -1;
	char msg[256];
	(void)state;

	async_pair(&p);
	rb = hold_range_wrap(p.n[NB].v, BS_READ, 0, VOL_SIZE);
	assert_int_equal(repl_verify(p.n[NA].v->repl, msg, sizeof(msg)), 0);
	WAIT_FOR(&p, rec_find(rb, 0, 'S', BS_READ, UINT64_MAX) >= 0);
	assert_string_equal(status(&p, NA).verify, "running");
	/* (the writes stay clear of the regions b is reading for it: b
	 * applies a write after the reads of its region that came before) */
	stub_plug(a_conn(), true);
	as_fill(&p, w, 16, 0x10);
	as_write(&p, &x, 127, 0x01); /* overflows: b lacks it from now on */
	stub_plug(a_conn(), false);
	WAIT_FOR(&p, !status(&p, NA).ahead && status(&p, NA).backlog_bytes == 0);
	as_write(&p, &z, 120, 0x03); /* streamed again */
	WAIT_FOR(&p, count_type(a_conn(), REPL_WRITE) == AS_FILL + 1);
	assert_string_equal(status(&p, NA).verify, "aborted");
	m = a_wire(&n);
	for (unsigned i = 0; i < n; i++) {
		if (m[i].type == REPL_RS_START && start_at < 0)
			start_at = (int)i;
		if (m[i].type == REPL_WRITE && m[i].off == AS_SLOT(120))
			z_at = (int)i;
	}
	assert_true(z_at >= 0);
	if (start_at < 0 || start_at > z_at)
		fail_msg("a later WRITE reached b before RS_START (RS_START at %d, WRITE at %d)",
			 start_at, z_at);
	hold_range_release(rb);
	WAIT_FOR(&p, in_sync(&p) && status(&p, NA).backlog_bytes == 0);
	assert_bytes(&p, NB, AS_SLOT(127), AS_W, 0x01);
	assert_bytes(&p, NB, AS_SLOT(120), AS_W, 0x03);
	assert_same_data(&p);
	as_free(w, AS_FILL);
	free(x.buf);
	free(z.buf);
	pair_close(&p);
}

/* A10: the lag counts from the oldest write b lacks: entries queued 300 ms
 * before a later write overflowed the backlog (and was marked) are older
 * than the marking. */
static void test_async_lag_from_oldest_entry(void **state)
{
	struct pair p;
	struct wio w[AS_FILL], x;
	uint64_t t0;
	double lag, age;
	(void)state;

	async_pair(&p);
	stub_plug(a_conn(), true);
	t0 = now_ns();
	as_fill(&p, w, 0, 0x10);
	run_for(&p, 300);
	as_write(&p, &x, 127, 0x01);
	assert_true(status(&p, NA).ahead);
	lag = status(&p, NA).lag_seconds;
	age = (double)(now_ns() - t0) / 1e9;
	if (lag < 0.29 || lag > age + 0.01)
		fail_msg("lag %.3f s; the oldest entry is %.3f s old", lag, age);
	stub_plug(a_conn(), false);
	WAIT_FOR(&p, in_sync(&p) && status(&p, NA).backlog_bytes == 0 &&
			     status(&p, NA).lag_seconds == 0);
	assert_same_data(&p);
	as_free(w, AS_FILL);
	free(x.buf);
	pair_close(&p);
}

/* A store that cannot zero a range (fallocate refuses it: EOPNOTSUPP) gets
 * zeros written instead, 1 MiB at a time: the ZERO (FUA) completes without
 * an error, the range reads zeros on both nodes, the disk stays up to date. */
static void test_zero_fallback(void **state)
{
	struct pair p;
	struct vol *va;
	struct bs *fault = NULL;
	struct wio w, z;
	const uint64_t off = 512 * KIB, len = 2 * 1024 * KIB + 64 * KIB;
	(void)state;

	connect_empty_pair(&p);
	va = p.n[NA].v;
	submit_write(&p, NA, &w, off, len, 0x55);
	WAIT_FOR(&p, w.done);
	assert_int_equal(w.res, 0);
	free(w.buf);
	assert_int_equal(bs_fault_open(va->bs, BS_ZERO, 1, true, EOPNOTSUPP, &fault), 0);
	va->bs = fault;
	memset(&z, 0, sizeof(z));
	z.p = &p;
	z.io.type = BS_ZERO;
	z.io.flags = BS_F_FUA;
	z.io.off = off;
	z.io.len = len;
	z.io.cb = wio_cb;
	vol_submit(va, &z.io);
	WAIT_FOR(&p, z.done);
	assert_int_equal(z.res, 0);
	assert_true(bs_fault_count(fault) >= 1);
	WAIT_FOR(&p, in_sync(&p));
	assert_int_equal(va->disk, VOL_UPTODATE);
	assert_bytes(&p, NA, off, len, 0);
	assert_bytes(&p, NB, off, len, 0);
	pair_close(&p);
}

/* A node whose configuration no longer matches the metadata it finds (the
 * volume was resized in the file, or the data-dir belongs to another
 * cluster) refuses to open the volume and says why; the metadata is left
 * as it was, and the first configuration opens it again. */
static void test_vol_open_refusals(void **state)
{
	static const struct {
		const char *cluster;
		unsigned long long size;
		const char *why;
	} cases[] = {
		{ "ut", 8ull << 20,
		  "configured size 8388608 differs from the created size 4194304" },
		{ "other", VOL_SIZE, "belongs to volume vol0 of cluster ut" },
		{ "ut", VOL_SIZE, NULL },
	};
	char *dir = eng_mkdtemp("vol-open");
	struct ev_loop *ev = ev_new(64);
	char sub[512];
	(void)state;

	assert_non_null(ev);
	snprintf(sub, sizeof(sub), "%s/a", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	for (unsigned i = 0; i <= sizeof(cases) / sizeof(cases[0]); i++) {
		/* i = 0: the volume is created as "ut", 4 MiB */
		const char *cl = i ? cases[i - 1].cluster : "ut";
		unsigned long long size = i ? cases[i - 1].size : VOL_SIZE;
		char text[2048], err[512] = "";
		struct cfg *cfg;
		struct vol *v = NULL;
		int r;

		pair_cfg_text(text, sizeof(text), cl, dir, "127.0.0.1:2", size, "");
		if (cfg_parse_string(text, "unit", &cfg, err, sizeof(err)))
			fail_msg("config: %s", err);
		r = vol_open(ev, cfg, 0, 0, &v, err, sizeof(err));
		if (i == 0 || !cases[i - 1].why) {
			if (r)
				fail_msg("vol_open: %s", err);
			vol_close(v);
		} else {
			assert_int_equal(r, -EINVAL);
			assert_null(v);
			if (!strstr(err, cases[i - 1].why))
				fail_msg("case %u: '%s'", i, err);
		}
		cfg_free(cfg);
	}
	ev_free(ev);
	unit_rmtree(dir);
	free(dir);
}

/* Strangers at b's replication address: a HELLO from another cluster, for a
 * volume b does not have, from a node that is not the volume's peer, or
 * with protocol versions b does not speak, is refused with an ERROR that
 * says which, and the connection closes; the pair's own connection is not
 * disturbed. */
static void test_handshake_refusals(void **state)
{
	static const struct {
		const char *cluster, *node, *volume;
		uint16_t pmin, pmax;
		const char *why;
	} cases[] = {
		{ "other", "a", "vol0", REPL_PROTO_MIN, REPL_PROTO_MAX, "foreign cluster 'other'" },
		{ "ut", "a", "nosuch", REPL_PROTO_MIN, REPL_PROTO_MAX,
		  "no replicated volume 'nosuch'" },
		{ "ut", "zz", "vol0", REPL_PROTO_MIN, REPL_PROTO_MAX, "node 'zz' is not the peer" },
		{ "ut", "a", "vol0", REPL_PROTO_MAX + 1, REPL_PROTO_MAX + 2, "protocol versions" },
	};
	uint8_t msg[sizeof(struct repl_hdr) + sizeof(struct repl_hello)];
	struct pair p;
	(void)state;

	connect_empty_pair(&p);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct repl_hello h;
		struct stub_conn *s;
		int fd = eventfd(0, EFD_CLOEXEC);
		size_t n;

		memset(&h, 0, sizeof(h));
		h.magic = REPL_HELLO_MAGIC;
		h.proto_min = cases[i].pmin;
		h.proto_max = cases[i].pmax;
		snprintf(h.cluster, sizeof(h.cluster), "%s", cases[i].cluster);
		snprintf(h.node, sizeof(h.node), "%s", cases[i].node);
		snprintf(h.volume, sizeof(h.volume), "%s", cases[i].volume);
		n = repl_enc_hello(msg, &h);
		assert_true(fd >= 0);
		assert_int_equal(stub_accept(p.addr_b, fd), 0);
		s = stub_conn_at(stub_nconns() - 1);
		p.seen = stub_nconns(); /* not one of a's dials */
		stub_push(s, msg, n);
		WAIT_FOR(&p, !s->c || s->shut);
		assert_true(s->out_len > 0);
		if (!memmem(s->out, s->out_len, cases[i].why, strlen(cases[i].why)))
			fail_msg("case %u: no '%s' in what b sent", i, cases[i].why);
	}
	assert_true(in_sync(&p));
	pair_close(&p);
}

/* ---- a peer whose STATE says something else ---- */

static struct {
	bool to_b;      /* tamper the STATE that b receives (else: that a receives) */
	uint64_t size;  /* nonzero: the size it says */
	uint32_t gran;  /* nonzero: the bitmap granularity it says */
	uint64_t newer; /* nonzero: its data is newer (this generation, from a's) */
	bool no_data;   /* it holds no data (GEN_NONE) */
	uint64_t a_gen; /* a's current generation */
	unsigned seen;  /* STATE messages changed */
} tamper_case;

static void tamper_state(struct stub_conn *to, uint8_t *buf, size_t len)
{
	struct repl_msg m;

	if (to->accepted != tamper_case.to_b || len < sizeof(struct repl_hdr) ||
	    repl_decode_hdr(buf, &m) || m.type != REPL_STATE ||
	    len < sizeof(struct repl_hdr) + repl_body_needed(&m) ||
	    repl_decode_body(buf + sizeof(struct repl_hdr), &m))
		return;
	if (tamper_case.size)
		m.u.state.size = tamper_case.size;
	if (tamper_case.gran)
		m.u.state.bm_granularity = tamper_case.gran;
	if (tamper_case.newer) {
		m.u.state.gen_current = tamper_case.newer;
		m.u.state.gen_bitmap = tamper_case.a_gen;
	}
	if (tamper_case.no_data) {
		m.u.state.gen_current = TANDEM_MD_GEN_NONE;
		m.u.state.gen_bitmap = TANDEM_MD_GEN_NONE;
	}
	assert_int_equal(repl_enc_state(buf, &m.u.state),
			 sizeof(struct repl_hdr) + sizeof(struct repl_state));
	tamper_case.seen++;
}

/* A pair whose two configs disagree (volume size, bitmap granularity), or
 * whose primary would have to take data from its peer (the peer says it is
 * newer; the primary says it holds nothing), is refused at the
 * handshake with a message that says which, on the node that finds it; no
 * data moves. Once the peer says what it should, the pair connects again. */
static void test_handshake_misconfigured(void **state)
{
	static const struct {
		bool to_b;
		uint64_t size;
		uint32_t gran;
		unsigned gens; /* 1 newer, 2 no data */
		unsigned who;  /* the node whose error says why */
		const char *why;
	} cases[] = {
		{ true, 2 * VOL_SIZE, 0, 0, NB, "volume sizes differ: 4194304 here, 8388608 on a" },
		{ true, 0, 2 * GRAN, 0, NB, "bitmap granularities differ: 4096 here, 8192 on a" },
		{ false, 0, 0, 1, NA, "this primary would become sync target of b" },
		{ true, 0, 0, 2, NB, "primary a would become sync target" },
	};
	struct pair p;
	(void)state;

	connect_empty_pair(&p);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct stub_conn *old = a_conn();
		unsigned n0 = stub_nconns();

		memset(&tamper_case, 0, sizeof(tamper_case));
		tamper_case.to_b = cases[i].to_b;
		tamper_case.size = cases[i].size;
		tamper_case.gran = cases[i].gran;
		tamper_case.a_gen = status(&p, NA).gen_current;
		if (cases[i].gens == 1)
			tamper_case.newer = tamper_case.a_gen ^ 0x5a5a;
		tamper_case.no_data = cases[i].gens == 2;
		stub_set_tamper(tamper_state);
		stub_break(old, -ECONNRESET);
		WAIT_FOR(&p,
			 tamper_case.seen && strstr(status(&p, cases[i].who).error, cases[i].why));
		stub_set_tamper(NULL);
		assert_int_equal(p.n[NA].v->role, VOL_PRIMARY);
		assert_int_equal(p.n[NA].v->disk, VOL_UPTODATE);
		for (unsigned k = n0; k < stub_nconns(); k++) {
			const struct stub_conn *s = stub_conn_at(k);
			assert_int_equal(count_type(s, REPL_RS_DATA) + count_type(s, REPL_RS_ZERO) +
						 count_type(s, REPL_WRITE),
					 0);
		}
		WAIT_FOR(&p, in_sync(&p));
	}
	assert_same_data(&p);
	pair_close(&p);
}

/* The admin calls refuse what the state does not allow, each with -errno
 * and a message, and change nothing: a pair in sync, a primary. */
static void test_admin_refusals(void **state)
{
	struct pair p;
	struct repl *ra, *rb;
	char msg[256];
	(void)state;

	connect_empty_pair(&p);
	ra = p.n[NA].v->repl;
	rb = p.n[NB].v->repl;
	REFUSED(repl_invalidate(ra, msg, sizeof(msg)), -EBUSY, "make it secondary first");
	REFUSED(repl_promote(rb, false, msg, sizeof(msg)), -EBUSY, "make it secondary first");
	REFUSED(repl_verify(rb, msg, sizeof(msg)), -EINVAL, "run verify there");
	REFUSED(repl_switchover(ra, "zz", msg, sizeof(msg)), -EINVAL, "not on zz");
	REFUSED(repl_attach(ra, NULL, msg, sizeof(msg)), -EINVAL, "not failed");
	assert_int_equal(repl_verify(ra, msg, sizeof(msg)), 0);
	REFUSED(repl_verify(ra, msg, sizeof(msg)), -EALREADY, "already running");
	WAIT_FOR(&p, strcmp(status(&p, NA).verify, "done") == 0);
	assert_int_equal(p.n[NA].v->role, VOL_PRIMARY);
	assert_int_equal(p.n[NB].v->role, VOL_SECONDARY);
	/* without the peer */
	stub_break(a_conn(), -ECONNRESET);
	WAIT_FOR(&p, status(&p, NA).conn != RC_CONNECTED);
	REFUSED(repl_verify(ra, msg, sizeof(msg)), -ENOTCONN, "not connected");
	REFUSED(repl_switchover(ra, NULL, msg, sizeof(msg)), -ENOTCONN, "not connected");
	pair_close(&p);
}

/* Fails every superblock write of a node from the moment it is armed. */
struct sb_fail {
	struct crash_hook h;
	unsigned failed;
};

static int sb_fail_point(struct crash_hook *h, const char *what, int fd, const void *buf,
			 size_t len, uint64_t off)
{
	struct sb_fail *f = container_of(h, struct sb_fail, h);
	(void)fd;
	(void)buf;
	(void)len;
	(void)off;
	if (strcmp(what, "superblock write"))
		return 0;
	f->failed++;
	return -EIO;
}

/* Arms hook on a node once its replication state becomes `to`. */
static struct {
	unsigned node;
	const char *to;
	struct sb_fail *hook;
} arm_at;

static void arm_on_event(struct pair *p, unsigned node, const char *json)
{
	char want[64];

	snprintf(want, sizeof(want), "\"to\":\"%s\"", arm_at.to);
	if (node == arm_at.node && strstr(json, "\"event\":\"replication\"") && strstr(json, want))
		p->n[node].v->md->crash = &arm_at.hook->h;
}

/* a writes alone (b disconnected) and then reconnects: a resync a -> b. */
static void write_alone_then_connect(struct pair *p)
{
	struct repl *ra = p->n[NA].v->repl;
	struct wio w;
	char msg[256];

	WAIT_FOR(p, repl_disconnect(ra, msg, sizeof(msg)) == 0);
	WAIT_FOR(p, status(p, NA).conn != RC_CONNECTED);
	submit_write(p, NA, &w, 256 * KIB, 64 * KIB, 0x77);
	WAIT_FOR(p, w.done);
	assert_int_equal(w.res, 0);
	free(w.buf);
	assert_int_equal(repl_connect(ra, msg, sizeof(msg)), 0);
}

/* V4 in the calls and messages that record a state (promote, the first
 * generation, the end of a resync on either side, attach of an old or a new
 * disk): a metadata write that fails fails the disk, the call or the
 * connection says why, and nothing goes on as if the state were recorded.
 * Each case on a new pair (only a restart brings back a disk whose
 * metadata failed). */
static void test_metadata_fails_in_admin_and_handshake(void **state)
{
	struct sb_fail hook = { .h.point = sb_fail_point };
	struct pair p;
	struct repl *ra, *rb;
	struct vol *vb;
	char msg[256];
	(void)state;

	/* 1. promote: the primary flag cannot be recorded */
	connect_empty_pair(&p);
	ra = p.n[NA].v->repl;
	rb = p.n[NB].v->repl;
	vb = p.n[NB].v;
	WAIT_FOR(&p, repl_demote(ra, msg, sizeof(msg)) == 0);
	vb->md->crash = &hook.h;
	REFUSED(repl_promote(rb, false, msg, sizeof(msg)), -EIO,
		"writing metadata failed; the disk is failed");
	assert_int_equal(vb->role, VOL_SECONDARY);
	assert_false(vb->md->sb.flags & TANDEM_MD_F_PRIMARY);
	assert_true(vb->md_failed);
	assert_int_equal(vb->disk, VOL_FAILED);
	vb->md->crash = NULL;
	pair_close(&p);

	/* 2. the first generation of a new pair (SET_GEN) that b cannot record */
	pair_open(&p);
	pair_repl(&p);
	vb = p.n[NB].v;
	vb->md->crash = &hook.h;
	pair_go(&p);
	WAIT_FOR(&p, strstr(status(&p, NB).error, "the new generation could not be recorded"));
	assert_true(vb->md_failed);
	vb->md->crash = NULL;
	pair_close(&p);

	/* 3. the end of a resync, on the target; 4. on the source */
	for (unsigned i = 0; i < 2; i++) {
		struct vol *v;
		connect_empty_pair(&p);
		v = p.n[i ? NA : NB].v;
		hook.failed = 0;
		arm_at.node = i ? NA : NB;
		arm_at.to = i ? "syncsource" : "synctarget";
		arm_at.hook = &hook;
		p.on_event = arm_on_event;
		write_alone_then_connect(&p);
		WAIT_FOR(&p, hook.failed && v->md_failed);
		WAIT_FOR(&p, strstr(status(&p, arm_at.node).error,
				    "the end of the resync could not be recorded"));
		p.on_event = NULL;
		v->md->crash = NULL;
		pair_close(&p);
	}

	/* 5. attach of b's old disk, 6. of a new one: the state it comes back
	 * in cannot be recorded, and the disk stays failed */
	for (unsigned i = 0; i < 2; i++) {
		struct wio w;
		connect_empty_pair(&p);
		vb = p.n[NB].v;
		assert_int_equal(vol_inject(vb, "write", 0, EIO, false, msg, sizeof(msg)), 0);
		submit_write(&p, NA, &w, 0, 64 * KIB, 0x21);
		WAIT_FOR(&p, w.done && vb->disk == VOL_FAILED);
		free(w.buf);
		vb->md->crash = &hook.h;
		REFUSED(repl_attach(vb->repl, i ? "ram:" : NULL, msg, sizeof(msg)), -EIO,
			"writing metadata failed; the disk is failed");
		assert_true(vol_disk_gone(vb->disk));
		vb->md->crash = NULL;
		pair_close(&p);
	}
}

/* ---- fault loops ----
 * One scenario run again and again, each time with the nth operation of
 * one kind failing (n = 1, 2, ...), until a run in which it never came: the
 * scenario passed without the fault. Kinds: an operation of a node's data
 * store (read, write, flush: EIO once; on-io-error = detach fails the
 * disk), a metadata write of a node (superblock, attributes, bitmap
 * pages: EIO), a send on the replication link (the connection breaks).
 * The scenario: a pair in sync; a writes 12 blocks over several activity
 * log extents, flushes, reads one back; the link is cut; a writes 6 more;
 * the link returns and the marked regions are resynced. Then whatever the
 * fault failed is healed (a failed disk is attached again: a new RAM
 * store, filled from the peer) and the pair must come back in sync.
 * Properties of every run: no request hangs; a write that succeeded is on
 * every node whose disk is up to date, and after healing on both, the two
 * data areas identical; at least one node stays up to date. A node whose
 * metadata failed cannot be healed in the process (V4: restart); then the
 * other node must hold every write that succeeded. */

#define FL_WRITES 18
#define FL_MAX 400 /* no scenario has this many operations of one kind */

enum fl_kind { FL_STORE, FL_META, FL_SEND, FL_ALLOC };

struct fl_hook { /* fails the nth metadata write of a node */
	struct crash_hook h;
	unsigned n, seen;
};

static int fl_point(struct crash_hook *h, const char *what, int fd, const void *buf, size_t len,
		    uint64_t off)
{
	struct fl_hook *f = container_of(h, struct fl_hook, h);
	(void)what;
	(void)fd;
	(void)buf;
	(void)len;
	(void)off;
	return ++f->seen == f->n ? -EIO : 0;
}

struct fl_io {
	struct vol_io io;
	int res, done;
	uint8_t *buf;
};

static void fl_cb(struct vol_io *io, int res)
{
	struct fl_io *f = container_of(io, struct fl_io, io);
	f->res = res;
	f->done++;
}

static void fl_submit(struct pair *p, struct fl_io *f, enum bs_op type, uint64_t off, uint8_t fill)
{
	memset(f, 0, sizeof(*f));
	f->buf = aligned_alloc(4096, 8 * KIB);
	assert_non_null(f->buf);
	memset(f->buf, fill, 8 * KIB);
	f->io.type = type;
	f->io.off = off;
	f->io.len = type == BS_FLUSH ? 0 : 8 * KIB;
	f->io.buf = type == BS_FLUSH ? NULL : f->buf;
	f->io.cb = fl_cb;
	vol_submit(p->n[NA].v, &f->io);
}

static uint64_t fl_off(unsigned k)
{
	return (uint64_t)k * 200 * KIB; /* 18 blocks over 14 extents of 256 KiB */
}

/* Whether node i holds block k as written. */
static bool fl_has(struct pair *p, unsigned i, unsigned k)
{
	uint8_t buf[8 * KIB];

	eng_read(p->ev, p->n[i].v, fl_off(k), sizeof(buf), buf);
	for (size_t j = 0; j < sizeof(buf); j++)
		if (buf[j] != (uint8_t)(0x40 + k))
			return false;
	return true;
}

/* One run with the nth operation of kind (store: of type op) on node x
 * failing; returns whether the fault came. */
/* The scenario's variant: extra [volume] lines, and a verify once the pair
 * is in sync again (both set by a test for its loop). */
static struct {
	const char *cfg;
	bool verify;
} fl_opt = { "", false };

/* Runs the loop up to ms milliseconds or until cond holds. */
static bool fl_run(enum fl_kind kind, unsigned x, enum bs_op op, unsigned n)
{
	struct pair p;
	struct fl_io w[FL_WRITES], fl, rd;
	struct fl_hook hook = { .h.point = fl_point, .n = n };
	struct bs *fault = NULL;
	bool fired, healable;
	char msg[256];

	connect_empty_pair_cfg(&p, fl_opt.cfg);
	if (kind == FL_STORE) {
		assert_int_equal(bs_fault_open(p.n[x].v->bs, op, n, false, EIO, &fault), 0);
		p.n[x].v->bs = fault;
	} else if (kind == FL_META) {
		p.n[x].v->md->crash = &hook.h;
	} else if (kind == FL_SEND) {
		stub_fail_send(n, -EPIPE);
	} else {
		alloc_fault_arm(n);
	}
	for (unsigned k = 0; k < 12; k++)
		fl_submit(&p, &w[k], BS_WRITE, fl_off(k), (uint8_t)(0x40 + k));
	fl_submit(&p, &fl, BS_FLUSH, 0, 0);
	WAIT_FOR(&p, fl.done);
	fl_submit(&p, &rd, BS_READ, fl_off(3), 0);
	WAIT_FOR(&p, rd.done);
	if (a_conn())
		stub_break(a_conn(), -ECONNRESET);
	for (unsigned k = 12; k < FL_WRITES; k++)
		fl_submit(&p, &w[k], BS_WRITE, fl_off(k), (uint8_t)(0x40 + k));
	for (unsigned k = 0; k < FL_WRITES; k++)
		WAIT_FOR(&p, w[k].done); /* no hang */
	if (fl_opt.verify) {
		RUN_UNTIL(&p, 300, in_sync(&p));
		if (repl_verify(p.n[NA].v->repl, msg, sizeof(msg)) == 0)
			RUN_UNTIL(&p, 300, strcmp(status(&p, NA).verify, "running"));
	}
	/* the redial, the resync, or the fault's outcome: up to 300 ms, or
	 * until the fault came and the pair was in sync for 50 ms after it */
	{
		uint64_t t0 = now_ns(), calm = 0;
		for (;;) {
			fired = kind == FL_STORE  ? bs_fault_count(fault) >= n
				: kind == FL_META ? hook.seen >= n
				: kind == FL_SEND ? stub_send_fault_fired()
						  : alloc_fault_fired();
			if (now_ns() - t0 >= 300 * ENG_MS)
				break;
			if (!fired || !in_sync(&p))
				calm = 0;
			else if (!calm)
				calm = now_ns();
			else if (now_ns() - calm >= 50 * ENG_MS)
				break;
			pass(&p);
		}
	}
	alloc_fault_arm(0);
	p.n[x].v->md->crash = NULL;
	stub_fail_send(0, 0);
	if (fault)
		bs_fault_disarm(fault); /* (what follows reads and heals) */
	if (getenv("FL_DEBUG"))
		print_message("kind %d node %c op %d n %u: fired %d, a %s%s, b %s%s, in sync %d\n",
			      kind, 'a' + x, op, n, fired, vol_disk_name(p.n[NA].v->disk),
			      p.n[NA].v->md_failed ? " (metadata failed)" : "",
			      vol_disk_name(p.n[NB].v->disk),
			      p.n[NB].v->md_failed ? " (metadata failed)" : "", in_sync(&p));
	/* A write that succeeded is on every node whose disk is up to date.
	 * With the link cut, a fault on the node writing alone is a second
	 * failure: its failed disk (data area intact, only failed to write)
	 * or a disk whose metadata failed (only a restart brings it back,
	 * V4) is then the only copy, and must hold every such write. */
	healable = p.n[NA].v->disk == VOL_UPTODATE || p.n[NB].v->disk == VOL_UPTODATE;
	for (unsigned i = 0; i < 2; i++) {
		bool mine = (p.n[i].v->md_failed || p.n[i].v->disk == VOL_FAILED) &&
			    p.n[!i].v->disk != VOL_UPTODATE;
		if (p.n[i].v->md_failed)
			healable = false;
		if (!mine && (p.n[i].v->disk != VOL_UPTODATE || (i == NB && !in_sync(&p))))
			continue;
		for (unsigned k = 0; k < FL_WRITES; k++)
			if (w[k].res == 0 && !fl_has(&p, i, k))
				fail_msg("kind %d node %c op %d n %u: block %u lost on %c", kind,
					 'a' + x, op, n, k, 'a' + i);
	}
	/* heal: a failed disk is attached again (a new RAM store) */
	for (unsigned i = 0; i < 2 && healable; i++) {
		struct repl *r = p.n[i].v->repl;
		uint64_t t0 = now_ns();
		while (vol_disk_gone(p.n[i].v->disk)) {
			int e = repl_attach(r, NULL, msg, sizeof(msg));
			if (e == 0)
				break;
			if (e != -EAGAIN)
				fail_msg("attach on %c: %s", 'a' + i, msg);
			if (now_ns() - t0 > WAIT_MS * ENG_MS)
				fail_msg("attach on %c: %s (timed out)", 'a' + i, msg);
			pass(&p);
		}
	}
	if (healable) {
		uint64_t t0 = now_ns();
		while (!(in_sync(&p) && p.n[NA].v->disk == VOL_UPTODATE)) {
			if (now_ns() - t0 > WAIT_MS * ENG_MS) {
				char ma[256] = "", mb[256] = "";
				struct repl_status sa = status(&p, NA), sb = status(&p, NB);
				repl_in_sync(p.n[NA].v->repl, ma, sizeof(ma));
				repl_in_sync(p.n[NB].v->repl, mb, sizeof(mb));
				fail_msg(
					"kind %d node %c op %d n %u: not back in sync: a %s rep %d "
					"oos %llu (%s); b %s rep %d oos %llu (%s)",
					kind, 'a' + x, op, n, vol_disk_name(p.n[NA].v->disk),
					sa.rep, (unsigned long long)sa.out_of_sync_bytes, ma,
					vol_disk_name(p.n[NB].v->disk), sb.rep,
					(unsigned long long)sb.out_of_sync_bytes, mb);
			}
			pass(&p);
		}
		assert_same_data(&p);
		for (unsigned k = 0; k < FL_WRITES; k++)
			if (w[k].res == 0 && !fl_has(&p, NA, k))
				fail_msg("kind %d node %c op %d n %u: block %u lost after healing",
					 kind, 'a' + x, op, n, k);
	}
	for (unsigned k = 0; k < FL_WRITES; k++)
		free(w[k].buf);
	free(fl.buf);
	free(rd.buf);
	pair_close(&p);
	return fired;
}

/* n = 1, 2, ... until a run without the fault; returns how many ran. For
 * allocations, a run without faults first lists the call site of each one,
 * and only the first allocation from each site fails (the others of a site
 * take the same error path). */
static unsigned fl_loop(enum fl_kind kind, unsigned x, enum bs_op op)
{
	unsigned n = 1;

	if (kind == FL_ALLOC) {
		const void *sites[ALLOC_FAULT_SITES];
		unsigned ns = 0, runs = 0, total;

		assert_false(fl_run(kind, x, op, ALLOC_FAULT_NONE));
		total = alloc_fault_seen();
		for (unsigned k = 1; k <= total && k <= ALLOC_FAULT_SITES; k++) {
			const void *s = alloc_fault_site(k);
			unsigned j = 0;
			while (j < ns && sites[j] != s)
				j++;
			if (j < ns)
				continue;
			sites[ns++] = s;
			fl_run(kind, x, op, k);
			runs++;
		}
		print_message("fault loop kind %d: %u allocations from %u call sites, each "
			      "site failed once\n",
			      kind, total, ns);
		return runs;
	}

	while (fl_run(kind, x, op, n)) {
		n++;
		assert_true(n < FL_MAX);
	}
	print_message("fault loop kind %d node %c op %d: %u faulted runs\n", kind, 'a' + x, op,
		      n - 1);
	return n - 1;
}

static void test_fault_loop_store(void **state)
{
	(void)state;
	for (unsigned x = 0; x < 2; x++) {
		assert_true(fl_loop(FL_STORE, x, BS_WRITE) > 0);
		assert_true(fl_loop(FL_STORE, x, BS_FLUSH) > 0);
	}
	assert_true(fl_loop(FL_STORE, NA, BS_READ) > 0);
}

static void test_fault_loop_meta(void **state)
{
	(void)state;
	for (unsigned x = 0; x < 2; x++)
		assert_true(fl_loop(FL_META, x, BS_WRITE) > 0);
}

static void test_fault_loop_send(void **state)
{
	(void)state;
	assert_true(fl_loop(FL_SEND, NA, BS_WRITE) > 0);
}

/* Every allocation of both engines in the scenario (after the pair is up)
 * fails in turn: an error reaches a request or the link breaks and is made
 * again; nothing leaks (LeakSanitizer in the ASan build). */
static void test_fault_loop_alloc(void **state)
{
	(void)state;
	assert_true(fl_loop(FL_ALLOC, NA, BS_WRITE) > 0);
}

/* The same with compressed writes and resync data (lz4) and a verify after
 * the resync: the allocations of packing, unpacking and comparing. */
static void test_fault_loop_alloc_compressed(void **state)
{
	(void)state;
	fl_opt.cfg = "compression = lz4\n";
	fl_opt.verify = true;
	assert_true(fl_loop(FL_ALLOC, NA, BS_WRITE) > 0);
	fl_opt.cfg = "";
	fl_opt.verify = false;
}

/* Every allocation of opening a volume (its metadata and bitmap loaded from
 * the file) and of making its replication object and server fails in turn:
 * each attempt ends in -ENOMEM and a message, with nothing leaked
 * (LeakSanitizer), until one succeeds; the pair then connects as usual. */
static void test_fault_loop_alloc_open(void **state)
{
	struct pair p;
	struct node *n = &p.n[NA];
	char err[256];
	unsigned faulted = 0;
	int e;

	(void)state;
	pair_open(&p);
	vol_close(n->v);
	n->v = NULL;
	for (unsigned k = 1;; k++) {
		err[0] = 0;
		alloc_fault_arm(k);
		e = vol_open(p.ev, p.cfg, 0, NA, &n->v, err, sizeof(err));
		if (!alloc_fault_fired())
			break;
		assert_int_equal(e, -ENOMEM);
		assert_null(n->v);
		assert_true(err[0] != 0);
		faulted++;
	}
	alloc_fault_arm(0);
	assert_int_equal(e, 0);
	vol_set_disk(n->v, VOL_UPTODATE);
	vol_set_role(n->v, VOL_PRIMARY);
	n->v->event_fn = event_cb;
	n->v->event_ctx = n;
	for (unsigned k = 1;; k++) {
		alloc_fault_arm(k);
		e = repl_new(p.ev, p.cfg, 0, NA, n->v, err, sizeof(err));
		if (e == 0)
			e = repl_server_new(p.ev, p.cfg, NA, &n->v, 1, &n->srv);
		if (!alloc_fault_fired())
			break;
		assert_int_equal(e, -ENOMEM);
		faulted++;
		repl_free(n->v->repl); /* what a failed repl_server_new leaves */
		n->srv = NULL;
	}
	alloc_fault_arm(0);
	assert_int_equal(e, 0);
	if (repl_new(p.ev, p.cfg, 0, NB, p.n[NB].v, err, sizeof(err)))
		fail_msg("repl_new: %s", err);
	assert_int_equal(repl_server_new(p.ev, p.cfg, NB, &p.n[NB].v, 1, &p.n[NB].srv), 0);
	pair_go(&p);
	WAIT_FOR(&p, status(&p, NA).rep == RR_ESTABLISHED && status(&p, NB).rep == RR_ESTABLISHED);
	print_message("open fault loop: %u faulted runs\n", faulted);
	assert_true(faulted > 10);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake_created_empty),
		cmocka_unit_test(test_handshake_equal),
		cmocka_unit_test(test_contract_mode_refused),
		cmocka_unit_test(test_contract_others_refused),
		cmocka_unit_test(test_contract_set_both),
		cmocka_unit_test(test_handshake_a_newer),
		cmocka_unit_test(test_resync_from_outdated_source),
		cmocka_unit_test(test_forced_source_makes_target_current),
		cmocka_unit_test(test_crash_flag_settled_by_handshake),
		cmocka_unit_test(test_vclock_peer_timeout),
		cmocka_unit_test(test_vclock_async_max_lag),
		cmocka_unit_test(test_vclock_quorum_timeout),
		cmocka_unit_test(test_vclock_lease_renewed),
		cmocka_unit_test(test_vclock_lease_expires),
		cmocka_unit_test(test_vclock_witness_grace),
		cmocka_unit_test(test_vclock_handover_retry),
		cmocka_unit_test(test_handshake_b_newer),
		cmocka_unit_test(test_handshake_split_brain),
		cmocka_unit_test(test_handshake_unrelated),
		cmocka_unit_test(test_handshake_both_primary),
		cmocka_unit_test(test_handshake_fresh_peer_full_sync),
		cmocka_unit_test(test_overlapping_writes_in_order),
		cmocka_unit_test(test_write_overtakes_queued_resync),
		cmocka_unit_test(test_write_discards_resync_read),
		cmocka_unit_test(test_peer_loss_writes_in_flight),
		cmocka_unit_test(test_compressed_writes),
		cmocka_unit_test(test_compressed_resync),
		cmocka_unit_test(test_compressed_garbage),
		cmocka_unit_test(test_compressed_without_feature),
		cmocka_unit_test(test_protocol_violations),
		cmocka_unit_test(test_disk_admin_refusals),
		cmocka_unit_test(test_async_peer_disk_fails),
		cmocka_unit_test(test_rs_start_pause_stops_reading),
		cmocka_unit_test(test_async_done_waits_for_older_stream),
		cmocka_unit_test(test_async_rs_start_behind_queue),
		cmocka_unit_test(test_async_overflow_stops_verify),
		cmocka_unit_test(test_async_lag_from_oldest_entry),
		cmocka_unit_test(test_zero_fallback),
		cmocka_unit_test(test_vol_open_refusals),
		cmocka_unit_test(test_handshake_refusals),
		cmocka_unit_test(test_handshake_misconfigured),
		cmocka_unit_test(test_metadata_fails_in_admin_and_handshake),
		cmocka_unit_test(test_admin_refusals),
		cmocka_unit_test(test_fault_loop_store),
		cmocka_unit_test(test_fault_loop_meta),
		cmocka_unit_test(test_fault_loop_send),
		cmocka_unit_test(test_fault_loop_alloc),
		cmocka_unit_test(test_fault_loop_alloc_compressed),
		cmocka_unit_test(test_fault_loop_alloc_open),
	};
	if (getenv("UNIT_FILTER")) /* one test by name, or a glob */
		cmocka_set_test_filter(getenv("UNIT_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
