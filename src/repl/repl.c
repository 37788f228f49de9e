/* Replication of one volume with its peer (repl.h has the states,
 * transitions and invariants; include/proto/repl.h the wire format).
 *
 * Sections: connection set-up and authentication, the generation handshake,
 * the primary's write path, the secondary's apply path, resync, keepalive and
 * the lazy bitmap cleaner, admin commands, the listener. */
#include "repl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/bufpool.h"
#include "../common/list.h"
#include "../common/log.h"
#include "../common/util.h"
#include "../vol/vol.h"
#include "../bm/bitmap.h"
#include "repl_codec.h"
#include "repl_gen.h"
#include "rsctl.h"

#define RX_BUF (64u * 1024u)
#define NSLOTS 65536u           /* peer requests awaiting an ack, by seq */
#define RS_MAX_RUN (1u << 20)   /* most bytes of consecutive marked regions in one run */
#define RS_MIN_PIECE (4u << 10)  /* smallest resync request (the controller's floor) */
#define RS_MAX_PIECE (1u << 20)  /* largest resync request */
#define VFY_CHUNK (256u << 10)   /* verify compares digests of this much (or a region) */
#define VFY_MAX_INFLIGHT (8u << 20) /* verify reads in flight at most */
#define APPLY_MAX_BYTES (64u << 20) /* secondary: stop reading beyond this */
#define RETRY_MIN_MS 200u
#define RETRY_MAX_MS 2000u
#define CLEAN_EVERY_NS (2ull * 1000000000ull)
#define DRAIN_MAX_NS (2ull * 1000000000ull) /* an orderly disconnect waits this long at most */

enum kind { K_FG = 1, K_RS, K_APPLY, K_CLEAN };

enum stage { ST_HELLO = 0, ST_AUTH, ST_STATE, ST_BITMAP, ST_RUN };

struct rmsg {
	struct net_tx tx;
	struct rconn *c;
	uint32_t len, cap;
	uint8_t buf[];
};

struct rapply {
	struct vol_io io;
	struct rconn *c;
	uint64_t seq;
	uint16_t type;
	uint8_t digest[REPL_DIGEST_LEN]; /* CSUM: the sender's */
	struct list link;
};

/* Consecutive out-of-sync regions being copied, in pieces. Once every piece
 * is done, the bits of its regions are cleared, except those spoiled: a piece
 * there failed, went stale or was skipped, or a foreground write there
 * failed on a node. */
#define RUN_BITS (RS_MAX_RUN / 4096u)
struct rsrun {
	uint64_t off, len, next; /* bytes; next: first byte not yet issued */
	unsigned pending;        /* pieces in flight */
	uint64_t spoiled[RUN_BITS / 64]; /* by region of the run */
	struct list link;        /* repl.rs_runs */
};

/* A resync piece (run != NULL) or a verify request (run == NULL).
 * Phases: READ (local read) -> CSUM (digest sent, verdict awaited) and/or
 * DATA (RS_DATA or RS_ZERO sent, ack awaited). */
enum rq_phase { RQ_READ = 0, RQ_CSUM, RQ_DATA };

struct rsreq {
	struct vol_io io;
	struct repl *r;
	struct rsrun *run;
	uint8_t phase;
	bool zero;      /* all zero at the source: RS_ZERO, no payload */
	int ares;       /* the peer's answer */
	uint64_t sent_ns, acked_ns;
	uint8_t digest[REPL_DIGEST_LEN];
	struct list link; /* repl.rs_inflight */
};

enum vfy_state { VFY_NONE = 0, VFY_RUNNING, VFY_DONE, VFY_ABORTED };

struct rconn {
	struct net_conn net;
	struct repl *r;           /* bound volume; NULL until HELLO on the accepting side */
	struct repl_server *srv;  /* accepting side */
	bool dialer;
	uint64_t features; /* both sides know these */
	enum stage stage;
	bool got_auth, sent_bm, got_bm_end, aborted, net_closed, in_srv, checked_decision;
	enum repl_rep_state decided; /* what this side's handshake decided */
	uint8_t sent_disk;           /* the disk state in the last STATE sent */
	unsigned target_fails;       /* applies that failed while sync target (R10) */
	uint8_t nonce_me[REPL_NONCE_LEN], nonce_peer[REPL_NONCE_LEN];
	char peer_node[REPL_NAME_LEN];
	struct repl_state pst;
	struct repl_msg m;
	bool have_hdr;
	/* apply side */
	struct list applying, apply_wait;
	unsigned napply;
	uint64_t apply_bytes;
	struct rapply *rx_cur;
	/* batched acks, sent at the end of the loop pass */
	struct rmsg *ack;
	uint32_t nack;
	struct ev_deferred ack_flush, reap;
	uint64_t last_rx_bytes, last_rx_ns;
	uint64_t napplied, last_napplied; /* applies completed (R12) */
	uint64_t born_ns; /* a handshake must be done within the peer timeout of this */
	uint64_t order;   /* bound to its volume after every connection of a smaller one */
	struct list link; /* in the server's list, then in repl.bound */
};

struct repl {
	struct ev_loop *ev;
	const struct cfg *cfg;
	struct vol *v;
	unsigned self, peer_ix;
	bool dialer;
	char secret[CFG_NAME_MAX * 2];
	uint64_t timeout_ns;
	struct bm *bm;
	enum repl_conn_state cs;
	enum repl_rep_state rs;
	bool admin_down, shutting_down;
	struct rconn *conn;
	/* dialing */
	int dial_fd;
	struct ev_op dial_op, cancel_op;
	bool dialing;
	struct ev_timer retry;
	unsigned backoff_ms;
	struct sockaddr_storage dial_sa;
	socklen_t dial_salen;
	/* what the peer said last */
	bool have_peer;
	struct repl_state peer;
	char error[200];
	bool split_brain;
	/* write path */
	uint64_t next_seq;
	struct vol_io **slots;
	struct list inflight, waiting;
	/* resync (and verify: the same pump, window and requests) */
	struct list rs_inflight;      /* rsreq */
	struct list rs_runs;          /* rsrun */
	struct rsrun *rs_run;         /* pieces are being taken from this one */
	unsigned rs_flushing; /* RS_DONE flushes in flight */
	uint64_t rs_bytes, rs_cursor, rs_total, rs_done_bytes;
	uint64_t rs_sent_bytes, rs_zero_bytes, rs_same_bytes; /* this connection */
	struct rsctl ctl;
	struct ev_timer ctl_timer;
	bool ctl_armed, csum;
	uint64_t features;            /* negotiated with the peer of this connection */
	/* verify */
	enum vfy_state vfy;
	uint64_t vfy_cursor, vfy_done, vfy_ranges, vfy_bytes, vfy_t0, vfy_t1;
	uint64_t *vfy_redo;           /* offsets to compare again */
	unsigned vfy_nredo, vfy_redo_cap;
	uint64_t rate_t0, rate_b0, rate_bps;
	uint64_t rs_cap;              /* resync-rate: bytes/s, 0 = auto */
	double rs_tokens;             /* token bucket for rs_cap */
	uint64_t rs_tokens_ns;
	uint64_t rs_hold_ns;          /* no resync requests before this (the peer failed one) */
	struct ev_deferred rs_kick, drop_kick;
	/* keepalive and cleaner */
	struct ev_timer tick;
	uint64_t last_ping_ns, last_clean_ns, last_progress_ns, ping_cookie;
	uint64_t *busy;
	bool cleaning, clean_failed, demote_flushing;
	unsigned clean_parts;
	struct vol_io clean_local, clean_peer;
	struct bm_waiter clean_w;
	/* orderly disconnect (repl_disconnect on an in-sync primary): a FLUSH to
	 * the peer first; what was written since it started is all that the peer
	 * may lack once the connection is gone (R7) */
	bool draining, drain_clean;
	uint64_t drain_t0;
	uint64_t *drain_touched; /* regions written since the drain began */
	struct vol_io drain_flush;
	unsigned nbound;   /* connections bound to this volume, alive or draining */
	uint64_t conn_order; /* the last rconn.order given */
	struct list bound; /* ... all of them (rconn.link) */
	struct bufpool pool; /* data buffers of resync and applied requests */
	/* demotion: the peer has heard of it once its pong for this cookie is back */
	uint64_t demote_cookie;
};

struct repl_server {
	struct ev_loop *ev;
	const struct cfg *cfg;
	unsigned self;
	struct net_listener lis;
	struct vol *vols[CFG_MAX_VOLUMES];
	unsigned nvols;
	struct list conns; /* not yet bound to a volume */
	unsigned nconns;
	struct ev_timer sweep; /* drops connections that never say HELLO */
	uint64_t timeout_ns;
};

static void conn_lost(struct repl *r, const char *why);
static void conn_fail(struct rconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rs_pump(struct repl *r);
static void oos_mark(struct repl *r, uint64_t off, uint64_t len);
static void fg_unblock(struct repl *r);
static void schedule_dial(struct repl *r);

const char *repl_conn_name(enum repl_conn_state s)
{
	static const char *const n[] = { "standalone", "connecting", "connected" };
	return (unsigned)s < ARRAY_SIZE(n) ? n[s] : "?";
}

const char *repl_rep_name(enum repl_rep_state s)
{
	static const char *const n[] = { "off", "established", "syncsource", "synctarget",
					 "verifying" };
	return (unsigned)s < ARRAY_SIZE(n) ? n[s] : "?";
}

static const char *peer_name(const struct repl *r)
{
	return r->cfg->nodes[r->peer_ix].name;
}

static bool overlap(uint64_t a, uint64_t al, uint64_t b, uint64_t bl)
{
	return a < b + bl && b < a + al;
}

static void set_rs(struct repl *r, enum repl_rep_state s)
{
	if (r->rs == s)
		return;
	log_info("volume %s: replication with %s: %s -> %s", r->v->name, peer_name(r),
		 repl_rep_name(r->rs), repl_rep_name(s));
	vol_event(r->v, "replication", repl_rep_name(r->rs), repl_rep_name(s), NULL);
	r->rs = s;
}

static void set_cs(struct repl *r, enum repl_conn_state s)
{
	if (r->cs == s)
		return;
	log_info("volume %s: connection to %s: %s -> %s", r->v->name, peer_name(r),
		 repl_conn_name(r->cs), repl_conn_name(s));
	vol_event(r->v, "connection", repl_conn_name(r->cs), repl_conn_name(s), NULL);
	r->cs = s;
}

/* ---- small messages ---- */

static void rmsg_done(struct net_tx *tx, int err)
{
	(void)err;
	free(container_of(tx, struct rmsg, tx));
}

static struct rmsg *rmsg_new(uint32_t cap)
{
	struct rmsg *m = malloc(sizeof(*m) + cap);
	if (m) {
		m->len = 0;
		m->cap = cap;
	}
	return m;
}

static bool conn_usable(const struct rconn *c)
{
	return c && !c->aborted && !c->net.closing && !c->net.closed;
}

static void rmsg_send(struct rconn *c, struct rmsg *m)
{
	m->tx.iov[0].iov_base = m->buf;
	m->tx.iov[0].iov_len = m->len;
	m->tx.iovcnt = 1;
	m->tx.done = rmsg_done;
	net_send(&c->net, &m->tx);
}

static void send_small(struct rconn *c, const uint8_t *buf, size_t len)
{
	struct rmsg *m;

	if (!conn_usable(c))
		return;
	m = rmsg_new((uint32_t)len);
	if (!m) {
		conn_fail(c, "out of memory");
		return;
	}
	memcpy(m->buf, buf, len);
	m->len = (uint32_t)len;
	rmsg_send(c, m);
}

/* The volume attributes to the peer (primary only). */
static void meta_send(struct repl *r, struct rconn *c)
{
	struct rmsg *m;
	size_t n;

	/* always, even empty: the peer may hold attributes this primary dropped */
	if (r->v->role != VOL_PRIMARY || !conn_usable(c) || !(c->features & REPL_FEAT_META))
		return;
	m = rmsg_new(32 + r->v->meta_len);
	if (!m) {
		conn_fail(c, "out of memory");
		return;
	}
	n = repl_enc_meta_hdr(m->buf, r->v->meta_len);
	memcpy(m->buf + n, r->v->meta, r->v->meta_len);
	m->len = (uint32_t)(n + r->v->meta_len);
	rmsg_send(c, m);
}

void repl_meta_changed(struct repl *r)
{
	if (r->conn && r->conn->stage == ST_RUN)
		meta_send(r, r->conn);
}

/* ---- generations and persistent state ---- */

static struct md_sb *sb(struct repl *r)
{
	return &r->v->md->sb;
}

/* A primary writing without its peer starts a new data generation, so that
 * the peer's copy is recognised as older (gen_branch in repl_gen.h). */
static void gen_branch(struct repl *r)
{
	if (sb(r)->gen_bitmap != GEN_NONE)
		return;
	sb(r)->gen_bitmap = sb(r)->gen_current;
	sb(r)->gen_current = md_new_gen();
	log_info("volume %s: writing without %s: new data generation %016llx (bitmap %016llx)",
		 r->v->name, peer_name(r), (unsigned long long)sb(r)->gen_current,
		 (unsigned long long)sb(r)->gen_bitmap);
	vol_md_write(r->v);
}

/* A pair created empty leaves the shared "empty" generation once its primary
 * is connected, so that a replaced empty disk is told apart later: both
 * sides move to a new generation (SET_GEN). */
static void gen_rotate(struct repl *r, struct rconn *c)
{
	uint8_t b[64];
	uint64_t g;

	if (r->v->role != VOL_PRIMARY || sb(r)->gen_current != GEN_EMPTY)
		return;
	g = md_new_gen();
	gen_push_history(sb(r)->gen_history, sb(r)->gen_current);
	sb(r)->gen_current = g;
	if (vol_md_write(r->v))
		return; /* the disk is failed (V4): nothing to tell the peer */
	send_small(c, b, repl_enc_gen(b, REPL_SET_GEN, g, GEN_EMPTY));
}

/* The data area is a consistent image (whatever it may lack). */
static bool disk_consistent(enum vol_disk d)
{
	return d == VOL_UPTODATE || d == VOL_OUTDATED || d == VOL_CONSISTENT;
}

static void fill_state(struct repl *r, struct repl_state *s)
{
	const struct md_sb *m = sb(r);

	memset(s, 0, sizeof(*s));
	s->size = r->v->size;
	s->gen_current = m->gen_current;
	s->gen_bitmap = m->gen_bitmap;
	for (unsigned i = 0; i < REPL_HISTORY; i++)
		s->gen_history[i] = m->gen_history[i];
	if (r->v->disk == VOL_UPTODATE)
		s->flags |= REPL_ST_UPTODATE;
	if (disk_consistent(r->v->disk))
		s->flags |= REPL_ST_CONSISTENT;
	if (r->v->disk == VOL_CONSISTENT)
		s->flags |= REPL_ST_UNVERIFIED;
	if (r->v->crashed_primary)
		s->flags |= REPL_ST_CRASHED_PRIMARY;
	s->role = r->v->role == VOL_PRIMARY ? REPL_ROLE_PRIMARY : REPL_ROLE_SECONDARY;
	s->disk = (uint8_t)r->v->disk;
	s->bm_granularity = bm_granularity(r->bm);
	s->oos_bits = 0;
	for (uint64_t i = 0; i < bm_words(r->bm); i++)
		s->oos_bits += (uint64_t)__builtin_popcountll(bm_disk_word(r->bm, i));
}

static void send_state(struct rconn *c)
{
	uint8_t b[REPL_ENC_MAX];
	struct repl_state s;

	fill_state(c->r, &s);
	c->sent_disk = s.disk;
	send_small(c, b, repl_enc_state(b, &s));
}

/* ---- connection life ---- */

static void reap_fn(struct ev_deferred *d)
{
	struct rconn *c = container_of(d, struct rconn, reap);

	if (!c->net_closed || c->napply)
		return;
	if (c->rx_cur) { /* closed in the middle of a payload */
		c->apply_bytes -= c->rx_cur->io.len;
		bufpool_put(&c->r->pool, c->rx_cur->io.buf, c->rx_cur->io.len);
		free(c->rx_cur);
		c->rx_cur = NULL;
	}
	list_del(&c->link);
	if (c->in_srv)
		c->srv->nconns--;
	if (c->r)
		c->r->nbound--;
	ev_undefer(c->net.ev, &c->ack_flush);
	free(c->ack);
	net_conn_destroy(&c->net);
	free(c);
}

static void on_closed(struct net_conn *nc)
{
	struct rconn *c = container_of(nc, struct rconn, net);

	c->net_closed = true;
	if (c->r && c->r->conn == c)
		conn_lost(c->r, "connection closed");
	ev_defer(nc->ev, &c->reap);
}

static void conn_abort(struct rconn *c)
{
	if (c->aborted)
		return;
	c->aborted = true;
	if (c->r && c->r->conn == c)
		conn_lost(c->r, NULL);
	net_abort(&c->net);
}

static void conn_fail(struct rconn *c, const char *fmt, ...)
{
	char msg[REPL_MAX_ERROR + 1];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("replication%s%s%s%s: %s", c->r ? " of volume " : "", c->r ? c->r->v->name : "",
		 c->peer_node[0] ? " with " : "", c->peer_node, msg);
	/* (as in conn_refuse: not for a connection no one authenticated) */
	if (c->r && (c->got_auth || c->dialer) && (c->r->conn == c || !c->r->conn))
		snprintf(c->r->error, sizeof(c->r->error), "%s", msg);
	conn_abort(c);
}

/* Refuses the peer: tells it why (ERROR), then closes once that is sent. */
static void conn_refuse(struct rconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void conn_refuse(struct rconn *c, const char *fmt, ...)
{
	char msg[REPL_MAX_ERROR + 1];
	uint8_t b[sizeof(struct repl_hdr) + REPL_MAX_ERROR];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("replication%s%s%s%s: refused: %s", c->r ? " of volume " : "",
		 c->r ? c->r->v->name : "", c->peer_node[0] ? " with " : "", c->peer_node, msg);
	/* Only a refusal of an authenticated peer, or of the one this node
	 * dialed, is the volume's error (not one of anyone who can reach the
	 * port and name the volume), as for REPL_ERROR. */
	if (c->r && (c->got_auth || (c->dialer && c == c->r->conn))) {
		char extra[REPL_MAX_ERROR + 64], e[REPL_MAX_ERROR + 1];
		size_t k = 0;
		snprintf(c->r->error, sizeof(c->r->error), "%s", msg);
		for (const char *p = msg; *p && k + 1 < sizeof(e); p++)
			if (*p != '"' && *p != '\\')
				e[k++] = *p;
		e[k] = '\0';
		snprintf(extra, sizeof(extra), "\"split_brain\":%s,\"error\":\"%s\"",
			 c->r->split_brain ? "true" : "false", e);
		vol_event(c->r->v, "refused", NULL, NULL, extra);
	}
	send_small(c, b, repl_enc_error(b, msg));
	if (c->r && c->r->conn == c)
		conn_lost(c->r, NULL);
	c->aborted = true;
	net_close(&c->net);
}

/* Copies a name into a NUL-padded wire field (the field is zeroed first). */
static void put_name(void *dst, const char *name)
{
	memcpy(dst, name, strnlen(name, REPL_NAME_LEN - 1));
}

static void hmac_for(const struct repl *r, const struct rconn *c, bool from_dialer,
		     const char *sender, uint8_t out[REPL_MAC_LEN])
{
	static const char tag[] = "tandem-repl-auth-1";
	uint8_t msg[sizeof(tag) + 1 + 2 * REPL_NONCE_LEN + 4 * REPL_NAME_LEN];
	const uint8_t *nd = c->dialer ? c->nonce_me : c->nonce_peer;
	const uint8_t *na = c->dialer ? c->nonce_peer : c->nonce_me;
	size_t n = 0;
	unsigned len = 0;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, tag, sizeof(tag) - 1);
	n = sizeof(tag) - 1;
	msg[n++] = from_dialer ? 'D' : 'A';
	memcpy(msg + n, nd, REPL_NONCE_LEN);
	n += REPL_NONCE_LEN;
	memcpy(msg + n, na, REPL_NONCE_LEN);
	n += REPL_NONCE_LEN;
	put_name(msg + n, r->cfg->cluster);
	n += REPL_NAME_LEN;
	put_name(msg + n, r->v->name);
	n += REPL_NAME_LEN;
	put_name(msg + n, sender);
	n += REPL_NAME_LEN;
	HMAC(EVP_sha256(), r->secret, (int)strlen(r->secret), msg, n, out, &len);
}

static void send_hello(struct rconn *c, const char *volume)
{
	uint8_t b[REPL_ENC_MAX];
	struct repl_hello h;
	const struct cfg *cfg = c->r ? c->r->cfg : c->srv->cfg;
	unsigned self = c->r ? c->r->self : c->srv->self;

	memset(&h, 0, sizeof(h));
	h.magic = REPL_HELLO_MAGIC;
	h.proto_min = REPL_PROTO_MIN;
	h.proto_max = REPL_PROTO_MAX;
	h.features = REPL_FEATURES_KNOWN;
	put_name(h.cluster, cfg->cluster);
	put_name(h.node, cfg->nodes[self].name);
	put_name(h.volume, volume);
	memcpy(h.nonce, c->nonce_me, sizeof(h.nonce));
	send_small(c, b, repl_enc_hello(b, &h));
}

static void send_auth(struct rconn *c)
{
	uint8_t b[REPL_ENC_MAX];
	struct repl_auth a;

	hmac_for(c->r, c, c->dialer, c->r->cfg->nodes[c->r->self].name, a.mac);
	send_small(c, b, repl_enc_auth(b, &a));
}

/* Sends the disk view of the change bitmap: every region that may differ. */
static void send_bitmap(struct rconn *c)
{
	struct bm *bm = c->r->bm;
	uint64_t nw = bm_words(bm), i = 0;
	uint8_t b[16];

	while (i < nw) {
		uint64_t start, n = 0;
		struct rmsg *m;
		while (i < nw && bm_disk_word(bm, i) == 0)
			i++;
		if (i == nw)
			break;
		start = i;
		while (i < nw && n < REPL_MAX_BITMAP_WORDS && bm_disk_word(bm, i) != 0) {
			i++;
			n++;
		}
		m = rmsg_new((uint32_t)(32 + n * 8));
		if (!m) {
			conn_fail(c, "out of memory");
			return;
		}
		m->len = (uint32_t)repl_enc_bitmap(m->buf, start, (uint32_t)n);
		for (uint64_t k = 0; k < n; k++) {
			repl_put_word(m->buf + m->len, bm_disk_word(bm, start + k));
			m->len += 8;
		}
		rmsg_send(c, m);
	}
	send_small(c, b, repl_enc_empty(b, REPL_BITMAP_END));
	c->sent_bm = true;
}

static struct rconn *rconn_new(void)
{
	struct rconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->born_ns = now_ns();
	list_init(&c->applying);
	list_init(&c->apply_wait);
	list_init(&c->link);
	if (getrandom(c->nonce_me, sizeof(c->nonce_me), 0) != (ssize_t)sizeof(c->nonce_me)) {
		free(c);
		return NULL;
	}
	return c;
}

/* ---- the primary's write path ---- */

static bool peer_ready(const struct repl *r)
{
	return conn_usable(r->conn) && r->conn->stage == ST_RUN &&
	       (r->rs == RR_ESTABLISHED || r->rs == RR_SYNCSOURCE);
}

static uint64_t slot_of(uint64_t seq)
{
	return seq & (NSLOTS - 1);
}

/* Takes a sequence number and a slot for a request to the peer; false when
 * the window is full (then the peer is treated as gone for this request). */
static bool slot_take(struct repl *r, struct vol_io *io)
{
	uint64_t seq = r->next_seq + 1;

	if (r->slots[slot_of(seq)])
		return false;
	r->next_seq = seq;
	io->rep.seq = seq;
	r->slots[slot_of(seq)] = io;
	return true;
}

static void fg_finish(struct repl *r, struct vol_io *io)
{
	list_del(&io->rep.link);
	/* A whole region overwritten on both copies is in sync by definition;
	 * one that only the peer has is not. */
	if (io->rep.peer_ok && io->rep.lres == 0 && (io->type == BS_WRITE || io->type == BS_ZERO))
		bm_clear_oos(r->bm, io->off, io->len);
	else if (io->rep.peer_ok && io->rep.lres != 0 && io->type != BS_FLUSH)
		oos_mark(r, io->off, io->len);
	/* The controller's signal: what a replicated request took end to end. */
	if (io->rep.peer_ok && r->ctl_armed)
		rsctl_fg_done(&r->ctl, ev_now(r->ev) - io->rep.t0,
			      io->type == BS_WRITE ? io->len : 0);
	vol_complete(io, io->rep.lres);
	fg_unblock(r);
	if (r->rs == RR_SYNCSOURCE || r->vfy == VFY_RUNNING)
		ev_defer(r->ev, &r->rs_kick);
}

static void fg_put(struct repl *r, struct vol_io *io)
{
	if (--io->rep.pending == 0)
		fg_finish(r, io);
}

static void fg_local_done(struct vol_io *io, int res)
{
	io->rep.lres = res;
	fg_put(io->vol->repl, io);
}

static void fg_tx_done(struct net_tx *tx, int err)
{
	struct vol_io *io = container_of(tx, struct vol_io, rep.tx);
	(void)err;
	fg_put(io->vol->repl, io);
}

static void fg_send(struct repl *r, struct vol_io *io)
{
	struct repl_io w;
	uint16_t type;
	size_t n;

	if (io->type == BS_FLUSH) {
		if (!slot_take(r, io))
			goto no_peer;
		n = repl_enc_flush(io->rep.hdr, io->rep.seq);
	} else {
		if ((io->type == BS_WRITE ? io->len > REPL_MAX_DATA : io->len > UINT32_MAX - 4095) ||
		    !slot_take(r, io))
			goto no_peer;
		type = io->type == BS_WRITE ? REPL_WRITE : io->type == BS_TRIM ? REPL_TRIM : REPL_ZERO;
		w.seq = io->rep.seq;
		w.off = io->off;
		w.len = (uint32_t)io->len;
		w.flags = (io->flags & BS_F_FUA) ? REPL_F_FUA : 0;
		n = repl_enc_io(io->rep.hdr, type, &w);
	}
	io->rep.pending += 2; /* the ack and the send */
	io->rep.tx.iov[0].iov_base = io->rep.hdr;
	io->rep.tx.iov[0].iov_len = n;
	io->rep.tx.iovcnt = 1;
	if (io->type == BS_WRITE) {
		io->rep.tx.iov[1].iov_base = io->buf;
		io->rep.tx.iov[1].iov_len = io->len;
		io->rep.tx.iovcnt = 2;
	}
	io->rep.tx.done = fg_tx_done;
	net_send(&r->conn->net, &io->rep.tx);
	return;
no_peer:
	/* Cannot be sent on this connection (the request window is full, or a
	 * request beyond what the protocol carries): the region is out of sync,
	 * and the connection starts over so that a resync copies it. */
	if (io->type != BS_FLUSH) {
		gen_branch(r);
		bm_set_oos(r->bm, io->off, io->len);
	}
	log_warn("volume %s: request of %llu bytes cannot be sent to %s (window full or too "
		 "large); reconnecting to resync it",
		 r->v->name, (unsigned long long)io->len, peer_name(r));
	/* Not from here: this runs inside the write path's own list walks. */
	ev_defer(r->ev, &r->drop_kick);
}

static void drop_kick_fn(struct ev_deferred *d)
{
	struct repl *r = container_of(d, struct repl, drop_kick);
	if (r->conn)
		conn_fail(r->conn, "reconnecting to resync what could not be sent");
}

static void fg_go(struct repl *r, struct vol_io *io)
{
	io->rep.pending = 1;
	if (peer_ready(r)) {
		fg_send(r, io);
	} else if (io->type != BS_FLUSH) {
		gen_branch(r); /* the first write without the peer starts a generation */
		bm_set_oos(r->bm, io->off, io->len);
	}
	vol_local(r->v, io, fg_local_done);
}

static void fg_bm_done(struct bm_waiter *w, int err)
{
	struct vol_io *io = container_of(w, struct vol_io, rep.bmw);
	struct repl *r = io->vol->repl;

	if (err) {
		list_del(&io->rep.link);
		vol_complete(io, -EIO);
		fg_unblock(r);
		return;
	}
	fg_go(r, io);
}

static void fg_start(struct repl *r, struct vol_io *io)
{
	struct list *pos, *tmp;

	list_add_tail(&r->inflight, &io->rep.link);
	if (r->draining)
		bm_mark_range(r->drain_touched, r->bm, io->off, io->len);
	/* R4: resync and verify reads of this region whose data is not yet
	 * sent are now stale. Resync data already sent keeps its place ahead of
	 * this write on the wire: the peer applies overlapping messages in
	 * arrival order (R5), so data read before this write must arrive first. */
	list_for_each_safe(pos, tmp, &r->rs_inflight) {
		struct rsreq *q = container_of(pos, struct rsreq, link);
		if (!overlap(q->io.off, q->io.len, io->off, io->len))
			continue;
		if (q->phase != RQ_DATA)
			q->io.rep.stale = true;
		else if (r->conn)
			net_bulk_pin(&r->conn->net, &q->io.rep.tx);
	}

	io->rep.bmw.cb = fg_bm_done;
	if (bm_intent(r->bm, io->off, io->len, &io->rep.bmw))
		fg_go(r, io);
}

/* R3: overlaps a write in flight, or one waiting before it. */
static bool fg_conflicts(struct repl *r, struct vol_io *io, struct list *upto)
{
	struct list *pos, *tmp;

	list_for_each_safe(pos, tmp, &r->inflight) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		if (overlap(o->off, o->len, io->off, io->len))
			return true;
	}
	list_for_each_safe(pos, tmp, &r->waiting) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		if (pos == upto)
			break;
		if (overlap(o->off, o->len, io->off, io->len))
			return true;
	}
	return false;
}

static void fg_unblock(struct repl *r)
{
	struct list *pos, *tmp;

	list_for_each_safe(pos, tmp, &r->waiting) {
		struct vol_io *io = container_of(pos, struct vol_io, rep.link);
		if (fg_conflicts(r, io, pos))
			continue;
		list_del(pos);
		fg_start(r, io);
		/* fg_start may complete nothing synchronously, so the walk stays valid. */
	}
}

void repl_submit(struct repl *r, struct vol_io *io)
{
	memset(&io->rep, 0, sizeof(io->rep));
	io->rep.kind = K_FG;
	io->rep.t0 = ev_now(r->ev);
	list_init(&io->rep.link);
	if (io->type == BS_FLUSH) {
		fg_go(r, io);
		return;
	}
	if (fg_conflicts(r, io, &r->waiting)) {
		list_add_tail(&r->waiting, &io->rep.link);
		return;
	}
	fg_start(r, io);
}

/* ---- resync and verify: the source side ---- */

static void digest_of(const void *buf, size_t len, uint8_t out[REPL_DIGEST_LEN])
{
	unsigned n = REPL_DIGEST_LEN;
	if (!EVP_Digest(buf, len, out, &n, EVP_sha256(), NULL))
		memset(out, 0, REPL_DIGEST_LEN); /* never equal to a real digest by chance */
}

static bool all_zero(const uint8_t *p, size_t len)
{
	return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

/* The source holds nothing but zeros there (a hole or a zeroed extent). */
static bool region_unmapped(struct repl *r, uint64_t off, uint64_t len)
{
	struct bs_extent ext[2];
	unsigned n = 0;

	if (vol_block_status(r->v, off, len, ext, 2, &n) || n == 0)
		return false;
	return ext[0].len >= len && (ext[0].flags & (BS_EXT_HOLE | BS_EXT_ZERO));
}

static void ctl_arm(struct repl *r)
{
	if (r->ctl_armed)
		return;
	r->ctl_armed = true;
	rsctl_init(&r->ctl, MAX(RS_MIN_PIECE, r->v->min_block), RS_MAX_PIECE, ev_now(r->ev));
	ev_timer_arm(r->ev, &r->ctl_timer, RSCTL_INTERVAL_NS);
}

static void ctl_tick(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, ctl_timer);

	if (!(r->rs == RR_SYNCSOURCE || r->vfy == VFY_RUNNING) || !peer_ready(r)) {
		r->ctl_armed = false;
		return;
	}
	rsctl_interval(&r->ctl, ev_now(r->ev), r->rs_bytes, !list_empty(&r->inflight));
	ev_timer_arm(r->ev, &r->ctl_timer, RSCTL_INTERVAL_NS);
	rs_pump(r);
}

/* A run is done when all its pieces are: its regions are in sync unless
 * something spoiled it. */
static void run_spoil(struct repl *r, struct rsrun *run, uint64_t off, uint64_t len)
{
	uint64_t gran = bm_granularity(r->bm);
	uint64_t a = MAX(off, run->off), b = MIN(off + len, run->off + run->len);

	for (uint64_t i = (a - run->off) / gran; a < b && i * gran < b - run->off; i++)
		run->spoiled[i / 64] |= 1ull << (i % 64);
}

static void run_spoil_all(struct repl *r, struct rsrun *run)
{
	(void)r;
	memset(run->spoiled, 0xff, sizeof(run->spoiled));
}

/* A region the peer lacks after all (a foreground write failed on a node):
 * marked, and no run in flight may clear it. */
static void oos_mark(struct repl *r, uint64_t off, uint64_t len)
{
	struct list *pos, *tmp;

	bm_set_oos(r->bm, off, len);
	list_for_each_safe(pos, tmp, &r->rs_runs) {
		struct rsrun *run = container_of(pos, struct rsrun, link);
		if (overlap(run->off, run->len, off, len))
			run_spoil(r, run, off, len);
	}
}

/* Every extent of the activity log is marked (what a peer may not have made
 * durable), and no run in flight there may clear it. */
static void al_mark(struct repl *r)
{
	struct list *pos, *tmp;

	bm_al_to_oos(r->bm);
	list_for_each_safe(pos, tmp, &r->rs_runs)
		run_spoil_all(r, container_of(pos, struct rsrun, link));
}

static void run_put(struct repl *r, struct rsrun *run)
{
	uint64_t gran = bm_granularity(r->bm), n;

	if (run->pending || run->next < run->off + run->len)
		return;
	if (r->rs_run == run)
		r->rs_run = NULL;
	list_del(&run->link);
	n = (run->len + gran - 1) / gran;
	for (uint64_t i = 0; i < n && r->rs == RR_SYNCSOURCE;) {
		uint64_t j = i;
		while (j < n && !(run->spoiled[j / 64] & (1ull << (j % 64))))
			j++;
		if (j > i)
			bm_clear_oos(r->bm, run->off + i * gran,
				     MIN((j - i) * gran, run->off + run->len - (run->off + i * gran)));
		i = j + 1;
	}
	free(run);
}

static void vfy_redo(struct repl *r, uint64_t off)
{
	if (r->vfy_nredo == r->vfy_redo_cap) {
		unsigned cap = r->vfy_redo_cap ? r->vfy_redo_cap * 2 : 64;
		uint64_t *n = realloc(r->vfy_redo, cap * sizeof(*n));
		if (!n) {
			log_warn("volume %s: verify: out of memory; offset %llu not compared",
				 r->v->name, (unsigned long long)off);
			return;
		}
		r->vfy_redo = n;
		r->vfy_redo_cap = cap;
	}
	r->vfy_redo[r->vfy_nredo++] = off;
}

static void rs_end(struct repl *r, struct rsreq *q, bool ok)
{
	list_del(&q->link);
	r->rs_bytes -= q->io.len;
	if (q->io.buf)
		bufpool_put(&r->pool, q->io.buf, q->io.len);
	if (q->run) {
		q->run->pending--;
		if (ok)
			r->rs_done_bytes += q->io.len;
		else
			run_spoil(r, q->run, q->io.off, q->io.len);
		run_put(r, q->run);
	}
	free(q);
	ev_defer(r->ev, &r->rs_kick);
}

static void rs_put(struct repl *r, struct rsreq *q);

static void rs_tx_done(struct net_tx *tx, int err)
{
	struct vol_io *io = container_of(tx, struct vol_io, rep.tx);
	struct rsreq *q = container_of(io, struct rsreq, io);
	(void)err;
	rs_put(q->r, q);
}

/* Takes a sequence number for q's next message and fills its fixed part;
 * false (q ended) when the request window is full. */
static bool rs_prepare(struct repl *r, struct rsreq *q, enum rq_phase phase, struct repl_io *w)
{
	if (!slot_take(r, &q->io)) {
		rs_end(r, q, false);
		return false;
	}
	q->phase = phase;
	q->ares = -ECONNRESET;
	w->seq = q->io.rep.seq;
	w->off = q->io.off;
	w->len = (uint32_t)q->io.len;
	w->flags = 0;
	q->io.rep.pending = 2; /* the send and the ack */
	q->io.rep.tx.iov[0].iov_base = q->io.rep.hdr;
	q->io.rep.tx.iovcnt = 1;
	q->io.rep.tx.done = rs_tx_done;
	return true;
}

/* Queues q's message (header of hdr_len bytes, iov[1] if set) in the
 * background queue. */
static void rs_queue(struct repl *r, struct rsreq *q, size_t hdr_len)
{
	q->io.rep.tx.iov[0].iov_len = hdr_len;
	q->sent_ns = ev_now(r->ev);
	net_send_bulk(&r->conn->net, &q->io.rep.tx);
}

/* Sends the piece's data (or RS_ZERO). */
static void rs_send_data(struct repl *r, struct rsreq *q)
{
	struct repl_io w;
	size_t n;

	if (!rs_prepare(r, q, RQ_DATA, &w))
		return;
	n = repl_enc_io(q->io.rep.hdr, q->zero ? REPL_RS_ZERO : REPL_RS_DATA, &w);
	if (!q->zero) {
		q->io.rep.tx.iov[1].iov_base = q->io.buf;
		q->io.rep.tx.iov[1].iov_len = q->io.len;
		q->io.rep.tx.iovcnt = 2;
		r->rs_sent_bytes += q->io.len;
	} else {
		r->rs_zero_bytes += q->io.len;
	}
	rs_queue(r, q, n);
}

/* Sends the digest of what was read: the peer answers same or differs. */
static void rs_send_csum(struct repl *r, struct rsreq *q)
{
	struct repl_io w;

	if (rs_prepare(r, q, RQ_CSUM, &w))
		rs_queue(r, q, repl_enc_csum(q->io.rep.hdr, &w, q->digest));
}

static void vfy_mismatch(struct repl *r, uint64_t off, uint64_t len)
{
	char extra[96];

	r->vfy_ranges++;
	r->vfy_bytes += len;
	bm_set_oos(r->bm, off, len);
	log_warn("volume %s: verify: %llu bytes at %llu differ on %s", r->v->name,
		 (unsigned long long)len, (unsigned long long)off, peer_name(r));
	snprintf(extra, sizeof(extra), "\"offset\":%llu,\"length\":%llu",
		 (unsigned long long)off, (unsigned long long)len);
	vol_event(r->v, "verify-mismatch", NULL, NULL, extra);
}

/* Both the send and the answer are in: the next step of the request. */
static void rs_step(struct repl *r, struct rsreq *q)
{
	bool live = peer_ready(r);

	if (!q->run) { /* verify */
		if (q->ares == 0) {
			r->vfy_done += q->io.len;
		} else if (q->ares == REPL_ACK_DIFFERS && !q->io.rep.stale) {
			vfy_mismatch(r, q->io.off, q->io.len);
			r->vfy_done += q->io.len;
		} else if (live && r->vfy == VFY_RUNNING)
			vfy_redo(r, q->io.off); /* overtaken by a write, or the read failed */
		rs_end(r, q, q->ares == 0);
		return;
	}
	if (q->phase == RQ_CSUM) {
		if (q->ares == 0) {
			r->rs_same_bytes += q->io.len;
			rs_end(r, q, true);
		} else if (q->ares == REPL_ACK_DIFFERS && !q->io.rep.stale && live &&
			   r->rs == RR_SYNCSOURCE) {
			rs_send_data(r, q);
		} else {
			rs_end(r, q, false);
		}
		return;
	}
	if (q->ares == 0)
		rsctl_rs_acked(&r->ctl, q->zero ? 0 : q->acked_ns - q->sent_ns,
			       q->zero ? 64 : q->io.len, q->acked_ns);
	else if (q->ares < 0 && q->ares != -ECONNRESET && live && !r->rs_hold_ns) {
		/* The peer could not write it (a full disk, say): tried again
		 * in a second rather than at once, over and over. */
		log_warn("volume %s: %s failed a resync write: %s; retrying in 1 s", r->v->name,
			 peer_name(r), strerror(-q->ares));
		r->rs_hold_ns = ev_now(r->ev) + 1000000000ull;
	}
	rs_end(r, q, q->ares == 0);
}

static void rs_put(struct repl *r, struct rsreq *q)
{
	if (--q->io.rep.pending == 0)
		rs_step(r, q);
}

static void rs_acked(struct repl *r, struct rsreq *q, int res)
{
	uint64_t now = ev_now(r->ev);

	q->ares = res;
	q->acked_ns = now;
	if (now - r->rate_t0 >= 1000000000ull) {
		r->rate_bps = (r->rs_done_bytes - r->rate_b0) * 1000000000ull / (now - r->rate_t0);
		r->rate_t0 = now;
		r->rate_b0 = r->rs_done_bytes;
	}
	rs_put(r, q);
}

static void rs_read_done(struct vol_io *io, int res)
{
	struct rsreq *q = container_of(io, struct rsreq, io);
	struct repl *r = q->r;
	bool want = q->run ? r->rs == RR_SYNCSOURCE : r->vfy == VFY_RUNNING;

	if (res || io->rep.stale || !peer_ready(r) || !want) {
		if (!q->run && want && peer_ready(r))
			vfy_redo(r, q->io.off);
		rs_end(r, q, false);
		return;
	}
	if (!q->run) {
		digest_of(io->buf, io->len, q->digest);
		rs_send_csum(r, q);
		return;
	}
	q->zero = (r->features & REPL_FEAT_RESYNC2) && all_zero(io->buf, io->len);
	if (r->csum && !q->zero && (r->features & REPL_FEAT_RESYNC2)) {
		digest_of(io->buf, io->len, q->digest);
		rs_send_csum(r, q);
		return;
	}
	rs_send_data(r, q);
}

static bool busy_with(struct list *l, uint64_t off, uint64_t len)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, l) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		if (overlap(o->off, o->len, off, len))
			return true;
	}
	return false;
}

static bool run_overlaps(struct repl *r, uint64_t off, uint64_t len)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, &r->rs_runs) {
		struct rsrun *o = container_of(pos, struct rsrun, link);
		if (overlap(o->off, o->len, off, len))
			return true;
	}
	return false;
}

/* Room for another request of len bytes: the controller's window (one
 * request is always allowed unless it measures the foreground: C3), and
 * the configured cap's token bucket. */
static bool rs_room(struct repl *r, uint64_t len)
{
	if (r->ctl.quiet)
		return false;
	if (r->rs_cap && r->rs_tokens <= 0)
		return false;
	return r->rs_bytes == 0 || r->rs_bytes + len <= r->ctl.window;
}

static uint64_t piece_len(struct repl *r)
{
	uint64_t p = MIN((uint64_t)r->ctl.piece, MAX(r->ctl.window, (uint64_t)RS_MIN_PIECE));
	return MAX(p - p % r->v->min_block, (uint64_t)r->v->min_block);
}

/* Issues one request: a resync piece of run, or (run NULL) a verify read.
 * False when out of memory (the caller stops this pass). */
static bool rs_issue(struct repl *r, struct rsrun *run, uint64_t off, uint64_t len)
{
	struct rsreq *q = calloc(1, sizeof(*q));

	if (!q) {
		if (run)
			run_spoil(r, run, off, len);
		else
			vfy_redo(r, off);
		return false;
	}
	q->r = r;
	q->run = run;
	q->io.type = BS_READ;
	q->io.flags = BS_F_BULK;
	q->io.off = off;
	q->io.len = len;
	q->io.rep.kind = K_RS;
	if (run)
		run->pending++;
	list_add_tail(&r->rs_inflight, &q->link);
	r->rs_bytes += len;
	if (r->rs_cap)
		r->rs_tokens -= (double)len; /* may go negative: paid back before the next */
	if (run && (r->features & REPL_FEAT_RESYNC2) && region_unmapped(r, off, len)) {
		q->zero = true; /* nothing to read */
		rs_send_data(r, q);
		return true;
	}
	q->io.buf = bufpool_get(&r->pool, len);
	if (!q->io.buf) {
		if (!run)
			vfy_redo(r, off);
		rs_end(r, q, false);
		return false;
	}
	vol_local(r->v, &q->io, rs_read_done);
	return true;
}

/* The next run of marked regions from the cursor that nothing else is
 * writing or copying; NULL when none (this pass). */
static struct rsrun *rs_next_run(struct repl *r, uint64_t *scanned)
{
	uint64_t gran = bm_granularity(r->bm), nbits = bm_nbits(r->bm);

	while (*scanned < nbits) {
		int64_t b = bm_next_oos(r->bm, r->rs_cursor);
		uint64_t off, len, k = 1;
		struct rsrun *run;

		if (b < 0)
			return NULL;
		if ((uint64_t)b < r->rs_cursor)
			*scanned += nbits - r->rs_cursor + (uint64_t)b; /* wrapped */
		else
			*scanned += (uint64_t)b - r->rs_cursor;
		while (k * gran < RS_MAX_RUN && (uint64_t)b + k < nbits &&
		       bm_test_oos(r->bm, (uint64_t)b + k))
			k++;
		off = (uint64_t)b * gran;
		len = MIN(k * gran, r->v->size - off);
		r->rs_cursor = (uint64_t)b + k >= nbits ? 0 : (uint64_t)b + k;
		*scanned += k;
		/* R4: a region with a foreground write or a run in flight is
		 * taken on a later pass. */
		if (busy_with(&r->inflight, off, len) || run_overlaps(r, off, len))
			continue;
		run = calloc(1, sizeof(*run));
		if (!run)
			return NULL;
		run->off = off;
		run->len = len;
		run->next = off;
		list_add_tail(&r->rs_runs, &run->link);
		return run;
	}
	return NULL;
}

static void rs_finish(struct repl *r)
{
	uint8_t b[64];

	gen_push_history(sb(r)->gen_history, sb(r)->gen_bitmap);
	sb(r)->gen_bitmap = GEN_NONE;
	if (vol_md_write(r->v)) { /* the disk is failed (V4) */
		conn_fail(r->conn, "the end of the resync could not be recorded");
		return;
	}
	send_small(r->conn, b, repl_enc_gen(b, REPL_RS_DONE, sb(r)->gen_current, 0));
	log_info("volume %s: resync to %s done: %llu bytes (%llu sent as data, %llu as zero "
		 "extents, %llu found equal by digest)",
		 r->v->name, peer_name(r), (unsigned long long)r->rs_done_bytes,
		 (unsigned long long)r->rs_sent_bytes, (unsigned long long)r->rs_zero_bytes,
		 (unsigned long long)r->rs_same_bytes);
	r->rate_bps = 0;
	set_rs(r, RR_ESTABLISHED);
	r->peer.disk = VOL_UPTODATE;
}

static void rs_pump_resync(struct repl *r)
{
	uint64_t scanned = 0;

	if (r->rs_hold_ns) {
		if (ev_now(r->ev) < r->rs_hold_ns)
			return; /* the tick kicks again */
		r->rs_hold_ns = 0;
	}

	for (;;) {
		struct rsrun *run = r->rs_run;
		uint64_t len;

		if (!run || run->next >= run->off + run->len) {
			r->rs_run = NULL;
			run = rs_next_run(r, &scanned);
			if (!run)
				break;
			r->rs_run = run;
		}
		len = MIN(piece_len(r), run->off + run->len - run->next);
		if (!rs_room(r, len))
			break;
		if (busy_with(&r->inflight, run->next, len)) {
			/* a write is in flight there: this piece waits for a later
			 * pass */
			run_spoil(r, run, run->next, len);
			run->next += len;
			run_put(r, run);
			continue;
		}
		run->next += len;
		if (!rs_issue(r, run, run->next - len, len))
			return; /* out of memory: retried when a request completes */
		if (r->rs != RR_SYNCSOURCE || !peer_ready(r))
			return;
	}
	if (bm_oos_count(r->bm) == 0 && list_empty(&r->rs_inflight) && list_empty(&r->rs_runs))
		rs_finish(r);
}

/* The marked regions go to the connected peer now, from this node's data,
 * without a new handshake (RS_START: the peer becomes sync target). */
static void rs_start_live(struct repl *r)
{
	uint8_t b[64];

	send_small(r->conn, b, repl_enc_gen(b, REPL_RS_START, sb(r)->gen_current, 0));
	r->rs_total = bm_oos_count(r->bm);
	r->rs_done_bytes = r->rs_sent_bytes = r->rs_zero_bytes = r->rs_same_bytes = 0;
	r->rs_cursor = 0;
	r->peer.disk = VOL_INCONSISTENT;
	set_rs(r, RR_SYNCSOURCE);
	ev_defer(r->ev, &r->rs_kick);
}

/* R10: the peer failed io, a write or a flush of ours (foreground, cleaner
 * or drain). It marked its disk inconsistent before answering; here what it
 * lacks is marked (for a FLUSH, what it had not made durable: the extents of
 * the activity log) and copied to it again (now, or on the next connect). */
static void peer_failed(struct repl *r, const struct vol_io *io, int res)
{
	if (r->rs != RR_SYNCSOURCE) /* once, not per request */
		log_warn("volume %s: %s failed a %s: %s; it is not up to date until that is "
			 "resynced",
			 r->v->name, peer_name(r), io->type == BS_FLUSH ? "flush" : "write",
			 strerror(-res));
	if (io->type == BS_FLUSH)
		al_mark(r);
	else
		oos_mark(r, io->off, io->len);
	r->peer.disk = VOL_INCONSISTENT;
	if (r->rs == RR_SYNCSOURCE || r->vfy == VFY_RUNNING || !peer_ready(r))
		return; /* the running resync, or the one after verify, copies them */
	if (r->v->disk != VOL_UPTODATE)
		return; /* no source here: the next connect decides */
	if (r->rs == RR_ESTABLISHED && (r->features & REPL_FEAT_RESYNC2) &&
	    r->peer.role != REPL_ROLE_PRIMARY) {
		bm_flush(r->bm, NULL);
		rs_start_live(r);
		return;
	}
	gen_branch(r);
	ev_defer(r->ev, &r->drop_kick); /* a new handshake resyncs them */
}

static void vfy_finish(struct repl *r)
{
	char extra[192];

	r->vfy = VFY_DONE;
	r->vfy_t1 = ev_now(r->ev);
	log_info("volume %s: verify against %s done: %llu bytes compared, %llu ranges (%llu "
		 "bytes) differ",
		 r->v->name, peer_name(r), (unsigned long long)r->vfy_done,
		 (unsigned long long)r->vfy_ranges, (unsigned long long)r->vfy_bytes);
	snprintf(extra, sizeof(extra),
		 "\"compared_bytes\":%llu,\"mismatch_ranges\":%llu,\"mismatch_bytes\":%llu",
		 (unsigned long long)r->vfy_done, (unsigned long long)r->vfy_ranges,
		 (unsigned long long)r->vfy_bytes);
	vol_event(r->v, "verify", "running", "done", extra);
	vol_event(r->v, "replication", "verifying", "established", NULL);
	/* (regions a peer error marked meanwhile are copied too: R10) */
	if (!r->vfy_ranges && !bm_oos_count(r->bm))
		return;
	bm_flush(r->bm, NULL);
	if (r->peer.role == REPL_ROLE_PRIMARY || !(r->features & REPL_FEAT_RESYNC2)) {
		log_warn("volume %s: the differing ranges are marked out of sync; they are copied "
			 "from the primary on the next connect",
			 r->v->name);
		return;
	}
	rs_start_live(r);
}

static uint64_t vfy_chunk(struct repl *r)
{
	return MAX((uint64_t)VFY_CHUNK, (uint64_t)bm_granularity(r->bm));
}

static void vfy_pump(struct repl *r)
{
	uint64_t chunk = vfy_chunk(r);

	for (;;) {
		uint64_t off, len;
		bool redo = r->vfy_nredo > 0;

		if (redo)
			off = r->vfy_redo[r->vfy_nredo - 1];
		else if (r->vfy_cursor < r->v->size)
			off = r->vfy_cursor;
		else
			break;
		len = MIN(chunk, r->v->size - off);
		/* Verify moves digests, not data: its window bounds only the
		 * reads in flight on both nodes. */
		/* (a chunk larger than that, bitmap-granularity >= 16M, goes
		 * alone) */
		if (!rs_room(r, len) || (r->rs_bytes && r->rs_bytes + len > VFY_MAX_INFLIGHT) ||
		    busy_with(&r->inflight, off, len))
			return; /* kicked again when requests complete */
		if (redo)
			r->vfy_nredo--;
		else
			r->vfy_cursor += len;
		if (!rs_issue(r, NULL, off, len))
			return;
		if (r->vfy != VFY_RUNNING || !peer_ready(r))
			return;
	}
	if (list_empty(&r->rs_inflight))
		vfy_finish(r);
}

static void rs_kick_fn(struct ev_deferred *d)
{
	rs_pump(container_of(d, struct repl, rs_kick));
}

static void rs_pump(struct repl *r)
{
	if (!peer_ready(r))
		return;
	if (r->rs == RR_SYNCSOURCE) {
		ctl_arm(r);
		if (r->rs_cap) {
			/* A configured cap: a token bucket refilled at rs_cap bytes/s,
			 * holding at most one request or a quarter second of it. */
			uint64_t now = ev_now(r->ev);
			double burst = MAX((double)RS_MAX_PIECE, (double)r->rs_cap / 4);
			r->rs_tokens += (double)(now - r->rs_tokens_ns) * (double)r->rs_cap / 1e9;
			r->rs_tokens = MIN(r->rs_tokens, burst);
			r->rs_tokens_ns = now;
		}
		rs_pump_resync(r);
	} else if (r->rs == RR_ESTABLISHED && r->vfy == VFY_RUNNING) {
		ctl_arm(r);
		vfy_pump(r);
	}
}

/* ---- the secondary's apply path ---- */

static void ack_flush_fn(struct ev_deferred *d)
{
	struct rconn *c = container_of(d, struct rconn, ack_flush);
	struct rmsg *m = c->ack;

	c->ack = NULL;
	if (!m)
		return;
	repl_enc_ack_hdr(m->buf, c->nack);
	c->nack = 0;
	if (!conn_usable(c)) {
		free(m);
		return;
	}
	rmsg_send(c, m);
}

static void ack_add(struct rconn *c, uint64_t seq, int res)
{
	if (!conn_usable(c))
		return;
	if (c->ack && c->nack == REPL_MAX_ACKS)
		ack_flush_fn(&c->ack_flush);
	if (!c->ack) {
		c->ack = rmsg_new(sizeof(struct repl_hdr) + sizeof(struct repl_ack) +
				  REPL_MAX_ACKS * sizeof(struct repl_ack_entry));
		if (!c->ack) {
			conn_fail(c, "out of memory");
			return;
		}
		c->ack->len = sizeof(struct repl_hdr) + sizeof(struct repl_ack);
		c->nack = 0;
	}
	repl_enc_ack_entry(c->ack->buf + c->ack->len, seq, res);
	c->ack->len += sizeof(struct repl_ack_entry);
	c->nack++;
	ev_defer(c->net.ev, &c->ack_flush);
}

static bool list_overlaps(struct list *l, struct rapply *a)
{
	struct list *pos, *tmp;

	list_for_each_safe(pos, tmp, l) {
		struct rapply *o = container_of(pos, struct rapply, link);
		if (o->type == REPL_FLUSH)
			continue;
		if (a->type == REPL_FLUSH || overlap(o->io.off, o->io.len, a->io.off, a->io.len))
			return true;
	}
	return false;
}

static bool applying_overlaps(struct rconn *c, struct rapply *a)
{
	return list_overlaps(&c->applying, a);
}

static bool apply_conflicts(struct rconn *c, struct rapply *a, struct list *upto)
{
	struct list *pos, *tmp;

	/* R5: a FLUSH waits for everything before it; writes wait for earlier
	 * overlapping writes (and nothing waits for a FLUSH). "Before" includes
	 * what an older connection of this volume still applies: its writes
	 * are older than anything the new connection carries. */
	if (applying_overlaps(c, a))
		return true;
	if (c->r) {
		/* An older connection's writes, applying or still waiting for
		 * their turn, all come first; a newer one's never. */
		list_for_each_safe(pos, tmp, &c->r->bound) {
			struct rconn *o = container_of(pos, struct rconn, link);
			if (o != c && o->order < c->order &&
			    (applying_overlaps(o, a) || list_overlaps(&o->apply_wait, a)))
				return true;
		}
	}
	list_for_each_safe(pos, tmp, &c->apply_wait) {
		struct rapply *o = container_of(pos, struct rapply, link);
		if (pos == upto)
			break;
		if (o->type == REPL_FLUSH)
			continue;
		if (a->type == REPL_FLUSH || overlap(o->io.off, o->io.len, a->io.off, a->io.len))
			return true;
	}
	return false;
}

static void apply_start(struct rconn *c, struct rapply *a);

/* Starts the waiting applies of c that no longer conflict, in order. */
static void apply_rescan(struct rconn *c)
{
	struct list *pos, *tmp;

	list_for_each_safe(pos, tmp, &c->apply_wait) {
		struct rapply *w = container_of(pos, struct rapply, link);
		if (apply_conflicts(c, w, pos))
			continue;
		list_del(pos);
		apply_start(c, w);
	}
}

/* R10: a write, resync piece or flush of the primary failed here: this disk
 * lacks what the primary acknowledged, so it is inconsistent (persisted
 * before the answer goes out) until a resync completes, and the primary
 * hears of it. */
static void apply_failed(struct repl *r, struct rconn *c, const struct rapply *a, int res)
{
	if (c == r->conn && r->rs == RR_SYNCTARGET)
		c->target_fails++;
	if (disk_consistent(r->v->disk)) {
		log_warn("volume %s: %s of %llu bytes at %llu from %s failed here: %s", r->v->name,
			 a->type == REPL_FLUSH ? "flush" : "write", (unsigned long long)a->io.len,
			 (unsigned long long)a->io.off, c->peer_node, strerror(-res));
		vol_set_disk(r->v, VOL_INCONSISTENT);
	}
	/* (once per change of the disk state, not per failed request) */
	if (c == r->conn && conn_usable(c) && c->stage == ST_RUN && c->sent_disk != r->v->disk)
		send_state(c);
}

static void apply_done(struct vol_io *io, int res)
{
	struct rapply *a = container_of(io, struct rapply, io);
	struct rconn *c = a->c;
	struct list *pos, *tmp;

	list_del(&a->link);
	c->napply--;
	c->napplied++;
	c->apply_bytes -= a->type == REPL_WRITE || a->type == REPL_RS_DATA || a->type == REPL_CSUM ?
				  a->io.len : 0;
	/* Bits of the current session only: a lost connection's late apply
	 * says nothing about what the new one still has to copy. */
	if (res == 0 && c->r && c->r->conn == c && c->r->rs == RR_SYNCTARGET &&
	    (a->type == REPL_RS_DATA || a->type == REPL_WRITE || a->type == REPL_ZERO ||
	     a->type == REPL_RS_ZERO))
		bm_clear_oos(c->r->bm, a->io.off, a->io.len);
	if (res == 0 && a->type == REPL_CSUM) {
		uint8_t d[REPL_DIGEST_LEN];
		digest_of(a->io.buf, a->io.len, d);
		res = memcmp(d, a->digest, REPL_DIGEST_LEN) ? REPL_ACK_DIFFERS : 0;
	}
	if (res < 0 && c->r && a->type != REPL_CSUM)
		apply_failed(c->r, c, a, res);
	ack_add(c, a->seq, res);
	if (a->io.buf)
		bufpool_put(&c->r->pool, a->io.buf, a->io.len);
	free(a);
	apply_rescan(c);
	if (c->r) {
		struct list *p2, *t2;
		list_for_each_safe(p2, t2, &c->r->bound) {
			struct rconn *o = container_of(p2, struct rconn, link);
			if (o != c)
				apply_rescan(o);
		}
	}
	(void)pos;
	(void)tmp;
	if (c->net.rx_paused && c->apply_bytes < APPLY_MAX_BYTES / 2 && !c->aborted)
		net_rx_resume(&c->net);
	if (c->net_closed)
		ev_defer(c->net.ev, &c->reap);
}

static void apply_start(struct rconn *c, struct rapply *a)
{
	list_add_tail(&c->applying, &a->link);
	vol_local(c->r->v, &a->io, apply_done);
}

static void apply_queue(struct rconn *c, struct rapply *a)
{
	c->napply++;
	if (apply_conflicts(c, a, &c->apply_wait)) {
		list_add_tail(&c->apply_wait, &a->link);
		return;
	}
	apply_start(c, a);
}

static struct rapply *apply_new(struct rconn *c, const struct repl_msg *m)
{
	struct rapply *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->c = c;
	a->type = m->type;
	a->io.rep.kind = K_APPLY;
	if (m->type == REPL_FLUSH) {
		a->seq = m->u.flush.seq;
		a->io.type = BS_FLUSH;
		return a;
	}
	a->seq = m->u.io.seq;
	a->io.off = m->u.io.off;
	a->io.len = m->u.io.len;
	a->io.flags = (m->u.io.flags & REPL_F_FUA) ? BS_F_FUA : 0;
	if (m->type == REPL_RS_DATA || m->type == REPL_RS_ZERO)
		a->io.flags |= BS_F_BULK;
	switch (m->type) {
	case REPL_WRITE:
	case REPL_RS_DATA: a->io.type = BS_WRITE; break;
	case REPL_TRIM: a->io.type = BS_TRIM; break;
	case REPL_CSUM:
		a->io.type = BS_READ;
		a->io.flags = BS_F_BULK;
		memcpy(a->digest, m->digest, REPL_DIGEST_LEN);
		break;
	default: a->io.type = BS_ZERO; a->io.flags |= BS_F_MAY_TRIM; break;
	}
	return a;
}

static void data_rx_done(struct net_conn *nc, int err)
{
	struct rconn *c = container_of(nc, struct rconn, net);
	struct rapply *a = c->rx_cur;

	c->rx_cur = NULL;
	if (err) {
		c->apply_bytes -= a->io.len;
		bufpool_put(&c->r->pool, a->io.buf, a->io.len);
		free(a);
		return;
	}
	apply_queue(c, a);
	if (c->apply_bytes >= APPLY_MAX_BYTES)
		net_rx_pause(nc);
}

/* ---- handshake ---- */

static void fill_view(const struct repl_state *s, bool primary, struct gen_view *g)
{
	g->current = s->gen_current;
	g->bitmap = s->gen_bitmap;
	for (int i = 0; i < GEN_HISTORY; i++)
		g->history[i] = s->gen_history[i];
	g->primary = primary;
	g->crashed_primary = s->flags & REPL_ST_CRASHED_PRIMARY;
	g->has_bits = s->oos_bits != 0;
	g->inconsistent = !(s->flags & REPL_ST_CONSISTENT);
	g->unverified = !g->inconsistent && (s->flags & REPL_ST_UNVERIFIED);
	g->outdated = !g->inconsistent && !g->unverified && !(s->flags & REPL_ST_UPTODATE);
}

/* Both STATEs and both bitmaps are known: decide what this connection is. */
static void handshake_decide(struct rconn *c)
{
	struct repl *r = c->r;
	struct repl_state me;
	struct gen_view gm, gp;
	struct gen_decision d;
	bool me_first = strcmp(r->cfg->nodes[r->self].name, c->peer_node) < 0;

	fill_state(r, &me);
	/* The bitmap just merged is part of what this side knows to differ. */
	me.oos_bits += bm_oos_count(r->bm);
	fill_view(&me, r->v->role == VOL_PRIMARY, &gm);
	fill_view(&c->pst, c->pst.role == REPL_ROLE_PRIMARY, &gp);
	if (c->pst.size != r->v->size) {
		conn_refuse(c, "volume sizes differ: %llu here, %llu on %s",
			    (unsigned long long)r->v->size, (unsigned long long)c->pst.size,
			    c->peer_node);
		return;
	}
	if (c->pst.bm_granularity != bm_granularity(r->bm)) {
		conn_refuse(c, "bitmap granularities differ: %u here, %u on %s",
			    bm_granularity(r->bm), c->pst.bm_granularity, c->peer_node);
		return;
	}
	if (gm.primary && gp.primary) {
		r->split_brain = true;
		conn_refuse(c, "split brain: both nodes are primary");
		return;
	}
	d = gen_decide(&gm, &gp, me_first);
	switch (d.verdict) {
	case GEN_SPLIT_BRAIN:
		r->split_brain = true;
		conn_refuse(c, "split brain: both nodes wrote independently since generation "
			       "%016llx; run `tandemctl invalidate %s` on the node whose changes are "
			       "to be discarded",
			    (unsigned long long)(sb(r)->gen_bitmap ? sb(r)->gen_bitmap :
							       sb(r)->gen_history[0]),
			    r->v->name);
		return;
	case GEN_UNRELATED:
		conn_refuse(c, "unrelated data: generations %016llx here and %016llx on %s share no "
			       "history",
			    (unsigned long long)gm.current, (unsigned long long)gp.current,
			    c->peer_node);
		return;
	case GEN_NO_DATA:
		conn_refuse(c, "no consistent copy to resync from (the node with the newer data is "
			       "inconsistent or neither has data)");
		return;
	case GEN_TARGET:
		if (gm.primary) {
			conn_refuse(c, "this primary would become sync target of %s; demote it first",
				    c->peer_node);
			return;
		}
		break;
	case GEN_SOURCE:
		if (gp.primary) {
			conn_refuse(c, "primary %s would become sync target; demote it first",
				    c->peer_node);
			return;
		}
		break;
	case GEN_EQUAL:
		break;
	}
	r->split_brain = false;
	r->error[0] = '\0';
	r->backoff_ms = RETRY_MIN_MS;
	c->stage = ST_RUN;
	r->have_peer = true;
	r->peer = c->pst;
	r->features = c->features;
	set_cs(r, RC_CONNECTED);
	meta_send(r, c);
	log_info("volume %s: connected to %s (generations %016llx / %016llx: %s%s)", r->v->name,
		 c->peer_node, (unsigned long long)gm.current, (unsigned long long)gp.current,
		 gen_verdict_name(d.verdict), d.full ? ", full sync" : "");
	r->rs_done_bytes = r->rs_sent_bytes = r->rs_zero_bytes = r->rs_same_bytes = 0;
	r->rate_t0 = ev_now(r->ev);
	r->rate_b0 = 0;
	r->rate_bps = 0;
	r->rs_cursor = 0;
	switch (d.verdict) {
	case GEN_EQUAL:
		bm_clear_all_oos(r->bm);
		if (r->v->disk == VOL_OUTDATED || r->v->disk == VOL_CONSISTENT)
			vol_set_disk(r->v, VOL_UPTODATE);
		set_rs(r, RR_ESTABLISHED);
		gen_rotate(r, c);
		break;
	case GEN_SOURCE:
		/* The peer's copy is older than this one: nothing newer exists. */
		if (r->v->disk == VOL_CONSISTENT)
			vol_set_disk(r->v, VOL_UPTODATE);
		if (d.full)
			bm_set_all(r->bm);
		bm_flush(r->bm, NULL);
		r->rs_total = bm_oos_count(r->bm);
		set_rs(r, RR_SYNCSOURCE);
		r->peer.disk = VOL_INCONSISTENT;
		ev_defer(r->ev, &r->rs_kick);
		break;
	case GEN_TARGET:
		if (d.full)
			bm_set_all(r->bm);
		bm_flush(r->bm, NULL);
		r->rs_total = bm_oos_count(r->bm);
		vol_set_disk(r->v, VOL_INCONSISTENT);
		c->target_fails = 0;
		set_rs(r, RR_SYNCTARGET);
		break;
	default:
		break;
	}
	c->decided = r->rs;
	/* Tell the peer the state this side is in now. */
	send_state(c);
}

static int on_hello(struct rconn *c, const struct repl_hello *h);

struct rsdone {
	struct vol_io io;
	struct repl *r;
	struct rconn *c; /* the session it belongs to (compared, never dereferenced) */
	uint64_t gen;
};

static void rs_done_flushed(struct vol_io *io, int res)
{
	struct rsdone *d = container_of(io, struct rsdone, io);
	struct repl *r = d->r;
	uint64_t gen = d->gen;

	struct rconn *c = d->c;

	free(d);
	r->rs_flushing--;
	/* Only for the session that sent RS_DONE: a later one has its own. */
	if (c != r->conn || !conn_usable(c) || c->stage != ST_RUN || r->rs != RR_SYNCTARGET)
		return;
	if (res) {
		conn_fail(c, "flushing the resynced data failed");
		return;
	}
	if (c->target_fails) {
		/* R10: a write failed here while this node was sync target (even
		 * after RS_DONE was sent): the copy is not complete. */
		conn_fail(c, "%u writes failed here during the resync; starting over",
			  c->target_fails);
		return;
	}
	if (gen != sb(r)->gen_current)
		gen_push_history(sb(r)->gen_history, sb(r)->gen_current);
	sb(r)->gen_current = gen;
	sb(r)->gen_bitmap = GEN_NONE;
	bm_clear_all_oos(r->bm);
	if (vol_md_write(r->v)) { /* the disk is failed (V4) */
		conn_fail(c, "the end of the resync could not be recorded");
		return;
	}
	vol_set_disk(r->v, VOL_UPTODATE);
	log_info("volume %s: resync from %s done", r->v->name, peer_name(r));
	set_rs(r, RR_ESTABLISHED);
	r->rate_bps = 0;
	if (r->conn)
		send_state(r->conn);
}

/* ---- receiving ---- */

/* Message handlers. Each returns 0 (go on reading), 1 (a payload follows:
 * receive it directly into c->rx_cur) or -1 (the connection ends: stop). The
 * table below says in which handshake stages each is accepted. */

static int msg_error(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	char msg[REPL_MAX_ERROR + 1];

	memcpy(msg, m->var, m->var_len);
	msg[m->var_len] = '\0';
	/* Only an authenticated peer, or the one this node dialed, may
	 * change what status says (not anyone who can reach the port). */
	if (r && (c->got_auth || (c->dialer && c == r->conn))) {
		snprintf(r->error, sizeof(r->error), "%s: %s",
			 c->peer_node[0] ? c->peer_node : "peer", msg);
		if (c->got_auth && strstr(msg, "split brain"))
			r->split_brain = true;
	}
	log_warn("replication%s%s: the peer refused: %s", r ? " of volume " : "",
		 r ? r->v->name : "", msg);
	conn_abort(c);
	return -1;
}

static int msg_hello(struct rconn *c, const struct repl_msg *m)
{
	return on_hello(c, &m->u.hello);
}

static int msg_auth(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	uint8_t mac[REPL_MAC_LEN];

	hmac_for(r, c, !c->dialer, c->peer_node, mac);
	if (CRYPTO_memcmp(mac, m->u.auth.mac, REPL_MAC_LEN) != 0) {
		conn_refuse(c, "authentication failed: node %s does not know the cluster "
			       "secret",
			    c->peer_node);
		return -1;
	}
	c->got_auth = true;
	if (r->admin_down || r->shutting_down) {
		conn_refuse(c, "volume %s is disconnected by its administrator", r->v->name);
		return -1;
	}
	c->stage = ST_STATE;
	if (c->dialer)
		send_auth(c);
	/* The connection is authentic: it replaces an older one. */
	if (r->conn && r->conn != c) {
		struct rconn *old = r->conn;
		log_info("volume %s: new connection from %s replaces the old one",
			 r->v->name, c->peer_node);
		conn_abort(old);
	}
	r->conn = c;
	r->last_ping_ns = ev_now(r->ev);
	send_state(c);
	send_bitmap(c);
	return 0;
}

/* The peer's STATE in the handshake: what handshake_decide decides on. */
static int hs_state(struct rconn *c, const struct repl_msg *m)
{
	c->pst = m->u.state;
	c->stage = ST_BITMAP;
	return 0;
}

/* A STATE once connected: the peer's role or disk changed. */
static int run_state(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	bool was_primary = r->peer.role == REPL_ROLE_PRIMARY;
	bool peer_target = m->u.state.disk == VOL_INCONSISTENT;

	/* The first STATE after the handshake shows what the peer decided:
	 * both sides must have come to the same answer (they decide on
	 * each other's earlier STATE, which a role change or a write in
	 * between can make stale). Otherwise: start over. */
	if (!c->checked_decision) {
		c->checked_decision = true;
		enum repl_rep_state mine = c->decided;
		if ((mine == RR_SYNCTARGET && peer_target) ||
		    (mine == RR_ESTABLISHED && peer_target) ||
		    (mine == RR_SYNCSOURCE && !peer_target)) {
			conn_fail(c, "%s came to another verdict in the handshake; "
				     "starting over", c->peer_node);
			return -1;
		}
	}
	r->peer = m->u.state;
	if (was_primary != (r->peer.role == REPL_ROLE_PRIMARY))
		log_info("volume %s: %s is now %s", r->v->name, c->peer_node,
			 r->peer.role == REPL_ROLE_PRIMARY ? "primary" : "secondary");
	return 0;
}

/* STATE is accepted in two stages, with a different meaning in each. */
static int msg_state(struct rconn *c, const struct repl_msg *m)
{
	return c->stage == ST_STATE ? hs_state(c, m) : run_state(c, m);
}

static int msg_bitmap(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	uint64_t w[REPL_MAX_BITMAP_WORDS];

	for (uint32_t i = 0; i < m->u.bitmap.words; i++)
		w[i] = repl_bitmap_word(m, i);
	if (m->u.bitmap.start + m->u.bitmap.words > bm_words(r->bm)) {
		conn_fail(c, "bitmap beyond the volume");
		return -1;
	}
	bm_merge_words(r->bm, m->u.bitmap.start, w, m->u.bitmap.words);
	return 0;
}

static int msg_bitmap_end(struct rconn *c, const struct repl_msg *m)
{
	(void)m;
	c->got_bm_end = true;
	handshake_decide(c);
	return conn_usable(c) ? 0 : -1;
}

static int msg_ping(struct rconn *c, const struct repl_msg *m)
{
	uint8_t b[32];

	send_small(c, b, repl_enc_ping(b, REPL_PONG, m->u.ping.cookie));
	return 0;
}

static int msg_pong(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;

	if (r->demote_cookie && m->u.ping.cookie == r->demote_cookie)
		r->demote_cookie = 0;
	return 0;
}

static int msg_ack(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;

	for (uint32_t i = 0; i < m->u.ack.count; i++) {
		uint64_t seq;
		int32_t res;
		struct vol_io *io;
		repl_ack_entry(m, i, &seq, &res);
		io = r->slots[slot_of(seq)];
		if (!io || io->rep.seq != seq) {
			conn_fail(c, "acknowledgement for unknown request %llu",
				  (unsigned long long)seq);
			return -1;
		}
		if (res > 0 && !(io->rep.kind == K_RS &&
				 container_of(io, struct rsreq, io)->phase == RQ_CSUM)) {
			conn_fail(c, "digest verdict for request %llu, which is no digest",
				  (unsigned long long)seq);
			return -1;
		}
		r->slots[slot_of(seq)] = NULL;
		if (io->rep.kind == K_FG) {
			if (res == 0) {
				io->rep.peer_ok = true;
			} else {
				peer_failed(r, io, res);
			}
			fg_put(r, io);
		} else if (io->rep.kind == K_RS) {
			rs_acked(r, container_of(io, struct rsreq, io), res);
		} else if (io->rep.kind == K_CLEAN) {
			if (res < 0) /* the peer failed our FLUSH */
				peer_failed(r, io, res);
			io->rep.lres = res ? res : io->rep.lres;
			io->local_done(io, 0);
		}
		/* An orderly disconnect's FLUSH ack ends the connection
		 * here (drain_done): the acks after it are moot. */
		if (c->aborted)
			return -1;
	}
	return 0;
}

/* WRITE, TRIM, ZERO, FLUSH, RS_DATA, RS_ZERO, CSUM: something to apply here
 * (the table refuses them on a primary: R6). */
static int msg_data(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	struct rapply *a;

	if ((m->type == REPL_RS_DATA || m->type == REPL_RS_ZERO) && r->rs != RR_SYNCTARGET) {
		conn_fail(c, "resync data while not sync target");
		return -1;
	}
	if ((m->type == REPL_RS_ZERO || m->type == REPL_CSUM) &&
	    !(c->features & REPL_FEAT_RESYNC2)) {
		conn_fail(c, "message of type %u without the feature that defines it", m->type);
		return -1;
	}
	if (m->type != REPL_FLUSH &&
	    (m->u.io.off > r->v->size || m->u.io.len > r->v->size - m->u.io.off ||
	     m->u.io.off % r->v->min_block || m->u.io.len % r->v->min_block)) {
		conn_fail(c, "request outside the volume or misaligned (%llu+%u)",
			  (unsigned long long)m->u.io.off, m->u.io.len);
		return -1;
	}
	a = apply_new(c, m);
	if (!a) {
		conn_fail(c, "out of memory");
		return -1;
	}
	if (m->type == REPL_CSUM) {
		a->io.buf = bufpool_get(&r->pool, a->io.len);
		if (!a->io.buf) {
			free(a);
			conn_fail(c, "out of memory");
			return -1;
		}
		c->apply_bytes += a->io.len;
		apply_queue(c, a);
		if (c->apply_bytes >= APPLY_MAX_BYTES)
			net_rx_pause(&c->net);
		return 0;
	}
	if (m->data_len) {
		a->io.buf = bufpool_get(&r->pool, m->data_len);
		if (!a->io.buf) {
			free(a);
			conn_fail(c, "out of memory");
			return -1;
		}
		c->apply_bytes += m->data_len;
		c->rx_cur = a;
		return 1; /* payload follows: receive it directly */
	}
	apply_queue(c, a);
	return 0;
}

static int msg_rs_done(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	struct rsdone *d;

	if (r->rs != RR_SYNCTARGET) {
		conn_fail(c, "resync done while not sync target");
		return -1;
	}
	/* The copied data must be durable before the disk is called up
	 * to date. */
	d = calloc(1, sizeof(*d));
	if (!d) {
		conn_fail(c, "out of memory");
		return -1;
	}
	d->r = r;
	d->c = c;
	d->gen = m->u.gen.gen_current;
	d->io.type = BS_FLUSH;
	r->rs_flushing++;
	vol_local(r->v, &d->io, rs_done_flushed);
	return 0;
}

static int msg_rs_start(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;

	/* The peer verified and found differences: it copies its marked
	 * regions here now. */
	if (!(c->features & REPL_FEAT_RESYNC2) || r->v->role == VOL_PRIMARY ||
	    r->rs != RR_ESTABLISHED || sb(r)->gen_current != m->u.gen.gen_current) {
		conn_fail(c, "unexpected resync start from %s", c->peer_node);
		return -1;
	}
	log_info("volume %s: %s found differences; resync from it starts", r->v->name,
		 c->peer_node);
	r->rs_total = 0;
	vol_set_disk(r->v, VOL_INCONSISTENT);
	c->target_fails = 0;
	set_rs(r, RR_SYNCTARGET);
	return 0;
}

static int msg_meta(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;

	/* stored whatever our role: one sent by the peer while it was still
	 * primary may arrive after a switchover made this node primary */
	if (!(c->features & REPL_FEAT_META)) {
		conn_fail(c, "volume attributes from %s without the feature", c->peer_node);
		return -1;
	}
	if (vol_meta_store(r->v, m->var, m->var_len))
		log_warn("volume %s: volume attributes from %s not stored", r->v->name,
			 c->peer_node);
	return 0;
}

static int msg_set_gen(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;

	if (r->v->role == VOL_PRIMARY || sb(r)->gen_current != m->u.gen.gen_bitmap) {
		conn_fail(c, "unexpected new generation from %s", c->peer_node);
		return -1;
	}
	gen_push_history(sb(r)->gen_history, sb(r)->gen_current);
	sb(r)->gen_current = m->u.gen.gen_current;
	if (vol_md_write(r->v)) { /* the disk is failed now (V4) */
		conn_fail(c, "the new generation could not be recorded");
		return -1;
	}
	return 0;
}

/* Handshake stages as bits, for the table. */
#define STG(s) (1u << (s))
#define STG_ALL (STG(ST_HELLO) | STG(ST_AUTH) | STG(ST_STATE) | STG(ST_BITMAP) | STG(ST_RUN))

/* What each message type may do. A type without a handler, or received in a
 * stage its entry does not name, is unexpected (the connection fails).
 * min_len is the fixed part of its body: repl_decode_hdr refuses anything
 * shorter, so the check here only guards the handlers' reads should the
 * codec and this table ever disagree. */
struct msg_type {
	uint8_t stages;      /* STG() of the stages that accept it */
	bool refuse_primary; /* R6: data to apply, which a primary never takes */
	uint32_t min_len;
	int (*fn)(struct rconn *c, const struct repl_msg *m);
};

#define REPL_TYPE_END (REPL_META + 1)

/* (ERROR in every stage: a refusal may come at any point) */
static const struct msg_type msg_types[REPL_TYPE_END] = {
	[REPL_HELLO] = { .stages = STG(ST_HELLO), .min_len = sizeof(struct repl_hello),
			 .fn = msg_hello },
	[REPL_AUTH] = { .stages = STG(ST_AUTH), .min_len = sizeof(struct repl_auth),
			.fn = msg_auth },
	[REPL_STATE] = { .stages = STG(ST_STATE) | STG(ST_RUN),
			 .min_len = sizeof(struct repl_state), .fn = msg_state },
	[REPL_BITMAP] = { .stages = STG(ST_BITMAP), .min_len = sizeof(struct repl_bitmap),
			  .fn = msg_bitmap },
	[REPL_BITMAP_END] = { .stages = STG(ST_BITMAP), .min_len = 0, .fn = msg_bitmap_end },
	[REPL_ERROR] = { .stages = STG_ALL, .min_len = 1, .fn = msg_error },
	[REPL_WRITE] = { .stages = STG(ST_RUN), .refuse_primary = true,
			 .min_len = sizeof(struct repl_io), .fn = msg_data },
	[REPL_TRIM] = { .stages = STG(ST_RUN), .refuse_primary = true,
			.min_len = sizeof(struct repl_io), .fn = msg_data },
	[REPL_ZERO] = { .stages = STG(ST_RUN), .refuse_primary = true,
			.min_len = sizeof(struct repl_io), .fn = msg_data },
	[REPL_FLUSH] = { .stages = STG(ST_RUN), .refuse_primary = true,
			 .min_len = sizeof(struct repl_flush), .fn = msg_data },
	[REPL_ACK] = { .stages = STG(ST_RUN), .min_len = sizeof(struct repl_ack),
		       .fn = msg_ack },
	[REPL_PING] = { .stages = STG(ST_RUN), .min_len = sizeof(struct repl_ping),
			.fn = msg_ping },
	[REPL_PONG] = { .stages = STG(ST_RUN), .min_len = sizeof(struct repl_ping),
			.fn = msg_pong },
	[REPL_RS_DATA] = { .stages = STG(ST_RUN), .refuse_primary = true,
			   .min_len = sizeof(struct repl_io), .fn = msg_data },
	[REPL_RS_DONE] = { .stages = STG(ST_RUN), .min_len = sizeof(struct repl_gen),
			   .fn = msg_rs_done },
	[REPL_SET_GEN] = { .stages = STG(ST_RUN), .min_len = sizeof(struct repl_gen),
			   .fn = msg_set_gen },
	[REPL_RS_ZERO] = { .stages = STG(ST_RUN), .refuse_primary = true,
			   .min_len = sizeof(struct repl_io), .fn = msg_data },
	[REPL_CSUM] = { .stages = STG(ST_RUN), .refuse_primary = true,
			.min_len = sizeof(struct repl_csum), .fn = msg_data },
	[REPL_RS_START] = { .stages = STG(ST_RUN), .min_len = sizeof(struct repl_gen),
			    .fn = msg_rs_start },
	[REPL_META] = { .stages = STG(ST_RUN), .min_len = 0, .fn = msg_meta },
};

static int handle_msg(struct rconn *c, const uint8_t *body)
{
	struct repl_msg *m = &c->m;
	const struct msg_type *t;

	if (repl_decode_body(body, m) ||
	    (m->type < REPL_TYPE_END && m->len < msg_types[m->type].min_len)) {
		conn_fail(c, "malformed message of type %u", m->type);
		return -1;
	}
	t = m->type < REPL_TYPE_END ? &msg_types[m->type] : NULL;
	if (!t || !t->fn || !(t->stages & STG(c->stage))) {
		conn_fail(c, "unexpected message of type %u", m->type);
		return -1;
	}
	if (t->refuse_primary && c->r->v->role == VOL_PRIMARY) {
		/* R6 */
		conn_fail(c, "%s sent data while this node is primary", c->peer_node);
		return -1;
	}
	return t->fn(c, m);
}

static void on_rx(struct net_conn *nc)
{
	struct rconn *c = container_of(nc, struct rconn, net);

	while (!c->aborted && !nc->closing) {
		size_t avail = net_rx_avail(nc);
		uint32_t need;
		int k;

		if (!c->have_hdr) {
			if (avail < sizeof(struct repl_hdr))
				return;
			if (repl_decode_hdr(net_rx_peek(nc), &c->m)) {
				conn_fail(c, "bad message header (not a Tandem peer, or out of step)");
				return;
			}
			net_rx_consume(nc, sizeof(struct repl_hdr));
			c->have_hdr = true;
			avail -= sizeof(struct repl_hdr);
		}
		need = repl_body_needed(&c->m);
		if (avail < need)
			return;
		c->have_hdr = false;
		{
			/* The body is decoded in place; copy it out first so that
			 * handlers may consume and receive directly. */
			uint8_t body[sizeof(struct repl_ack) + REPL_MAX_ACKS * sizeof(struct repl_ack_entry) +
				     sizeof(struct repl_bitmap) + REPL_MAX_BITMAP_WORDS * 8];
			memcpy(body, net_rx_peek(nc), need);
			net_rx_consume(nc, need);
			k = handle_msg(c, body);
		}
		if (k < 0)
			return;
		if (k == 1) {
			/* (data_rx_done may run inside and clear rx_cur) */
			/* cppcheck-suppress nullPointerRedundantCheck */
			net_rx_direct(nc, c->rx_cur->io.buf, c->rx_cur->io.len, data_rx_done);
			if (c->rx_cur)
				return; /* the rest arrives later */
		}
	}
}

static void on_eof(struct net_conn *nc)
{
	struct rconn *c = container_of(nc, struct rconn, net);
	conn_abort(c);
}

static const struct net_conn_ops rconn_ops = { .on_rx = on_rx, .on_closed = on_closed,
					       .on_eof = on_eof };

/* ---- peer loss ---- */

static void fail_pending(struct repl *r)
{
	/* Every request still waiting for the peer: its region is out of sync
	 * (the bits are durable: R2), and it completes without the peer, as a
	 * write of a new generation (gen_branch) that the peer lacks. */
	for (uint64_t i = 0; i < NSLOTS; i++) {
		struct vol_io *io = r->slots[i];
		if (io && io->rep.kind == K_FG && io->type != BS_FLUSH) {
			gen_branch(r);
			break;
		}
	}
	for (uint64_t i = 0; i < NSLOTS; i++) {
		struct vol_io *io = r->slots[i];
		if (!io)
			continue;
		r->slots[i] = NULL;
		if (io->rep.kind == K_FG) {
			if (io->type != BS_FLUSH)
				bm_set_oos(r->bm, io->off, io->len);
			fg_put(r, io);
		} else if (io->rep.kind == K_RS) {
			rs_put(r, container_of(io, struct rsreq, io));
		} else if (io->rep.kind == K_CLEAN) {
			io->rep.lres = -ECONNRESET;
			io->local_done(io, 0);
		}
	}
}

/* The connection is gone: runs being copied clear no bits, a verify stops. */
static void rs_abort(struct repl *r)
{
	struct list *pos, *tmp;

	r->rs_run = NULL;
	list_for_each_safe(pos, tmp, &r->rs_runs) {
		struct rsrun *run = container_of(pos, struct rsrun, link);
		run_spoil_all(r, run);
		run->next = run->off + run->len;
		run_put(r, run);
	}
	if (r->vfy == VFY_RUNNING) {
		char extra[96];
		r->vfy = VFY_ABORTED;
		r->vfy_t1 = ev_now(r->ev);
		r->vfy_nredo = 0;
		log_warn("volume %s: verify stopped at %llu of %llu bytes: the connection to %s "
			 "is gone",
			 r->v->name, (unsigned long long)r->vfy_cursor,
			 (unsigned long long)r->v->size, peer_name(r));
		snprintf(extra, sizeof(extra), "\"mismatch_ranges\":%llu",
			 (unsigned long long)r->vfy_ranges);
		vol_event(r->v, "verify", "running", "aborted", extra);
	}
}

static void conn_lost(struct repl *r, const char *why)
{
	struct rconn *c = r->conn;
	bool peer_was_primary = r->have_peer && r->peer.role == REPL_ROLE_PRIMARY;
	bool was_run = c && c->stage == ST_RUN;

	r->conn = NULL; /* c stays bound (nbound) until its applies are done */
	if (why && was_run)
		log_warn("volume %s: lost %s: %s", r->v->name, peer_name(r), why);
	/* What the peer acknowledged but had not made durable may be lost with
	 * it: everything in the activity log counts as out of sync (the AL only
	 * lets go of an extent after a flush on both nodes). */
	if (was_run && r->v->role == VOL_PRIMARY) {
		struct list *pos, *tmp;
		if (r->drain_clean) /* R7 */
			bm_merge_words(r->bm, 0, r->drain_touched, (uint32_t)bm_words(r->bm));
		else
			bm_al_to_oos(r->bm);
		/* A write the peer acknowledged whose local part is still running
		 * must not clear its bits when it completes (fg_finish): the peer
		 * that acknowledged it may not have it durably. */
		list_for_each_safe(pos, tmp, &r->inflight) {
			struct vol_io *o = container_of(pos, struct vol_io, rep.link);
			if (o->rep.peer_ok && o->type != BS_FLUSH) {
				o->rep.peer_ok = false;
				bm_set_oos(r->bm, o->off, o->len);
			}
		}
		/* The peer may lack those regions: this copy is newer from now on
		 * (a new generation), so that a later handshake never takes the
		 * peer's copy of them, even between two restarted secondaries. */
		if (bm_oos_count(r->bm))
			gen_branch(r);
	}
	fail_pending(r);
	rs_abort(r);
	if (was_run && r->v->role != VOL_PRIMARY && peer_was_primary && r->v->disk == VOL_UPTODATE)
		vol_set_disk(r->v, VOL_OUTDATED);
	r->have_peer = false;
	r->clean_failed = false; /* a pass of this connection says nothing of the next */
	set_rs(r, RR_OFF);
	set_cs(r, r->admin_down || r->shutting_down ? RC_STANDALONE : RC_CONNECTING);
	r->demote_cookie = 0;
	schedule_dial(r);
}

/* ---- dialing ---- */

static void dial_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct repl *r = container_of(op, struct repl, dial_op);
	struct rconn *c;
	(void)flags;

	r->dialing = false;
	if (res < 0 || r->admin_down || r->shutting_down || r->conn) {
		if (res < 0)
			log_debug("volume %s: connect to %s: %s", r->v->name, peer_name(r),
				  strerror(-res));
		close(r->dial_fd);
		r->dial_fd = -1;
		schedule_dial(r);
		return;
	}
	c = rconn_new();
	if (!c || net_conn_init(&c->net, r->ev, r->dial_fd, RX_BUF, &rconn_ops)) {
		free(c);
		close(r->dial_fd);
		r->dial_fd = -1;
		schedule_dial(r);
		return;
	}
	r->dial_fd = -1;
	c->r = r;
	r->nbound++;
	c->order = ++r->conn_order;
	list_add(&r->bound, &c->link);
	c->dialer = true;
	c->ack_flush.fn = ack_flush_fn;
	c->reap.fn = reap_fn;
	snprintf(c->peer_node, sizeof(c->peer_node), "%s", peer_name(r));
	c->stage = ST_HELLO;
	r->conn = c;
	send_hello(c, r->v->name);
}

static void dial(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, retry);
	int fd;

	if (r->dialing || r->conn || r->admin_down || r->shutting_down || !r->dialer)
		return;
	fd = socket(r->dial_sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		schedule_dial(r);
		return;
	}
	r->dial_fd = fd;
	r->dialing = true;
	io_uring_prep_connect(ev_sqe(r->ev, &r->dial_op), fd, (struct sockaddr *)&r->dial_sa,
			      r->dial_salen);
}

static void schedule_dial(struct repl *r)
{
	if (!r->dialer || r->admin_down || r->shutting_down || r->dialing || r->conn)
		return;
	ev_timer_arm(r->ev, &r->retry, (uint64_t)r->backoff_ms * 1000000ull);
	r->backoff_ms = MIN(r->backoff_ms * 2, RETRY_MAX_MS);
}

/* ---- keepalive and the lazy bitmap cleaner ---- */

static void clean_part_done(struct vol_io *io, int res)
{
	struct repl *r = io->vol->repl;

	if (res)
		io->rep.lres = res;
	if (--r->clean_parts)
		return;
	if (r->clean_local.rep.lres == 0 && r->clean_peer.rep.lres == 0) {
		bm_clean_commit(r->bm, &r->clean_w);
	} else {
		r->clean_failed = true;
		r->cleaning = false;
	}
}

static void clean_committed(struct bm_waiter *w, int err)
{
	struct repl *r = container_of(w, struct repl, clean_w);

	if (err) { /* the change bitmap could not be written (V4) */
		r->clean_failed = true;
		r->v->md_failed = true;
	}
	r->cleaning = false;
}

/* Sends the peer a FLUSH for io (K_CLEAN: its ack runs done with the result
 * in io->rep.lres, as does losing the connection); false when the request
 * window is full. */
static bool peer_flush(struct repl *r, struct vol_io *io, void (*done)(struct vol_io *, int))
{
	memset(io, 0, sizeof(*io));
	io->type = BS_FLUSH;
	io->vol = r->v;
	io->rep.kind = K_CLEAN;
	io->local_done = done;
	if (!slot_take(r, io))
		return false;
	send_small(r->conn, io->rep.hdr, repl_enc_flush(io->rep.hdr, io->rep.seq));
	return true;
}

static void clean_start(struct repl *r)
{
	struct list *pos, *tmp;
	bool peer = peer_ready(r);

	memset(r->busy, 0, bm_words(r->bm) * 8);
	list_for_each_safe(pos, tmp, &r->inflight) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		bm_mark_range(r->busy, r->bm, o->off, o->len);
	}
	/* While the peer is away every change is out of sync anyway; a bit may
	 * only go once both copies of its region are durable (bitmap.h). Only a
	 * primary sends the peer a FLUSH (R6); a secondary's bits speak of its
	 * own copy, which a local flush makes durable. */
	if (!peer || bm_clean_prepare(r->bm, r->busy) == 0)
		return;
	peer = r->v->role == VOL_PRIMARY;
	r->cleaning = true;
	r->clean_failed = false;
	r->clean_parts = 2;
	r->clean_w.cb = clean_committed;
	memset(&r->clean_local, 0, sizeof(r->clean_local));
	memset(&r->clean_peer, 0, sizeof(r->clean_peer));
	r->clean_local.type = BS_FLUSH;
	r->clean_local.vol = r->v;
	vol_local(r->v, &r->clean_local, clean_part_done);
	r->clean_peer.vol = r->v;
	if (!peer) {
		clean_part_done(&r->clean_peer, 0);
		return;
	}
	if (!peer_flush(r, &r->clean_peer, clean_part_done)) {
		r->clean_peer.rep.lres = -EBUSY;
		clean_part_done(&r->clean_peer, -EBUSY);
	}
}

static void tick(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, tick);
	struct rconn *c = r->conn;
	uint64_t now = ev_now(r->ev);
	uint64_t period = r->timeout_ns / 4;

	if (c && !c->aborted) {
		/* R12: while this node does not read (its apply limit), the
		 * peer's messages wait in the socket: progress is then its own
		 * applies completing, and a stall is its own disk's. */
		bool moved = c->net.bytes_in != c->last_rx_bytes ||
			     (c->net.rx_paused && c->napplied != c->last_napplied);
		if (moved) {
			c->last_rx_bytes = c->net.bytes_in;
			c->last_napplied = c->napplied;
			c->last_rx_ns = now;
		} else if (!c->last_rx_ns) {
			c->last_rx_ns = now;
		} else if (now - c->last_rx_ns > r->timeout_ns) {
			if (c->net.rx_paused)
				conn_fail(c, "no write of %s applied here for %.1f s (the local disk "
					     "stalls)",
					  c->peer_node, (double)r->timeout_ns / 1e9);
			else
				conn_fail(c, "%s did not answer for %.1f s", c->peer_node,
					  (double)r->timeout_ns / 1e9);
			c = NULL;
		}
		if (c && c->stage >= ST_STATE && now - r->last_ping_ns >= period) {
			uint8_t b[32];
			r->last_ping_ns = now;
			send_small(c, b, repl_enc_ping(b, REPL_PING, ++r->ping_cookie));
		}
	}
	if (r->rs == RR_SYNCSOURCE && (r->rs_cap || r->rs_hold_ns))
		ev_defer(r->ev, &r->rs_kick); /* the token bucket refills, a hold ends */
	if ((r->rs == RR_SYNCSOURCE || r->rs == RR_SYNCTARGET || r->vfy == VFY_RUNNING) &&
	    now - r->last_progress_ns >= 1000000000ull) {
		struct repl_status st;
		char extra[160];
		r->last_progress_ns = now;
		repl_get_status(r, &st);
		if (st.rep == RR_VERIFYING)
			snprintf(extra, sizeof(extra),
				 "\"verify_percent\":%.1f,\"mismatch_ranges\":%llu",
				 st.verify_percent, (unsigned long long)st.verify_mismatch_ranges);
		else
			snprintf(extra, sizeof(extra),
				 "\"out_of_sync_bytes\":%llu,\"sync_percent\":%.1f,"
				 "\"resync_bytes_per_sec\":%llu,\"resync_window_bytes\":%llu",
				 (unsigned long long)st.out_of_sync_bytes, st.sync_percent,
				 (unsigned long long)st.resync_bytes_per_sec,
				 (unsigned long long)st.resync_window_bytes);
		vol_event(r->v, repl_rep_name(st.rep), NULL, NULL, extra);
	}
	{
		/* A connection that does not finish its handshake in time goes. */
		struct list *pos, *tmp;
		list_for_each_safe(pos, tmp, &r->bound) {
			struct rconn *o = container_of(pos, struct rconn, link);
			if (o != r->conn && conn_usable(o) && o->stage != ST_RUN &&
			    now - o->born_ns > r->timeout_ns)
				conn_fail(o, "handshake not finished within %.1f s",
					  (double)r->timeout_ns / 1e9);
		}
	}
	/* A drain whose FLUSH does not come back in time ends as a cut. */
	if (r->draining && r->admin_down && r->conn && now - r->drain_t0 > DRAIN_MAX_NS)
		conn_abort(r->conn);
	if (!r->cleaning && now - r->last_clean_ns >= CLEAN_EVERY_NS && !r->shutting_down) {
		r->last_clean_ns = now;
		clean_start(r);
	}
	ev_timer_arm(r->ev, &r->tick, MIN(period, 250000000ull));
}

/* ---- life of the replication object ---- */

static void vol_submit_hook(void *ctx, struct vol_io *io)
{
	repl_submit(ctx, io);
}

static void vol_meta_hook(void *ctx)
{
	repl_meta_changed(ctx);
}

/* What the volume calls (vol.h): it never includes this component. */
static const struct vol_repl_ops repl_vol_ops = {
	.submit = vol_submit_hook,
	.meta_changed = vol_meta_hook,
};

int repl_new(struct ev_loop *ev, const struct cfg *cfg, unsigned vi, unsigned self,
	     struct vol *v, char *err, size_t errlen)
{
	const struct cfg_volume *cv = &cfg->volumes[vi];
	struct repl *r = calloc(1, sizeof(*r));
	const char *addr;
	struct md_sb *m = &v->md->sb;
	int rc;

	if (!r)
		return -ENOMEM;
	r->ev = ev;
	r->cfg = cfg;
	r->v = v;
	r->self = self;
	r->peer_ix = cv->nodes[0] == self ? cv->nodes[1] : cv->nodes[0];
	r->dialer = strcmp(cfg->nodes[self].name, cfg->nodes[r->peer_ix].name) < 0;
	snprintf(r->secret, sizeof(r->secret), "%s", cfg->secret);
	r->timeout_ns = (uint64_t)cfg->peer_timeout_ms * 1000000ull;
	r->rs_cap = cv->resync_rate;
	r->dial_fd = -1;
	r->dial_op.cb = dial_cb;
	r->retry.fn = dial;
	r->tick.fn = tick;
	r->rs_kick.fn = rs_kick_fn;
	r->drop_kick.fn = drop_kick_fn;
	r->ctl_timer.fn = ctl_tick;
	r->csum = cv->resync_checksum;
	r->backoff_ms = RETRY_MIN_MS;
	bufpool_init(&r->pool, 64u << 20);
	list_init(&r->inflight);
	list_init(&r->waiting);
	list_init(&r->bound);
	list_init(&r->rs_inflight);
	list_init(&r->rs_runs);
	addr = cfg->nodes[r->peer_ix].replication_advertise[0] ? cfg->nodes[r->peer_ix].replication_advertise :
							      cfg->nodes[r->peer_ix].replication;
	if (parse_addr(addr, &r->dial_sa, &r->dial_salen)) {
		snprintf(err, errlen, "volume %s: bad replication address %s of node %s", v->name,
			 addr, cfg->nodes[r->peer_ix].name);
		free(r);
		return -EINVAL;
	}
	if (m->bm_granularity == 0) {
		/* Metadata made before replication: the volume ran on this node
		 * alone, so no peer knows its content. Give it a bitmap now, and
		 * a data generation of its own (never "created empty"), so that a
		 * new peer gets a full sync (R8). */
		if (m->gen_current <= GEN_EMPTY) {
			m->gen_current = md_new_gen();
			log_info("volume %s: was not replicated: its data is generation %016llx",
				 v->name, (unsigned long long)m->gen_current);
		}
		m->bm_offset = TANDEM_MD_BITMAP_OFFSET;
		m->bm_granularity = (uint32_t)cv->bitmap_granularity;
		m->bm_bytes = bm_bytes_on_disk(v->size, m->bm_granularity);
		if (vol_md_write(v)) {
			snprintf(err, errlen, "volume %s: writing metadata failed", v->name);
			free(r);
			return -EIO;
		}
	} else if (m->bm_granularity != cv->bitmap_granularity) {
		log_warn("volume %s: bitmap-granularity %llu configured, but the metadata has %u; "
			 "keeping %u",
			 v->name, (unsigned long long)cv->bitmap_granularity, m->bm_granularity,
			 m->bm_granularity);
	}
	rc = bm_open(ev, v->md->fd, TANDEM_MD_AL_OFFSET, TANDEM_MD_META_OFFSET - TANDEM_MD_AL_OFFSET,
		     m->bm_offset, v->size, m->bm_granularity, !v->md->created, v->crashed, &r->bm);
	if (rc == -ENOSPC) {
		/* the activity log has 952 KiB: one bit per 64 regions */
		snprintf(err, errlen,
			 "volume %s: too large for bitmap-granularity %u: at most %llu bytes "
			 "(the activity log holds %llu regions); choose a larger granularity",
			 v->name, m->bm_granularity,
			 (unsigned long long)(TANDEM_MD_META_OFFSET - TANDEM_MD_AL_OFFSET) * 512ull *
				 m->bm_granularity,
			 (unsigned long long)(TANDEM_MD_META_OFFSET - TANDEM_MD_AL_OFFSET) * 512ull);
		free(r);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "volume %s: change bitmap: %s", v->name, strerror(-rc));
		free(r);
		return rc;
	}
	r->slots = calloc(NSLOTS, sizeof(*r->slots));
	r->busy = calloc(bm_words(r->bm), 8);
	r->drain_touched = calloc(bm_words(r->bm), 8);
	if (!r->slots || !r->busy || !r->drain_touched) {
		bm_free(r->bm);
		free(r->slots);
		free(r->busy);
		free(r->drain_touched);
		free(r);
		return -ENOMEM;
	}
	if (bm_oos_count(r->bm))
		log_info("volume %s: %llu regions marked in the change bitmap", v->name,
			 (unsigned long long)bm_oos_count(r->bm));
	r->last_clean_ns = now_ns();
	v->repl = r;
	v->repl_ops = &repl_vol_ops;
	v->repl_ctx = r;
	return 0;
}

void repl_start(struct repl *r)
{
	r->cs = RC_CONNECTING;
	ev_timer_arm(r->ev, &r->tick, 100000000ull);
	ev_timer_arm(r->ev, &r->retry, 0);
}

static void cancel_cb(struct ev_op *op, int res, uint32_t flags)
{
	(void)op;
	(void)res;
	(void)flags;
}

void repl_shutdown(struct repl *r)
{
	r->shutting_down = true;
	ev_timer_cancel(r->ev, &r->retry);
	if (r->dialing) {
		r->cancel_op.cb = cancel_cb;
		io_uring_prep_cancel(ev_sqe(r->ev, &r->cancel_op), &r->dial_op, 0);
	}
	{
		struct list *pos, *tmp;
		list_for_each_safe(pos, tmp, &r->bound)
			conn_abort(container_of(pos, struct rconn, link));
	}
	set_cs(r, RC_STANDALONE);
}

bool repl_idle(const struct repl *r)
{
	return !r->conn && !r->nbound && !r->dialing && list_empty(&r->inflight) && list_empty(&r->waiting) &&
	       list_empty(&r->rs_inflight) && !r->rs_flushing && !r->cleaning && !bm_busy(r->bm);
}

void repl_free(struct repl *r)
{
	if (!r)
		return;
	ev_timer_cancel(r->ev, &r->tick);
	ev_timer_cancel(r->ev, &r->retry);
	ev_timer_cancel(r->ev, &r->ctl_timer);
	ev_undefer(r->ev, &r->rs_kick);
	ev_undefer(r->ev, &r->drop_kick);
	if (r->dial_fd >= 0)
		close(r->dial_fd);
	/* The AL may only be emptied once the data it covers is durable; a
	 * bitmap that could not be written keeps the metadata unclean (V4). */
	if (r->v->bs->ops->sync(r->v->bs) < 0 || bm_sync(r->bm)) {
		log_err("volume %s: could not write the change bitmap", r->v->name);
		r->v->md_failed = true;
	}
	bm_free(r->bm);
	free(r->slots);
	free(r->busy);
	free(r->drain_touched);
	free(r->vfy_redo);
	while (!list_empty(&r->rs_runs)) {
		struct rsrun *run = container_of(r->rs_runs.next, struct rsrun, link);
		list_del(&run->link);
		free(run);
	}
	bufpool_drain(&r->pool);
	r->v->repl = NULL;
	r->v->repl_ops = NULL;
	r->v->repl_ctx = NULL;
	free(r);
}

/* ---- admin ---- */

/* A handshake is deciding on the state this node sent: role changes wait. */
static bool handshaking(const struct repl *r)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, (struct list *)&r->bound) {
		const struct rconn *c = container_of(pos, struct rconn, link);
		if (conn_usable(c) && c->got_auth && c->stage != ST_RUN)
			return true;
	}
	return false;
}

int repl_promote(struct repl *r, bool force, char *msg, size_t len)
{
	struct vol *v = r->v;

	if (handshaking(r))
		return -EAGAIN;
	if (v->role == VOL_PRIMARY) {
		v->demoting = false;
		return 0;
	}
	if (r->have_peer && r->peer.role == REPL_ROLE_PRIMARY) {
		snprintf(msg, len, "%s is primary for %s; make it secondary first", peer_name(r),
			 v->name);
		return -EBUSY;
	}
	if (v->disk == VOL_FAILED || v->disk == VOL_DISKLESS) {
		snprintf(msg, len, "volume %s: disk is %s", v->name, vol_disk_name(v->disk));
		return -EIO;
	}
	if (v->disk != VOL_UPTODATE || r->rs == RR_SYNCTARGET) {
		if (!force) {
			snprintf(msg, len,
				 "volume %s: disk is %s here; use --force to promote it anyway "
				 "(its data may be older than %s's)",
				 v->name, vol_disk_name(v->disk), peer_name(r));
			return -EPERM;
		}
		log_warn("volume %s: promoted with --force while the disk is %s", v->name,
			 vol_disk_name(v->disk));
		if (r->rs == RR_SYNCTARGET && r->conn)
			conn_abort(r->conn);
		vol_set_disk(v, VOL_UPTODATE);
	}
	v->md->sb.flags |= TANDEM_MD_F_PRIMARY;
	if (vol_md_write(v)) { /* the disk is failed (V4) */
		v->md->sb.flags &= ~TANDEM_MD_F_PRIMARY;
		snprintf(msg, len, "volume %s: writing metadata failed; the disk is failed", v->name);
		return -EIO;
	}
	v->role = VOL_PRIMARY;
	v->demoting = false;
	if (peer_ready(r))
		gen_rotate(r, r->conn);
	log_info("volume %s: role secondary -> primary", v->name);
	vol_event(v, "role", "secondary", "primary", NULL);
	if (r->conn && r->conn->stage == ST_RUN)
		send_state(r->conn);
	return 0;
}

/* R11: before a primary steps down, every write the peer acknowledged is
 * made durable there and here: the cleaner's FLUSH on both nodes, pass after
 * pass, until the activity log is empty. The peer, once primary, then never
 * holds an acknowledged write of ours only in a volatile cache with nothing
 * recording it. A flush that fails marks the extents out of sync instead
 * (and the peer marked itself inconsistent, R10). */
static bool demote_flushed(struct repl *r)
{
	if (!r->conn || r->conn->stage != ST_RUN || !peer_ready(r)) {
		r->demote_flushing = false;
		return true; /* no peer: conn_lost marked what it may lack (R7) */
	}
	if (bm_al_empty(r->bm)) {
		log_info("volume %s: written data is durable on both nodes", r->v->name);
		r->demote_flushing = false;
		return true;
	}
	if (r->cleaning)
		return false;
	if (r->clean_failed) {
		r->clean_failed = false;
		/* A flush the peer failed (it is inconsistent now, R10), one that
		 * failed here, or a bitmap that cannot be written: the extents
		 * are marked instead. A pass that got no FLUSH out (the request
		 * window was full) is simply tried again. */
		if (r->peer.disk == VOL_INCONSISTENT || r->clean_local.rep.lres ||
		    r->v->disk == VOL_FAILED || r->v->md_failed) {
			log_warn("volume %s: flushing before the role change failed; the activity "
				 "log's extents are out of sync",
				 r->v->name);
			al_mark(r);
			r->demote_flushing = false;
			return true;
		}
	}
	if (!r->demote_flushing)
		log_info("volume %s: flushing both nodes before the role change", r->v->name);
	r->demote_flushing = true;
	clean_start(r);
	return false;
}

int repl_demote(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;
	(void)msg;
	(void)len;

	if (v->role == VOL_SECONDARY)
		return r->demote_cookie && r->conn ? -EAGAIN : 0;
	if (handshaking(r))
		return -EAGAIN;
	v->demoting = true;
	if (v->inflight || !demote_flushed(r))
		return -EAGAIN;
	v->role = VOL_SECONDARY;
	v->demoting = false;
	v->md->sb.flags &= ~TANDEM_MD_F_PRIMARY;
	vol_md_write(v);
	log_info("volume %s: role primary -> secondary", v->name);
	vol_event(v, "role", "primary", "secondary", NULL);
	if (r->conn && r->conn->stage == ST_RUN) {
		uint8_t b[32];
		send_state(r->conn);
		/* Answered once the peer has read the new state (the pong follows it). */
		r->demote_cookie = ++r->ping_cookie;
		send_small(r->conn, b, repl_enc_ping(b, REPL_PING, r->demote_cookie));
		return -EAGAIN;
	}
	return 0;
}

int repl_connect(struct repl *r, char *msg, size_t len)
{
	(void)msg;
	(void)len;
	r->admin_down = false;
	r->split_brain = false;
	if (r->cs == RC_STANDALONE)
		set_cs(r, RC_CONNECTING);
	r->backoff_ms = RETRY_MIN_MS;
	ev_timer_cancel(r->ev, &r->retry);
	schedule_dial(r);
	return 0;
}

/* The drain's FLUSH is back (or failed, or the connection went first). */
static void drain_done(struct vol_io *io, int res)
{
	struct repl *r = io->vol->repl;
	(void)res;

	r->draining = false;
	if (!r->conn || !r->admin_down)
		return; /* lost meanwhile (conn_lost marked the whole AL), or connect came */
	r->drain_clean = io->rep.lres == 0;
	conn_abort(r->conn);
	r->drain_clean = false;
}

/* Starts an orderly disconnect: true when a drain FLUSH went to the peer and
 * drain_done will cut the connection. Only an in-sync primary drains: a
 * resync or verify in flight, or a secondary, is cut at once as before. */
static bool drain_start(struct repl *r)
{
	struct list *pos, *tmp;

	if (r->draining)
		return true;
	if (!r->conn || r->conn->stage != ST_RUN || !peer_ready(r) ||
	    r->v->role != VOL_PRIMARY || r->rs != RR_ESTABLISHED || r->vfy == VFY_RUNNING)
		return false;
	/* Writes in flight now may reach the peer after the FLUSH. */
	memset(r->drain_touched, 0, bm_words(r->bm) * 8);
	list_for_each_safe(pos, tmp, &r->inflight) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		bm_mark_range(r->drain_touched, r->bm, o->off, o->len);
	}
	if (!peer_flush(r, &r->drain_flush, drain_done))
		return false;
	r->draining = true;
	r->drain_t0 = ev_now(r->ev);
	return true;
}

int repl_disconnect(struct repl *r, char *msg, size_t len)
{
	r->admin_down = true;
	ev_timer_cancel(r->ev, &r->retry);
	/* Polled (tandemctl waits) until drain_done has cut the connection. */
	if (drain_start(r)) {
		snprintf(msg, len, "the peer's flush before the disconnect");
		return -EAGAIN;
	}
	if (r->conn)
		conn_abort(r->conn);
	set_cs(r, RC_STANDALONE);
	return 0;
}

int repl_verify(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;

	if (r->cs != RC_CONNECTED || !peer_ready(r)) {
		snprintf(msg, len, "volume %s is not connected to %s", v->name, peer_name(r));
		return -ENOTCONN;
	}
	if (r->rs != RR_ESTABLISHED) {
		snprintf(msg, len, "volume %s is resyncing (%s); verify once it is in sync",
			 v->name, repl_rep_name(r->rs));
		return -EBUSY;
	}
	if (r->vfy == VFY_RUNNING) {
		snprintf(msg, len, "a verify of volume %s is already running", v->name);
		return -EALREADY;
	}
	if (v->role != VOL_PRIMARY && r->peer.role == REPL_ROLE_PRIMARY) {
		snprintf(msg, len, "%s is primary for volume %s: run verify there", peer_name(r),
			 v->name);
		return -EINVAL;
	}
	if (!(r->features & REPL_FEAT_RESYNC2)) {
		snprintf(msg, len, "%s does not support verify", peer_name(r));
		return -EOPNOTSUPP;
	}
	r->vfy = VFY_RUNNING;
	r->vfy_cursor = r->vfy_done = r->vfy_ranges = r->vfy_bytes = 0;
	r->vfy_nredo = 0;
	r->vfy_t0 = ev_now(r->ev);
	r->vfy_t1 = 0;
	log_info("volume %s: verify against %s started", v->name, peer_name(r));
	vol_event(v, "replication", "established", "verifying", NULL);
	ev_defer(r->ev, &r->rs_kick);
	return 0;
}

int repl_invalidate(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;

	if (v->role == VOL_PRIMARY) {
		snprintf(msg, len, "volume %s is primary here; make it secondary first", v->name);
		return -EBUSY;
	}
	log_warn("volume %s: invalidated: local data will be replaced by %s's", v->name,
		 peer_name(r));
	sb(r)->gen_current = GEN_NONE;
	sb(r)->gen_bitmap = GEN_NONE;
	if (vol_md_write(v)) {
		snprintf(msg, len, "volume %s: writing metadata failed; the disk is failed", v->name);
		return -EIO;
	}
	vol_set_disk(v, VOL_INCONSISTENT);
	r->split_brain = false;
	r->error[0] = '\0';
	if (r->conn)
		conn_abort(r->conn);
	r->backoff_ms = RETRY_MIN_MS;
	if (!r->admin_down) {
		ev_timer_cancel(r->ev, &r->retry);
		schedule_dial(r);
	}
	return 0;
}

int repl_in_sync(const struct repl *r, char *msg, size_t len)
{
	const struct vol *v = r->v;

	if (v->disk == VOL_FAILED || v->disk == VOL_DISKLESS) {
		snprintf(msg, len, "volume %s is %s", v->name, vol_disk_name(v->disk));
		return -EIO;
	}
	if (r->split_brain) {
		snprintf(msg, len, "volume %s: split brain with %s", v->name, peer_name(r));
		return -EPERM;
	}
	if (r->rs == RR_ESTABLISHED && v->disk == VOL_UPTODATE && bm_oos_count(r->bm) == 0)
		return 1;
	snprintf(msg, len, "volume %s: %s, %s, disk %s", v->name, repl_conn_name(r->cs),
		 repl_rep_name(r->rs), vol_disk_name(v->disk));
	return 0;
}

void repl_get_status(const struct repl *r, struct repl_status *st)
{
	uint64_t gran = bm_granularity(r->bm);
	uint64_t oos = bm_oos_count(r->bm) * gran;

	memset(st, 0, sizeof(*st));
	st->peer = peer_name(r);
	st->conn = r->cs;
	st->rep = r->rs == RR_ESTABLISHED && r->vfy == VFY_RUNNING ? RR_VERIFYING : r->rs;
	st->peer_disk = r->have_peer ? r->peer.disk : -1;
	st->peer_role = r->have_peer ? (r->peer.role == REPL_ROLE_PRIMARY) : -1;
	st->out_of_sync_bytes = MIN(oos, r->v->size);
	if (r->rs == RR_SYNCSOURCE || r->rs == RR_SYNCTARGET)
		st->sync_percent = r->rs_total ? 100.0 * (1.0 - (double)bm_oos_count(r->bm) /
								 (double)r->rs_total) :
						 100.0;
	else
		st->sync_percent = oos ? 100.0 * (1.0 - (double)st->out_of_sync_bytes /
							(double)r->v->size) :
					 100.0;
	st->resync_bytes_per_sec = r->rate_bps;
	st->resync_window_bytes = r->ctl_armed ? r->ctl.window : 0;
	st->resync_request_bytes = r->ctl_armed ? r->ctl.piece : 0;
	st->resync_sent_bytes = r->rs_sent_bytes;
	st->resync_zero_bytes = r->rs_zero_bytes;
	st->resync_same_bytes = r->rs_same_bytes;
	st->verify = r->vfy == VFY_RUNNING ? "running" : r->vfy == VFY_DONE ? "done" :
		     r->vfy == VFY_ABORTED ? "aborted" : "none";
	st->verify_percent = r->vfy == VFY_NONE ? 0 :
			     r->vfy == VFY_DONE ? 100.0 :
						  100.0 * (double)r->vfy_done / (double)r->v->size;
	st->verify_mismatch_ranges = r->vfy_ranges;
	st->verify_mismatch_bytes = r->vfy_bytes;
	st->split_brain = r->split_brain;
	st->error = r->error;
	st->gen_current = r->v->md->sb.gen_current;
	st->gen_bitmap = r->v->md->sb.gen_bitmap;
}

/* ---- the listener ---- */

static bool proto_ok(struct rconn *c, const struct repl_hello *h)
{
	if (h->proto_max >= REPL_PROTO_MIN && h->proto_min <= REPL_PROTO_MAX)
		return true;
	conn_refuse(c, "protocol versions %u-%u not supported (this node: %u-%u)", h->proto_min,
		    h->proto_max, REPL_PROTO_MIN, REPL_PROTO_MAX);
	return false;
}

static int on_hello(struct rconn *c, const struct repl_hello *h)
{
	c->features = h->features & REPL_FEATURES_KNOWN;
	if (c->dialer) {
		struct repl *r = c->r;
		if (strcmp(h->cluster, r->cfg->cluster) || strcmp(h->node, peer_name(r)) ||
		    strcmp(h->volume, r->v->name)) {
			conn_refuse(c, "the node at %s is %s of cluster %s, volume %s; expected %s of "
				       "cluster %s",
				    "the replication address", h->node, h->cluster, h->volume,
				    peer_name(r), r->cfg->cluster);
			return -1;
		}
		if (!proto_ok(c, h))
			return -1;
		memcpy(c->nonce_peer, h->nonce, REPL_NONCE_LEN);
		c->stage = ST_AUTH;
		return 0;
	}
	/* accepting side: find the volume */
	{
		struct repl_server *s = c->srv;
		struct repl *r = NULL;
		snprintf(c->peer_node, sizeof(c->peer_node), "%s", h->node);
		if (strcmp(h->cluster, s->cfg->cluster)) {
			conn_refuse(c, "foreign cluster '%s' (this is cluster '%s')", h->cluster,
				    s->cfg->cluster);
			return -1;
		}
		for (unsigned i = 0; i < s->nvols; i++)
			if (s->vols[i]->repl && strcmp(s->vols[i]->name, h->volume) == 0)
				r = s->vols[i]->repl;
		if (!r) {
			conn_refuse(c, "no replicated volume '%s' on node %s", h->volume,
				    s->cfg->nodes[s->self].name);
			return -1;
		}
		if (strcmp(h->node, peer_name(r))) {
			conn_refuse(c, "node '%s' is not the peer of volume %s", h->node, h->volume);
			return -1;
		}
		if (!proto_ok(c, h))
			return -1;
		if (r->admin_down || r->shutting_down) {
			conn_refuse(c, "volume %s is disconnected on %s by its administrator",
				    h->volume, s->cfg->nodes[s->self].name);
			return -1;
		}
		/* Bound to the volume now (but it replaces r->conn only once
		 * authenticated). */
		list_del(&c->link);
		c->in_srv = false;
		s->nconns--;
		c->r = r;
		r->nbound++;
		c->order = ++r->conn_order;
		list_add(&r->bound, &c->link);
		memcpy(c->nonce_peer, h->nonce, REPL_NONCE_LEN);
		send_hello(c, r->v->name);
		send_auth(c);
		c->stage = ST_AUTH;
		return 0;
	}
}

static void srv_sweep(struct ev_timer *t)
{
	struct repl_server *s = container_of(t, struct repl_server, sweep);
	struct list *pos, *tmp;
	uint64_t now = ev_now(s->ev);

	list_for_each_safe(pos, tmp, &s->conns) {
		struct rconn *c = container_of(pos, struct rconn, link);
		if (conn_usable(c) && now - c->born_ns > s->timeout_ns) {
			log_info("replication: a connection that sent no HELLO within %.1f s is dropped",
				 (double)s->timeout_ns / 1e9);
			conn_abort(c);
		}
	}
	ev_timer_arm(s->ev, &s->sweep, 1000000000ull);
}

static void srv_accept(struct net_listener *l, int fd)
{
	struct repl_server *s = container_of(l, struct repl_server, lis);
	struct rconn *c = rconn_new();

	if (!c || net_conn_init(&c->net, s->ev, fd, RX_BUF, &rconn_ops)) {
		free(c);
		close(fd);
		return;
	}
	c->srv = s;
	c->ack_flush.fn = ack_flush_fn;
	c->reap.fn = reap_fn;
	c->stage = ST_HELLO;
	c->in_srv = true;
	list_add(&s->conns, &c->link);
	s->nconns++;
}

int repl_server_new(struct ev_loop *ev, const struct cfg *cfg, unsigned self,
		    struct vol **vols, unsigned nvols, struct repl_server **out)
{
	struct repl_server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->ev = ev;
	s->cfg = cfg;
	s->self = self;
	s->nvols = MIN(nvols, (unsigned)CFG_MAX_VOLUMES);
	memcpy(s->vols, vols, s->nvols * sizeof(*vols));
	list_init(&s->conns);
	r = net_listen(&s->lis, ev, cfg->nodes[self].replication, srv_accept);
	if (r) {
		free(s);
		return r;
	}
	s->timeout_ns = (uint64_t)cfg->peer_timeout_ms * 1000000ull;
	s->sweep.fn = srv_sweep;
	ev_timer_arm(ev, &s->sweep, 1000000000ull);
	*out = s;
	return 0;
}

void repl_server_shutdown(struct repl_server *s)
{
	struct list *pos, *tmp;

	net_listener_close(&s->lis);
	ev_timer_cancel(s->ev, &s->sweep);
	list_for_each_safe(pos, tmp, &s->conns)
		conn_abort(container_of(pos, struct rconn, link));
}

unsigned repl_server_conns(const struct repl_server *s)
{
	return s->nconns;
}

void repl_server_free(struct repl_server *s)
{
	free(s);
}
