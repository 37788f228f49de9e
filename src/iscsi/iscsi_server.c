/* iSCSI front-end: see iscsi_server.h. Sections: connections and output,
 * login, discovery and text, SCSI tasks (commands, Data-Out, R2T, Data-In,
 * status), task management, NOP and logout, the receive parser, the server. */
#include "iscsi_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include "../common/bufpool.h"
#include "../common/crc32c.h"
#include "../common/list.h"
#include "../common/log.h"
#include "../common/util.h"
#include "../net/net.h"
#include "../scsi/pr.h"
#include "../scsi/scsi.h"
#include "../scsi/xcopy.h"
#include "iscsi_pdu.h"
#include "iscsi_text.h"

#define RXBUF (64u << 10)
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
#define CMD_WINDOW 128u            /* commands the initiator may have outstanding */
#define MAX_XFER (32u << 20)       /* largest data transfer of one command */
#define HELD_MAX (64u << 20)       /* task buffers + queued output per connection */
#define NOP_IDLE_NS (5ull * 1000000000ull)  /* ping an initiator silent this long */
#define NOP_DEAD_NS (15ull * 1000000000ull) /* drop one silent this long */

/* The I_T nexus name "<InitiatorName>,i,0x<ISID>" is stored whole: two
 * initiators are one nexus only when name and ISID are equal. */
_Static_assert(ISCSI_NAME_MAX + sizeof(",i,0x") - 1 + 12 < PR_NAME_MAX,
	       "an initiator port name fits struct pr_nexus");

enum cstate { CS_LOGIN = 0, CS_FULL, CS_LOGOUT, CS_DEAD };

/* What a logical unit keeps across commands and sessions: its reservations
 * (decoded from the volume attributes, which the volume persists and
 * replicates) and the last EXTENDED COPY's result. One per volume. */
struct ilu {
	struct vol *vol;
	struct pr_state pr;
	uint64_t pr_version; /* vol->meta_version that pr was decoded from */
	bool pr_loaded;
};

struct iscsi_server {
	struct ev_loop *ev;
	struct ilu *lus; /* [nvols] */
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
};

struct task;

struct iconn {
	struct net_conn net;
	struct iscsi_server *srv;
	enum cstate st;
	bool discovery, net_closed, logged_in_once;
	struct vol *vol;
	struct ilu *ilu;       /* vol's shared logical unit state */
	struct pr_nexus nexus; /* this session's I_T nexus, for reservations */
	struct xcopy_status xs; /* the last EXTENDED COPY of this I_T nexus */
	struct scsi_lu lu;
	char lu_serial[40], lu_iqn[ISCSI_VALUE_MAX + 1];
	struct iscsi_params p;
	uint8_t isid[6];
	uint16_t tsih;
	uint32_t stat_sn, exp_cmd_sn;
	uint32_t max_cmd_sn;   /* the highest MaxCmdSN sent: never decreases */
	size_t held;           /* bytes of task buffers and queued output PDUs */
	unsigned nout;         /* output PDUs queued, not yet sent */
	bool rx_held;          /* reading paused: held >= HELD_MAX */
	struct ev_deferred unhold;
	char initiator[ISCSI_VALUE_MAX + 1];
	/* receive */
	struct iscsi_bhs h;
	uint8_t raw[ISCSI_BHS_LEN]; /* h as received: what a Reject quotes */
	bool have_hdr;
	uint8_t *seg;          /* data segment of a non-data PDU */
	/* digests (CRC32C, RFC 7143 11.1): in force in the full feature phase */
	bool hd, dd;
	bool dd_wait;          /* the data is in: its padding and digest come next */
	uint32_t dd_crc;       /* CRC32C of the data received so far */
	const uint8_t *rx_data;/* where the data segment being received goes */
	struct task *rx_task;  /* task whose data is arriving (NULL: into seg or dropped) */
	uint64_t skip;         /* bytes to drop (AHS, padding, refused data) */
	/* login text across PDUs with the C bit */
	struct iscsi_text *login_in;
	/* CHAP (RFC 7143 12.1.3, RFC 1994) */
	const struct cfg_auth *auth; /* what this login must pass; NULL until known */
	enum { CHAP_OFF = 0, CHAP_WAIT_A, CHAP_WAIT_R, CHAP_OK } chap;
	uint8_t chap_id, chap_chal[16];
	/* tasks */
	struct list tasks;
	unsigned ntasks;
	unsigned nwin;         /* tasks not answered yet: what MaxCmdSN counts */
	uint32_t next_ttt;
	unsigned refs;         /* outgoing PDUs and tasks in flight */
	/* unit attentions pending for this I_T nexus (one session, one
	 * connection), oldest first, as ASC << 8 | ASCQ */
	uint16_t ua[4];
	unsigned nua;
	uint64_t last_rx_ns;
	uint64_t held_out;     /* bytes_out when nop_tick last saw the hold */
	uint64_t accepted_ns;  /* the login must end handshake-timeout after */
	char host[NET_HOST_MAX]; /* the initiator's address, for its limit */
	bool nop_out;          /* a ping is waiting for its answer */
	struct ev_timer nop_timer;
	struct ev_deferred reap;
	struct list link;
};

struct task {
	struct vol_io io;
	struct iconn *c;
	uint32_t itt, ttt, cmd_sn;
	uint64_t lun;
	uint32_t expected;    /* expected data transfer length */
	uint8_t cdb[ISCSI_CDB_LEN];
	bool aborted, io_busy, r2t_out, unsol_open, owned;
	bool in_window;       /* counted in c->nwin until its answer is queued */
	uint8_t *buf;
	uint32_t buf_len;
	uint32_t want;        /* write data the initiator sends: its expected length */
	uint32_t received;    /* write data received (in order: DataPDUInOrder=Yes) */
	uint32_t r2t_end;     /* the R2T outstanding asks for data up to here */
	uint32_t r2tsn, datasn;
	uint32_t dout_sn;     /* DataSN the next Data-Out of this sequence carries */
	size_t charged;       /* bytes of buf and cmp counted in c->held */
	int dout_err;         /* a data PDU was refused: the command fails with this */
	unsigned refs;
	struct scsi_req req;
	struct scsi_extent *ext; /* UNMAP: extents still to run */
	int next_ext, n_ext;
	/* compare / merge commands (VERIFY BYTCHK, COMPARE AND WRITE, ORWRITE) and
	 * WRITE SAME patterns: a second buffer and the range lock */
	uint8_t *cmp;
	uint32_t cmp_len;
	struct vol_lock lock;
	bool locked;
	uint64_t pat_done; /* WRITE SAME pattern: bytes of the extent written */
	/* EXTENDED COPY: the segments, the one running, bytes of it done */
	struct xcopy_seg *xsegs;
	int xseg, nxseg;
	uint64_t xdone;
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

static uint8_t *opdu_data(struct opdu *o)
{
	return o->buf + o->doff;
}

/* Bytes on the wire of a received data segment of dsl bytes. */
static uint32_t seg_wire(const struct iconn *c, uint32_t dsl)
{
	return ((dsl + 3u) & ~3u) + (c->dd && dsl ? 4u : 0u);
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

static void conn_kill(struct iconn *c, const char *why);
static void conn_unhold(struct iconn *c);
static void task_put(struct task *t);
static void lu_init(struct iconn *c);

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

static void conn_unref(struct iconn *c)
{
	c->refs--;
	if (c->net_closed && c->refs == 0)
		ev_defer(c->srv->ev, &c->reap);
}

static void conn_kill(struct iconn *c, const char *why)
{
	if (c->st == CS_DEAD)
		return;
	if (why)
		log_info("iscsi: closing connection %d (%s): %s", c->net.fd,
			 c->initiator[0] ? c->initiator : "no login yet", why);
	c->st = CS_DEAD;
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

/* A PDU with dlen bytes of contiguous data (zeroed padding included). */
static struct opdu *opdu_new(struct iconn *c, uint8_t opcode, uint8_t flags, uint32_t dlen,
			     uint32_t itt)
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

/* Fills the sequence numbers (status: StatSN advances, I3) and sends. */
static void opdu_send(struct iconn *c, struct opdu *o, bool status, const void *ext,
		      uint32_t ext_len)
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

static void send_reject(struct iconn *c, uint8_t reason, const uint8_t bhs[ISCSI_BHS_LEN])
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

/* ---------- names ---------- */

static void target_iqn(const struct iscsi_server *s, const struct vol *v, char *out, size_t len)
{
	snprintf(out, len, ISCSI_IQN_PREFIX "%s.%s", s->cluster, v->name);
}

static struct vol *find_target(struct iscsi_server *s, const char *iqn)
{
	char name[ISCSI_VALUE_MAX + 1];
	for (unsigned i = 0; i < s->nvols; i++) {
		target_iqn(s, s->vols[i], name, sizeof(name));
		if (strcmp(name, iqn) == 0)
			return s->vols[i];
	}
	return NULL;
}

/* "host:port,1": the configured address, or the connection's own. */
static void portal(struct iconn *c, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "127.0.0.1";
	unsigned port = 3260;
	const char *colon = strrchr(c->srv->addr, ':');

	if (colon) {
		unsigned long n = strtoul(colon + 1, NULL, 10); /* validated by config */
		port = n > 0 && n < 65536 ? (unsigned)n : port;
	}
	if (getsockname(c->net.fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
			port = ntohs(a->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
			char h6[INET6_ADDRSTRLEN];
			inet_ntop(AF_INET6, &a->sin6_addr, h6, sizeof(h6));
			snprintf(host, sizeof(host), "[%s]", h6);
			port = ntohs(a->sin6_port);
		}
	}
	snprintf(out, len, "%s:%u,1", host, port);
}

/* ---------- login ---------- */

struct login_ctx {
	struct iconn *c;
	struct iscsi_text *out;
	char target[ISCSI_VALUE_MAX + 1];
	char session_type[32];
	bool auth_none_ok, auth_chap_ok, saw_auth, bad;
	char why[160];
	char chap_a[64], chap_n[ISCSI_VALUE_MAX + 1], chap_r[ISCSI_VALUE_MAX + 1];
	char chap_i[16], chap_c[ISCSI_VALUE_MAX + 1];
};

static int login_key(void *ctx, const char *key, const char *val)
{
	struct login_ctx *l = ctx;
	struct iconn *c = l->c;
	char resp[64];

	if (strcmp(key, "InitiatorName") == 0) {
		snprintf(c->initiator, sizeof(c->initiator), "%s", val);
		return 0;
	}
	if (strcmp(key, "TargetName") == 0) {
		snprintf(l->target, sizeof(l->target), "%s", val);
		return 0;
	}
	if (strcmp(key, "SessionType") == 0) {
		snprintf(l->session_type, sizeof(l->session_type), "%s", val);
		return 0;
	}
	if (strcmp(key, "InitiatorAlias") == 0 || strcmp(key, "TargetAlias") == 0)
		return 0;
	if (strcmp(key, "AuthMethod") == 0) {
		char tmp[ISCSI_VALUE_MAX + 1], *save = NULL, *tok;
		l->saw_auth = true;
		snprintf(tmp, sizeof(tmp), "%s", val);
		for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (strcmp(tok, "None") == 0)
				l->auth_none_ok = true;
			if (strcmp(tok, "CHAP") == 0)
				l->auth_chap_ok = true;
		}
		return 0; /* answered once the target (and its auth) is known */
	}
#define CHAPKEY(name, field)                                                  \
	if (strcmp(key, name) == 0) {                                         \
		snprintf(l->field, sizeof(l->field), "%s", val);              \
		return 0;                                                     \
	}
	CHAPKEY("CHAP_A", chap_a)
	CHAPKEY("CHAP_N", chap_n)
	CHAPKEY("CHAP_R", chap_r)
	CHAPKEY("CHAP_I", chap_i)
	CHAPKEY("CHAP_C", chap_c)
#undef CHAPKEY
	if (iscsi_negotiate(&c->p, key, val, resp, sizeof(resp))) {
		snprintf(l->why, sizeof(l->why), "bad value for %s: '%s'", key, val);
		l->bad = true;
	}
	if (resp[0])
		return iscsi_text_add(l->out, key, resp);
	if (strcmp(key, "MaxRecvDataSegmentLength") == 0) {
		char mine[16];
		snprintf(mine, sizeof(mine), "%u", ISCSI_TGT_MRDSL);
		return iscsi_text_add(l->out, "MaxRecvDataSegmentLength", mine);
	}
	return 0;
}

static void login_reply(struct iconn *c, const struct iscsi_bhs *h, uint8_t flags, uint16_t status,
			const struct iscsi_text *txt)
{
	uint32_t dlen = txt ? txt->len : 0;
	struct opdu *o = opdu_new(c, ISCSI_OP_LOGIN_RSP, flags, dlen, h->itt);

	if (!o) {
		conn_kill(c, "out of memory");
		return;
	}
	o->buf[2] = 0;    /* version max */
	o->buf[3] = 0;    /* version active */
	memcpy(o->buf + 8, c->isid, 6);
	iscsi_put16(o->buf + 14, status == ISCSI_LOGIN_OK ? c->tsih : 0);
	o->buf[36] = (uint8_t)(status >> 8);
	o->buf[37] = (uint8_t)status;
	if (dlen)
		memcpy(opdu_data(o), txt->buf, dlen);
	opdu_send(c, o, true, NULL, 0);
}

static void login_fail(struct iconn *c, const struct iscsi_bhs *h, uint16_t status,
		       const char *why)
{
	log_warn("iscsi: login of %s refused: %s", c->initiator[0] ? c->initiator : "(unnamed)",
		 why);
	login_reply(c, h, 0, status, NULL);
	conn_kill(c, NULL);
}

static const struct cfg_auth *vol_auth(struct iscsi_server *s, const struct vol *v)
{
	for (unsigned i = 0; i < s->cfg->nvolumes; i++)
		if (strcmp(s->cfg->volumes[i].name, v->name) == 0)
			return &s->cfg->volumes[i].auth;
	return &s->cfg->auth;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* "0x..." hex (RFC 7143 5.1 binary-value) into out; its length, or -1. */
static int hex_decode(const char *v, uint8_t *out, size_t max)
{
	size_t n = 0;

	if (strncmp(v, "0x", 2) && strncmp(v, "0X", 2))
		return -1;
	v += 2;
	if (!*v || strlen(v) % 2 || strlen(v) / 2 > max)
		return -1;
	for (; *v; v += 2) {
		int hi = hexval(v[0]), lo = hexval(v[1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[n++] = (uint8_t)(hi << 4 | lo);
	}
	return (int)n;
}

static void hex_encode(const uint8_t *in, size_t n, char *out)
{
	out[0] = '0';
	out[1] = 'x';
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 + 2 * i] = hex[in[i] >> 4];
		out[3 + 2 * i] = hex[in[i] & 15];
	}
	out[2 + 2 * n] = '\0';
}

/* CHAP response: MD5(id || secret || challenge) (RFC 1994 4.1). */
static int chap_md5(uint8_t id, const char *secret, const uint8_t *chal, size_t clen,
		    uint8_t out[16])
{
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	unsigned n = 16;
	int ok = m && EVP_DigestInit_ex(m, EVP_md5(), NULL) && EVP_DigestUpdate(m, &id, 1) &&
		 EVP_DigestUpdate(m, secret, strlen(secret)) &&
		 EVP_DigestUpdate(m, chal, clen) && EVP_DigestFinal_ex(m, out, &n);
	EVP_MD_CTX_free(m);
	return ok ? 0 : -1;
}

/* The security stage: AuthMethod, then CHAP_A -> challenge, then CHAP_N and
 * CHAP_R (and for mutual CHAP the initiator's CHAP_I/CHAP_C, answered).
 * Returns NULL to go on, or why the login fails. */
static const char *chap_step(struct iconn *c, struct login_ctx *l, struct iscsi_text *out)
{
	const struct cfg_auth *a = c->auth;
	char buf[2 * 1024 + 3];

	if (!a->chap) {
		if (l->saw_auth) {
			if (!l->auth_none_ok)
				return "the initiator offers no AuthMethod this target accepts (None)";
			iscsi_text_add(out, "AuthMethod", "None");
		}
		return NULL;
	}
	if (c->chap == CHAP_OFF) {
		if (!l->saw_auth || !l->auth_chap_ok)
			return "CHAP required, not offered by the initiator";
		iscsi_text_add(out, "AuthMethod", "CHAP");
		c->chap = CHAP_WAIT_A;
		return NULL;
	}
	if (c->chap == CHAP_WAIT_A) {
		char tmp[64], *save = NULL, *tok;
		bool md5 = false;
		snprintf(tmp, sizeof(tmp), "%s", l->chap_a);
		for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, "5") == 0)
				md5 = true;
		if (!md5)
			return "CHAP without MD5 (CHAP_A=5)";
		if (getrandom(c->chap_chal, sizeof(c->chap_chal), 0) != sizeof(c->chap_chal) ||
		    getrandom(&c->chap_id, 1, 0) != 1)
			return "no random bytes for the CHAP challenge";
		snprintf(tmp, sizeof(tmp), "%u", c->chap_id);
		hex_encode(c->chap_chal, sizeof(c->chap_chal), buf);
		iscsi_text_add(out, "CHAP_A", "5");
		iscsi_text_add(out, "CHAP_I", tmp);
		iscsi_text_add(out, "CHAP_C", buf);
		c->chap = CHAP_WAIT_R;
		return NULL;
	}
	if (c->chap == CHAP_WAIT_R) {
		uint8_t want[16], got[16], ichal[1024];
		int n, clen;
		if (!l->chap_n[0] || !l->chap_r[0])
			return "CHAP_N and CHAP_R missing";
		n = hex_decode(l->chap_r, got, sizeof(got));
		if (chap_md5(c->chap_id, a->secret, c->chap_chal, sizeof(c->chap_chal), want) ||
		    strcmp(l->chap_n, a->user) != 0 || n != 16 || CRYPTO_memcmp(got, want, 16)) {
			log_warn("iscsi: CHAP: wrong user name or secret from %s (user '%s')",
				 c->initiator, l->chap_n);
			return "CHAP: wrong user name or secret";
		}
		if (l->chap_i[0] || l->chap_c[0]) {
			/* the initiator wants the target to prove itself: mutual */
			char *end;
			unsigned long id = strtoul(l->chap_i, &end, 10);
			if (!a->muser[0])
				return "mutual CHAP asked for, none configured for this target";
			clen = hex_decode(l->chap_c, ichal, sizeof(ichal));
			if (!l->chap_i[0] || *end || id > 255 || clen <= 0)
				return "malformed CHAP_I or CHAP_C";
			if (clen == (int)sizeof(c->chap_chal) &&
			    memcmp(ichal, c->chap_chal, sizeof(c->chap_chal)) == 0)
				return "the initiator's CHAP challenge repeats the target's";
			if (chap_md5((uint8_t)id, a->msecret, ichal, (size_t)clen, want))
				return "CHAP: digest failed";
			hex_encode(want, 16, buf);
			iscsi_text_add(out, "CHAP_N", a->muser);
			iscsi_text_add(out, "CHAP_R", buf);
		}
		c->chap = CHAP_OK;
		return NULL;
	}
	return NULL;
}

static void handle_login(struct iconn *c, const struct iscsi_bhs *h, const uint8_t *data)
{
	struct login_ctx l = { .c = c };
	struct iscsi_text *out;
	uint8_t csg = ISCSI_LOGIN_CSG(h->flags), nsg = ISCSI_LOGIN_NSG(h->flags);
	bool transit = h->flags & ISCSI_LOGIN_T;
	uint8_t flags;
	int r;

	if (h->b3 > 0) { /* version-min above 0: drafts only this target does not speak */
		login_fail(c, h, ISCSI_LOGIN_UNSUPPORTED_VERSION, "unsupported version");
		return;
	}
	if (!c->logged_in_once) {
		memcpy(c->isid, h->isid, 6);
		c->exp_cmd_sn = h->w24;
		c->max_cmd_sn = h->w24 + CMD_WINDOW - 1;
		c->stat_sn = h->w28; /* ExpStatSN of the first login is ours to start from */
		if (!c->tsih)
			c->tsih = ++c->srv->next_tsih ? c->srv->next_tsih : ++c->srv->next_tsih;
	}
	/* Text continued across PDUs (C bit): collected, answered at the end. */
	if (!c->login_in && !(c->login_in = calloc(1, sizeof(*c->login_in)))) {
		conn_kill(c, "out of memory");
		return;
	}
	if (h->dsl > sizeof(c->login_in->buf) - c->login_in->len) {
		login_fail(c, h, ISCSI_LOGIN_INIT_ERROR, "login text too long");
		return;
	}
	memcpy(c->login_in->buf + c->login_in->len, data, h->dsl);
	c->login_in->len += h->dsl;
	if (h->flags & ISCSI_LOGIN_C) {
		login_reply(c, h, (uint8_t)(csg << 2 | nsg), ISCSI_LOGIN_OK, NULL);
		return;
	}
	out = calloc(1, sizeof(*out));
	if (!out) {
		conn_kill(c, "out of memory");
		return;
	}
	l.out = out;
	r = iscsi_text_parse((const uint8_t *)c->login_in->buf, c->login_in->len, login_key, &l);
	c->login_in->len = 0;
	if (r) {
		free(out);
		login_fail(c, h, ISCSI_LOGIN_INIT_ERROR, "malformed login text");
		return;
	}
	if (l.bad) {
		free(out);
		login_fail(c, h, ISCSI_LOGIN_INIT_ERROR, l.why);
		return;
	}
	if (strlen(c->initiator) > ISCSI_NAME_MAX) {
		/* refused rather than cut: a cut name could equal another's */
		free(out);
		login_fail(c, h, ISCSI_LOGIN_INIT_ERROR, "InitiatorName longer than 223 bytes");
		return;
	}
	if (!c->logged_in_once) {
		if (!c->initiator[0]) {
			free(out);
			login_fail(c, h, ISCSI_LOGIN_MISSING_PARAM, "no InitiatorName");
			return;
		}
		c->discovery = strcmp(l.session_type, "Discovery") == 0;
		if (!c->discovery) {
			c->vol = l.target[0] ? find_target(c->srv, l.target) : NULL;
			if (!c->vol) {
				free(out);
				login_fail(c, h, l.target[0] ? ISCSI_LOGIN_NOT_FOUND :
							      ISCSI_LOGIN_MISSING_PARAM,
					   l.target[0] ? "no such target" : "no TargetName");
				return;
			}
		}
		iscsi_text_add(out, "TargetPortalGroupTag", "1");
		c->logged_in_once = true;
		c->auth = c->discovery ? &c->srv->cfg->auth : vol_auth(c->srv, c->vol);
	}
	if (csg > ISCSI_STAGE_OPERATIONAL || csg == 2 ||
	    (transit && (nsg <= csg || nsg == 2))) {
		free(out);
		login_fail(c, h, ISCSI_LOGIN_INIT_ERROR, "invalid login stage transition");
		return;
	}
	if (csg == ISCSI_STAGE_SECURITY) {
		const char *why = chap_step(c, &l, out);
		if (why) {
			free(out);
			login_fail(c, h, ISCSI_LOGIN_AUTH_FAILED, why);
			return;
		}
		if (c->auth->chap && c->chap != CHAP_OK)
			transit = false; /* the exchange goes on in this stage */
	} else if (c->auth->chap && c->chap != CHAP_OK) {
		free(out);
		login_fail(c, h, ISCSI_LOGIN_AUTH_FAILED,
			   "CHAP required, but the initiator skipped the security stage");
		return;
	}
	flags = (uint8_t)(csg << 2);
	if (transit)
		flags |= ISCSI_LOGIN_T | nsg;
	login_reply(c, h, flags, ISCSI_LOGIN_OK, out);
	free(out);
	if (transit && nsg == ISCSI_STAGE_FULL) {
		c->st = CS_FULL;
		/* I_T nexus and logical unit exist from here on, never before: a
		 * login that fails (wrong CHAP secret) must not touch the LU's
		 * state, e.g. release the SPC-2 reservation of the session with
		 * the same initiator port name when it closes. */
		if (c->vol)
			lu_init(c);
		/* digests start with the first PDU after this response */
		c->hd = c->p.header_digest;
		c->dd = c->p.data_digest;
		log_info("iscsi: %s logged in to %s%s%s%s", c->initiator,
			 c->discovery ? "discovery" : "target ",
			 c->discovery ? "" : c->vol->name,
			 c->hd ? ", header digest CRC32C" : "",
			 c->dd ? ", data digest CRC32C" : "");
	}
}

/* ---------- text (SendTargets) ---------- */

struct text_ctx {
	struct iconn *c;
	struct iscsi_text *out;
};

static int text_key(void *ctx, const char *key, const char *val)
{
	struct text_ctx *t = ctx;
	struct iscsi_server *s = t->c->srv;
	char name[ISCSI_VALUE_MAX + 1], addr[96];

	if (strcmp(key, "SendTargets") != 0)
		return iscsi_text_add(t->out, key, "NotUnderstood");
	portal(t->c, addr, sizeof(addr));
	for (unsigned i = 0; i < s->nvols; i++) {
		struct vol *v = s->vols[i];
		if (!t->c->discovery && v != t->c->vol)
			continue;
		target_iqn(s, v, name, sizeof(name));
		if (strcmp(val, "All") != 0 && strcmp(val, name) != 0 && val[0])
			continue;
		if (iscsi_text_add(t->out, "TargetName", name) ||
		    iscsi_text_add(t->out, "TargetAddress", addr))
			return -ENOSPC;
	}
	return 0;
}

static void handle_text(struct iconn *c, const struct iscsi_bhs *h, const uint8_t *data)
{
	struct text_ctx t = { .c = c };
	struct opdu *o;

	if (h->flags & 0x40) { /* continue: not used by this target's answers */
		send_reject(c, ISCSI_REJECT_CMD_NOT_SUPPORTED, c->raw);
		return;
	}
	t.out = calloc(1, sizeof(*t.out));
	if (!t.out || iscsi_text_parse(data, h->dsl, text_key, &t) ||
	    t.out->len > c->p.mrdsl_initiator) {
		free(t.out);
		conn_kill(c, "malformed or too large text request");
		return;
	}
	o = opdu_new(c, ISCSI_OP_TEXT_RSP, ISCSI_F_FINAL, t.out->len, h->itt);
	if (!o) {
		free(t.out);
		conn_kill(c, "out of memory");
		return;
	}
	iscsi_put32(o->buf + 20, ISCSI_RESERVED_TAG);
	memcpy(opdu_data(o), t.out->buf, t.out->len);
	free(t.out);
	opdu_send(c, o, true, NULL, 0);
}

/* ---------- SCSI tasks ---------- */

/* The task is answered (its status is being queued) or gone: its place in
 * the command window opens with the PDU that carries the answer. */
static void task_unwin(struct task *t)
{
	if (t->in_window) {
		t->in_window = false;
		t->c->nwin--;
	}
}

static void task_free(struct task *t)
{
	struct iconn *c = t->c;
	list_del(&t->link);
	c->ntasks--;
	task_unwin(t);
	c->held -= t->charged;
	if (t->buf)
		bufpool_put(&c->srv->pool, t->buf, MAX(t->buf_len, 4096u));
	free(t->ext);
	if (t->cmp)
		bufpool_put(&c->srv->pool, t->cmp, MAX(t->cmp_len, 4096u));
	free(t->xsegs);
	free(t);
	if (c->st == CS_LOGOUT && c->ntasks == 0 && c->refs == 1)
		conn_kill(c, NULL);
	conn_unhold(c);
	conn_unref(c);
}

static void task_put(struct task *t)
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
	list_for_each_safe(pos, tmp, &c->tasks) {
		struct task *t = container_of(pos, struct task, link);
		if (t->itt == itt)
			return t;
	}
	return NULL;
}

/* Every task of c aborted: no answer will be sent for any of them. */
static void tasks_abort(struct iconn *c)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, &c->tasks) {
		struct task *t = container_of(pos, struct task, link);
		t->aborted = true;
		task_release(t);
	}
}

/* SCSI Response: status, sense, residuals. */
static void send_status(struct task *t, uint8_t status, const uint8_t *sense, uint32_t sense_len,
			uint32_t xfer)
{
	struct iconn *c = t->c;
	uint32_t dlen = sense_len ? sense_len + 2 : 0;
	struct opdu *o;

	if (t->aborted || c->st == CS_DEAD)
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
	task_unwin(t);
	opdu_send(c, o, true, NULL, 0);
}

/* Data-In of len bytes at data (the last PDU carries GOOD status: phase
 * collapse); in_buf: data points into t->buf (block data, no padding). */
static void send_data_in(struct task *t, const uint8_t *data, uint32_t len, bool in_buf)
{
	struct iconn *c = t->c;
	uint32_t sent = MIN(len, t->expected), off = 0;
	/* whole words: a segment sent from the block buffer carries no padding */
	uint32_t seg = MAX(c->p.mrdsl_initiator, 512u) & ~3u;

	if (t->aborted || c->st == CS_DEAD)
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
			task_unwin(t);
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

static void task_finish_req(struct task *t)
{
	struct scsi_req *q = &t->req;

	if (q->status == 0 && q->data_len)
		send_data_in(t, q->data, q->data_len, false);
	else
		send_status(t, q->status, q->sense, q->sense_len, q->data_len);
}

static void io_done(struct vol_io *io, int res)
{
	struct task *t = container_of(io, struct task, io);

	t->io_busy = false;
	if (res) {
		scsi_error(&t->req, res);
		send_status(t, t->req.status, t->req.sense, t->req.sense_len, 0);
	} else if (t->req.op == BS_READ) {
		send_data_in(t, t->buf, t->req.data_in_len, true);
	} else if (t->ext && t->next_ext < t->n_ext) {
		struct scsi_extent *e = &t->ext[t->next_ext++];
		struct vol_io *vio = &t->io;
		t->io_busy = true;
		vio->off = e->off;
		vio->len = e->len;
		vol_submit(t->c->vol, vio);
		return; /* the reference carries over */
	} else {
		send_status(t, 0, NULL, 0, t->req.data_out_len);
	}
	task_put(t);
}

static void task_submit(struct task *t, enum bs_op op, uint64_t off, uint64_t len, bool fua)
{
	t->io_busy = true;
	t->io.type = op;
	t->io.flags = fua ? BS_F_FUA : 0;
	t->io.off = off;
	t->io.len = len;
	t->io.buf = (op == BS_READ || op == BS_WRITE) ? t->buf : NULL;
	t->io.lock = NULL;
	t->io.cb = io_done;
	t->refs++;
	vol_submit(t->c->vol, &t->io);
}

/* ---- compare / merge commands (scsi.h enum scsi_xop) ---- */

static void xop_finish(struct task *t, int res)
{
	if (t->locked) {
		vol_unlock(t->c->vol, &t->lock);
		t->locked = false;
	}
	t->io_busy = false;
	if (res)
		scsi_error(&t->req, res);
	send_status(t, t->req.status, t->req.sense, t->req.sense_len, t->req.data_out_len);
	task_put(t);
}

static void xop_write_done(struct vol_io *io, int res)
{
	struct task *t = container_of(io, struct task, io);

	if (!res)
		scsi_done(&t->req, SCSI_GOOD);
	xop_finish(t, res);
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
	struct task *t = container_of(io, struct task, io);
	struct scsi_req *q = &t->req;
	uint32_t len = (uint32_t)q->len, blk = t->c->lu.block, d = len;

	if (res)
		return xop_finish(t, res);
	switch (q->xop) {
	case SCSI_XOP_VERIFY:
	case SCSI_XOP_CAW:
		d = first_diff(t->buf, t->cmp, len);
		break;
	case SCSI_XOP_VERIFY_SAME:
		for (uint32_t o = 0; o < len && d == len; o += blk) {
			uint32_t k = first_diff(t->buf, t->cmp + o, blk);
			if (k < blk)
				d = o + k;
		}
		break;
	case SCSI_XOP_ORWRITE:
		for (uint32_t i = 0; i < len; i++)
			t->cmp[i] |= t->buf[i];
		break;
	default:
		break;
	}
	if (d < len) {
		scsi_miscompare(q, d);
		return xop_finish(t, 0);
	}
	if (q->xop == SCSI_XOP_VERIFY || q->xop == SCSI_XOP_VERIFY_SAME) {
		scsi_done(q, SCSI_GOOD);
		return xop_finish(t, 0);
	}
	if (t->aborted) /* answered already: nothing may change any more */
		return xop_finish(t, -ECANCELED);
	if (q->xop == SCSI_XOP_CAW) /* the write half, from an aligned buffer */
		memcpy(t->cmp, t->buf + len, len);
	io->type = BS_WRITE;
	io->flags = q->fua ? BS_F_FUA : 0;
	io->buf = t->cmp;
	io->lock = &t->lock;
	io->cb = xop_write_done;
	vol_submit(t->c->vol, io);
}

static void xop_locked(struct vol_lock *lk)
{
	struct task *t = container_of(lk, struct task, lock);
	struct vol_io *io = &t->io;

	if (t->aborted)
		return xop_finish(t, -ECANCELED);
	io->type = BS_READ;
	io->flags = 0;
	io->off = t->req.off;
	io->len = t->req.len;
	io->buf = t->cmp;
	io->lock = NULL;
	io->cb = xop_read_done;
	vol_submit(t->c->vol, io);
}

static void xop_start(struct task *t)
{
	struct scsi_req *q = &t->req;

	t->cmp_len = (uint32_t)q->len;
	t->cmp = bufpool_get(&t->c->srv->pool, MAX(t->cmp_len, 4096u));
	if (!t->cmp) {
		scsi_error(q, -ENOMEM);
		send_status(t, q->status, q->sense, q->sense_len, t->received);
		return;
	}
	task_charge(t, MAX(t->cmp_len, 4096u));
	t->io_busy = true;
	t->refs++;
	if (q->xop == SCSI_XOP_CAW || q->xop == SCSI_XOP_ORWRITE) {
		t->lock.off = q->off;
		t->lock.len = q->len;
		t->lock.granted_cb = xop_locked;
		t->locked = true;
		vol_lock(t->c->vol, &t->lock);
	} else {
		xop_locked(&t->lock);
	}
}

/* WRITE SAME with a pattern: the block repeated into a buffer of up to
 * PATTERN_CHUNK, written chunk after chunk over the extent. */
#define PATTERN_CHUNK (1u << 20)

static void pattern_next(struct task *t);

static void pattern_done(struct vol_io *io, int res)
{
	struct task *t = container_of(io, struct task, io);

	if (!res && t->aborted)
		res = -ECANCELED;
	if (res || t->pat_done >= t->ext[0].len) {
		if (!res)
			scsi_done(&t->req, SCSI_GOOD);
		return xop_finish(t, res);
	}
	pattern_next(t);
}

static void pattern_next(struct task *t)
{
	struct vol_io *io = &t->io;
	uint64_t left = t->ext[0].len - t->pat_done;

	io->type = BS_WRITE;
	io->flags = 0;
	io->off = t->ext[0].off + t->pat_done;
	io->len = MIN(left, (uint64_t)t->cmp_len);
	io->buf = t->cmp;
	io->lock = NULL;
	io->cb = pattern_done;
	t->pat_done += io->len;
	vol_submit(t->c->vol, io);
}

static void pattern_start(struct task *t)
{
	uint32_t blk = t->c->lu.block;
	uint64_t len = t->ext[0].len;

	t->cmp_len = (uint32_t)MIN(len, (uint64_t)PATTERN_CHUNK);
	t->cmp = bufpool_get(&t->c->srv->pool, MAX(t->cmp_len, 4096u));
	if (!t->cmp) {
		scsi_error(&t->req, -ENOMEM);
		send_status(t, t->req.status, t->req.sense, t->req.sense_len, t->received);
		return;
	}
	task_charge(t, MAX(t->cmp_len, 4096u));
	for (uint32_t o = 0; o < t->cmp_len; o += blk)
		memcpy(t->cmp + o, t->buf, blk);
	t->pat_done = 0;
	t->io_busy = true;
	t->refs++;
	pattern_next(t);
}

/* ---- unit attentions (SAM-5 5.14, SPC-4 5.14) ---- */

#define UA_RESET 0x2903       /* BUS DEVICE RESET FUNCTION OCCURRED (LUN reset) */
#define UA_TARGET_RESET 0x2900 /* POWER ON, RESET, OR BUS DEVICE RESET OCCURRED */
#define UA_CLEARED 0x2f00      /* COMMANDS CLEARED BY ANOTHER INITIATOR */

static void ua_add(struct iconn *c, uint16_t asc)
{
	for (unsigned i = 0; i < c->nua; i++)
		if (c->ua[i] == asc)
			return;
	if (c->nua < ARRAY_SIZE(c->ua))
		c->ua[c->nua++] = asc;
}

/* To every session of volume v. */
static void ua_broadcast(struct iscsi_server *s, const struct vol *v, uint16_t asc)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, &s->conns) {
		struct iconn *c = container_of(pos, struct iconn, link);
		if (c->vol == v && c->ilu)
			ua_add(c, asc);
	}
}

/* Every task of every session of c's volume aborted (SAM-5 7.3, 7.6, 7.7:
 * CLEAR TASK SET with TST=0 and the resets reach every I_T nexus; TAS=0, so
 * silently). The other sessions that lost a task are told asc (0: nobody). */
static void tasks_abort_lu(struct iconn *c, uint16_t asc)
{
	struct list *pos, *tmp;
	list_for_each_safe(pos, tmp, &c->srv->conns) {
		struct iconn *o = container_of(pos, struct iconn, link);
		if (o->vol != c->vol || !o->ilu)
			continue;
		if (asc && o != c && !list_empty(&o->tasks))
			ua_add(o, asc);
		tasks_abort(o);
	}
}

/* Reports the oldest pending unit attention instead of running the command
 * (INQUIRY and REPORT LUNS run; REQUEST SENSE returns it as its data).
 * True when q was completed that way. */
static bool ua_report(struct iconn *c, const uint8_t *cdb, struct scsi_req *q)
{
	uint16_t asc;

	if (!c->nua || cdb[0] == SCSI_INQUIRY || cdb[0] == SCSI_REPORT_LUNS)
		return false;
	asc = c->ua[0];
	memmove(c->ua, c->ua + 1, (c->nua - 1) * sizeof(c->ua[0]));
	c->nua--;
	scsi_check(q, SCSI_KEY_UNIT_ATTENTION, asc);
	if (cdb[0] == SCSI_REQUEST_SENSE) {
		memcpy(q->data, q->sense, q->sense_len);
		scsi_data_in(q, q->sense_len, cdb[4]);
	}
	return true;
}

/* ---- reservations (src/scsi/pr.h) ---- */

/* The logical unit's reservations as the volume attributes hold them now
 * (they change under us when the peer primary sends new ones). */
static struct pr_state *ilu_pr(struct ilu *u)
{
	struct vol *v = u->vol;

	if (u->pr_loaded && u->pr_version == v->meta_version)
		return &u->pr;
	if (!v->meta_len || pr_decode(&u->pr, v->meta, v->meta_len)) {
		if (v->meta_len)
			log_warn("volume %s: stored reservations unreadable: starting without",
				 v->name);
		pr_init(&u->pr);
	}
	u->pr_version = v->meta_version;
	u->pr_loaded = true;
	return &u->pr;
}

/* Persists (and replicates) u->pr: 0 or -errno. */
static int ilu_pr_save(struct ilu *u)
{
	uint8_t buf[PR_IMAGE_MAX];
	int n = pr_encode(&u->pr, buf, sizeof(buf)), r;

	if (n < 0)
		return n;
	r = vol_meta_set(u->vol, buf, (size_t)n);
	if (!r)
		u->pr_version = u->vol->meta_version;
	else
		u->pr_loaded = false; /* back to what is stored: the change did not happen */
	return r;
}

/* After a transport event (nexus loss, reset) that may change the state. */
static void ilu_pr_event(struct iconn *c, bool reset)
{
	struct pr_state *s;

	if (!c->ilu || c->vol->role != VOL_PRIMARY)
		return;
	s = ilu_pr(c->ilu);
	if ((reset ? pr_reset(s) : pr_nexus_lost(s, &c->nexus)) && ilu_pr_save(c->ilu))
		log_warn("volume %s: reservations not saved", c->vol->name);
}

/* The other sessions of the volume after a PROUT by c changed *before: the
 * unit attentions pr_ua() names, and for PREEMPT AND ABORT the preempted
 * nexuses' tasks aborted (TAS=0: silently; a task whose I/O is already
 * submitted finishes that I/O unanswered). */
static void pr_out_notify(struct iconn *c, const struct pr_state *before, const uint8_t *cdb)
{
	const struct pr_state *after = ilu_pr(c->ilu);
	bool abort = (cdb[1] & 0x1f) == PR_OUT_PREEMPT_AND_ABORT;
	struct list *pos, *tmp;

	list_for_each_safe(pos, tmp, &c->srv->conns) {
		struct iconn *o = container_of(pos, struct iconn, link);
		uint16_t asc;

		if (o == c || o->vol != c->vol || !o->ilu)
			continue;
		asc = pr_ua(before, after, cdb, &c->nexus, &o->nexus);
		if (!asc)
			continue;
		ua_add(o, asc);
		if (abort && asc == PR_UA_REG_PREEMPTED)
			tasks_abort(o);
	}
}

/* PERSISTENT RESERVE OUT, RESERVE, RELEASE with `use` bytes of parameter
 * list: a change is stored, sent to the peer, and answered after a flush of
 * the volume (whose completion means the peer has it, in sync mode). */
static void pr_out_run(struct task *t, uint32_t use)
{
	struct scsi_req *q = &t->req;
	struct ilu *u = t->c->ilu;
	struct pr_state *before = malloc(sizeof(*before));
	int r;

	if (!before) {
		scsi_error(q, -ENOMEM);
		return task_finish_req(t);
	}
	*before = *ilu_pr(u);
	if (pr_out(ilu_pr(u), &t->c->nexus, t->cdb, t->buf, use, q) <= 0) {
		free(before);
		return task_finish_req(t);
	}
	r = ilu_pr_save(u);
	if (!r)
		pr_out_notify(t->c, before, t->cdb);
	free(before);
	if (r) {
		scsi_error(q, r);
		return task_finish_req(t);
	}
	q->kind = SCSI_IO;
	q->op = BS_FLUSH;
	task_submit(t, BS_FLUSH, 0, 0, false);
}

/* ---- EXTENDED COPY (src/scsi/xcopy.h): segment after segment, in chunks of
 * up to XCOPY_CHUNK read then written ---- */

#define XCOPY_CHUNK (1u << 20)

static void xcopy_next(struct task *t);

static void xcopy_end(struct task *t, int res)
{
	struct xcopy_status *xs = &t->c->xs;

	xs->done = true;
	xs->failed = res != 0;
	if (res)
		scsi_error(&t->req, res);
	else
		scsi_done(&t->req, SCSI_GOOD);
	t->io_busy = false;
	send_status(t, t->req.status, t->req.sense, t->req.sense_len, t->req.data_out_len);
	task_put(t);
}

static void xcopy_wrote(struct vol_io *io, int res)
{
	struct task *t = container_of(io, struct task, io);
	struct xcopy_status *xs = &t->c->xs;

	if (res)
		return xcopy_end(t, res);
	t->xdone += io->len;
	xs->bytes += io->len;
	if (t->xdone >= t->xsegs[t->xseg].len) {
		t->xseg++;
		t->xdone = 0;
		xs->segments_processed++;
	}
	if (t->aborted)
		return xcopy_end(t, -ECANCELED); /* the status records it as failed */
	if (t->xseg >= t->nxseg)
		return xcopy_end(t, 0);
	xcopy_next(t);
}

/* A destination that starts inside its source is copied from the end
 * backwards, so that no chunk reads what an earlier one overwrote. */
static bool xcopy_backwards(const struct xcopy_seg *g)
{
	return g->src_off < g->dst_off && g->dst_off < g->src_off + g->len;
}

/* Offset within the segment of the chunk that starts the remaining work. */
static uint64_t xcopy_at(const struct task *t, uint64_t chunk)
{
	const struct xcopy_seg *g = &t->xsegs[t->xseg];
	return xcopy_backwards(g) ? g->len - t->xdone - chunk : t->xdone;
}

static void xcopy_read(struct vol_io *io, int res)
{
	struct task *t = container_of(io, struct task, io);

	if (res)
		return xcopy_end(t, res);
	io->type = BS_WRITE;
	io->off = t->xsegs[t->xseg].dst_off + xcopy_at(t, io->len);
	io->cb = xcopy_wrote;
	vol_submit(t->c->vol, io);
}

static void xcopy_next(struct task *t)
{
	struct xcopy_seg *g = &t->xsegs[t->xseg];
	struct vol_io *io = &t->io;

	io->type = BS_READ;
	io->flags = 0;
	io->len = MIN(g->len - t->xdone, (uint64_t)t->cmp_len);
	io->off = g->src_off + xcopy_at(t, io->len);
	io->buf = t->cmp;
	io->lock = NULL;
	io->cb = xcopy_read;
	vol_submit(t->c->vol, io);
}

static void xcopy_run(struct task *t, uint32_t use)
{
	struct scsi_req *q = &t->req;
	struct xcopy_status *xs = &t->c->xs;
	uint64_t most = 0;
	uint8_t lid = 0;
	int n;

	t->xsegs = calloc(XCOPY_MAX_SEG_DESC, sizeof(*t->xsegs));
	if (!t->xsegs) {
		scsi_error(q, -ENOMEM);
		return task_finish_req(t);
	}
	n = xcopy_parse(&t->c->lu, t->cdb, t->buf, use, t->xsegs, XCOPY_MAX_SEG_DESC, &lid, q);
	if (n <= 0)
		return task_finish_req(t);
	for (int i = 0; i < n; i++)
		most = MAX(most, t->xsegs[i].len);
	t->cmp_len = (uint32_t)MIN(most, (uint64_t)XCOPY_CHUNK);
	t->cmp = bufpool_get(&t->c->srv->pool, MAX(t->cmp_len, 4096u));
	if (!t->cmp) {
		scsi_error(q, -ENOMEM);
		return task_finish_req(t);
	}
	task_charge(t, MAX(t->cmp_len, 4096u));
	memset(xs, 0, sizeof(*xs));
	xs->valid = xcopy_hold(t->buf, use);
	xs->list_id = lid;
	t->nxseg = n;
	t->xseg = 0;
	t->xdone = 0;
	t->io_busy = true;
	t->refs++;
	xcopy_next(t);
}

/* All of a write's data is here (or there was none to wait for). */
static void task_data_complete(struct task *t)
{
	struct scsi_req *q = &t->req;

	uint32_t use = MIN(q->data_out_len, t->received);

	if (t->aborted)
		return;
	/* An expected length short of the command's data: only whole blocks of
	 * what came are written, and the overflow is reported (SAM-5 5.4). */
	if (!q->needs_params && use < q->data_out_len) {
		use -= use % t->c->lu.block;
		if (!use) {
			send_status(t, 0, NULL, 0, q->data_out_len);
			return;
		}
		task_submit(t, q->op, q->off, use, q->fua);
		return;
	}
	if (q->needs_params) {
		int n;
		t->ext = calloc(SCSI_UNMAP_MAX_DESC, sizeof(*t->ext));
		if (!t->ext) {
			scsi_error(q, -ENOMEM);
			send_status(t, q->status, q->sense, q->sense_len, t->received);
			return;
		}
		n = scsi_params(&t->c->lu, t->cdb, ISCSI_CDB_LEN, t->buf, use, t->ext,
				SCSI_UNMAP_MAX_DESC, q);
		if (n <= 0) {
			send_status(t, q->status, q->sense, q->sense_len, t->received);
			return;
		}
		if (q->pattern)
			return pattern_start(t);
		t->n_ext = n;
		t->next_ext = 1;
		task_submit(t, q->op, t->ext[0].off, t->ext[0].len, q->fua);
		return;
	}
	if (q->xop == SCSI_XOP_PR_OUT)
		return pr_out_run(t, use);
	if (q->xop == SCSI_XOP_XCOPY)
		return xcopy_run(t, use);
	if (q->xop != SCSI_XOP_NONE)
		return xop_start(t);
	task_submit(t, q->op, q->off, q->len, q->fua);
}

static void send_r2t(struct task *t)
{
	struct iconn *c = t->c;
	uint32_t want = MIN(c->p.max_burst, t->want - t->received);
	struct opdu *o;

	if (t->aborted || c->st == CS_DEAD)
		return;
	o = opdu_new(c, ISCSI_OP_R2T, ISCSI_F_FINAL, 0, t->itt);
	if (!o) {
		conn_kill(c, "out of memory");
		return;
	}
	t->ttt = ++c->next_ttt == ISCSI_RESERVED_TAG ? ++c->next_ttt : c->next_ttt;
	t->r2t_out = true;
	t->r2t_end = t->received + want;
	t->dout_sn = 0; /* DataSN starts again with every R2T */
	for (int i = 0; i < 8; i++)
		o->buf[8 + i] = (uint8_t)(t->lun >> (56 - 8 * i));
	iscsi_put32(o->buf + 20, t->ttt);
	iscsi_put32(o->buf + 36, t->r2tsn++);
	iscsi_put32(o->buf + 40, t->received);
	iscsi_put32(o->buf + 44, want);
	opdu_send(c, o, false, NULL, 0);
}

/* After data arrived for t: more to ask for, or done. */
static void task_data_progress(struct task *t)
{
	if (t->received >= t->want) {
		t->r2t_out = false;
		t->unsol_open = false;
		task_data_complete(t);
		task_release(t);
		return;
	}
	if (t->unsol_open)
		return; /* unsolicited Data-Out still coming */
	if (!t->r2t_out || t->received >= t->r2t_end)
		send_r2t(t);
}

static void lu_refresh(struct iconn *c)
{
	struct vol *v = c->vol;
	c->lu.ready = v->role == VOL_PRIMARY && !v->demoting && v->disk != VOL_FAILED &&
		      v->disk != VOL_DISKLESS;
}

static void lu_init(struct iconn *c)
{
	struct vol *v = c->vol;
	const uint8_t *u = v->md->sb.volume_uuid;

	memset(&c->lu, 0, sizeof(c->lu));
	c->lu.size = v->size;
	c->lu.block = 512;
	/* LBPPB 1: libiscsi 1.19's GetLBAStatus.UnmapSingle expects a descriptor
	 * that starts past the requested LBA when LBPPB > 1 (against SBC-3) */
	c->lu.phys_block = 512;
	/* NAA 6 (IEEE Registered Extended): the company id is left zero, the
	 * vendor-specific part is the volume UUID: the same device on every node */
	c->lu.naa[0] = 0x60;
	memcpy(c->lu.naa + 1, u, 15);
	snprintf(c->lu_serial, sizeof(c->lu_serial), "%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
	target_iqn(c->srv, v, c->lu_iqn, sizeof(c->lu_iqn));
	for (unsigned i = 0; i < c->srv->nvols; i++)
		if (c->srv->lus[i].vol == v)
			c->ilu = &c->srv->lus[i];
	snprintf(c->nexus.initiator, sizeof(c->nexus.initiator),
		 "%s,i,0x%02x%02x%02x%02x%02x%02x", c->initiator, c->isid[0], c->isid[1],
		 c->isid[2], c->isid[3], c->isid[4], c->isid[5]);
	c->nexus.tport = 1;
	c->lu.vendor = "TANDEM";
	c->lu.product = v->name;
	c->lu.serial = c->lu_serial;
	c->lu.target_name = c->lu_iqn;
	c->lu.thin = true;
	c->lu.write_cache = true;
	c->lu.max_xfer_blocks = MAX_XFER / 512;
	lu_refresh(c);
}

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

/* A SCSI Command PDU; its immediate data (h->dsl bytes) is received next,
 * into the task's buffer or dropped. Returns the task to receive into. */
static struct task *handle_cmd(struct iconn *c, const struct iscsi_bhs *h)
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
	t = calloc(1, sizeof(*t));
	if (!t) {
		conn_kill(c, "out of memory");
		return NULL;
	}
	t->c = c;
	t->itt = h->itt;
	t->lun = h->lun;
	t->cmd_sn = h->w24;
	t->expected = h->w20;
	memcpy(t->cdb, h->cdb, ISCSI_CDB_LEN);
	t->refs = 1;
	t->owned = true;
	list_add_tail(&c->tasks, &t->link);
	c->ntasks++;
	t->in_window = true;
	c->nwin++;
	c->refs++;
	q = &t->req;
	lu_refresh(c);
	/* LUN 0 only: the first level addressing of LUN 0 is all zero */
	/* The expected length only shapes the data transfer here (residuals,
	 * and a write of no more than what came), so the command layer sees
	 * none. */
	if (h->lun != 0) {
		scsi_exec(NULL, t->cdb, ISCSI_CDB_LEN, UINT32_MAX, q);
	} else if (!ua_report(c, t->cdb, q)) {
		if (c->lu.ready && pr_conflict(ilu_pr(c->ilu), &c->nexus, t->cdb))
			scsi_done(q, SCSI_RESERVATION_CONFLICT);
		else
			scsi_exec(&c->lu, t->cdb, ISCSI_CDB_LEN, UINT32_MAX, q);
		if (q->kind == SCSI_IO && q->xop == SCSI_XOP_PR_IN)
			pr_in(ilu_pr(c->ilu), t->cdb, q);
		else if (q->kind == SCSI_IO && q->xop == SCSI_XOP_COPY_RESULTS)
		{
			xcopy_results(&c->lu, t->cdb, &c->xs, q);
			/* a finished copy's status is reported once (SPC-4 6.18.3) */
			if (q->status == SCSI_GOOD && (t->cdb[1] & 0x1f) == XCOPY_RCR_COPY_STATUS &&
			    c->xs.done)
				c->xs.valid = false;
		}
	}
	if (q->status == SCSI_GOOD && ((q->exact_out && t->expected != q->data_out_len) ||
				   (q->xop != SCSI_XOP_NONE && t->expected < q->data_out_len)))
		scsi_check(q, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_CDB);
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
		} else if (!(t->buf = bufpool_get(&c->srv->pool, MAX(n, 4096u)))) {
			scsi_error(q, -ENOMEM);
		} else {
			t->buf_len = n;
			task_charge(t, MAX(n, 4096u));
		}
	}
	if (q->kind == SCSI_IO && q->data_out_len &&
	    (h->dsl > t->want || (h->dsl && !c->p.immediate_data) || h->dsl > c->p.first_burst))
		scsi_error(q, -EPROTO);
	if (q->kind != SCSI_IO || q->status) {
		/* answered now; data the initiator sends anyway is dropped (its
		 * Data-Out finds no task) */
		task_finish_req(t);
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
		t->unsol_open = !(h->flags & ISCSI_F_FINAL);
		if (t->unsol_open && c->p.initial_r2t) {
			conn_kill(c, "unsolicited data with InitialR2T=Yes");
			return NULL;
		}
		t->refs++; /* the receive's reference */
		return t;  /* immediate data, if any, goes to t->buf; then progress */
	}
	task_data_complete(t);
	task_release(t);
	return NULL;
}

static void handle_tmf(struct iconn *c, const struct iscsi_bhs *h)
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
		t->aborted = true;
		task_release(t);
		break;
	}
	case ISCSI_TMF_ABORT_TASK_SET: /* this I_T nexus's tasks only */
		tasks_abort(c);
		break;
	case ISCSI_TMF_CLEAR_TASK_SET: /* TST=0: one task set, every nexus's tasks */
		tasks_abort_lu(c, UA_CLEARED);
		break;
	case ISCSI_TMF_LUN_RESET:
	case ISCSI_TMF_TARGET_WARM_RESET:
	case ISCSI_TMF_TARGET_COLD_RESET: /* a target has one logical unit, LUN 0 */
		tasks_abort_lu(c, 0);
		ilu_pr_event(c, true);
		ua_broadcast(c->srv, c->vol, fn == ISCSI_TMF_LUN_RESET ? UA_RESET : UA_TARGET_RESET);
		break;
	default:
		rsp = ISCSI_TMF_RSP_NOT_SUPPORTED;
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
	c->st = CS_LOGOUT;
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
			t->aborted = true;
			task_put(t);
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
 * COMMAND, 47/05); other PDUs are dropped. */
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
	scsi_error(&t->req, t->dout_err);
	send_status(t, t->req.status, t->req.sense, t->req.sense_len, 0);
	t->aborted = true;
	task_release(t);
}

static void data_digest_failed(struct iconn *c)
{
	struct task *t = c->rx_task;

	log_warn("iscsi: %s: data digest error (opcode 0x%02x)", c->initiator, c->h.opcode);
	send_reject(c, ISCSI_REJECT_DIGEST, c->raw);
	c->have_hdr = false;
	c->rx_task = NULL;
	free(c->seg);
	c->seg = NULL;
	if (!t)
		return;
	if (!t->aborted && t->owned)
		task_dout_fail(t, -EBADMSG, c->h.opcode == ISCSI_OP_DATA_OUT && (c->h.flags & ISCSI_F_FINAL),
			       c->h.opcode == ISCSI_OP_SCSI_CMD || c->h.w20 == ISCSI_RESERVED_TAG);
	task_put(t); /* the receive's reference */
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
		if (!t)
			break;
		t->received += h->dsl;
		if (h->opcode == ISCSI_OP_DATA_OUT && (h->flags & ISCSI_F_FINAL)) {
			if (h->w20 == ISCSI_RESERVED_TAG)
				t->unsol_open = false;
			else
				t->r2t_out = false;
		}
		if (!t->aborted)
			task_data_progress(t);
		task_put(t); /* the receive's reference */
		break;
	default:
		break;
	}
	free(c->seg);
	c->seg = NULL;
}

/* A Data-Out PDU: where its data goes (NULL: dropped). */
static struct task *data_out_target(struct iconn *c, const struct iscsi_bhs *h)
{
	struct task *t = task_find(c, h->itt);
	uint32_t off = h->w40;

	if (!t || t->aborted || !t->owned) {
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
	if (off != t->received || (uint64_t)off + h->dsl > t->want ||
	    (h->w20 == ISCSI_RESERVED_TAG ? !t->unsol_open ||
						    (uint64_t)off + h->dsl > c->p.first_burst :
					    !t->r2t_out || h->w20 != t->ttt ||
						    (uint64_t)off + h->dsl > t->r2t_end)) {
		conn_kill(c, "Data-Out outside what was asked for");
		return NULL;
	}
	t->refs++;
	return t;
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
		if (container_of(pos, struct task, link)->io_busy)
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
static void conn_unhold(struct iconn *c)
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
			c->rx_task = handle_cmd(c, h);
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
			c->rx_data = c->rx_task->buf;
			net_rx_direct(nc, c->rx_task->buf, h->dsl, data_done);
			if (nc->direct_cb)
				return; /* the rest arrives later */
			continue;
		case ISCSI_OP_DATA_OUT: {
			struct task *t = data_out_target(c, h);
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
			c->rx_data = t->buf + h->w40;
			net_rx_direct(nc, t->buf + h->w40, h->dsl, data_done);
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
	struct list *pos, *tmp;

	if (c->ilu) /* set in the full feature phase only */
		ilu_pr_event(c, false); /* the I_T nexus is gone */
	c->st = CS_DEAD;
	c->net_closed = true;
	if (c->rx_task) {
		struct task *t = c->rx_task;
		c->rx_task = NULL;
		task_put(t);
	}
	/* tasks still waiting for data never will get it */
	list_for_each_safe(pos, tmp, &c->tasks) {
		struct task *t = container_of(pos, struct task, link);
		t->aborted = true;
		task_release(t);
	}
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
	c->srv = s;
	c->st = CS_LOGIN;
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
	for (unsigned i = 0; i < nvols; i++) {
		struct ilu *u = &s->lus[i];
		u->vol = vols[i];
		/* no session survives a restart: neither does an SPC-2 reservation */
		if (u->vol->role == VOL_PRIMARY && pr_reset(ilu_pr(u)) && ilu_pr_save(u))
			log_warn("volume %s: reservations not saved", u->vol->name);
	}
	snprintf(s->cluster, sizeof(s->cluster), "%s", cfg->cluster);
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
