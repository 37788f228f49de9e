/* iSCSI text keys and negotiation: see iscsi_text.h. */
#include "iscsi_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

void iscsi_params_default(struct iscsi_params *p)
{
	/* RFC 7143 defaults, for keys an initiator does not send */
	memset(p, 0, sizeof(*p)); /* digests None */
	p->mrdsl_initiator = 8192;
	p->max_burst = 262144;
	p->first_burst = 65536;
	p->max_r2t = 1;
	p->initial_r2t = true;
	p->immediate_data = true;
	p->time2wait = 2;
	p->time2retain = 20;
}

int iscsi_text_parse(const uint8_t *data, uint32_t len,
		     int (*cb)(void *ctx, const char *key, const char *val), void *ctx)
{
	uint32_t i = 0;

	if (len && data[len - 1] != '\0')
		return -EBADMSG;
	while (i < len) {
		const char *pair = (const char *)data + i;
		size_t n = strnlen(pair, len - i);
		const char *eq = memchr(pair, '=', n);
		char key[ISCSI_KEY_MAX + 1], val[ISCSI_VALUE_MAX + 1];
		size_t kl, vl;
		int r;

		if (n == 0) { /* stray padding NUL: tolerated */
			i++;
			continue;
		}
		if (!eq)
			return -EBADMSG;
		kl = (size_t)(eq - pair);
		vl = n - kl - 1;
		if (kl == 0 || kl > ISCSI_KEY_MAX || vl > ISCSI_VALUE_MAX)
			return -EBADMSG;
		memcpy(key, pair, kl);
		key[kl] = '\0';
		memcpy(val, eq + 1, vl);
		val[vl] = '\0';
		r = cb(ctx, key, val);
		if (r)
			return r;
		i += (uint32_t)n + 1;
	}
	return 0;
}

int iscsi_text_add(struct iscsi_text *t, const char *key, const char *val)
{
	size_t kl = strlen(key), vl = strlen(val);

	if (kl + vl + 2 > sizeof(t->buf) - t->len)
		return -ENOSPC;
	memcpy(t->buf + t->len, key, kl);
	t->buf[t->len + kl] = '=';
	memcpy(t->buf + t->len + kl + 1, val, vl);
	t->buf[t->len + kl + 1 + vl] = '\0';
	t->len += (uint32_t)(kl + vl + 2);
	return 0;
}

/* A decimal (or 0x hex) number in [lo, hi]. */
static int number(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long x;

	/* RFC 7143 5.1: decimal without leading zeros, or 0x hex; nothing else
	 * (strtoull alone would take octal, blanks and signs) */
	if (!*v || strlen(v) > 20 || *v < '0' || *v > '9' ||
	    (v[0] == '0' && v[1] && v[1] != 'x' && v[1] != 'X'))
		return -EINVAL;
	errno = 0;
	x = strtoull(v, &end, 0);
	if (errno || *end || x < lo || x > hi)
		return -EINVAL;
	*out = x;
	return 0;
}

static int boolean(const char *v, bool *out)
{
	if (strcmp(v, "Yes") == 0)
		*out = true;
	else if (strcmp(v, "No") == 0)
		*out = false;
	else
		return -EINVAL;
	return 0;
}

/* The first of the initiator's list that we support: CRC32C or None. */
static int digest(const char *v, char *resp, size_t len, bool *on)
{
	char tmp[ISCSI_VALUE_MAX + 1];
	char *save = NULL, *tok;

	snprintf(tmp, sizeof(tmp), "%s", v);
	for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (strcmp(tok, "None") == 0 || strcmp(tok, "CRC32C") == 0) {
			*on = tok[0] == 'C';
			snprintf(resp, len, "%s", tok);
			return 0;
		}
	snprintf(resp, len, "Reject");
	return -EINVAL;
}

int iscsi_negotiate(struct iscsi_params *p, const char *key, const char *val, char *resp,
		    size_t resp_len)
{
	uint64_t n;
	bool b;

	resp[0] = '\0';
#define NUM(lo, hi)                                                 \
	do {                                                        \
		if (number(val, (lo), (hi), &n)) {                  \
			snprintf(resp, resp_len, "Reject");         \
			return -EINVAL;                             \
		}                                                   \
	} while (0)
#define BOOL()                                                      \
	do {                                                        \
		if (boolean(val, &b)) {                             \
			snprintf(resp, resp_len, "Reject");         \
			return -EINVAL;                             \
		}                                                   \
	} while (0)
	if (strcmp(key, "HeaderDigest") == 0)
		return digest(val, resp, resp_len, &p->header_digest);
	if (strcmp(key, "DataDigest") == 0)
		return digest(val, resp, resp_len, &p->data_digest);
	if (strcmp(key, "MaxConnections") == 0) {
		NUM(1, 65535);
		snprintf(resp, resp_len, "1");
		return 0;
	}
	if (strcmp(key, "InitialR2T") == 0) {
		BOOL();
		p->initial_r2t = b;
		snprintf(resp, resp_len, "%s", b ? "Yes" : "No");
		return 0;
	}
	if (strcmp(key, "ImmediateData") == 0) {
		BOOL();
		p->immediate_data = b;
		snprintf(resp, resp_len, "%s", b ? "Yes" : "No");
		return 0;
	}
	if (strcmp(key, "MaxRecvDataSegmentLength") == 0) {
		NUM(512, 16777215);
		p->mrdsl_initiator = (uint32_t)n;
		return 0; /* declarative: ours is sent once, by the caller */
	}
	if (strcmp(key, "MaxBurstLength") == 0) {
		NUM(512, 16777215);
		p->max_burst = (uint32_t)MIN(n, (uint64_t)ISCSI_MAX_BURST);
		p->first_burst = MIN(p->first_burst, p->max_burst);
		snprintf(resp, resp_len, "%u", p->max_burst);
		return 0;
	}
	if (strcmp(key, "FirstBurstLength") == 0) {
		NUM(512, 16777215);
		p->first_burst = (uint32_t)MIN(MIN(n, (uint64_t)ISCSI_FIRST_BURST), p->max_burst);
		snprintf(resp, resp_len, "%u", p->first_burst);
		return 0;
	}
	if (strcmp(key, "DefaultTime2Wait") == 0) {
		NUM(0, 3600);
		p->time2wait = (uint32_t)MAX(n, 2u);
		snprintf(resp, resp_len, "%u", p->time2wait);
		return 0;
	}
	if (strcmp(key, "DefaultTime2Retain") == 0) {
		NUM(0, 3600);
		p->time2retain = 0;
		snprintf(resp, resp_len, "0");
		return 0;
	}
	if (strcmp(key, "MaxOutstandingR2T") == 0) {
		NUM(1, 65535);
		p->max_r2t = 1;
		snprintf(resp, resp_len, "1");
		return 0;
	}
	if (strcmp(key, "DataPDUInOrder") == 0 || strcmp(key, "DataSequenceInOrder") == 0) {
		BOOL();
		snprintf(resp, resp_len, "Yes");
		return 0;
	}
	if (strcmp(key, "ErrorRecoveryLevel") == 0) {
		NUM(0, 2);
		snprintf(resp, resp_len, "0");
		return 0;
	}
	if (strcmp(key, "IFMarker") == 0 || strcmp(key, "OFMarker") == 0) {
		BOOL();
		snprintf(resp, resp_len, "No");
		return 0;
	}
	if (strcmp(key, "IFMarkInt") == 0 || strcmp(key, "OFMarkInt") == 0) {
		snprintf(resp, resp_len, "Irrelevant");
		return 0;
	}
#undef NUM
#undef BOOL
	snprintf(resp, resp_len, "NotUnderstood");
	return 0;
}
