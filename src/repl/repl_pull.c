/* A primary's disk attached online (`tandemctl attach` on a diskless
 * primary) is brought up to date by the primary itself: it reads the
 * regions its disk lacks from its peer (READ) and writes them here, while
 * it goes on serving. A primary never applies a peer's resync stream (R6);
 * it pulls instead.
 * Invariants:
 *   P1. A region is pulled under a range lock (vol.h V3): no client write
 *       to it is in flight while its data is read from the peer and
 *       written here, so an older copy never overwrites a newer write.
 *   P2. A region's mark goes only once its data is written here; client
 *       reads of a marked region are the peer's (repl_read_remote), of a
 *       clear one this disk's.
 *   P3. While pulling, the disk is inconsistent and every request needs
 *       the peer as with a gone disk (D1): without it requests fail, and
 *       nothing is written here alone (no generation branches).
 *   P4. The disk is up to date only when no mark is left and a flush of
 *       this store succeeded after the last piece.
 *   P5. The resync controller (rsctl.h) paces it as it paces a resync:
 *       bytes in flight within its window (one piece at least), none new
 *       while it measures the foreground (client writes, and client reads
 *       through the peer).
 *   P6. Only a primary fills: a demotion waits until no piece is in flight
 *       and ends the fill (the disk stays inconsistent, for a resync); a
 *       piece whose data comes back after a role change is dropped, its
 *       mark kept. A failed piece pauses the fill until the next tick.
 *   P7. peer_only is set by every write whose only copy went to the peer
 *       (the disk gone or being filled) and by a fill's start, and cleared
 *       when a fill ends (P4); it counts only for the disk failure it was
 *       set under (peer_only_fails: a fill stopped by a demotion, then a
 *       resync as secondary, leaves it set). While it does not count, the
 *       old disk holds every acknowledged write since its last failure:
 *       `attach` without --disk puts it back in service at once when no
 *       peer can fill it (repl_attach). */
#include "repl_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

#define PULL_PIECE (256u << 10) /* most bytes of one pull request */
#define PULL_MAX 8u             /* pull requests in flight */

struct pull {
	struct vol_io io; /* the READ from the peer, then the write here */
	struct vol_lock lk;
	struct repl *r;
};

static void pull_kick(struct repl *r);

/* Whether this node may go on filling (P6). */
static bool pull_may(const struct repl *r)
{
	return r->pulling && r->v->role == VOL_PRIMARY && !vol_disk_gone(r->v->disk);
}

bool repl_read_remote(const struct repl *r, uint64_t off, uint64_t len)
{
	uint64_t g = bm_granularity(r->bm);

	if (vol_disk_gone(r->v->disk))
		return true;
	if (!r->pulling || !len)
		return false;
	for (uint64_t c = off / g; c <= (off + len - 1) / g; c++)
		if (bm_test_oos(r->bm, c))
			return true;
	return false;
}

static void pull_end(struct pull *p, int res)
{
	struct repl *r = p->r;

	vol_unlock(r->v, &p->lk);
	if (p->io.buf)
		bufpool_put(&r->pool, p->io.buf, p->io.len);
	r->rs_bytes -= p->io.len;
	free(p);
	r->pull_inflight--;
	if (res && !r->pull_err)
		r->pull_err = res;
	pull_kick(r);
}

static void pull_written(struct vol_io *io, int res)
{
	struct pull *p = container_of(io, struct pull, io);

	if (res == 0 && pull_may(p->r)) {
		bm_clear_oos(p->r->bm, io->off, io->len); /* P2 */
		p->r->pull_bytes += io->len;
	}
	pull_end(p, res);
}

static void pull_read(struct vol_io *io, int res)
{
	struct pull *p = container_of(io, struct pull, io);
	struct repl *r = p->r;

	if (res || !pull_may(r)) {
		pull_end(p, res ? res : -ECANCELED);
		return;
	}
	if (r->ctl_armed) /* P5: the round trip and what it brought */
		rsctl_rs_acked(&r->ctl, ev_now(r->ev) - io->rep.t0, io->len, ev_now(r->ev));
	/* a new disk stays thin: zeros become a hole (or written zeros) */
	if (buf_is_zero(io->buf, io->len)) {
		io->type = BS_ZERO;
		io->flags = BS_F_MAY_TRIM | BS_F_BULK;
	} else {
		io->type = BS_WRITE;
		io->flags = BS_F_BULK;
	}
	vol_local(r->v, io, pull_written);
}

static void pull_locked(struct vol_lock *lk)
{
	struct pull *p = container_of(lk, struct pull, lk);
	int e;

	p->io.type = BS_READ;
	p->io.vol = p->r->v;
	e = repl_read_bg(p->r, &p->io, pull_read);
	if (e)
		pull_end(p, e);
}

static void pull_flushed(struct vol_io *io, int res)
{
	struct repl *r = container_of(io, struct repl, pull_flush);

	r->pull_flushing = false;
	if (res && res != -EIO && res != -ENODEV && !vol_disk_gone(r->v->disk))
		vol_disk_error(r->v, -res, "flush"); /* (an EIO did it already) */
	if (res || !pull_may(r) || bm_oos_count(r->bm)) {
		pull_kick(r); /* a write came meanwhile, or the disk failed */
		return;
	}
	r->pulling = false;
	r->peer_only = false;
	bm_flush(r->bm, NULL);
	log_warn("volume %s: the attached disk is up to date (%llu bytes copied from %s)",
		 r->v->name, (unsigned long long)r->pull_bytes, peer_name(r));
	vol_set_disk(r->v, VOL_UPTODATE); /* P4 */
}

static void pull_kick(struct repl *r)
{
	uint64_t g = bm_granularity(r->bm), nbits = bm_nbits(r->bm);

	if (r->pulling && !r->pull_inflight && !r->pull_flushing && !pull_may(r)) {
		r->pulling = false; /* P6: demoted, or the new disk failed too */
		r->pull_resync = r->v->role != VOL_PRIMARY;
		/* P7: a disk that failed half filled is not complete either */
		r->peer_only_fails = r->v->disk_fails;
		log_warn("volume %s: filling the attached disk stopped: %s", r->v->name,
			 r->v->role != VOL_PRIMARY ? "no longer primary" : "the disk failed");
		return;
	}
	if (!pull_may(r) || r->pull_flushing || r->pull_paused)
		return;
	if (r->pull_err) {
		if (r->pull_inflight)
			return;
		/* a piece failed (the peer went, or could not read): the next
		 * tick tries again from the start (P6) */
		log_warn("volume %s: copying to the attached disk paused: %s", r->v->name,
			 strerror(-r->pull_err));
		r->pull_err = 0;
		r->pull_cursor = 0;
		r->pull_paused = true;
		return;
	}
	if (peer_serves(r))
		ctl_arm(r);
	while (r->pull_inflight < PULL_MAX && peer_serves(r)) {
		int64_t c = r->pull_cursor < nbits ? bm_next_oos(r->bm, r->pull_cursor) : -1;
		uint64_t n = 1, piece = MAX(g, MIN((uint64_t)PULL_PIECE, r->ctl.piece) / g * g);
		struct pull *p;
		/* P5 */
		if (r->ctl.quiet || (r->rs_bytes && r->rs_bytes + piece > r->ctl.window))
			return; /* (the controller's tick kicks again) */
		if (c < 0) {
			if (r->pull_inflight)
				return;
			if (bm_oos_count(r->bm)) { /* a pass left some: again */
				r->pull_cursor = 0;
				continue;
			}
			/* P4: every piece is written; durable before up to date */
			r->pull_flushing = true;
			memset(&r->pull_flush, 0, sizeof(r->pull_flush));
			r->pull_flush.type = BS_FLUSH;
			vol_local(r->v, &r->pull_flush, pull_flushed);
			return;
		}
		while ((uint64_t)c + n < nbits && (n + 1) * g <= piece &&
		       bm_test_oos(r->bm, (uint64_t)c + n))
			n++;
		r->pull_cursor = (uint64_t)c + n;
		p = calloc(1, sizeof(*p));
		if (!p)
			return;
		p->r = r;
		p->io.off = (uint64_t)c * g;
		p->io.len = MIN(n * g, r->v->size - p->io.off);
		p->io.buf = bufpool_get(&r->pool, p->io.len);
		if (!p->io.buf) {
			free(p);
			return;
		}
		p->lk.off = p->io.off;
		p->lk.len = p->io.len;
		p->lk.granted_cb = pull_locked;
		r->pull_inflight++;
		r->rs_bytes += p->io.len;
		vol_lock(r->v, &p->lk); /* P1 (granted_cb may run inside) */
		if (r->pull_err || r->pull_paused)
			return; /* it failed at once: no retry inside this loop */
	}
}

int pull_stop(struct repl *r)
{
	if (!r->pulling)
		return 0;
	r->pull_paused = true; /* nothing new (P6) */
	if (r->pull_inflight || r->pull_flushing)
		return -EAGAIN;
	r->pulling = false;
	r->pull_paused = false;
	r->pull_resync = true; /* P6: once secondary, a resync fills it */
	log_warn("volume %s: filling the attached disk stopped for the role change; the disk "
		 "stays inconsistent",
		 r->v->name);
	return 0;
}

void pull_kick_ctl(struct repl *r)
{
	pull_kick(r);
}

void pull_tick(struct repl *r)
{
	if (r->pull_resync && r->v->role == VOL_SECONDARY && r->conn &&
	    r->rstate == RR_ESTABLISHED && r->have_peer && r->peer.role == REPL_ROLE_PRIMARY) {
		/* P6: a handshake with the new primary makes this disk its
		 * sync target */
		r->pull_resync = false;
		conn_fail(r->conn,
			  "the disk here is inconsistent (its fill stopped): resyncing it");
		return;
	}
	if (!r->pulling)
		return;
	if (r->v->role == VOL_PRIMARY && !r->v->demoting)
		r->pull_paused = false;
	pull_kick(r);
}

int pull_start(struct repl *r, bool all)
{
	if (all)
		bm_set_all(r->bm);
	else
		bm_al_to_oos(r->bm); /* what the old disk may not have made durable */
	bm_flush(r->bm, NULL);
	r->pulling = true;
	r->peer_only = true; /* P7: the disk lacks what the fill brings */
	r->peer_only_fails = r->v->disk_fails;
	r->pull_err = 0;
	r->pull_cursor = 0;
	r->pull_bytes = 0;
	r->pull_total = bm_oos_count(r->bm) * bm_granularity(r->bm);
	vol_set_disk(r->v, VOL_INCONSISTENT); /* P3 */
	log_warn("volume %s: copying %llu bytes from %s to the attached disk, in the background",
		 r->v->name, (unsigned long long)MIN(r->pull_total, r->v->size), peer_name(r));
	pull_kick(r);
	return 0;
}
