/* What every backing store and its callers share. */
#include "bs.h"

#include "../common/util.h"

static void complete_later(struct ev_deferred *d)
{
	struct bs_io *io = container_of(d, struct bs_io, defer);
	io->cb(io, io->later_res);
}

void bs_complete_later(struct ev_loop *ev, struct bs_io *io, int res)
{
	io->later_res = res;
	io->defer.fn = complete_later;
	ev_defer(ev, &io->defer);
}
