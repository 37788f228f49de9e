/* Persistent change bitmap and activity log: see bitmap.h. Pages of 4 KiB of
 * either area are the unit of writing; a flush writes every dirty page, then
 * fdatasyncs, and wakes the waiters queued before it started (group commit).
 * Page numbers: [0, al_pages) are AL pages, the rest bitmap pages. */
#include "../common/crash.h"
#include "bitmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#define PAGE 4096u
#define BM_LAZY_NS (1000000000ull) /* B7: a covered change bit waits at most this */
#define WORDS_PER_PAGE (PAGE / 8u)

enum { P_CLEAN = 0, P_DIRTY = 1, P_FLUSHING = 2, P_FLUSHING_DIRTY = 3 };

struct bm_pop {
	struct ev_op op;
	struct bm *bm;
};

struct bm {
	struct ev_loop *ev;
	int fd;
	struct crash_hook *const *crash; /* tests: the metadata file's crash hook */
	uint64_t file_off, al_off;
	uint64_t size, nbits, nwords, bm_pages;
	uint64_t al_words, al_pages, npages;
	unsigned shift;
	uint64_t *oos, *disk, *touched, *al;
	uint64_t *cand, *cand_al;
	uint64_t *al_hold; /* extents that gained a change bit since prepare */
	uint64_t *al_dur;  /* AL bits durable as set on disk (B5) */
	uint64_t *al_snap; /* AL words as the flush in flight writes them */
	uint64_t *al_used; /* AL extents written to since they entered it (B6) */
	uint64_t seq_end, seq_run; /* the sequential run of intents (B6) */
	uint8_t *pstate;
	uint64_t oos_count;
	/* flush machinery (B4) */
	bool flushing;
	unsigned writes_left;
	int flush_err;
	struct bm_pop *pops; /* one per page, used while that page is written */
	struct bm_pop sync_op;
	struct list wait_next, wait_cur;
	struct ev_deferred kick;
	bool urgent;          /* a dirty page holds a change the AL does not cover */
	struct ev_timer lazy; /* writes the other dirty pages (B7) */
	/* clean: the stage after the bitmap write */
	struct bm_waiter clean_w;
	struct bm_waiter *clean_user;
};

uint64_t bm_bytes_on_disk(uint64_t size, uint32_t granularity)
{
	uint64_t bits = (size + granularity - 1) / granularity;
	return ALIGN_UP((bits + 63) / 64 * 8, PAGE);
}

void bm_set_crash(struct bm *bm, struct crash_hook *const *hook)
{
	bm->crash = hook;
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

static void lazy_fn(struct ev_timer *t)
{
	struct bm *bm = container_of(t, struct bm, lazy);
	ev_defer(bm->ev, &bm->kick);
}

/* Page p changed; urgent: flush now, else within BM_LAZY_NS (B7). */
static void page_mark_as(struct bm *bm, uint64_t p, bool urgent)
{
	if (bm->pstate[p] == P_CLEAN)
		bm->pstate[p] = P_DIRTY;
	else if (bm->pstate[p] == P_FLUSHING)
		bm->pstate[p] = P_FLUSHING_DIRTY;
	if (urgent) {
		bm->urgent = true;
		ev_defer(bm->ev, &bm->kick);
	} else if (!bm->lazy.armed) {
		ev_timer_arm(bm->ev, &bm->lazy, BM_LAZY_NS);
	}
}

static void page_mark(struct bm *bm, uint64_t p)
{
	page_mark_as(bm, p, true);
}

/* Bitmap word i changed. */
static void word_dirty(struct bm *bm, uint64_t i)
{
	page_mark(bm, bm->al_pages + i / WORDS_PER_PAGE);
}

/* Extent i (bitmap word i) is in the AL on disk, and stays there until its
 * change bits are (B3). */
static bool al_covers(const struct bm *bm, uint64_t i)
{
	return (bm->al[i / 64] & bm->al_dur[i / 64]) >> (i % 64) & 1;
}

/* AL word j (bits for extents 64j..64j+63) changed. */
static void al_dirty(struct bm *bm, uint64_t j)
{
	page_mark(bm, j / WORDS_PER_PAGE);
}

static void *page_mem(struct bm *bm, uint64_t p)
{
	return p < bm->al_pages ? (uint8_t *)bm->al + p * PAGE :
				  (uint8_t *)bm->disk + (p - bm->al_pages) * PAGE;
}

static uint64_t page_off(struct bm *bm, uint64_t p)
{
	return p < bm->al_pages ? bm->al_off + p * PAGE : bm->file_off + (p - bm->al_pages) * PAGE;
}

static int read_area(int fd, void *buf, uint64_t len, uint64_t off)
{
	ssize_t k = pread(fd, buf, len, (off_t)off);
	if (k < 0)
		return -errno;
	/* A short read is an area never written: zeros. */
	if ((uint64_t)k < len)
		memset((uint8_t *)buf + k, 0, len - (uint64_t)k);
	return 0;
}

static void recount(struct bm *bm)
{
	bm->oos_count = 0;
	for (uint64_t i = 0; i < bm->nwords; i++)
		bm->oos_count += (uint64_t)__builtin_popcountll(bm->oos[i]);
}

static uint64_t last_word_mask(const struct bm *bm)
{
	return bm->nbits % 64 ? (1ull << (bm->nbits % 64)) - 1 : ~0ull;
}

int bm_open(struct ev_loop *ev, int fd, uint64_t al_off, uint64_t al_bytes, uint64_t off,
	    uint64_t size, uint32_t granularity, bool load, bool crashed, struct bm **out)
{
	struct bm *bm;
	uint64_t bytes = bm_bytes_on_disk(size, granularity);
	int r;

	if (granularity < 4096 || (granularity & (granularity - 1)) || size == 0)
		return -EINVAL;
	bm = calloc(1, sizeof(*bm));
	if (!bm)
		return -ENOMEM;
	bm->ev = ev;
	bm->fd = fd;
	bm->file_off = off;
	bm->al_off = al_off;
	bm->size = size;
	bm->shift = (unsigned)__builtin_ctz(granularity);
	bm->nbits = (size + granularity - 1) / granularity;
	bm->nwords = (bm->nbits + 63) / 64;
	bm->bm_pages = bytes / PAGE;
	bm->al_words = (bm->nwords + 63) / 64;
	bm->al_pages = ALIGN_UP(bm->al_words * 8, PAGE) / PAGE;
	bm->npages = bm->al_pages + bm->bm_pages;
	if (bm->al_pages * PAGE > al_bytes) {
		free(bm);
		return -ENOSPC;
	}
	bm->disk = alloc_aligned(bytes);
	bm->al = alloc_aligned(bm->al_pages * PAGE);
	bm->oos = calloc(bm->nwords, 8);
	bm->touched = calloc(bm->nwords, 8);
	bm->cand = calloc(bm->nwords, 8);
	bm->cand_al = calloc(bm->al_words, 8);
	bm->al_hold = calloc(bm->al_words, 8);
	bm->al_dur = calloc(bm->al_pages * WORDS_PER_PAGE, 8);
	bm->al_snap = calloc(bm->al_pages * WORDS_PER_PAGE, 8);
	bm->al_used = calloc(bm->al_words, 8);
	bm->pstate = calloc(bm->npages, 1);
	bm->pops = calloc(bm->npages, sizeof(*bm->pops));
	if (!bm->disk || !bm->al || !bm->oos || !bm->touched || !bm->cand || !bm->cand_al ||
	    !bm->al_hold || !bm->al_dur || !bm->al_snap || !bm->al_used || !bm->pstate || !bm->pops) {
		bm_free(bm);
		return -ENOMEM;
	}
	memset(bm->disk, 0, bytes);
	memset(bm->al, 0, bm->al_pages * PAGE);
	list_init(&bm->wait_next);
	list_init(&bm->wait_cur);
	bm->kick.fn = kick_fn;
	bm->lazy.fn = lazy_fn;
	if (load) {
		if ((r = read_area(fd, bm->disk, bytes, off)) ||
		    (r = read_area(fd, bm->al, bm->al_pages * PAGE, al_off))) {
			bm_free(bm);
			return r;
		}
		/* Bits past the end of the volume are ignored. */
		bm->disk[bm->nwords - 1] &= last_word_mask(bm);
		for (uint64_t i = bm->nwords; i < bytes / 8; i++)
			bm->disk[i] = 0;
		for (uint64_t j = bm->al_words; j < bm->al_pages * PAGE / 8; j++)
			bm->al[j] = 0;
		if (crashed) {
			/* Writes may have been in flight anywhere in an active extent. */
			for (uint64_t i = 0; i < bm->nwords; i++)
				if ((bm->al[i / 64] >> (i % 64)) & 1) {
					uint64_t m = i == bm->nwords - 1 ? last_word_mask(bm) : ~0ull;
					if ((bm->disk[i] & m) != m) {
						bm->disk[i] |= m;
						word_dirty(bm, i);
					}
				}
			/* the extents stay in the AL, as they are on disk */
			memcpy(bm->al_dur, bm->al, bm->al_words * 8);
			memcpy(bm->al_used, bm->al, bm->al_words * 8);
		} else if (bm->al_words) {
			for (uint64_t j = 0; j < bm->al_words; j++)
				if (bm->al[j]) {
					bm->al[j] = 0;
					al_dirty(bm, j);
				}
		}
		memcpy(bm->oos, bm->disk, bm->nwords * 8);
		recount(bm);
	}
	*out = bm;
	return 0;
}

void bm_free(struct bm *bm)
{
	if (!bm)
		return;
	ev_undefer(bm->ev, &bm->kick);
	ev_timer_cancel(bm->ev, &bm->lazy);
	free(bm->disk);
	free(bm->al);
	free(bm->oos);
	free(bm->touched);
	free(bm->cand);
	free(bm->cand_al);
	free(bm->al_hold);
	free(bm->al_dur);
	free(bm->al_snap);
	free(bm->al_used);
	free(bm->pstate);
	free(bm->pops);
	free(bm);
}

/* Region range [first, last] touched by [off, off+len), len > 0. */
static void regions(const struct bm *bm, uint64_t off, uint64_t len, uint64_t *first,
		    uint64_t *last)
{
	*first = off >> bm->shift;
	*last = (off + len - 1) >> bm->shift;
	if (*last >= bm->nbits)
		*last = bm->nbits - 1;
	if (*first > *last)
		*first = *last;
}

/* Runs body for each word w of bit range [a, b] with mask the bits in it. */
#define FOR_WORDS(a, b, w, mask, ...)                                          \
	do {                                                                    \
		for (uint64_t w = (a) / 64; w <= (b) / 64; w++) {               \
			uint64_t lo_ = w == (a) / 64 ? (a) % 64 : 0;             \
			uint64_t hi_ = w == (b) / 64 ? (b) % 64 : 63;            \
			uint64_t mask = (hi_ == 63 ? ~0ull : ((1ull << (hi_ + 1)) - 1)) & \
					~((1ull << lo_) - 1);                   \
			__VA_ARGS__;                                            \
		}                                                               \
	} while (0)

/* Extents of a sequential run set ahead of it at most (B6). */
#define AL_AHEAD_MAX (64ull << 20)

/* B6: a run of sequential writes gets the AL bits of the extents ahead of it
 * set now, flushed in the background, so that it finds them durable when it
 * gets there instead of waiting for one AL write per extent. The window
 * starts once the run spans two extents, is four times the run (up to
 * AL_AHEAD_MAX bytes) and is topped up once the run is past half of it: one
 * AL write per half window. */
static void al_ahead(struct bm *bm, uint64_t off, uint64_t len)
{
	uint64_t ext_shift = bm->shift + 6, last, win, end, mid;
	bool dirty = false;

	bm->seq_run = off == bm->seq_end ? bm->seq_run + len : len;
	bm->seq_end = off + len;
	if (bm->seq_run < (2ull << ext_shift))
		return;
	last = (off + len - 1) >> ext_shift;
	win = MIN(bm->seq_run * 4, AL_AHEAD_MAX) >> ext_shift;
	if (win == 0)
		win = 1;
	end = MIN(last + win, bm->nwords - 1);
	mid = last + (win + 1) / 2;
	if (end <= last || (mid <= end && ((bm->al[mid / 64] >> (mid % 64)) & 1)))
		return; /* at the end of the volume, or still inside the window */
	for (uint64_t i = last + 1; i <= end; i++) {
		uint64_t j = i / 64, bit = 1ull << (i % 64);
		bm->al_hold[j] |= bit; /* kept through the next clean round */
		if (!(bm->al[j] & bit)) {
			bm->al[j] |= bit;
			dirty = true;
		}
	}
	if (dirty)
		for (uint64_t j = (last + 1) / 64; j <= end / 64; j++)
			al_dirty(bm, j);
}

bool bm_intent(struct bm *bm, uint64_t off, uint64_t len, struct bm_waiter *w)
{
	uint64_t a, b;
	int need = 0; /* 0 durable, 1 wait for the next flush, 2 the current one */

	if (len == 0)
		return true;
	regions(bm, off, len, &a, &b);
	FOR_WORDS(a, b, i, m, {
		uint64_t j = i / 64, bit = 1ull << (i % 64);
		uint8_t st = bm->pstate[j / WORDS_PER_PAGE];
		bm->touched[i] |= m;
		bm->al_used[j] |= bit;
		if ((bm->al[j] & bit) && (bm->al_dur[j] & bit))
			continue; /* B5: durable, whatever else the page waits for */
		if ((bm->al[j] & bit) && (bm->al_snap[j] & bit) &&
		    (st == P_FLUSHING || st == P_FLUSHING_DIRTY)) {
			need = need ? need : 2; /* in the flush in flight */
			continue;
		}
		if (!(bm->al[j] & bit)) {
			bm->al[j] |= bit;
			al_dirty(bm, j);
		}
		need = 1;
	});
	al_ahead(bm, off, len);
	if (need == 0)
		return true;
	list_add_tail(need == 1 ? &bm->wait_next : &bm->wait_cur, &w->link);
	if (need == 1)
		ev_defer(bm->ev, &bm->kick); /* also after a failed flush left pages dirty */
	return false;
}

static void or_word(struct bm *bm, uint64_t i, uint64_t m)
{
	/* B3: an extent that gains a change bit stays in the AL this round. */
	bm->al_hold[i / 64] |= 1ull << (i % 64);
	bm->oos_count += (uint64_t)__builtin_popcountll(m & ~bm->oos[i]);
	bm->oos[i] |= m;
	if ((bm->disk[i] & m) != m) {
		bm->disk[i] |= m;
		/* B7: the AL covers the bit until it is on disk */
		page_mark_as(bm, bm->al_pages + i / WORDS_PER_PAGE, !al_covers(bm, i));
	}
}

void bm_set_oos(struct bm *bm, uint64_t off, uint64_t len)
{
	uint64_t a, b;

	if (len == 0)
		return;
	regions(bm, off, len, &a, &b);
	FOR_WORDS(a, b, i, m, { or_word(bm, i, m); });
}

void bm_al_to_oos(struct bm *bm)
{
	/* B6: extents of a window that no write reached hold nothing new */
	for (uint64_t i = 0; i < bm->nwords; i++)
		if (((bm->al[i / 64] & bm->al_used[i / 64]) >> (i % 64)) & 1)
			or_word(bm, i, i == bm->nwords - 1 ? last_word_mask(bm) : ~0ull);
}

void bm_set_all(struct bm *bm)
{
	bm_set_oos(bm, 0, bm->size);
}

void bm_merge_words(struct bm *bm, uint64_t start, const uint64_t *words, uint32_t n)
{
	for (uint32_t k = 0; k < n && start + k < bm->nwords; k++) {
		uint64_t i = start + k, m = words[k];
		if (i == bm->nwords - 1)
			m &= last_word_mask(bm);
		if (m)
			or_word(bm, i, m);
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

bool bm_disk_marks(const struct bm *bm)
{
	for (uint64_t i = 0; i < bm->nwords; i++)
		if (bm->disk[i])
			return true;
	return false;
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
	regions(bm, off, len, &a, &b);
	FOR_WORDS(a, b, i, m, { words[i] |= m; });
}

uint64_t bm_clean_prepare(struct bm *bm, const uint64_t *busy)
{
	uint64_t n = 0;

	memset(bm->cand_al, 0, bm->al_words * 8);
	for (uint64_t i = 0; i < bm->nwords; i++) {
		bm->cand[i] = bm->disk[i] & ~(bm->oos[i] | bm->touched[i] | busy[i]);
		n += (uint64_t)__builtin_popcountll(bm->cand[i]);
		if (((bm->al[i / 64] >> (i % 64)) & 1) && !bm->touched[i] && !busy[i] &&
		    !((bm->al_hold[i / 64] >> (i % 64)) & 1)) {
			bm->cand_al[i / 64] |= 1ull << (i % 64);
			n++;
		}
		bm->touched[i] = 0;
	}
	memset(bm->al_hold, 0, bm->al_words * 8);
	return n;
}

bool bm_al_empty(const struct bm *bm)
{
	for (uint64_t j = 0; j < bm->al_words; j++)
		if (bm->al[j])
			return false;
	return true;
}

static void clean_al(struct bm_waiter *w, int err)
{
	struct bm *bm = container_of(w, struct bm, clean_w);
	struct bm_waiter *user = bm->clean_user;

	bm->clean_user = NULL;
	/* B3: the change bits are durable now; extents untouched since prepare
	 * (a write in flight sets touched when it starts) leave the AL. */
	if (!err) {
		for (uint64_t j = 0; j < bm->al_words; j++) {
			uint64_t m = bm->cand_al[j] & ~bm->al_hold[j];
			for (uint64_t k = 0; m && k < 64; k++) {
				uint64_t i = j * 64 + k;
				if (((m >> k) & 1) && i < bm->nwords && bm->touched[i])
					m &= ~(1ull << k);
			}
			m &= bm->al[j];
			if (m) {
				bm->al[j] &= ~m;
				bm->al_dur[j] &= ~m;
				bm->al_used[j] &= ~m;
				al_dirty(bm, j);
			}
		}
	}
	if (user)
		user->cb(user, err);
}

void bm_clean_commit(struct bm *bm, struct bm_waiter *w)
{
	for (uint64_t i = 0; i < bm->nwords; i++) {
		uint64_t m = bm->cand[i] & ~(bm->oos[i] | bm->touched[i]) & bm->disk[i];
		if (m) {
			bm->disk[i] &= ~m;
			word_dirty(bm, i);
		}
	}
	bm->clean_user = w;
	bm->clean_w.cb = clean_al;
	bm_flush(bm, &bm->clean_w);
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
	struct list cur;

	for (uint64_t p = 0; p < bm->npages; p++) {
		if (bm->pstate[p] != P_FLUSHING && bm->pstate[p] != P_FLUSHING_DIRTY)
			continue;
		if (!err && p < bm->al_pages)
			/* B5: what the snapshot had set is on disk now; AL bits
			 * are cleared only while no flush is in flight. */
			for (uint64_t j = p * WORDS_PER_PAGE; j < (p + 1) * WORDS_PER_PAGE; j++)
				bm->al_dur[j] = bm->al_snap[j] & bm->al[j];
		if (bm->pstate[p] == P_FLUSHING)
			bm->pstate[p] = err ? P_DIRTY : P_CLEAN;
		else
			bm->pstate[p] = P_DIRTY;
	}
	bm->flushing = false;
	if (err)
		log_err("change bitmap: write failed: %s", strerror(-err));
	list_init(&cur);
	list_splice_tail(&cur, &bm->wait_cur);
	wake(&cur, err);
	/* After a failed write, only new waiters retry (no busy loop on a dead
	 * disk). Pages dirtied during the flush go now if a change needs it. */
	for (uint64_t p = 0; p < bm->npages && !err; p++)
		if (bm->pstate[p] == P_DIRTY) {
			if (bm->urgent)
				ev_defer(bm->ev, &bm->kick);
			else if (!bm->lazy.armed)
				ev_timer_arm(bm->ev, &bm->lazy, BM_LAZY_NS);
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
	bm->urgent = false; /* every dirty page goes now */
	ev_timer_cancel(bm->ev, &bm->lazy);
	for (uint64_t p = 0; p < bm->npages; p++) {
		if (bm->pstate[p] != P_DIRTY)
			continue;
		bm->pstate[p] = P_FLUSHING;
		if (p < bm->al_pages)
			memcpy(bm->al_snap + p * WORDS_PER_PAGE, page_mem(bm, p), PAGE);
		if (bm->crash) {
			/* a fault loop's failure: the flush reports it */
			int e = crash_point(*bm->crash, "bitmap page write", bm->fd,
					    page_mem(bm, p), PAGE, page_off(bm, p));
			if (e && !bm->flush_err)
				bm->flush_err = e;
		}
		bm->pops[p].bm = bm;
		bm->pops[p].op.cb = write_cb;
		io_uring_prep_write(ev_sqe(bm->ev, &bm->pops[p].op), bm->fd, page_mem(bm, p), PAGE,
				    page_off(bm, p));
		n++;
	}
	list_splice_tail(&bm->wait_cur, &bm->wait_next);
	if (n == 0) {
		/* Nothing dirty: what the waiters need is durable already. */
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
	return bm->flushing || !list_empty(&bm->wait_next) || !list_empty(&bm->wait_cur) ||
	       bm->clean_user;
}

static int write_pages(struct bm *bm)
{
	for (uint64_t p = 0; p < bm->npages; p++) {
		if (bm->pstate[p] == P_CLEAN)
			continue;
		if (bm->crash) {
			int e = crash_point(*bm->crash, "bitmap page write", bm->fd,
					    page_mem(bm, p), PAGE, page_off(bm, p));
			if (e)
				return e;
		}
		if (pwrite(bm->fd, page_mem(bm, p), PAGE, (off_t)page_off(bm, p)) != (ssize_t)PAGE)
			return -EIO;
		bm->pstate[p] = P_CLEAN;
	}
	return fdatasync(bm->fd) < 0 ? -errno : 0;
}

int bm_sync(struct bm *bm)
{
	int r = write_pages(bm);

	if (r)
		return r;
	/* Every change bit is on disk: the AL has nothing left to cover. */
	for (uint64_t j = 0; j < bm->al_words; j++)
		if (bm->al[j]) {
			bm->al[j] = 0;
			bm->al_used[j] = 0;
			al_dirty(bm, j);
		}
	ev_undefer(bm->ev, &bm->kick);
	ev_timer_cancel(bm->ev, &bm->lazy);
	bm->urgent = false;
	r = write_pages(bm);
	if (!r)
		memcpy(bm->al_dur, bm->al, bm->al_words * 8);
	return r;
}
