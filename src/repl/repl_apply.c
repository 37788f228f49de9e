/* The secondary's apply path: what the primary sends is applied through
 * vol_local in arrival order where it overlaps (R5), a FLUSH after all that
 * came before it; acknowledgements are batched and sent at the end of the
 * loop pass. Never: applies data while this node is primary (R6). */
#include "repl_int.h"

#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

static void apply_start(struct rconn *c, struct rapply *a);

void ack_flush_fn(struct ev_deferred *d)
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
	ev_defer(c->peer.net.ev, &c->ack_flush);
}

static bool list_overlaps(struct list *l, struct rapply *a)
{
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, l) {
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
		list_for_each_safe (pos, tmp, &c->r->bound) {
			struct rconn *o = container_of(pos, struct rconn, link);
			if (o != c && o->order < c->order &&
			    (applying_overlaps(o, a) || list_overlaps(&o->apply_wait, a)))
				return true;
		}
	}
	list_for_each_safe (pos, tmp, &c->apply_wait) {
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

/* Starts the waiting applies of c that no longer conflict, in order. */
static void apply_rescan(struct rconn *c)
{
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, &c->apply_wait) {
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
	if (c == r->conn && r->rstate == RR_SYNCTARGET)
		c->target_fails++;
	if (disk_consistent(r->v->disk)) {
		log_warn("volume %s: %s of %llu bytes at %llu from %s failed here: %s", r->v->name,
			 a->type == REPL_FLUSH ? "flush" : "write", (unsigned long long)a->io.len,
			 (unsigned long long)a->io.off, c->peer_node, strerror(-res));
		vol_set_disk(r->v, VOL_INCONSISTENT);
	}
	/* (once per change of the disk state, not per failed request) */
	if (c == r->conn && conn_usable(c) && c->hs_stage == ST_RUN && c->sent_disk != r->v->disk)
		send_state(c);
}

static void read_sent(struct net_tx *tx, int err)
{
	struct rapply *a = container_of(tx, struct rapply, io.rep.tx);
	struct rconn *c = a->c;

	(void)err;
	c->apply_bytes -= a->io.len;
	if (c->peer.net.rx_paused && c->apply_bytes < APPLY_MAX_BYTES / 2 && !c->aborted &&
	    !c->cp_pending)
		net_rx_resume(&c->peer.net);
	bufpool_put(&c->r->pool, a->io.buf, a->io.len);
	free(a);
	net_peer_unref(&c->peer); /* apply_queue's reference */
}

/* D1: the data of the primary's READ, from the buffer it was read into. */
static void read_answer(struct rconn *c, struct rapply *a)
{
	struct repl_io q = { .seq = a->seq, .off = a->io.off, .len = (uint32_t)a->io.len };
	size_t n = repl_enc_io(a->io.rep.hdr, REPL_RDATA, &q);

	a->io.rep.tx.iov[0].iov_base = a->io.rep.hdr;
	a->io.rep.tx.iov[0].iov_len = n;
	a->io.rep.tx.iov[1].iov_base = a->io.buf;
	a->io.rep.tx.iov[1].iov_len = a->io.len;
	a->io.rep.tx.iovcnt = 2;
	a->io.rep.tx.done = read_sent;
	c->apply_bytes += a->io.len; /* held until sent: it bounds what reading takes */
	net_send(&c->peer.net, &a->io.rep.tx);
}

static void apply_done(struct vol_io *io, int res)
{
	struct rapply *a = container_of(io, struct rapply, io);
	struct rconn *c = a->c;
	struct list *pos, *tmp;
	bool answered;

	list_del(&a->link);
	c->napply--;
	c->napplied++;
	c->apply_bytes -= a->type == REPL_WRITE || a->type == REPL_RS_DATA ||
					  a->type == REPL_CSUM || a->type == REPL_READ
				  ? a->io.len
				  : 0;
	/* Bits of the current session only: a lost connection's late apply
	 * says nothing about what the new one still has to copy. */
	if (res == 0 && c->r && c->r->conn == c && c->r->rstate == RR_SYNCTARGET &&
	    (a->type == REPL_RS_DATA || a->type == REPL_WRITE || a->type == REPL_ZERO ||
	     a->type == REPL_RS_ZERO))
		bm_clear_oos(c->r->bm, a->io.off, a->io.len);
	if (res == 0 && a->type == REPL_CSUM) {
		uint8_t d[REPL_DIGEST_LEN];
		digest_of(a->io.buf, a->io.len, d);
		res = memcmp(d, a->digest, REPL_DIGEST_LEN) ? REPL_ACK_DIFFERS : 0;
	}
	if (res < 0 && c->r && a->type == REPL_READ) {
		/* a read takes nothing from this copy; a store EIO failed the
		 * disk (vol_local), which the primary hears of */
		if (c == c->r->conn && conn_usable(c) && c->hs_stage == ST_RUN &&
		    c->sent_disk != c->r->v->disk)
			send_state(c);
	} else if (res < 0 && c->r && a->type != REPL_CSUM) {
		apply_failed(c->r, c, a, res);
	}
	answered = res == 0 && a->type == REPL_READ && conn_usable(c);
	if (answered) {
		read_answer(c, a); /* frees a and its buffer once sent */
	} else {
		ack_add(c, a->seq, res);
		if (a->io.buf)
			bufpool_put(&c->r->pool, a->io.buf, a->io.len);
		free(a);
	}
	apply_rescan(c);
	if (c->r) {
		struct list *p2, *t2;
		list_for_each_safe (p2, t2, &c->r->bound) {
			struct rconn *o = container_of(p2, struct rconn, link);
			if (o != c)
				apply_rescan(o);
		}
	}
	(void)pos;
	(void)tmp;
	if (c->cp_pending && !c->napply && !c->aborted)
		apply_cp_ready(c);
	else if (c->peer.net.rx_paused && c->apply_bytes < APPLY_MAX_BYTES / 2 && !c->aborted &&
		 !c->cp_pending)
		net_rx_resume(&c->peer.net);
	if (!answered) /* (a READ's answer keeps the reference until it is sent) */
		net_peer_unref(&c->peer); /* apply_queue's reference: c may go now */
}

/* RS_START's pause (CP1): every write before it is applied; the image is
 * kept, and reading goes on. */
void apply_cp_ready(struct rconn *c)
{
	c->cp_pending = false;
	if (c->r && c->r->conn == c)
		cp_take(c->r);
	if (!c->aborted)
		net_rx_resume(&c->peer.net);
}

static void apply_start(struct rconn *c, struct rapply *a)
{
	list_add_tail(&c->applying, &a->link);
	vol_local(c->r->v, &a->io, apply_done);
}

static void apply_queue(struct rconn *c, struct rapply *a)
{
	c->napply++;
	net_peer_ref(&c->peer);
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
	case REPL_READ: a->io.type = BS_READ; break;
	default:
		a->io.type = BS_ZERO;
		a->io.flags |= BS_F_MAY_TRIM;
		break;
	}
	return a;
}

void data_rx_done(struct net_conn *nc, int err)
{
	struct rconn *c = container_of(nc, struct rconn, peer.net);
	struct rapply *a = c->rx_cur;

	c->rx_cur = NULL;
	if (!err && a->zbuf && unpack_end(c, a))
		err = -EBADMSG; /* the connection failed */
	if (err) {
		c->apply_bytes -= a->io.len;
		unpack_drop(c->r, a);
		bufpool_put(&c->r->pool, a->io.buf, a->io.len);
		free(a);
		return;
	}
	apply_queue(c, a);
	if (c->apply_bytes >= APPLY_MAX_BYTES)
		net_rx_pause(nc);
}

/* WRITE, TRIM, ZERO, FLUSH, RS_DATA, RS_ZERO, CSUM, READ: something to apply here
 * (the table refuses them on a primary: R6). */
int msg_data(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	struct rapply *a;

	if ((m->type == REPL_RS_DATA || m->type == REPL_RS_ZERO) && r->rstate != RR_SYNCTARGET) {
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
	if (m->type == REPL_READ && (!(c->features & REPL_FEAT_READ) || c != r->conn)) {
		free(a);
		conn_fail(c, "read request without the feature that defines it");
		return -1;
	}
	if (m->type == REPL_READ && r->v->disk != VOL_UPTODATE) {
		/* D1: only an up-to-date copy answers (the primary learns of
		 * the change by the STATE that follows it) */
		ack_add(c, a->seq, -EIO);
		free(a);
		return 0;
	}
	if (m->type == REPL_CSUM || m->type == REPL_READ) {
		a->io.buf = bufpool_get(&r->pool, a->io.len);
		if (!a->io.buf) {
			free(a);
			conn_fail(c, "out of memory");
			return -1;
		}
		c->apply_bytes += a->io.len;
		apply_queue(c, a);
		if (c->apply_bytes >= APPLY_MAX_BYTES)
			net_rx_pause(&c->peer.net);
		return 0;
	}
	if (m->data_len) {
		a->io.buf = bufpool_get(&r->pool, a->io.len);
		if (!a->io.buf) {
			free(a);
			conn_fail(c, "out of memory");
			return -1;
		}
		c->apply_bytes += a->io.len;
		c->rx_cur = a;
		/* payload follows: receive it directly (compressed: into a->zbuf;
		 * on failure conn_release frees rx_cur) */
		return m->hflags ? unpack_begin(c, a, m) : 1;
	}
	apply_queue(c, a);
	return 0;
}

int msg_meta(struct rconn *c, const struct repl_msg *m)
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

int msg_set_gen(struct rconn *c, const struct repl_msg *m)
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
