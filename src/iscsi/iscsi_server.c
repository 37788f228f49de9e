/* iSCSI front-end: see iscsi_server.h. This file owns the connection: its
 * state (c->st), output PDUs and the sequence numbers they carry, the receive
 * parser, NOP and logout, and the server (accept, limits, shutdown). Login
 * and text are iscsi_login.c, SCSI tasks and task management iscsi_task.c.
 * Never runs a SCSI command or touches the logical unit's state itself.
 *
 * Connection states (c->st, written by conn_set_state only):
 *   LOGIN   accepted; only Login PDUs until the login ends (I1)
 *   FULL    full feature phase: commands, data, task management, NOP, text
 *   LOGOUT  Logout answered; the connection closes once its tasks are done
 *   DEAD    conn_kill or the peer closed: waiting for in-flight work to end
 * Transitions:
 *   (accept)      -> LOGIN  [on_accept: calloc, CS_LOGIN is 0]
 *   LOGIN  -> FULL          [handle_login: response with T=1, NSG=FullFeature]
 *   LOGIN  -> DEAD          [conn_kill: login refused (status != 0 sent),
 *                            malformed PDU, handshake-timeout; on_closed]
 *   FULL   -> LOGOUT        [handle_logout: Logout request answered]
 *   FULL   -> DEAD          [conn_kill: protocol error, idle initiator not
 *                            answering NOP-In, shutdown; on_closed: peer gone]
 *   LOGOUT -> DEAD          [conn_kill: logout response sent and no task
 *                            left (opdu_done, task_free); on_closed] */
#include "iscsi_server.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/crc32c.h"
#include "../common/list.h"
#include "../common/log.h"
#include "../common/util.h"
#include "../net/net.h"
#include "iscsi_conn.h"

#define RXBUF (64u << 10)
#define NOP_IDLE_NS (5ull * 1000000000ull)  /* ping an initiator silent this long */
#define NOP_DEAD_NS (15ull * 1000000000ull) /* drop one silent this long */

static const char *const cstate_name[CS_DEAD + 1] = {
	[CS_LOGIN] = "LOGIN",
	[CS_FULL] = "FULL",
	[CS_LOGOUT] = "LOGOUT",
	[CS_DEAD] = "DEAD",
};

/* The one writer of c->st: checks the transition against the table in the
 * header comment and counts it. */
void conn_set_state(struct iconn *c, enum cstate to)
{
	static const bool legal[CS_DEAD + 1][CS_DEAD + 1] = {
		[CS_LOGIN] = { [CS_FULL] = true, [CS_DEAD] = true },
		[CS_FULL] = { [CS_LOGOUT] = true, [CS_DEAD] = true },
		[CS_LOGOUT] = { [CS_DEAD] = true },
		/* DEAD is final */
	};

	if (!legal[c->st][to]) {
		log_err("iscsi: connection %d: illegal transition %s -> %s refused", c->net.fd,
			cstate_name[c->st], cstate_name[to]);
		assert(!"illegal iSCSI connection state transition");
		return;
	}
	c->st = to;
	c->srv->conn_entered[to]++;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---------- connections and output ---------- */

static void conn_reap(struct ev_deferred *d)
{
	struct iconn *c = container_of(d, struct iconn, reap);
	struct iscsi_server *s = c->srv;

	if (!c->net_closed || c->refs)
		return;
	ev_timer_cancel(s->ev, &c->nop_timer);
	ev_undefer(s->ev, &c->unhold);
	list_del(&c->link);
	s->nconns--;
	free(c->seg);
	free(c->login_in);
	net_conn_destroy(&c->net);
	free(c);
}

void conn_unref(struct iconn *c)
{
	c->refs--;
	if (c->net_closed && c->refs == 0)
		ev_defer(c->srv->ev, &c->reap);
}

void conn_kill(struct iconn *c, const char *why)
{
	if (c->st == CS_DEAD)
		return;
	if (why)
		log_info("iscsi: closing connection %d (%s): %s", c->net.fd,
			 c->initiator[0] ? c->initiator : "no login yet", why);
	conn_set_state(c, CS_DEAD);
	net_close(&c->net);
}

static void opdu_done(struct net_tx *tx, int err)
{
	struct opdu *o = container_of(tx, struct opdu, tx);
	struct iconn *c = o->c;
	(void)err;
	c->held -= o->size;
	c->nout--;
	if (o->t)
		task_put(o->t);
	free(o);
	conn_unhold(c);
	if (c->st == CS_LOGOUT && c->ntasks == 0 && c->refs == 1)
		conn_kill(c, NULL);
	conn_unref(c);
}

struct opdu *opdu_new(struct iconn *c, uint8_t opcode, uint8_t flags, uint32_t dlen, uint32_t itt)
{
	uint32_t padded = (dlen + 3) & ~3u, doff = ISCSI_BHS_LEN + (c->hd ? 4u : 0u);
	struct opdu *o = calloc(1, sizeof(*o) + doff + padded + 8u);

	if (!o)
		return NULL;
	o->c = c;
	o->size = sizeof(*o) + doff + padded + 8u;
	o->doff = doff;
	o->dlen = dlen;
	o->len = doff + padded;
	iscsi_bhs_init(o->buf, opcode, flags, dlen, itt);
	return o;
}

/* MaxCmdSN: ExpCmdSN plus the tasks still free, minus one; it only grows
 * (RFC 7143 4.2.2.1), so a command window already granted stays granted. */
static uint32_t window_max(struct iconn *c)
{
	uint32_t open = c->nwin < CMD_WINDOW ? CMD_WINDOW - c->nwin : 0;
	uint32_t m = c->exp_cmd_sn + open - 1;

	if ((int32_t)(m - c->max_cmd_sn) > 0)
		c->max_cmd_sn = m;
	return c->max_cmd_sn;
}

void opdu_send(struct iconn *c, struct opdu *o, bool status, const void *ext, uint32_t ext_len)
{
	iscsi_put32(o->buf + 24, status ? c->stat_sn++ : c->stat_sn);
	iscsi_put32(o->buf + 28, c->exp_cmd_sn);
	iscsi_put32(o->buf + 32, window_max(c));
	if (o->doff > ISCSI_BHS_LEN) /* header digest */
		put_le32(o->buf + ISCSI_BHS_LEN, crc32c(0, o->buf, ISCSI_BHS_LEN));
	if (c->dd && o->dlen && !ext_len) { /* inline data: digest after its padding */
		put_le32(o->buf + o->len, crc32c(0, opdu_data(o), o->len - o->doff));
		o->len += 4;
	}
	o->tx.iov[0].iov_base = o->buf;
	o->tx.iov[0].iov_len = o->len;
	o->tx.iovcnt = 1;
	if (ext_len) {
		/* separate data: padding and digest from the trailer room */
		uint8_t *tr = o->buf + o->len;
		uint32_t pad = -ext_len & 3u, n = pad;
		memset(tr, 0, 4);
		if (c->dd) {
			put_le32(tr + pad, crc32c(crc32c(0, ext, ext_len), tr, pad));
			n += 4;
		}
		o->tx.iov[1].iov_base = (void *)ext;
		o->tx.iov[1].iov_len = ext_len;
		o->tx.iov[2].iov_base = tr;
		o->tx.iov[2].iov_len = n;
		o->tx.iovcnt = n ? 3 : 2;
	}
	o->tx.done = opdu_done;
	c->refs++;
	c->held += o->size;
	c->nout++;
	net_send(&c->net, &o->tx);
}

void send_reject(struct iconn *c, uint8_t reason, const uint8_t bhs[ISCSI_BHS_LEN])
{
	struct opdu *o = opdu_new(c, ISCSI_OP_REJECT, ISCSI_F_FINAL, ISCSI_BHS_LEN,
				  ISCSI_RESERVED_TAG);
	if (!o) {
		conn_kill(c, "out of memory");
		return;
	}
	o->buf[2] = reason;
	memcpy(opdu_data(o), bhs, ISCSI_BHS_LEN);
	opdu_send(c, o, true, NULL, 0);
}

/* ---------- sequence numbers, NOP and logout ---------- */

/* A command's CmdSN must lie in [ExpCmdSN, MaxCmdSN] (serial arithmetic),
 * MaxCmdSN being the highest one sent (window_max). */
static bool cmdsn_ok(struct iconn *c, const struct iscsi_bhs *h)
{
	return h->immediate || ((int32_t)(h->w24 - c->exp_cmd_sn) >= 0 &&
				(int32_t)(c->max_cmd_sn - h->w24) >= 0);
}

static void cmdsn_advance(struct iconn *c, const struct iscsi_bhs *h)
{
	if (!h->immediate && cmdsn_ok(c, h))
		c->exp_cmd_sn = h->w24 + 1;
}

static void handle_nop(struct iconn *c, const struct iscsi_bhs *h, const uint8_t *data)
{
	struct opdu *o;

	if (h->itt == ISCSI_RESERVED_TAG) {
		c->nop_out = false; /* the answer to our ping */
		return;
	}
	o = opdu_new(c, ISCSI_OP_NOP_IN, ISCSI_F_FINAL, h->dsl, h->itt);
	if (!o) {
		conn_kill(c, "out of memory");
		return;
	}
	iscsi_put32(o->buf + 20, ISCSI_RESERVED_TAG);
	if (h->dsl)
		memcpy(opdu_data(o), data, h->dsl);
	opdu_send(c, o, true, NULL, 0);
}

static void handle_logout(struct iconn *c, const struct iscsi_bhs *h)
{
	struct opdu *o = opdu_new(c, ISCSI_OP_LOGOUT_RSP, ISCSI_F_FINAL, 0, h->itt);

	if (!o) {
		conn_kill(c, "out of memory");
		return;
	}
	o->buf[2] = 0; /* closed successfully */
	iscsi_put16(o->buf + 40, (uint16_t)c->p.time2wait);
	iscsi_put16(o->buf + 42, 0);
	conn_set_state(c, CS_LOGOUT);
	log_info("iscsi: %s logged out", c->initiator);
	opdu_send(c, o, true, NULL, 0);
}

/* The idle initiator check: a NOP-In ping after NOP_IDLE_NS of silence, the
 * connection dropped after NOP_DEAD_NS. */
static void nop_tick(struct ev_timer *tm)
{
	struct iconn *c = container_of(tm, struct iconn, nop_timer);
	uint64_t idle;

	if (c->st == CS_DEAD)
		return;
	/* While this side holds off reading (rx_held), the initiator's PDUs
	 * wait in the socket: it is alive as long as it takes our output. */
	if (c->rx_held && c->net.bytes_out != c->held_out) {
		c->held_out = c->net.bytes_out;
		c->last_rx_ns = ev_now(c->srv->ev);
	}
	idle = ev_now(c->srv->ev) - c->last_rx_ns;
	if (c->st == CS_LOGIN && ev_now(c->srv->ev) - c->accepted_ns >=
				     (uint64_t)c->srv->cfg->handshake_timeout_ms * 1000000ull) {
		conn_kill(c, "login not finished within handshake-timeout");
		return;
	}
	if (idle >= NOP_DEAD_NS) {
		conn_kill(c, "initiator does not answer");
		return;
	}
	if (c->st == CS_FULL && idle >= NOP_IDLE_NS && !c->nop_out) {
		struct opdu *o = opdu_new(c, ISCSI_OP_NOP_IN, ISCSI_F_FINAL, 0, ISCSI_RESERVED_TAG);
		if (o) {
			uint32_t ttt = ++c->next_ttt == ISCSI_RESERVED_TAG ? ++c->next_ttt : c->next_ttt;
			iscsi_put32(o->buf + 20, ttt);
			c->nop_out = true;
			opdu_send(c, o, false, NULL, 0);
		}
	}
	ev_timer_arm(c->srv->ev, &c->nop_timer, 1000000000ull);
}

/* ---------- receiving ---------- */

static void dispatch(struct iconn *c);

static void data_done(struct net_conn *nc, int err)
{
	struct iconn *c = container_of(nc, struct iconn, net);
	if (err) {
		if (c->rx_task) {
			struct task *t = c->rx_task;
			c->rx_task = NULL;
			task_rx_lost(t);
		}
		return;
	}
	if (c->dd) { /* padding and digest next (on_rx), then dispatch */
		c->dd_crc = crc32c(0, c->rx_data, c->h.dsl);
		c->dd_wait = true;
		return;
	}
	c->skip += ((c->h.dsl + 3) & ~3u) - c->h.dsl;
	dispatch(c);
}

/* A data segment whose digest does not match: RFC 7143 11.7 Reject (data
 * digest error); a command's data is lost, so the command fails (ABORTED
 * COMMAND, 47/05, task_rx_digest_failed); other PDUs are dropped. */
static void data_digest_failed(struct iconn *c)
{
	struct task *t = c->rx_task;

	log_warn("iscsi: %s: data digest error (opcode 0x%02x)", c->initiator, c->h.opcode);
	send_reject(c, ISCSI_REJECT_DIGEST, c->raw);
	c->have_hdr = false;
	c->rx_task = NULL;
	free(c->seg);
	c->seg = NULL;
	if (t)
		task_rx_digest_failed(t, &c->h);
}

/* The PDU (header, and data when it has any) is complete. */
static void dispatch(struct iconn *c)
{
	struct iscsi_bhs *h = &c->h;
	struct task *t = c->rx_task;

	c->have_hdr = false;
	c->rx_task = NULL;
	if (c->st == CS_DEAD) {
		if (t)
			task_put(t);
		return;
	}
	switch (h->opcode) {
	case ISCSI_OP_LOGIN_REQ:
		handle_login(c, h, c->seg);
		break;
	case ISCSI_OP_TEXT_REQ:
		handle_text(c, h, c->seg);
		break;
	case ISCSI_OP_NOP_OUT:
		handle_nop(c, h, c->seg);
		break;
	case ISCSI_OP_SCSI_CMD:
	case ISCSI_OP_DATA_OUT:
		if (t)
			task_rx_done(t, h);
		break;
	default:
		break;
	}
	free(c->seg);
	c->seg = NULL;
}

/* Anything held that goes away without input from the initiator: output
 * waiting for the socket, or a task in I/O. Tasks waiting for Data-Out do
 * not count: their data may be right behind the PDU that would wait. */
static bool conn_can_drain(struct iconn *c)
{
	struct list *pos, *tmp;

	if (c->nout)
		return true;
	list_for_each_safe(pos, tmp, &c->tasks)
		if (task_io_busy(container_of(pos, struct task, link)))
			return true;
	return false;
}

/* Should the next PDU (opcode op, for a command its expected data transfer
 * length edtl) wait until held bytes drain? Data-Out never waits: it only
 * fills buffers already counted. */
static bool conn_must_hold(struct iconn *c, uint8_t op, uint32_t edtl)
{
	size_t need = 0;

	if (op == ISCSI_OP_DATA_OUT)
		return false;
	if (op == ISCSI_OP_SCSI_CMD)
		need = MAX(MIN(edtl, MAX_XFER), 4096u);
	if (c->held + need <= HELD_MAX || (!c->held && need))
		return false;
	return conn_can_drain(c);
}

static void unhold(struct ev_deferred *d)
{
	struct iconn *c = container_of(d, struct iconn, unhold);

	if (!c->rx_held || c->st == CS_DEAD)
		return;
	c->rx_held = false;
	net_rx_resume(&c->net);
}

/* Held bytes went down: a paused connection reads on (from the loop, not
 * from inside a send completion). on_rx pauses again if still needed. */
void conn_unhold(struct iconn *c)
{
	if (c->rx_held && c->st != CS_DEAD)
		ev_defer(c->srv->ev, &c->unhold);
}

static void on_rx(struct net_conn *nc)
{
	struct iconn *c = container_of(nc, struct iconn, net);

	c->last_rx_ns = ev_now(c->srv->ev);
	while (c->st != CS_DEAD && !nc->closing) {
		size_t avail = net_rx_avail(nc);
		uint32_t max_dsl;
		struct iscsi_bhs *h = &c->h;

		if (c->skip) {
			size_t n = MIN((uint64_t)avail, c->skip);
			if (!n)
				return;
			net_rx_consume(nc, n);
			c->skip -= n;
			continue;
		}
		if (c->dd_wait) {
			uint32_t pad = -c->h.dsl & 3u;
			const uint8_t *p = net_rx_peek(nc);
			bool ok;
			if (avail < pad + 4u)
				return;
			ok = crc32c(c->dd_crc, p, pad) == get_le32(p + pad);
			net_rx_consume(nc, pad + 4u);
			c->dd_wait = false;
			if (ok)
				dispatch(c);
			else
				data_digest_failed(c);
			continue;
		}
		if (avail < ISCSI_BHS_LEN + (c->hd ? 4u : 0u))
			return;
		if (c->hd && crc32c(0, net_rx_peek(nc), ISCSI_BHS_LEN) !=
				     get_le32(net_rx_peek(nc) + ISCSI_BHS_LEN)) {
			/* nothing in the header can be trusted, not even its length */
			conn_kill(c, "header digest error");
			return;
		}
		max_dsl = c->st == CS_LOGIN ? ISCSI_TEXT_MAX : ISCSI_TGT_MRDSL;
		if (conn_must_hold(c, net_rx_peek(nc)[0] & ISCSI_OP_MASK,
				   iscsi_get32(net_rx_peek(nc) + 20))) {
			/* the PDU stays buffered; conn_unhold reads on */
			c->rx_held = true;
			net_rx_pause(nc);
			return;
		}
		if (iscsi_bhs_decode(net_rx_peek(nc), 0, max_dsl, h)) {
			if (c->st == CS_FULL && (net_rx_peek(nc)[0] & ISCSI_OP_MASK) < 0x20 &&
			    h->ahs_len == 0 && h->dsl <= max_dsl) {
				/* a known frame with an opcode we do not serve */
				send_reject(c, ISCSI_REJECT_CMD_NOT_SUPPORTED, net_rx_peek(nc));
				net_rx_consume(nc, ISCSI_BHS_LEN + (c->hd ? 4u : 0u));
				c->skip = seg_wire(c, h->dsl);
				continue;
			}
			conn_kill(c, "malformed PDU header");
			return;
		}
		memcpy(c->raw, net_rx_peek(nc), ISCSI_BHS_LEN);
		net_rx_consume(nc, ISCSI_BHS_LEN + (c->hd ? 4u : 0u));
		c->have_hdr = true;
		/* I1: only Login before the full feature phase */
		if (c->st == CS_LOGIN && h->opcode != ISCSI_OP_LOGIN_REQ) {
			conn_kill(c, "PDU before login");
			return;
		}
		if (c->st == CS_FULL && h->opcode == ISCSI_OP_LOGIN_REQ) {
			conn_kill(c, "login in the full feature phase");
			return;
		}
		if (c->st == CS_LOGOUT) {
			c->skip = seg_wire(c, h->dsl);
			c->have_hdr = false;
			continue;
		}
		if ((h->opcode == ISCSI_OP_SCSI_CMD || h->opcode == ISCSI_OP_TASK_REQ ||
		     h->opcode == ISCSI_OP_TEXT_REQ || h->opcode == ISCSI_OP_LOGOUT_REQ ||
		     (h->opcode == ISCSI_OP_NOP_OUT && h->itt != ISCSI_RESERVED_TAG)) &&
		    c->st == CS_FULL) {
			if (h->immediate && h->opcode == ISCSI_OP_SCSI_CMD &&
			    c->nwin >= CMD_WINDOW) {
				/* immediate commands count against the same cap */
				send_reject(c, ISCSI_REJECT_IMM_CMD, c->raw);
				c->skip = seg_wire(c, h->dsl);
				c->have_hdr = false;
				continue;
			}
			if (!cmdsn_ok(c, h)) {
				send_reject(c, ISCSI_REJECT_PROTOCOL, c->raw);
				c->skip = seg_wire(c, h->dsl);
				c->have_hdr = false;
				continue;
			}
			cmdsn_advance(c, h);
		}
		switch (h->opcode) {
		case ISCSI_OP_SCSI_CMD:
			c->rx_task = task_cmd(c, h);
			if (c->st == CS_DEAD)
				return;
			if (!c->rx_task) {
				/* answered already; immediate data dropped */
				c->skip = seg_wire(c, h->dsl);
				c->have_hdr = false;
				continue;
			}
			if (!h->dsl) {
				dispatch(c);
				continue;
			}
			c->rx_data = c->rx_task->cmd.buf;
			net_rx_direct(nc, c->rx_task->cmd.buf, h->dsl, data_done);
			if (nc->direct_cb)
				return; /* the rest arrives later */
			continue;
		case ISCSI_OP_DATA_OUT: {
			struct task *t = task_data_out(c, h);
			if (c->st == CS_DEAD)
				return;
			if (!t) {
				c->skip = seg_wire(c, h->dsl);
				c->have_hdr = false;
				continue;
			}
			c->rx_task = t;
			if (!h->dsl) {
				dispatch(c);
				continue;
			}
			c->rx_data = t->cmd.buf + h->w40;
			net_rx_direct(nc, t->cmd.buf + h->w40, h->dsl, data_done);
			if (nc->direct_cb)
				return;
			continue;
		}
		case ISCSI_OP_TASK_REQ:
			handle_tmf(c, h);
			c->have_hdr = false;
			continue;
		case ISCSI_OP_LOGOUT_REQ:
			handle_logout(c, h);
			c->have_hdr = false;
			continue;
		case ISCSI_OP_SNACK_REQ:
			send_reject(c, ISCSI_REJECT_SNACK, c->raw);
			c->have_hdr = false;
			continue;
		default:
			break;
		}
		/* login, text, NOP-Out: the data segment into c->seg */
		c->seg = malloc(h->dsl + 4u);
		if (!c->seg) {
			conn_kill(c, "out of memory");
			return;
		}
		if (!h->dsl) {
			dispatch(c);
			continue;
		}
		c->rx_data = c->seg;
		net_rx_direct(nc, c->seg, h->dsl, data_done);
		if (nc->direct_cb)
			return;
	}
}

static void on_closed(struct net_conn *nc)
{
	struct iconn *c = container_of(nc, struct iconn, net);

	lu_nexus_lost(&c->nx); /* attached in the full feature phase only */
	if (c->st != CS_DEAD)
		conn_set_state(c, CS_DEAD);
	c->net_closed = true;
	if (c->rx_task) {
		struct task *t = c->rx_task;
		c->rx_task = NULL;
		task_put(t);
	}
	/* tasks still waiting for data never will get it */
	tasks_abort(c);
	c->refs++;
	conn_unref(c);
}

static const struct net_conn_ops iscsi_net_ops = {
	.on_rx = on_rx,
	.on_closed = on_closed,
};

/* ---------- the server ---------- */

/* Why a new connection from host is refused, or NULL: too many on this
 * listener or from this host (max-connections, max-connections-per-address),
 * or file descriptors running short (kept for control and replication). */
static const char *refuse(struct iscsi_server *s, int fd, const char *host)
{
	struct list *pos, *tmp;
	unsigned same = 0;

	list_for_each_safe(pos, tmp, &s->conns)
		if (strcmp(container_of(pos, struct iconn, link)->host, host) == 0)
			same++;
	return net_refusal(fd, s->nconns, s->cfg->max_conns, same, s->cfg->max_conns_per_addr);
}

static void on_accept(struct net_listener *l, int fd)
{
	struct iscsi_server *s = container_of(l, struct iscsi_server, lis);
	struct iconn *c;
	char host[NET_HOST_MAX];
	const char *why;

	if (s->shutting_down) {
		close(fd);
		return;
	}
	net_peer_host(fd, host);
	if ((why = refuse(s, fd, host))) {
		if (s->refused++ % 100 == 0)
			log_warn("iscsi: refusing a connection from %s: %s (%llu refused so far)",
				 host[0] ? host : "?", why, (unsigned long long)s->refused);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->srv = s; /* c->st is CS_LOGIN (0) */
	snprintf(c->host, sizeof(c->host), "%s", host);
	c->reap.fn = conn_reap;
	c->unhold.fn = unhold;
	c->nop_timer.fn = nop_tick;
	list_init(&c->tasks);
	iscsi_params_default(&c->p);
	c->p.initial_r2t = false; /* our offer; the initiator's Yes wins (OR) */
	c->p.immediate_data = true;
	c->p.max_burst = ISCSI_MAX_BURST;
	c->p.first_burst = ISCSI_FIRST_BURST;
	list_add(&s->conns, &c->link);
	s->nconns++;
	if (net_conn_init(&c->net, s->ev, fd, RXBUF, &iscsi_net_ops)) {
		close(fd);
		c->net.fd = -1;
		c->net_closed = true;
		c->refs++;
		conn_unref(c);
		return;
	}
	c->last_rx_ns = c->accepted_ns = ev_now(s->ev);
	ev_timer_arm(s->ev, &c->nop_timer, 1000000000ull);
}

int iscsi_server_new(struct ev_loop *ev, const char *addr, const struct cfg *cfg,
		     struct vol **vols, unsigned nvols, struct iscsi_server **out)
{
	struct iscsi_server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->ev = ev;
	list_init(&s->conns);
	bufpool_init(&s->pool, 64u << 20);
	s->vols = vols;
	s->nvols = nvols;
	s->lus = calloc(nvols ? nvols : 1, sizeof(*s->lus));
	if (!s->lus) {
		free(s);
		return -ENOMEM;
	}
	snprintf(s->cluster, sizeof(s->cluster), "%s", cfg->cluster);
	for (unsigned i = 0; i < nvols; i++) {
		char iqn[ISCSI_VALUE_MAX + 1];
		target_iqn(s, vols[i], iqn, sizeof(iqn)); /* the SCSI name of its LU */
		lu_init(&s->lus[i], vols[i], iqn, MAX_XFER, &s->pool);
	}
	s->cfg = cfg;
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	r = net_listen(&s->lis, ev, addr, on_accept);
	if (r) {
		free(s->lus);
		free(s);
		return r;
	}
	*out = s;
	return 0;
}

void iscsi_server_shutdown(struct iscsi_server *s)
{
	struct list *pos, *tmp;

	s->shutting_down = true;
	net_listener_close(&s->lis);
	list_for_each_safe(pos, tmp, &s->conns)
		conn_kill(container_of(pos, struct iconn, link), NULL);
}

void iscsi_server_abort(struct iscsi_server *s)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, &s->conns)
		net_abort(&container_of(pos, struct iconn, link)->net);
}

unsigned iscsi_server_conns(const struct iscsi_server *s)
{
	return s->nconns;
}

void iscsi_server_free(struct iscsi_server *s)
{
	if (s) {
		bufpool_drain(&s->pool);
		free(s->lus);
	}
	free(s);
}
