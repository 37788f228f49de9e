/* The persistent change bitmap and its activity log (src/bm/bitmap.c) on a
 * real event loop and a temp file laid out like the metadata file (AL at
 * 8 KiB, bitmap at 1 MiB). The write-intent rule (B2) is checked where it
 * matters: inside the waiter's callback, which reads the AL from the file
 * with pread and records whether its extent's bit was there. The loop is
 * driven with ev_run_once until callbacks fire (no sleeps). Out-of-sync
 * accounting, lazy cleaning of change bits and AL bits (B3), reload after a
 * clean stop or a crash, and the synchronous shutdown path are all checked
 * against the bytes in the file. */
#include "unit.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "../../include/proto/ondisk.h"
#include "../../src/common/util.h"
#include "../../src/ev/ev.h"
#include "../../src/bm/bitmap.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)
#define GIB (1024ull * MIB)
#define AL_OFF ((uint64_t)TANDEM_MD_AL_OFFSET)
#define AL_BYTES ((uint64_t)TANDEM_MD_META_OFFSET - TANDEM_MD_AL_OFFSET)
#define BM_OFF ((uint64_t)TANDEM_MD_BITMAP_OFFSET)
/* A pass that only runs deferred work (a flush with nothing to write wakes its
 * waiters there) still sleeps for its timeout afterwards: keep it short. */
#define PASS_NS (10ull * 1000 * 1000)
#define MAX_PASSES 100000

/* Bits in one 4 KiB page: regions per bitmap page, extents per AL page. */
#define PAGE_BITS (4096ull * 8)
/* 3 bitmap pages at 4 KiB granularity (one AL page) */
#define SIZE_3PAGES (3 * PAGE_BITS * 4096)
/* 3 AL pages at 4 KiB granularity: 3 * 32768 extents of 64 regions */
#define SIZE_3AL (3 * PAGE_BITS * 64 * 4096)

struct fx {
	struct ev_loop *ev;
	char *dir;
	char path[512];
	int fd, ro_fd;
	struct bm *bm;  /* the open one: teardown frees it when a test failed */
	unsigned order; /* callbacks run so far */
};

struct tw {
	struct bm_waiter w;
	struct fx *f;
	uint64_t region; /* its extent's AL bit is read from the file in the callback */
	int calls, err;
	unsigned order;
	bool on_disk;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->ev = ev_new(64);
	assert_non_null(f->ev);
	f->dir = unit_mkdtemp("bitmap");
	snprintf(f->path, sizeof(f->path), "%s/md", f->dir);
	f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(f->fd >= 0);
	f->ro_fd = -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	bm_free(f->bm);
	if (f->ro_fd >= 0)
		close(f->ro_fd);
	close(f->fd);
	ev_free(f->ev);
	unit_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static uint64_t read_word(int fd, uint64_t off)
{
	uint64_t w = 0;
	ssize_t k = pread(fd, &w, 8, (off_t)off);

	assert_true(k == 0 || k == 8); /* 0: never written */
	return le64toh(w);
}

/* Bitmap word i and AL word j as they are in the file. */
static uint64_t file_word(int fd, uint64_t i)
{
	return read_word(fd, BM_OFF + i * 8);
}

static uint64_t file_al_word(int fd, uint64_t j)
{
	return read_word(fd, AL_OFF + j * 8);
}

static bool file_bit(int fd, uint64_t region)
{
	return (file_word(fd, region / 64) >> (region % 64)) & 1;
}

/* The AL bit of the extent that holds region. */
static bool file_al_bit(int fd, uint64_t region)
{
	uint64_t extent = region / 64;
	return (file_al_word(fd, extent / 64) >> (extent % 64)) & 1;
}

static void put_word(int fd, uint64_t off, uint64_t w)
{
	w = htole64(w);
	assert_int_equal(pwrite(fd, &w, 8, (off_t)off), 8);
}

static void tw_cb(struct bm_waiter *w, int err)
{
	struct tw *t = container_of(w, struct tw, w);

	t->calls++;
	t->err = err;
	t->order = t->f->order++;
	t->on_disk = file_al_bit(t->f->fd, t->region);
}

static void tw_init(struct tw *t, struct fx *f, uint64_t region)
{
	memset(t, 0, sizeof(*t));
	t->w.cb = tw_cb;
	t->f = f;
	t->region = region;
}

/* Runs the loop until every waiter in ts[0..n) was called, then one more
 * pass: nobody is called twice. */
static void wait_all(struct fx *f, struct tw *ts, unsigned n)
{
	for (unsigned pass = 0; pass < MAX_PASSES; pass++) {
		unsigned done = 0;
		for (unsigned i = 0; i < n; i++)
			done += ts[i].calls > 0;
		if (done == n)
			break;
		assert_int_equal(ev_run_once(f->ev, PASS_NS), 0);
	}
	assert_int_equal(ev_run_once(f->ev, 0), 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(ts[i].calls, 1);
}

/* Writes whatever is dirty and waits until it is durable. */
static void flush_wait(struct fx *f, struct bm *bm)
{
	struct tw t;

	tw_init(&t, f, 0);
	bm_flush(bm, &t.w);
	wait_all(f, &t, 1);
	assert_int_equal(t.err, 0);
	assert_false(bm_busy(bm));
}

static int open_bm(struct fx *f, uint64_t size, uint32_t gran, bool load, bool crashed,
		   struct bm **bm)
{
	int r = bm_open(f->ev, f->fd, AL_OFF, AL_BYTES, BM_OFF, size, gran, load, crashed, bm);
	if (r == 0)
		f->bm = *bm;
	return r;
}

static void close_bm(struct fx *f, struct bm *bm)
{
	assert_ptr_equal(bm, f->bm);
	bm_free(bm);
	f->bm = NULL;
}

/* Write intent for one region; returns what bm_intent returned. */
static bool intent(struct bm *bm, struct tw *t, struct fx *f, uint64_t region)
{
	uint64_t g = bm_granularity(bm);

	tw_init(t, f, region);
	return bm_intent(bm, region * g, g, &t->w);
}

/* B1: every out-of-sync region is also set in the disk view. */
static void check_oos_in_disk(const struct bm *bm)
{
	for (uint64_t c = 0; c < bm_nbits(bm); c++)
		if (bm_test_oos(bm, c))
			assert_true((bm_disk_word(bm, c / 64) >> (c % 64)) & 1);
}

static void test_geometry(void **state)
{
	struct fx *f = *state;
	struct bm *bm = NULL;

	assert_int_equal(bm_bytes_on_disk(GIB, 64 * KIB), 4096); /* 16384 bits */
	assert_int_equal(bm_bytes_on_disk(4096, 4096), 4096);
	assert_int_equal(bm_bytes_on_disk(SIZE_3PAGES, 4096), 3 * 4096);
	assert_int_equal(bm_bytes_on_disk(SIZE_3PAGES + 1, 4096), 4 * 4096);
	assert_int_equal(open_bm(f, GIB, 4095, false, false, &bm), -EINVAL);
	assert_int_equal(open_bm(f, GIB, 2048, false, false, &bm), -EINVAL);
	assert_int_equal(open_bm(f, GIB, 12288, false, false, &bm), -EINVAL);
	assert_int_equal(open_bm(f, 0, 4096, false, false, &bm), -EINVAL);
	/* the AL must fit its area: 3 pages do not fit in 2 */
	assert_int_equal(bm_open(f->ev, f->fd, AL_OFF, 2 * 4096, BM_OFF, SIZE_3AL, 4096, false,
				 false, &bm),
			 -ENOSPC);
	assert_null(bm);
	assert_int_equal(bm_open(f->ev, f->fd, AL_OFF, 3 * 4096, BM_OFF, SIZE_3AL, 4096, false,
				 false, &bm),
			 0);
	bm_free(bm);
	assert_int_equal(open_bm(f, 10 * 64 * KIB + 12 * KIB, 64 * KIB, false, false, &bm), 0);
	assert_int_equal(bm_nbits(bm), 11);
	assert_int_equal(bm_words(bm), 1);
	assert_int_equal(bm_granularity(bm), 64 * KIB);
	assert_int_equal(bm_oos_count(bm), 0);
	assert_false(bm_busy(bm));
	close_bm(f, bm);
	bm_free(NULL);
}

static void test_intent_waits_for_flush(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	struct tw t[4];
	uint64_t g = 64 * KIB;

	assert_int_equal(open_bm(f, GIB, (uint32_t)g, false, false, &bm), 0);
	/* a new extent: not durable, the waiter runs after the flush */
	tw_init(&t[0], f, 3);
	assert_false(bm_intent(bm, 3 * g + 100, 1000, &t[0].w));
	assert_int_equal(t[0].calls, 0); /* never from inside bm_intent */
	assert_true(bm_busy(bm));
	wait_all(f, t, 1);
	assert_int_equal(t[0].err, 0);
	assert_true(t[0].on_disk); /* B2: in the file when the waiter ran */
	assert_int_equal(file_al_word(f->fd, 0), 1);
	assert_false(bm_busy(bm));

	/* anywhere in the same extent (regions 0..63): durable, go ahead now */
	assert_true(intent(bm, &t[1], f, 3));
	assert_true(intent(bm, &t[1], f, 0));
	assert_true(intent(bm, &t[1], f, 63));
	tw_init(&t[1], f, 3);
	assert_true(bm_intent(bm, 0, 64 * g, &t[1].w));
	assert_true(bm_intent(bm, 5 * g, 0, &t[1].w)); /* empty range */
	assert_int_equal(ev_run_once(f->ev, 0), 0);
	assert_int_equal(t[1].calls, 0);

	/* a range over extents 0 and 1: 1 is new, so it waits */
	tw_init(&t[2], f, 64);
	assert_false(bm_intent(bm, 63 * g + 4096, g, &t[2].w));
	wait_all(f, &t[2], 1);
	assert_true(t[2].on_disk);
	assert_int_equal(file_al_word(f->fd, 0), 3);

	/* a range past the end of the volume is clamped to the last extent */
	tw_init(&t[3], f, GIB / g - 1);
	assert_false(bm_intent(bm, GIB - 512, 16 * MIB, &t[3].w));
	wait_all(f, &t[3], 1);
	assert_true(t[3].on_disk);
	assert_int_equal(file_al_word(f->fd, 3), 1ull << 63); /* extent 255 */

	/* intent is the AL only: no change bit, nothing out of sync */
	assert_int_equal(bm_oos_count(bm), 0);
	for (uint64_t i = 0; i < bm_words(bm); i++) {
		assert_int_equal(bm_disk_word(bm, i), 0);
		assert_int_equal(file_word(f->fd, i), 0);
	}
	close_bm(f, bm);
}

static void test_intent_group_commit(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	enum { N = 64 };
	struct tw t[N];
	uint64_t extents;

	assert_int_equal(open_bm(f, SIZE_3AL, 4096, false, false, &bm), 0);
	extents = bm_words(bm);
	assert_int_equal(extents, 3 * PAGE_BITS);
	/* distinct extents on all three AL pages, queued in one pass */
	for (unsigned i = 0; i < N; i++)
		assert_false(intent(bm, &t[i], f, (i * 1531ull) % extents * 64));
	wait_all(f, t, N);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(t[i].err, 0);
		assert_true(t[i].on_disk);
		assert_true(intent(bm, &t[i], f, (i * 1531ull) % extents * 64 + 17));
	}
	assert_false(bm_busy(bm));
	close_bm(f, bm);
}

/* Intents that arrive while a flush is in flight. The flush is started by
 * the first pass (page writes submitted); its fdatasync can only be submitted
 * from a write completion, so after one pass the flush is still running. */
static void test_intent_during_flush(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	struct tw a, a2, b, c;

	assert_int_equal(open_bm(f, GIB, 4096, false, false, &bm), 0);
	assert_false(intent(bm, &a, f, 0));
	assert_int_equal(ev_run_once(f->ev, 0), 0);
	assert_int_equal(a.calls, 0);

	/* the bit is in the AL page being written: waits for this flush */
	assert_false(intent(bm, &a2, f, 1));
	/* a new extent on that page: waits for the next flush */
	assert_false(intent(bm, &b, f, 64));
	/* the first extent again, the page dirty again: its bit was set when
	 * this flush started, so it rides this flush too (B5) */
	assert_false(intent(bm, &c, f, 2));

	for (unsigned pass = 0; pass < MAX_PASSES && !(a.calls && a2.calls && b.calls && c.calls);
	     pass++)
		assert_int_equal(ev_run_once(f->ev, PASS_NS), 0);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a2.calls, 1);
	assert_int_equal(b.calls, 1);
	assert_int_equal(c.calls, 1);
	assert_true(a.on_disk && a2.on_disk && b.on_disk && c.on_disk);
	assert_int_equal(a.err | a2.err | b.err | c.err, 0);
	/* a2 and c rode the first flush with a; b the second */
	assert_int_equal(a2.order, a.order + 1);
	assert_int_equal(c.order, a2.order + 1);
	assert_true(b.order > c.order);
	assert_false(bm_busy(bm));
	close_bm(f, bm);
}

/* B5: an extent durable in the AL goes ahead at once, even while its AL page
 * waits to be written for another extent or is being written. */
static void test_intent_durable_extent_never_waits(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	struct tw a, b, c;

	assert_int_equal(open_bm(f, GIB, 4096, false, false, &bm), 0);
	assert_false(intent(bm, &a, f, 0));
	wait_all(f, &a, 1);
	/* extent 1 is new: its page is dirty, extent 0 does not care */
	assert_false(intent(bm, &b, f, 64));
	assert_true(intent(bm, &c, f, 5));
	/* and while that page is in flight */
	assert_int_equal(ev_run_once(f->ev, 0), 0);
	assert_true(bm_busy(bm));
	assert_true(intent(bm, &c, f, 7));
	wait_all(f, &b, 1);
	assert_true(b.on_disk);
	close_bm(f, bm);
}

/* Sequential intents of io bytes from off, n of them; returns how many had
 * to wait for the AL. Between two intents the loop runs until no flush is in
 * flight: a stream slower than the AL's flushes, so that the count does not
 * depend on the disk's speed. */
static unsigned stream(struct fx *f, struct bm *bm, uint64_t off, uint64_t io, unsigned n)
{
	unsigned waited = 0;
	struct tw t;

	for (unsigned i = 0; i < n; i++) {
		tw_init(&t, f, (off + i * io) / bm_granularity(bm));
		if (!bm_intent(bm, off + i * io, io, &t.w)) {
			waited++;
			wait_all(f, &t, 1);
			assert_true(t.on_disk);
		}
		/* the background flush of the window, if one was started */
		assert_int_equal(ev_run_once(f->ev, 0), 0);
		for (unsigned pass = 0; pass < MAX_PASSES && bm_busy(bm); pass++)
			assert_int_equal(ev_run_once(f->ev, PASS_NS), 0);
	}
	return waited;
}

/* B6: a sequential stream waits for the AL a few times at its start, not once
 * per extent; random writes get no window; what a crash would count as
 * active stays within the window. */
static void test_al_window_sequential(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	uint64_t g = 64 * KIB, ext = 64 * g; /* 4 MiB extents */
	unsigned waited;
	uint64_t active = 0;

	assert_int_equal(open_bm(f, 4 * GIB, (uint32_t)g, false, false, &bm), 0);
	/* 512 MiB in 1 MiB writes: 128 extents */
	waited = stream(f, bm, 0, MIB, 512);
	/* extents 0 and 1, before the run spans two extents; none after */
	assert_int_equal(waited, 2);
	flush_wait(f, bm);
	for (uint64_t e = 0; e < bm_words(bm); e++)
		if ((file_al_word(f->fd, e / 64) >> (e % 64)) & 1) {
			assert_true(e * ext < 512 * MIB + 64 * MIB); /* the window: 64 MiB */
			active++;
		}
	assert_true(active >= 128);
	assert_true(active <= 128 + 16);
	/* nothing out of sync for it: the window is intent, not change; a lost
	 * peer costs what was written, not the window */
	assert_int_equal(bm_oos_count(bm), 0);
	bm_al_to_oos(bm);
	assert_int_equal(bm_oos_count(bm) * g, 512 * MIB);
	close_bm(f, bm);

	/* random 1 MiB writes far apart: one wait each, no window */
	assert_int_equal(ftruncate(f->fd, 0), 0);
	assert_int_equal(open_bm(f, 4 * GIB, (uint32_t)g, false, false, &bm), 0);
	waited = 0;
	for (unsigned i = 0; i < 16; i++) {
		struct tw t;
		uint64_t off = ((i * 37u) % 64) * 16 * ext;
		tw_init(&t, f, off / g);
		if (!bm_intent(bm, off, MIB, &t.w)) {
			waited++;
			wait_all(f, &t, 1);
		}
	}
	assert_int_equal(waited, 16);
	flush_wait(f, bm);
	active = 0;
	for (uint64_t j = 0; j < 4 * GIB / ext / 64; j++)
		active += (uint64_t)__builtin_popcountll(file_al_word(f->fd, j));
	assert_int_equal(active, 16);
	close_bm(f, bm);
}

/* B7: a change bit in an extent the AL holds durably reaches the disk
 * lazily (with the next flush, or within BM_LAZY_NS); one the AL does not
 * cover goes at once. */
static void test_lazy_change_bits(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	struct tw a;
	uint64_t t0;
	unsigned pass;

	assert_int_equal(open_bm(f, GIB, 4096, false, false, &bm), 0);
	assert_false(intent(bm, &a, f, 0));
	wait_all(f, &a, 1);
	/* covered: not written in the next passes */
	bm_set_oos(bm, 3 * 4096, 4096);
	assert_int_equal(ev_run_once(f->ev, 0), 0);
	assert_int_equal(ev_run_once(f->ev, PASS_NS), 0);
	assert_false(bm_busy(bm));
	assert_false(file_bit(f->fd, 3));
	/* but within the lazy delay */
	t0 = now_ns();
	for (pass = 0; pass < MAX_PASSES && !file_bit(f->fd, 3); pass++)
		assert_int_equal(ev_run_once(f->ev, PASS_NS), 0);
	assert_true(file_bit(f->fd, 3));
	assert_true(now_ns() - t0 < 5ull * 1000 * 1000 * 1000);
	/* not covered (extent 2 never had an intent): written at once */
	bm_set_oos(bm, 200 * 4096, 4096);
	for (pass = 0; pass < 1000 && !file_bit(f->fd, 200); pass++)
		assert_int_equal(ev_run_once(f->ev, PASS_NS), 0);
	assert_true(file_bit(f->fd, 200));
	assert_true(now_ns() - t0 < 5ull * 1000 * 1000 * 1000);
	/* a flush for a waiter takes the covered bits along */
	bm_set_oos(bm, 5 * 4096, 4096);
	flush_wait(f, bm);
	assert_true(file_bit(f->fd, 5));
	close_bm(f, bm);
}

static void test_oos_partial_chunks(void **state)
{
	struct fx *f = *state;
	uint64_t g = 64 * KIB, size = 10 * g + 12 * KIB; /* last region is 12 KiB */
	struct bm *bm;

	assert_int_equal(open_bm(f, size, (uint32_t)g, false, false, &bm), 0);
	assert_int_equal(bm_nbits(bm), 11);

	bm_set_oos(bm, 100, 1);
	assert_int_equal(bm_oos_count(bm), 1);
	assert_true(bm_test_oos(bm, 0));
	bm_set_oos(bm, g - 1, 2); /* straddles regions 0 and 1 */
	assert_int_equal(bm_oos_count(bm), 2);
	assert_true(bm_test_oos(bm, 1));
	bm_set_oos(bm, 10 * g + 4 * KIB, 4 * KIB); /* inside the short last region */
	assert_int_equal(bm_oos_count(bm), 3);
	assert_true(bm_test_oos(bm, 10));
	bm_set_oos(bm, 5 * g, 0);
	assert_int_equal(bm_oos_count(bm), 3);
	bm_set_oos(bm, size - 512, GIB); /* past the end: clamped */
	assert_int_equal(bm_oos_count(bm), 3);
	assert_false(bm_test_oos(bm, 11));
	assert_false(bm_test_oos(bm, 1000));
	assert_int_equal(bm_disk_word(bm, 0), (1ull << 0) | (1ull << 1) | (1ull << 10));
	check_oos_in_disk(bm);

	/* clearing takes only regions entirely inside the range */
	bm_clear_oos(bm, 1, g);
	bm_clear_oos(bm, 0, g - 1);
	bm_clear_oos(bm, 0, 0);
	assert_int_equal(bm_oos_count(bm), 3);
	assert_true(bm_test_oos(bm, 0));
	bm_clear_oos(bm, 0, g);
	assert_int_equal(bm_oos_count(bm), 2);
	assert_false(bm_test_oos(bm, 0));
	bm_clear_oos(bm, g + 512, 2 * g); /* region 1 partly, region 2 wholly */
	assert_true(bm_test_oos(bm, 1));
	assert_int_equal(bm_oos_count(bm), 2);
	/* the short last region: partly covered stays, covered to the end goes */
	bm_clear_oos(bm, 10 * g, 4 * KIB);
	bm_clear_oos(bm, 10 * g + 4 * KIB, 4 * KIB);
	assert_true(bm_test_oos(bm, 10));
	bm_clear_oos(bm, 10 * g + 512, 12 * KIB - 512); /* misses the first sector */
	assert_true(bm_test_oos(bm, 10));
	bm_clear_oos(bm, 10 * g, 12 * KIB);
	assert_false(bm_test_oos(bm, 10));
	assert_int_equal(bm_oos_count(bm), 1);

	bm_set_all(bm);
	assert_int_equal(bm_oos_count(bm), 11);
	check_oos_in_disk(bm);
	bm_clear_oos(bm, 3 * g, 1ull << 40); /* to the end and beyond */
	assert_int_equal(bm_oos_count(bm), 3);
	bm_clear_oos(bm, 0, size);
	assert_int_equal(bm_oos_count(bm), 0);
	/* clearing is memory only: the disk view keeps every bit for cleaning */
	assert_int_equal(bm_disk_word(bm, 0), (1ull << 11) - 1);
	bm_set_all(bm);
	bm_clear_all_oos(bm);
	assert_int_equal(bm_oos_count(bm), 0);
	assert_int_equal(bm_next_oos(bm, 0), -1);

	/* set bits reach the file with the next flush */
	flush_wait(f, bm);
	assert_int_equal(file_word(f->fd, 0), (1ull << 11) - 1);
	close_bm(f, bm);
}

static void test_next_oos(void **state)
{
	struct fx *f = *state;
	struct bm *bm;

	assert_int_equal(open_bm(f, 200 * 4096, 4096, false, false, &bm), 0);
	assert_int_equal(bm_words(bm), 4);
	assert_int_equal(bm_next_oos(bm, 0), -1);
	bm_set_oos(bm, 5 * 4096, 4096);
	bm_set_oos(bm, 70 * 4096, 4096);
	bm_set_oos(bm, 199 * 4096, 4096);
	assert_int_equal(bm_next_oos(bm, 0), 5);
	assert_int_equal(bm_next_oos(bm, 5), 5);
	assert_int_equal(bm_next_oos(bm, 6), 70);
	assert_int_equal(bm_next_oos(bm, 64), 70);
	assert_int_equal(bm_next_oos(bm, 71), 199);
	assert_int_equal(bm_next_oos(bm, 199), 199);
	assert_int_equal(bm_next_oos(bm, 200), 5); /* from past the end: start over */
	assert_int_equal(bm_next_oos(bm, UINT64_MAX), 5);
	bm_clear_oos(bm, 199 * 4096, 4096);
	assert_int_equal(bm_next_oos(bm, 71), 5); /* wraps */
	assert_int_equal(bm_next_oos(bm, 6), 70);
	bm_clear_oos(bm, 5 * 4096, 4096);
	assert_int_equal(bm_next_oos(bm, 71), 70); /* wraps to before `from` */
	assert_int_equal(bm_next_oos(bm, 0), 70);
	bm_clear_oos(bm, 70 * 4096, 4096);
	assert_int_equal(bm_next_oos(bm, 0), -1);
	assert_int_equal(bm_next_oos(bm, 100), -1);
	close_bm(f, bm);
}

static void test_merge_words(void **state)
{
	struct fx *f = *state;
	const uint64_t ones[2] = { ~0ull, ~0ull }, five = 5, bit1 = 2, none = 0;
	struct bm *bm;

	/* 100 regions: word 1 holds regions 64..99, bits 36..63 are past the end */
	assert_int_equal(open_bm(f, 100 * 4096, 4096, false, false, &bm), 0);
	assert_int_equal(bm_words(bm), 2);
	bm_merge_words(bm, 1, ones, 2); /* the second word is past the bitmap */
	assert_int_equal(bm_oos_count(bm), 36);
	assert_true(bm_test_oos(bm, 64));
	assert_true(bm_test_oos(bm, 99));
	assert_false(bm_test_oos(bm, 63));
	assert_int_equal(bm_disk_word(bm, 1), (1ull << 36) - 1);
	assert_int_equal(bm_disk_word(bm, 2), 0);
	bm_merge_words(bm, 0, &five, 1);
	assert_int_equal(bm_oos_count(bm), 38);
	bm_merge_words(bm, 0, &five, 1); /* OR: merging twice counts once */
	assert_int_equal(bm_oos_count(bm), 38);
	bm_merge_words(bm, 0, &bit1, 1);
	bm_merge_words(bm, 0, &none, 1);
	assert_int_equal(bm_oos_count(bm), 39);
	assert_int_equal(bm_disk_word(bm, 0), 7);
	/* start past the end, or so large that start + k wraps: nothing */
	bm_merge_words(bm, 2, ones, 2);
	bm_merge_words(bm, UINT64_MAX, ones, 2);
	bm_merge_words(bm, UINT64_MAX >> 8, ones, 2);
	assert_int_equal(bm_oos_count(bm), 39);
	check_oos_in_disk(bm);
	flush_wait(f, bm);
	assert_int_equal(file_word(f->fd, 0), 7);
	assert_int_equal(file_word(f->fd, 1), (1ull << 36) - 1);
	assert_int_equal(file_word(f->fd, 2), 0);
	close_bm(f, bm);
}

#define R(n) (1ull << (n))

/* Lazy cleaning, change bits first: a bit goes only when it is not out of
 * sync, not busy, and not written since the previous prepare. */
static void test_clean_change_bits(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	struct tw t, done;
	uint64_t *busy;

	assert_int_equal(open_bm(f, 256 * 4096, 4096, false, false, &bm), 0);
	busy = calloc(bm_words(bm), 8);
	assert_non_null(busy);

	/* regions 1..5 and 70 went out of sync; 1..4 were resynced since */
	bm_set_oos(bm, 4096, 5 * 4096);
	bm_set_oos(bm, 70 * 4096, 4096);
	bm_clear_oos(bm, 4096, 4 * 4096);
	assert_int_equal(bm_oos_count(bm), 2);
	/* a write to region 2, still in flight when the cleaner looks */
	assert_false(intent(bm, &t, f, 2));
	wait_all(f, &t, 1);
	flush_wait(f, bm);
	assert_int_equal(file_word(f->fd, 0), R(1) | R(2) | R(3) | R(4) | R(5));
	assert_int_equal(file_word(f->fd, 1), R(70 - 64));
	bm_mark_range(busy, bm, 2 * 4096 + 512, 512);
	assert_int_equal(busy[0], R(2));

	/* candidates: 1, 3, 4 (2 busy and written, 5 and 70 out of sync) */
	assert_int_equal(bm_clean_prepare(bm, busy), 3);
	/* between prepare and commit: 3 is written, 4 goes out of sync again */
	assert_true(intent(bm, &t, f, 3));
	bm_set_oos(bm, 4 * 4096, 4096);
	tw_init(&done, f, 0);
	bm_clean_commit(bm, &done.w);
	assert_true(bm_busy(bm));
	wait_all(f, &done, 1);
	assert_int_equal(done.err, 0);
	assert_int_equal(bm_disk_word(bm, 0), R(2) | R(3) | R(4) | R(5));
	assert_int_equal(file_word(f->fd, 0), R(2) | R(3) | R(4) | R(5)); /* written by commit */
	assert_int_equal(bm_oos_count(bm), 3);
	check_oos_in_disk(bm);

	/* next round, nothing busy: 2 goes; 3 was written since the last prepare */
	memset(busy, 0, bm_words(bm) * 8);
	assert_int_equal(bm_clean_prepare(bm, busy), 1);
	tw_init(&done, f, 0);
	bm_clean_commit(bm, &done.w);
	wait_all(f, &done, 1);
	assert_int_equal(file_word(f->fd, 0), R(3) | R(4) | R(5));
	/* and then 3 goes, and the idle extent 0 leaves the AL (2 picks) */
	assert_int_equal(bm_clean_prepare(bm, busy), 2);
	tw_init(&done, f, 0);
	bm_clean_commit(bm, &done.w);
	wait_all(f, &done, 1);
	assert_int_equal(file_word(f->fd, 0), R(4) | R(5));
	assert_int_equal(file_word(f->fd, 1), R(70 - 64)); /* out of sync: stays */
	flush_wait(f, bm);
	assert_int_equal(file_al_word(f->fd, 0), 0);
	assert_false(bm_busy(bm));

	/* nothing left to clean */
	assert_int_equal(bm_clean_prepare(bm, busy), 0);
	free(busy);
	close_bm(f, bm);
}

/* Lazy cleaning of the AL: an extent leaves it only when it was idle from
 * prepare to commit (B3). */
static void test_clean_al(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	struct tw t, done;
	uint64_t *busy;

	assert_int_equal(open_bm(f, 4096 * 64 * 8, 4096, false, false, &bm), 0); /* 8 extents */
	busy = calloc(bm_words(bm), 8);
	assert_non_null(busy);
	for (uint64_t e = 0; e < 4; e++) {
		assert_false(intent(bm, &t, f, e * 64 + 5));
		wait_all(f, &t, 1);
	}
	assert_int_equal(file_al_word(f->fd, 0), 0xf);

	/* written since open: nothing yet; extent 1 busy */
	bm_mark_range(busy, bm, 64 * 4096 + 4096, 4096);
	assert_int_equal(bm_clean_prepare(bm, busy), 0);
	assert_int_equal(bm_clean_prepare(bm, busy), 3); /* extents 0, 2, 3 */
	/* extent 2 is written between prepare and commit: it stays */
	assert_true(intent(bm, &t, f, 2 * 64 + 40));
	tw_init(&done, f, 0);
	bm_clean_commit(bm, &done.w);
	wait_all(f, &done, 1);
	assert_int_equal(done.err, 0);
	flush_wait(f, bm); /* the AL page itself is written lazily */
	assert_int_equal(file_al_word(f->fd, 0), R(1) | R(2));

	/* a cleared extent needs a durable AL bit again before the next write */
	assert_false(intent(bm, &t, f, 3));
	wait_all(f, &t, 1);
	assert_true(t.on_disk);
	assert_int_equal(file_al_word(f->fd, 0), R(0) | R(1) | R(2));
	free(busy);
	close_bm(f, bm);
}

static void test_reload(void **state)
{
	struct fx *f = *state;
	uint64_t size = 600 * 4096; /* 10 words, the last one 24 regions */
	uint8_t page[4096];
	struct bm *bm;
	struct tw t;

	assert_int_equal(open_bm(f, size, 4096, false, false, &bm), 0);
	bm_set_oos(bm, 0, 4096);
	bm_set_oos(bm, 7 * 4096, 4096);
	bm_set_oos(bm, 599 * 4096, 4096);
	assert_false(intent(bm, &t, f, 150)); /* extent 2, no change bit */
	wait_all(f, &t, 1);
	flush_wait(f, bm);
	close_bm(f, bm); /* no bm_sync: the AL stays as after a crash */
	assert_int_equal(file_al_word(f->fd, 0), R(2));

	/* after a clean stop: the change bits on disk are out of sync, the
	 * stale AL is dropped (in memory now, in the file with the next flush) */
	assert_int_equal(open_bm(f, size, 4096, true, false, &bm), 0);
	assert_int_equal(bm_oos_count(bm), 3);
	assert_true(bm_test_oos(bm, 0));
	assert_true(bm_test_oos(bm, 7));
	assert_true(bm_test_oos(bm, 599));
	assert_false(bm_test_oos(bm, 150));
	assert_int_equal(bm_disk_word(bm, 0), R(0) | R(7));
	assert_int_equal(bm_disk_word(bm, 9), R(599 - 576));
	flush_wait(f, bm);
	assert_int_equal(file_al_word(f->fd, 0), 0);
	/* a write needs the AL bit again */
	assert_false(intent(bm, &t, f, 150));
	wait_all(f, &t, 1);
	close_bm(f, bm);

	/* after a crash: every region of an extent in the AL is out of sync too */
	assert_int_equal(open_bm(f, size, 4096, true, true, &bm), 0);
	assert_int_equal(bm_oos_count(bm), 3 + 64);
	assert_true(bm_test_oos(bm, 128));
	assert_true(bm_test_oos(bm, 150));
	assert_true(bm_test_oos(bm, 191));
	assert_false(bm_test_oos(bm, 192));
	assert_false(bm_test_oos(bm, 127));
	check_oos_in_disk(bm);
	flush_wait(f, bm); /* and so they are in the change bitmap now */
	assert_int_equal(file_word(f->fd, 2), ~0ull);
	assert_int_equal(file_al_word(f->fd, 0), R(2)); /* kept until cleaned */
	/* an AL extent already durable: no wait */
	assert_true(intent(bm, &t, f, 130));
	close_bm(f, bm);

	/* the last extent is short: only its 24 regions count */
	put_word(f->fd, AL_OFF, R(9));
	assert_int_equal(open_bm(f, size, 4096, true, true, &bm), 0);
	assert_int_equal(bm_oos_count(bm), 2 + 64 + 24);
	assert_int_equal(bm_disk_word(bm, 9), (1ull << 24) - 1);
	close_bm(f, bm);

	/* bits past the end of the volume, in either area, are ignored */
	memset(page, 0xff, sizeof(page));
	assert_int_equal(pwrite(f->fd, page, sizeof(page), BM_OFF), (ssize_t)sizeof(page));
	assert_int_equal(pwrite(f->fd, page, sizeof(page), AL_OFF), (ssize_t)sizeof(page));
	assert_int_equal(open_bm(f, size, 4096, true, true, &bm), 0);
	assert_int_equal(bm_oos_count(bm), 600);
	assert_int_equal(bm_disk_word(bm, 9), (1ull << 24) - 1);
	assert_int_equal(bm_disk_word(bm, 10), 0);
	assert_int_equal(bm_next_oos(bm, 600), 0);
	close_bm(f, bm);

	/* areas never written (past EOF) load as zeros */
	assert_int_equal(ftruncate(f->fd, AL_OFF), 0);
	assert_int_equal(open_bm(f, size, 4096, true, true, &bm), 0);
	assert_int_equal(bm_oos_count(bm), 0);
	close_bm(f, bm);
	/* and part of a page: what is there counts, the rest is zero */
	memset(page, 0, sizeof(page));
	page[0] = 0x81;
	assert_int_equal(pwrite(f->fd, page, 1, BM_OFF), 1);
	assert_int_equal(open_bm(f, size, 4096, true, true, &bm), 0);
	assert_int_equal(bm_oos_count(bm), 2);
	assert_true(bm_test_oos(bm, 7));
	close_bm(f, bm);
}

static void test_sync(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	struct tw t;

	assert_int_equal(open_bm(f, SIZE_3PAGES, 4096, false, false, &bm), 0);
	assert_false(intent(bm, &t, f, PAGE_BITS + 1));
	wait_all(f, &t, 1);
	assert_true(file_al_bit(f->fd, PAGE_BITS + 1));
	/* change bits not written yet, on two pages */
	bm_set_oos(bm, 3 * 4096, 4096);
	bm_set_oos(bm, (2 * PAGE_BITS + 9) * 4096, 4096);
	assert_false(file_bit(f->fd, 3));
	assert_int_equal(bm_sync(bm), 0);
	assert_true(file_bit(f->fd, 3));
	assert_true(file_bit(f->fd, 2 * PAGE_BITS + 9));
	assert_false(file_bit(f->fd, 4));
	/* the AL is empty on disk: nothing is left for it to cover */
	for (uint64_t j = 0; j < bm_words(bm) / 64; j++)
		assert_int_equal(file_al_word(f->fd, j), 0);
	assert_false(bm_busy(bm));
	assert_int_equal(ev_run_once(f->ev, 0), 0);
	assert_false(bm_busy(bm));
	assert_int_equal(bm_sync(bm), 0); /* nothing dirty: still fine */
	close_bm(f, bm);

	/* what bm_sync left reloads as a clean stop */
	assert_int_equal(open_bm(f, SIZE_3PAGES, 4096, true, true, &bm), 0);
	assert_int_equal(bm_oos_count(bm), 2);
	close_bm(f, bm);
}

/* A failed write of the AL reaches the waiters as an error; the next intent
 * for the same extent must retry the write (or fail), never wait forever.
 * The fd is read-only, so every page write fails with EBADF. */
static void test_flush_error(void **state)
{
	struct fx *f = *state;
	struct bm *bm;
	struct tw t[3];

	f->ro_fd = open(f->path, O_RDONLY);
	assert_true(f->ro_fd >= 0);
	assert_int_equal(bm_open(f->ev, f->ro_fd, AL_OFF, AL_BYTES, BM_OFF, GIB, 64 * KIB, false,
				 false, &bm),
			 0);
	f->bm = bm;
	assert_false(intent(bm, &t[0], f, 0));
	wait_all(f, &t[0], 1);
	assert_true(t[0].err < 0);
	assert_false(t[0].on_disk);
	/* a new extent: its intent dirties the page, which starts another attempt */
	assert_false(intent(bm, &t[1], f, 64));
	wait_all(f, &t[1], 1);
	assert_true(t[1].err < 0);
	/* the first extent again: set in memory, not on disk, so not durable */
	assert_false(intent(bm, &t[2], f, 0));
	for (unsigned pass = 0; pass < 50 && !t[2].calls; pass++)
		assert_int_equal(ev_run_once(f->ev, PASS_NS), 0);
	if (!t[2].calls)
		print_message("bm_intent on an AL bit left dirty by a failed flush: the waiter is "
			      "never called (no flush is started)\n");
	assert_int_equal(t[2].calls, 1);
	assert_true(t[2].err < 0);
	close_bm(f, bm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_geometry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intent_waits_for_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intent_group_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intent_during_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intent_durable_extent_never_waits, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_al_window_sequential, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_change_bits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oos_partial_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_next_oos, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_words, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clean_change_bits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clean_al, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_error, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
