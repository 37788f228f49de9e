/* libFuzzer harness for the reservations module (src/scsi/pr.c): the stored
 * image an attacker or a torn write may hand to pr_decode, and a sequence of
 * commands and transport events from several I_T nexuses. Input layout:
 *   [0..1]  m (big-endian): the next m bytes (capped) are an image; the state
 *           starts from it when it decodes, else from pr_init
 *   then commands until the input ends (at most 64), each an op byte (op % 8)
 *   and its operands; a missing operand byte reads as 0:
 *     0 PROUT         who, sa, scope|type, key, sark, flags, list length
 *     1 PRIN          who, sa, allocation length (2), control
 *     2 RESERVE/RELEASE(6/10)  who, which, byte 1, control
 *     3 pr_conflict   who, 16 CDB bytes
 *     4 pr_nexus_lost who   5 pr_reset   6 pr_power_on
 *     7 pr_out        who, 10 CDB bytes, n, n parameter bytes
 *   who: bit 7 a PR_NAME_MAX-byte name without NUL, else one of 72 nexuses; a key
 *   byte with bit 7 set is followed by 8 key bytes, else it is 0..3.
 * Properties, after every step: P1-P3 (pr_valid); the image round trip
 * (encode, decode, equal, encode again to the same bytes); pr_out returns 1
 * exactly when the state changed and then answers GOOD, never changes it when
 * pr_conflict() predicted a conflict, and moves PRgeneration by one for
 * REGISTER/CLEAR/PREEMPT and not at all for RESERVE/RELEASE; pr_in and
 * pr_conflict change nothing; after a change pr_ua() tells who nothing, tells
 * each other registrant 2A/03 or 2A/05 exactly when it lost its registration
 * and otherwise 0 or 2A/04, and tells a nexus registered under no name of the
 * state before nothing; a holder, and anyone while no reservation is
 * held, conflicts only on RESERVE/RELEASE(6/10) with registrations present
 * (CRH=0); data-in stays within the allocation length and the buffer, with
 * the headers the state implies;
 * a CHECK CONDITION carries 18 bytes of fixed sense and no data.
 * A violated property calls abort() so that libFuzzer keeps the input. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/scsi/pr.h"

#include "fuzz.h"

struct in {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct in *in, unsigned bytes)
{
	return fuzz_take(&in->p, &in->n, bytes);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void who_from(struct in *in, struct pr_nexus *w)
{
	uint8_t b = (uint8_t)take(in, 1);

	memset(w, 0, sizeof(*w));
	if (b & 0x80) {
		memset(w->initiator, 'z', sizeof(w->initiator)); /* no NUL */
	} else {
		snprintf(w->initiator, sizeof(w->initiator), "iqn.2026-11.fuzz:%02u,i,0x%012u",
			 (b & 0x3f) % 36, (b & 0x3f) % 36);
	}
	w->tport = (uint16_t)(1 + (b >> 6 & 1));
}

static uint64_t key_from(struct in *in)
{
	uint8_t b = (uint8_t)take(in, 1);

	return (b & 0x80) ? take(in, 8) : (uint64_t)(b & 3);
}

/* The harness's own view of "who holds the reservation". */
static bool holds(const struct pr_state *s, const struct pr_nexus *w)
{
	size_t n = strnlen(w->initiator, PR_NAME_MAX - 1);

	if (s->holder < 0)
		return false;
	for (uint32_t i = 0; i < s->nreg; i++) {
		const struct pr_nexus *r = &s->reg[i].n;

		if (r->tport == w->tport && strlen(r->initiator) == n &&
		    memcmp(r->initiator, w->initiator, n) == 0)
			return s->type == PR_TYPE_WEAR || s->type == PR_TYPE_EAAR ||
			       (int)i == s->holder;
	}
	return false;
}

static void check_req(const struct scsi_req *r)
{
	CHECK(r->kind == SCSI_DONE);
	CHECK(r->status == SCSI_GOOD || r->status == SCSI_CHECK_CONDITION ||
	      r->status == SCSI_RESERVATION_CONFLICT);
	CHECK(r->data_len <= sizeof(r->data));
	if (r->status == SCSI_CHECK_CONDITION) {
		CHECK(r->sense_len == SCSI_SENSE_FIXED_LEN && r->sense[0] == 0x70);
		CHECK(scsi_sense_key(r->sense, r->sense_len) == SCSI_KEY_ILLEGAL_REQUEST);
		CHECK(r->data_len == 0);
	} else {
		CHECK(r->sense_len == 0);
	}
}

/* Encode, decode, compare, encode again. */
static void roundtrip(const struct pr_state *s, uint8_t *img, uint8_t *img2, struct pr_state *t)
{
	int n = pr_encode(s, img, PR_IMAGE_MAX), n2;

	CHECK(n > 0 && n <= PR_IMAGE_MAX);
	CHECK(pr_encode(s, img2, (size_t)n - 1) == -ENOSPC);
	CHECK(pr_decode(t, img, (size_t)n) == 0);
	CHECK(pr_equal(s, t) && pr_valid(t));
	n2 = pr_encode(t, img2, PR_IMAGE_MAX);
	CHECK(n2 == n && memcmp(img, img2, (size_t)n) == 0);
}

static bool same_nexus(const struct pr_nexus *a, const struct pr_nexus *b)
{
	return a->tport == b->tport && strncmp(a->initiator, b->initiator, PR_NAME_MAX - 1) == 0; /* as pr.h names them */
}

static bool registered(const struct pr_state *s, const struct pr_nexus *n)
{
	for (uint32_t i = 0; i < s->nreg; i++)
		if (same_nexus(&s->reg[i].n, n))
			return true;
	return false;
}

/* The unit attentions after pr_out changed before into s. */
static void check_ua(const struct pr_state *before, const struct pr_state *s, const uint8_t *c,
		     const struct pr_nexus *w)
{
	struct pr_nexus stranger = { .initiator = "iqn.2026-12.fuzz:nobody,i,0x0", .tport = 9 };

	CHECK(pr_ua(before, s, c, w, w) == 0);
	if (!registered(before, &stranger))
		CHECK(pr_ua(before, s, c, w, &stranger) == 0);
	for (uint32_t i = 0; i < before->nreg; i++) {
		const struct pr_nexus *n = &before->reg[i].n;
		uint16_t ua = pr_ua(before, s, c, w, n);

		if (same_nexus(n, w))
			continue;
		if (!registered(s, n))
			CHECK(ua == PR_UA_RES_PREEMPTED || ua == PR_UA_REG_PREEMPTED);
		else
			CHECK(ua == 0 || ua == PR_UA_RES_RELEASED);
	}
}

/* pr_out on exact-size copies, with the properties of every call. */
static void out(struct pr_state *s, struct pr_state *before, const struct pr_nexus *w,
		const uint8_t *cdb10, const uint8_t *param, uint32_t len, struct scsi_req *r)
{
	uint8_t cdb16[16] = { 0 }, *c = malloc(10), *p = malloc(len ? len : 1);
	bool predicted, gen_sa = false, typed_sa = false;
	int changed;

	CHECK(c && p);
	memcpy(c, cdb10, 10);
	memcpy(cdb16, cdb10, 10);
	if (len)
		memcpy(p, param, len);
	if (cdb10[0] == PR_OP_OUT) {
		uint8_t sa = cdb10[1] & 0x1f;

		gen_sa = sa == PR_OUT_REGISTER || sa == PR_OUT_REGISTER_AND_IGNORE ||
			 sa == PR_OUT_CLEAR || sa == PR_OUT_PREEMPT || sa == PR_OUT_PREEMPT_AND_ABORT;
		typed_sa = sa == PR_OUT_RESERVE || sa == PR_OUT_RELEASE;
	}
	*before = *s;
	predicted = pr_conflict(s, w, cdb16);
	CHECK(pr_equal(before, s));
	memset(r, 0x5a, sizeof(*r));
	changed = pr_out(s, w, c, len ? p : NULL, len, r);
	check_req(r);
	CHECK(changed == 0 || changed == 1);
	CHECK(changed == !pr_equal(before, s));
	CHECK(r->data_len == 0);
	if (changed) {
		CHECK(r->status == SCSI_GOOD);
		check_ua(before, s, c, w);
	}
	if (predicted)
		CHECK(!changed);
	if (changed && gen_sa)
		CHECK(s->generation == before->generation + 1);
	else
		CHECK(s->generation == before->generation);
	if (typed_sa || cdb10[0] != PR_OP_OUT)
		CHECK(s->nreg == before->nreg);
	free(p);
	free(c);
}

static void in_cmd(struct pr_state *s, struct pr_state *before, const uint8_t *cdb10,
		   struct scsi_req *r)
{
	uint8_t *c = malloc(10);
	uint32_t alloc = (uint32_t)cdb10[7] << 8 | cdb10[8];
	uint8_t sa = cdb10[1] & 0x1f;

	CHECK(c);
	memcpy(c, cdb10, 10);
	*before = *s;
	memset(r, 0x5a, sizeof(*r));
	pr_in(s, c, r);
	free(c);
	check_req(r);
	CHECK(pr_equal(before, s));
	CHECK(r->status != SCSI_RESERVATION_CONFLICT);
	if (sa > PR_IN_READ_FULL_STATUS || (cdb10[9] & 0x05)) {
		CHECK(r->status == SCSI_CHECK_CONDITION);
		return;
	}
	CHECK(r->status == SCSI_GOOD);
	CHECK(r->data_len <= alloc);
	if (r->data_len < 8)
		return;
	if (sa == PR_IN_REPORT_CAPABILITIES) {
		CHECK(r->data[0] == 0 && r->data[1] == 8);
		return;
	}
	CHECK(be32(r->data) == s->generation);
	if (sa == PR_IN_READ_KEYS) {
		CHECK(be32(r->data + 4) == 8 * s->nreg);
		for (uint32_t i = 0; i < s->nreg && 16 + 8 * i <= r->data_len; i++)
			CHECK(be64(r->data + 8 + 8 * i) == s->reg[i].key);
	} else if (sa == PR_IN_READ_RESERVATION) {
		CHECK(be32(r->data + 4) == (s->holder >= 0 ? 16u : 0u));
		if (s->holder >= 0 && r->data_len >= 24) {
			bool ar = s->type == PR_TYPE_WEAR || s->type == PR_TYPE_EAAR;

			CHECK(be64(r->data + 8) == (ar ? 0 : s->reg[s->holder].key));
			CHECK(r->data[21] == s->type);
		}
	} else {
		/* every descriptor is at least 24 + 24 bytes, at most 24 + the
		 * TransportID of the longest name (4 + the name, NUL, padding) */
		uint32_t add = be32(r->data + 4);
		uint32_t most = 24 + 4 + ((PR_NAME_MAX + 3) & ~3u);

		CHECK(add >= 48 * s->nreg && add <= most * s->nreg);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pr_state *s = malloc(sizeof(*s)), *before = malloc(sizeof(*before)),
			*t = malloc(sizeof(*t));
	struct scsi_req *r = malloc(sizeof(*r));
	uint8_t *img = malloc(PR_IMAGE_MAX), *img2 = malloc(PR_IMAGE_MAX), *raw;
	struct in in = { data, size };
	struct pr_nexus w;
	size_t m;

	CHECK(s && before && t && r && img && img2);

	/* The whole input as an image, on an exact-size copy. */
	raw = malloc(size ? size : 1);
	CHECK(raw);
	memcpy(raw, data, size);
	if (pr_decode(t, raw, size) == 0) {
		CHECK(pr_valid(t));
		roundtrip(t, img, img2, before);
	}
	free(raw);

	/* The image the sequence starts from. */
	pr_init(s);
	m = (size_t)take(&in, 2);
	if (m > in.n)
		m = in.n;
	raw = malloc(m ? m : 1);
	CHECK(raw);
	memcpy(raw, in.p, m);
	if (pr_decode(t, raw, m) == 0)
		*s = *t;
	free(raw);
	in.p += m;
	in.n -= m;
	CHECK(pr_valid(s));

	for (int step = 0; step < 64 && in.n > 0; step++) {
		uint8_t op = (uint8_t)take(&in, 1) % 8, cdb[16] = { 0 }, param[64] = { 0 };
		uint32_t len = 0;

		who_from(&in, &w);
		switch (op) {
		case 0: { /* PROUT */
			uint8_t flags, lensel;
			uint64_t key, sark;

			cdb[0] = PR_OP_OUT;
			cdb[1] = (uint8_t)take(&in, 1);
			cdb[2] = (uint8_t)take(&in, 1);
			key = key_from(&in);
			sark = key_from(&in);
			flags = (uint8_t)take(&in, 1);
			lensel = (uint8_t)take(&in, 1);
			for (int i = 0; i < 8; i++) {
				param[i] = (uint8_t)(key >> (56 - 8 * i));
				param[8 + i] = (uint8_t)(sark >> (56 - 8 * i));
			}
			param[20] = flags;
			len = (lensel & 0xc0) == 0xc0 ? lensel & 0x3f : PR_PARAM_LEN;
			cdb[8] = (lensel & 0xe0) == 0xa0 ? lensel & 0x1f : (uint8_t)len;
			out(s, before, &w, cdb, param, len, r);
			break;
		}
		case 1: /* PRIN */
			cdb[0] = PR_OP_IN;
			cdb[1] = (uint8_t)take(&in, 1);
			cdb[7] = (uint8_t)take(&in, 1);
			cdb[8] = (uint8_t)take(&in, 1);
			cdb[9] = (uint8_t)take(&in, 1);
			CHECK(!pr_conflict(s, &w, cdb) || s->legacy);
			in_cmd(s, before, cdb, r);
			break;
		case 2: { /* RESERVE / RELEASE (6/10) */
			static const uint8_t ops[] = { PR_OP_RESERVE_6, PR_OP_RELEASE_6,
						       PR_OP_RESERVE_10, PR_OP_RELEASE_10 };
			cdb[0] = ops[take(&in, 1) & 3];
			cdb[1] = (uint8_t)take(&in, 1);
			cdb[(cdb[0] == PR_OP_RESERVE_6 || cdb[0] == PR_OP_RELEASE_6) ? 5 : 9] =
				(uint8_t)take(&in, 1);
			out(s, before, &w, cdb, param, 0, r);
			break;
		}
		case 3: { /* any CDB against the conflict table */
			bool c, legacy_op;

			for (int i = 0; i < 16; i++)
				cdb[i] = (uint8_t)take(&in, 1);
			legacy_op = cdb[0] == PR_OP_RESERVE_6 || cdb[0] == PR_OP_RESERVE_10 ||
				    cdb[0] == PR_OP_RELEASE_6 || cdb[0] == PR_OP_RELEASE_10;
			*before = *s;
			c = pr_conflict(s, &w, cdb);
			CHECK(pr_equal(before, s));
			/* a holder, or anyone without a reservation, is refused only
			 * RESERVE/RELEASE(6/10) (CRH=0) */
			if (!s->legacy && (holds(s, &w) || s->holder < 0) && !legacy_op)
				CHECK(!c);
			if (!s->legacy && legacy_op)
				CHECK(c == (s->nreg > 0));
			break;
		}
		case 4:
			*before = *s;
			CHECK(pr_nexus_lost(s, &w) == !pr_equal(before, s));
			CHECK(s->nreg == before->nreg && s->holder == before->holder);
			break;
		case 5:
			*before = *s;
			CHECK(pr_reset(s) == !pr_equal(before, s));
			CHECK(!s->legacy && s->nreg == before->nreg);
			break;
		case 6:
			*before = *s;
			CHECK(pr_power_on(s) == !pr_equal(before, s));
			CHECK(!s->legacy && s->generation == 0);
			CHECK(before->aptpl ? s->nreg == before->nreg : s->nreg == 0);
			break;
		default: /* 7: raw pr_out */
			for (int i = 0; i < 10; i++)
				cdb[i] = (uint8_t)take(&in, 1);
			len = (uint32_t)take(&in, 1) % (sizeof(param) + 1);
			for (uint32_t i = 0; i < len; i++)
				param[i] = (uint8_t)take(&in, 1);
			out(s, before, &w, cdb, param, len, r);
			break;
		}
		CHECK(pr_valid(s));
		roundtrip(s, img, img2, t);
	}

	free(img2);
	free(img);
	free(r);
	free(t);
	free(before);
	free(s);
	return 0;
}
