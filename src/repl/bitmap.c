/* Persistent change bitmap: see bitmap.h. Pages of 4 KiB of the bitmap are
 * the unit of writing; a flush writes every dirty page, then fdatasyncs, and
 * wakes the waiters that were queued before it started (group commit). */
#include "bitmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#define PAGE 4096u
#define WORDS_PER_PAGE (PAGE / 8u)

enum { P_CLEAN = 0, P_DIRTY = 1, P_FLUSHING = 2, P_FLUSHING_DIRTY = 3 };

struct bm_pop {
	struct ev_op op;
	struct bm *bm;
};

struct bm {
	struct ev_loop *ev;
	int fd;
	uint64_t file_off;
	uint64_t size, nbits, nwords, npages;
	unsigned shift;
	uint64_t *oos, *disk, *touched;
	uint8_t *pstate;
	uint64_t oos_count;
	/* flush machinery (B3) */
	bool flushing;
	unsigned writes_left;
	int flush_err;
	struct bm_pop *pops; /* one per page, used while that page is written */
	struct bm_pop sync_op;
	struct list wait_next, wait_cur;
	struct ev_deferred kick;
};

uint64_t bm_bytes_on_disk(uint64_t size, uint32_t granularity)
{
	uint64_t bits = (size + granularity - 1) / granularity;
	return ALIGN_UP((bits + 63) / 64 * 8, PAGE);
}

uint32_t bm_granularity(const struct bm *bm)
{
	return 1u << bm->shift;
}

uint64_t bm_nbits(const struct bm *bm)
{
	return bm->nbits;
}

uint64_t bm_words(const struct bm *bm)
{
	return bm->nwords;
}

static void flush_start(struct bm *bm);

static void kick_fn(struct ev_deferred *d)
{
	struct bm *bm = container_of(d, struct bm, kick);
	if (!bm->flushing)
		flush_start(bm);
}

static void page_dirty(struct bm *bm, uint64_t word)
{
	uint64_t p = word / WORDS_PER_PAGE;
	if (bm->pstate[p] == P_CLEAN)
		bm->pstate[p] = P_DIRTY;
	else if (bm->pstate[p] == P_FLUSHING)
		bm->pstate[p] = P_FLUSHING_DIRTY;
	ev_defer(bm->ev, &bm->kick);
}

int bm_open(struct ev_loop *ev, int fd, uint64_t off, uint64_t size, uint32_t granularity,
	    bool load, struct bm **out)
{
	struct bm *bm;
	uint64_t bytes = bm_bytes_on_disk(size, granularity);

	if (granularity < 4096 || (granularity & (granularity - 1)) || size == 0)
		return -EINVAL;
	bm = calloc(1, sizeof(*bm));
	if (!bm)
		return -ENOMEM;
	bm->ev = ev;
	bm->fd = fd;
	bm->file_off = off;
	bm->size = size;
	bm->shift = (unsigned)__builtin_ctz(granularity);
	bm->nbits = (size + granularity - 1) / granularity;
	bm->nwords = (bm->nbits + 63) / 64;
	bm->npages = bytes / PAGE;
	bm->disk = alloc_aligned(bytes);
	bm->oos = calloc(bm->nwords, 8);
	bm->touched = calloc(bm->nwords, 8);
	bm->pstate = calloc(bm->npages, 1);
	bm->pops = calloc(bm->npages, sizeof(*bm->pops));
	if (!bm->disk || !bm->oos || !bm->touched || !bm->pstate || !bm->pops) {
		bm_free(bm);
		return -ENOMEM;
	}
	memset(bm->disk, 0, bytes);
	list_init(&bm->wait_next);
	list_init(&bm->wait_cur);
	bm->kick.fn = kick_fn;
	if (load) {
		ssize_t k = pread(fd, bm->disk, bytes, (off_t)off);
		if (k < 0) {
			int e = -errno;
			bm_free(bm);
			return e;
		}
		/* A short read is an area never written: zeros. Bits past the end
		 * of the volume are ignored. */
		if ((uint64_t)k < bytes)
			memset((uint8_t *)bm->disk + k, 0, bytes - (uint64_t)k);
		if (bm->nbits % 64)
			bm->disk[bm->nwords - 1] &= (1ull << (bm->nbits % 64)) - 1;
		for (uint64_t i = bm->nwords; i < bytes / 8; i++)
			bm->disk[i] = 0;
		memcpy(bm->oos, bm->disk, bm->nwords * 8);
		for (uint64_t i = 0; i < bm->nwords; i++)
			bm->oos_count += (uint64_t)__builtin_popcountll(bm->oos[i]);
	}
	*out = bm;
	return 0;
}

void bm_free(struct bm *bm)
{
	if (!bm)
		return;
	ev_undefer(bm->ev, &bm->kick);
	free(bm->disk);
	free(bm->oos);
	free(bm->touched);
	free(bm->pstate);
	free(bm->pops);
	free(bm);
}

/* Chunk range [first, last] touched by [off, off+len), len > 0. */
static void chunks(const struct bm *bm, uint64_t off, uint64_t len, uint64_t *first,
		   uint64_t *last)
{
	*first = off >> bm->shift;
	*last = (off + len - 1) >> bm->shift;
	if (*last >= bm->nbits)
		*last = bm->nbits - 1;
}

/* Calls fn(word index, mask) for each word of bit range [a, b]. */
#define FOR_WORDS(a, b, w, mask, body)                                          \
	do {                                                                    \
		for (uint64_t w = (a) / 64; w <= (b) / 64; w++) {               \
			uint64_t lo_ = w == (a) / 64 ? (a) % 64 : 0;             \
			uint64_t hi_ = w == (b) / 64 ? (b) % 64 : 63;            \
			uint64_t mask = (hi_ == 63 ? ~0ull : ((1ull << (hi_ + 1)) - 1)) & \
					~((1ull << lo_) - 1);                   \
			body;                                                   \
		}                                                               \
	} while (0)

bool bm_intent(struct bm *bm, uint64_t off, uint64_t len, struct bm_waiter *w)
{
	uint64_t a, b;
	int need = 0; /* 0 durable, 1 wait for the next flush, 2 the current one */

	if (len == 0)
		return true;
	chunks(bm, off, len, &a, &b);
	FOR_WORDS(a, b, i, m, {
		bm->touched[i] |= m;
		if ((bm->disk[i] & m) != m) {
			bm->disk[i] |= m;
			page_dirty(bm, i);
		}
		uint8_t st = bm->pstate[i / WORDS_PER_PAGE];
		if (st == P_DIRTY || st == P_FLUSHING_DIRTY)
			need = 1;
		else if (st == P_FLUSHING && need == 0)
			need = 2;
	});
	if (need == 0)
		return true;
	list_add_tail(need == 1 ? &bm->wait_next : &bm->wait_cur, &w->link);
	return false;
}

void bm_set_oos(struct bm *bm, uint64_t off, uint64_t len)
{
	uint64_t a, b;

	if (len == 0)
		return;
	chunks(bm, off, len, &a, &b);
	FOR_WORDS(a, b, i, m, {
		bm->oos_count += (uint64_t)__builtin_popcountll(m & ~bm->oos[i]);
		bm->oos[i] |= m;
		if ((bm->disk[i] & m) != m) {
			bm->disk[i] |= m;
			page_dirty(bm, i);
		}
	});
}

void bm_set_all(struct bm *bm)
{
	bm_set_oos(bm, 0, bm->size);
}

void bm_merge_words(struct bm *bm, uint64_t start, const uint64_t *words, uint32_t n)
{
	for (uint32_t k = 0; k < n && start + k < bm->nwords; k++) {
		uint64_t i = start + k, m = words[k];
		if (i == bm->nwords - 1 && bm->nbits % 64)
			m &= (1ull << (bm->nbits % 64)) - 1;
		bm->oos_count += (uint64_t)__builtin_popcountll(m & ~bm->oos[i]);
		bm->oos[i] |= m;
		if ((bm->disk[i] & m) != m) {
			bm->disk[i] |= m;
			page_dirty(bm, i);
		}
	}
}

void bm_clear_oos(struct bm *bm, uint64_t off, uint64_t len)
{
	uint64_t gran = 1ull << bm->shift, end = off + len, a, b;

	a = (off + gran - 1) >> bm->shift;
	b = end >= bm->size ? bm->nbits : end >> bm->shift; /* exclusive */
	if (a >= b)
		return;
	b--;
	FOR_WORDS(a, b, i, m, {
		bm->oos_count -= (uint64_t)__builtin_popcountll(m & bm->oos[i]);
		bm->oos[i] &= ~m;
	});
}

void bm_clear_all_oos(struct bm *bm)
{
	memset(bm->oos, 0, bm->nwords * 8);
	bm->oos_count = 0;
}

bool bm_test_oos(const struct bm *bm, uint64_t chunk)
{
	return chunk < bm->nbits && (bm->oos[chunk / 64] >> (chunk % 64)) & 1;
}

uint64_t bm_oos_count(const struct bm *bm)
{
	return bm->oos_count;
}

uint64_t bm_disk_word(const struct bm *bm, uint64_t i)
{
	return i < bm->nwords ? bm->disk[i] : 0;
}

int64_t bm_next_oos(const struct bm *bm, uint64_t from)
{
	if (bm->oos_count == 0)
		return -1;
	if (from >= bm->nbits)
		from = 0;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t i = from / 64;
		uint64_t w = bm->oos[i] & (~0ull << (from % 64));
		for (;;) {
			if (w)
				return (int64_t)(i * 64 + (uint64_t)__builtin_ctzll(w));
			if (++i >= bm->nwords)
				break;
			w = bm->oos[i];
		}
		from = 0;
	}
	return -1;
}

void bm_mark_range(uint64_t *words, const struct bm *bm, uint64_t off, uint64_t len)
{
	uint64_t a, b;
	if (len == 0)
		return;
	chunks(bm, off, len, &a, &b);
	FOR_WORDS(a, b, i, m, { words[i] |= m; });
}

uint64_t bm_clean_prepare(struct bm *bm, const uint64_t *busy, uint64_t *cand)
{
	uint64_t n = 0;
	for (uint64_t i = 0; i < bm->nwords; i++) {
		cand[i] = bm->disk[i] & ~(bm->oos[i] | bm->touched[i] | busy[i]);
		bm->touched[i] = 0;
		n += (uint64_t)__builtin_popcountll(cand[i]);
	}
	return n;
}

void bm_clean_commit(struct bm *bm, const uint64_t *cand)
{
	for (uint64_t i = 0; i < bm->nwords; i++) {
		uint64_t m = cand[i] & ~(bm->oos[i] | bm->touched[i]) & bm->disk[i];
		if (m) {
			bm->disk[i] &= ~m;
			page_dirty(bm, i);
		}
	}
}

/* ---- flushing ---- */

static void wake(struct list *l, int err)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, l) {
		struct bm_waiter *w = container_of(pos, struct bm_waiter, link);
		list_del(pos);
		w->cb(w, err);
	}
}

static void flush_done(struct bm *bm)
{
	int err = bm->flush_err;

	for (uint64_t p = 0; p < bm->npages; p++) {
		if (bm->pstate[p] == P_FLUSHING)
			bm->pstate[p] = err ? P_DIRTY : P_CLEAN;
		else if (bm->pstate[p] == P_FLUSHING_DIRTY)
			bm->pstate[p] = P_DIRTY;
	}
	bm->flushing = false;
	if (err)
		log_err("change bitmap: write failed: %s", strerror(-err));
	{
		struct list cur;
		list_init(&cur);
		list_splice_tail(&cur, &bm->wait_cur);
		wake(&cur, err);
	}
	/* After a failed write, only new waiters retry (no busy loop on a dead disk). */
	for (uint64_t p = 0; p < bm->npages && !err; p++)
		if (bm->pstate[p] == P_DIRTY) {
			ev_defer(bm->ev, &bm->kick);
			break;
		}
	if (!list_empty(&bm->wait_next))
		ev_defer(bm->ev, &bm->kick);
}

static void sync_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct bm_pop *po = container_of(op, struct bm_pop, op);
	(void)flags;
	if (res < 0 && !po->bm->flush_err)
		po->bm->flush_err = res;
	flush_done(po->bm);
}

static void write_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct bm_pop *po = container_of(op, struct bm_pop, op);
	struct bm *bm = po->bm;
	(void)flags;
	if (res != (int)PAGE && !bm->flush_err)
		bm->flush_err = res < 0 ? res : -EIO;
	if (--bm->writes_left)
		return;
	bm->sync_op.bm = bm;
	bm->sync_op.op.cb = sync_cb;
	io_uring_prep_fsync(ev_sqe(bm->ev, &bm->sync_op.op), bm->fd, IORING_FSYNC_DATASYNC);
}

static void flush_start(struct bm *bm)
{
	unsigned n = 0;

	bm->flush_err = 0;
	for (uint64_t p = 0; p < bm->npages; p++) {
		if (bm->pstate[p] != P_DIRTY)
			continue;
		bm->pstate[p] = P_FLUSHING;
		bm->pops[p].bm = bm;
		bm->pops[p].op.cb = write_cb;
		io_uring_prep_write(ev_sqe(bm->ev, &bm->pops[p].op), bm->fd,
				    (uint8_t *)bm->disk + p * PAGE, PAGE, bm->file_off + p * PAGE);
		n++;
	}
	list_splice_tail(&bm->wait_cur, &bm->wait_next);
	if (n == 0) {
		/* Nothing dirty: the waiters' bits are durable already. */
		struct list cur;
		list_init(&cur);
		list_splice_tail(&cur, &bm->wait_cur);
		wake(&cur, 0);
		return;
	}
	bm->flushing = true;
	bm->writes_left = n;
}

void bm_flush(struct bm *bm, struct bm_waiter *w)
{
	if (w)
		list_add_tail(&bm->wait_next, &w->link);
	ev_defer(bm->ev, &bm->kick);
}

bool bm_busy(const struct bm *bm)
{
	return bm->flushing || !list_empty(&bm->wait_next) || !list_empty(&bm->wait_cur);
}

int bm_sync(struct bm *bm)
{
	for (uint64_t p = 0; p < bm->npages; p++) {
		if (bm->pstate[p] == P_CLEAN)
			continue;
		if (pwrite(bm->fd, (uint8_t *)bm->disk + p * PAGE, PAGE,
			   (off_t)(bm->file_off + p * PAGE)) != (ssize_t)PAGE)
			return -EIO;
		if (bm->pstate[p] == P_DIRTY)
			bm->pstate[p] = P_CLEAN;
	}
	return fdatasync(bm->fd) < 0 ? -errno : 0;
}
