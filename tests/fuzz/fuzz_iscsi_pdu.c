/* libFuzzer harness for the iSCSI BHS decoder: every header byte an
 * initiator controls, under limits the connection code may choose.
 * Input: 4 bytes AHS limit, 4 bytes data segment limit (big-endian; the AHS
 * limit is taken modulo 2048 half the time so that both sides of the
 * 0..1020 range are hit), then any number of 48-byte headers, each copied
 * into an exact-size heap buffer (ASan sees a read past the BHS) and decoded.
 * Checked for every header:
 *   - the result is 0 or -EBADMSG, and it is 0 exactly when the header
 *     passes the rules written out here independently (top bit of byte 0
 *     clear, an initiator opcode, AHS and data within the limits, no data on
 *     Task Management, Logout or SNACK);
 *   - every field equals the bytes it comes from (whatever the result);
 *   - for an accepted header, the bytes that follow it (iscsi_rest_len) are
 *     AHS + data + padding to 4, without overflow, and a receiver reading
 *     them into a buffer of that size stays within ahs_max + dsl_max + 3;
 *   - iscsi_bhs_init writes back what decode reads, and put/get round-trip.
 * A violated property calls abort(). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/iscsi/iscsi_pdu.h"

#include "fuzz.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int initiator_op(uint8_t op)
{
	return op == ISCSI_OP_NOP_OUT || op == ISCSI_OP_SCSI_CMD || op == ISCSI_OP_TASK_REQ ||
	       op == ISCSI_OP_LOGIN_REQ || op == ISCSI_OP_TEXT_REQ || op == ISCSI_OP_DATA_OUT ||
	       op == ISCSI_OP_LOGOUT_REQ || op == ISCSI_OP_SNACK_REQ;
}

static void check_fields(const uint8_t *b, const struct iscsi_bhs *h)
{
	uint64_t lun = 0;

	CHECK(h->opcode == (b[0] & 0x3f));
	CHECK(h->immediate == !!(b[0] & 0x40));
	CHECK(h->flags == b[1] && h->b2 == b[2] && h->b3 == b[3]);
	CHECK(h->ahs_len == b[4] * 4u);
	CHECK(h->dsl == ((uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7]));
	for (int i = 8; i < 16; i++)
		lun = lun << 8 | b[i];
	CHECK(h->lun == lun);
	CHECK(h->itt == be32(b + 16));
	CHECK(h->w20 == be32(b + 20) && h->w24 == be32(b + 24) && h->w28 == be32(b + 28));
	CHECK(h->w32 == be32(b + 32) && h->w36 == be32(b + 36) && h->w40 == be32(b + 40) &&
	      h->w44 == be32(b + 44));
	CHECK(memcmp(h->cdb, b + 32, ISCSI_CDB_LEN) == 0);
	CHECK(memcmp(h->isid, b + 8, 6) == 0);
	CHECK(h->tsih == (b[14] << 8 | b[15]));
	CHECK(h->cid == (b[20] << 8 | b[21]));
}

static void one(const uint8_t *in, uint32_t ahs_max, uint32_t dsl_max)
{
	uint8_t *b = malloc(ISCSI_BHS_LEN), again[ISCSI_BHS_LEN];
	struct iscsi_bhs h, h2;
	int r, want;

	CHECK(b != NULL);
	memcpy(b, in, ISCSI_BHS_LEN);
	r = iscsi_bhs_decode(b, ahs_max, dsl_max, &h);
	CHECK(r == 0 || r == -EBADMSG);
	check_fields(b, &h);

	want = !(b[0] & 0x80) && initiator_op(b[0] & 0x3f) && b[4] * 4u <= ahs_max &&
	       h.dsl <= dsl_max;
	if ((h.opcode == ISCSI_OP_TASK_REQ || h.opcode == ISCSI_OP_LOGOUT_REQ ||
	     h.opcode == ISCSI_OP_SNACK_REQ) && h.dsl)
		want = 0;
	CHECK((r == 0) == want);

	if (r == 0) {
		uint64_t rest = iscsi_rest_len(&h);
		CHECK(h.ahs_len <= ahs_max && h.dsl <= dsl_max);
		CHECK(h.ahs_len <= 1020 && h.dsl < (1u << 24));
		CHECK(rest % 4 == 0);
		CHECK(rest >= (uint64_t)h.ahs_len + h.dsl && rest < (uint64_t)h.ahs_len + h.dsl + 4);
		CHECK(rest <= (uint64_t)ahs_max + dsl_max + 3);
		CHECK(!(b[0] & 0x80) && initiator_op(h.opcode));
	}

	/* the target's own encoder produces what the decoder reads */
	iscsi_bhs_init(again, b[0], b[1], h.dsl, h.itt);
	CHECK(again[0] == b[0] && again[1] == b[1] && again[4] == 0);
	CHECK(memcmp(again + 5, b + 5, 3) == 0 && memcmp(again + 16, b + 16, 4) == 0);
	iscsi_bhs_decode(again, 0, 0xffffff, &h2);
	CHECK(h2.opcode == h.opcode && h2.flags == h.flags && h2.dsl == h.dsl && h2.itt == h.itt);
	CHECK(h2.ahs_len == 0 && h2.lun == 0);
	iscsi_put32(again, h.w20);
	CHECK(iscsi_get32(again) == h.w20 && memcmp(again, b + 20, 4) == 0);
	iscsi_put16(again, h.cid);
	CHECK(memcmp(again, b + 20, 2) == 0);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t ahs_max, dsl_max;

	if (size < 8 + ISCSI_BHS_LEN)
		return 0;
	ahs_max = be32(data);
	dsl_max = be32(data + 4);
	if (ahs_max & 0x80000000u)
		ahs_max %= 2048;
	data += 8;
	size -= 8;
	while (size >= ISCSI_BHS_LEN) {
		one(data, ahs_max, dsl_max);
		data += ISCSI_BHS_LEN;
		size -= ISCSI_BHS_LEN;
	}
	return 0;
}
