/* The iSCSI target's private header: the server, connection, task and
 * output PDU structs, and the functions one file of src/iscsi calls in
 * another, grouped by the file that defines them. Owns no logic. Never
 * included outside src/iscsi. The connection state machine is written at the
 * top of iscsi_server.c, the task state machine at the top of iscsi_task.c. */
#ifndef TANDEM_ISCSI_CONN_H
#define TANDEM_ISCSI_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/bufpool.h"
#include "../common/list.h"
#include "../net/net.h"
#include "../scsi/exec.h"
#include "../scsi/lu.h"
#include "iscsi_pdu.h"
#include "iscsi_server.h"
#include "iscsi_text.h"

/* Limits per connection (SPEC.md "Limits per connection"). A task counts
 * from its command's arrival until its status has left; MaxCmdSN opens only
 * as tasks end, so an initiator that obeys the window has at most CMD_WINDOW
 * of them, and an immediate command is refused (Reject 0x06) while that
 * many are open. HELD_MAX bounds the memory a connection holds (task
 * buffers and queued output): past it the connection stops reading its
 * socket while anything it holds can drain without input from the
 * initiator; a command whose buffer would still overshoot gets TASK SET
 * FULL. Without this a client that sends READs and never reads its socket
 * pins up to MAX_XFER per 48-byte PDU. */
#define CMD_WINDOW 128u      /* commands the initiator may have outstanding */
#define MAX_XFER (32u << 20) /* largest data transfer of one command */
#define HELD_MAX (64u << 20) /* task buffers + queued output per connection */

/* Connection states (iscsi_server.c, conn_set_state). */
enum cstate { CS_LOGIN = 0, CS_FULL, CS_LOGOUT, CS_DEAD };

/* Task states (iscsi_task.c, task_set_state). */
enum tstate { TS_NEW = 0, TS_DATA_OUT, TS_EXEC, TS_RESPONSE, TS_ABORTED, TS_DONE };

struct iscsi_server {
	struct ev_loop *ev;
	struct lu *lus;      /* [nvols]: the logical unit of each volume */
	struct bufpool pool; /* task data buffers */
	struct net_listener lis;
	char cluster[CFG_NAME_MAX];
	const struct cfg *cfg;
	char addr[CFG_ADDR_MAX];
	struct vol **vols;
	unsigned nvols;
	struct list conns;
	unsigned nconns;
	uint64_t refused; /* connections refused at accept (limits) */
	uint16_t next_tsih;
	bool shutting_down;
	uint64_t conn_entered[CS_DEAD + 1]; /* transitions into each state, for debugging */
	uint64_t task_entered[TS_DONE + 1];
};

struct task;

struct iconn {
	struct net_conn net;
	struct iscsi_server *srv;
	enum cstate st; /* written by conn_set_state only */
	bool discovery, net_closed, logged_in_once;
	struct vol *vol;
	struct lu_nexus nx; /* this session's I_T nexus at vol's logical unit */
	struct iscsi_params p;
	uint8_t isid[6];
	uint16_t tsih;
	uint32_t stat_sn, exp_cmd_sn;
	uint32_t max_cmd_sn; /* the highest MaxCmdSN sent: never decreases */
	size_t held;         /* bytes of task buffers and queued output PDUs */
	unsigned nout;       /* output PDUs queued, not yet sent */
	bool rx_held;        /* reading paused: held >= HELD_MAX */
	struct ev_deferred unhold;
	char initiator[ISCSI_VALUE_MAX + 1];
	/* receive */
	struct iscsi_bhs h;
	uint8_t raw[ISCSI_BHS_LEN]; /* h as received: what a Reject quotes */
	bool have_hdr;
	uint8_t *seg; /* data segment of a non-data PDU */
	/* digests (CRC32C, RFC 7143 11.1): in force in the full feature phase */
	bool hd, dd;
	bool dd_wait;           /* the data is in: its padding and digest come next */
	uint32_t dd_crc;        /* CRC32C of the data received so far */
	const uint8_t *rx_data; /* where the data segment being received goes */
	struct task *rx_task;   /* task whose data is arriving (NULL: into seg or dropped) */
	uint64_t skip;          /* bytes to drop (AHS, padding, refused data) */
	/* login text across PDUs with the C bit */
	struct iscsi_text *login_in;
	/* CHAP (RFC 7143 12.1.3, RFC 1994) */
	const struct cfg_auth *auth; /* what this login must pass; NULL until known */
	enum { CHAP_OFF = 0, CHAP_WAIT_A, CHAP_WAIT_R, CHAP_OK } chap;
	uint8_t chap_id, chap_chal[16];
	/* tasks */
	struct list tasks;
	unsigned ntasks;
	unsigned nwin; /* tasks not answered yet: what MaxCmdSN counts */
	uint32_t next_ttt;
	unsigned refs; /* outgoing PDUs and tasks in flight */
	uint64_t last_rx_ns;
	uint64_t held_out;       /* bytes_out when nop_tick last saw the hold */
	uint64_t accepted_ns;    /* the login must end handshake-timeout after */
	char host[NET_HOST_MAX]; /* the initiator's address, for its limit */
	bool nop_out;            /* a ping is waiting for its answer */
	struct ev_timer nop_timer;
	struct ev_deferred reap;
	struct list link;
};

struct task {
	struct lu_cmd cmd; /* the command at the logical unit: CDB, decode, buffer */
	struct iconn *c;
	enum tstate st; /* written by task_set_state only */
	uint32_t itt, ttt, cmd_sn;
	uint64_t lun;
	uint32_t expected; /* expected data transfer length */
	/* Data-Out sequences while in TS_DATA_OUT (DataPDUInOrder=Yes): */
	bool r2t_out;    /* an R2T is outstanding */
	bool unsol_open; /* unsolicited Data-Out is still coming */
	/* the reference the task holds on itself until its data is all in (or
	 * it is answered without I/O, or aborted): task_release drops it */
	bool owned;
	bool in_window;   /* counted in c->nwin until its answer is queued */
	uint32_t want;    /* write data the initiator sends: its expected length */
	uint32_t r2t_end; /* the R2T outstanding asks for data up to here */
	uint32_t r2tsn, datasn;
	uint32_t dout_sn; /* DataSN the next Data-Out of this sequence carries */
	size_t charged;   /* bytes of buffers counted in c->held */
	int dout_err;     /* a data PDU was refused: the command fails with this */
	unsigned refs;
	struct list link;
};

struct opdu {
	struct net_tx tx;
	struct iconn *c;
	size_t size;    /* allocated, counted in c->held */
	struct task *t; /* referenced while the PDU points into its buffer */
	uint32_t len;   /* BHS, header digest room, padded inline data */
	uint32_t doff;  /* where the data segment starts: 48, or 52 with a header digest */
	uint32_t dlen;  /* inline data bytes */
	uint8_t buf[];  /* ... and 8 more: padding + data digest of separate data */
};

static inline uint8_t *opdu_data(struct opdu *o)
{
	return o->buf + o->doff;
}

/* Bytes on the wire of a received data segment of dsl bytes. */
static inline uint32_t seg_wire(const struct iconn *c, uint32_t dsl)
{
	return ((dsl + 3u) & ~3u) + (c->dd && dsl ? 4u : 0u);
}

/* iscsi_server.c: connections and output */
void conn_set_state(struct iconn *c, enum cstate to);
void conn_kill(struct iconn *c, const char *why);
void conn_unref(struct iconn *c);
void conn_unhold(struct iconn *c);
/* A PDU with dlen bytes of contiguous data (zeroed padding included). */
struct opdu *opdu_new(struct iconn *c, uint8_t opcode, uint8_t flags, uint32_t dlen, uint32_t itt);
/* Fills the sequence numbers (status: StatSN advances, I3) and sends; ext:
 * ext_len bytes of data sent from there rather than inline. */
void opdu_send(struct iconn *c, struct opdu *o, bool status, const void *ext, uint32_t ext_len);
void send_reject(struct iconn *c, uint8_t reason, const uint8_t bhs[ISCSI_BHS_LEN]);

/* iscsi_login.c: login, CHAP, discovery and text */
void target_iqn(const struct iscsi_server *s, const struct vol *v, char *out, size_t len);
void handle_login(struct iconn *c, const struct iscsi_bhs *h, const uint8_t *data);
void handle_text(struct iconn *c, const struct iscsi_bhs *h, const uint8_t *data);

/* iscsi_task.c: SCSI tasks, Data-Out, R2T, Data-In, status, task management */
void task_lu_attach(struct iconn *c); /* the session reaches its LU (login done) */
void task_put(struct task *t);
void tasks_abort(struct iconn *c);
/* A SCSI Command PDU; returns the task its immediate data goes to, or NULL. */
struct task *task_cmd(struct iconn *c, const struct iscsi_bhs *h);
/* A Data-Out PDU: the task its data goes to (NULL: dropped). */
struct task *task_data_out(struct iconn *c, const struct iscsi_bhs *h);
/* The data of the PDU c->h for t is in (the receive's reference is dropped). */
void task_rx_done(struct task *t, const struct iscsi_bhs *h);
/* Receiving data for t failed: the connection is going (err) or the data
 * digest did not match (the command fails). Drops the receive's reference. */
void task_rx_lost(struct task *t);
void task_rx_digest_failed(struct task *t, const struct iscsi_bhs *h);
bool task_io_busy(const struct task *t);
void handle_tmf(struct iconn *c, const struct iscsi_bhs *h);

#endif
