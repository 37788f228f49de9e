/* Fault-injecting backing store: forwards to an inner store and fails the Nth
 * operation of one type (and, when sticky, every later one), so that tests can
 * walk every error path: fail the 1st, 2nd, ... Nth write until the scenario
 * passes. Failures complete from the loop, never inside submit, like real ones. */
#include "bs.h"

#include <errno.h>
#include <stdlib.h>

#include "../common/util.h"

struct bs_fault {
	struct bs bs;
	struct bs *inner;
	enum bs_op type;
	unsigned fail_nth, count;
	bool sticky;
	int err;
};

static void fault_submit(struct bs *bs, struct bs_io *io)
{
	struct bs_fault *f = container_of(bs, struct bs_fault, bs);

	if (io->type == f->type) {
		f->count++;
		if (f->count == f->fail_nth || (f->sticky && f->count > f->fail_nth)) {
			bs_complete_later(bs->ev, io, -f->err);
			return;
		}
	}
	bs_submit(f->inner, io);
}

static int fault_block_status(struct bs *bs, uint64_t off, uint64_t len, struct bs_extent *ext,
			      unsigned max, unsigned *n)
{
	struct bs_fault *f = container_of(bs, struct bs_fault, bs);
	return f->inner->ops->block_status(f->inner, off, len, ext, max, n);
}

static int fault_sync(struct bs *bs)
{
	struct bs_fault *f = container_of(bs, struct bs_fault, bs);
	return f->inner->ops->sync(f->inner);
}

static void fault_close(struct bs *bs)
{
	struct bs_fault *f = container_of(bs, struct bs_fault, bs);
	bs_close(f->inner);
	free(f);
}

static const struct bs_ops bs_fault_ops = {
	.name = "fault",
	.submit = fault_submit,
	.block_status = fault_block_status,
	.sync = fault_sync,
	.close = fault_close,
};

unsigned bs_fault_count(const struct bs *bs)
{
	return bs->ops == &bs_fault_ops ? container_of(bs, struct bs_fault, bs)->count : 0;
}

void bs_fault_disarm(struct bs *bs)
{
	struct bs_fault *f = container_of(bs, struct bs_fault, bs);

	if (bs->ops == &bs_fault_ops) {
		f->fail_nth = 0;
		f->sticky = false;
	}
}

int bs_fault_open(struct bs *inner, enum bs_op type, unsigned fail_nth, bool sticky, int err,
		  struct bs **out)
{
	struct bs_fault *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->bs = *inner;
	f->bs.ops = &bs_fault_ops;
	f->inner = inner;
	f->type = type;
	f->fail_nth = fail_nth;
	f->sticky = sticky;
	f->err = err;
	*out = &f->bs;
	return 0;
}

/* ---- slow store: every operation waits delay_ms before it goes on ---- */

struct bs_slow {
	struct bs bs;
	struct bs *inner;
	unsigned delay_ms;
};

struct slow_op {
	struct ev_timer t;
	struct bs_io *io;
	struct bs *inner;
};

static void slow_go(struct ev_timer *t)
{
	struct slow_op *o = container_of(t, struct slow_op, t);
	struct bs_io *io = o->io;
	struct bs *inner = o->inner;

	free(o);
	bs_submit(inner, io);
}

static void slow_submit(struct bs *bs, struct bs_io *io)
{
	struct bs_slow *s = container_of(bs, struct bs_slow, bs);
	struct slow_op *o;

	if (!s->delay_ms) {
		bs_submit(s->inner, io);
		return;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		bs_complete_later(bs->ev, io, -ENOMEM);
		return;
	}
	o->io = io;
	o->inner = s->inner;
	o->t.fn = slow_go;
	ev_timer_arm(bs->ev, &o->t, (uint64_t)s->delay_ms * 1000000ull);
}

static int slow_block_status(struct bs *bs, uint64_t off, uint64_t len, struct bs_extent *ext,
			     unsigned max, unsigned *n)
{
	struct bs_slow *s = container_of(bs, struct bs_slow, bs);
	return s->inner->ops->block_status(s->inner, off, len, ext, max, n);
}

static int slow_sync(struct bs *bs)
{
	struct bs_slow *s = container_of(bs, struct bs_slow, bs);
	return s->inner->ops->sync(s->inner);
}

static void slow_close(struct bs *bs)
{
	struct bs_slow *s = container_of(bs, struct bs_slow, bs);
	bs_close(s->inner);
	free(s);
}

static const struct bs_ops bs_slow_ops = {
	.name = "slow",
	.submit = slow_submit,
	.block_status = slow_block_status,
	.sync = slow_sync,
	.close = slow_close,
};

int bs_slow_set(struct bs *bs, unsigned delay_ms)
{
	if (bs->ops != &bs_slow_ops)
		return -EINVAL;
	container_of(bs, struct bs_slow, bs)->delay_ms = delay_ms;
	return 0;
}

int bs_slow_open(struct bs *inner, unsigned delay_ms, struct bs **out)
{
	struct bs_slow *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->bs = *inner;
	s->bs.ops = &bs_slow_ops;
	s->inner = inner;
	s->delay_ms = delay_ms;
	*out = &s->bs;
	return 0;
}
