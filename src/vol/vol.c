/* The volume: checks role and range, then hands I/O to the data store.
 * Replication will route writes here too (local + peer). ZERO requests that
 * the store cannot do by deallocation fall back to writing zeros, unless the
 * caller asked for FAST (then -ENOTSUP so that it can choose). */
#include "vol.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "../common/log.h"
#include "../common/util.h"

#define ZERO_CHUNK (1u << 20)

const char *vol_role_name(enum vol_role r)
{
	return r == VOL_PRIMARY ? "primary" : "secondary";
}

const char *vol_disk_name(enum vol_disk d)
{
	static const char *const n[] = {
		[VOL_UPTODATE] = "uptodate",	 [VOL_INCONSISTENT] = "inconsistent",
		[VOL_OUTDATED] = "outdated",	 [VOL_DISKLESS] = "diskless",
		[VOL_FAILED] = "failed",	 [VOL_CONSISTENT] = "consistent",
	};
	return (unsigned)d < ARRAY_SIZE(n) ? n[d] : "?";
}

/* V4: a state that cannot be recorded cannot be relied on: a failed
 * metadata write fails the disk (no more I/O, never promoted, never a sync
 * source) and keeps the metadata from being marked clean, so that the next
 * start recovers from the activity log as after a crash. */
int vol_md_write(struct vol *v)
{
	int r = md_write(v->md);
	if (r) {
		log_err("volume %s: writing metadata: %s; the disk is failed", v->name,
			strerror(-r));
		v->md_failed = true;
		vol_disk_error(v, -r, "metadata");
	}
	return r;
}

void vol_event(struct vol *v, const char *what, const char *from, const char *to, const char *extra)
{
	char buf[512];

	if (!v->event_fn)
		return;
	snprintf(buf, sizeof(buf), "\"volume\":\"%s\",\"event\":\"%s\"", v->name, what);
	if (from && to)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			 ",\"from\":\"%s\",\"to\":\"%s\"", from, to);
	if (extra)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ",%s", extra);
	v->event_fn(v->event_ctx, buf);
}

/* The one writer of v->role. opening: vol_open sets the role it read from
 * the metadata ("(open) -> X" in vol.h): no event, nothing to check. */
static void set_role(struct vol *v, enum vol_role role, bool opening)
{
	static const bool legal[VOL_PRIMARY + 1][VOL_PRIMARY + 1] = {
		[VOL_SECONDARY] = { [VOL_PRIMARY] = true },
		[VOL_PRIMARY] = { [VOL_SECONDARY] = true },
	};

	if ((unsigned)role > VOL_PRIMARY) {
		log_err("volume %s: no role %d", v->name, (int)role);
		assert(!"no such role");
		return;
	}
	if (opening) {
		v->role = role;
		return;
	}
	if (v->role == role)
		return;
	if (!legal[v->role][role]) {
		/* a bug of this node: stops a debug build, refused in release */
		log_err("volume %s: illegal role transition %s -> %s", v->name,
			vol_role_name(v->role), vol_role_name(role));
		assert(!"illegal role transition");
		return;
	}
	log_info("volume %s: role %s -> %s", v->name, vol_role_name(v->role), vol_role_name(role));
	vol_event(v, "role", vol_role_name(v->role), vol_role_name(role), NULL);
	v->role = role;
}

void vol_set_role(struct vol *v, enum vol_role role)
{
	set_role(v, role, false);
}

/* The one writer of v->disk; the table is the disk transitions of vol.h and
 * repl.h. opening: vol_open sets the state it read from the metadata. */
static void set_disk(struct vol *v, enum vol_disk d, bool opening)
{
	static const bool legal[VOL_DISK_MAX + 1][VOL_DISK_MAX + 1] = {
		[VOL_UPTODATE] = { [VOL_OUTDATED] = true,
				   [VOL_INCONSISTENT] = true,
				   [VOL_FAILED] = true },
		[VOL_OUTDATED] = { [VOL_UPTODATE] = true,
				   [VOL_INCONSISTENT] = true,
				   [VOL_FAILED] = true },
		[VOL_CONSISTENT] = { [VOL_UPTODATE] = true,
				     [VOL_OUTDATED] = true,
				     [VOL_INCONSISTENT] = true,
				     [VOL_FAILED] = true },
		[VOL_INCONSISTENT] = { [VOL_UPTODATE] = true,
				       [VOL_OUTDATED] = true,   /* resynced from an outdated copy */
				       [VOL_CONSISTENT] = true, /* a kept image restored */
				       [VOL_FAILED] = true },
		[VOL_FAILED] = { [VOL_INCONSISTENT] = true, [VOL_DISKLESS] = true },
		[VOL_DISKLESS] = { [VOL_INCONSISTENT] = true },
	};
	uint32_t f;

	if ((unsigned)d > VOL_DISK_MAX) {
		log_err("volume %s: no disk state %d", v->name, (int)d);
		assert(!"no such disk state");
		return;
	}
	if (opening) {
		v->disk = d;
		return;
	}
	if (v->disk == d || (v->md_failed && vol_disk_gone(v->disk) && d != VOL_DISKLESS))
		return; /* V4: a disk whose metadata failed stays gone */
	if (!legal[v->disk][d]) {
		log_err("volume %s: illegal disk transition %s -> %s", v->name,
			vol_disk_name(v->disk), vol_disk_name(d));
		assert(!"illegal disk transition");
		return;
	}
	log_warn("volume %s: disk %s -> %s", v->name, vol_disk_name(v->disk), vol_disk_name(d));
	vol_event(v, "disk", vol_disk_name(v->disk), vol_disk_name(d), NULL);
	if (d == VOL_FAILED)
		v->disk_fails++;
	v->disk = d;
	if (!v->md)
		return;
	if (vol_disk_gone(d))
		md_disk_close(v->md); /* no label goes to a failed disk (vol_attach) */
	/* The state outlives a restart: a failed disk may be missing writes,
	 * an outdated or inconsistent one must not be served as up to date.
	 * (Synchronous, but it happens on state changes only.) */
	f = v->md->sb.flags;
	if (d != VOL_FAILED && d != VOL_DISKLESS)
		f &= ~(TANDEM_MD_F_UPTODATE | TANDEM_MD_F_CONSISTENT | TANDEM_MD_F_FAILED |
		       TANDEM_MD_F_PEER_ONLY);
	switch (d) {
	case VOL_UPTODATE:
	case VOL_CONSISTENT: /* up to date when last known; every start checks again */
		f |= TANDEM_MD_F_UPTODATE | TANDEM_MD_F_CONSISTENT;
		break;
	case VOL_OUTDATED: f |= TANDEM_MD_F_CONSISTENT; break;
	case VOL_FAILED:
	case VOL_DISKLESS:
		/* latched across a restart; the other flags keep what the disk
		 * was when it failed, which its old disk is again (F2) */
		f |= TANDEM_MD_F_FAILED;
		break;
	default: break;
	}
	if (f != v->md->sb.flags) {
		v->md->sb.flags = f;
		vol_md_write(v);
	}
}

void vol_set_disk(struct vol *v, enum vol_disk d)
{
	set_disk(v, d, false);
}

static void submit(struct vol *v, struct vol_io *io, uint64_t again);

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

static bool modifies(const struct vol_io *io)
{
	return io->type == BS_WRITE || io->type == BS_TRIM || io->type == BS_ZERO;
}

/* A lock other than io's own that io must wait for: a granted one, or (for
 * writes of no lock holder) one still waiting that was requested before io
 * (a new write has the newest ticket), so that neither writes nor locks can
 * starve the other. A holder's write never waits for a lock still waiting
 * (which would wait for the holder). */
static bool io_blocked(struct vol *v, const struct vol_io *io, uint64_t ticket)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, &v->locks) {
		struct vol_lock *lk = container_of(pos, struct vol_lock, link);
		if (lk != io->lock && overlaps(lk->off, lk->len, io->off, io->len) &&
		    (lk->granted || (!io->lock && lk->ticket < ticket)))
			return true;
	}
	return false;
}

static void locks_grant(struct vol *v)
{
	struct list *pos, *tmp, *p2, *t2;
	list_for_each_safe(pos, tmp, &v->locks) {
		struct vol_lock *lk = container_of(pos, struct vol_lock, link);
		bool ok = true;
		if (lk->granted)
			continue;
		/* an earlier overlapping lock, granted or not, goes first */
		for (p2 = v->locks.next; p2 != pos && ok; p2 = p2->next) {
			struct vol_lock *o = container_of(p2, struct vol_lock, link);
			ok = !overlaps(o->off, o->len, lk->off, lk->len);
		}
		list_for_each_safe(p2, t2, &v->writes) {
			struct vol_io *w = container_of(p2, struct vol_io, vlink);
			if (!ok)
				break;
			ok = !overlaps(w->off, w->len, lk->off, lk->len);
		}
		/* and for writes parked before it (no lock stream starves them) */
		list_for_each_safe(p2, t2, &v->parked) {
			struct vol_io *w = container_of(p2, struct vol_io, vlink);
			if (!ok)
				break;
			ok = w->ticket > lk->ticket || !overlaps(w->off, w->len, lk->off, lk->len);
		}
		if (ok) {
			lk->granted = true;
			lk->granted_cb(lk);
			/* the callback may have changed the lists: start over */
			locks_grant(v);
			return;
		}
	}
}

void vol_lock(struct vol *v, struct vol_lock *lk)
{
	lk->granted = false;
	lk->ticket = ++v->ticket;
	list_add_tail(&v->locks, &lk->link);
	locks_grant(v);
}

void vol_unlock(struct vol *v, struct vol_lock *lk)
{
	struct list go, *pos, *tmp;

	list_del(&lk->link);
	lk->granted = false;
	list_init(&go);
	list_for_each_safe(pos, tmp, &v->parked) {
		struct vol_io *io = container_of(pos, struct vol_io, vlink);
		if (!io_blocked(v, io, io->ticket)) {
			list_del(&io->vlink);
			list_add_tail(&go, &io->vlink);
		}
	}
	list_for_each_safe(pos, tmp, &go) {
		struct vol_io *io = container_of(pos, struct vol_io, vlink);
		list_del(&io->vlink);
		io->tracked = false;
		v->inflight--; /* submit counts it again */
		submit(v, io, io->ticket); /* keeps its place */
	}
	locks_grant(v);
}

int vol_meta_store(struct vol *v, const uint8_t *buf, size_t len)
{
	int r = md_meta_write(v->md, buf, len);

	if (r) {
		log_err("volume %s: storing the volume attributes: %s", v->name, strerror(-r));
		return r;
	}
	memcpy(v->meta, buf, len);
	v->meta_len = (uint32_t)len;
	v->meta_version++;
	return 0;
}

bool vol_lease_ok(const struct vol *v)
{
	return !v->repl_ops || !v->repl_ops->lease_ok || v->repl_ops->lease_ok(v->repl_ctx);
}

int vol_peer_role(const struct vol *v)
{
	return v->repl_ops ? v->repl_ops->peer_role(v->repl_ctx) : -1;
}

int vol_switchover(struct vol *v, bool to_self, char *msg, size_t len)
{
	if (!v->repl_ops) {
		snprintf(msg, len, "volume %s is not replicated", v->name);
		return -EOPNOTSUPP;
	}
	return v->repl_ops->switchover(v->repl_ctx, to_self, msg, len);
}

int vol_meta_set(struct vol *v, const uint8_t *buf, size_t len)
{
	int r = vol_meta_store(v, buf, len);

	if (!r && v->repl_ops)
		v->repl_ops->meta_changed(v->repl_ctx);
	return r;
}

static void reads_wake(struct vol *v);

void vol_complete(struct vol_io *io, int res)
{
	struct vol *v = io->vol;

	v->inflight--;
	if (io->tracked) {
		list_del(&io->vlink);
		io->tracked = false;
		if (!list_empty(&v->locks))
			locks_grant(v);
		if (!list_empty(&v->read_wait))
			reads_wake(v); /* V6: the outcome is known now */
	}
	if (res == -EIO)
		v->stats.errors++;
	io->cb(io, res);
}

void vol_disk_error(struct vol *v, int err, const char *op)
{
	struct timespec ts;
	char extra[96];

	if (!v->disk_error.err) {
		clock_gettime(CLOCK_REALTIME, &ts);
		v->disk_error.err = err;
		snprintf(v->disk_error.op, sizeof(v->disk_error.op), "%s", op);
		v->disk_error.at_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		if (!vol_disk_gone(v->disk)) {
			log_err("volume %s: the disk failed: %s of the local store: %s", v->name,
				op, strerror(err));
			snprintf(extra, sizeof(extra), "\"error\":\"%s\",\"op\":\"%s\"",
				 strerrorname_np(err) ? strerrorname_np(err) : "?", op);
			vol_event(v, "disk-error", NULL, NULL, extra);
		}
	}
	if (v->disk != VOL_DISKLESS) /* detached: a late error changes nothing */
		vol_set_disk(v, VOL_FAILED);
}

static const char *op_name(enum bs_op t)
{
	switch (t) {
	case BS_READ: return "read";
	case BS_WRITE: return "write";
	case BS_FLUSH: return "flush";
	case BS_TRIM: return "trim";
	case BS_ZERO: return "zero";
	default: return "io";
	}
}

bool vol_via_peer(const struct vol *v)
{
	return v->repl_ops && v->repl_ops->via_peer && v->repl_ops->via_peer(v->repl_ctx);
}

static bool need_peer(const struct vol *v)
{
	if (v->repl_ops && v->repl_ops->need_peer)
		return v->repl_ops->need_peer(v->repl_ctx);
	return vol_disk_gone(v->disk);
}

bool vol_serving(const struct vol *v)
{
	return !need_peer(v) || vol_via_peer(v);
}

void vol_detach_check(struct vol *v)
{
	if (v->disk != VOL_FAILED || v->role != VOL_PRIMARY || v->bios || !vol_via_peer(v))
		return;
	log_warn("volume %s: the failed disk is detached; the volume is served through its peer",
		 v->name);
	vol_set_disk(v, VOL_DISKLESS);
}

static void io_finish(struct vol_io *io, int res)
{
	struct vol *v = io->vol;

	v->bios--;
	if (v->slow.limit_ns) {
		v->slow.n++;
		if (ev_now(v->ev) - io->bio_t0 > v->slow.limit_ns)
			v->slow.nslow++;
	}
	if (res == -EIO)
		vol_disk_error(io->vol, EIO, op_name(io->bio.type));
	io->local_done(io, res);
	if (!v->bios && v->disk == VOL_FAILED)
		vol_detach_check(v);
}

static void zero_fallback_next(struct vol_io *io);

static void bio_done(struct bs_io *bio, int res)
{
	struct vol_io *io = container_of(bio, struct vol_io, bio);

	if (io->type == BS_ZERO && io->bio.type == BS_ZERO && res == -EOPNOTSUPP &&
	    !(io->flags & BS_F_FAST)) {
		io->zero_done = 0;
		zero_fallback_next(io);
		return;
	}
	if (io->type == BS_ZERO && io->bio.type == BS_WRITE && res == 0) {
		io->zero_done += bio->len;
		if (io->zero_done < io->len) {
			zero_fallback_next(io);
			return;
		}
	}
	/* fallocate has no FUA: a FUA trim or zero is followed by a flush. */
	if (res == 0 && (io->flags & BS_F_FUA) && (io->type == BS_TRIM || io->type == BS_ZERO) &&
	    io->bio.type != BS_FLUSH) {
		io->bio.type = BS_FLUSH;
		io->bio.flags = 0;
		bs_submit(io->vol->bs, &io->bio);
		return;
	}
	io_finish(io, res);
}

/* Writes zeros in chunks of at most ZERO_CHUNK, one after the other. */
static void zero_fallback_next(struct vol_io *io)
{
	struct vol *v = io->vol;
	uint64_t left = io->len - io->zero_done;

	io->bio.type = BS_WRITE;
	/* NOSYNC: a long chain of chunks must yield to the loop between chunks. */
	io->bio.flags = (io->flags & BS_F_FUA) | BS_F_NOSYNC;
	io->bio.off = io->off + io->zero_done;
	io->bio.len = MIN(left, (uint64_t)v->zero_len);
	io->bio.buf = v->zero_buf;
	bs_submit(v->bs, &io->bio);
}

/* V6: a write, trim or zero in flight overlaps the read. */
static bool read_blocked(const struct vol *v, const struct vol_io *io)
{
	struct list *pos;

	for (pos = v->writes.next; pos != &v->writes; pos = pos->next) {
		const struct vol_io *w = container_of(pos, struct vol_io, vlink);
		if (overlaps(w->off, w->len, io->off, io->len))
			return true;
	}
	return false;
}

static void reads_wake(struct vol *v)
{
	struct list go, *pos, *tmp;

	list_init(&go);
	list_for_each_safe (pos, tmp, &v->read_wait) {
		struct vol_io *io = container_of(pos, struct vol_io, vlink);
		if (!read_blocked(v, io)) {
			list_del(&io->vlink);
			list_add_tail(&go, &io->vlink);
		}
	}
	list_for_each_safe (pos, tmp, &go) {
		struct vol_io *io = container_of(pos, struct vol_io, vlink);
		list_del(&io->vlink);
		v->inflight--; /* submit counts it again */
		submit(v, io, 0);
	}
}

#define LEASE_POLL_NS (10ull * 1000000ull)

/* V5: io waits for the lease (counted in v->inflight meanwhile). */
static void lease_park(struct vol *v, struct vol_io *io)
{
	if (!io->lease_t0)
		io->lease_t0 = ev_now(v->ev) | 1;
	list_add_tail(&v->lease_wait, &io->vlink);
	if (!v->lease_timer.armed)
		ev_timer_arm(v->ev, &v->lease_timer, LEASE_POLL_NS);
}

static void fail_async(struct vol *v, struct vol_io *io, int err);

/* V5: requests waiting for the lease go on once it is back (or the role
 * went: submit refuses them), or fail once they waited too long. */
static void lease_poll(struct ev_timer *t)
{
	struct vol *v = container_of(t, struct vol, lease_timer);
	bool ok = vol_lease_ok(v) || v->role != VOL_PRIMARY || v->demoting;
	uint64_t now = ev_now(v->ev);
	struct list go, *pos, *tmp;

	list_init(&go);
	list_for_each_safe (pos, tmp, &v->lease_wait) {
		struct vol_io *io = container_of(pos, struct vol_io, vlink);
		if (ok || now - io->lease_t0 >= VOL_LEASE_WAIT_NS) {
			list_del(&io->vlink);
			list_add_tail(&go, &io->vlink);
		}
	}
	list_for_each_safe (pos, tmp, &go) {
		struct vol_io *io = container_of(pos, struct vol_io, vlink);
		list_del(&io->vlink);
		if (ok) {
			v->inflight--; /* submit counts it again */
			submit(v, io, 0);
		} else {
			io->lease_t0 = 0;
			fail_async(v, io, -ESTALE);
		}
	}
	if (!list_empty(&v->lease_wait))
		ev_timer_arm(v->ev, &v->lease_timer, LEASE_POLL_NS);
}

static void read_peer(struct vol *v, struct vol_io *io);

/* V5: a read's data counts only if the lease held when it came back (and
 * the node is still primary: one that stepped down meanwhile refuses it).
 * D1: one the local store failed is read from the peer. */
static void read_done(struct vol_io *io, int res)
{
	struct vol *v = io->vol;

	if ((res == -EIO || res == -ENODEV) && !io->from_peer && v->role == VOL_PRIMARY &&
	    vol_via_peer(v)) {
		read_peer(v, io); /* D1: the local store failed it; the peer has it */
		return;
	}
	if (res == -ENODEV)
		res = -EIO;
	if (res == 0 && (v->role != VOL_PRIMARY || !vol_lease_ok(v))) {
		lease_park(v, io); /* read again once the lease is back */
		return;
	}
	vol_complete(io, res);
}

static void refused_done(struct bs_io *bio, int res)
{
	vol_complete(container_of(bio, struct vol_io, bio), res);
}

/* Completes io with err from the loop (V2: never inside submit). */
static void fail_async(struct vol *v, struct vol_io *io, int err)
{
	io->bio.cb = refused_done;
	bs_complete_later(v->ev, &io->bio, err);
}

/* D1: the read goes to the peer (the disk here is gone, or failed it). */
static void read_peer(struct vol *v, struct vol_io *io)
{
	io->from_peer = true;
	if (v->repl_ops->read(v->repl_ctx, io, read_done))
		fail_async(v, io, -EIO);
}

/* A trim or zeroing larger than one replication message carries (a 6 GiB
 * UNMAP descriptor, a WRITE SAME of the whole medium) runs as pieces of
 * SPLIT_MAX, each its own request; the request completes once all did, with
 * the first error. */
#define SPLIT_MAX (1ull << 30)

struct split;
struct split_kid {
	struct vol_io io;
	struct split *sp;
};
struct split {
	struct vol_io *parent;
	unsigned left;
	int res;
	struct split_kid kids[];
};

static void split_done(struct vol_io *io, int res)
{
	struct split *sp = container_of(io, struct split_kid, io)->sp;

	if (res && !sp->res)
		sp->res = res;
	if (--sp->left)
		return;
	io = sp->parent;
	res = sp->res;
	free(sp);
	io->cb(io, res);
}

static bool split_submit(struct vol *v, struct vol_io *io)
{
	uint64_t n = (io->len + SPLIT_MAX - 1) / SPLIT_MAX;
	struct split *sp;

	if (io->off > v->size || io->len > v->size - io->off)
		return false; /* refused whole, as any request out of range */
	sp = calloc(1, sizeof(*sp) + n * sizeof(sp->kids[0]));
	if (!sp)
		return false;
	sp->parent = io;
	sp->left = (unsigned)n;
	for (uint64_t i = 0; i < n; i++) {
		struct vol_io *k = &sp->kids[i].io;
		sp->kids[i].sp = sp;
		k->type = io->type;
		k->flags = io->flags;
		k->off = io->off + i * SPLIT_MAX;
		k->len = MIN(SPLIT_MAX, io->len - i * SPLIT_MAX);
		k->lock = io->lock;
		k->cb = split_done;
	}
	io->vol = v;
	for (uint64_t i = 0; i < n; i++)
		submit(v, &sp->kids[i].io, 0);
	return true;
}

void vol_submit(struct vol *v, struct vol_io *io)
{
	io->lease_t0 = 0;
	if (v->repl_ops && (io->type == BS_TRIM || io->type == BS_ZERO) && io->len > SPLIT_MAX &&
	    split_submit(v, io))
		return;
	submit(v, io, 0);
}

/* again: the ticket of a write that was parked, 0 for a new one */
static void submit(struct vol *v, struct vol_io *io, uint64_t again)
{
	io->vol = v;
	io->from_peer = false; /* (a read after the lease came back starts over) */
	io->tracked = false; /* before any early completion reads it */
	v->inflight++;
	if (v->role != VOL_PRIMARY || v->demoting) {
		fail_async(v, io, -EROFS);
		return;
	}
	if (!vol_serving(v)) { /* V1 */
		fail_async(v, io, -EIO);
		return;
	}
	if (io->type != BS_FLUSH && (io->off > v->size || io->len > v->size - io->off)) {
		fail_async(v, io, -EINVAL);
		return;
	}
	if (!vol_lease_ok(v)) { /* V5 */
		lease_park(v, io);
		return;
	}
	io->lease_t0 = 0;
	if (io->type == BS_READ && read_blocked(v, io)) { /* V6 */
		list_add_tail(&v->read_wait, &io->vlink);
		return;
	}
	if (modifies(io)) { /* always tracked: a lock must see every write in flight */
		io->tracked = true;
		/* a write parked before keeps its ticket; a new one is the newest */
		uint64_t ticket = again ? again : v->ticket + 1;
		if (io_blocked(v, io, ticket)) { /* V3: waits for the lock to go */
			io->ticket = ticket;
			v->ticket = MAX(v->ticket, ticket);
			list_add_tail(&v->parked, &io->vlink);
			return;
		}
		list_add_tail(&v->writes, &io->vlink);
	}
	switch (io->type) {
	case BS_READ:
		v->stats.reads++;
		v->stats.read_bytes += io->len;
		break;
	case BS_WRITE:
		v->stats.writes++;
		v->stats.write_bytes += io->len;
		break;
	case BS_FLUSH: v->stats.flushes++; break;
	case BS_TRIM: v->stats.trims++; break;
	case BS_ZERO: v->stats.zeroes++; break;
	default: fail_async(v, io, -EINVAL); return;
	}
	if (v->repl_ops && io->type != BS_READ) {
		v->repl_ops->submit(v->repl_ctx, io);
		return;
	}
	if (io->type == BS_READ && v->repl_ops &&
	    v->repl_ops->read_remote(v->repl_ctx, io->off, io->len)) {
		read_peer(v, io); /* D1 (checked above: via_peer) */
		return;
	}
	vol_local(v, io, io->type == BS_READ ? read_done : vol_complete);
}

void vol_local(struct vol *v, struct vol_io *io, void (*done)(struct vol_io *io, int res))
{
	io->vol = v;
	io->local_done = done;
	io->bio.type = io->type;
	io->bio.flags = io->flags;
	io->bio.off = io->off;
	io->bio.len = io->len;
	io->bio.buf = io->buf;
	io->bio.cb = bio_done;
	io->bio.op.cb = NULL; /* the store sets its own */
	v->bios++;
	io->bio_t0 = ev_now(v->ev);
	if (vol_disk_gone(v->disk)) { /* D1: no I/O to a gone disk */
		bs_complete_later(v->ev, &io->bio, -ENODEV);
		return;
	}
	bs_submit(v->bs, &io->bio);
}

/* Guarantee 8 (SPEC.md): a block device holds the data area and the disk
 * label after it (ondisk.h). 0, or -ENOSPC with err saying what it needs. */
static int disk_room(const char *name, const char *path, uint64_t size, char *err, size_t errlen)
{
	uint64_t have = 0, need = size + TANDEM_LABEL_AREA;
	struct stat st;
	int fd, r = 0;

	if (stat(path, &st) < 0 || !S_ISBLK(st.st_mode))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* the store's open says why */
	if (ioctl(fd, BLKGETSIZE64, &have) == 0 && have < need) {
		snprintf(err, errlen,
			 "volume %s: disk %s: %llu bytes, needs %llu (size + 4 KiB label)", name,
			 path, (unsigned long long)have, (unsigned long long)need);
		r = -ENOSPC;
	}
	close(fd);
	return r;
}

/* Guarantee 8: the disk must be the one its metadata describes (its label,
 * ondisk.h). New metadata labels its disk as a new one; metadata from before
 * labels adopts its disk's label or writes one. Any other disk (missing, new,
 * emptied, truncated, another volume's, another disk, a restored copy older
 * than the metadata) is never taken as consistent: a replicated volume starts
 * it inconsistent with no data generation (a full sync from the peer, as a
 * new disk on a node that is not the first), a single-node volume refuses to
 * start. Every verdict is bumped on the disk at once (label first, then the
 * caller's metadata write), so that a copy of the disk taken now is older
 * than the metadata from the next start on. A label that cannot be written
 * only weakens the next check (the metadata records the seq the disk holds):
 * it is logged, not fatal. */
static int disk_identity(struct vol *v, const struct cfg_volume *cv, const char *dpath,
			 const char *mdpath, bool existed, const struct stat *pre, char *err,
			 size_t errlen)
{
	struct md *md = v->md;
	struct md_label l;
	enum md_disk_id id;
	char what[200];
	int rd, r;

	r = md_disk_open(md, dpath);
	if (r) {
		snprintf(err, errlen, "volume %s: disk %s: %s", v->name, dpath, strerror(-r));
		return r;
	}
	rd = md_label_read(md, &l);
	if (rd && rd != -ENODATA && rd != -EBADMSG && rd != -EPROTONOSUPPORT) {
		snprintf(err, errlen, "volume %s: disk %s: reading its label: %s", v->name, dpath,
			 strerror(-rd));
		return rd;
	}
	if (md->created) {
		if (rd == 0)
			log_warn(
				"volume %s: new metadata: disk %s carried a label of before; it is "
				"labelled anew",
				v->name, dpath);
		r = md_label_write(md, true);
		goto out;
	}
	id = md_disk_check(&md->sb, rd, &l);
	if (id == MD_DISK_OK) {
		r = md_label_write(md, false);
		goto out;
	}
	if (id == MD_DISK_UNRECORDED) {
		if (rd == 0) {
			md_label_adopt(md, &l);
			log_info("volume %s: metadata records no disk (older metadata): it adopts "
				 "the label of disk %s",
				 v->name, dpath);
		} else {
			log_warn("volume %s: metadata records no disk (older metadata): disk %s is "
				 "labelled as its own",
				 v->name, dpath);
		}
		r = md_label_write(md, rd != 0);
		goto out;
	}
	if (!existed)
		snprintf(what, sizeof(what), "is missing (created empty)");
	else if (S_ISREG(pre->st_mode) && pre->st_size == 0)
		snprintf(what, sizeof(what), "is empty (new or emptied disk)");
	else if (S_ISREG(pre->st_mode) && (uint64_t)pre->st_size < cv->size &&
		 id == MD_DISK_NOLABEL)
		snprintf(what, sizeof(what),
			 "is truncated (%llu bytes, the volume and its label take %llu)",
			 (unsigned long long)pre->st_size,
			 (unsigned long long)(cv->size + TANDEM_LABEL_AREA));
	else
		snprintf(what, sizeof(what), "%s", md_disk_id_what(id));
	if (cv->nnodes == 1) {
		snprintf(err, errlen,
			 "volume %s: disk %s %s; a single-node volume has no peer to fill it "
			 "from: refusing to start (to take this disk as new, remove the metadata "
			 "file %s)",
			 v->name, dpath, what, mdpath);
		return -EUCLEAN;
	}
	log_warn("volume %s: disk %s %s: inconsistent, full sync from the peer", v->name, dpath,
		 what);
	md->sb.flags &= ~(TANDEM_MD_F_UPTODATE | TANDEM_MD_F_CONSISTENT | TANDEM_MD_F_FAILED |
			  TANDEM_MD_F_PEER_ONLY);
	md->sb.gen_current = TANDEM_MD_GEN_NONE;
	md->sb.gen_bitmap = TANDEM_MD_GEN_NONE;
	memset(md->sb.gen_history, 0, sizeof(md->sb.gen_history));
	r = md_label_write(md, true);
out:
	if (r)
		log_warn("volume %s: disk %s: writing its label: %s (the next start checks "
			 "against the label it holds)",
			 v->name, dpath, strerror(-r));
	return 0;
}

int vol_relabel(struct vol *v, bool fresh)
{
	struct md_label l;
	int r;

	if (!v->data_path[0])
		return 0;
	r = md_disk_open(v->md, v->data_path);
	if (!r) {
		(void)md_label_read(v->md, &l); /* where the newest slot is */
		r = md_label_write(v->md, fresh);
	}
	if (r)
		log_warn("volume %s: disk %s: writing its label: %s", v->name, v->data_path,
			 strerror(-r));
	return r;
}

/* Guarantee 8 at an attach: the old disk (again) must be the one that
 * failed, as the metadata describes it; a new disk is labelled as new (the
 * caller gives it all of the peer's data). The label is written before the
 * metadata records it (the caller's next metadata write). */
static int attach_identity(struct vol *v, const char *spec, bool old, char *msg, size_t len)
{
	struct md_label l;
	enum md_disk_id id;
	int r;

	r = md_disk_open(v->md, spec);
	if (r) {
		snprintf(msg, len, "volume %s: %s: %s", v->name, spec, strerror(-r));
		return r;
	}
	if (old) {
		r = md_label_read(v->md, &l);
		id = md_disk_check(&v->md->sb, r, &l);
		if (id != MD_DISK_OK && id != MD_DISK_UNRECORDED) {
			md_disk_close(v->md);
			snprintf(msg, len,
				 "volume %s: disk %s %s: it is not the disk that failed; attach it "
				 "as a new disk (--disk %s) to give it all of the peer's data",
				 v->name, spec, md_disk_id_what(id), spec);
			return -EUCLEAN;
		}
		if (id == MD_DISK_UNRECORDED && r == 0)
			md_label_adopt(v->md, &l);
	}
	r = md_label_write(v->md, !old);
	if (r)
		log_warn("volume %s: disk %s: writing its label: %s", v->name, spec, strerror(-r));
	return 0;
}

int vol_attach(struct vol *v, const char *path, char *msg, size_t len)
{
	const char *spec = path ? path : v->data_path[0] ? v->data_path : "ram:";
	struct bs *nb;
	int r;

	if (!vol_disk_gone(v->disk)) {
		snprintf(msg, len, "volume %s: the disk is %s, not failed: nothing to attach",
			 v->name, vol_disk_name(v->disk));
		return -EINVAL;
	}
	if (v->md_failed) {
		snprintf(msg, len,
			 "volume %s: its metadata could not be written (see the log): restart the "
			 "node to attach a disk",
			 v->name);
		return -EIO;
	}
	if (v->bios) {
		snprintf(msg, len, "volume %s: %u requests to the failed disk not finished yet",
			 v->name, v->bios);
		return -EAGAIN;
	}
	if (strncmp(spec, "ram:", 4) != 0) {
		r = disk_room(v->name, spec, v->size, msg, len);
		if (r)
			return r;
	}
	r = bs_open_spec(v->ev, spec, v->size, v->bs->direct, &nb);
	if (r) {
		snprintf(msg, len, "volume %s: %s: %s", v->name, spec, strerror(-r));
		return r;
	}
	if (nb->align > v->min_block) {
		snprintf(msg, len, "volume %s: %s needs %u-byte alignment, the volume %u", v->name,
			 spec, nb->align, v->min_block);
		bs_close(nb);
		return -EINVAL;
	}
	if (strncmp(spec, "ram:", 4) != 0) {
		r = attach_identity(v, spec, path == NULL, msg, len);
		if (r) {
			bs_close(nb);
			return r;
		}
	}
	bs_close(v->bs);
	v->bs = nb;
	if (path)
		snprintf(v->data_path, sizeof(v->data_path), "%s",
			 strncmp(path, "ram:", 4) ? path : "");
	log_warn("volume %s: disk %s attached in place of the failed one", v->name, spec);
	memset(&v->disk_error, 0, sizeof(v->disk_error));
	return 0;
}

int vol_inject_slow(struct vol *v, unsigned ms, char *msg, size_t len)
{
	struct bs *nb;
	int r;

	if (vol_disk_gone(v->disk)) {
		snprintf(msg, len, "volume %s: the disk is %s", v->name, vol_disk_name(v->disk));
		return -ENODEV;
	}
	if (bs_slow_set(v->bs, ms) == 0) {
		log_warn("volume %s: slow disk: every operation now waits %u ms", v->name, ms);
		return 0;
	}
	if (!ms)
		return 0;
	r = bs_slow_open(v->bs, ms, &nb);
	if (r) {
		snprintf(msg, len, "volume %s: %s", v->name, strerror(-r));
		return r;
	}
	v->bs = nb;
	log_warn("volume %s: slow disk: every operation now waits %u ms", v->name, ms);
	return 0;
}

int vol_inject_crash(struct vol *v, int kind, unsigned after, uint64_t seed, char *msg, size_t len)
{
	struct crash_hook *hook;
	struct bs *nb;
	int r;

	if (vol_disk_gone(v->disk)) {
		snprintf(msg, len, "volume %s: the disk is %s", v->name, vol_disk_name(v->disk));
		return -ENODEV;
	}
	static const char *const kinds[] = { "crash point", "data write", "data flush",
					     "metadata write" };

	r = bs_crash_open(v->bs, v->data_path, v->name, seed, kind, after + 1, &nb, &hook);
	if (r) {
		snprintf(msg, len, "volume %s: %s", v->name,
			 r == -EOPNOTSUPP ? "a RAM store cannot crash" : strerror(-r));
		return r;
	}
	v->bs = nb;
	v->md->crash = hook;
	log_warn("volume %s: crash simulation: the node dies at %s number %u from now "
		 "(seed %llu)",
		 v->name, kinds[kind], after + 1, (unsigned long long)seed);
	return 0;
}

int vol_inject(struct vol *v, const char *op, unsigned after, int err, bool once, char *msg,
	       size_t len)
{
	static const char *const ops[] = { [BS_READ] = "read",
					   [BS_WRITE] = "write",
					   [BS_FLUSH] = "flush",
					   [BS_TRIM] = "trim",
					   [BS_ZERO] = "zero" };
	struct bs *nb;
	int r;

	for (unsigned t = 0; t < sizeof(ops) / sizeof(ops[0]); t++) {
		if (!ops[t] || strcmp(op, ops[t]))
			continue;
		r = bs_fault_open(v->bs, (enum bs_op)t, after + 1, !once, err, &nb);
		if (r) {
			snprintf(msg, len, "volume %s: %s", v->name, strerror(-r));
			return r;
		}
		v->bs = nb; /* requests in flight complete on the store below */
		log_warn("volume %s: fault injected: %s number %u from now fails with %s%s",
			 v->name, op, after + 1, strerrorname_np(err),
			 once ? "" : ", and every later one");
		return 0;
	}
	snprintf(msg, len, "no operation '%s' (read, write, flush, trim, zero)", op);
	return -EINVAL;
}

static void slow_tick(struct ev_timer *t)
{
	struct vol *v = container_of(t, struct vol, slow.timer);
	bool bad = (v->slow.n && v->slow.nslow * 100 > v->slow.n) || (v->bios && !v->slow.n);

	v->slow.secs = bad && !vol_disk_gone(v->disk) ? v->slow.secs + 1 : 0;
	v->slow.n = v->slow.nslow = 0;
	if (v->slow.secs >= v->slow.need_s) {
		if (v->slow.may_detach && v->slow.may_detach(v->slow.ctx)) {
			log_err("volume %s: the disk is too slow: more than 1%% of its requests "
				"took over %llu ms, %u s in a row; detached",
				v->name, (unsigned long long)(v->slow.limit_ns / 1000000),
				v->slow.secs);
			vol_disk_error(v, ETIMEDOUT, "slow");
		} else if (!v->slow.said) {
			log_warn("volume %s: the disk is too slow (over %llu ms for %u s) but no "
				 "peer can serve in its place: kept",
				 v->name, (unsigned long long)(v->slow.limit_ns / 1000000),
				 v->slow.secs);
			v->slow.said = true;
		}
		v->slow.secs = 0;
	}
	if (!bad)
		v->slow.said = false;
	ev_timer_arm(v->ev, t, 1000000000ull);
}

void vol_slow_watch(struct vol *v, unsigned limit_ms, unsigned need_s,
		    bool (*may_detach)(void *ctx), void *ctx)
{
	v->slow.limit_ns = (uint64_t)limit_ms * 1000000ull;
	v->slow.need_s = need_s ? need_s : 1;
	v->slow.may_detach = may_detach;
	v->slow.ctx = ctx;
	ev_timer_cancel(v->ev, &v->slow.timer);
	if (!limit_ms)
		return;
	v->slow.timer.fn = slow_tick;
	ev_timer_arm(v->ev, &v->slow.timer, 1000000000ull);
}

int vol_block_status(struct vol *v, uint64_t off, uint64_t len, struct bs_extent *ext, unsigned max,
		     unsigned *n)
{
	if (off > v->size || len > v->size - off || len == 0)
		return -EINVAL;
	return v->bs->ops->block_status(v->bs, off, len, ext, max, n);
}

int vol_open(struct ev_loop *ev, const struct cfg *cfg, unsigned vi, unsigned ni, struct vol **out,
	     char *err, size_t errlen)
{
	const struct cfg_volume *cv = &cfg->volumes[vi];
	const struct cfg_node *cn = &cfg->nodes[ni];
	struct vol *v;
	struct md_sb init;
	char path[CFG_PATH_MAX + CFG_NAME_MAX + 8], dpath[CFG_PATH_MAX + CFG_NAME_MAX + 8];
	char mdpath[CFG_PATH_MAX + CFG_NAME_MAX + 8];
	struct stat st;
	bool fresh, existed;
	int r;

	v = calloc(1, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "volume %s: out of memory", cv->name);
		return -ENOMEM;
	}
	snprintf(v->name, sizeof(v->name), "%s", cv->name);
	v->port_self = (uint16_t)(ni + 1);
	v->size = cv->size;
	v->ev = ev;
	list_init(&v->locks);
	list_init(&v->writes);
	list_init(&v->parked);
	list_init(&v->read_wait);
	list_init(&v->lease_wait);
	v->lease_timer.fn = lease_poll;

	if (cv->disk[ni][0])
		snprintf(dpath, sizeof(dpath), "%s", cv->disk[ni]);
	else
		snprintf(dpath, sizeof(dpath), "%s/%s.img", cn->data_dir, cv->name);
	/* A data area this open creates is known to be empty (zeros). */
	existed = strcmp(dpath, "ram:") != 0 && stat(dpath, &st) == 0;
	fresh = !existed || (S_ISREG(st.st_mode) && st.st_size == 0);
	memset(&init, 0, sizeof(init));
	init.size = cv->size;
	init.block_size = 512;
	init.flags = TANDEM_MD_F_CONSISTENT | TANDEM_MD_F_UPTODATE;
	init.gen_current = TANDEM_MD_GEN_EMPTY;
	if (cv->nnodes > 1) {
		/* Replicas created empty together need no initial sync. A disk
		 * that already holds data (a filled image, a block device) is
		 * not "created empty": on the first node its content is the
		 * volume's (a generation of its own, so that the peer gets all
		 * of it); on another node it is unknown and gets a full sync. */
		if (!fresh && cv->nodes[0] != ni) {
			init.gen_current = TANDEM_MD_GEN_NONE;
			init.flags = 0;
		} else if (!fresh) {
			init.gen_current = md_new_gen();
		} else {
			/* Data, not names, decides (guarantee 8): a new disk
			 * holds zeros, which is the volume's data only if no
			 * node ever wrote it. It is inconsistent until a
			 * handshake shows its peer is as new (both empty: the
			 * same zeros) or a full sync fills it. */
			init.flags = 0;
		}
		init.bm_offset = TANDEM_MD_BITMAP_OFFSET;
		init.bm_granularity = (uint32_t)cv->bitmap_granularity;
		init.bm_bytes = bm_bytes_on_disk(cv->size, init.bm_granularity);
	}
	snprintf(init.cluster, sizeof(init.cluster), "%s", cfg->cluster);
	snprintf(init.volume, sizeof(init.volume), "%s", cv->name);
	snprintf(init.node, sizeof(init.node), "%s", cn->name);
	snprintf(path, sizeof(path), "%s/%s.md", cn->data_dir, cv->name);
	r = md_open(path, &init, &v->md);
	if (r) {
		snprintf(err, errlen, "volume %s: metadata %s: %s", cv->name, path,
			 r == -EUCLEAN ? "not a Tandem metadata file (refusing to overwrite)"
			 : r == -EPROTONOSUPPORT ? "written by a newer Tandem"
						 : strerror(-r));
		goto fail;
	}
	if (strcmp(v->md->sb.volume, cv->name) || strcmp(v->md->sb.cluster, cfg->cluster)) {
		snprintf(err, errlen, "volume %s: metadata %s belongs to volume %s of cluster %s",
			 cv->name, path, v->md->sb.volume, v->md->sb.cluster);
		r = -EINVAL;
		goto fail;
	}
	v->meta = malloc(TANDEM_MD_META_MAX);
	if (!v->meta) {
		r = -ENOMEM;
		snprintf(err, errlen, "volume %s: out of memory", cv->name);
		goto fail;
	}
	r = md_meta_read(v->md, v->meta, TANDEM_MD_META_MAX);
	if (r < 0) {
		snprintf(err, errlen, "volume %s: metadata %s: attributes: %s", cv->name, path,
			 strerror(-r));
		goto fail;
	}
	v->meta_len = (uint32_t)r;
	if (v->md->sb.size != cv->size) {
		snprintf(err, errlen,
			 "volume %s: configured size %llu differs from the created size %llu "
			 "(resizing is not supported)",
			 cv->name, (unsigned long long)cv->size,
			 (unsigned long long)v->md->sb.size);
		r = -EINVAL;
		goto fail;
	}
	snprintf(mdpath, sizeof(mdpath), "%s", path);
	snprintf(path, sizeof(path), "%s", dpath);
	if (strncmp(dpath, "ram:", 4) != 0)
		snprintf(v->data_path, sizeof(v->data_path), "%s", dpath);
	r = disk_room(cv->name, path, cv->size, err, errlen);
	if (r)
		goto fail;
	r = bs_open_spec(ev, path, cv->size, cv->cache == CFG_CACHE_NONE, &v->bs);
	if (r) {
		snprintf(err, errlen, "volume %s: backing store %s: %s", cv->name, path,
			 strerror(-r));
		goto fail;
	}
	if (v->data_path[0]) {
		r = disk_identity(v, cv, path, mdpath, existed, &st, err, errlen);
		if (r)
			goto fail;
	}
	v->min_block = v->bs->align;
	/* The replication protocol moves whole sectors. */
	if (cv->nnodes > 1 && v->min_block < 512)
		v->min_block = 512;
	v->zero_len = ZERO_CHUNK;
	v->zero_buf = alloc_aligned(ZERO_CHUNK);
	if (!v->zero_buf) {
		r = -ENOMEM;
		snprintf(err, errlen, "volume %s: out of memory", cv->name);
		goto fail;
	}
	memset(v->zero_buf, 0, ZERO_CHUNK);
	{
		uint32_t f = v->md->sb.flags;
		enum vol_disk d;
		if ((f & TANDEM_MD_F_FAILED) || (cv->nnodes == 1 && !(f & TANDEM_MD_F_UPTODATE)))
			d = VOL_FAILED;
		else if ((f & TANDEM_MD_F_UPTODATE) && cv->nnodes > 1 && !v->md->created)
			d = VOL_CONSISTENT; /* R9: until a connect says more */
		else if (f & TANDEM_MD_F_UPTODATE)
			d = VOL_UPTODATE;
		else if (f & TANDEM_MD_F_CONSISTENT)
			d = VOL_OUTDATED;
		else
			d = VOL_INCONSISTENT;
		set_disk(v, d, true);
	}
	/* A single-node volume is always primary on its node. A replicated one
	 * always starts secondary: after a restart the peer may have been
	 * promoted meanwhile, and a new disk may replace one that held data;
	 * the data decides (the handshake of a new pair, an operator or the
	 * witness: repl_hs.c, WITNESS.md N7). */
	set_role(v, cv->nnodes == 1 ? VOL_PRIMARY : VOL_SECONDARY, true);
	/* Remembered before this open clears it: a primary that crashed. */
	v->crashed = !(v->md->sb.flags & TANDEM_MD_F_CLEAN) && !v->md->created;
	v->crashed_primary = v->crashed && (v->md->sb.flags & TANDEM_MD_F_PRIMARY);
	if (v->md->sb.flags & TANDEM_MD_F_CLEAN) {
		v->md->sb.flags &= ~TANDEM_MD_F_CLEAN;
	} else if (!v->md->created) {
		log_warn("volume %s: was not shut down cleanly", v->name);
	}
	if (v->role == VOL_PRIMARY)
		v->md->sb.flags |= TANDEM_MD_F_PRIMARY;
	else
		v->md->sb.flags &= ~TANDEM_MD_F_PRIMARY;
	r = md_write(v->md);
	if (r) {
		snprintf(err, errlen, "volume %s: writing metadata: %s", cv->name, strerror(-r));
		goto fail;
	}
	log_info("volume %s: %s, %s, %llu bytes, %s store %s%s", v->name, vol_role_name(v->role),
		 vol_disk_name(v->disk), (unsigned long long)v->size, v->bs->ops->name, path,
		 v->bs->direct ? " (O_DIRECT)" : "");
	*out = v;
	return 0;
fail:
	bs_close(v->bs);
	md_close(v->md);
	free(v->zero_buf);
	free(v->meta);
	free(v);
	return r;
}

void vol_close(struct vol *v)
{
	if (!v)
		return;
	ev_timer_cancel(v->ev, &v->lease_timer);
	ev_timer_cancel(v->ev, &v->slow.timer);
	if (v->bs && !vol_disk_gone(v->disk) && v->bs->ops->sync(v->bs) < 0) {
		log_warn("volume %s: final flush failed", v->name);
		vol_set_disk(v, VOL_FAILED);
	}
	if (v->md && v->md_failed)
		log_err("volume %s: metadata not marked clean (a write of it failed): the next "
			"start recovers as after a crash",
			v->name);
	else if (v->md && !vol_disk_gone(v->disk) && v->inflight == 0) {
		v->md->sb.flags |= TANDEM_MD_F_CLEAN;
		if (md_write(v->md))
			log_warn("volume %s: could not mark metadata clean", v->name);
	}
	bs_close(v->bs);
	md_close(v->md);
	free(v->zero_buf);
	free(v->meta);
	free(v);
}
