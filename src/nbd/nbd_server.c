/* NBD server.
 *
 * Connection states:
 *   CLIENT_FLAGS  greeting sent; waiting for the client's 4 flag bytes
 *   OPT           waiting for an option (header + data)
 *   XMIT          transmission: requests
 *   DRAIN         transmission: discarding the payload of a rejected WRITE,
 *                 so that the stream stays framed; its error reply follows
 *   DEAD          net_close() called; waiting for in-flight work to end
 * Transitions:
 *   CLIENT_FLAGS -> OPT            [on_rx_handshake: flags accepted]
 *   OPT -> XMIT                    [opt_go / opt_export_name: export chosen]
 *   XMIT -> DRAIN -> XMIT          [on_rx_xmit: rejected WRITE with payload]
 *   DRAIN -> XMIT                  [on_eof: the payload ends early: that WRITE
 *                                   is dropped unreplied, and the connection
 *                                   closes once nothing else is busy]
 *   any -> DEAD                    [conn_kill: protocol error, DISC, shutdown;
 *                                   on_closed: EOF or reset from the client]
 * Invariants:
 *   N1. Each request gets exactly one reply, sent after its I/O completed.
 *   N2. Bytes from the client are validated (nbd_codec) before any state or
 *       I/O depends on them; a bad request gets an error reply, bad framing
 *       (wrong magic, oversized option) closes only this connection.
 *   N3. The connection is freed only when net is closed and refs == 0
 *       (every slot and handshake message released).
 *   N4. At most MAX_SLOTS requests and MAX_BYTES of buffers per connection;
 *       beyond that reading pauses (backpressure, no unbounded memory).
 *   N5. In the handshake, at most HS_MAX_QUEUED bytes of option replies wait
 *       for the client to read them; beyond that reading pauses too, so a
 *       client that loops over options without reading holds no more.
 *   N6. A connection is refused at accept beyond max-connections per
 *       listener or max-connections-per-address from one host, or when file
 *       descriptors run short (net_fd_spare); its handshake must end within
 *       handshake-timeout, else it is closed.
 */
#include "nbd_server.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/list.h"
#include "../common/log.h"
#include "../common/util.h"
#include "../net/net.h"
#include "../net/peer.h"
#include "nbd_codec.h"

#define RXBUF (NBD_MAX_OPTION_LEN + 64 * 1024)
#define MAX_SLOTS 128
#define MAX_BYTES (64u * 1024 * 1024)
#define MAX_EXTENTS 512
#define KEEP_BUF (2u * 1024 * 1024) /* larger request buffers are not cached */
#define MAX_CACHED (16u * 1024 * 1024) /* buffers kept on free slots, per connection */
#define HS_MAX_QUEUED (256u * 1024) /* handshake replies not yet sent (N5) */

enum conn_state { ST_CLIENT_FLAGS = 0, ST_OPT, ST_XMIT, ST_DRAIN, ST_DEAD };

struct nbd_conn;

struct nbd_slot {
	struct vol_io io;
	struct net_tx tx;
	struct nbd_conn *c;
	struct nbd_req req;
	uint32_t err; /* NBD error decided before I/O (validation) */
	uint8_t hdr[32];
	void *buf;
	size_t cap;
	size_t charged; /* bytes of buf counted in conn->bytes_busy */
	struct nbd_slot *next_free;
};

struct nbd_conn {
	struct net_peer peer; /* socket and life: refs, reap, handshake timer (N3, N6) */
	struct nbd_server *srv;
	enum conn_state state;
	bool no_zeroes, structured, meta_alloc, want_resume;
	struct vol *vol;
	struct nbd_export_info info;
	uint64_t drain_left;
	struct nbd_slot *rx_slot;   /* WRITE whose payload is arriving / draining */
	struct nbd_slot *free_slots;
	unsigned nslots, busy;
	size_t bytes_busy;   /* buffers of busy slots (N4) */
	size_t bytes_cached; /* buffers kept on free slots (N4) */
	size_t hs_queued;    /* handshake messages not yet sent (N5) */
	bool disc;
	struct ev_deferred resume;
};

struct nbd_server {
	struct ev_loop *ev;
	struct net_srv srv; /* listener and connections (N6) */
	const struct cfg *cfg;
	struct vol **vols;
	unsigned nvols;
	uint64_t entered[ST_DEAD + 1]; /* transitions into each state, for tests and debugging */
};

/* The one writer of conn->state: checks the transition against the table in
 * the header comment and counts it. */
static void set_state(struct nbd_conn *c, enum conn_state to)
{
	static const bool legal[ST_DEAD + 1][ST_DEAD + 1] = {
		[ST_CLIENT_FLAGS] = { [ST_OPT] = true, [ST_DEAD] = true },
		[ST_OPT] = { [ST_XMIT] = true, [ST_DEAD] = true },
		[ST_XMIT] = { [ST_DRAIN] = true, [ST_DEAD] = true },
		[ST_DRAIN] = { [ST_XMIT] = true, [ST_DEAD] = true },
		/* cppcheck-suppress unknownEvaluationOrder */
		[ST_DEAD] = { [ST_DEAD] = true },
	};
	if (!legal[c->state][to]) {
		/* A bug: abort where asserts are on, else refuse and say so. */
		log_err("nbd: connection %d: illegal state change %d -> %d", c->peer.net.fd,
			(int)c->state, (int)to);
		assert(!"illegal NBD connection state change");
		return;
	}
	c->state = to;
	c->srv->entered[to]++;
}

/* ---------- helpers ---------- */

static struct vol *find_vol(struct nbd_server *s, const char *name)
{
	if (!*name)
		return s->nvols ? s->vols[0] : NULL; /* the default export */
	for (unsigned i = 0; i < s->nvols; i++)
		if (strcmp(s->vols[i]->name, name) == 0)
			return s->vols[i];
	return NULL;
}

static void conn_kill(struct nbd_conn *c, const char *why)
{
	if (c->state == ST_DEAD)
		return;
	if (why)
		log_info("nbd: closing connection %d: %s", c->peer.net.fd, why);
	set_state(c, ST_DEAD);
	net_close(&c->peer.net);
}

/* N3: net_peer calls this once the connection is closed and unreferenced. */
static void conn_release(struct net_peer *p)
{
	struct nbd_conn *c = container_of(p, struct nbd_conn, peer);
	struct nbd_slot *sl;

	ev_undefer(c->srv->ev, &c->resume);
	while ((sl = c->free_slots)) {
		c->free_slots = sl->next_free;
		free(sl->buf);
		free(sl);
	}
	free(c);
}

static void conn_unref(struct nbd_conn *c)
{
	net_peer_unref(&c->peer);
}

/* Handshake output: one heap block per message (not on the I/O path). */
struct hs_msg {
	struct net_tx tx;
	struct nbd_conn *c;
	size_t len;
	uint8_t data[];
};

static void hs_done(struct net_tx *tx, int err)
{
	struct hs_msg *m = container_of(tx, struct hs_msg, tx);
	struct nbd_conn *c = m->c;
	(void)err;
	c->hs_queued -= sizeof(*m) + m->len;
	free(m);
	if (c->want_resume && c->hs_queued < HS_MAX_QUEUED)
		ev_defer(c->srv->ev, &c->resume);
	conn_unref(c);
}

static uint8_t *hs_alloc(struct nbd_conn *c, size_t len, struct hs_msg **out)
{
	struct hs_msg *m = malloc(sizeof(*m) + len);
	if (!m)
		return NULL;
	m->c = c;
	m->len = len;
	*out = m;
	return m->data;
}

static void hs_send(struct nbd_conn *c, struct hs_msg *m)
{
	m->tx.iov[0].iov_base = m->data;
	m->tx.iov[0].iov_len = m->len;
	m->tx.iovcnt = 1;
	m->tx.done = hs_done;
	net_peer_ref(&c->peer);
	c->hs_queued += sizeof(*m) + m->len;
	net_send(&c->peer.net, &m->tx);
}

static void opt_reply(struct nbd_conn *c, uint32_t opt, uint32_t type, const void *data,
		      uint32_t len)
{
	struct hs_msg *m;
	uint8_t *p = hs_alloc(c, sizeof(struct nbd_opt_reply) + len, &m);

	if (!p) {
		conn_kill(c, "out of memory");
		return;
	}
	p += nbd_encode_opt_reply(p, opt, type, len);
	if (len)
		memcpy(p, data, len);
	hs_send(c, m);
}

static void opt_error(struct nbd_conn *c, uint32_t opt, uint32_t type, const char *msg)
{
	opt_reply(c, opt, type, msg, (uint32_t)strlen(msg));
}

/* ---------- transmission: slots and replies ---------- */

static struct nbd_slot *slot_get(struct nbd_conn *c)
{
	struct nbd_slot *sl = c->free_slots;

	if (sl) {
		c->free_slots = sl->next_free;
		c->bytes_cached -= sl->cap;
	} else {
		if (c->nslots >= MAX_SLOTS)
			return NULL;
		sl = calloc(1, sizeof(*sl));
		if (!sl)
			return NULL;
		sl->c = c;
		c->nslots++;
	}
	sl->err = 0;
	c->busy++;
	net_peer_ref(&c->peer);
	return sl;
}

static void conn_resume(struct ev_deferred *d)
{
	struct nbd_conn *c = container_of(d, struct nbd_conn, resume);
	if (c->state == ST_DEAD || !c->want_resume)
		return;
	c->want_resume = false;
	net_rx_resume(&c->peer.net);
}

static void slot_put(struct nbd_slot *sl)
{
	struct nbd_conn *c = sl->c;

	c->busy--;
	c->bytes_busy -= sl->charged;
	sl->charged = 0;
	if (sl->cap > KEEP_BUF || c->bytes_cached + sl->cap > MAX_CACHED) {
		free(sl->buf);
		sl->buf = NULL;
		sl->cap = 0;
	}
	c->bytes_cached += sl->cap;
	sl->next_free = c->free_slots;
	c->free_slots = sl;
	if (c->disc && c->busy == 0)
		conn_kill(c, NULL);
	if (c->want_resume)
		ev_defer(c->srv->ev, &c->resume);
	conn_unref(c);
}

/* Buffer of at least len bytes, page aligned for O_DIRECT. bytes_busy counts
 * the buffers of busy slots so that N4 bounds memory. */
static int slot_buf(struct nbd_slot *sl, size_t len)
{
	if (sl->cap < len) {
		void *b = alloc_aligned(len);
		if (!b)
			return -ENOMEM;
		free(sl->buf);
		sl->buf = b;
		sl->cap = len;
	}
	sl->c->bytes_busy += sl->cap - sl->charged;
	sl->charged = sl->cap;
	return 0;
}

static void reply_done(struct net_tx *tx, int err)
{
	(void)err;
	slot_put(container_of(tx, struct nbd_slot, tx));
}

/* N1: the one place a transmission reply is built and queued. */
static void reply(struct nbd_slot *sl, uint32_t error)
{
	struct nbd_conn *c = sl->c;
	struct nbd_req *r = &sl->req;
	size_t n;

	sl->tx.done = reply_done;
	sl->tx.iovcnt = 1;
	sl->tx.iov[1].iov_len = 0;
	if (c->structured && (r->type == NBD_CMD_READ || r->type == NBD_CMD_BLOCK_STATUS)) {
		if (error) {
			n = nbd_encode_structured_hdr(sl->hdr, NBD_REPLY_FLAG_DONE,
						      NBD_REPLY_TYPE_ERROR, r->cookie, 6);
			uint32_t e = htobe32(error);
			memcpy(sl->hdr + n, &e, 4);
			memset(sl->hdr + n + 4, 0, 2); /* no message */
			n += 6;
		} else if (r->type == NBD_CMD_READ) {
			uint64_t off = htobe64(r->offset);
			n = nbd_encode_structured_hdr(sl->hdr, NBD_REPLY_FLAG_DONE,
						      NBD_REPLY_TYPE_OFFSET_DATA, r->cookie,
						      8 + r->length);
			memcpy(sl->hdr + n, &off, 8);
			n += 8;
			sl->tx.iov[1].iov_base = sl->buf;
			sl->tx.iov[1].iov_len = r->length;
			sl->tx.iovcnt = 2;
		} else {
			/* BLOCK_STATUS: io.len holds the extent bytes prepared in buf */
			uint32_t id = htobe32(NBD_META_CONTEXT_ID);
			n = nbd_encode_structured_hdr(sl->hdr, NBD_REPLY_FLAG_DONE,
						      NBD_REPLY_TYPE_BLOCK_STATUS, r->cookie,
						      4 + (uint32_t)sl->io.len);
			memcpy(sl->hdr + n, &id, 4);
			n += 4;
			sl->tx.iov[1].iov_base = sl->buf;
			sl->tx.iov[1].iov_len = sl->io.len;
			sl->tx.iovcnt = 2;
		}
	} else {
		n = nbd_encode_simple_reply(sl->hdr, error, r->cookie);
		if (!error && r->type == NBD_CMD_READ) {
			sl->tx.iov[1].iov_base = sl->buf;
			sl->tx.iov[1].iov_len = r->length;
			sl->tx.iovcnt = 2;
		}
	}
	sl->tx.iov[0].iov_base = sl->hdr;
	sl->tx.iov[0].iov_len = n;
	net_send(&c->peer.net, &sl->tx);
}

static void io_done(struct vol_io *io, int res)
{
	struct nbd_slot *sl = container_of(io, struct nbd_slot, io);
	if (res)
		log_debug("nbd: cmd %u off %llu len %u: %s", sl->req.type,
			  (unsigned long long)sl->req.offset, sl->req.length, strerror(-res));
	reply(sl, nbd_errno_to_wire(res));
}

static void submit(struct nbd_slot *sl, enum bs_op type, uint32_t flags, void *buf)
{
	sl->io.type = type;
	sl->io.flags = flags;
	sl->io.off = sl->req.offset;
	sl->io.len = sl->req.length;
	sl->io.buf = buf;
	sl->io.cb = io_done;
	vol_submit(sl->c->vol, &sl->io);
}

static void block_status(struct nbd_slot *sl)
{
	struct nbd_conn *c = sl->c;
	struct bs_extent ext[MAX_EXTENTS];
	unsigned n = 0, max = (sl->req.flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : MAX_EXTENTS;
	int r;

	r = vol_block_status(c->vol, sl->req.offset, sl->req.length, ext, max, &n);
	if (r == 0)
		r = slot_buf(sl, (size_t)n * 8);
	if (r) {
		reply(sl, nbd_errno_to_wire(r));
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		uint32_t len = htobe32((uint32_t)MIN(ext[i].len, (uint64_t)UINT32_MAX & ~4095ull));
		uint32_t fl = htobe32(((ext[i].flags & BS_EXT_HOLE) ? NBD_STATE_HOLE : 0) |
				      ((ext[i].flags & BS_EXT_ZERO) ? NBD_STATE_ZERO : 0));
		memcpy((uint8_t *)sl->buf + 8 * i, &len, 4);
		memcpy((uint8_t *)sl->buf + 8 * i + 4, &fl, 4);
	}
	sl->io.len = (uint64_t)n * 8;
	reply(sl, 0);
}

static void dispatch(struct nbd_slot *sl)
{
	struct nbd_req *r = &sl->req;
	uint32_t fua = (r->flags & NBD_CMD_FLAG_FUA) ? BS_F_FUA : 0;

	switch (r->type) {
	case NBD_CMD_READ:
		submit(sl, BS_READ, 0, sl->buf);
		break;
	case NBD_CMD_WRITE:
		submit(sl, BS_WRITE, fua, sl->buf);
		break;
	case NBD_CMD_FLUSH:
		submit(sl, BS_FLUSH, 0, NULL);
		break;
	case NBD_CMD_TRIM:
		submit(sl, BS_TRIM, fua, NULL);
		break;
	case NBD_CMD_WRITE_ZEROES:
		submit(sl, BS_ZERO,
		       fua | ((r->flags & NBD_CMD_FLAG_NO_HOLE) ? 0 : BS_F_MAY_TRIM) |
			       ((r->flags & NBD_CMD_FLAG_FAST_ZERO) ? BS_F_FAST : 0),
		       NULL);
		break;
	case NBD_CMD_CACHE:
		/* Advisory; with O_DIRECT there is no cache to fill. */
		reply(sl, 0);
		break;
	case NBD_CMD_BLOCK_STATUS:
		block_status(sl);
		break;
	default:
		reply(sl, NBD_EINVAL);
		break;
	}
}

static void write_payload(struct net_conn *nc, int err)
{
	struct nbd_conn *c = container_of(nc, struct nbd_conn, peer.net);
	struct nbd_slot *sl = c->rx_slot;

	c->rx_slot = NULL;
	if (err) {
		slot_put(sl); /* never replied: the client is gone */
		return;
	}
	dispatch(sl);
}

/* Parses as many requests as are buffered. Returns when more bytes are
 * needed, a payload is being received directly, or reading paused. */
static void on_rx_xmit(struct nbd_conn *c)
{
	struct net_conn *nc = &c->peer.net;

	while (c->state == ST_XMIT || c->state == ST_DRAIN) {
		struct nbd_req r;
		struct nbd_slot *sl;
		uint32_t err;

		if (c->state == ST_DRAIN) {
			size_t n = MIN((uint64_t)net_rx_avail(nc), c->drain_left);
			net_rx_consume(nc, n);
			c->drain_left -= n;
			if (c->drain_left)
				return;
			set_state(c, ST_XMIT);
			sl = c->rx_slot;
			c->rx_slot = NULL;
			reply(sl, sl->err);
			continue;
		}
		if (net_rx_avail(nc) < sizeof(struct nbd_request))
			return;
		nbd_decode_request(net_rx_peek(nc), &r);
		if (r.magic != NBD_REQUEST_MAGIC) {
			conn_kill(c, "bad request magic");
			return;
		}
		err = nbd_validate_request(&r, &c->info);
		/* N4: wait for buffers to come back before taking more. */
		if ((c->busy > 0 && c->bytes_busy + r.length > MAX_BYTES && !err &&
		     (r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE)) ||
		    !(sl = slot_get(c))) {
			c->want_resume = true;
			net_rx_pause(nc);
			return;
		}
		net_rx_consume(nc, sizeof(struct nbd_request));
		sl->req = r;
		sl->err = err;
		/* DISC is never replied to, even when malformed. */
		if (r.type == NBD_CMD_DISC) {
			c->disc = true;
			net_rx_pause(nc);
			slot_put(sl);
			return;
		}
		if (r.type == NBD_CMD_WRITE) {
			if (!err && slot_buf(sl, r.length))
				err = sl->err = NBD_ENOMEM;
			if (err) {
				/* Drain the payload so that the stream stays framed (N2). */
				c->rx_slot = sl;
				c->drain_left = r.length;
				set_state(c, ST_DRAIN);
				continue;
			}
			c->rx_slot = sl;
			net_rx_direct(nc, sl->buf, r.length, write_payload);
			if (nc->direct_cb || c->state == ST_DEAD)
				return;
			continue;
		}
		if (err) {
			reply(sl, err);
			continue;
		}
		if (r.type == NBD_CMD_READ && slot_buf(sl, r.length)) {
			reply(sl, NBD_ENOMEM);
			continue;
		}
		dispatch(sl);
	}
}

/* ---------- handshake ---------- */

static uint16_t tflags(const struct nbd_conn *c)
{
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		     NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN |
		     NBD_FLAG_SEND_CACHE | NBD_FLAG_SEND_FAST_ZERO;
	if (c->structured)
		f |= NBD_FLAG_SEND_DF;
	return f;
}

static void enter_xmit(struct nbd_conn *c, struct vol *v)
{
	c->vol = v;
	c->info.size = v->size;
	c->info.min_block = v->min_block ? v->min_block : 1;
	c->info.max_payload = NBD_MAX_PAYLOAD;
	c->info.tflags = tflags(c);
	c->info.structured = c->structured;
	c->info.meta_allocation = c->meta_alloc;
	net_peer_hs_done(&c->peer);
	set_state(c, ST_XMIT);
	log_debug("nbd: connection %d serves %s", c->peer.net.fd, v->name);
}

/* Why a volume cannot be exported here, or NULL. */
static const char *unavailable(const struct vol *v)
{
	if (v->role != VOL_PRIMARY)
		return "volume is secondary on this node; connect to its primary";
	if (!vol_serving(v))
		return "volume's disk has failed on this node, and its peer cannot serve it";
	if (!vol_lease_ok(v))
		return "volume's primary here has no lease (cut off from its peer and the "
		       "witness); connect to the other node";
	return NULL;
}

static void send_info(struct nbd_conn *c, uint32_t opt, const struct nbd_go *go, struct vol *v)
{
	uint8_t b[14 + NBD_MAX_STRING];
	uint16_t t16;
	uint32_t t32;
	uint64_t t64;

	t16 = htobe16(NBD_INFO_EXPORT);
	memcpy(b, &t16, 2);
	t64 = htobe64(v->size);
	memcpy(b + 2, &t64, 8);
	t16 = htobe16(tflags(c));
	memcpy(b + 10, &t16, 2);
	opt_reply(c, opt, NBD_REP_INFO, b, 12);

	if (go->want_name) {
		size_t n = strlen(v->name);
		t16 = htobe16(NBD_INFO_NAME);
		memcpy(b, &t16, 2);
		memcpy(b + 2, v->name, n);
		opt_reply(c, opt, NBD_REP_INFO, b, (uint32_t)(2 + n));
	}
	if (go->want_description) {
		char d[128];
		int n = snprintf(d, sizeof(d), "Tandem volume %s", v->name);
		t16 = htobe16(NBD_INFO_DESCRIPTION);
		memcpy(b, &t16, 2);
		memcpy(b + 2, d, (size_t)n);
		opt_reply(c, opt, NBD_REP_INFO, b, (uint32_t)(2 + n));
	}
	/* Sent whether asked or not, as the protocol allows. */
	t16 = htobe16(NBD_INFO_BLOCK_SIZE);
	memcpy(b, &t16, 2);
	t32 = htobe32(v->min_block ? v->min_block : 1);
	memcpy(b + 2, &t32, 4);
	t32 = htobe32(4096);
	memcpy(b + 6, &t32, 4);
	t32 = htobe32(NBD_MAX_PAYLOAD);
	memcpy(b + 10, &t32, 4);
	opt_reply(c, opt, NBD_REP_INFO, b, 14);
}

static void opt_go(struct nbd_conn *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
	struct nbd_go go;
	struct vol *v;
	const char *why;

	if (nbd_parse_go(data, len, &go)) {
		opt_error(c, opt, NBD_REP_ERR_INVALID, "malformed INFO/GO request");
		return;
	}
	v = find_vol(c->srv, go.name);
	if (!v) {
		opt_error(c, opt, NBD_REP_ERR_UNKNOWN, "no such volume on this node");
		return;
	}
	if ((why = unavailable(v))) {
		opt_error(c, opt, NBD_REP_ERR_UNKNOWN, why);
		return;
	}
	/* O_DIRECT needs aligned requests; a client that would not learn the
	 * alignment is told so, as the protocol provides, rather than failed
	 * later request by request. */
	if (opt == NBD_OPT_GO && !go.want_block_size && v->min_block > 1) {
		opt_error(c, opt, NBD_REP_ERR_BLOCK_SIZE_REQD,
			  "this volume needs aligned requests: ask for NBD_INFO_BLOCK_SIZE");
		return;
	}
	send_info(c, opt, &go, v);
	opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
	if (opt == NBD_OPT_GO && c->state != ST_DEAD)
		enter_xmit(c, v);
}

static void opt_export_name(struct nbd_conn *c, const uint8_t *data, uint32_t len)
{
	char name[NBD_MAX_STRING + 1];
	struct vol *v;
	struct hs_msg *m;
	uint8_t *p;
	uint64_t size;
	uint16_t fl;
	size_t n = c->no_zeroes ? 10 : 134;

	if (len > NBD_MAX_STRING || memchr(data, '\0', len)) {
		conn_kill(c, "bad export name");
		return;
	}
	memcpy(name, data, len);
	name[len] = '\0';
	v = find_vol(c->srv, name);
	if (!v || unavailable(v)) {
		/* This option has no error reply: closing is the answer. */
		conn_kill(c, v ? unavailable(v) : "unknown export");
		return;
	}
	p = hs_alloc(c, n, &m);
	if (!p) {
		conn_kill(c, "out of memory");
		return;
	}
	memset(p, 0, n);
	size = htobe64(v->size);
	memcpy(p, &size, 8);
	fl = htobe16(tflags(c));
	memcpy(p + 8, &fl, 2);
	hs_send(c, m);
	enter_xmit(c, v);
}

static void opt_list(struct nbd_conn *c, uint32_t opt, uint32_t len)
{
	if (len) {
		opt_error(c, opt, NBD_REP_ERR_INVALID, "LIST takes no data");
		return;
	}
	for (unsigned i = 0; i < c->srv->nvols; i++) {
		struct vol *v = c->srv->vols[i];
		uint8_t b[4 + CFG_NAME_MAX + 32];
		size_t n = strlen(v->name);
		uint32_t l = htobe32((uint32_t)n);
		int d;
		memcpy(b, &l, 4);
		memcpy(b + 4, v->name, n);
		d = snprintf((char *)b + 4 + n, sizeof(b) - 4 - n, "%s", vol_role_name(v->role));
		opt_reply(c, opt, NBD_REP_SERVER, b, (uint32_t)(4 + n + (size_t)d));
	}
	opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
}

static void opt_meta(struct nbd_conn *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
	struct nbd_meta m;
	struct vol *v;
	bool list = opt == NBD_OPT_LIST_META_CONTEXT;

	if (!c->structured) {
		opt_error(c, opt, NBD_REP_ERR_INVALID, "structured replies must be negotiated first");
		return;
	}
	if (nbd_parse_meta(data, len, &m)) {
		opt_error(c, opt, NBD_REP_ERR_INVALID, "malformed meta context request");
		return;
	}
	v = find_vol(c->srv, m.name);
	if (!v) {
		opt_error(c, opt, NBD_REP_ERR_UNKNOWN, "no such volume on this node");
		return;
	}
	if (!list)
		c->meta_alloc = m.base_allocation;
	if (m.base_allocation || (list && (m.base_any || m.nqueries == 0))) {
		uint8_t b[4 + sizeof(NBD_META_BASE_ALLOCATION)];
		uint32_t id = htobe32(list ? 0 : NBD_META_CONTEXT_ID);
		memcpy(b, &id, 4);
		memcpy(b + 4, NBD_META_BASE_ALLOCATION, sizeof(NBD_META_BASE_ALLOCATION) - 1);
		opt_reply(c, opt, NBD_REP_META_CONTEXT, b,
			  (uint32_t)(4 + sizeof(NBD_META_BASE_ALLOCATION) - 1));
	}
	opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
}

static void handle_option(struct nbd_conn *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		opt_export_name(c, data, len);
		break;
	case NBD_OPT_ABORT:
		opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
		conn_kill(c, NULL);
		break;
	case NBD_OPT_LIST:
		opt_list(c, opt, len);
		break;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		opt_go(c, opt, data, len);
		break;
	case NBD_OPT_STRUCTURED_REPLY:
		if (len) {
			opt_error(c, opt, NBD_REP_ERR_INVALID, "STRUCTURED_REPLY takes no data");
		} else if (c->structured) {
			opt_error(c, opt, NBD_REP_ERR_INVALID, "already negotiated");
		} else {
			c->structured = true;
			opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
		}
		break;
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		opt_meta(c, opt, data, len);
		break;
	case NBD_OPT_STARTTLS:
		opt_error(c, opt, NBD_REP_ERR_POLICY, "TLS is not offered");
		break;
	default:
		opt_error(c, opt, NBD_REP_ERR_UNSUP, "option not supported");
		break;
	}
}

static void on_rx_handshake(struct nbd_conn *c)
{
	struct net_conn *nc = &c->peer.net;

	while (c->state == ST_CLIENT_FLAGS || c->state == ST_OPT) {
		const uint8_t *p = net_rx_peek(nc);
		if (c->state == ST_CLIENT_FLAGS) {
			uint32_t fl;
			if (net_rx_avail(nc) < 4)
				return;
			memcpy(&fl, p, 4);
			fl = be32toh(fl);
			net_rx_consume(nc, 4);
			if (fl & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
				conn_kill(c, "unknown client flags");
				return;
			}
			c->no_zeroes = fl & NBD_FLAG_C_NO_ZEROES;
			set_state(c, ST_OPT);
		} else {
			uint64_t magic;
			uint32_t opt, len;
			if (net_rx_avail(nc) < sizeof(struct nbd_opt_hdr))
				return;
			memcpy(&magic, p, 8);
			memcpy(&opt, p + 8, 4);
			memcpy(&len, p + 12, 4);
			magic = be64toh(magic);
			opt = be32toh(opt);
			len = be32toh(len);
			if (magic != NBD_IHAVEOPT) {
				conn_kill(c, "bad option magic");
				return;
			}
			if (len > NBD_MAX_OPTION_LEN) {
				conn_kill(c, "option data too long");
				return;
			}
			if (net_rx_avail(nc) < sizeof(struct nbd_opt_hdr) + len)
				return;
			if (c->hs_queued >= HS_MAX_QUEUED) {
				/* N5: answered once the replies before it are read */
				c->want_resume = true;
				net_rx_pause(nc);
				return;
			}
			handle_option(c, opt, p + sizeof(struct nbd_opt_hdr), len);
			net_rx_consume(nc, sizeof(struct nbd_opt_hdr) + len);
		}
	}
}

static void on_rx(struct net_conn *nc)
{
	struct nbd_conn *c = container_of(nc, struct nbd_conn, peer.net);

	if (c->state == ST_CLIENT_FLAGS || c->state == ST_OPT)
		on_rx_handshake(c);
	if (c->state == ST_XMIT || c->state == ST_DRAIN)
		on_rx_xmit(c);
	if (c->state == ST_DEAD)
		net_rx_consume(nc, net_rx_avail(nc));
}

static void on_closed(struct net_conn *nc)
{
	struct nbd_conn *c = container_of(nc, struct nbd_conn, peer.net);

	set_state(c, ST_DEAD);
	if (c->rx_slot) {
		/* A WRITE whose payload never fully arrived is never replied to. */
		struct nbd_slot *sl = c->rx_slot;
		c->rx_slot = NULL;
		slot_put(sl);
	}
	net_peer_closed(&c->peer);
}

/* The client sent FIN: no more requests, but those in flight are answered
 * before the connection closes (like DISC). */
static void on_eof(struct net_conn *nc)
{
	struct nbd_conn *c = container_of(nc, struct nbd_conn, peer.net);

	c->disc = true;
	if (c->state == ST_DRAIN && c->rx_slot) {
		/* A refused WRITE whose payload was being skipped: the rest of
		 * it never comes, so it is never replied to (as on_closed). */
		struct nbd_slot *sl = c->rx_slot;
		c->rx_slot = NULL;
		c->drain_left = 0;
		set_state(c, ST_XMIT);
		slot_put(sl); /* may kill the connection: nothing else is busy */
		return;
	}
	if (c->busy == 0)
		conn_kill(c, NULL);
}

static const struct net_conn_ops nbd_net_ops = {
	.on_rx = on_rx,
	.on_closed = on_closed,
	.on_eof = on_eof,
};

/* net_srv asks: shutdown (why NULL) or handshake-timeout (N6). */
static void conn_kill_peer(struct net_peer *p, const char *why)
{
	conn_kill(container_of(p, struct nbd_conn, peer), why);
}

static const struct net_peer_ops nbd_peer_ops = {
	.release = conn_release,
	.kill = conn_kill_peer,
};

static void on_accept(struct net_srv *ns, int fd, const char *host)
{
	struct nbd_server *s = container_of(ns, struct nbd_server, srv);
	struct nbd_conn *c;
	struct hs_msg *m;
	uint8_t *p;
	uint64_t magic;
	uint16_t fl;

	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->srv = s; /* calloc: c->state is ST_CLIENT_FLAGS, the first state */
	c->resume.fn = conn_resume;
	if (net_peer_open(&c->peer, s->ev, ns, fd, host, RXBUF, &nbd_net_ops, &nbd_peer_ops)) {
		free(c);
		return;
	}
	p = hs_alloc(c, 18, &m);
	if (!p) {
		conn_kill(c, "out of memory");
		return;
	}
	magic = htobe64(NBD_MAGIC);
	memcpy(p, &magic, 8);
	magic = htobe64(NBD_IHAVEOPT);
	memcpy(p + 8, &magic, 8);
	fl = htobe16(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	memcpy(p + 16, &fl, 2);
	hs_send(c, m);
}

int nbd_server_new(struct ev_loop *ev, const char *addr, const struct cfg *cfg,
		   struct vol **vols, unsigned nvols, struct nbd_server **out)
{
	struct nbd_server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->ev = ev;
	s->cfg = cfg;
	s->vols = vols;
	s->nvols = nvols;
	s->srv.name = "nbd";
	s->srv.max = cfg->max_conns;
	s->srv.max_per_addr = cfg->max_conns_per_addr;
	s->srv.hs_timeout_ns = (uint64_t)cfg->handshake_timeout_ms * 1000000ull;
	s->srv.on_accept = on_accept;
	r = net_srv_listen(&s->srv, ev, addr);
	if (r) {
		free(s);
		return r;
	}
	*out = s;
	return 0;
}

void nbd_server_shutdown(struct nbd_server *s)
{
	net_srv_shutdown(&s->srv);
}

void nbd_server_abort(struct nbd_server *s)
{
	net_srv_abort(&s->srv);
}

unsigned nbd_server_conns(const struct nbd_server *s)
{
	return s->srv.npeers;
}

void nbd_server_free(struct nbd_server *s)
{
	free(s);
}
