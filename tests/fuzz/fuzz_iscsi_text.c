/* libFuzzer harness for iSCSI text parsing and operational negotiation: the
 * data segment of a Login or Text request, which an initiator controls.
 * Input: a mode byte, two bytes of initial fill for the response text, then
 * the text itself, copied into an exact-size heap buffer (ASan sees a read
 * past it).
 *   mode bits 0-3: size (1..16) of a second, short response buffer;
 *   mode bit 4:    the callback stops the parse after (mode >> 5) pairs by
 *                  returning 7, which iscsi_text_parse must hand back.
 * iscsi_text_parse calls back with every pair; the callback checks that the
 * pair is exactly the next "key=value\0" of the input (stray NULs skipped),
 * runs iscsi_negotiate on it with the server's 64-byte response buffer and
 * again with the short one, and appends it with iscsi_text_add to a response
 * text that starts partly filled. Checked:
 *   - parse returns 0, -EBADMSG or the callback's value; 0 only when every
 *     byte was a pair or a NUL, -EBADMSG only at a malformed pair or a text
 *     without its final NUL;
 *   - negotiate returns 0 or -EINVAL; the response is NUL-terminated, short,
 *     "Reject" on -EINVAL (and the parameters untouched), otherwise the
 *     documented answer for the key; the short buffer gives the same result,
 *     a NUL-terminated prefix of the same answer and the same parameters;
 *   - the parameters stay within what the connection code relies on:
 *     512 <= first_burst <= max_burst <= ISCSI_MAX_BURST, first_burst <=
 *     ISCSI_FIRST_BURST, max_r2t 1, MaxRecvDataSegmentLength in RFC range;
 *   - iscsi_text_add appends exactly "key=value\0" or returns -ENOSPC
 *     without touching the text, and never writes past its buffer.
 * A violated property calls abort(). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/iscsi/iscsi_text.h"

#include "fuzz.h"

#define RESP_LEN 64 /* as iscsi_server.c */
#define MIN(a, b) ((a) < (b) ? (a) : (b))

struct ctx {
	const uint8_t *data;
	uint32_t len, pos;
	unsigned npairs, stop_after;
	int stop;
	size_t small;
	struct iscsi_params p;
	struct iscsi_text *t;
};

static void check_params(const struct iscsi_params *p)
{
	CHECK(p->max_burst >= 512 && p->max_burst <= ISCSI_MAX_BURST);
	CHECK(p->first_burst >= 512 && p->first_burst <= p->max_burst);
	CHECK(p->first_burst <= ISCSI_FIRST_BURST);
	CHECK(p->max_r2t == 1);
	CHECK(p->mrdsl_initiator >= 512 && p->mrdsl_initiator <= 16777215);
	CHECK(p->time2wait >= 2 && p->time2wait <= 3600);
	CHECK(p->time2retain == 0 || p->time2retain == 20);
}

static int is(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* The first element of the comma-separated list val that is None or CRC32C,
 * or NULL (computed here independently of iscsi_text.c). */
static const char *first_digest(const char *val)
{
	const char *p = val;

	for (;;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 4 && strncmp(p, "None", 4) == 0)
			return "None";
		if (n == 6 && strncmp(p, "CRC32C", 6) == 0)
			return "CRC32C";
		if (!e)
			return NULL;
		p = e + 1;
	}
}

static void check_answer(const struct iscsi_params *p, const char *key, const char *val,
			 const char *resp)
{
	char num[16];

	if (is(key, "HeaderDigest") || is(key, "DataDigest")) {
		/* the first of the list that we support, and the flag agrees */
		const char *want = first_digest(val);
		bool on = is(key, "HeaderDigest") ? p->header_digest : p->data_digest;
		CHECK(is(resp, want ? want : "Reject"));
		if (want)
			CHECK(on == is(want, "CRC32C"));
	} else if (is(key, "MaxConnections") || is(key, "MaxOutstandingR2T")) {
		CHECK(is(resp, "1"));
	} else if (is(key, "InitialR2T")) {
		CHECK(is(resp, val) && p->initial_r2t == is(val, "Yes"));
	} else if (is(key, "ImmediateData")) {
		CHECK(is(resp, val) && p->immediate_data == is(val, "Yes"));
	} else if (is(key, "MaxRecvDataSegmentLength")) {
		CHECK(is(resp, "")); /* declarative */
	} else if (is(key, "MaxBurstLength")) {
		snprintf(num, sizeof(num), "%u", p->max_burst);
		CHECK(is(resp, num));
	} else if (is(key, "FirstBurstLength")) {
		snprintf(num, sizeof(num), "%u", p->first_burst);
		CHECK(is(resp, num));
	} else if (is(key, "DefaultTime2Wait")) {
		snprintf(num, sizeof(num), "%u", p->time2wait);
		CHECK(is(resp, num));
	} else if (is(key, "DefaultTime2Retain") || is(key, "ErrorRecoveryLevel")) {
		CHECK(is(resp, "0"));
	} else if (is(key, "DataPDUInOrder") || is(key, "DataSequenceInOrder")) {
		CHECK(is(resp, "Yes"));
	} else if (is(key, "IFMarker") || is(key, "OFMarker")) {
		CHECK(is(resp, "No"));
	} else if (is(key, "IFMarkInt") || is(key, "OFMarkInt")) {
		CHECK(is(resp, "Irrelevant"));
	} else {
		CHECK(is(resp, "NotUnderstood"));
	}
}

static void check_add(struct iscsi_text *t, const char *key, const char *val)
{
	uint32_t old = t->len;
	size_t kl = strlen(key), vl = strlen(val), need = kl + vl + 2;
	/* a guard pattern from the end of the text to a little past what
	 * the pair needs (a write past buf itself changes len, or is an
	 * ASan report: the text is a heap block of its own size) */
	size_t guard = MIN(sizeof(t->buf), old + need + 16);
	int r;

	memset(t->buf + old, 0xa5, guard - old);
	r = iscsi_text_add(t, key, val);
	CHECK(t->len <= sizeof(t->buf));
	if (r == 0) {
		CHECK(old + need <= sizeof(t->buf) && t->len == old + need);
		CHECK(memcmp(t->buf + old, key, kl) == 0 && t->buf[old + kl] == '=');
		CHECK(memcmp(t->buf + old + kl + 1, val, vl) == 0 && t->buf[t->len - 1] == '\0');
		for (size_t i = t->len; i < guard; i++)
			CHECK((uint8_t)t->buf[i] == 0xa5);
	} else {
		CHECK(r == -ENOSPC && t->len == old && old + need > sizeof(t->buf));
		for (size_t i = old; i < guard; i++)
			CHECK((uint8_t)t->buf[i] == 0xa5);
	}
}

static int cb(void *arg, const char *key, const char *val)
{
	struct ctx *c = arg;
	size_t kl = strlen(key), vl = strlen(val);
	struct iscsi_params before = c->p, q = c->p;
	char resp[RESP_LEN], *small;
	int r, r2;

	/* exactly the next pair of the input */
	CHECK(kl >= 1 && kl <= ISCSI_KEY_MAX && vl <= ISCSI_VALUE_MAX);
	CHECK(!memchr(key, '=', kl));
	while (c->pos < c->len && c->data[c->pos] == 0)
		c->pos++;
	CHECK((uint64_t)c->pos + kl + vl + 2 <= c->len);
	CHECK(memcmp(c->data + c->pos, key, kl) == 0 && c->data[c->pos + kl] == '=');
	CHECK(memcmp(c->data + c->pos + kl + 1, val, vl) == 0);
	CHECK(c->data[c->pos + kl + 1 + vl] == 0);
	c->pos += (uint32_t)(kl + vl + 2);

	memset(resp, 0xa5, sizeof(resp));
	r = iscsi_negotiate(&c->p, key, val, resp, sizeof(resp));
	CHECK(r == 0 || r == -EINVAL);
	CHECK(memchr(resp, 0, sizeof(resp)) != NULL && strlen(resp) <= 16);
	check_params(&c->p);
	if (r) {
		CHECK(is(resp, "Reject"));
		CHECK(memcmp(&before, &c->p, sizeof(before)) == 0);
	} else {
		check_answer(&c->p, key, val, resp);
	}

	/* the same with a short buffer: same outcome, truncated answer */
	small = malloc(c->small);
	CHECK(small != NULL);
	r2 = iscsi_negotiate(&q, key, val, small, c->small);
	CHECK(r2 == r && memcmp(&q, &c->p, sizeof(q)) == 0);
	CHECK(memchr(small, 0, c->small) != NULL);
	CHECK(strncmp(small, resp, c->small - 1) == 0);
	free(small);

	check_add(c->t, key, val);
	if (resp[0])
		check_add(c->t, key, resp);

	c->npairs++;
	if (c->stop && c->npairs >= c->stop_after)
		return 7;
	return 0;
}

/* The pair at the first non-NUL byte from pos breaks a rule of the parser. */
static int malformed_at(const uint8_t *d, uint32_t len, uint32_t pos)
{
	const char *pair, *eq;
	size_t n, kl;

	while (pos < len && d[pos] == 0)
		pos++;
	if (pos >= len)
		return 0;
	pair = (const char *)d + pos;
	n = strnlen(pair, len - pos);
	eq = memchr(pair, '=', n);
	if (!eq)
		return 1;
	kl = (size_t)(eq - pair);
	return kl == 0 || kl > ISCSI_KEY_MAX || n - kl - 1 > ISCSI_VALUE_MAX;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c;
	uint8_t *text;
	uint32_t len;
	int r;

	if (size < 3 || size - 3 > UINT32_MAX)
		return 0;
	memset(&c, 0, sizeof(c));
	c.small = 1 + (data[0] & 15);
	c.stop = !!(data[0] & 16);
	c.stop_after = data[0] >> 5;
	c.t = malloc(sizeof(*c.t));
	CHECK(c.t != NULL);
	c.t->len = (uint32_t)(data[1] << 8 | data[2]) % (ISCSI_TEXT_MAX + 1);
	memset(c.t->buf, 'x', c.t->len);
	iscsi_params_default(&c.p);
	check_params(&c.p);

	len = (uint32_t)(size - 3);
	text = malloc(len ? len : 1);
	CHECK(text != NULL);
	memcpy(text, data + 3, len);
	c.data = text;
	c.len = len;

	r = iscsi_text_parse(text, len, cb, &c);
	if (c.stop && c.npairs >= c.stop_after && c.npairs > 0)
		CHECK(r == 7);
	else
		CHECK(r == 0 || r == -EBADMSG);
	if (len && text[len - 1] != 0)
		CHECK(r == -EBADMSG && c.npairs == 0);
	if (r == 0) {
		/* every byte was a pair or a NUL */
		for (uint32_t i = c.pos; i < len; i++)
			CHECK(text[i] == 0);
	} else if (r == -EBADMSG && len && text[len - 1] == 0) {
		CHECK(malformed_at(text, len, c.pos));
	}
	check_params(&c.p);
	free(text);
	free(c.t);
	return 0;
}
