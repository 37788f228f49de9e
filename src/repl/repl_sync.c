/* Resync and verify, both sides: the source pumps requests (runs of marked
 * regions cut in pieces, or digests of chunks for verify) under the window
 * of the controller (rsctl.c); the target adopts the source's generation
 * once the copied data is durable (RS_DONE). Never: sends a resync read a
 * foreground write overtook (R4). */
#include "repl_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

static void rs_pump(struct repl *r);

/* ---- the source side ---- */

void digest_of(const void *buf, size_t len, uint8_t out[REPL_DIGEST_LEN])
{
	unsigned n = REPL_DIGEST_LEN;
	if (!EVP_Digest(buf, len, out, &n, EVP_sha256(), NULL))
		memset(out, 0, REPL_DIGEST_LEN); /* never equal to a real digest by chance */
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

void ctl_arm(struct repl *r)
{
	if (r->ctl_armed)
		return;
	r->ctl_armed = true;
	rsctl_init(&r->ctl, MAX(RS_MIN_PIECE, r->v->min_block), RS_MAX_PIECE, ev_now(r->ev));
	ev_timer_arm(r->ev, &r->ctl_timer, RSCTL_INTERVAL_NS);
}

void ctl_tick(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, ctl_timer);

	if (!(r->rstate == RR_SYNCSOURCE || r->vfy_state == VFY_RUNNING || r->pulling) ||
	    !peer_ready(r)) {
		r->ctl_armed = false;
		return;
	}
	rsctl_interval(&r->ctl, ev_now(r->ev), r->rs_bytes,
		       !list_empty(&r->inflight) || r->pull_fg_reads);
	ev_timer_arm(r->ev, &r->ctl_timer, RSCTL_INTERVAL_NS);
	if (r->pulling)
		pull_kick_ctl(r);
	else
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
void oos_mark(struct repl *r, uint64_t off, uint64_t len)
{
	struct list *pos, *tmp;

	bm_set_oos(r->bm, off, len);
	list_for_each_safe (pos, tmp, &r->rs_runs) {
		struct rsrun *run = container_of(pos, struct rsrun, link);
		if (overlap(run->off, run->len, off, len))
			run_spoil(r, run, off, len);
	}
}

/* Every extent of the activity log is marked (what a peer may not have made
 * durable), and no run in flight there may clear it. */
void al_mark(struct repl *r)
{
	struct list *pos, *tmp;

	bm_al_to_oos(r->bm);
	list_for_each_safe (pos, tmp, &r->rs_runs)
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
	for (uint64_t i = 0; i < n && r->rstate == RR_SYNCSOURCE;) {
		uint64_t j = i;
		while (j < n && !(run->spoiled[j / 64] & (1ull << (j % 64))))
			j++;
		if (j > i)
			bm_clear_oos(
				r->bm, run->off + i * gran,
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

static void rs_tx_done(struct net_tx *tx, int err)
{
	struct vol_io *io = container_of(tx, struct vol_io, rep.tx);
	struct rsreq *q = container_of(io, struct rsreq, io);
	(void)err;
	pack_sent(q->r, &q->io.rep);
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
	net_send_bulk(&r->conn->peer.net, &q->io.rep.tx);
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
		pack_payload(r, &q->io.rep, q->io.buf, q->io.len);
		r->rs_sent_bytes += q->io.len;
		r->lk_data_bytes += q->io.len;
	} else {
		r->rs_zero_bytes += q->io.len;
		r->lk_zero_bytes += q->io.len;
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
	snprintf(extra, sizeof(extra), "\"offset\":%llu,\"length\":%llu", (unsigned long long)off,
		 (unsigned long long)len);
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
		} else if (live && r->vfy_state == VFY_RUNNING)
			vfy_redo(r, q->io.off); /* overtaken by a write, or the read failed */
		rs_end(r, q, q->ares == 0);
		return;
	}
	if (q->phase == RQ_CSUM) {
		if (q->ares == 0) {
			r->rs_same_bytes += q->io.len;
			rs_end(r, q, true);
		} else if (q->ares == REPL_ACK_DIFFERS && !q->io.rep.stale && live &&
			   r->rstate == RR_SYNCSOURCE) {
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

void rs_put(struct repl *r, struct rsreq *q)
{
	if (--q->io.rep.pending == 0)
		rs_step(r, q);
}

void rs_acked(struct repl *r, struct rsreq *q, int res)
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
	bool want = q->run ? r->rstate == RR_SYNCSOURCE : r->vfy_state == VFY_RUNNING;

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
	q->zero = (r->features & REPL_FEAT_RESYNC2) && buf_is_zero(io->buf, io->len);
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
	list_for_each_safe (pos, tmp, l) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		if (overlap(o->off, o->len, off, len))
			return true;
	}
	return false;
}

static bool run_overlaps(struct repl *r, uint64_t off, uint64_t len)
{
	struct list *pos, *tmp;
	list_for_each_safe (pos, tmp, &r->rs_runs) {
		struct rsrun *o = container_of(pos, struct rsrun, link);
		if (overlap(o->off, o->len, off, len))
			return true;
	}
	return false;
}

/* Room for another request of len bytes: the controller's window (one
 * request is always allowed unless it measures the foreground: C3), and
 * the configured cap's token bucket. */
/* Token buckets refilled at rate bytes/s, holding at most a quarter second
 * of it or one largest request. */
static void bucket_fill(double *tokens, uint64_t *t_ns, uint64_t rate, uint64_t now)
{
	double burst = MAX((double)RS_MAX_PIECE, (double)rate / 4);

	if (*t_ns)
		*tokens += (double)(now - *t_ns) * (double)rate / 1e9;
	*tokens = MIN(*tokens, burst);
	*t_ns = now;
}

static bool rs_room(struct repl *r, uint64_t len)
{
	uint64_t now = ev_now(r->ev);

	if (r->rs_cap && r->rs_tokens <= 0)
		return false;
	if (r->link && r->link->cap) {
		bucket_fill(&r->link->tokens, &r->link->t_ns, r->link->cap, now);
		if (r->link->tokens <= 0)
			return false;
	}
	if (!r->ctl.quiet && (r->rs_bytes == 0 || r->rs_bytes + len <= r->ctl.window))
		return true;
	/* resync-min-rate: the controller yields to the foreground, but no
	 * further than this floor (time to redundancy stays bounded) */
	if (!r->rs_floor)
		return false;
	bucket_fill(&r->rs_floor_tokens, &r->rs_floor_ns, r->rs_floor, now);
	return r->rs_floor_tokens >= (double)len;
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
	if (run)
		r->rs_need_sn = r->ab_sn; /* A8: every entry made so far is older */
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
	if (r->link && r->link->cap)
		r->link->tokens -= (double)len;
	if (r->rs_floor && run) {
		/* every resync byte counts towards the floor; what the
		 * controller sends beyond it is not owed later */
		r->rs_floor_tokens -= (double)len;
		r->rs_floor_tokens = MAX(r->rs_floor_tokens, -(double)RS_MAX_PIECE);
	}
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
	repl_set_rstate(r, RR_ESTABLISHED);
	r->peer.disk = r->v->disk == VOL_OUTDATED ? VOL_OUTDATED : VOL_UPTODATE; /* R13 */
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
		if (!ab_push(r, run->next, len))
			break; /* A7: the request window is full; acks kick again */
		run->next += len;
		if (!rs_issue(r, run, run->next - len, len))
			return; /* out of memory: retried when a request completes */
		if (r->rstate != RR_SYNCSOURCE || !peer_ready(r))
			return;
	}
	/* A8: and the peer has applied every stream entry older than the
	 * newest read, so that its image is a prefix of this one's */
	if (bm_oos_count(r->bm) == 0 && list_empty(&r->rs_inflight) && list_empty(&r->rs_runs) &&
	    ab_settled(r, r->rs_need_sn))
		rs_finish(r);
}

/* The marked regions go to the connected peer now, from this node's data,
 * without a new handshake (RS_START: the peer becomes sync target). */
void rs_start_live(struct repl *r)
{
	uint8_t b[64];

	/* A9: RS_START goes behind every entry queued before it */
	if (!ab_push(r, 0, 0)) {
		if (!r->rs_start_wait)
			log_info("volume %s: the resync to %s starts once the stream queued before "
				 "it is sent",
				 r->v->name, peer_name(r));
		r->rs_start_wait = true;
		return;
	}
	r->rs_start_wait = false;
	send_small(r->conn, b,
		   repl_enc_gen(b, REPL_RS_START, sb(r)->gen_current,
				r->ab_ahead ? REPL_RS_WHY_AHEAD : 0));
	r->rs_total = bm_oos_count(r->bm);
	r->rs_pct_shown = 0;
	r->rs_done_bytes = r->rs_sent_bytes = r->rs_zero_bytes = r->rs_same_bytes = 0;
	r->rs_cursor = 0;
	r->peer.disk = VOL_INCONSISTENT;
	repl_set_rstate(r, RR_SYNCSOURCE);
	ev_defer(r->ev, &r->rs_kick);
}

static void vfy_finish(struct repl *r)
{
	char extra[192];

	verify_set_state(r, VFY_DONE);
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
		    busy_with(&r->inflight, off, len) || !ab_push(r, off, len))
			return; /* kicked again when requests complete (A7: or acks) */
		if (redo)
			r->vfy_nredo--;
		else
			r->vfy_cursor += len;
		if (!rs_issue(r, NULL, off, len))
			return;
		if (r->vfy_state != VFY_RUNNING || !peer_ready(r))
			return;
	}
	if (list_empty(&r->rs_inflight))
		vfy_finish(r);
}

void rs_kick_fn(struct ev_deferred *d)
{
	rs_pump(container_of(d, struct repl, rs_kick));
}

static void rs_pump(struct repl *r)
{
	if (!peer_ready(r))
		return;
	if (r->rstate == RR_SYNCSOURCE && vol_disk_gone(r->v->disk)) {
		/* The source's disk failed during the resync: nothing more can
		 * be read for it (every read would fail at once, without end).
		 * The handshake decides again; the marks stay. */
		if (r->conn && conn_usable(r->conn))
			conn_fail(r->conn, "the disk here failed during the resync to %s",
				  peer_name(r));
		return;
	}
	if (r->rstate == RR_SYNCSOURCE) {
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
	} else if (r->rstate == RR_ESTABLISHED && r->vfy_state == VFY_RUNNING) {
		ctl_arm(r);
		vfy_pump(r);
	}
}

/* ---- the target side ---- */

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
	if (c != r->conn || !conn_usable(c) || c->hs_stage != ST_RUN || r->rstate != RR_SYNCTARGET)
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
	/* R13: a copy is as current as its source; an outdated one (it may
	 * lack writes a primary acknowledged alone) makes this one outdated */
	vol_set_disk(r->v,
		     r->have_peer && r->peer.disk == VOL_OUTDATED ? VOL_OUTDATED : VOL_UPTODATE);
	log_info("volume %s: resync from %s done%s", r->v->name, peer_name(r),
		 r->v->disk == VOL_OUTDATED ? " (its copy is outdated: so is this one)" : "");
	repl_set_rstate(r, RR_ESTABLISHED);
	r->rate_bps = 0;
	if (r->conn)
		send_state(r->conn);
}

int msg_rs_done(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	struct rsdone *d;

	if (r->rstate != RR_SYNCTARGET) {
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

int msg_rs_start(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;

	/* The peer verified and found differences: it copies its marked
	 * regions here now. */
	if (!(c->features & REPL_FEAT_RESYNC2) || r->v->role == VOL_PRIMARY ||
	    r->rstate != RR_ESTABLISHED || sb(r)->gen_current != m->u.gen.gen_current) {
		conn_fail(c, "unexpected resync start from %s", c->peer_node);
		return -1;
	}
	if (vol_disk_gone(r->v->disk)) {
		/* F1: never onto a failed disk (the peer learns it from the
		 * STATE of the handshake that follows) */
		conn_fail(c,
			  "%s starts a resync, but the disk here is failed: `tandemctl attach` "
			  "first",
			  c->peer_node);
		return -1;
	}
	r->behind = m->u.gen.gen_bitmap == REPL_RS_WHY_AHEAD;
	if (r->behind)
		log_info("volume %s: %s is ahead (its async backlog overflowed): this node is "
			 "behind until the resync from it ends",
			 r->v->name, c->peer_node);
	else
		log_info("volume %s: %s found differences; resync from it starts", r->v->name,
			 c->peer_node);
	r->rs_total = 0;
	r->rs_pct_shown = 0;
	/* CP1: the image is kept once the writes before this message are
	 * applied; reading waits until then */
	if (disk_consistent(r->v->disk)) {
		c->cp_pending = true;
		net_rx_pause(&c->peer.net);
	} else {
		cp_none(r, "the image was not consistent when the resync began");
	}
	vol_set_disk(r->v, VOL_INCONSISTENT);
	c->target_fails = 0;
	repl_set_rstate(r, RR_SYNCTARGET);
	/* Only now: taking the copy resumes reading at once when nothing is
	 * being applied, and the RS_DATA behind this message must find this
	 * node sync target already. */
	if (c->cp_pending && !c->napply)
		apply_cp_ready(c);
	return 0;
}

/* ---- peer loss ---- */

/* The connection is gone: runs being copied clear no bits, a verify stops. */
void rs_abort(struct repl *r)
{
	struct list *pos, *tmp;

	r->rs_run = NULL;
	list_for_each_safe (pos, tmp, &r->rs_runs) {
		struct rsrun *run = container_of(pos, struct rsrun, link);
		run_spoil_all(r, run);
		run->next = run->off + run->len;
		run_put(r, run);
	}
	if (r->vfy_state == VFY_RUNNING) {
		char why[160];
		snprintf(why, sizeof(why), "the connection to %s is gone", peer_name(r));
		vfy_stop(r, why);
	}
}

/* A verify ends before it is through: the connection is gone, or a resync
 * takes its place (A9). What it found so far stays marked. */
void vfy_stop(struct repl *r, const char *why)
{
	char extra[96];

	if (r->vfy_state != VFY_RUNNING)
		return;
	verify_set_state(r, VFY_ABORTED);
	r->vfy_t1 = ev_now(r->ev);
	r->vfy_nredo = 0;
	log_warn("volume %s: verify stopped at %llu of %llu bytes: %s", r->v->name,
		 (unsigned long long)r->vfy_cursor, (unsigned long long)r->v->size, why);
	snprintf(extra, sizeof(extra), "\"mismatch_ranges\":%llu",
		 (unsigned long long)r->vfy_ranges);
	vol_event(r->v, "verify", "running", "aborted", extra);
}
