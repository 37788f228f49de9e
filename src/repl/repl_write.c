/* The primary's write path: a front-end write waits behind earlier
 * overlapping ones (R3), gets its activity-log extent (R2), goes to the
 * peer and the local store at once, and completes when both did (R1); the
 * peer's acks; and the lazy cleaner that clears bits once both copies are
 * durable. Never: completes a write before its peer part is acked or
 * marked out of sync. */
#include "repl_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

static void fg_unblock(struct repl *r);

/* The volume attributes to the peer (primary only). */
void meta_send(struct repl *r, struct rconn *c)
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
	if (r->conn && r->conn->hs_stage == ST_RUN)
		meta_send(r, r->conn);
}

bool peer_ready(const struct repl *r)
{
	/* A peer whose disk failed is connected but takes no data (its
	 * failure is latched until `attach` there): writes mark out of sync
	 * here as while it is away, and no resync goes to it. */
	return conn_usable(r->conn) && r->conn->hs_stage == ST_RUN &&
	       (r->rstate == RR_ESTABLISHED || r->rstate == RR_SYNCSOURCE) &&
	       !vol_disk_gone(r->peer.disk);
}

static uint64_t slot_of(uint64_t seq)
{
	return seq & (NSLOTS - 1);
}

/* Takes a sequence number and a slot for a request to the peer; false when
 * the window is full (then the peer is treated as gone for this request). */
bool slot_take(struct repl *r, struct vol_io *io)
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
	ab_forget(io);
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
	/* on-io-error = detach: any error of the store here (ENOSPC, say;
	 * an EIO did it already) on a request the peer has fails the disk
	 * here, and D1 serves through the peer */
	if (io->rep.lres && io->rep.lres != -ENODEV && io->rep.peer_ok &&
	    !vol_disk_gone(r->v->disk) && !r->cfg->io_error_pass_on && peer_serves(r))
		vol_disk_error(r->v, -io->rep.lres, io->type == BS_FLUSH ? "flush" : "write");
	/* D1: a write the store here failed, or never took (-ENODEV: the
	 * disk was gone), is complete once the peer has it; its region is
	 * marked, which a disk attached since fills from the peer (P2) */
	if (io->rep.lres && io->rep.peer_ok &&
	    (vol_disk_gone(r->v->disk) || r->pulling || io->rep.lres == -ENODEV) &&
	    (!r->cfg->io_error_pass_on || r->pulling) && peer_whole(r)) {
		io->rep.lres = 0;
		if (io->type != BS_FLUSH) {
			r->peer_only = true; /* P7 */
			r->peer_only_fails = r->v->disk_fails;
			if (!(sb(r)->flags & TANDEM_MD_F_PEER_ONLY)) {
				/* F2: also after a restart, the old disk is
				 * known to lack it */
				sb(r)->flags |= TANDEM_MD_F_PEER_ONLY;
				vol_md_write(r->v);
			}
		}
	}
	if (io->rep.lres == -ENODEV)
		io->rep.lres = -EIO; /* (what a client is told) */
	/* P3: a disk being filled is no copy of its own: what the peer did
	 * not take is not done (its region is marked: the fill and the reads
	 * take the peer's) */
	if (r->pulling && !io->rep.peer_ok && io->rep.lres == 0)
		io->rep.lres = -EIO;
	/* D2: written here before the disk was detached (failed or too slow)
	 * and not taken by the peer: its only copy is on a disk this node no
	 * longer counts, which an attach overwrites from the peer. It fails;
	 * acknowledged, it would be lost (and a diskless primary would be
	 * writing alone, which takes the peer's right to take over). */
	if (!io->rep.peer_ok && io->rep.lres == 0 && io->type != BS_FLUSH &&
	    vol_disk_gone(r->v->disk))
		io->rep.lres = -EIO;
	/* F2: written here alone because the peer's disk is failed: this copy
	 * is newer than the peer's old disk from now on (a new generation
	 * before the write completes), so that disk, attached again, takes
	 * what changed and is never taken for the newer copy */
	if (!io->rep.peer_ok && io->rep.lres == 0 && io->type != BS_FLUSH &&
	    io->rep.ab == AB_NONE && vol_disk_gone(r->peer.disk))
		gen_branch(r);
	if (!quorum_hold(r, io)) /* Q1 */
		vol_complete(io, io->rep.lres);
	fg_unblock(r);
	if (r->rstate == RR_SYNCSOURCE || r->vfy_state == VFY_RUNNING)
		ev_defer(r->ev, &r->rs_kick);
}

void fg_put(struct repl *r, struct vol_io *io)
{
	if (--io->rep.pending == 0)
		fg_finish(r, io);
}

static void fg_local_done(struct vol_io *io, int res)
{
	io->rep.lres = res;
	/* A11: a streamed write that failed here takes its entry's fate */
	if (res && ab_wait_peer(io->vol->repl, io))
		io->rep.pending++;
	fg_put(io->vol->repl, io);
}

static void fg_tx_done(struct net_tx *tx, int err)
{
	struct vol_io *io = container_of(tx, struct vol_io, rep.tx);
	(void)err;
	pack_sent(io->vol->repl, &io->rep);
	fg_put(io->vol->repl, io);
}

static void fg_send(struct repl *r, struct vol_io *io)
{
	struct repl_io w;
	uint16_t type;
	bool zero = false;
	size_t n;

	if (io->type == BS_FLUSH) {
		if (!slot_take(r, io))
			goto no_peer;
		n = repl_enc_flush(io->rep.hdr, io->rep.seq);
	} else {
		if ((io->type == BS_WRITE ? io->len > REPL_MAX_DATA
					  : io->len > UINT32_MAX - 4095) ||
		    !slot_take(r, io))
			goto no_peer;
		/* Zero elision: an all-zero write crosses the link as an
		 * extent; the peer stores zeros (its copy reads the same). */
		zero = io->type == BS_WRITE && buf_is_zero(io->buf, io->len);
		type = io->type == BS_WRITE && !zero ? REPL_WRITE
		       : io->type == BS_TRIM         ? REPL_TRIM
						     : REPL_ZERO;
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
	if (io->type == BS_WRITE && !zero) {
		pack_payload(r, &io->rep, io->buf, io->len);
		r->lk_data_bytes += io->len;
	} else if (io->type != BS_FLUSH) {
		r->lk_zero_bytes += io->len;
	}
	io->rep.tx.done = fg_tx_done;
	net_send(&r->conn->peer.net, &io->rep.tx);
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

void drop_kick_fn(struct ev_deferred *d)
{
	struct repl *r = container_of(d, struct repl, drop_kick);
	if (r->conn)
		conn_fail(r->conn, "reconnecting to resync what could not be sent");
}

void fg_dispatch(struct repl *r, struct vol_io *io)
{
	if (io->rep.ab != AB_NONE) {
		/* the stream has it, or marked it */
	} else if (peer_ready(r)) {
		fg_send(r, io);
	} else if (io->type != BS_FLUSH) {
		gen_branch(r); /* the first write without the peer starts a generation */
		bm_set_oos(r->bm, io->off, io->len);
	}
	vol_local(r->v, io, fg_local_done);
}

static void fg_go(struct repl *r, struct vol_io *io)
{
	bool stream = r->async || !ab_empty(r) || !list_empty(&r->ab_wait);

	io->rep.pending = 1;
	/* D1: with no disk of its own (or one being filled), an async primary
	 * writes through its peer synchronously once the stream is empty; a
	 * write behind the stream stays in it (order), and its failed local
	 * part makes it wait for the peer's answer, which decides (A11) */
	if (stream && repl_need_peer(r) && ab_empty(r) && list_empty(&r->ab_wait))
		stream = false;
	if (stream && r->v->role == VOL_PRIMARY && !ab_submit(r, io, false))
		return; /* waits for room in the stream (ab_kick_fn goes on) */
	fg_dispatch(r, io);
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
	list_for_each_safe (pos, tmp, &r->rs_inflight) {
		struct rsreq *q = container_of(pos, struct rsreq, link);
		if (!overlap(q->io.off, q->io.len, io->off, io->len))
			continue;
		if (q->phase != RQ_DATA)
			q->io.rep.stale = true;
		else if (r->conn)
			net_bulk_pin(&r->conn->peer.net, &q->io.rep.tx);
	}

	io->rep.bmw.cb = fg_bm_done;
	/* D1: a gone disk takes no write; its intent would protect nothing */
	if (vol_disk_gone(r->v->disk) || bm_intent(r->bm, io->off, io->len, &io->rep.bmw))
		fg_go(r, io);
}

/* R3: overlaps a write in flight, or one waiting before it. */
static bool fg_conflicts(struct repl *r, struct vol_io *io, struct list *upto)
{
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, &r->inflight) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		if (overlap(o->off, o->len, io->off, io->len))
			return true;
	}
	list_for_each_safe (pos, tmp, &r->waiting) {
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

	list_for_each_safe (pos, tmp, &r->waiting) {
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

/* R10: the peer failed io, a write or a flush of ours (foreground, cleaner
 * or drain). It marked its disk inconsistent before answering; here what it
 * lacks is marked (for a FLUSH, what it had not made durable: the extents of
 * the activity log) and copied to it again (now, or on the next connect). */
void peer_failed(struct repl *r, const struct vol_io *io, int res)
{
	if (r->rstate != RR_SYNCSOURCE) /* once, not per request */
		log_warn("volume %s: %s failed a %s: %s; it is not up to date until that is "
			 "resynced",
			 r->v->name, peer_name(r), io->type == BS_FLUSH ? "flush" : "write",
			 strerror(-res));
	if (io->type == BS_FLUSH)
		al_mark(r);
	else
		oos_mark(r, io->off, io->len);
	if (vol_disk_gone(r->peer.disk)) {
		/* latched there: nothing is copied to it (peer_ready); what this
		 * copy holds without it is a new generation (F2) */
		gen_branch(r);
		return;
	}
	r->peer.disk = VOL_INCONSISTENT;
	if (r->rstate == RR_SYNCSOURCE || r->vfy_state == VFY_RUNNING || !peer_ready(r))
		return; /* the running resync, or the one after verify, copies them */
	if (r->v->disk != VOL_UPTODATE)
		return; /* no source here: the next connect decides */
	if (r->rstate == RR_ESTABLISHED && (r->features & REPL_FEAT_RESYNC2) &&
	    r->peer.role != REPL_ROLE_PRIMARY) {
		bm_flush(r->bm, NULL);
		rs_start_live(r);
		return;
	}
	gen_branch(r);
	ev_defer(r->ev, &r->drop_kick); /* a new handshake resyncs them */
}

int msg_ack(struct rconn *c, const struct repl_msg *m)
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
		} else if (io->rep.kind == K_ASYNC) {
			ab_acked(r, io, res);
		} else if (io->rep.kind == K_READ) {
			rd_acked(r, io, res);
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

/* ---- the lazy bitmap cleaner ---- */

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
	/* A STATE speaks of the marks on disk, which only this cleaner clears:
	 * once the last is gone the peer hears of it, or a peer that waits for
	 * a mark-free primary to call its copy up to date (R13) waits on a
	 * STATE that never comes. */
	if (!err && r->conn && conn_usable(r->conn) && r->conn->hs_stage == ST_RUN &&
	    r->conn->sent_marks && !bm_disk_marks(r->bm))
		send_state(r->conn);
}

/* Sends the peer a FLUSH for io (K_CLEAN: its ack runs done with the result
 * in io->rep.lres, as does losing the connection); false when the request
 * window is full. */
bool peer_flush(struct repl *r, struct vol_io *io, void (*done)(struct vol_io *, int))
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

void clean_start(struct repl *r)
{
	struct list *pos, *tmp;
	bool peer = peer_ready(r);

	if (vol_disk_gone(r->v->disk))
		return; /* nothing here to make durable; the marks stay (D1) */
	memset(r->busy, 0, bm_words(r->bm) * 8);
	list_for_each_safe (pos, tmp, &r->inflight) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		bm_mark_range(r->busy, r->bm, o->off, o->len);
	}
	ab_mark_busy(r, r->busy); /* A3 */
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
