/* Connection life: small messages out, reading and dispatching messages in
 * (the message table), peer loss, dialing, keepalive and the listener that
 * routes accepted connections to their volume.
 * Never: decides what a connection is for (repl_hs.c) or applies what it
 * carries (repl_apply.c, repl_write.c, repl_sync.c). */
#include "repl_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/log.h"

uint64_t lk_wire_bytes(const struct repl *r)
{
	return r->lk_wire_prev + (r->conn ? r->conn->peer.net.bytes_out : 0);
}

static void conn_lost(struct repl *r, const char *why);

/* ---- small messages ---- */

static void rmsg_done(struct net_tx *tx, int err)
{
	(void)err;
	free(container_of(tx, struct rmsg, tx));
}

struct rmsg *rmsg_new(uint32_t cap)
{
	struct rmsg *m = malloc(sizeof(*m) + cap);
	if (m) {
		m->len = 0;
		m->cap = cap;
	}
	return m;
}

bool conn_usable(const struct rconn *c)
{
	return c && !c->aborted && !c->peer.net.closing && !c->peer.net.closed;
}

void rmsg_send(struct rconn *c, struct rmsg *m)
{
	m->tx.iov[0].iov_base = m->buf;
	m->tx.iov[0].iov_len = m->len;
	m->tx.iovcnt = 1;
	m->tx.done = rmsg_done;
	net_send(&c->peer.net, &m->tx);
}

void send_small(struct rconn *c, const uint8_t *buf, size_t len)
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

/* ---- connection life ---- */

/* net_peer: closed, and no apply holds the connection any more. */
static void conn_release(struct net_peer *p)
{
	struct rconn *c = container_of(p, struct rconn, peer);

	if (c->rx_cur) { /* closed in the middle of a payload */
		c->apply_bytes -= c->rx_cur->io.len;
		unpack_drop(c->r, c->rx_cur);
		bufpool_put(&c->r->pool, c->rx_cur->io.buf, c->rx_cur->io.len);
		free(c->rx_cur);
		c->rx_cur = NULL;
	}
	if (c->rd_cur) /* D3: its data did not all come */
		rdata_rx_done(&c->peer.net, -ECONNRESET);
	list_del(&c->link);
	if (c->r)
		c->r->nbound--;
	ev_undefer(c->peer.net.ev, &c->ack_flush);
	free(c->ack);
	free(c);
}

/* net_srv asks: shutdown (why NULL), or no HELLO within the peer timeout. */
static void conn_kill(struct net_peer *p, const char *why)
{
	struct rconn *c = container_of(p, struct rconn, peer);

	if (why && conn_usable(c))
		log_info("replication: a connection that sent no HELLO within %.1f s is dropped",
			 (double)c->srv->srv.hs_timeout_ns / 1e9);
	conn_abort(c);
}

static const struct net_peer_ops rconn_peer_ops = {
	.release = conn_release,
	.kill = conn_kill,
};

static void on_closed(struct net_conn *nc)
{
	struct rconn *c = container_of(nc, struct rconn, peer.net);
	const char *tls_err = net_conn_error(nc); /* the TLS layer cut it */

	/* (status says why, as for conn_fail: not for anyone who can connect) */
	if (tls_err && c->r && (c->got_auth || c->dialer) && (c->r->conn == c || !c->r->conn))
		snprintf(c->r->error, sizeof(c->r->error), "%s", tls_err);
	if (c->r && c->r->conn == c)
		conn_lost(c->r, tls_err ? tls_err : "connection closed");
	net_peer_closed(&c->peer);
}

void conn_abort(struct rconn *c)
{
	if (c->aborted)
		return;
	c->aborted = true;
	if (c->r && c->r->conn == c)
		conn_lost(c->r, NULL);
	net_abort(&c->peer.net);
}

void conn_fail(struct rconn *c, const char *fmt, ...)
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

void conn_refuse(struct rconn *c, const char *fmt, ...)
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
	net_close(&c->peer.net);
}

static struct rconn *rconn_new(struct ev_loop *ev)
{
	/* (zeroed: hs_stage is ST_HELLO, where every connection starts) */
	struct rconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->born_ns = ev_now(ev);
	list_init(&c->applying);
	list_init(&c->apply_wait);
	list_init(&c->link);
	if (getrandom(c->nonce_me, sizeof(c->nonce_me), 0) != (ssize_t)sizeof(c->nonce_me)) {
		free(c);
		return NULL;
	}
	return c;
}

/* ---- receiving: the message handlers of this file, then the table ---- */

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
	if (r->ping_ck[m->u.ping.cookie % 8] == m->u.ping.cookie)
		r->lk_rtt_ns = ev_boot_ns(r->ev) - r->ping_at[m->u.ping.cookie % 8];
	lease_pong(r, c, m->u.ping.cookie);
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

#define REPL_TYPE_END (REPL_CONTRACT + 1)

/* (ERROR in every stage: a refusal may come at any point) */
static const struct msg_type msg_types[REPL_TYPE_END] = {
	[REPL_HELLO] = { .stages = STG(ST_HELLO),
			 .min_len = sizeof(struct repl_hello),
			 .fn = msg_hello },
	[REPL_AUTH] = { .stages = STG(ST_AUTH),
			.min_len = sizeof(struct repl_auth),
			.fn = msg_auth },
	[REPL_STATE] = { .stages = STG(ST_STATE) | STG(ST_RUN),
			 .min_len = sizeof(struct repl_state),
			 .fn = msg_state },
	/* (in the handshake before STATE; once connected, a `set`: K1, K2) */
	[REPL_CONTRACT] = { .stages = STG(ST_STATE) | STG(ST_RUN),
			    .min_len = sizeof(struct repl_contract),
			    .fn = msg_contract },
	[REPL_BITMAP] = { .stages = STG(ST_BITMAP),
			  .min_len = sizeof(struct repl_bitmap),
			  .fn = msg_bitmap },
	[REPL_BITMAP_END] = { .stages = STG(ST_BITMAP), .min_len = 0, .fn = msg_bitmap_end },
	[REPL_ERROR] = { .stages = STG_ALL, .min_len = 1, .fn = msg_error },
	[REPL_WRITE] = { .stages = STG(ST_RUN),
			 .refuse_primary = true,
			 .min_len = sizeof(struct repl_io),
			 .fn = msg_data },
	[REPL_TRIM] = { .stages = STG(ST_RUN),
			.refuse_primary = true,
			.min_len = sizeof(struct repl_io),
			.fn = msg_data },
	[REPL_ZERO] = { .stages = STG(ST_RUN),
			.refuse_primary = true,
			.min_len = sizeof(struct repl_io),
			.fn = msg_data },
	[REPL_FLUSH] = { .stages = STG(ST_RUN),
			 .refuse_primary = true,
			 .min_len = sizeof(struct repl_flush),
			 .fn = msg_data },
	[REPL_ACK] = { .stages = STG(ST_RUN), .min_len = sizeof(struct repl_ack), .fn = msg_ack },
	[REPL_PING] = { .stages = STG(ST_RUN),
			.min_len = sizeof(struct repl_ping),
			.fn = msg_ping },
	[REPL_PONG] = { .stages = STG(ST_RUN),
			.min_len = sizeof(struct repl_ping),
			.fn = msg_pong },
	[REPL_RS_DATA] = { .stages = STG(ST_RUN),
			   .refuse_primary = true,
			   .min_len = sizeof(struct repl_io),
			   .fn = msg_data },
	[REPL_RS_DONE] = { .stages = STG(ST_RUN),
			   .min_len = sizeof(struct repl_gen),
			   .fn = msg_rs_done },
	[REPL_SWITCH] = { .stages = STG(ST_RUN),
			  .min_len = sizeof(struct repl_ping),
			  .fn = msg_switch },
	[REPL_SET_GEN] = { .stages = STG(ST_RUN),
			   .min_len = sizeof(struct repl_gen),
			   .fn = msg_set_gen },
	[REPL_RS_ZERO] = { .stages = STG(ST_RUN),
			   .refuse_primary = true,
			   .min_len = sizeof(struct repl_io),
			   .fn = msg_data },
	[REPL_CSUM] = { .stages = STG(ST_RUN),
			.refuse_primary = true,
			.min_len = sizeof(struct repl_csum),
			.fn = msg_data },
	[REPL_RS_START] = { .stages = STG(ST_RUN),
			    .min_len = sizeof(struct repl_gen),
			    .fn = msg_rs_start },
	[REPL_META] = { .stages = STG(ST_RUN), .min_len = 0, .fn = msg_meta },
	[REPL_READ] = { .stages = STG(ST_RUN),
			.refuse_primary = true,
			.min_len = sizeof(struct repl_io),
			.fn = msg_data },
	[REPL_RDATA] = { .stages = STG(ST_RUN),
			 .min_len = sizeof(struct repl_io),
			 .fn = msg_rdata },
};

static int handle_msg(struct rconn *c, const uint8_t *body)
{
	struct repl_msg *m = &c->m;
	const struct msg_type *t;

	if (repl_decode_body(body, m) ||
	    (m->type < REPL_TYPE_END && m->len < msg_types[m->type].min_len)) {
		conn_fail(c, "malformed message of type %u%s%s%s", m->type, m->why ? " (" : "",
			  m->why ? m->why : "", m->why ? ")" : "");
		return -1;
	}
	t = m->type < REPL_TYPE_END ? &msg_types[m->type] : NULL;
	if (!t || !t->fn || !(t->stages & STG(c->hs_stage))) {
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

/* The payload of a WRITE / RS_DATA goes straight to its buffer: the data's,
 * or the compressed copy's (repl_pack.c decompresses it). */
static void rx_payload(struct rconn *c)
{
	struct rapply *a = c->rx_cur;

	if (a->zbuf)
		net_rx_direct(&c->peer.net, a->zbuf, a->zlen, data_rx_done);
	else
		net_rx_direct(&c->peer.net, a->io.buf, a->io.len, data_rx_done);
}

/* RDATA's payload goes straight into the reader's buffer. */
static void rx_read_data(struct rconn *c)
{
	net_rx_direct(&c->peer.net, c->rd_cur->buf, c->rd_cur->len, rdata_rx_done);
}

static void on_rx(struct net_conn *nc)
{
	struct rconn *c = container_of(nc, struct rconn, peer.net);

	/* A handler that paused reading (RS_START's CP1, the apply limit)
	 * stops it here too: the messages already buffered wait for
	 * net_rx_resume like those still in the socket. */
	while (!c->aborted && !nc->closing && !nc->rx_paused) {
		size_t avail = net_rx_avail(nc);
		uint32_t need;
		int k;

		if (!c->have_hdr) {
			if (avail < sizeof(struct repl_hdr))
				return;
			if (repl_decode_hdr(net_rx_peek(nc), &c->m)) {
				if (net_rx_looks_tls(nc))
					conn_refuse(c, "the peer speaks TLS: set tls = on here "
						       "too (or tls = off there)");
				else
					conn_fail(
						c,
						"bad message header: %s (not a Tandem peer, or out "
						"of step)",
						c->m.why);
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
			uint8_t body[sizeof(struct repl_ack) +
				     REPL_MAX_ACKS * sizeof(struct repl_ack_entry) +
				     sizeof(struct repl_bitmap) + REPL_MAX_BITMAP_WORDS * 8];
			memcpy(body, net_rx_peek(nc), need);
			net_rx_consume(nc, need);
			k = handle_msg(c, body);
		}
		if (k < 0)
			return;
		if (k == 1) {
			/* (data_rx_done may run inside and clear rx_cur) */
			rx_payload(c);
			if (c->rx_cur)
				return; /* the rest arrives later */
		} else if (k == 2) {
			/* (rdata_rx_done may run inside and clear rd_cur) */
			rx_read_data(c);
			if (c->rd_cur)
				return;
		}
	}
}

static void on_eof(struct net_conn *nc)
{
	struct rconn *c = container_of(nc, struct rconn, peer.net);
	conn_abort(c);
}

static const struct net_conn_ops rconn_ops = { .on_rx = on_rx,
					       .on_closed = on_closed,
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
		} else if (io->rep.kind == K_ASYNC) {
			ab_lost(r, io);
		} else if (io->rep.kind == K_READ) {
			rd_lost(r, io);
		} else if (io->rep.kind == K_CLEAN) {
			io->rep.lres = -ECONNRESET;
			io->local_done(io, 0);
		}
	}
}

static void conn_lost(struct repl *r, const char *why)
{
	struct rconn *c = r->conn;
	bool peer_was_primary = r->have_peer && r->peer.role == REPL_ROLE_PRIMARY;
	bool was_run = c && c->hs_stage == ST_RUN;

	r->conn = NULL; /* c stays bound (nbound) until its applies are done */
	if (c)
		r->lk_wire_prev += c->peer.net.bytes_out;
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
		list_for_each_safe (pos, tmp, &r->inflight) {
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
	ab_conn_lost(r);
	rs_abort(r);
	/* L3: the peer may hold a lease from this node's answers until a lease
	 * after its last message; a connect that is refused says sooner that it
	 * is gone */
	if (was_run) {
		r->peer_rx_ns = c->last_rx_ns ? c->last_rx_ns : ev_now(r->ev);
		peer_probe(r);
	}
	r->have_peer = false;
	if (was_run && r->v->role != VOL_PRIMARY && peer_was_primary &&
	    r->v->disk == VOL_UPTODATE && !quorum_peer_lost(r))
		vol_set_disk(r->v, VOL_OUTDATED);
	r->clean_failed = false; /* a pass of this connection says nothing of the next */
	repl_set_rstate(r, RR_OFF);
	repl_set_cstate(r, r->admin_down || r->shutting_down ? RC_STANDALONE : RC_CONNECTING);
	r->demote_cookie = 0;
	sw_reset(r);
	schedule_dial(r);
}

/* ---- dialing ---- */

void dial_cb(struct net_dial *d, int fd)
{
	struct repl *r = container_of(d, struct repl, dial);
	struct rconn *c;

	if (fd < 0 || r->admin_down || r->shutting_down || r->conn) {
		if (fd < 0)
			log_debug("volume %s: connect to %s: %s", r->v->name, peer_name(r),
				  strerror(-fd));
		else
			close(fd);
		schedule_dial(r);
		return;
	}
	c = rconn_new(r->ev);
	if (!c) {
		close(fd);
		schedule_dial(r);
		return;
	}
	if (net_peer_open_tls(&c->peer, r->ev, NULL, fd, NULL, RX_BUF, &rconn_ops, &rconn_peer_ops,
			      r->tls, true)) { /* it closed the fd */
		free(c);
		schedule_dial(r);
		return;
	}
	c->r = r;
	r->nbound++;
	c->order = ++r->conn_order;
	list_add(&r->bound, &c->link);
	c->dialer = true;
	c->ack_flush.fn = ack_flush_fn;
	snprintf(c->peer_node, sizeof(c->peer_node), "%s", peer_name(r));
	r->conn = c;
	send_hello(c, r->v->name);
}

void dial(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, retry);

	if (r->dial.busy || r->conn || r->admin_down || r->shutting_down || !r->dialer)
		return;
	if (net_dial(&r->dial, r->ev, (struct sockaddr *)&r->dial_sa, r->dial_salen, dial_cb))
		schedule_dial(r);
}

void schedule_dial(struct repl *r)
{
	if (!r->dialer || r->admin_down || r->shutting_down || r->dial.busy || r->conn)
		return;
	ev_timer_arm(r->ev, &r->retry, (uint64_t)r->backoff_ms * 1000000ull);
	r->backoff_ms = MIN(r->backoff_ms * 2, RETRY_MAX_MS);
}

/* ---- keepalive ---- */

void tick(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, tick);
	struct rconn *c = r->conn;
	uint64_t now = ev_now(r->ev);
	uint64_t period = r->timeout_ns / 4;
	/* L2: a lease runs from a PING's send, so PINGs come well within one
	 * (a lease far shorter than peer-timeout: witness-timeout the shorter) */
	uint64_t ping_every = r->wc ? MIN(period, r->lease_dur_ns / 3) : period;

	if (r->probe.busy && now - r->probe_t0 > r->timeout_ns)
		net_dial_cancel(&r->probe); /* no answer: says nothing */

	/* A tick much later than its period means this node's own loop was
	 * held up (a metadata write to a slow disk): pings were not sent
	 * meanwhile, so the peer's silence says nothing yet. Its clock starts
	 * again now, with a ping. */
	uint64_t gap = r->tick_ns ? now - r->tick_ns : 0;
	r->tick_ns = now;
	if (c && !c->aborted && gap > period && c->last_rx_ns) {
		log_info("volume %s: this node did not run for %.1f s: %s gets a new %.1f s to "
			 "answer",
			 r->v->name, (double)gap / 1e9, c->peer_node, (double)r->timeout_ns / 1e9);
		c->last_rx_ns = now;
		r->last_ping_ns = 0;
	}
	if (c && !c->aborted) {
		/* R12: while this node does not read (its apply limit), the
		 * peer's messages wait in the socket: progress is then its own
		 * applies completing, and a stall is its own disk's. */
		bool moved = c->peer.net.bytes_in != c->last_rx_bytes ||
			     (c->peer.net.rx_paused && c->napplied != c->last_napplied);
		if (moved) {
			c->last_rx_bytes = c->peer.net.bytes_in;
			c->last_napplied = c->napplied;
			c->last_rx_ns = now;
		} else if (!c->last_rx_ns) {
			c->last_rx_ns = now;
		} else if (now - c->last_rx_ns > r->timeout_ns) {
			if (c->peer.net.rx_paused)
				conn_fail(c,
					  "no write of %s applied here for %.1f s (the local disk "
					  "stalls)",
					  c->peer_node, (double)r->timeout_ns / 1e9);
			else
				conn_fail(c, "%s did not answer for %.1f s", c->peer_node,
					  (double)r->timeout_ns / 1e9);
			c = NULL;
		}
		if (c && c->hs_stage >= ST_STATE && now - r->last_ping_ns >= ping_every) {
			r->last_ping_ns = now;
			peer_ping(r, c, ++r->ping_cookie);
		}
	}
	if (now - r->lk_rate_t0 >= 1000000000ull) {
		uint64_t b = lk_wire_bytes(r);
		if (r->lk_rate_t0)
			r->lk_rate_bps =
				(b - r->lk_rate_b0) * 1000000000ull / (now - r->lk_rate_t0);
		r->lk_rate_t0 = now;
		r->lk_rate_b0 = b;
	}
	if (r->rstate == RR_ESTABLISHED)
		ab_caught_up(r);
	if (r->v->disk == VOL_FAILED)
		vol_detach_check(r->v); /* D1: the peer serves now */
	handover_tick(r);
	pull_tick(r);
	/* a disk state that changed outside a message (a slow disk detached)
	 * reaches the peer within a tick */
	if (c && conn_usable(c) && c->hs_stage == ST_RUN && c->sent_disk != r->v->disk)
		send_state(c);
	cp_tick(r);
	ab_tick(r);
	if (r->rstate == RR_SYNCSOURCE && (r->rs_cap || r->rs_hold_ns || r->rs_floor || r->link))
		ev_defer(r->ev, &r->rs_kick); /* the token bucket refills, a hold ends */
	if ((r->rstate == RR_SYNCSOURCE || r->rstate == RR_SYNCTARGET ||
	     r->vfy_state == VFY_RUNNING) &&
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
		list_for_each_safe (pos, tmp, &r->bound) {
			struct rconn *o = container_of(pos, struct rconn, link);
			if (o != r->conn && conn_usable(o) && o->hs_stage != ST_RUN &&
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
	ev_timer_arm(r->ev, &r->tick, MIN(ping_every, REPL_TICK_NS)); /* loss seen within a tick */
}

/* ---- the listener ---- */

static void srv_accept(struct net_srv *ns, int fd, const char *host)
{
	struct repl_server *s = container_of(ns, struct repl_server, srv);
	struct rconn *c = rconn_new(s->ev);

	if (!c) {
		close(fd);
		return;
	}
	c->srv = s;
	c->ack_flush.fn = ack_flush_fn;
	if (net_peer_open_tls(&c->peer, s->ev, ns, fd, host, RX_BUF, &rconn_ops, &rconn_peer_ops,
			      s->tls, false)) {
		free(c);
		return;
	}
	if (s->tls) {
		/* what a peer with tls = off reads before this end closes */
		uint8_t b[sizeof(struct repl_hdr) + REPL_MAX_ERROR];
		net_conn_tls_refusal(&c->peer.net, b,
				     repl_enc_error(b, "this node has tls = on: set tls = on "
						       "on the peer too"));
	}
}

void repl_server_use_tls(struct repl_server *s, struct net_tls_ctx *tls)
{
	s->tls = tls;
}

int repl_server_new(struct ev_loop *ev, const struct cfg *cfg, unsigned self, struct vol **vols,
		    unsigned nvols, struct repl_server **out)
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
	/* resync-link-rate: one budget per peer, for every volume shared with it */
	for (unsigned i = 0; i < s->nvols; i++) {
		struct repl *rp = s->vols[i]->repl;
		if (!rp || !cfg->resync_link_rate)
			continue;
		s->links[rp->peer_ix].cap = cfg->resync_link_rate;
		rp->link = &s->links[rp->peer_ix];
	}
	s->srv.name = "replication";
	s->srv.hs_timeout_ns = (uint64_t)cfg->peer_timeout_ms * 1000000ull;
	s->srv.may_use_reserve = true;
	s->srv.on_accept = srv_accept;
	r = net_srv_listen(&s->srv, ev, cfg->nodes[self].replication);
	if (r) {
		for (unsigned i = 0; i < s->nvols; i++) /* no budget outlives s */
			if (s->vols[i]->repl && cfg->resync_link_rate)
				s->vols[i]->repl->link = NULL;
		free(s);
		return r;
	}
	*out = s;
	return 0;
}

void repl_server_shutdown(struct repl_server *s)
{
	net_srv_shutdown(&s->srv); /* conn_kill: each unbound connection is cut */
}

unsigned repl_server_conns(const struct repl_server *s)
{
	return s->srv.npeers;
}

void repl_server_free(struct repl_server *s)
{
	free(s);
}
