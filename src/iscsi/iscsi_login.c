/* iSCSI login (RFC 7143 6, 13), CHAP (12.1.3, RFC 1994) and the text
 * requests of discovery (SendTargets). Owns the login stages, the operational
 * parameters it negotiates and the CHAP exchange of a connection. Never
 * accepts a session it has not authenticated, never touches the logical unit
 * before the full feature phase (task_lu_attach is its last step). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include "../common/log.h"
#include "../common/util.h"
#include "iscsi_conn.h"

/* ---------- names ---------- */

void target_iqn(const struct iscsi_server *s, const struct vol *v, char *out, size_t len)
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
	if (getsockname(c->peer.net.fd, (struct sockaddr *)&ss, &sl) == 0) {
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
#define CHAPKEY(name, field)                                     \
	if (strcmp(key, name) == 0) {                            \
		snprintf(l->field, sizeof(l->field), "%s", val); \
		return 0;                                        \
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
	o->buf[2] = 0; /* version max */
	o->buf[3] = 0; /* version active */
	memcpy(o->buf + 8, c->isid, 6);
	iscsi_put16(o->buf + 14, status == ISCSI_LOGIN_OK ? c->tsih : 0);
	o->buf[36] = (uint8_t)(status >> 8);
	o->buf[37] = (uint8_t)status;
	if (dlen)
		memcpy(opdu_data(o), txt->buf, dlen);
	opdu_send(c, o, true, NULL, 0);
}

static void login_fail(struct iconn *c, const struct iscsi_bhs *h, uint16_t status, const char *why)
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
		int hi = hex_digit(v[0]), lo = hex_digit(v[1]);
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
		 EVP_DigestUpdate(m, secret, strlen(secret)) && EVP_DigestUpdate(m, chal, clen) &&
		 EVP_DigestFinal_ex(m, out, &n);
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
				return "the initiator offers no AuthMethod this target accepts "
				       "(None)";
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

void handle_login(struct iconn *c, const struct iscsi_bhs *h, const uint8_t *data)
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
				login_fail(c, h,
					   l.target[0] ? ISCSI_LOGIN_NOT_FOUND
						       : ISCSI_LOGIN_MISSING_PARAM,
					   l.target[0] ? "no such target" : "no TargetName");
				return;
			}
		}
		iscsi_text_add(out, "TargetPortalGroupTag", "1");
		c->logged_in_once = true;
		c->auth = c->discovery ? &c->srv->cfg->auth : vol_auth(c->srv, c->vol);
	}
	if (csg > ISCSI_STAGE_OPERATIONAL || csg == 2 || (transit && (nsg <= csg || nsg == 2))) {
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
	if (transit && nsg == ISCSI_STAGE_FULL && c->st == CS_LOGIN) {
		conn_set_state(c, CS_FULL);
		/* I_T nexus and logical unit exist from here on, never before: a
		 * login that fails (wrong CHAP secret) must not touch the LU's
		 * state, e.g. release the SPC-2 reservation of the session with
		 * the same initiator port name when it closes. */
		if (c->vol)
			task_lu_attach(c);
		/* digests start with the first PDU after this response */
		c->hd = c->p.header_digest;
		c->dd = c->p.data_digest;
		log_info("iscsi: %s logged in to %s%s%s%s", c->initiator,
			 c->discovery ? "discovery" : "target ", c->discovery ? "" : c->vol->name,
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

void handle_text(struct iconn *c, const struct iscsi_bhs *h, const uint8_t *data)
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
