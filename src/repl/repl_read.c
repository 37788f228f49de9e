/* A primary whose disk is gone serves through its peer (vol.h D1): its
 * reads go over the link as READ and come back as RDATA, straight into the
 * front-end's buffer; the secondary's part is in repl_apply.c.
 * Invariants:
 *   D1. Reads go to the peer only while it holds every acknowledged write:
 *       connected, established (no resync either way), its disk up to date,
 *       the async stream empty and nothing marked ahead of it.
 *   D3. A read from the peer completes once: with its RDATA, its error
 *       ACK, or -EIO when the connection goes before its data is in. */
#include "repl_int.h"

#include <errno.h>
#include <string.h>

#include "../common/log.h"

/* D4: the peer's copy is whole (up to date): a write that only it holds
 * counts as written. A peer being filled (a sync target) holds the regions
 * it was sent and not the rest: with no whole copy anywhere a write fails
 * (a medium error) rather than leaving its only copy on an incomplete one,
 * so the old disk here, attached again, still holds every acknowledged
 * write (P7). */
bool peer_whole(const struct repl *r)
{
	return r->have_peer && r->peer.disk == VOL_UPTODATE;
}

bool peer_serves(const struct repl *r)
{
	return r->v->role == VOL_PRIMARY && peer_ready(r) && r->rstate == RR_ESTABLISHED &&
	       peer_whole(r) && r->peer.role != REPL_ROLE_PRIMARY &&
	       (r->features & REPL_FEAT_READ) && ab_empty(r) && !r->ab_ahead && !r->draining;
}

bool repl_need_peer(const struct repl *r)
{
	return r->v->role == VOL_PRIMARY && (vol_disk_gone(r->v->disk) || r->pulling);
}

bool repl_via_peer(const struct repl *r)
{
	return repl_need_peer(r) && (r->pulling || !r->cfg->io_error_pass_on) && peer_serves(r);
}

/* D3: the read's parts (the send, the answer) are in; it completes. */
static void rd_put(struct vol_io *io)
{
	struct repl *r = io->vol->repl;

	if (--io->rep.pending)
		return;
	if (!io->rep.bg) {
		r->pull_fg_reads--;
		/* the controller's signal while a fill runs (P5) */
		if (r->ctl_armed && io->rep.lres == 0)
			rsctl_fg_done(&r->ctl, ev_now(r->ev) - io->rep.t0, 0);
	}
	io->local_done(io, io->rep.lres);
}

static void rd_tx_done(struct net_tx *tx, int err)
{
	struct vol_io *io = container_of(tx, struct vol_io, rep.tx);

	(void)err; /* a send that failed loses the connection: fail_pending answers */
	rd_put(io);
}

static int rd_send(struct repl *r, struct vol_io *io, void (*done)(struct vol_io *io, int res),
		   bool bg)
{
	struct repl_io q;
	size_t n;

	if (!peer_serves(r) || io->len > REPL_MAX_DATA)
		return -EIO;
	memset(&io->rep, 0, sizeof(io->rep));
	list_init(&io->rep.link);
	io->rep.kind = K_READ;
	io->rep.bg = bg;
	io->rep.t0 = ev_now(r->ev);
	io->local_done = done;
	if (!slot_take(r, io))
		return -EBUSY;
	if (!bg)
		r->pull_fg_reads++;
	q.seq = io->rep.seq;
	q.off = io->off;
	q.len = (uint32_t)io->len;
	q.flags = 0;
	n = repl_enc_io(io->rep.hdr, REPL_READ, &q);
	io->rep.pending = 2; /* the send and the answer */
	io->rep.lres = -EIO;
	io->rep.tx.iov[0].iov_base = io->rep.hdr;
	io->rep.tx.iov[0].iov_len = n;
	io->rep.tx.iovcnt = 1;
	io->rep.tx.done = rd_tx_done;
	net_send(&r->conn->peer.net, &io->rep.tx);
	return 0;
}

int repl_read(struct repl *r, struct vol_io *io, void (*done)(struct vol_io *io, int res))
{
	return rd_send(r, io, done, false);
}

int repl_read_bg(struct repl *r, struct vol_io *io, void (*done)(struct vol_io *io, int res))
{
	return rd_send(r, io, done, true);
}

/* msg_ack: the peer could not read it. */
void rd_acked(struct repl *r, struct vol_io *io, int res)
{
	if (res == 0) /* data comes as RDATA, never as a bare ack */
		res = -EIO;
	log_warn("volume %s: %s failed a read of %llu bytes at %llu: %s", r->v->name, peer_name(r),
		 (unsigned long long)io->len, (unsigned long long)io->off, strerror(-res));
	io->rep.lres = res;
	rd_put(io);
}

/* fail_pending: the connection went before the answer. */
void rd_lost(struct repl *r, struct vol_io *io)
{
	(void)r;
	io->rep.lres = -EIO;
	rd_put(io);
}

void rdata_rx_done(struct net_conn *nc, int err)
{
	struct rconn *c = container_of(nc, struct rconn, peer.net);
	struct vol_io *io = c->rd_cur;

	c->rd_cur = NULL;
	io->rep.lres = err ? -EIO : 0;
	rd_put(io);
}

/* RDATA: the answer to one of our READs; its data is received straight into
 * the front-end's buffer (2: rd_cur is set, receive it). */
int msg_rdata(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	struct vol_io *io = r->slots[m->u.io.seq & (NSLOTS - 1)];

	if (!(c->features & REPL_FEAT_READ) || !io || io->rep.seq != m->u.io.seq ||
	    io->rep.kind != K_READ || io->off != m->u.io.off || io->len != m->u.io.len) {
		conn_fail(c, "read data for no read of ours (%llu)",
			  (unsigned long long)m->u.io.seq);
		return -1;
	}
	r->slots[m->u.io.seq & (NSLOTS - 1)] = NULL;
	c->rd_cur = io;
	return 2;
}
