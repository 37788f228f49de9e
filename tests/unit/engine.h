/* Shared by the engine unit tests (test_repl_engine.c, test_iscsi_engine.c):
 * a scratch directory in RAM, a recording wrapper around a backing store, and
 * reading a volume's data area back. Header-only, as unit.h.
 * Never: opens a socket, or keeps state between tests. */
#ifndef TANDEM_TESTS_ENGINE_H
#define TANDEM_TESTS_ENGINE_H

#include "unit.h"

#include <errno.h>
#include <sys/stat.h>

#include "../../src/bs/bs.h"
#include "../../src/common/util.h"
#include "../../src/ev/ev.h"
#include "../../src/vol/vol.h"

#define ENG_MS 1000000ull

/* The metadata file needs a file system; /dev/shm keeps it in RAM (the
 * data areas are "ram:" stores). Falls back to $TMPDIR where there is none. */
static inline char *eng_mkdtemp(const char *tag)
{
	struct stat st;
	char *path;

	if (stat("/dev/shm", &st) || !S_ISDIR(st.st_mode) || access("/dev/shm", W_OK))
		return unit_mkdtemp(tag);
	assert_true(asprintf(&path, "/dev/shm/tandem-%s-XXXXXX", tag) > 0);
	assert_non_null(mkdtemp(path));
	return path;
}

/* ---- a backing store that records and can hold what reaches it ---- */

#define REC_MAX 4096
struct rec_op {
	char what;    /* 'S' submitted to the store, 'C' completed */
	uint8_t type; /* enum bs_op */
	uint64_t off, len;
	uint8_t first; /* WRITE: the first data byte */
};

struct rec_io {
	struct bs_io child;
	struct bs_io *parent;
	struct rec_bs *r;
	struct rec_io *next; /* while held */
};

struct rec_bs {
	struct bs bs;
	struct bs *inner;
	bool hold;                        /* requests wait until rec_release */
	struct rec_io *held, **held_tail; /* in arrival order */
	struct rec_op ops[REC_MAX];
	unsigned nops;
};

static inline void rec_log(struct rec_bs *r, char what, const struct bs_io *io)
{
	struct rec_op *o;

	if (r->nops == REC_MAX)
		return;
	o = &r->ops[r->nops++];
	o->what = what;
	o->type = (uint8_t)io->type;
	o->off = io->off;
	o->len = io->len;
	o->first = io->type == BS_WRITE && io->buf ? *(const uint8_t *)io->buf : 0;
}

static inline void rec_child_done(struct bs_io *child, int res)
{
	struct rec_io *ri = container_of(child, struct rec_io, child);
	struct bs_io *p = ri->parent;

	rec_log(ri->r, 'C', p);
	p->done = child->done;
	free(ri);
	p->cb(p, res);
}

static inline void rec_go(struct rec_io *ri)
{
	bs_submit(ri->r->inner, &ri->child);
}

static inline void rec_submit(struct bs *bs, struct bs_io *io)
{
	struct rec_bs *r = container_of(bs, struct rec_bs, bs);
	struct rec_io *ri = calloc(1, sizeof(*ri));

	assert_non_null(ri);
	ri->r = r;
	ri->parent = io;
	ri->child.type = io->type;
	ri->child.flags = io->flags;
	ri->child.off = io->off;
	ri->child.len = io->len;
	ri->child.buf = io->buf;
	ri->child.cb = rec_child_done;
	rec_log(r, 'S', io);
	if (r->hold) {
		*r->held_tail = ri;
		r->held_tail = &ri->next;
		return;
	}
	rec_go(ri);
}

/* Lets the held requests go, in the order they came. */
static inline void rec_release(struct rec_bs *r)
{
	struct rec_io *ri = r->held;

	r->hold = false;
	r->held = NULL;
	r->held_tail = &r->held;
	while (ri) {
		struct rec_io *next = ri->next;
		rec_go(ri);
		ri = next;
	}
}

static inline int rec_block_status(struct bs *bs, uint64_t off, uint64_t len, struct bs_extent *ext,
				   unsigned max, unsigned *n)
{
	struct bs *in = container_of(bs, struct rec_bs, bs)->inner;
	return in->ops->block_status(in, off, len, ext, max, n);
}

static inline int rec_sync(struct bs *bs)
{
	struct bs *in = container_of(bs, struct rec_bs, bs)->inner;
	return in->ops->sync(in);
}

static inline void rec_close(struct bs *bs)
{
	struct rec_bs *r = container_of(bs, struct rec_bs, bs);
	bs_close(r->inner);
	free(r);
}

static const struct bs_ops rec_bs_ops = {
	.name = "recording",
	.submit = rec_submit,
	.block_status = rec_block_status,
	.sync = rec_sync,
	.close = rec_close,
};

/* Puts a recording store in front of v's store (v owns it from now on). */
static inline struct rec_bs *rec_wrap(struct vol *v)
{
	struct rec_bs *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->inner = v->bs;
	r->bs = *v->bs;
	r->bs.ops = &rec_bs_ops;
	r->held_tail = &r->held;
	v->bs = &r->bs;
	return r;
}

/* Index of the first op at or after `from` matching what/type/off (any
 * offset when off is UINT64_MAX), or -1. */
static inline int rec_find(const struct rec_bs *r, unsigned from, char what, enum bs_op type,
			   uint64_t off)
{
	for (unsigned i = from; i < r->nops; i++)
		if (r->ops[i].what == what && r->ops[i].type == type &&
		    (off == UINT64_MAX || r->ops[i].off == off))
			return (int)i;
	return -1;
}

/* ---- reading a data area back ---- */

struct eng_read {
	struct bs_io io;
	int res, done;
};

static inline void eng_read_cb(struct bs_io *io, int res)
{
	struct eng_read *r = container_of(io, struct eng_read, io);
	r->res = res;
	r->done++;
}

/* Reads len bytes at off from v's store into buf, running the loop. */
static inline void eng_read(struct ev_loop *ev, struct vol *v, uint64_t off, uint64_t len,
			    void *buf)
{
	struct eng_read r;

	memset(&r, 0, sizeof(r));
	r.io.type = BS_READ;
	r.io.off = off;
	r.io.len = len;
	r.io.buf = buf;
	r.io.cb = eng_read_cb;
	bs_submit(v->bs, &r.io);
	for (int i = 0; i < 1000 && !r.done; i++)
		assert_int_equal(ev_run_once(ev, 10 * ENG_MS), 0);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.res, 0);
}

#endif
