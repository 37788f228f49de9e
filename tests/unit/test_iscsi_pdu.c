/* iSCSI Basic Header Segment: which headers the decoder accepts (initiator
 * opcodes only, reserved top bit clear, AHS and data within the caller's
 * limits, no data where the RFC allows none), the fields it extracts from a
 * Login request, a SCSI Command and a Data-Out against hand-written bytes
 * (big-endian, per include/proto/iscsi.h), the length of what follows a
 * header, and the encoding helpers. Every header is copied into an
 * exact-size heap buffer so that ASan (make SAN=1 unit) catches a read past
 * the 48 bytes. */
#include "unit.h"

#include <errno.h>

#include "../../src/iscsi/iscsi_pdu.h"

#define DSL_MAX (256u << 10)

static int decode(const uint8_t *bhs, uint32_t ahs_max, uint32_t dsl_max, struct iscsi_bhs *h)
{
	uint8_t *b = malloc(ISCSI_BHS_LEN);
	int r;

	assert_non_null(b);
	memcpy(b, bhs, ISCSI_BHS_LEN);
	r = iscsi_bhs_decode(b, ahs_max, dsl_max, h);
	free(b);
	return r;
}

/* A header with opcode byte op, flags, AHS words and data length dsl. */
static void mk(uint8_t b[ISCSI_BHS_LEN], uint8_t op, uint8_t flags, uint8_t ahs_words, uint32_t dsl)
{
	memset(b, 0, ISCSI_BHS_LEN);
	b[0] = op;
	b[1] = flags;
	b[4] = ahs_words;
	b[5] = (uint8_t)(dsl >> 16);
	b[6] = (uint8_t)(dsl >> 8);
	b[7] = (uint8_t)dsl;
}

static const uint8_t initiator_ops[] = {
	ISCSI_OP_NOP_OUT,  ISCSI_OP_SCSI_CMD, ISCSI_OP_TASK_REQ,   ISCSI_OP_LOGIN_REQ,
	ISCSI_OP_TEXT_REQ, ISCSI_OP_DATA_OUT, ISCSI_OP_LOGOUT_REQ, ISCSI_OP_SNACK_REQ,
};

static int is_initiator_op(uint8_t op)
{
	for (unsigned i = 0; i < sizeof(initiator_ops); i++)
		if (initiator_ops[i] == op)
			return 1;
	return 0;
}

/* ---- acceptance ---- */

static void test_initiator_opcodes(void **state)
{
	uint8_t b[ISCSI_BHS_LEN];
	struct iscsi_bhs h;
	(void)state;

	for (unsigned i = 0; i < sizeof(initiator_ops); i++) {
		uint8_t op = initiator_ops[i];

		mk(b, op, 0x80, 0, 0);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), 0);
		assert_int_equal(h.opcode, op);
		assert_false(h.immediate);
		assert_int_equal(h.flags, 0x80);
		/* the immediate bit is not part of the opcode */
		mk(b, op | ISCSI_F_IMMEDIATE, 0x80, 0, 0);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), 0);
		assert_int_equal(h.opcode, op);
		assert_true(h.immediate);
	}
}

static void test_target_opcodes_rejected(void **state)
{
	static const uint8_t target_ops[] = {
		ISCSI_OP_NOP_IN,   ISCSI_OP_SCSI_RSP,   ISCSI_OP_TASK_RSP, ISCSI_OP_LOGIN_RSP,
		ISCSI_OP_TEXT_RSP, ISCSI_OP_DATA_IN,    ISCSI_OP_LOGOUT_RSP, ISCSI_OP_R2T,
		ISCSI_OP_ASYNC,    ISCSI_OP_REJECT,
	};
	uint8_t b[ISCSI_BHS_LEN];
	struct iscsi_bhs h;
	(void)state;

	for (unsigned i = 0; i < sizeof(target_ops); i++) {
		mk(b, target_ops[i], 0x80, 0, 0);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG);
		mk(b, target_ops[i] | ISCSI_F_IMMEDIATE, 0x80, 0, 0);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG);
	}
	/* every one of the 64 opcodes: accepted exactly when it is an initiator's */
	for (unsigned op = 0; op < 64; op++) {
		mk(b, (uint8_t)op, 0x80, 0, 0);
		if (decode(b, 0, DSL_MAX, &h) != (is_initiator_op((uint8_t)op) ? 0 : -EBADMSG))
			fail_msg("opcode 0x%02x", op);
	}
}

static void test_top_bit_rejected(void **state)
{
	uint8_t b[ISCSI_BHS_LEN];
	struct iscsi_bhs h;
	(void)state;

	for (unsigned i = 0; i < sizeof(initiator_ops); i++) {
		mk(b, 0x80 | initiator_ops[i], 0x80, 0, 0);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG);
		mk(b, 0x80 | ISCSI_F_IMMEDIATE | initiator_ops[i], 0x80, 0, 0);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG);
	}
}

static void test_ahs_limit(void **state)
{
	uint8_t b[ISCSI_BHS_LEN];
	struct iscsi_bhs h;
	(void)state;

	/* TotalAHSLength counts 4-byte words */
	mk(b, ISCSI_OP_SCSI_CMD, 0x80, 1, 0);
	assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG); /* no AHS allowed */
	assert_int_equal(decode(b, 3, DSL_MAX, &h), -EBADMSG);
	assert_int_equal(decode(b, 4, DSL_MAX, &h), 0);
	assert_int_equal(h.ahs_len, 4);
	mk(b, ISCSI_OP_SCSI_CMD, 0x80, 255, 0);
	assert_int_equal(decode(b, 1019, DSL_MAX, &h), -EBADMSG);
	assert_int_equal(decode(b, 1020, DSL_MAX, &h), 0);
	assert_int_equal(h.ahs_len, 1020);
	assert_int_equal(decode(b, UINT32_MAX, DSL_MAX, &h), 0);
}

static void test_dsl_limit(void **state)
{
	uint8_t b[ISCSI_BHS_LEN];
	struct iscsi_bhs h;
	(void)state;

	mk(b, ISCSI_OP_LOGIN_REQ, 0x87, 0, 8192);
	assert_int_equal(decode(b, 0, 8192, &h), 0);
	assert_int_equal(h.dsl, 8192);
	assert_int_equal(decode(b, 0, 8191, &h), -EBADMSG);
	assert_int_equal(decode(b, 0, 0, &h), -EBADMSG);
	/* the whole 24 bits */
	mk(b, ISCSI_OP_DATA_OUT, 0x80, 0, 0xffffff);
	assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG);
	assert_int_equal(decode(b, 0, 0xffffff, &h), 0);
	assert_int_equal(h.dsl, 0xffffff);
	assert_int_equal(decode(b, 0, UINT32_MAX, &h), 0);
	/* no data: always within the limit */
	mk(b, ISCSI_OP_SCSI_CMD, 0x80, 0, 0);
	assert_int_equal(decode(b, 0, 0, &h), 0);
}

static void test_no_data_allowed(void **state)
{
	static const uint8_t none[] = { ISCSI_OP_TASK_REQ, ISCSI_OP_LOGOUT_REQ, ISCSI_OP_SNACK_REQ };
	static const uint8_t some[] = { ISCSI_OP_NOP_OUT,  ISCSI_OP_SCSI_CMD, ISCSI_OP_LOGIN_REQ,
					ISCSI_OP_TEXT_REQ, ISCSI_OP_DATA_OUT };
	uint8_t b[ISCSI_BHS_LEN];
	struct iscsi_bhs h;
	(void)state;

	for (unsigned i = 0; i < sizeof(none); i++) {
		mk(b, none[i], 0x80, 0, 4);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG);
		mk(b, none[i], 0x80, 0, 1);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG);
		mk(b, none[i], 0x80, 0, 0);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), 0);
	}
	for (unsigned i = 0; i < sizeof(some); i++) {
		mk(b, some[i], 0x80, 0, 4);
		assert_int_equal(decode(b, 0, DSL_MAX, &h), 0);
		assert_int_equal(h.dsl, 4);
	}
}

/* ---- fields ---- */

/* Login request: I, T=1 CSG=1 NSG=3, version 0/0, 200 bytes of data, ISID
 * 80 12 34 56 78 9a, TSIH 0x1234, ITT 0x10, CID 0xbeef, CmdSN 5, ExpStatSN 7. */
static const uint8_t login_bytes[48] = {
	0x43, 0x87, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc8, /* op, flags, max/min ver, AHS, DSL */
	0x80, 0x12, 0x34, 0x56, 0x78, 0x9a,             /* ISID */
	0x12, 0x34,                                     /* TSIH */
	0x00, 0x00, 0x00, 0x10,                         /* ITT */
	0xbe, 0xef, 0x00, 0x00,                         /* CID, reserved */
	0x00, 0x00, 0x00, 0x05,                         /* CmdSN */
	0x00, 0x00, 0x00, 0x07,                         /* ExpStatSN */
};

static void test_login_fields(void **state)
{
	static const uint8_t isid[6] = { 0x80, 0x12, 0x34, 0x56, 0x78, 0x9a };
	struct iscsi_bhs h;
	(void)state;

	assert_int_equal(decode(login_bytes, 0, DSL_MAX, &h), 0);
	assert_int_equal(h.opcode, ISCSI_OP_LOGIN_REQ);
	assert_true(h.immediate);
	assert_true(h.flags & ISCSI_LOGIN_T);
	assert_false(h.flags & ISCSI_LOGIN_C);
	assert_int_equal(ISCSI_LOGIN_CSG(h.flags), ISCSI_STAGE_OPERATIONAL);
	assert_int_equal(ISCSI_LOGIN_NSG(h.flags), ISCSI_STAGE_FULL);
	assert_int_equal(h.b2, 0);
	assert_int_equal(h.b3, 0);
	assert_int_equal(h.dsl, 200);
	assert_int_equal(h.ahs_len, 0);
	assert_memory_equal(h.isid, isid, 6);
	assert_int_equal(h.tsih, 0x1234);
	assert_int_equal(h.itt, 0x10);
	assert_int_equal(h.cid, 0xbeef);
	assert_int_equal(h.w24, 5); /* CmdSN */
	assert_int_equal(h.w28, 7); /* ExpStatSN */
	/* bytes 8..15 are also there as a number */
	assert_int_equal(h.lun, 0x80123456789a1234ull);
	assert_int_equal(iscsi_rest_len(&h), 200);
}

/* SCSI Command: F, R, attr simple; LUN 0 (single level); ITT 0xa1b2c3d4;
 * EDTL 0x00010000; CmdSN 0x11223344; ExpStatSN 0x55667788; READ(16) of 128
 * blocks at LBA 0x0102030405060708. */
static const uint8_t cmd_bytes[48] = {
	0x01, 0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0xa1, 0xb2, 0xc3, 0xd4,
	0x00, 0x01, 0x00, 0x00,
	0x11, 0x22, 0x33, 0x44,
	0x55, 0x66, 0x77, 0x88,
	0x88, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00,
};

static void test_scsi_cmd_fields(void **state)
{
	struct iscsi_bhs h;
	(void)state;

	assert_int_equal(decode(cmd_bytes, 0, DSL_MAX, &h), 0);
	assert_int_equal(h.opcode, ISCSI_OP_SCSI_CMD);
	assert_false(h.immediate);
	assert_true(h.flags & ISCSI_F_FINAL);
	assert_true(h.flags & ISCSI_CMD_READ);
	assert_false(h.flags & ISCSI_CMD_WRITE);
	assert_int_equal(h.flags & 7, 1); /* task attribute: simple */
	assert_int_equal(h.lun, 0);
	assert_int_equal(h.itt, 0xa1b2c3d4u);
	assert_int_equal(h.w20, 0x00010000u); /* expected data transfer length */
	assert_int_equal(h.w24, 0x11223344u); /* CmdSN */
	assert_int_equal(h.w28, 0x55667788u); /* ExpStatSN */
	assert_memory_equal(h.cdb, cmd_bytes + 32, ISCSI_CDB_LEN);
	assert_int_equal(h.cdb[0], 0x88);
	assert_int_equal(h.w32, 0x88000102u);
	assert_int_equal(h.w44, 0x00800000u);
	assert_int_equal(iscsi_rest_len(&h), 0);

	/* a write with immediate data and a LUN */
	uint8_t b[48];
	memcpy(b, cmd_bytes, 48);
	b[0] |= ISCSI_F_IMMEDIATE;
	b[1] = ISCSI_F_FINAL | ISCSI_CMD_WRITE | 1;
	b[7] = 0x00;
	b[6] = 0x02; /* 512 bytes of data */
	b[9] = 0x05; /* LUN 5, peripheral addressing */
	assert_int_equal(decode(b, 0, DSL_MAX, &h), 0);
	assert_true(h.immediate);
	assert_true(h.flags & ISCSI_CMD_WRITE);
	assert_int_equal(h.dsl, 512);
	assert_int_equal(h.lun, 0x0005000000000000ull);
	assert_int_equal(iscsi_rest_len(&h), 512);
}

static void test_data_out_fields(void **state)
{
	uint8_t b[48];
	struct iscsi_bhs h;
	(void)state;

	mk(b, ISCSI_OP_DATA_OUT, ISCSI_F_FINAL, 0, 8192);
	iscsi_put32(b + 16, 0x77);      /* ITT */
	iscsi_put32(b + 20, 0x1000);    /* TTT */
	iscsi_put32(b + 28, 9);         /* ExpStatSN */
	iscsi_put32(b + 36, 3);         /* DataSN */
	iscsi_put32(b + 40, 0x30000);   /* Buffer Offset */
	assert_int_equal(decode(b, 0, DSL_MAX, &h), 0);
	assert_int_equal(h.itt, 0x77);
	assert_int_equal(h.w20, 0x1000);
	assert_int_equal(h.w28, 9);
	assert_int_equal(h.w36, 3);
	assert_int_equal(h.w40, 0x30000);
	assert_int_equal(h.dsl, 8192);
}

static void test_rest_len(void **state)
{
	struct iscsi_bhs h;
	(void)state;

	memset(&h, 0, sizeof(h));
	assert_int_equal(iscsi_rest_len(&h), 0);
	h.dsl = 1;
	assert_int_equal(iscsi_rest_len(&h), 4);
	h.dsl = 4;
	assert_int_equal(iscsi_rest_len(&h), 4);
	h.dsl = 5;
	h.ahs_len = 8;
	assert_int_equal(iscsi_rest_len(&h), 16);
	/* the largest a header can say, and beyond: no wrap */
	h.ahs_len = 1020;
	h.dsl = 0xffffff;
	assert_int_equal(iscsi_rest_len(&h), 1020ull + 0x1000000ull);
	h.ahs_len = UINT32_MAX;
	h.dsl = UINT32_MAX;
	assert_int_equal(iscsi_rest_len(&h), (uint64_t)UINT32_MAX + 0x100000000ull);
}

/* ---- encoding ---- */

static void test_bhs_init(void **state)
{
	uint8_t b[ISCSI_BHS_LEN + 4];
	struct iscsi_bhs h;
	(void)state;

	memset(b, 0xee, sizeof(b));
	iscsi_bhs_init(b, ISCSI_OP_DATA_IN, ISCSI_F_FINAL | ISCSI_DIN_STATUS, 0x123456, 0xdeadbeef);
	assert_int_equal(b[0], ISCSI_OP_DATA_IN);
	assert_int_equal(b[1], ISCSI_F_FINAL | ISCSI_DIN_STATUS);
	assert_int_equal(b[4], 0);
	assert_int_equal(b[5], 0x12);
	assert_int_equal(b[6], 0x34);
	assert_int_equal(b[7], 0x56);
	assert_int_equal(iscsi_get32(b + 16), 0xdeadbeef);
	for (unsigned i = 8; i < 16; i++)
		assert_int_equal(b[i], 0);
	for (unsigned i = 20; i < ISCSI_BHS_LEN; i++)
		assert_int_equal(b[i], 0);
	for (unsigned i = ISCSI_BHS_LEN; i < sizeof(b); i++)
		assert_int_equal(b[i], 0xee); /* nothing past the header */

	/* what the target writes for an initiator opcode decodes back */
	iscsi_bhs_init(b, ISCSI_OP_NOP_OUT, ISCSI_F_FINAL, 48, 0x42);
	assert_int_equal(decode(b, 0, DSL_MAX, &h), 0);
	assert_int_equal(h.dsl, 48);
	assert_int_equal(h.itt, 0x42);
	/* and a target opcode is refused by the decoder */
	iscsi_bhs_init(b, ISCSI_OP_NOP_IN, ISCSI_F_FINAL, 0, 0x42);
	assert_int_equal(decode(b, 0, DSL_MAX, &h), -EBADMSG);
}

static void test_put_get(void **state)
{
	uint8_t b[6] = { 0 };
	(void)state;

	iscsi_put32(b + 1, 0x01020304);
	assert_memory_equal(b, "\x00\x01\x02\x03\x04\x00", 6);
	assert_int_equal(iscsi_get32(b + 1), 0x01020304);
	iscsi_put32(b, 0xffffffff);
	assert_int_equal(iscsi_get32(b), 0xffffffffu);
	iscsi_put16(b + 4, 0xa1b2);
	assert_int_equal(b[4], 0xa1);
	assert_int_equal(b[5], 0xb2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_initiator_opcodes),
		cmocka_unit_test(test_target_opcodes_rejected),
		cmocka_unit_test(test_top_bit_rejected),
		cmocka_unit_test(test_ahs_limit),
		cmocka_unit_test(test_dsl_limit),
		cmocka_unit_test(test_no_data_allowed),
		cmocka_unit_test(test_login_fields),
		cmocka_unit_test(test_scsi_cmd_fields),
		cmocka_unit_test(test_data_out_fields),
		cmocka_unit_test(test_rest_len),
		cmocka_unit_test(test_bhs_init),
		cmocka_unit_test(test_put_get),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
