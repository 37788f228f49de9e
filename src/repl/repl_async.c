/* The primary's asynchronous stream (replication = async, docs/ASYNC.md).
 *
 * A front-end write is acknowledged once it is local. Its data is copied
 * into a stream entry that goes to the peer in submission order; the
 * entries not yet acknowledged by the peer are the backlog, bounded by
 * async-backlog bytes. Entries wait here (ab_queue) and are handed to the
 * connection only while little of the stream is unsent there, so that a
 * running resync can be given its share of the link between them (A5).
 *
 * Invariants:
 *   A1. The stream keeps the front-end's order: entries are created in the
 *       order writes reach fg_go (after R3's overlap ordering) and sent in
 *       that order; the peer applies overlapping ones in arrival order (R5),
 *       so its image is always an earlier state of this one.
 *   A2. The backlog (ab_bytes) never exceeds async-backlog: a write that
 *       does not fit waits (on-congestion = block) or is not streamed at all
 *       (ahead): its regions are marked out of sync (persistently, through
 *       the activity log) and a live resync copies them.
 *   A3. A region with an entry not yet acknowledged is busy for the
 *       bitmap cleaner: its bits and AL extent stay until the peer has it.
 *   A4. On connection loss every unacknowledged entry's region is marked
 *       out of sync and the entries are dropped: the next handshake resyncs
 *       them. An entry is freed only once both its send and its ack (or the
 *       loss) are done.
 *   A5. While a resync runs, at least one resync request goes out for
 *       every AB_RS_SHARE bytes of stream handed to the connection, so the
 *       resync keeps a share of the link while writes keep arriving.
 *   A6. Past async-max-lag, writes wait (as with block) until the lag is
 *       back under the bound; a sync volume with entries left waits until
 *       they are acknowledged (a mode switch to sync).
 *   A7. Resync data never overtakes an older entry of its region: before a
 *       resync (or verify) read of a region is issued, every queued entry up
 *       to the last one overlapping it is handed to the connection (ab_push),
 *       whose queue is FIFO and which sends background data only behind
 *       what it already holds. Entries made after the read make it stale
 *       (R4), so the data read is never older than what follows it.
 *   A8. Up to date means a prefix (SPEC guarantee 9): RS_DONE, and all that
 *       follows from it (the peer's uptodate, its kept copy dropped, SYNCED
 *       to the witness, a consistent point), waits until the peer has
 *       applied every entry made before the newest resync read
 *       (rs_need_sn, ab_settled). Until then the peer may hold a region
 *       newer than an older write it still lacks.
 *   A9. A write the stream does not carry makes the peer inconsistent
 *       (RS_START) before any later write reaches it: RS_START follows every
 *       entry queued before it (so a kept copy on the peer includes them),
 *       and while it waits for them the volume stays ahead; a verify
 *       running then is stopped, since the resync takes its place.
 *   A10. The lag is the age of the oldest write the peer lacks, streamed,
 *       queued or marked alike: async-max-lag bounds that, and status
 *       shows it.
 * Never: makes a write wait on the link while the backlog has room and the
 * lag is under its bound. */
#include "repl_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/log.h"

#define AB_NET_MAX (1u << 20)  /* stream handed to the connection and not yet written */
#define AB_RS_SHARE (2u << 20) /* A5: stream bytes per resync request at most */
#define AB_LAG_WARN 0.8        /* the lag event fires past this fraction of the bound */
#define AB_PROBE_BYTES (256u << 10) /* async-max-lag: backlog let through before a rate is known */
#define AB_ARENA_SLACK (4u << 20)   /* arena beyond async-backlog: headers, one large write */

struct abent {
	struct vol_io io; /* kind K_ASYNC: its slot, seq, header and net_tx */
	struct repl *r;
	uint64_t t_ns;    /* when the front-end write reached the stream */
	uint64_t sn;      /* its place in the stream (A7, A8) */
	uint32_t bytes;   /* data counted in the backlog */
	bool acked;       /* the peer answered (or the connection is gone) */
	bool sent;        /* handed to the connection */
	struct list link; /* r->ab_queue, then r->ab_sent */
	uint8_t data[];
};

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool ab_empty(const struct repl *r)
{
	return list_empty(&r->ab_queue) && list_empty(&r->ab_sent);
}

static struct abent *ab_oldest(const struct repl *r)
{
	if (!list_empty(&r->ab_sent))
		return container_of(r->ab_sent.next, struct abent, link);
	if (!list_empty(&r->ab_queue))
		return container_of(r->ab_queue.next, struct abent, link);
	return NULL;
}

/* The peer is no longer an earlier state of this copy since now (writes
 * it lacks are marked, not streamed). */
static void ab_behind(struct repl *r)
{
	if (!r->ab_behind_ns)
		r->ab_behind_ns = ev_now(r->ev);
}

/* A10: from the oldest write the peer lacks, whether it is marked (since
 * ab_behind_ns) or an entry not yet acknowledged. */
uint64_t ab_lag_ns(const struct repl *r)
{
	uint64_t now = ev_now(r->ev), since = r->ab_behind_ns;
	const struct abent *e = ab_oldest(r);

	if (e && (!since || e->t_ns < since))
		since = e->t_ns;
	return since && now > since ? now - since : 0;
}

/* A8: the peer has applied every entry numbered below sn (the lists keep
 * stream order; an entry leaves them once acknowledged or lost). */
bool ab_settled(const struct repl *r, uint64_t sn)
{
	const struct abent *e = ab_oldest(r);

	return !e || e->sn >= sn;
}

static void ab_free(struct abent *e)
{
	struct repl *r = e->r;

	if (!arena_owns(&r->ab_arena, e)) {
		free(e);
		return;
	}
	arena_free(&r->ab_arena, e);
	if (arena_empty(&r->ab_arena))
		ab_reserve(r); /* a change of mode or size waited for this */
}

/* The arena for the backlog of an async volume: async-backlog and a little
 * more, reserved and made resident from now on (a sync volume has none).
 * Re-made on a change of mode or size once no entry lives in it. */
void ab_reserve(struct repl *r)
{
	struct arena *a = &r->ab_arena;
	size_t want = r->async ? ALIGN_UP(r->ab_cap + AB_ARENA_SLACK, 2u << 20) : 0;
	int e;

	if (arena_size(a) == want || !arena_empty(a))
		return;
	arena_fini(a);
	if (!want)
		return;
	e = arena_init(a, want, true);
	if (e < 0)
		log_warn("volume %s: cannot reserve %zu bytes for the async backlog (%s); its "
			 "entries come from the heap",
			 r->v->name, want, strerror(-e));
}

/* An entry with room for len bytes of data, from the arena while it has
 * room, else from the heap. */
static struct abent *ab_alloc(struct repl *r, size_t len)
{
	struct abent *e = arena_alloc(&r->ab_arena, sizeof(*e) + len);

	return e ? e : malloc(sizeof(*e) + len);
}

static void ab_put(struct abent *e)
{
	if (--e->io.rep.pending == 0)
		ab_free(e);
}

static void ab_tx_done(struct net_tx *tx, int err)
{
	struct abent *e = container_of(tx, struct abent, io.rep.tx);
	struct repl *r = e->r;
	(void)err;

	pack_sent(r, &e->io.rep);
	r->ab_net_bytes -= MIN(r->ab_net_bytes, (uint64_t)e->bytes + 64);
	if (r->conn)
		ev_defer(r->ev, &r->ab_kick);
	ab_put(e);
}

/* The entry leaves the backlog (acknowledged, or its region marked). */
static void ab_retire(struct repl *r, struct abent *e)
{
	list_del(&e->link);
	r->ab_bytes -= e->bytes;
	e->acked = true;
}

/* A4: the connection is gone; every entry's region is out of sync. */
void ab_conn_lost(struct repl *r)
{
	struct list *pos, *tmp;
	bool any = false;

	list_for_each_safe (pos, tmp, &r->ab_queue) {
		struct abent *e = container_of(pos, struct abent, link);
		if (e->io.type != BS_FLUSH) {
			bm_set_oos(r->bm, e->io.off, e->io.len);
			any = true;
		}
		if (!r->ab_behind_ns || e->t_ns < r->ab_behind_ns)
			r->ab_behind_ns = e->t_ns;
		ab_retire(r, e);
		ab_put(e); /* never sent: the send's part */
		ab_put(e);
	}
	/* (sent ones are in the request slots: fail_pending calls ab_lost) */
	if (any)
		gen_branch(r);
	r->ab_ahead = false;
	r->rs_start_wait = false;     /* the handshake copies what is marked */
	ev_defer(r->ev, &r->ab_kick); /* waiting writes go on without the peer */
}

void ab_lost(struct repl *r, struct vol_io *io)
{
	struct abent *e = container_of(io, struct abent, io);

	if (io->type != BS_FLUSH) {
		gen_branch(r);
		bm_set_oos(r->bm, io->off, io->len);
	}
	if (!r->ab_behind_ns || e->t_ns < r->ab_behind_ns)
		r->ab_behind_ns = e->t_ns;
	ab_retire(r, e);
	ab_put(e);
	ev_defer(r->ev, &r->ab_kick);
}

/* The drain rate: data acknowledged per second while a backlog waited. */
static void ab_rate(struct repl *r, uint64_t bytes)
{
	uint64_t now = ev_now(r->ev);

	r->ab_drain_acc += bytes;
	if (!r->ab_drain_t0) {
		r->ab_drain_t0 = now;
		return;
	}
	if (now - r->ab_drain_t0 >= 200000000ull) {
		double bps = (double)r->ab_drain_acc * 1e9 / (double)(now - r->ab_drain_t0);
		r->ab_drain_bps = r->ab_drain_bps ? 0.7 * r->ab_drain_bps + 0.3 * bps : bps;
		r->ab_drain_acc = 0;
		r->ab_drain_t0 = now;
	}
}

void ab_acked(struct repl *r, struct vol_io *io, int res)
{
	struct abent *e = container_of(io, struct abent, io);

	if (res < 0) {
		/* R10: the peer failed it; peer_failed marks and resyncs */
		ab_retire(r, e);
		peer_failed(r, io, res);
		ab_put(e);
	} else {
		r->ab_acked_bytes += e->bytes;
		ab_rate(r, e->bytes);
		ab_retire(r, e);
		ab_put(e);
	}
	if (ab_empty(r))
		r->ab_drain_t0 = 0; /* idle time is no drain time */
	ev_defer(r->ev, &r->ab_kick);
	if (r->rstate == RR_SYNCSOURCE)
		ev_defer(r->ev, &r->rs_kick); /* A8: RS_DONE may wait for this ack */
}

/* Hands the oldest queued entry to the connection; false when the request
 * window is full (acks make room). */
static bool ab_send_one(struct repl *r, struct net_conn *nc)
{
	struct abent *e = container_of(r->ab_queue.next, struct abent, link);
	struct repl_io w;
	size_t n;

	/* A5: a resync request waiting behind the stream goes first now and
	 * then. */
	if (nc->bulk_head && r->ab_share_bytes >= AB_RS_SHARE) {
		net_bulk_pin(nc, nc->bulk_head);
		r->ab_share_bytes = 0;
	}
	if (!slot_take(r, &e->io))
		return false;
	if (e->io.type == BS_FLUSH) {
		n = repl_enc_flush(e->io.rep.hdr, e->io.rep.seq);
	} else {
		w.seq = e->io.rep.seq;
		w.off = e->io.off;
		w.len = (uint32_t)e->io.len;
		w.flags = (e->io.flags & BS_F_FUA) ? REPL_F_FUA : 0;
		n = repl_enc_io(e->io.rep.hdr,
				e->bytes                ? REPL_WRITE
				: e->io.type == BS_TRIM ? REPL_TRIM
							: REPL_ZERO,
				&w);
	}
	e->io.rep.tx.iov[0].iov_base = e->io.rep.hdr;
	e->io.rep.tx.iov[0].iov_len = n;
	e->io.rep.tx.iovcnt = 1;
	if (e->bytes) {
		pack_payload(r, &e->io.rep, e->data, e->bytes);
		r->lk_data_bytes += e->bytes;
	} else if (e->io.type != BS_FLUSH) {
		r->lk_zero_bytes += e->io.len;
	}
	e->io.rep.tx.done = ab_tx_done;
	e->sent = true;
	list_del(&e->link);
	list_add_tail(&r->ab_sent, &e->link);
	r->ab_net_bytes += (uint64_t)e->bytes + 64;
	r->ab_share_bytes += (uint64_t)e->bytes + 64;
	net_send(nc, &e->io.rep.tx);
	return true;
}

/* Hands queued entries to the connection while little of the stream is
 * unsent there (A1, A5). */
static void ab_pump(struct repl *r)
{
	if (!peer_ready(r))
		return;
	while (!list_empty(&r->ab_queue) && r->ab_net_bytes < AB_NET_MAX)
		if (!ab_send_one(r, &r->conn->peer.net))
			return;
}

/* A7, A9: hands every queued entry up to the last one that overlaps
 * [off, off + len) (len 0: all of them) to the connection now, past
 * AB_NET_MAX. True when none of them is left queued; false when the peer
 * is not ready or the request window is full. */
bool ab_push(struct repl *r, uint64_t off, uint64_t len)
{
	struct list *pos, *tmp;
	struct abent *last = NULL;

	list_for_each_safe (pos, tmp, &r->ab_queue) {
		struct abent *e = container_of(pos, struct abent, link);
		if (!len || (e->io.type != BS_FLUSH && overlap(e->io.off, e->io.len, off, len)))
			last = e;
	}
	if (!last)
		return true;
	if (!peer_ready(r))
		return false;
	while (!list_empty(&r->ab_queue)) {
		bool was_last = r->ab_queue.next == &last->link;
		if (!ab_send_one(r, &r->conn->peer.net))
			return false;
		if (was_last)
			break;
	}
	return true;
}

/* A new entry for io at the end of the stream (A1). */
static bool ab_queue_io(struct repl *r, struct vol_io *io)
{
	bool data = io->type == BS_WRITE && !buf_is_zero(io->buf, io->len);
	struct abent *e;

	if (io->type == BS_WRITE ? io->len > REPL_MAX_DATA : io->len > UINT32_MAX - 4095)
		return false;
	e = ab_alloc(r, data ? io->len : 0);
	if (!e)
		return false;
	memset(e, 0, sizeof(*e));
	e->r = r;
	e->io.type = io->type == BS_WRITE && !data ? BS_ZERO : io->type;
	e->io.flags = io->flags;
	e->io.off = io->off;
	e->io.len = io->len;
	e->io.vol = r->v;
	e->io.rep.kind = K_ASYNC;
	e->io.rep.pending = 2; /* the send and the ack (or the loss) */
	e->t_ns = ev_now(r->ev);
	e->sn = r->ab_sn++;
	if (data) {
		memcpy(e->data, io->buf, io->len);
		e->bytes = (uint32_t)io->len;
	}
	list_add_tail(&r->ab_queue, &e->link);
	r->ab_bytes += e->bytes;
	io->rep.ab = AB_STREAMED;
	ab_pump(r);
	return true;
}

/* Writes the stream does not carry: marked out of sync, copied by a live
 * resync (A2). */
static void ab_mark(struct repl *r, struct vol_io *io)
{
	if (io->type == BS_FLUSH)
		return;
	ab_behind(r);
	/* A9: the peer must be made inconsistent before a later write reaches
	 * it; a verify running cannot do that, the resync below does. */
	if (r->vfy_state == VFY_RUNNING && r->rstate == RR_ESTABLISHED)
		vfy_stop(r, "a write overflowed the async backlog: the resync of what the peer "
			    "lacks starts instead");
	if (r->rstate == RR_SYNCSOURCE) {
		uint64_t before = bm_oos_count(r->bm);
		oos_mark(r, io->off, io->len);
		r->rs_total += bm_oos_count(r->bm) - before;
		ev_defer(r->ev, &r->rs_kick);
		return;
	}
	oos_mark(r, io->off, io->len);
	if (r->rs_start_wait)
		return; /* A9: the resync starts once the queue is handed on */
	if (r->rstate == RR_ESTABLISHED && (r->features & REPL_FEAT_RESYNC2) &&
	    r->peer.role != REPL_ROLE_PRIMARY) {
		bm_flush(r->bm, NULL);
		rs_start_live(r);
		return;
	}
	if (r->rstate == RR_ESTABLISHED) {
		/* no live resync with this peer: a new handshake copies them */
		gen_branch(r);
		ev_defer(r->ev, &r->drop_kick);
	}
}

static void ab_set_ahead(struct repl *r, bool on)
{
	char extra[160];

	if (r->ab_ahead == on)
		return;
	r->ab_ahead = on;
	snprintf(extra, sizeof(extra), "\"backlog_bytes\":%llu,\"lag_seconds\":%.3f",
		 (unsigned long long)r->ab_bytes, (double)ab_lag_ns(r) / 1e9);
	if (on)
		log_warn("volume %s: the backlog to %s is full (%llu bytes): going ahead, new "
			 "writes are marked out of sync and resynced",
			 r->v->name, peer_name(r), (unsigned long long)r->ab_bytes);
	else
		log_info("volume %s: streaming to %s again", r->v->name, peer_name(r));
	vol_event(r->v, "congestion", on ? "streaming" : "ahead", on ? "ahead" : "streaming",
		  extra);
}

/* Whether io may enter the stream now (A2, A6): 1 yes, 0 it must wait,
 * -1 it does not fit and the volume goes (or is) ahead. */
static int ab_admit(struct repl *r, const struct vol_io *io)
{
	uint64_t len = io->type == BS_WRITE ? io->len : 0;
	uint64_t bound = r->max_lag_ns;

	if (bound && ab_lag_ns(r) >= bound * 9 / 10)
		return 0;
	if (r->ab_ahead)
		return -1;
	if (r->ab_bytes + len > r->ab_cap && !ab_empty(r))
		return r->congestion_block ? 0 : -1;
	/* The lag this write will have when it is acknowledged, from the
	 * observed drain rate, with half the bound as margin for a rate that
	 * drops (the peer's disk stalls, the link is shared). Before any rate
	 * is known, only a little goes. */
	if (bound && !ab_empty(r)) {
		double eta_ns;
		if (!r->ab_drain_bps)
			return r->ab_bytes + len > AB_PROBE_BYTES ? 0 : 1;
		eta_ns = (double)(r->ab_bytes + len) * 1e9 / r->ab_drain_bps;
		if (eta_ns > (double)bound * 0.5)
			return 0;
	}
	return 1;
}

/* fg_go's part for a volume with a stream: true when io goes on to its
 * local write now (queued, or marked), false when it waits on ab_wait. */
bool ab_submit(struct repl *r, struct vol_io *io, bool queued_already)
{
	int k;

	if (!queued_already && !list_empty(&r->ab_wait)) {
		list_add_tail(&r->ab_wait, &io->rep.wlink);
		return false;
	}
	if (!r->async) {
		/* A6: sync again only once the stream is acknowledged */
		if (!ab_empty(r) && peer_ready(r))
			goto wait;
		return true; /* fg_go sends it as a sync write */
	}
	if (!peer_ready(r)) {
		if (io->type != BS_FLUSH) {
			gen_branch(r);
			bm_set_oos(r->bm, io->off, io->len);
			ab_behind(r);
		}
		io->rep.ab = AB_MARKED;
		return true;
	}
	if (io->type == BS_FLUSH) {
		/* a barrier in the stream: the peer keeps the front-end's flush
		 * order, so a crash of the peer too leaves an earlier state */
		if (!ab_queue_io(r, io))
			io->rep.ab = AB_MARKED;
		return true;
	}
	k = ab_admit(r, io);
	if (k == 0)
		goto wait;
	if (k > 0 && ab_queue_io(r, io))
		return true;
	ab_set_ahead(r, true);
	ab_mark(r, io);
	io->rep.ab = AB_MARKED;
	return true;
wait:
	if (!queued_already)
		list_add_tail(&r->ab_wait, &io->rep.wlink);
	if (!r->ab_blocked) {
		r->ab_blocked = true;
		log_info("volume %s: writes wait for the backlog to %s to drain (%llu bytes, lag "
			 "%.1f s)",
			 r->v->name, peer_name(r), (unsigned long long)r->ab_bytes,
			 (double)ab_lag_ns(r) / 1e9);
	}
	return false;
}

/* Runs after acks, sends and state changes: the stream goes on, waiting
 * writes go when they may, the volume returns from ahead. */
void ab_kick_fn(struct ev_deferred *d)
{
	struct repl *r = container_of(d, struct repl, ab_kick);

	ab_pump(r);
	if (r->rs_start_wait && r->rstate == RR_ESTABLISHED && peer_ready(r))
		rs_start_live(r); /* A9: tries again to hand the queue on first */
	if (r->ab_ahead && !r->rs_start_wait && r->ab_bytes <= r->ab_cap / 2 &&
	    (!r->max_lag_ns || ab_lag_ns(r) < r->max_lag_ns * 9 / 10))
		ab_set_ahead(r, false);
	while (!list_empty(&r->ab_wait)) {
		struct vol_io *io = container_of(r->ab_wait.next, struct vol_io, rep.wlink);
		list_del(&io->rep.wlink);
		if (!ab_submit(r, io, true)) {
			/* still waits: back at the head */
			list_add(&r->ab_wait, &io->rep.wlink);
			return;
		}
		fg_dispatch(r, io);
	}
	r->ab_blocked = false;
}

/* A3: regions of entries the peer has not acknowledged. */
void ab_mark_busy(struct repl *r, uint64_t *busy)
{
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, &r->ab_queue) {
		struct abent *e = container_of(pos, struct abent, link);
		if (e->io.type != BS_FLUSH)
			bm_mark_range(busy, r->bm, e->io.off, e->io.len);
	}
	list_for_each_safe (pos, tmp, &r->ab_sent) {
		struct abent *e = container_of(pos, struct abent, link);
		if (e->io.type != BS_FLUSH)
			bm_mark_range(busy, r->bm, e->io.off, e->io.len);
	}
}

/* The resync or the handshake brought the peer up to date: it is an
 * earlier state of this copy again. */
void ab_caught_up(struct repl *r)
{
	if (bm_oos_count(r->bm) == 0)
		r->ab_behind_ns = 0;
}

/* Called once a second by tick: the lag event (an RPO warning). */
void ab_tick(struct repl *r)
{
	uint64_t lag, bound = r->max_lag_ns;
	char extra[160];

	if (!bound || r->v->role != VOL_PRIMARY)
		return;
	lag = ab_lag_ns(r);
	if (!r->ab_lag_warned && (double)lag > (double)bound * AB_LAG_WARN) {
		r->ab_lag_warned = true;
		snprintf(extra, sizeof(extra), "\"lag_seconds\":%.3f,\"async_max_lag\":%.3f",
			 (double)lag / 1e9, (double)bound / 1e9);
		log_warn("volume %s: %s lags %.1f s behind (bound %.1f s)", r->v->name,
			 peer_name(r), (double)lag / 1e9, (double)bound / 1e9);
		vol_event(r->v, "lag", "ok", "warning", extra);
	} else if (r->ab_lag_warned && (double)lag < (double)bound * AB_LAG_WARN / 2) {
		r->ab_lag_warned = false;
		snprintf(extra, sizeof(extra), "\"lag_seconds\":%.3f,\"async_max_lag\":%.3f",
			 (double)lag / 1e9, (double)bound / 1e9);
		vol_event(r->v, "lag", "warning", "ok", extra);
	}
}

void ab_status(const struct repl *r, struct repl_status *st)
{
	uint64_t lag = ab_lag_ns(r);
	uint64_t oos = MIN(bm_oos_count(r->bm) * bm_granularity(r->bm), r->v->size);
	double rate = r->ab_drain_bps + (double)r->rate_bps;

	st->async = r->async;
	st->ahead = r->ab_ahead;
	st->blocked = r->ab_blocked;
	st->backlog_bytes = r->ab_bytes;
	st->backlog_reserved = arena_size(&r->ab_arena);
	st->backlog_resident = arena_resident(&r->ab_arena);
	st->lag_seconds = (double)lag / 1e9;
	st->lag_bytes = r->ab_bytes + (r->ab_behind_ns || oos ? oos : 0);
	/* the peer holds an earlier state of this copy as of then; during a
	 * resync it holds none (its image is a mix) */
	st->consistent_point_ns =
		r->have_peer && r->peer.disk == VOL_INCONSISTENT ? 0 : real_ns() - lag;
	st->eta_seconds = st->lag_bytes == 0 ? 0 : rate > 0 ? (double)st->lag_bytes / rate : -1;
}

static void set_mode(struct repl *r, bool a, const char *why)
{
	const char *val = a ? "async" : "sync";

	if (a != r->async) {
		log_info("volume %s: replication %s -> %s%s%s", r->v->name,
			 r->async ? "async" : "sync", val,
			 !a && !ab_empty(r) ? " (once the backlog is acknowledged)" : "", why);
		vol_event(r->v, "mode", r->async ? "async" : "sync", val, NULL);
	}
	r->async = a;
}

/* `tandemctl set VOLUME KEY=VALUE`: the stream's settings, until the node
 * restarts (the configuration file keeps them). Each is part of the
 * volume's contract (repl_contract.c, K2): it changes only while the peer
 * is connected, which takes the change too. */
int repl_set(struct repl *r, const char *key, const char *val, char *msg, size_t len)
{
	bool a = r->async, block = r->congestion_block;
	uint64_t cap = r->ab_cap, lag = r->max_lag_ns;

	if (strcmp(key, "replication") == 0) {
		if (strcmp(val, "async") == 0)
			a = true;
		else if (strcmp(val, "sync") == 0)
			a = false;
		else
			goto bad;
	} else if (strcmp(key, "async-backlog") == 0) {
		if (parse_size(val, &cap) || cap < (1u << 20))
			goto bad;
	} else if (strcmp(key, "async-max-lag") == 0) {
		char *end;
		double d = strtod(val, &end);
		if (end == val || *end || !(d >= 0 && d <= 86400) || (d > 0 && d < 0.1))
			goto bad;
		lag = (uint64_t)(d * 1e3) * 1000000ull; /* (whole ms: what CONTRACT carries) */
	} else if (strcmp(key, "on-congestion") == 0) {
		if (strcmp(val, "block") && strcmp(val, "ahead"))
			goto bad;
		block = val[0] == 'b';
	} else {
		snprintf(msg, len,
			 "unknown setting '%s' (replication, async-backlog, async-max-lag, "
			 "on-congestion)",
			 key);
		return -EINVAL;
	}
	/* K2: both nodes or neither (a change made here alone would be
	 * refused only at the next handshake, after a failover had already
	 * changed the guarantee) */
	if (!peer_connected(r) || !(r->conn->features & REPL_FEAT_CONTRACT)) {
		snprintf(msg, len,
			 "%s is a setting both nodes of volume %s must share, and %s is not "
			 "connected%s: set it when it is, or change the configuration of both "
			 "nodes and restart them",
			 key, r->v->name, peer_name(r),
			 peer_connected(r) ? " with a version that takes the change" : "");
		return -ENOTCONN;
	}
	set_mode(r, a, "");
	r->ab_cap = cap;
	r->max_lag_ns = lag;
	r->congestion_block = block;
	ab_reserve(r);
	contract_changed(r);
	ev_defer(r->ev, &r->ab_kick); /* waiting writes see the new rules */
	return 0;
bad:
	snprintf(msg, len, "'%s' is not a valid value for %s", val, key);
	return -EINVAL;
}

/* K2: the peer changed its settings with `tandemctl set`: the same here. */
void contract_adopt(struct repl *r, const struct repl_contract *k, const char *peer)
{
	char why[96];

	snprintf(why, sizeof(why), " (set on %s)", peer);
	if (r->ab_cap != k->async_backlog || r->max_lag_ns / 1000000ull != k->async_max_lag_ms ||
	    r->congestion_block != (k->on_congestion == 1))
		log_info("volume %s: async-backlog %llu, async-max-lag %g s, on-congestion %s%s",
			 r->v->name, (unsigned long long)k->async_backlog,
			 (double)k->async_max_lag_ms / 1e3, k->on_congestion ? "block" : "ahead",
			 why);
	set_mode(r, k->mode == REPL_CT_ASYNC, why);
	r->ab_cap = k->async_backlog;
	r->max_lag_ns = k->async_max_lag_ms * 1000000ull;
	r->congestion_block = k->on_congestion == 1;
	ab_reserve(r);
	ev_defer(r->ev, &r->ab_kick);
}
