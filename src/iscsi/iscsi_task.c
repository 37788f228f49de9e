/* iSCSI tasks: a SCSI Command PDU becomes a task whose command goes to the
 * logical unit (src/scsi/lu.h decodes it, src/scsi/exec.h runs it); this
 * file moves its data (immediate and unsolicited data, R2T, Data-Out,
 * Data-In) and its status, and answers task management through the LU's
 * abort rules. Owns t->st and the command window count of each task. Never
 * decides what a command does to the volume or to the LU's state.
 *
 * Task states (t->st, written by task_set_state only):
 *   NEW       allocated for a SCSI Command PDU, being decoded
 *   DATA_OUT  waiting for write data (immediate, unsolicited, R2T'd Data-Out)
 *   EXEC      at the logical unit: exec_start() runs it against the volume
 *   RESPONSE  its answer (Data-In with status, or SCSI Response) is queued;
 *             it lives until the PDUs pointing into its buffer have left
 *   ABORTED   aborted by task management, a PREEMPT AND ABORT, the connection
 *             going, or a refused data PDU: nothing more is sent for it, its
 *             data is dropped, an I/O in flight finishes unanswered
 *   DONE      freed (the last reference went)
 * Transitions:
 *   NEW -> DATA_OUT                 [task_cmd: write data to come]
 *   NEW, DATA_OUT -> EXEC           [task_exec: all data in, or none needed]
 *   NEW, DATA_OUT, EXEC -> RESPONSE [task_answered, from send_status or the
 *                                    last send_data_in PDU]
 *   NEW, DATA_OUT, EXEC -> ABORTED  [task_abort: ABORT TASK, the LU's task set
 *                                    rules, on_closed; task_rx_lost; task_dout_fail
 *                                    when no status could be sent]
 *   RESPONSE, ABORTED -> DONE       [task_free]
 *   NEW, EXEC -> DONE               [task_free: the connection died before the
 *                                    answer could be queued]
 * Besides the state, r2t_out and unsol_open track the Data-Out sequences of a
 * DATA_OUT task, owned is the reference the receive side holds, in_window
 * the command window count: each is written beside the transition it goes
 * with, none of them decides the lifecycle. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"
#include "iscsi_conn.h"

_Static_assert(ISCSI_CDB_LEN == LU_CDB_LEN, "an iSCSI CDB fits struct lu_cmd");

static const char *const tstate_name[TS_DONE + 1] = {
	[TS_NEW] = "NEW",           [TS_DATA_OUT] = "DATA_OUT", [TS_EXEC] = "EXEC",
	[TS_RESPONSE] = "RESPONSE", [TS_ABORTED] = "ABORTED",   [TS_DONE] = "DONE",
};

/* The one writer of t->st: checks the transition against the table in the
 * header comment and counts it. */
static void task_set_state(struct task *t, enum tstate to)
{
	static const bool legal[TS_DONE + 1][TS_DONE + 1] = {
		[TS_NEW] = { [TS_DATA_OUT] = true,
			     [TS_EXEC] = true,
			     [TS_RESPONSE] = true,
			     [TS_ABORTED] = true,
			     [TS_DONE] = true },
		[TS_DATA_OUT] = { [TS_EXEC] = true, [TS_RESPONSE] = true, [TS_ABORTED] = true },
		[TS_EXEC] = { [TS_RESPONSE] = true, [TS_ABORTED] = true, [TS_DONE] = true },
		[TS_RESPONSE] = { [TS_DONE] = true },
		[TS_ABORTED] = { [TS_DONE] = true },
		/* DONE is final */
	};

	if (!legal[t->st][to]) {
		log_err("iscsi: task %08x: illegal transition %s -> %s refused", t->itt,
			tstate_name[t->st], tstate_name[to]);
		assert(!"illegal iSCSI task state transition");
		return;
	}
	t->st = to;
	t->c->srv->task_entered[to]++;
}

/* ---------- references and lifetime ---------- */

/* The task is answered (its status is being queued) or gone: its place in
 * the command window opens with the PDU that carries the answer. */
static void task_unwin(struct task *t)
{
	if (t->in_window) {
		t->in_window = false;
		t->c->nwin--;
	}
}

static void task_answered(struct task *t)
{
	task_unwin(t);
	task_set_state(t, TS_RESPONSE);
}

static void task_free(struct task *t)
{
	struct iconn *c = t->c;

	task_set_state(t, TS_DONE);
	list_del(&t->link);
	c->ntasks--;
	task_unwin(t);
	c->held -= t->charged;
	if (t->cmd.buf)
		bufpool_put(&c->srv->pool, t->cmd.buf, MAX(t->cmd.buf_len, 4096u));
	exec_fini(&t->cmd);
	free(t);
	if (c->st == CS_LOGOUT && c->ntasks == 0 && c->refs == 1)
		conn_kill(c, NULL);
	conn_unhold(c);
	conn_unref(c);
}

void task_put(struct task *t)
{
	if (--t->refs == 0)
		task_free(t);
}

/* n more bytes of t's buffers count in the connection's held bytes. */
static void task_charge(struct task *t, size_t n)
{
	t->charged += n;
	t->c->held += n;
}

/* Drops the reference the task holds on itself until its data is all in
 * (or it is answered without I/O, or aborted). Idempotent. */
static void task_release(struct task *t)
{
	if (!t->owned)
		return;
	t->owned = false;
	task_put(t);
}

static struct task *task_find(struct iconn *c, uint32_t itt)
{
	struct list *pos, *tmp;
	list_for_each_safe (pos, tmp, &c->tasks) {
		struct task *t = container_of(pos, struct task, link);
		if (t->itt == itt)
			return t;
	}
	return NULL;
}

static void task_abort(struct task *t)
{
	if (t->st == TS_NEW || t->st == TS_DATA_OUT || t->st == TS_EXEC)
		task_set_state(t, TS_ABORTED);
	task_release(t);
}

/* Every task of c aborted: no answer will be sent for any of them. */
void tasks_abort(struct iconn *c)
{
	struct list *pos, *tmp;
	list_for_each_safe (pos, tmp, &c->tasks)
		task_abort(container_of(pos, struct task, link));
}

bool task_io_busy(const struct task *t)
{
	return exec_busy(&t->cmd);
}

/* ---------- status, Data-In, R2T ---------- */

/* SCSI Response: status, sense, residuals. */
static void send_status(struct task *t, uint8_t status, const uint8_t *sense, uint32_t sense_len,
			uint32_t xfer)
{
	struct iconn *c = t->c;
	uint32_t dlen = sense_len ? sense_len + 2 : 0;
	struct opdu *o;

	if (t->st == TS_ABORTED || c->st == CS_DEAD)
		return;
	o = opdu_new(c, ISCSI_OP_SCSI_RSP, ISCSI_F_FINAL, dlen, t->itt);
	if (!o) {
		conn_kill(c, "out of memory");
		return;
	}
	o->buf[2] = 0; /* command completed at target */
	o->buf[3] = status;
	if (xfer < t->expected) {
		o->buf[1] |= ISCSI_RSP_UNDERFLOW;
		iscsi_put32(o->buf + 44, t->expected - xfer);
	} else if (xfer > t->expected) {
		o->buf[1] |= ISCSI_RSP_OVERFLOW;
		iscsi_put32(o->buf + 44, xfer - t->expected);
	}
	iscsi_put32(o->buf + 36, t->datasn);
	if (sense_len) {
		iscsi_put16(opdu_data(o), (uint16_t)sense_len);
		memcpy(opdu_data(o) + 2, sense, sense_len);
	}
	task_answered(t);
	opdu_send(c, o, true, NULL, 0);
}

/* Data-In of len bytes at data (the last PDU carries GOOD status: phase
 * collapse); in_buf: data points into the task's buffer (block data, no
 * padding). */
static void send_data_in(struct task *t, const uint8_t *data, uint32_t len, bool in_buf)
{
	struct iconn *c = t->c;
	uint32_t sent = MIN(len, t->expected), off = 0;
	/* whole words: a segment sent from the block buffer carries no padding */
	uint32_t seg = MAX(c->p.mrdsl_initiator, 512u) & ~3u;

	if (t->st == TS_ABORTED || c->st == CS_DEAD)
		return;
	if (sent == 0) { /* nothing fits the expected length: status only */
		send_status(t, 0, NULL, 0, len);
		return;
	}
	do {
		uint32_t n = MIN(seg, sent - off);
		bool last = off + n >= sent;
		struct opdu *o = opdu_new(c, ISCSI_OP_DATA_IN, last ? ISCSI_F_FINAL : 0,
					  in_buf ? 0 : n, t->itt);
		if (!o) {
			conn_kill(c, "out of memory");
			return;
		}
		/* DataSegmentLength is n even when the data travels separately */
		o->buf[5] = (uint8_t)(n >> 16);
		o->buf[6] = (uint8_t)(n >> 8);
		o->buf[7] = (uint8_t)n;
		iscsi_put32(o->buf + 20, ISCSI_RESERVED_TAG);
		iscsi_put32(o->buf + 36, t->datasn++);
		iscsi_put32(o->buf + 40, off);
		if (last) {
			o->buf[1] |= ISCSI_DIN_STATUS;
			o->buf[3] = 0; /* GOOD */
			if (len < t->expected) {
				o->buf[1] |= ISCSI_DIN_UNDERFLOW;
				iscsi_put32(o->buf + 44, t->expected - len);
			} else if (len > t->expected) {
				o->buf[1] |= ISCSI_DIN_OVERFLOW;
				iscsi_put32(o->buf + 44, len - t->expected);
			}
		}
		if (last)
			task_answered(t);
		if (in_buf) {
			o->t = t;
			t->refs++;
			opdu_send(c, o, last, data + off, n);
		} else {
			memcpy(opdu_data(o), data + off, n);
			opdu_send(c, o, last, NULL, 0);
		}
		off += n;
	} while (off < sent);
}

static void send_r2t(struct task *t)
{
	struct iconn *c = t->c;
	uint32_t want = MIN(c->p.max_burst, t->want - t->cmd.got);
	struct opdu *o;

	if (t->st == TS_ABORTED || c->st == CS_DEAD)
		return;
	o = opdu_new(c, ISCSI_OP_R2T, ISCSI_F_FINAL, 0, t->itt);
	if (!o) {
		conn_kill(c, "out of memory");
		return;
	}
	t->ttt = ++c->next_ttt == ISCSI_RESERVED_TAG ? ++c->next_ttt : c->next_ttt;
	t->r2t_out = true;
	t->r2t_end = t->cmd.got + want;
	t->dout_sn = 0; /* DataSN starts again with every R2T */
	for (int i = 0; i < 8; i++)
		o->buf[8 + i] = (uint8_t)(t->lun >> (56 - 8 * i));
	iscsi_put32(o->buf + 20, t->ttt);
	iscsi_put32(o->buf + 36, t->r2tsn++);
	iscsi_put32(o->buf + 40, t->cmd.got);
	iscsi_put32(o->buf + 44, want);
	opdu_send(c, o, false, NULL, 0);
}

/* ---------- the logical unit's view of a task (src/scsi/exec.h) ---------- */

static struct task *task_of(const struct lu_cmd *cmd)
{
	return container_of(cmd, struct task, cmd);
}

static void cmd_status(struct lu_cmd *cmd, uint8_t status, const uint8_t *sense, uint32_t sense_len,
		       uint32_t xfer)
{
	send_status(task_of(cmd), status, sense, sense_len, xfer);
}

static void cmd_data_in(struct lu_cmd *cmd, const uint8_t *data, uint32_t len, bool in_buf)
{
	send_data_in(task_of(cmd), data, len, in_buf);
}

static bool cmd_aborted(const struct lu_cmd *cmd)
{
	return task_of(cmd)->st == TS_ABORTED;
}

static void cmd_charge(struct lu_cmd *cmd, size_t n)
{
	task_charge(task_of(cmd), n);
}

static void cmd_get(struct lu_cmd *cmd)
{
	task_of(cmd)->refs++;
}

static void cmd_put(struct lu_cmd *cmd)
{
	task_put(task_of(cmd));
}

static const struct lu_cmd_ops cmd_ops = {
	.status = cmd_status,
	.data_in = cmd_data_in,
	.aborted = cmd_aborted,
	.charge = cmd_charge,
	.get = cmd_get,
	.put = cmd_put,
};

static bool nexus_abort_tasks(struct lu_nexus *n)
{
	struct iconn *c = container_of(n, struct iconn, nx);
	bool had = !list_empty(&c->tasks);

	tasks_abort(c);
	return had;
}

static const struct lu_nexus_ops nexus_ops = {
	.abort_tasks = nexus_abort_tasks,
};

/* The I_T nexus name "<InitiatorName>,i,0x<ISID>" is stored whole: two
 * initiators are one nexus only when name and ISID are equal. */
_Static_assert(ISCSI_NAME_MAX + sizeof(",i,0x") - 1 + 12 < PR_NAME_MAX,
	       "an initiator port name fits struct pr_nexus");

void task_lu_attach(struct iconn *c)
{
	struct iscsi_server *s = c->srv;
	char name[PR_NAME_MAX];

	snprintf(name, sizeof(name), "%s,i,0x%02x%02x%02x%02x%02x%02x", c->initiator, c->isid[0],
		 c->isid[1], c->isid[2], c->isid[3], c->isid[4], c->isid[5]);
	for (unsigned i = 0; i < s->nvols; i++)
		if (s->lus[i].vol == c->vol)
			lu_nexus_attach(&s->lus[i], &c->nx, name, 1, &nexus_ops);
}

/* ---------- commands and their data ---------- */

/* All of a write's data is here (or there was none to wait for). */
static void task_exec(struct task *t)
{
	if (t->st == TS_ABORTED)
		return;
	task_set_state(t, TS_EXEC);
	exec_start(&t->cmd);
}

/* After data arrived for t: more to ask for, or done. */
static void task_data_progress(struct task *t)
{
	if (t->cmd.got >= t->want) {
		t->r2t_out = false;
		t->unsol_open = false;
		task_exec(t);
		task_release(t);
		return;
	}
	if (t->unsol_open)
		return; /* unsolicited Data-Out still coming */
	if (!t->r2t_out || t->cmd.got >= t->r2t_end)
		send_r2t(t);
}

/* A command's CmdSN was checked by the caller (on_rx); its immediate data
 * (h->dsl bytes) is received next, into the task's buffer or dropped.
 * Returns the task to receive into. */
struct task *task_cmd(struct iconn *c, const struct iscsi_bhs *h)
{
	struct task *t;
	struct scsi_req *q;

	if (c->discovery) {
		send_reject(c, ISCSI_REJECT_PROTOCOL, c->raw);
		conn_kill(c, "SCSI command in a discovery session");
		return NULL;
	}
	if (task_find(c, h->itt)) {
		conn_kill(c, "task tag already in use");
		return NULL;
	}
	t = calloc(1, sizeof(*t)); /* st: TS_NEW is 0 */
	if (!t) {
		conn_kill(c, "out of memory");
		return NULL;
	}
	t->c = c;
	t->cmd.ops = &cmd_ops;
	t->cmd.n = &c->nx;
	t->itt = h->itt;
	t->lun = h->lun;
	t->cmd_sn = h->w24;
	t->expected = h->w20;
	memcpy(t->cmd.cdb, h->cdb, ISCSI_CDB_LEN);
	t->refs = 1;
	t->owned = true;
	list_add_tail(&c->tasks, &t->link);
	c->ntasks++;
	t->in_window = true;
	c->nwin++;
	c->refs++;
	q = &t->cmd.req;
	lu_decode(&c->nx, h->lun, t->cmd.cdb, ISCSI_CDB_LEN, t->expected, q);
	if (q->kind == SCSI_IO && q->data_out_len)
		t->want = t->expected;
	if (q->kind == SCSI_IO && (q->data_out_len || q->data_in_len)) {
		uint32_t n = MAX(MAX(q->data_out_len, q->data_in_len), t->want);
		/* the R and W bits are not checked: the CDB says what happens */
		if (n > MAX_XFER) {
			scsi_error(q, -EPROTO);
		} else if (c->held && c->held + MAX(n, 4096u) > HELD_MAX) {
			/* the reading pause (conn_must_hold) did not keep it under: the
			 * initiator retries, nothing is allocated */
			scsi_done(q, SCSI_TASK_SET_FULL);
		} else if (!(t->cmd.buf = bufpool_get(&c->srv->pool, MAX(n, 4096u)))) {
			scsi_error(q, -ENOMEM);
		} else {
			t->cmd.buf_len = n;
			task_charge(t, MAX(n, 4096u));
		}
	}
	if (q->kind == SCSI_IO && q->data_out_len &&
	    (h->dsl > t->want || (h->dsl && !c->p.immediate_data) || h->dsl > c->p.first_burst))
		scsi_error(q, -EPROTO);
	if (q->kind != SCSI_IO || q->status) {
		/* answered now; data the initiator sends anyway is dropped (its
		 * Data-Out finds no task) */
		lu_cmd_answer(&t->cmd);
		task_release(t);
		return NULL;
	}
	if (q->data_out_len && !t->want) {
		/* the command's data, but none expected: overflow, nothing written */
		send_status(t, 0, NULL, 0, q->data_out_len);
		task_release(t);
		return NULL;
	}
	if (q->data_out_len) {
		task_set_state(t, TS_DATA_OUT);
		t->unsol_open = !(h->flags & ISCSI_F_FINAL);
		if (t->unsol_open && c->p.initial_r2t) {
			conn_kill(c, "unsolicited data with InitialR2T=Yes");
			return NULL;
		}
		t->refs++; /* the receive's reference */
		return t;  /* immediate data, if any, goes to the buffer; then progress */
	}
	task_exec(t);
	task_release(t);
	return NULL;
}

/* A data PDU of t was refused (wrong DataSN, bad data digest): nothing of the
 * command is written, and it fails with err (the first one) once the
 * initiator has sent the rest of the data it was asked for, as RFC 7143
 * 11.17.1 wants; its later data is dropped. final: that PDU ended its
 * sequence (F bit); unsolicited: it was unsolicited data. */
static void task_dout_fail(struct task *t, int err, bool final, bool unsolicited)
{
	if (!t->dout_err)
		t->dout_err = err;
	if (final && unsolicited)
		t->unsol_open = false;
	else if (final)
		t->r2t_out = false;
	if (t->unsol_open || t->r2t_out)
		return; /* more is on its way */
	scsi_error(&t->cmd.req, t->dout_err);
	send_status(t, t->cmd.req.status, t->cmd.req.sense, t->cmd.req.sense_len, 0);
	task_abort(t); /* answered (RESPONSE) or not answerable: its data is dropped */
}

struct task *task_data_out(struct iconn *c, const struct iscsi_bhs *h)
{
	struct task *t = task_find(c, h->itt);
	uint32_t off = h->w40;

	if (!t || t->st == TS_ABORTED || !t->owned) {
		log_debug("iscsi: Data-Out for a task that takes none (%08x) dropped", h->itt);
		return NULL;
	}
	if (t->dout_err || h->w36 != t->dout_sn) {
		/* The command fails (ABORTED COMMAND, DATA PHASE ERROR), nothing of
		 * it is written; the rest of its data is dropped; the session stays. */
		if (!t->dout_err)
			log_debug("iscsi: Data-Out with DataSN %u, %u expected: command failed",
				  h->w36, t->dout_sn);
		task_dout_fail(t, -EPROTO, h->flags & ISCSI_F_FINAL, h->w20 == ISCSI_RESERVED_TAG);
		return NULL;
	}
	t->dout_sn++;
	if (off != t->cmd.got || (uint64_t)off + h->dsl > t->want ||
	    (h->w20 == ISCSI_RESERVED_TAG
		     ? !t->unsol_open || (uint64_t)off + h->dsl > c->p.first_burst
		     : !t->r2t_out || h->w20 != t->ttt || (uint64_t)off + h->dsl > t->r2t_end)) {
		conn_kill(c, "Data-Out outside what was asked for");
		return NULL;
	}
	t->refs++;
	return t;
}

void task_rx_done(struct task *t, const struct iscsi_bhs *h)
{
	t->cmd.got += h->dsl;
	if (h->opcode == ISCSI_OP_DATA_OUT && (h->flags & ISCSI_F_FINAL)) {
		if (h->w20 == ISCSI_RESERVED_TAG)
			t->unsol_open = false;
		else
			t->r2t_out = false;
	}
	if (t->st != TS_ABORTED)
		task_data_progress(t);
	task_put(t); /* the receive's reference */
}

void task_rx_lost(struct task *t)
{
	if (t->st == TS_NEW || t->st == TS_DATA_OUT || t->st == TS_EXEC)
		task_set_state(t, TS_ABORTED);
	task_put(t);
}

/* A data segment whose digest does not match (RFC 7143 11.7; the Reject is
 * the caller's): a command's data is lost, so the command fails (ABORTED
 * COMMAND, 47/05). */
void task_rx_digest_failed(struct task *t, const struct iscsi_bhs *h)
{
	if (t->st != TS_ABORTED && t->owned)
		task_dout_fail(t, -EBADMSG,
			       h->opcode == ISCSI_OP_DATA_OUT && (h->flags & ISCSI_F_FINAL),
			       h->opcode == ISCSI_OP_SCSI_CMD || h->w20 == ISCSI_RESERVED_TAG);
	task_put(t); /* the receive's reference */
}

/* ---------- task management ---------- */

void handle_tmf(struct iconn *c, const struct iscsi_bhs *h)
{
	uint8_t fn = h->flags & 0x7f, rsp = ISCSI_TMF_RSP_COMPLETE;
	struct opdu *o;

	switch (fn) {
	case ISCSI_TMF_ABORT_TASK: {
		struct task *t = task_find(c, h->w20);
		if (!t) {
			rsp = ISCSI_TMF_RSP_NO_TASK;
			break;
		}
		task_abort(t);
		break;
	}
	case ISCSI_TMF_ABORT_TASK_SET: lu_abort_task_set(&c->nx); break;
	case ISCSI_TMF_CLEAR_TASK_SET: lu_clear_task_set(&c->nx); break;
	case ISCSI_TMF_LUN_RESET:
	case ISCSI_TMF_TARGET_WARM_RESET:
	case ISCSI_TMF_TARGET_COLD_RESET: /* a target has one logical unit, LUN 0 */
		lu_reset(&c->nx, fn == ISCSI_TMF_LUN_RESET);
		break;
	default: rsp = ISCSI_TMF_RSP_NOT_SUPPORTED;
	}
	o = opdu_new(c, ISCSI_OP_TASK_RSP, ISCSI_F_FINAL, 0, h->itt);
	if (!o) {
		conn_kill(c, "out of memory");
		return;
	}
	o->buf[2] = rsp;
	opdu_send(c, o, true, NULL, 0);
	if (fn == ISCSI_TMF_TARGET_COLD_RESET)
		conn_kill(c, "target cold reset");
}
