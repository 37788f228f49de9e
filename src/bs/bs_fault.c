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
