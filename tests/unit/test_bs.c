/* Backing stores driven through a real event loop: RAM, file (buffered and
 * O_DIRECT, in a temp dir) and the fault wrapper. Every request is run with
 * ev_run_once until its callback fires (no sleeps); the harness also checks
 * the bs.h contract that a callback runs exactly once and never from inside
 * submit. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/bs/bs.h"
#include "../../src/common/util.h"
#include "../../src/ev/ev.h"
#include "support/alloc_fault.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)
#define VOL_SIZE (4 * MIB)
#define ONE_SECOND 1000000000ull
#define MAX_PASSES 10000 /* each pass waits at most a second */

/* ---- driving the loop ---- */

struct op {
	struct bs_io io;
	int res;
	int calls;
	bool in_submit;
	bool reentrant;
};

static void op_done(struct bs_io *io, int res)
{
	struct op *o = container_of(io, struct op, io);
	o->calls++;
	o->res = res;
	if (o->in_submit)
		o->reentrant = true;
}

static void op_start(struct bs *bs, struct op *o, enum bs_op type, uint32_t flags, uint64_t off,
		     uint64_t len, void *buf)
{
	memset(o, 0, sizeof(*o));
	o->io.type = type;
	o->io.flags = flags;
	o->io.off = off;
	o->io.len = len;
	o->io.buf = buf;
	o->io.cb = op_done;
	o->in_submit = true;
	bs_submit(bs, &o->io);
	o->in_submit = false;
}

static bool all_done(const struct op *ops, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (ops[i].calls == 0)
			return false;
	return true;
}

/* Runs the loop until every op in ops[0..n) has completed. A pass that does
 * not wait comes first: a completion deferred to the loop (bs_complete_later)
 * runs at the start of a pass, which would then sleep for a completion that
 * is not coming. */
static void wait_all(struct ev_loop *ev, struct op *ops, unsigned n)
{
	for (unsigned pass = 0; pass < MAX_PASSES && !all_done(ops, n); pass++) {
		assert_int_equal(ev_run_once(ev, 0), 0);
		if (!all_done(ops, n))
			assert_int_equal(ev_run_once(ev, ONE_SECOND), 0);
	}
	/* one more pass: nothing completes twice */
	assert_int_equal(ev_run_once(ev, 0), 0);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(ops[i].calls, 1);
		assert_false(ops[i].reentrant);
	}
}

static int run_io(struct ev_loop *ev, struct bs *bs, enum bs_op type, uint32_t flags,
		  uint64_t off, uint64_t len, void *buf)
{
	struct op o;

	op_start(bs, &o, type, flags, off, len, buf);
	wait_all(ev, &o, 1);
	if (o.res == 0 && (type == BS_READ || type == BS_WRITE))
		assert_int_equal(o.io.done, len);
	return o.res;
}

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed * 17 + (i >> 9)) ^ seed);
}

static int is_pattern(const uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)((i * 131 + seed * 17 + (i >> 9)) ^ seed))
			return 0;
	return 1;
}

static int is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* ---- fixture ---- */

struct fx {
	struct ev_loop *ev;
	char *dir;
	char path[512];
	uint8_t *a, *b; /* 1 MiB, page aligned (O_DIRECT) */
	char loop[64];  /* a loop device the test attached ("" if none) */
};

/* A loop device over f->dir/dev.img (size bytes, sector bytes a sector),
 * or false where none can be made (not root, no loop support). */
static bool loop_attach(struct fx *f, uint64_t size, unsigned sector)
{
	char img[600], cmd[800];
	FILE *p;
	int fd;

	if (geteuid() != 0)
		return false;
	snprintf(img, sizeof(img), "%s/dev.img", f->dir);
	fd = open(img, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "losetup -f --show --sector-size %u '%s' 2>/dev/null", sector,
		 img);
	p = popen(cmd, "r");
	if (!p)
		return false;
	if (!fgets(f->loop, sizeof(f->loop), p))
		f->loop[0] = '\0';
	pclose(p);
	f->loop[strcspn(f->loop, "\n")] = '\0';
	return strncmp(f->loop, "/dev/loop", 9) == 0;
}

static void loop_detach(struct fx *f)
{
	char cmd[128];

	if (!f->loop[0])
		return;
	snprintf(cmd, sizeof(cmd), "losetup -d %s", f->loop);
	if (system(cmd) != 0)
		print_message("could not detach %s\n", f->loop);
	f->loop[0] = '\0';
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->ev = ev_new(64);
	assert_non_null(f->ev); /* tandemd needs io_uring; so do these tests */
	f->dir = unit_mkdtemp("bs");
	snprintf(f->path, sizeof(f->path), "%s/data.img", f->dir);
	f->a = alloc_aligned(MIB);
	f->b = alloc_aligned(MIB);
	assert_non_null(f->a);
	assert_non_null(f->b);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	loop_detach(f);
	ev_free(f->ev);
	unit_rmtree(f->dir);
	free(f->dir);
	free(f->a);
	free(f->b);
	free(f);
	return 0;
}

/* ---- the same scenario on every store ---- */

static void read_expect_pattern(struct fx *f, struct bs *bs, uint64_t off, size_t len,
				unsigned seed)
{
	memset(f->b, 0xcc, len);
	assert_int_equal(run_io(f->ev, bs, BS_READ, 0, off, len, f->b), 0);
	assert_true(is_pattern(f->b, len, seed));
}

static void read_expect_zero(struct fx *f, struct bs *bs, uint64_t off, size_t len)
{
	memset(f->b, 0xcc, len);
	assert_int_equal(run_io(f->ev, bs, BS_READ, 0, off, len, f->b), 0);
	assert_true(is_zero(f->b, len));
}

static void scenario(struct fx *f, struct bs *bs)
{
	const uint64_t size = bs->size;

	assert_int_equal(size, VOL_SIZE);
	/* a fresh store reads zeros */
	read_expect_zero(f, bs, 0, 64 * KIB);

	/* write, read back */
	pattern(f->a, 64 * KIB, 1);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 0, 64 * KIB, f->a), 0);
	read_expect_pattern(f, bs, 0, 64 * KIB, 1);
	/* a sub-range reads the matching bytes */
	memset(f->b, 0xcc, 4 * KIB);
	assert_int_equal(run_io(f->ev, bs, BS_READ, 0, 8 * KIB, 4 * KIB, f->b), 0);
	assert_memory_equal(f->b, f->a + 8 * KIB, 4 * KIB);

	/* across the 1 MiB boundary, with FUA */
	pattern(f->a, 8 * KIB, 2);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, BS_F_FUA, MIB - 4 * KIB, 8 * KIB, f->a), 0);
	read_expect_pattern(f, bs, MIB - 4 * KIB, 8 * KIB, 2);

	/* the last block of the volume */
	pattern(f->a, 4 * KIB, 3);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, size - 4 * KIB, 4 * KIB, f->a), 0);
	read_expect_pattern(f, bs, size - 4 * KIB, 4 * KIB, 3);

	/* a large transfer (1 MiB) */
	pattern(f->a, MIB, 4);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 2 * MIB, MIB, f->a), 0);
	read_expect_pattern(f, bs, 2 * MIB, MIB, 4);

	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);

	/* trim: reads zero afterwards (a punched hole on a file) */
	assert_int_equal(run_io(f->ev, bs, BS_TRIM, 0, 0, 64 * KIB, NULL), 0);
	read_expect_zero(f, bs, 0, 64 * KIB);

	/* zero, without and with MAY_TRIM; the neighbours keep their data */
	assert_int_equal(run_io(f->ev, bs, BS_ZERO, 0, MIB - 4 * KIB, 4 * KIB, NULL), 0);
	read_expect_zero(f, bs, MIB - 4 * KIB, 4 * KIB);
	{
		uint8_t want[8 * KIB];
		pattern(want, sizeof(want), 2);
		memset(f->b, 0xcc, 4 * KIB);
		assert_int_equal(run_io(f->ev, bs, BS_READ, 0, MIB, 4 * KIB, f->b), 0);
		assert_memory_equal(f->b, want + 4 * KIB, 4 * KIB);
	}
	assert_int_equal(run_io(f->ev, bs, BS_ZERO, BS_F_MAY_TRIM, 2 * MIB + 64 * KIB, 64 * KIB,
			     NULL),
			 0);
	read_expect_zero(f, bs, 2 * MIB + 64 * KIB, 64 * KIB);
	memset(f->b, 0xcc, 64 * KIB);
	assert_int_equal(run_io(f->ev, bs, BS_READ, 0, 2 * MIB, 64 * KIB, f->b), 0);
	assert_memory_equal(f->b, f->a, 64 * KIB);
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);
	assert_int_equal(bs->ops->sync(bs), 0);
}

/* Many requests in flight at once complete independently. */
static void scenario_parallel(struct fx *f, struct bs *bs)
{
	enum { N = 16, LEN = 16 * 1024 };
	struct op ops[N];

	for (unsigned i = 0; i < N; i++)
		pattern(f->a + i * LEN, LEN, 100 + i);
	for (unsigned i = 0; i < N; i++)
		op_start(bs, &ops[i], BS_WRITE, 0, (uint64_t)i * 2 * LEN, LEN, f->a + i * LEN);
	wait_all(f->ev, ops, N);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(ops[i].res, 0);
	memset(f->b, 0xcc, N * LEN);
	for (unsigned i = 0; i < N; i++)
		op_start(bs, &ops[i], BS_READ, 0, (uint64_t)i * 2 * LEN, LEN, f->b + i * LEN);
	wait_all(f->ev, ops, N);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(ops[i].res, 0);
		assert_true(is_pattern(f->b + i * LEN, LEN, 100 + i));
	}
}

static void test_ram(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL;
	struct bs_extent ext[4];
	unsigned n = 0;

	assert_int_equal(bs_ram_open(f->ev, VOL_SIZE, &bs), 0);
	assert_string_equal(bs->ops->name, "ram");
	assert_int_equal(bs->align, 1);
	assert_true(bs->caps & BS_CAP_TRIM);
	scenario(f, bs);
	scenario_parallel(f, bs);
	/* unaligned I/O is fine on RAM */
	pattern(f->a, 3, 9);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 5, 3, f->a), 0);
	read_expect_pattern(f, bs, 5, 3, 9);
	/* RAM knows no holes: one data extent */
	assert_int_equal(bs->ops->block_status(bs, 0, VOL_SIZE, ext, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ext[0].len, VOL_SIZE);
	assert_int_equal(ext[0].flags, 0);
	assert_int_equal(bs->ops->block_status(bs, 0, VOL_SIZE, ext, 0, &n), -EINVAL);
	bs_close(bs);
	bs_close(NULL);

	assert_int_equal(bs_open_spec(f->ev, "ram:", VOL_SIZE, true, &bs), 0);
	assert_string_equal(bs->ops->name, "ram");
	bs_close(bs);
}

static void file_case(struct fx *f, bool direct)
{
	struct bs *bs = NULL;
	struct stat st;

	assert_int_equal(bs_file_open(f->ev, f->path, VOL_SIZE, direct, &bs), 0);
	assert_string_equal(bs->ops->name, "file");
	if (direct && !bs->direct) {
		bs_close(bs);
		print_message("%s refuses O_DIRECT; the direct case cannot run here\n", f->dir);
		skip();
	}
	assert_int_equal(bs->direct, direct);
	if (direct)
		assert_true(bs->align == 512 || bs->align == 4096);
	else
		assert_int_equal(bs->align, 1);
	assert_int_equal(bs->caps & (BS_CAP_TRIM | BS_CAP_ZERO | BS_CAP_EXTENTS),
			 BS_CAP_TRIM | BS_CAP_ZERO | BS_CAP_EXTENTS);
	/* created sparse at the volume size */
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_size, VOL_SIZE);
	scenario(f, bs);
	scenario_parallel(f, bs);
	bs_close(bs);

	/* reopening keeps the data (and never shrinks the file) */
	assert_int_equal(bs_file_open(f->ev, f->path, VOL_SIZE / 2, direct, &bs), 0);
	read_expect_pattern(f, bs, VOL_SIZE - 4 * KIB, 4 * KIB, 3);
	bs_close(bs);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_size, VOL_SIZE);
}

static void test_file_buffered(void **state)
{
	file_case(*state, false);
}

static void test_file_direct(void **state)
{
	file_case(*state, true);
}

static uint64_t sum_len(const struct bs_extent *e, unsigned n)
{
	uint64_t s = 0;
	for (unsigned i = 0; i < n; i++)
		s += e[i].len;
	return s;
}

/* The allocation map of a sparse file: hole, data, hole; and a hole again
 * after the data is trimmed. */
static void test_file_block_status(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL;
	struct bs_extent ext[8];
	unsigned n = 0;

	assert_int_equal(bs_file_open(f->ev, f->path, VOL_SIZE, false, &bs), 0);
	assert_int_equal(bs->ops->block_status(bs, 0, VOL_SIZE, ext, 8, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ext[0].len, VOL_SIZE);
	assert_int_equal(ext[0].flags, BS_EXT_HOLE | BS_EXT_ZERO);

	pattern(f->a, 64 * KIB, 5);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, MIB, 64 * KIB, f->a), 0);
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);
	assert_int_equal(bs->ops->block_status(bs, 0, VOL_SIZE, ext, 8, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(ext[0].flags, BS_EXT_HOLE | BS_EXT_ZERO);
	assert_int_equal(ext[0].len, MIB);
	assert_int_equal(ext[1].flags, 0);
	assert_int_equal(ext[1].len, 64 * KIB);
	assert_int_equal(ext[2].flags, BS_EXT_HOLE | BS_EXT_ZERO);
	assert_int_equal(sum_len(ext, n), VOL_SIZE);

	/* a range starting inside the data; and max limits the count */
	assert_int_equal(bs->ops->block_status(bs, MIB + 4 * KIB, MIB, ext, 8, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ext[0].flags, 0);
	assert_int_equal(ext[0].len, 60 * KIB);
	assert_int_equal(sum_len(ext, n), MIB);
	assert_int_equal(bs->ops->block_status(bs, 0, VOL_SIZE, ext, 1, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ext[0].len, MIB);

	/* trim punches the hole back */
	assert_int_equal(run_io(f->ev, bs, BS_TRIM, 0, MIB, 64 * KIB, NULL), 0);
	assert_int_equal(bs->ops->block_status(bs, 0, VOL_SIZE, ext, 8, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ext[0].flags, BS_EXT_HOLE | BS_EXT_ZERO);
	assert_int_equal(ext[0].len, VOL_SIZE);

	/* zero with MAY_TRIM deallocates too */
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 0, 64 * KIB, f->a), 0);
	assert_int_equal(run_io(f->ev, bs, BS_ZERO, BS_F_MAY_TRIM, 0, 64 * KIB, NULL), 0);
	assert_int_equal(bs->ops->block_status(bs, 0, 64 * KIB, ext, 8, &n), 0);
	assert_int_equal(n, 1);
	assert_true(ext[0].flags & BS_EXT_HOLE);
	bs_close(bs);
}

/* A file shorter than the volume (truncated behind the store's back) reads
 * zeros past its end: the read straddling EOF comes back short and resumes,
 * and the resumed read at EOF returns 0, which fills with zeros. */
static void test_file_read_past_eof(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL;

	assert_int_equal(bs_file_open(f->ev, f->path, VOL_SIZE, false, &bs), 0);
	pattern(f->a, 64 * KIB, 6);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 0, 64 * KIB, f->a), 0);
	assert_int_equal(truncate(f->path, 32 * KIB), 0);

	memset(f->b, 0xcc, 64 * KIB);
	assert_int_equal(run_io(f->ev, bs, BS_READ, 0, 0, 64 * KIB, f->b), 0);
	assert_memory_equal(f->b, f->a, 32 * KIB);
	assert_true(is_zero(f->b + 32 * KIB, 32 * KIB));
	read_expect_zero(f, bs, 2 * MIB, 64 * KIB);
	bs_close(bs);
}

/* TRIM and ZERO longer than 1 GiB act on the whole range (fallocate is never
 * split, and once was cut at 1 GiB and reported success). */
static void test_file_zero_beyond_1g(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL;
	const uint64_t size = 3ull << 30;

	assert_int_equal(bs_file_open(f->ev, f->path, size, true, &bs), 0);
	for (unsigned k = 0; k < 2; k++) {
		enum bs_op op = k ? BS_TRIM : BS_ZERO;
		for (unsigned i = 0; i < 3; i++) {
			pattern(f->a, 64 * KIB, i + 1);
			assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, ((uint64_t)i << 30) + MIB,
						64 * KIB, f->a),
					 0);
		}
		assert_int_equal(run_io(f->ev, bs, op, 0, 0, size - 4 * KIB, NULL), 0);
		for (unsigned i = 0; i < 3; i++)
			read_expect_zero(f, bs, ((uint64_t)i << 30) + MIB, 64 * KIB);
	}
	bs_close(bs);
}

static void test_file_open_errors(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL;
	char p[600];

	snprintf(p, sizeof(p), "%s/missing/dir/x.img", f->dir);
	assert_int_equal(bs_file_open(f->ev, p, VOL_SIZE, false, &bs), -ENOENT);
	assert_int_equal(bs_file_open(f->ev, f->dir, VOL_SIZE, false, &bs), -EISDIR);
	assert_int_equal(bs_file_open(f->ev, "/dev/null", VOL_SIZE, false, &bs), -EINVAL);
	assert_null(bs);
}

/* A block device as the store (a loop device over a file): its size comes
 * from the device, which must hold the volume; O_DIRECT aligns to its
 * logical sector; no extent map (all data); trim and zero by fallocate on
 * the device; it cannot be cloned or replaced (the kept image is a file
 * store's). Needs root: skipped elsewhere. */
static void test_block_device(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL;
	struct bs_extent ext[4];
	unsigned n = 0;
	char p[600];

	if (!loop_attach(f, VOL_SIZE, 512)) {
		print_message("no loop device here (root and losetup needed)\n");
		skip();
	}
	assert_int_equal(bs_file_open(f->ev, f->loop, VOL_SIZE, true, &bs), 0);
	assert_true(bs->direct);
	assert_int_equal(bs->align, 512);
	assert_int_equal(bs->caps, BS_CAP_TRIM | BS_CAP_ZERO);
	scenario(f, bs);
	scenario_parallel(f, bs);
	assert_int_equal(bs->ops->block_status(bs, 0, VOL_SIZE, ext, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ext[0].len, VOL_SIZE);
	assert_int_equal(ext[0].flags, 0);
	snprintf(p, sizeof(p), "%s/clone.img", f->dir);
	assert_int_equal(bs_clone_to(bs, p), -EOPNOTSUPP);
	assert_int_equal(bs_replace_from(bs, p), -EBUSY);
	bs_close(bs);
	/* buffered: no alignment */
	assert_int_equal(bs_file_open(f->ev, f->loop, VOL_SIZE / 2, false, &bs), 0);
	assert_int_equal(bs->align, 1);
	read_expect_pattern(f, bs, 0, 16 * KIB, 100); /* scenario_parallel's first block */
	bs_close(bs);
	/* a device smaller than the volume is refused */
	bs = NULL;
	assert_int_equal(bs_file_open(f->ev, f->loop, 2 * VOL_SIZE, true, &bs), -ENOSPC);
	assert_null(bs);
	loop_detach(f);

	/* 4 KiB logical sectors: O_DIRECT I/O aligns to 4096 */
	if (!loop_attach(f, VOL_SIZE, 4096)) {
		print_message("no loop device with 4 KiB sectors here\n");
		return;
	}
	assert_int_equal(bs_file_open(f->ev, f->loop, VOL_SIZE, true, &bs), 0);
	assert_int_equal(bs->align, 4096);
	pattern(f->a, 8 * KIB, 7);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 4 * KIB, 8 * KIB, f->a), 0);
	read_expect_pattern(f, bs, 4 * KIB, 8 * KIB, 7);
	bs_close(bs);
}

/* A request of no known type fails with EINVAL on every store, from the loop
 * (never inside submit). */
static void test_unknown_type(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL;

	assert_int_equal(bs_ram_open(f->ev, VOL_SIZE, &bs), 0);
	assert_int_equal(run_io(f->ev, bs, BS_OP_MAX, 0, 0, 4 * KIB, f->a), -EINVAL);
	bs_close(bs);
	assert_int_equal(bs_file_open(f->ev, f->path, VOL_SIZE, false, &bs), 0);
	assert_int_equal(run_io(f->ev, bs, (enum bs_op)77, 0, 0, 4 * KIB, f->a), -EINVAL);
	bs_close(bs);
}

/* ---- fault injection ---- */

/* Fails exactly the Nth write (or, sticky, every write from the Nth), for
 * N = 1..5; other op types pass; a failed write never reaches the store. */
static void fault_loop(struct fx *f, bool sticky, bool on_file)
{
	enum { OPS = 7, LEN = 4096 };

	for (unsigned nth = 1; nth <= 5; nth++) {
		struct bs *inner = NULL, *bs = NULL;
		int err = nth % 2 ? EIO : ENOSPC;

		if (on_file) {
			unlink(f->path);
			assert_int_equal(bs_file_open(f->ev, f->path, VOL_SIZE, false, &inner), 0);
		} else {
			assert_int_equal(bs_ram_open(f->ev, VOL_SIZE, &inner), 0);
		}
		assert_int_equal(bs_fault_open(inner, BS_WRITE, nth, sticky, err, &bs), 0);
		assert_string_equal(bs->ops->name, "fault");
		assert_int_equal(bs->size, inner->size);
		assert_int_equal(bs->align, inner->align);
		assert_int_equal(bs->caps, inner->caps);

		for (unsigned i = 1; i <= OPS; i++) {
			bool fails = i == nth || (sticky && i > nth);
			pattern(f->a, LEN, i);
			int r = run_io(f->ev, bs, BS_WRITE, 0, (uint64_t)i * LEN, LEN, f->a);
			if (r != (fails ? -err : 0))
				print_message("nth %u sticky %d: write %u -> %d\n", nth, sticky, i, r);
			assert_int_equal(r, fails ? -err : 0);
			/* reads, flushes and trims are not counted and never fail */
			assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);
			memset(f->b, 0xcc, LEN);
			assert_int_equal(run_io(f->ev, bs, BS_READ, 0, (uint64_t)i * LEN, LEN, f->b),
					 0);
			if (fails)
				assert_true(is_zero(f->b, LEN)); /* nothing was written */
			else
				assert_true(is_pattern(f->b, LEN, i));
		}
		bs_close(bs); /* closes inner too */
	}
}

static void test_fault_nth_write(void **state)
{
	fault_loop(*state, false, false);
}

static void test_fault_nth_write_sticky(void **state)
{
	fault_loop(*state, true, false);
}

static void test_fault_nth_write_on_file(void **state)
{
	fault_loop(*state, false, true);
}

/* Other op types: the 2nd flush fails, the 3rd read fails; forwarding of
 * block_status and sync. */
static void test_fault_other_types(void **state)
{
	struct fx *f = *state;
	struct bs *inner = NULL, *bs = NULL;
	struct bs_extent ext[4];
	unsigned n = 0;

	assert_int_equal(bs_file_open(f->ev, f->path, VOL_SIZE, false, &inner), 0);
	assert_int_equal(bs_fault_open(inner, BS_FLUSH, 2, false, EIO, &bs), 0);
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);
	pattern(f->a, 4096, 1);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 0, 4096, f->a), 0);
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), -EIO);
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);
	assert_int_equal(bs->ops->block_status(bs, 0, VOL_SIZE, ext, 4, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ext[0].flags, 0);
	assert_int_equal(bs->ops->sync(bs), 0);
	bs_close(bs);

	assert_int_equal(bs_ram_open(f->ev, VOL_SIZE, &inner), 0);
	assert_int_equal(bs_fault_open(inner, BS_READ, 3, false, EBADMSG, &bs), 0);
	for (unsigned i = 1; i <= 5; i++) {
		assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 0, 4096, f->a), 0);
		assert_int_equal(run_io(f->ev, bs, BS_READ, 0, 0, 4096, f->b), i == 3 ? -EBADMSG : 0);
	}
	bs_close(bs);
}

/* Failures and successes in flight together each complete once, in the loop. */
static void test_fault_parallel(void **state)
{
	struct fx *f = *state;
	struct bs *inner = NULL, *bs = NULL;
	struct op ops[8];

	assert_int_equal(bs_ram_open(f->ev, VOL_SIZE, &inner), 0);
	assert_int_equal(bs_fault_open(inner, BS_WRITE, 4, true, EIO, &bs), 0);
	for (unsigned i = 0; i < 8; i++)
		op_start(bs, &ops[i], BS_WRITE, 0, i * 4096ull, 4096, f->a);
	wait_all(f->ev, ops, 8);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(ops[i].res, i + 1 >= 4 ? -EIO : 0);
	bs_close(bs);
}

/* ---- the crash store (bs_crash.c) ---- */

static int crash_over_file(struct fx *f, unsigned crash_at, int kind, struct bs *inner,
			   struct bs **bs)
{
	struct crash_hook *hook;

	if (!inner) {
		int r = bs_file_open(f->ev, f->path, VOL_SIZE, false, &inner);
		if (r)
			return r;
	}
	int r = bs_crash_open(inner, f->path, "unit", 7, kind, crash_at, bs, &hook);
	if (r)
		bs_close(inner);
	return r;
}

static void file_read(struct fx *f, uint64_t off, size_t len, uint8_t *buf)
{
	int fd = open(f->path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

/* C3 and C2 without a crash: writes complete into the cache (the file
 * below does not have them yet), reads and block_status see them, a flush
 * or a FUA write puts them on the file; close writes back the rest. */
static void test_crash_store_cache(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL, *ram = NULL;
	struct bs_extent ext[4];
	unsigned n = 0;

	assert_int_equal(bs_ram_open(f->ev, VOL_SIZE, &ram), 0);
	assert_int_equal(bs_crash_open(ram, "", "unit", 1, BS_CRASH_ANY, 1, &bs, NULL),
			 -EOPNOTSUPP);
	bs_close(ram);
	unlink(f->path);
	assert_int_equal(crash_over_file(f, ~0u, BS_CRASH_ANY, NULL, &bs), 0);
	pattern(f->a, 64 * KIB, 1);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 0, 64 * KIB, f->a), 0);
	file_read(f, 0, 64 * KIB, f->b);
	assert_true(is_zero(f->b, 64 * KIB)); /* cached, not on the file yet */
	read_expect_pattern(f, bs, 0, 64 * KIB, 1);
	assert_int_equal(bs->ops->block_status(bs, 0, 64 * KIB, ext, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ext[0].flags, 0); /* data */
	assert_int_equal(bs->ops->block_status(bs, 0, 64 * KIB, ext, 0, &n), -EINVAL);
	/* a zeroed range over cached data reads as zeros */
	assert_int_equal(run_io(f->ev, bs, BS_ZERO, 0, 4 * KIB, 4 * KIB, NULL), 0);
	assert_int_equal(run_io(f->ev, bs, BS_READ, 0, 0, 64 * KIB, f->b), 0);
	assert_true(is_zero(f->b + 4 * KIB, 4 * KIB));
	assert_true(is_pattern(f->b, 4 * KIB, 1));
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);
	file_read(f, 0, 4 * KIB, f->b);
	assert_true(is_pattern(f->b, 4 * KIB, 1)); /* C2: on the file now */
	/* FUA: on the file when it completes */
	pattern(f->a, 4 * KIB, 2);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, BS_F_FUA, 128 * KIB, 4 * KIB, f->a), 0);
	file_read(f, 128 * KIB, 4 * KIB, f->b);
	assert_true(is_pattern(f->b, 4 * KIB, 2));
	/* a flush with nothing cached completes at once */
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);
	assert_int_equal(run_io(f->ev, bs, (enum bs_op)99, 0, 0, 0, NULL), -EINVAL);
	pattern(f->a, 4 * KIB, 3);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 256 * KIB, 4 * KIB, f->a), 0);
	bs_close(bs); /* writes back what is cached */
	file_read(f, 256 * KIB, 4 * KIB, f->b);
	assert_true(is_pattern(f->b, 4 * KIB, 3));
}

/* The store below fails the write-back: the flush waiting for it fails
 * with that error, and the write stays cached (readable). */
static void test_crash_store_writeback_fails(void **state)
{
	struct fx *f = *state;
	struct bs *file = NULL, *fault = NULL, *bs = NULL;

	unlink(f->path);
	assert_int_equal(bs_file_open(f->ev, f->path, VOL_SIZE, false, &file), 0);
	assert_int_equal(bs_fault_open(file, BS_WRITE, 1, true, EIO, &fault), 0);
	assert_int_equal(crash_over_file(f, ~0u, BS_CRASH_ANY, fault, &bs), 0);
	pattern(f->a, 4 * KIB, 4);
	assert_int_equal(run_io(f->ev, bs, BS_WRITE, 0, 0, 4 * KIB, f->a), 0);
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), -EIO);
	read_expect_pattern(f, bs, 0, 4 * KIB, 4);
	bs_fault_disarm(fault);
	bs_close(bs);
}

/* C1: a crash at data write k leaves on the file a prefix of the writes
 * that completed before it (in completion order), the next one torn (each
 * of its sectors old or new), nothing after. Each write goes to a block of
 * its own, so the file says which survived. */
static void test_crash_store_crash_leaves_prefix(void **state)
{
	struct fx *f = *state;
	enum { WRITES = 12, LEN = 4096 };

	for (unsigned k = 2; k <= WRITES; k += 3) {
		pid_t pid;
		int st;

		unlink(f->path);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct bs *bs = NULL;
			f->ev = ev_new(64); /* the parent's ring is not this process's */
			if (!f->ev || crash_over_file(f, k, BS_CRASH_WRITE, NULL, &bs))
				_exit(2);
			for (unsigned i = 1; i <= WRITES; i++) {
				pattern(f->a, LEN, i);
				if (run_io(f->ev, bs, BS_WRITE, 0, (uint64_t)i * LEN, LEN, f->a))
					_exit(3);
			}
			_exit(4); /* the crash did not come */
		}
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st));
		assert_int_equal(WTERMSIG(st), SIGKILL);
		/* writes 1..k-1 completed before the crash point of write k */
		bool torn_seen = false, gone = false;
		for (unsigned i = 1; i <= WRITES; i++) {
			file_read(f, (uint64_t)i * LEN, LEN, f->b);
			bool whole = is_pattern(f->b, LEN, i), zero = is_zero(f->b, LEN);
			if (i >= k) {
				assert_true(zero); /* never completed */
				continue;
			}
			if (gone) {
				assert_true(zero);
				continue;
			}
			if (whole)
				continue;
			/* the torn one: each sector is the old (zero) or the new */
			pattern(f->a, LEN, i);
			for (unsigned s = 0; s < LEN; s += 512)
				assert_true(is_zero(f->b + s, 512) ||
					    !memcmp(f->b + s, f->a + s, 512));
			assert_false(torn_seen);
			torn_seen = gone = true;
		}
	}
}

/* ---- allocation failures ---- */

/* Each allocation of an open fails in turn until the open succeeds: every
 * failure is -ENOMEM and leaves nothing behind (the sanitizer build checks
 * for leaks). */
static void test_alloc_fault_open(void **state)
{
	struct fx *f = *state;

	for (unsigned kind = 0; kind < 5; kind++) {
		unsigned n;
		for (n = 1; n < 64; n++) {
			struct bs *inner = NULL, *bs = NULL;
			struct crash_hook *hook;
			int r;

			if (kind >= 2)
				assert_int_equal(kind == 4 ? bs_file_open(f->ev, f->path, VOL_SIZE,
									  false, &inner)
							   : bs_ram_open(f->ev, VOL_SIZE, &inner),
						 0);
			alloc_fault_arm(n);
			switch (kind) {
			case 0: r = bs_ram_open(f->ev, VOL_SIZE, &bs); break;
			case 1: r = bs_file_open(f->ev, f->path, VOL_SIZE, true, &bs); break;
			case 2: r = bs_fault_open(inner, BS_WRITE, 1, false, EIO, &bs); break;
			case 3: r = bs_slow_open(inner, 1, &bs); break;
			default:
				r = bs_crash_open(inner, f->path, "unit", 1, BS_CRASH_ANY, ~0u, &bs,
						  &hook);
				break;
			}
			bool fired = alloc_fault_fired();
			alloc_fault_arm(0);
			if (r == 0) { /* (an allocation it can do without: the probe) */
				bs_close(bs);
				if (!fired)
					break;
				continue;
			}
			assert_true(fired);
			assert_int_equal(r, -ENOMEM);
			if (inner)
				bs_close(inner); /* not taken */
		}
		assert_true(n > 1 || kind == 0); /* each allocates */
	}
}

/* Each allocation of a crash store's requests fails in turn: the request
 * fails with -ENOMEM (once, from the loop), and the store goes on. */
static void test_alloc_fault_crash_store_io(void **state)
{
	struct fx *f = *state;
	struct bs *bs = NULL;
	static const struct {
		enum bs_op type;
		uint32_t flags;
	} ops[] = { { BS_WRITE, 0 },
		    { BS_READ, 0 },
		    { BS_FLUSH, 0 },
		    { BS_WRITE, BS_F_FUA },
		    { BS_ZERO, 0 } };

	unlink(f->path);
	assert_int_equal(crash_over_file(f, ~0u, BS_CRASH_ANY, NULL, &bs), 0);
	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		for (unsigned n = 1; n < 8; n++) {
			struct op o;
			pattern(f->a, 4 * KIB, 5);
			alloc_fault_arm(n);
			op_start(bs, &o, ops[i].type, ops[i].flags, 8 * KIB,
				 ops[i].type == BS_FLUSH ? 0 : 4 * KIB,
				 ops[i].type == BS_ZERO || ops[i].type == BS_FLUSH
					 ? NULL
					 : (ops[i].type == BS_READ ? f->b : f->a));
			bool fired = alloc_fault_fired();
			alloc_fault_arm(0);
			wait_all(f->ev, &o, 1);
			if (!fired) {
				assert_int_equal(o.res, 0);
				break;
			}
			assert_int_equal(o.res, -ENOMEM);
		}
	}
	assert_int_equal(run_io(f->ev, bs, BS_FLUSH, 0, 0, 0, NULL), 0);
	bs_close(bs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ram, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_buffered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_direct, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_block_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_read_past_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_zero_beyond_1g, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_open_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_type, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_nth_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_nth_write_sticky, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_nth_write_on_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_other_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_parallel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_store_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_store_writeback_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_store_crash_leaves_prefix, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_alloc_fault_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_fault_crash_store_io, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
