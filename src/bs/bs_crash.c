/* Crash-simulating backing store (tests only; `tandemctl inject VOLUME crash`).
 * It plays a disk with a volatile write cache: a write completes once it is
 * in the cache (a list of pending writes, in the order they completed), the
 * cache is written back in that order (on a flush, a FUA write, or by itself
 * past CACHE_MAX), and a flush completes once everything that completed
 * before it is on the store below and that store is flushed. Reads see the
 * cache over the store.
 *
 * Crash points are counted over data writes, flushes and the metadata
 * writers' own points (src/common/crash.h). At the chosen one the store
 * leaves on disk what a power loss could have left there, then kills the
 * process (SIGKILL: its sockets close as on any kill):
 *   - a prefix, in completion order, of the cached writes, the next one
 *     torn (a random subset of its 512-byte sectors), the rest lost;
 *   - of the metadata write at the point, a random subset of its sectors.
 * Invariants:
 *   C1 a write leaves the cache only in order (the head first), so what is
 *      on the store below is always a prefix of the completed writes, plus
 *      what the store had before;
 *   C2 a flush completes only after every write that completed before it
 *      left the cache and the store below flushed;
 *   C3 reads and block_status see the cache: the volume above cannot tell
 *      this store from the disk it plays, until the crash. */
#include "bs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/crash.h"
#include "../common/list.h"
#include "../common/log.h"
#include "../common/util.h"

#define CACHE_MAX (32ull << 20) /* written back by itself beyond this */
#define SECTOR 512u

struct pend {
	struct list link;
	uint64_t seq, off, len;
	uint8_t *data; /* NULL: zeros (ZERO, TRIM) */
	uint32_t flags;
	struct bs_io io; /* its write-back to the store below */
	struct bs_crash *bc;
};

struct fwait { /* a flush (or FUA write) waiting for the cache up to seq */
	struct list link;
	uint64_t seq;
	struct bs_io *parent;
	struct bs_io io; /* the flush of the store below */
};

struct crd { /* a read of the store below, patched from the cache */
	struct bs_io io;
	struct bs_io *parent;
	struct bs_crash *bc;
};

struct bs_crash {
	struct bs bs;
	struct bs *inner;
	struct crash_hook hook;
	int fd; /* the same file, for the writes at the crash */
	struct list pend, waits;
	uint64_t seq, bytes, applied; /* last seq completed, cached bytes, last seq written back */
	bool writing;
	unsigned npend, points, crash_at;
	int kind; /* the points counted: BS_CRASH_ANY or one kind */
	uint64_t rng;
	char name[32];
};

static uint64_t rnd(struct bs_crash *bc)
{
	/* splitmix64: reproducible from the seed the test gives */
	uint64_t z = (bc->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int put(int fd, const uint8_t *data, uint64_t off, uint64_t len)
{
	static const uint8_t zero[SECTOR];

	while (len) {
		size_t n = data ? len : MIN(len, sizeof(zero));
		ssize_t w = pwrite(fd, data ? data : zero, n, (off_t)off);
		if (w <= 0)
			return -EIO;
		off += (uint64_t)w;
		len -= (uint64_t)w;
		if (data)
			data += w;
	}
	return 0;
}

/* Writes a random subset of the sectors of [off, off+len): a torn write. */
static unsigned tear(struct bs_crash *bc, int fd, const uint8_t *data, uint64_t off, uint64_t len)
{
	unsigned kept = 0;

	for (uint64_t s = 0; s < len; s += SECTOR) {
		uint64_t n = MIN(SECTOR, len - s);
		if (rnd(bc) & 1)
			continue;
		if (put(fd, data ? data + s : NULL, off + s, n) == 0)
			kept++;
	}
	return kept;
}

static void crash_now(struct bs_crash *bc, const char *what, int mfd, const void *mbuf, size_t mlen,
		      uint64_t moff)
{
	struct list *pos;
	unsigned i = 0, first = bc->writing ? 1 : 0, k, torn = 0, msect = 0;

	/* C1: the write-back in flight is on its way (the page cache below
	 * survives a killed process), so the prefix starts after it */
	k = first + (unsigned)(rnd(bc) % (bc->npend - first + 1));
	for (pos = bc->pend.next; pos != &bc->pend; pos = pos->next, i++) {
		struct pend *p = container_of(pos, struct pend, link);
		if (i < k) /* the one in flight too: its SQE may not have left */
			put(bc->fd, p->data, p->off, p->len);
		else if (i == k)
			torn = tear(bc, bc->fd, p->data, p->off, p->len);
		else
			break;
	}
	if (mbuf)
		msect = tear(bc, mfd, mbuf, moff, mlen);
	/* What is kept goes down now and leaves the page cache: the store
	 * below (and the node restarted on it) uses O_DIRECT, and dirty
	 * buffered pages of the same file make its direct I/O fail (EIO,
	 * "page cache invalidation failure"). */
	fdatasync(bc->fd);
	posix_fadvise(bc->fd, 0, 0, POSIX_FADV_DONTNEED);
	log_warn("%s: simulated crash at point %u (%s): %u of %u cached writes kept, %s "
		 "(%u sectors of it kept); of the metadata write, %u of %zu sectors kept",
		 bc->name, bc->points, what, k, bc->npend,
		 k < bc->npend ? "the next one torn" : "none torn", torn, msect,
		 (mlen + SECTOR - 1) / SECTOR);
#ifdef TANDEM_COVERAGE
	{
		/* a killed process writes no coverage data: this one does */
		extern void __gcov_dump(void);
		__gcov_dump();
	}
#endif
	raise(SIGKILL);
	_exit(137);
}

static void count_point(struct bs_crash *bc, int kind, const char *what, int fd, const void *buf,
			size_t len, uint64_t off)
{
	if (bc->kind != BS_CRASH_ANY && bc->kind != kind)
		return;
	if (++bc->points == bc->crash_at)
		crash_now(bc, what, fd, buf, len, off);
}

static int hook_point(struct crash_hook *h, const char *what, int fd, const void *buf, size_t len,
		      uint64_t off)
{
	count_point(container_of(h, struct bs_crash, hook), BS_CRASH_META, what, fd, buf, len, off);
	return 0;
}

static void wait_done(struct bs_io *io, int res)
{
	struct fwait *w = container_of(io, struct fwait, io);
	struct bs_io *parent = w->parent;

	free(w);
	parent->done = parent->len;
	parent->cb(parent, res);
}

static void release_waits(struct bs_crash *bc)
{
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, &bc->waits) {
		struct fwait *w = container_of(pos, struct fwait, link);
		if (w->seq > bc->applied)
			continue;
		list_del(pos);
		w->io.type = BS_FLUSH; /* C2 */
		w->io.flags = 0;
		w->io.off = w->io.len = 0;
		w->io.buf = NULL;
		w->io.cb = wait_done;
		bs_submit(bc->inner, &w->io);
	}
}

static void writeback_done(struct bs_io *io, int res);

/* Writes the head of the cache back when a flush waits for it or the cache
 * is full: one at a time, in order (C1). */
static void pump(struct bs_crash *bc)
{
	struct pend *p;
	bool wanted = false;

	if (bc->writing || list_empty(&bc->pend))
		return;
	p = container_of(bc->pend.next, struct pend, link);
	for (struct list *pos = bc->waits.next; pos != &bc->waits; pos = pos->next)
		if (container_of(pos, struct fwait, link)->seq >= p->seq)
			wanted = true;
	if (!wanted && bc->bytes <= CACHE_MAX)
		return;
	bc->writing = true;
	p->io.type = p->data ? BS_WRITE : BS_ZERO;
	p->io.flags = p->data ? 0 : (p->flags & BS_F_MAY_TRIM);
	p->io.off = p->off;
	p->io.len = p->len;
	p->io.buf = p->data;
	p->io.cb = writeback_done;
	bs_submit(bc->inner, &p->io);
}

static void writeback_done(struct bs_io *io, int res)
{
	struct pend *p = container_of(io, struct pend, io);
	struct bs_crash *bc = p->bc;

	if (res < 0)
		/* the disk it plays has failed: the store below said so; the
		 * write stays cached and the flush waiting for it fails */
		log_warn("%s: write-back failed: %s", bc->name, strerror(-res));
	bc->writing = false;
	if (res < 0) {
		struct list *pos, *tmp;
		list_for_each_safe (pos, tmp, &bc->waits) {
			struct fwait *w = container_of(pos, struct fwait, link);
			list_del(pos);
			w->parent->cb(w->parent, res);
			free(w);
		}
		return;
	}
	list_del(&p->link);
	bc->applied = p->seq;
	bc->bytes -= p->len;
	bc->npend--;
	free(p->data);
	free(p);
	release_waits(bc);
	pump(bc);
}

static int cache_add(struct bs_crash *bc, struct bs_io *io)
{
	struct pend *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (io->type == BS_WRITE) {
		/* the write-back may go O_DIRECT: the store's alignment */
		if (posix_memalign((void **)&p->data, MAX(bc->inner->align, 64u), io->len)) {
			free(p);
			return -ENOMEM;
		}
		memcpy(p->data, io->buf, io->len);
	}
	p->bc = bc;
	p->seq = ++bc->seq;
	p->off = io->off;
	p->len = io->len;
	p->flags = io->flags;
	list_add_tail(&bc->pend, &p->link);
	bc->bytes += io->len;
	bc->npend++;
	return 0;
}

static int wait_for(struct bs_crash *bc, struct bs_io *parent)
{
	struct fwait *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->seq = bc->seq;
	w->parent = parent;
	list_add_tail(&bc->waits, &w->link);
	if (w->seq <= bc->applied)
		release_waits(bc);
	else
		pump(bc);
	return 0;
}

static void read_done(struct bs_io *io, int res)
{
	struct crd *d = container_of(io, struct crd, io);
	struct bs_io *parent = d->parent;
	struct bs_crash *bc = d->bc;

	if (res == 0) /* C3: the cache over the store, in completion order */
		for (struct list *pos = bc->pend.next; pos != &bc->pend; pos = pos->next) {
			struct pend *p = container_of(pos, struct pend, link);
			uint64_t a = MAX(p->off, parent->off);
			uint64_t b = MIN(p->off + p->len, parent->off + parent->len);
			if (a >= b)
				continue;
			if (p->data)
				memcpy((uint8_t *)parent->buf + (a - parent->off),
				       p->data + (a - p->off), b - a);
			else
				memset((uint8_t *)parent->buf + (a - parent->off), 0, b - a);
		}
	free(d);
	parent->done = res ? 0 : parent->len;
	parent->cb(parent, res);
}

static void crash_submit(struct bs *bs, struct bs_io *io)
{
	struct bs_crash *bc = container_of(bs, struct bs_crash, bs);
	int r;

	switch (io->type) {
	case BS_READ: {
		struct crd *d = calloc(1, sizeof(*d));
		if (!d) {
			bs_complete_later(bs->ev, io, -ENOMEM);
			return;
		}
		d->parent = io;
		d->bc = bc;
		d->io.type = BS_READ;
		d->io.flags = io->flags;
		d->io.off = io->off;
		d->io.len = io->len;
		d->io.buf = io->buf;
		d->io.cb = read_done;
		bs_submit(bc->inner, &d->io);
		return;
	}
	case BS_WRITE:
	case BS_TRIM:
	case BS_ZERO:
		r = cache_add(bc, io);
		if (r) {
			bs_complete_later(bs->ev, io, r);
			return;
		}
		count_point(bc, BS_CRASH_WRITE, io->type == BS_WRITE ? "data write" : "data zero",
			    -1, NULL, 0, 0);
		if (io->flags & BS_F_FUA) {
			r = wait_for(bc, io);
			if (r)
				bs_complete_later(bs->ev, io, r);
			return;
		}
		io->done = io->len;
		bs_complete_later(bs->ev, io, 0);
		pump(bc); /* past CACHE_MAX */
		return;
	case BS_FLUSH:
		count_point(bc, BS_CRASH_FLUSH, "data flush", -1, NULL, 0, 0);
		r = wait_for(bc, io);
		if (r)
			bs_complete_later(bs->ev, io, r);
		return;
	default: bs_complete_later(bs->ev, io, -EINVAL);
	}
}

static int crash_block_status(struct bs *bs, uint64_t off, uint64_t len, struct bs_extent *ext,
			      unsigned max, unsigned *n)
{
	struct bs_crash *bc = container_of(bs, struct bs_crash, bs);

	for (struct list *pos = bc->pend.next; pos != &bc->pend; pos = pos->next) {
		struct pend *p = container_of(pos, struct pend, link);
		if (p->off < off + len && off < p->off + p->len) {
			if (max < 1)
				return -EINVAL;
			ext[0].len = len; /* C3: cached data is data */
			ext[0].flags = 0;
			*n = 1;
			return 0;
		}
	}
	return bc->inner->ops->block_status(bc->inner, off, len, ext, max, n);
}

/* Shutdown only: everything cached goes to the store below, then its sync. */
static int crash_sync(struct bs *bs)
{
	struct bs_crash *bc = container_of(bs, struct bs_crash, bs);
	struct list *pos;
	unsigned i = 0;

	for (pos = bc->pend.next; pos != &bc->pend; pos = pos->next, i++) {
		struct pend *p = container_of(pos, struct pend, link);
		if (i == 0 && bc->writing)
			continue;
		if (put(bc->fd, p->data, p->off, p->len))
			return -EIO;
	}
	if (fdatasync(bc->fd) < 0)
		return -errno;
	posix_fadvise(bc->fd, 0, 0, POSIX_FADV_DONTNEED); /* (as in crash_now) */
	return bc->inner->ops->sync(bc->inner);
}

static void crash_close(struct bs *bs)
{
	struct bs_crash *bc = container_of(bs, struct bs_crash, bs);
	struct list *pos, *tmp;

	crash_sync(bs);
	list_for_each_safe (pos, tmp, &bc->pend) {
		struct pend *p = container_of(pos, struct pend, link);
		free(p->data);
		free(p);
	}
	close(bc->fd);
	bs_close(bc->inner);
	free(bc);
}

static const struct bs_ops bs_crash_ops = {
	.name = "crash",
	.submit = crash_submit,
	.block_status = crash_block_status,
	.sync = crash_sync,
	.close = crash_close,
};

int bs_crash_open(struct bs *inner, const char *path, const char *name, uint64_t seed, int kind,
		  unsigned crash_at, struct bs **out, struct crash_hook **hook)
{
	struct bs_crash *bc;

	if (!path || !path[0])
		return -EOPNOTSUPP; /* a RAM store has nothing a crash leaves */
	bc = calloc(1, sizeof(*bc));
	if (!bc)
		return -ENOMEM;
	bc->fd = open(path, O_WRONLY | O_CLOEXEC);
	if (bc->fd < 0) {
		int e = -errno;
		free(bc);
		return e;
	}
	bc->bs = *inner;
	bc->bs.ops = &bs_crash_ops;
	bc->inner = inner;
	bc->hook.point = hook_point;
	list_init(&bc->pend);
	list_init(&bc->waits);
	bc->rng = seed;
	bc->crash_at = crash_at;
	bc->kind = kind;
	snprintf(bc->name, sizeof(bc->name), "%s", name);
	*out = &bc->bs;
	*hook = &bc->hook;
	return 0;
}
