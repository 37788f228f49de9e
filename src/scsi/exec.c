/* Running a decoded command against the volume: see exec.h. Owns the steps
 * of each flow (read, compare, merge, write; pattern chunks; copy chunks) and
 * the order rules they keep. Never decodes a CDB (scsi.c does), never keeps
 * state past the command (lu.c does), never answers other than through
 * cmd->ops. */
#include "exec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"

static struct vol *cmd_vol(const struct lu_cmd *cmd)
{
	return cmd->n->lu->vol;
}

/* The buffers of the second half: from the LU's pool, counted by the
 * transport against its cap. NULL when out of memory. */
static uint8_t *cmp_get(struct lu_cmd *cmd, uint32_t len)
{
	cmd->cmp_len = len;
	cmd->cmp = bufpool_get(cmd->n->lu->pool, MAX(len, 4096u));
	if (cmd->cmp)
		cmd->ops->charge(cmd, MAX(len, 4096u));
	return cmd->cmp;
}

void lu_cmd_answer(struct lu_cmd *cmd)
{
	struct scsi_req *q = &cmd->req;

	if (q->status == 0 && q->data_len)
		cmd->ops->data_in(cmd, q->data, q->data_len, false);
	else
		cmd->ops->status(cmd, q->status, q->sense, q->sense_len, q->data_len);
}

bool exec_busy(const struct lu_cmd *cmd)
{
	return cmd->busy;
}

void exec_fini(struct lu_cmd *cmd)
{
	free(cmd->ext);
	cmd->ext = NULL;
	if (cmd->cmp)
		bufpool_put(cmd->n->lu->pool, cmd->cmp, MAX(cmd->cmp_len, 4096u));
	cmd->cmp = NULL;
	free(cmd->xsegs);
	cmd->xsegs = NULL;
}

/* ---- plain I/O: read, write, flush, trim, zero (UNMAP: extent by extent) ---- */

static void io_done(struct vol_io *io, int res)
{
	struct lu_cmd *cmd = container_of(io, struct lu_cmd, io);

	cmd->busy = false;
	if (res) {
		scsi_error(&cmd->req, res);
		cmd->ops->status(cmd, cmd->req.status, cmd->req.sense, cmd->req.sense_len, 0);
	} else if (cmd->req.op == BS_READ) {
		cmd->ops->data_in(cmd, cmd->buf, cmd->req.data_in_len, true);
	} else if (cmd->ext && cmd->next_ext < cmd->n_ext) {
		struct scsi_extent *e = &cmd->ext[cmd->next_ext++];
		struct vol_io *vio = &cmd->io;
		cmd->busy = true;
		vio->off = e->off;
		vio->len = e->len;
		vol_submit(cmd_vol(cmd), vio);
		return; /* the reference carries over */
	} else {
		cmd->ops->status(cmd, 0, NULL, 0, cmd->req.data_out_len);
	}
	cmd->ops->put(cmd);
}

static void cmd_submit(struct lu_cmd *cmd, enum bs_op op, uint64_t off, uint64_t len, bool fua)
{
	cmd->busy = true;
	cmd->io.type = op;
	cmd->io.flags = fua ? BS_F_FUA : 0;
	cmd->io.off = off;
	cmd->io.len = len;
	cmd->io.buf = (op == BS_READ || op == BS_WRITE) ? cmd->buf : NULL;
	cmd->io.lock = NULL;
	cmd->io.cb = io_done;
	cmd->ops->get(cmd);
	vol_submit(cmd_vol(cmd), &cmd->io);
}

/* ---- compare / merge commands (scsi.h enum scsi_xop) ---- */

static void xop_finish(struct lu_cmd *cmd, int res)
{
	if (cmd->locked) {
		vol_unlock(cmd_vol(cmd), &cmd->lock);
		cmd->locked = false;
	}
	cmd->busy = false;
	if (res)
		scsi_error(&cmd->req, res);
	cmd->ops->status(cmd, cmd->req.status, cmd->req.sense, cmd->req.sense_len,
			 cmd->req.data_out_len);
	cmd->ops->put(cmd);
}

static void xop_write_done(struct vol_io *io, int res)
{
	struct lu_cmd *cmd = container_of(io, struct lu_cmd, io);

	if (!res)
		scsi_done(&cmd->req, SCSI_GOOD);
	xop_finish(cmd, res);
}

/* First byte where a and b differ, or len. */
static uint32_t first_diff(const uint8_t *a, const uint8_t *b, uint32_t len)
{
	uint32_t i = 0;
	while (i < len && a[i] == b[i])
		i++;
	return i;
}

static void xop_read_done(struct vol_io *io, int res)
{
	struct lu_cmd *cmd = container_of(io, struct lu_cmd, io);
	struct scsi_req *q = &cmd->req;
	uint32_t len = (uint32_t)q->len, blk = cmd->n->lu->desc.block, d = len;

	if (res)
		return xop_finish(cmd, res);
	switch (q->xop) {
	case SCSI_XOP_VERIFY:
	case SCSI_XOP_CAW: d = first_diff(cmd->buf, cmd->cmp, len); break;
	case SCSI_XOP_VERIFY_SAME:
		for (uint32_t o = 0; o < len && d == len; o += blk) {
			uint32_t k = first_diff(cmd->buf, cmd->cmp + o, blk);
			if (k < blk)
				d = o + k;
		}
		break;
	case SCSI_XOP_ORWRITE:
		for (uint32_t i = 0; i < len; i++)
			cmd->cmp[i] |= cmd->buf[i];
		break;
	default: break;
	}
	if (d < len) {
		scsi_miscompare(q, d);
		return xop_finish(cmd, 0);
	}
	if (q->xop == SCSI_XOP_VERIFY || q->xop == SCSI_XOP_VERIFY_SAME) {
		scsi_done(q, SCSI_GOOD);
		return xop_finish(cmd, 0);
	}
	if (cmd->ops->aborted(cmd)) /* answered already: nothing may change any more */
		return xop_finish(cmd, -ECANCELED);
	if (q->xop == SCSI_XOP_CAW) /* the write half, from an aligned buffer */
		memcpy(cmd->cmp, cmd->buf + len, len);
	io->type = BS_WRITE;
	io->flags = q->fua ? BS_F_FUA : 0;
	io->buf = cmd->cmp;
	io->lock = &cmd->lock;
	io->cb = xop_write_done;
	vol_submit(cmd_vol(cmd), io);
}

static void xop_locked(struct vol_lock *lk)
{
	struct lu_cmd *cmd = container_of(lk, struct lu_cmd, lock);
	struct vol_io *io = &cmd->io;

	if (cmd->ops->aborted(cmd))
		return xop_finish(cmd, -ECANCELED);
	io->type = BS_READ;
	io->flags = 0;
	io->off = cmd->req.off;
	io->len = cmd->req.len;
	io->buf = cmd->cmp;
	io->lock = NULL;
	io->cb = xop_read_done;
	vol_submit(cmd_vol(cmd), io);
}

static void xop_start(struct lu_cmd *cmd)
{
	struct scsi_req *q = &cmd->req;

	if (!cmp_get(cmd, (uint32_t)q->len)) {
		scsi_error(q, -ENOMEM);
		cmd->ops->status(cmd, q->status, q->sense, q->sense_len, cmd->got);
		return;
	}
	cmd->busy = true;
	cmd->ops->get(cmd);
	if (q->xop == SCSI_XOP_CAW || q->xop == SCSI_XOP_ORWRITE) {
		cmd->lock.off = q->off;
		cmd->lock.len = q->len;
		cmd->lock.granted_cb = xop_locked;
		cmd->locked = true;
		vol_lock(cmd_vol(cmd), &cmd->lock);
	} else {
		xop_locked(&cmd->lock);
	}
}

/* ---- WRITE SAME with a pattern: the block repeated into a buffer of up to
 * PATTERN_CHUNK, written chunk after chunk over the extent ---- */

#define PATTERN_CHUNK (1u << 20)

static void pattern_next(struct lu_cmd *cmd);

static void pattern_done(struct vol_io *io, int res)
{
	struct lu_cmd *cmd = container_of(io, struct lu_cmd, io);

	if (!res && cmd->ops->aborted(cmd))
		res = -ECANCELED;
	if (res || cmd->pat_done >= cmd->ext[0].len) {
		if (!res)
			scsi_done(&cmd->req, SCSI_GOOD);
		return xop_finish(cmd, res);
	}
	pattern_next(cmd);
}

static void pattern_next(struct lu_cmd *cmd)
{
	struct vol_io *io = &cmd->io;
	uint64_t left = cmd->ext[0].len - cmd->pat_done;

	io->type = BS_WRITE;
	io->flags = 0;
	io->off = cmd->ext[0].off + cmd->pat_done;
	io->len = MIN(left, (uint64_t)cmd->cmp_len);
	io->buf = cmd->cmp;
	io->lock = NULL;
	io->cb = pattern_done;
	cmd->pat_done += io->len;
	vol_submit(cmd_vol(cmd), io);
}

static void pattern_start(struct lu_cmd *cmd)
{
	uint32_t blk = cmd->n->lu->desc.block;
	uint64_t len = cmd->ext[0].len;

	if (!cmp_get(cmd, (uint32_t)MIN(len, (uint64_t)PATTERN_CHUNK))) {
		scsi_error(&cmd->req, -ENOMEM);
		cmd->ops->status(cmd, cmd->req.status, cmd->req.sense, cmd->req.sense_len,
				 cmd->got);
		return;
	}
	for (uint32_t o = 0; o < cmd->cmp_len; o += blk)
		memcpy(cmd->cmp + o, cmd->buf, blk);
	cmd->pat_done = 0;
	cmd->busy = true;
	cmd->ops->get(cmd);
	pattern_next(cmd);
}

/* ---- reservations: PERSISTENT RESERVE OUT, RESERVE, RELEASE with `use`
 * bytes of parameter list: a change is stored, sent to the peer, and
 * answered after a flush of the volume (whose completion means the peer has
 * it, in sync mode) ---- */

static void pr_out_run(struct lu_cmd *cmd, uint32_t use)
{
	struct scsi_req *q = &cmd->req;
	int r = lu_pr_out(cmd->n, cmd->cdb, cmd->buf, use, q);

	if (r < 0)
		scsi_error(q, r);
	if (r <= 0)
		return lu_cmd_answer(cmd);
	q->kind = SCSI_IO;
	q->op = BS_FLUSH;
	cmd_submit(cmd, BS_FLUSH, 0, 0, false);
}

/* ---- EXTENDED COPY (src/scsi/xcopy.h): segment after segment, in chunks of
 * up to XCOPY_CHUNK read then written ---- */

#define XCOPY_CHUNK (1u << 20)

static void xcopy_next(struct lu_cmd *cmd);

static void xcopy_end(struct lu_cmd *cmd, int res)
{
	struct xcopy_status *xs = &cmd->n->xs;

	xs->done = true;
	xs->failed = res != 0;
	if (res)
		scsi_error(&cmd->req, res);
	else
		scsi_done(&cmd->req, SCSI_GOOD);
	cmd->busy = false;
	cmd->ops->status(cmd, cmd->req.status, cmd->req.sense, cmd->req.sense_len,
			 cmd->req.data_out_len);
	cmd->ops->put(cmd);
}

static void xcopy_wrote(struct vol_io *io, int res)
{
	struct lu_cmd *cmd = container_of(io, struct lu_cmd, io);
	struct xcopy_status *xs = &cmd->n->xs;

	if (res)
		return xcopy_end(cmd, res);
	cmd->xdone += io->len;
	xs->bytes += io->len;
	if (cmd->xdone >= cmd->xsegs[cmd->xseg].len) {
		cmd->xseg++;
		cmd->xdone = 0;
		xs->segments_processed++;
	}
	if (cmd->ops->aborted(cmd))
		return xcopy_end(cmd, -ECANCELED); /* the status records it as failed */
	if (cmd->xseg >= cmd->nxseg)
		return xcopy_end(cmd, 0);
	xcopy_next(cmd);
}

/* A destination that starts inside its source is copied from the end
 * backwards, so that no chunk reads what an earlier one overwrote. */
static bool xcopy_backwards(const struct xcopy_seg *g)
{
	return g->src_off < g->dst_off && g->dst_off < g->src_off + g->len;
}

/* Offset within the segment of the chunk that starts the remaining work. */
static uint64_t xcopy_at(const struct lu_cmd *cmd, uint64_t chunk)
{
	const struct xcopy_seg *g = &cmd->xsegs[cmd->xseg];
	return xcopy_backwards(g) ? g->len - cmd->xdone - chunk : cmd->xdone;
}

static void xcopy_read(struct vol_io *io, int res)
{
	struct lu_cmd *cmd = container_of(io, struct lu_cmd, io);

	if (res)
		return xcopy_end(cmd, res);
	io->type = BS_WRITE;
	io->off = cmd->xsegs[cmd->xseg].dst_off + xcopy_at(cmd, io->len);
	io->cb = xcopy_wrote;
	vol_submit(cmd_vol(cmd), io);
}

static void xcopy_next(struct lu_cmd *cmd)
{
	struct xcopy_seg *g = &cmd->xsegs[cmd->xseg];
	struct vol_io *io = &cmd->io;

	io->type = BS_READ;
	io->flags = 0;
	io->len = MIN(g->len - cmd->xdone, (uint64_t)cmd->cmp_len);
	io->off = g->src_off + xcopy_at(cmd, io->len);
	io->buf = cmd->cmp;
	io->lock = NULL;
	io->cb = xcopy_read;
	vol_submit(cmd_vol(cmd), io);
}

static void xcopy_run(struct lu_cmd *cmd, uint32_t use)
{
	struct scsi_req *q = &cmd->req;
	struct xcopy_status *xs = &cmd->n->xs;
	uint64_t most = 0;
	uint8_t lid = 0;
	int n;

	cmd->xsegs = calloc(XCOPY_MAX_SEG_DESC, sizeof(*cmd->xsegs));
	if (!cmd->xsegs) {
		scsi_error(q, -ENOMEM);
		return lu_cmd_answer(cmd);
	}
	n = xcopy_parse(&cmd->n->lu->desc, cmd->cdb, cmd->buf, use, cmd->xsegs, XCOPY_MAX_SEG_DESC,
			&lid, q);
	if (n <= 0)
		return lu_cmd_answer(cmd);
	for (int i = 0; i < n; i++)
		most = MAX(most, cmd->xsegs[i].len);
	if (!cmp_get(cmd, (uint32_t)MIN(most, (uint64_t)XCOPY_CHUNK))) {
		scsi_error(q, -ENOMEM);
		return lu_cmd_answer(cmd);
	}
	memset(xs, 0, sizeof(*xs));
	xs->valid = xcopy_hold(cmd->buf, use);
	xs->list_id = lid;
	cmd->nxseg = n;
	cmd->xseg = 0;
	cmd->xdone = 0;
	cmd->busy = true;
	cmd->ops->get(cmd);
	xcopy_next(cmd);
}

/* ---- SET TARGET PORT GROUPS: a planned switchover ---- */

#define STPG_POLL_NS (20ull * 1000000ull)
#define STPG_MAX_NS (30ull * 1000000000ull)

static void stpg_poll(struct ev_timer *t)
{
	struct lu_cmd *cmd = container_of(t, struct lu_cmd, stpg);
	struct vol *v = cmd_vol(cmd);
	struct scsi_req *q = &cmd->req;
	char msg[256] = "";
	int rc = -ECANCELED;

	if (!cmd->ops->aborted(cmd))
		rc = vol_switchover(v, cmd->stpg_to_self, msg, sizeof(msg));
	if (rc == -EAGAIN && ev_now(v->ev) - cmd->stpg_t0 < STPG_MAX_NS) {
		ev_timer_arm(v->ev, &cmd->stpg, STPG_POLL_NS);
		return;
	}
	if (rc == 0) {
		log_info("volume %s: SET TARGET PORT GROUPS: %s is primary now", v->name,
			 cmd->stpg_to_self ? "this node" : "the peer");
		scsi_done(q, SCSI_GOOD);
	} else {
		log_warn("volume %s: SET TARGET PORT GROUPS failed: %s", v->name,
			 rc == -EAGAIN ? "the switchover did not finish in time" : msg);
		scsi_check(q, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_STPG_FAILED);
	}
	cmd->busy = false;
	lu_cmd_answer(cmd);
	cmd->ops->put(cmd);
}

static void stpg_run(struct lu_cmd *cmd, uint32_t use)
{
	struct scsi_req *q = &cmd->req;
	struct lu *lu = cmd->n->lu;
	int id = scsi_stpg(&lu->desc, cmd->cdb, LU_CDB_LEN, cmd->buf, use, q);

	if (id <= 0)
		return lu_cmd_answer(cmd);
	cmd->stpg_to_self = id == lu->desc.tpg[0].id;
	cmd->stpg.fn = stpg_poll;
	cmd->stpg_t0 = ev_now(cmd_vol(cmd)->ev);
	cmd->busy = true;
	cmd->ops->get(cmd);
	stpg_poll(&cmd->stpg);
}

/* ---- the entry: all of a write's data is here (or there was none to wait
 * for) ---- */

void exec_start(struct lu_cmd *cmd)
{
	struct scsi_req *q = &cmd->req;
	uint32_t use = MIN(q->data_out_len, cmd->got);

	if (q->xop == SCSI_XOP_STPG)
		return stpg_run(cmd, use);
	/* An expected length short of the command's data: only whole blocks of
	 * what came are written, and the overflow is reported (SAM-5 5.4). */
	if (!q->needs_params && use < q->data_out_len) {
		use -= use % cmd->n->lu->desc.block;
		if (!use) {
			cmd->ops->status(cmd, 0, NULL, 0, q->data_out_len);
			return;
		}
		cmd_submit(cmd, q->op, q->off, use, q->fua);
		return;
	}
	if (q->needs_params) {
		int n;
		cmd->ext = calloc(SCSI_UNMAP_MAX_DESC, sizeof(*cmd->ext));
		if (!cmd->ext) {
			scsi_error(q, -ENOMEM);
			cmd->ops->status(cmd, q->status, q->sense, q->sense_len, cmd->got);
			return;
		}
		n = scsi_params(&cmd->n->lu->desc, cmd->cdb, LU_CDB_LEN, cmd->buf, use, cmd->ext,
				SCSI_UNMAP_MAX_DESC, q);
		if (n == 0 && q->swp >= 0) /* MODE SELECT of the control page */
			lu_set_swp(cmd->n, q->swp);
		if (n <= 0) {
			cmd->ops->status(cmd, q->status, q->sense, q->sense_len, cmd->got);
			return;
		}
		if (q->pattern)
			return pattern_start(cmd);
		cmd->n_ext = n;
		cmd->next_ext = 1;
		cmd_submit(cmd, q->op, cmd->ext[0].off, cmd->ext[0].len, q->fua);
		return;
	}
	if (q->xop == SCSI_XOP_PR_OUT)
		return pr_out_run(cmd, use);
	if (q->xop == SCSI_XOP_XCOPY)
		return xcopy_run(cmd, use);
	if (q->xop != SCSI_XOP_NONE)
		return xop_start(cmd);
	cmd_submit(cmd, q->op, q->off, q->len, q->fua);
}
