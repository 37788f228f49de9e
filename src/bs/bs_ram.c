/* RAM backing store for tests and benchmarks of the layers above the disk.
 * Every request completes through a NOP on the ring, so completion order and
 * re-entrancy match the file store (never inside submit). */
#include "bs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

struct bs_ram {
	struct bs bs;
	uint8_t *mem;
};

static void ram_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct bs_io *io = container_of(op, struct bs_io, op);
	struct bs_ram *r = container_of(io->bs, struct bs_ram, bs);
	(void)res;
	(void)flags;

	switch (io->type) {
	case BS_READ:
		memcpy(io->buf, r->mem + io->off, io->len);
		break;
	case BS_WRITE:
		memcpy(r->mem + io->off, io->buf, io->len);
		break;
	case BS_TRIM:
	case BS_ZERO:
		memset(r->mem + io->off, 0, io->len);
		break;
	default:
		break;
	}
	io->done = io->len;
	io->cb(io, 0);
}

static void ram_submit(struct bs *bs, struct bs_io *io)
{
	io->op.cb = ram_cb;
	io_uring_prep_nop(ev_sqe(bs->ev, &io->op));
}

static int ram_block_status(struct bs *bs, uint64_t off, uint64_t len, struct bs_extent *ext,
			    unsigned max, unsigned *n)
{
	(void)bs;
	(void)off;
	if (max < 1)
		return -EINVAL;
	ext[0].len = len;
	ext[0].flags = 0;
	*n = 1;
	return 0;
}

static int ram_sync(struct bs *bs)
{
	(void)bs;
	return 0;
}

static void ram_close(struct bs *bs)
{
	struct bs_ram *r = container_of(bs, struct bs_ram, bs);
	free(r->mem);
	free(r);
}

static const struct bs_ops bs_ram_ops = {
	.name = "ram",
	.submit = ram_submit,
	.block_status = ram_block_status,
	.sync = ram_sync,
	.close = ram_close,
};

int bs_ram_open(struct ev_loop *ev, uint64_t size, struct bs **out)
{
	struct bs_ram *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->mem = calloc(1, size);
	if (!r->mem) {
		free(r);
		return -ENOMEM;
	}
	r->bs.ops = &bs_ram_ops;
	r->bs.ev = ev;
	r->bs.size = size;
	r->bs.align = 1;
	r->bs.caps = BS_CAP_TRIM | BS_CAP_ZERO;
	*out = &r->bs;
	return 0;
}

int bs_open_spec(struct ev_loop *ev, const char *spec, uint64_t size, bool direct,
		 struct bs **out)
{
	if (strcmp(spec, "ram:") == 0)
		return bs_ram_open(ev, size, out);
	return bs_file_open(ev, spec, size, direct, out);
}
