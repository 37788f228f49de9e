/* The iSCSI target (src/iscsi) driven PDU by PDU: one connection made by
 * calling the server's on_accept through the net stub (with an eventfd as
 * its descriptor: no socket), a real single-node volume over a RAM data area
 * ("ram:") behind it, its metadata file in a mkdtemp directory under
 * /dev/shm (RAM). The test is the initiator: it pushes PDUs built from
 * include/proto/iscsi.h into the connection and reads back every PDU the
 * target sent (no digests are negotiated). */
#include "engine.h"

#include <sys/eventfd.h>

#include "../../include/proto/iscsi.h"
#include "../../src/config/config.h"
#include "../../src/iscsi/iscsi_server.h"
#include "support/net_stub.h"

#define KIB 1024u
#define VOL_SIZE (4u << 20)
#define PORTAL "127.0.0.1:3260"
#define TARGET "iqn.2026-11.org.tandem:ut.vol0"
#define MAX_BURST (16 * KIB)
#define FIRST_BURST (8 * KIB)
#define WAIT_MS 5000ull

struct tgt {
	struct ev_loop *ev;
	struct cfg *cfg;
	char *dir;
	struct vol *vols[1];
	struct iscsi_server *srv;
	struct stub_conn *s; /* the initiator's connection */
	uint32_t cmd_sn, exp_stat_sn;
	size_t seen; /* bytes of the target's output already returned by next_pdu */
};

/* One PDU the target sent. */
struct pdu {
	uint8_t op, flags, b2, b3;
	uint32_t dsl, itt, w20, w24, w28, w32, w36, w40, w44;
	const uint8_t *data;
};

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void pass(struct tgt *t)
{
	assert_int_equal(ev_run_once(t->ev, 5 * ENG_MS), 0);
}

#define WAIT_FOR(t, cond)                                                    \
	do {                                                                 \
		uint64_t t0_ = now_ns();                                     \
		while (!(cond)) {                                            \
			if (now_ns() - t0_ > WAIT_MS * ENG_MS)               \
				fail_msg("timed out waiting for %s", #cond); \
			pass(t);                                             \
		}                                                            \
	} while (0)

static void settle(struct tgt *t)
{
	for (int i = 0; i < 10; i++)
		pass(t);
}

/* ---- building PDUs ---- */

/* A BHS with opcode, flags, data length, LUN 0 and ITT; the caller sets the rest. */
static void bhs(uint8_t b[ISCSI_BHS_LEN], uint8_t op, uint8_t flags, uint32_t dsl, uint32_t itt)
{
	memset(b, 0, ISCSI_BHS_LEN);
	b[0] = op;
	b[1] = flags;
	b[5] = (uint8_t)(dsl >> 16);
	b[6] = (uint8_t)(dsl >> 8);
	b[7] = (uint8_t)dsl;
	put32(b + 16, itt);
}

/* Sends a PDU: the BHS, then data padded to a multiple of 4. */
static void send_pdu(struct tgt *t, const uint8_t b[ISCSI_BHS_LEN], const void *data, uint32_t dsl)
{
	static const uint8_t zero[4];

	stub_push(t->s, b, ISCSI_BHS_LEN);
	if (dsl) {
		stub_push(t->s, data, dsl);
		stub_push(t->s, zero, -dsl & 3u);
	}
}

/* The next PDU of the target's output, or false when none is complete. */
static bool next_pdu(struct tgt *t, struct pdu *p)
{
	const uint8_t *b = t->s->out + t->seen;
	size_t left = t->s->out_len - t->seen, need;

	if (left < ISCSI_BHS_LEN)
		return false;
	memset(p, 0, sizeof(*p));
	p->op = b[0] & ISCSI_OP_MASK;
	p->flags = b[1];
	p->b2 = b[2];
	p->b3 = b[3];
	p->dsl = (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
	p->itt = get32(b + 16);
	p->w20 = get32(b + 20);
	p->w24 = get32(b + 24);
	p->w28 = get32(b + 28);
	p->w32 = get32(b + 32);
	p->w36 = get32(b + 36);
	p->w40 = get32(b + 40);
	p->w44 = get32(b + 44);
	p->data = b + ISCSI_BHS_LEN;
	need = ISCSI_BHS_LEN + ((p->dsl + 3u) & ~3u);
	if (left < need)
		return false;
	t->seen += need;
	if (p->op == ISCSI_OP_SCSI_RSP || p->op == ISCSI_OP_TASK_RSP ||
	    p->op == ISCSI_OP_LOGIN_RSP || p->op == ISCSI_OP_NOP_IN ||
	    (p->op == ISCSI_OP_DATA_IN && (p->flags & ISCSI_DIN_STATUS)))
		t->exp_stat_sn = p->w24 + 1;
	return true;
}

/* Runs the loop until the target sent a PDU; returns it. */
static struct pdu expect_pdu(struct tgt *t)
{
	struct pdu p;
	uint64_t t0 = now_ns();

	while (!next_pdu(t, &p)) {
		if (now_ns() - t0 > WAIT_MS * ENG_MS)
			fail_msg("no PDU from the target");
		pass(t);
	}
	return p;
}

static void expect_silence(struct tgt *t)
{
	struct pdu p;

	settle(t);
	if (next_pdu(t, &p))
		fail_msg("unexpected PDU opcode 0x%02x itt %08x", p.op, p.itt);
}

/* ---- the target ---- */

static void tgt_open(struct tgt *t)
{
	char text[1024], err[256], sub[512];

	memset(t, 0, sizeof(*t));
	stub_reset(); /* what a failed test left (its teardown did not run) */
	t->dir = eng_mkdtemp("iscsi-engine");
	snprintf(sub, sizeof(sub), "%s/a", t->dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(text, sizeof(text),
		 "[cluster]\nname = ut\n"
		 "[node a]\niscsi = %s\ncontrol = %s/a.sock\ndata-dir = %s/a\n"
		 "[volume vol0]\nsize = %u\nnodes = a\ndisk.a = ram:\n",
		 PORTAL, t->dir, t->dir, VOL_SIZE);
	if (cfg_parse_string(text, "unit", &t->cfg, err, sizeof(err)))
		fail_msg("config: %s", err);
	t->ev = ev_new(256);
	assert_non_null(t->ev);
	if (vol_open(t->ev, t->cfg, 0, 0, &t->vols[0], err, sizeof(err)))
		fail_msg("vol_open: %s", err);
	assert_int_equal(iscsi_server_new(t->ev, PORTAL, t->cfg, t->vols, 1, &t->srv), 0);
	assert_true(stub_listening(PORTAL));
	assert_int_equal(stub_accept(PORTAL, eventfd(0, EFD_CLOEXEC)), 0);
	assert_int_equal(stub_nconns(), 1);
	t->s = stub_conn_at(0);
	assert_true(t->s->accepted);
	assert_int_equal(iscsi_server_conns(t->srv), 1);
	t->cmd_sn = 1;
}

static void tgt_close(struct tgt *t)
{
	uint64_t t0 = now_ns();

	iscsi_server_shutdown(t->srv);
	while (iscsi_server_conns(t->srv)) {
		assert_true(now_ns() - t0 < WAIT_MS * ENG_MS);
		pass(t);
	}
	assert_int_equal(ev_run_once(t->ev, 0), 0);
	iscsi_server_free(t->srv);
	vol_close(t->vols[0]);
	assert_int_equal(ev_run_once(t->ev, 0), 0);
	ev_free(t->ev);
	stub_reset();
	cfg_free(t->cfg);
	unit_rmtree(t->dir);
	free(t->dir);
}

static size_t keys(char *out, size_t cap, const char *const *kv)
{
	size_t n = 0;

	for (; *kv; kv++) {
		size_t k = strlen(*kv) + 1;
		assert_true(n + k <= cap);
		memcpy(out + n, *kv, k);
		n += k;
	}
	return n;
}

/* A login without CHAP, straight from the operational stage to the full
 * feature phase; checks the response. */
static void login(struct tgt *t)
{
	static const char *const kv[] = {
		"InitiatorName=iqn.2026-11.org.example:unit",
		"TargetName=" TARGET,
		"SessionType=Normal",
		"HeaderDigest=None",
		"DataDigest=None",
		"InitialR2T=Yes",
		"ImmediateData=Yes",
		"MaxBurstLength=16384",
		"FirstBurstLength=8192",
		"MaxOutstandingR2T=1",
		"MaxRecvDataSegmentLength=65536",
		NULL,
	};
	uint8_t b[ISCSI_BHS_LEN];
	char text[1024];
	size_t n = keys(text, sizeof(text), kv);
	struct pdu p;

	bhs(b, ISCSI_OP_LOGIN_REQ | ISCSI_F_IMMEDIATE,
	    ISCSI_LOGIN_T | ISCSI_STAGE_OPERATIONAL << 2 | ISCSI_STAGE_FULL, (uint32_t)n, 0x1000);
	b[8] = 0x40; /* ISID: random format */
	b[13] = 1;
	put32(b + 20, 0); /* CID 0 */
	put32(b + 24, t->cmd_sn);
	put32(b + 28, 0);
	send_pdu(t, b, text, (uint32_t)n);
	p = expect_pdu(t);
	assert_int_equal(p.op, ISCSI_OP_LOGIN_RSP);
	assert_int_equal(p.itt, 0x1000);
	assert_int_equal(p.w36 >> 16, ISCSI_LOGIN_OK); /* status class and detail */
	assert_true(p.flags & ISCSI_LOGIN_T);
	assert_int_equal(ISCSI_LOGIN_NSG(p.flags), ISCSI_STAGE_FULL);
	assert_int_equal(p.w28, t->cmd_sn); /* ExpCmdSN */
	assert_true(memmem(p.data, p.dsl, "MaxBurstLength=16384", 21) != NULL);
	assert_true(memmem(p.data, p.dsl, "FirstBurstLength=8192", 22) != NULL);
	assert_true(memmem(p.data, p.dsl, "InitialR2T=Yes", 15) != NULL);
	assert_true(memmem(p.data, p.dsl, "ImmediateData=Yes", 18) != NULL);
}

/* SCSI Command: WRITE(10) of nblocks at lba, with imm bytes of data right
 * behind it (F set: no unsolicited Data-Out follows). */
static void send_write(struct tgt *t, uint32_t itt, uint32_t lba, uint16_t nblocks,
		       const uint8_t *imm, uint32_t immlen)
{
	uint8_t b[ISCSI_BHS_LEN];

	bhs(b, ISCSI_OP_SCSI_CMD, ISCSI_F_FINAL | ISCSI_CMD_WRITE | 1 /* simple */, immlen, itt);
	put32(b + 20, nblocks * 512u);
	put32(b + 24, t->cmd_sn++);
	put32(b + 28, t->exp_stat_sn);
	b[32] = 0x2a; /* WRITE(10) */
	put32(b + 34, lba);
	b[39] = (uint8_t)(nblocks >> 8);
	b[40] = (uint8_t)nblocks;
	send_pdu(t, b, imm, immlen);
}

static void send_tur(struct tgt *t, uint32_t itt)
{
	uint8_t b[ISCSI_BHS_LEN];

	bhs(b, ISCSI_OP_SCSI_CMD, ISCSI_F_FINAL | 1, 0, itt);
	put32(b + 24, t->cmd_sn++);
	put32(b + 28, t->exp_stat_sn);
	send_pdu(t, b, NULL, 0); /* CDB all zero: TEST UNIT READY */
}

static void send_data_out(struct tgt *t, uint32_t itt, uint32_t ttt, uint32_t datasn, uint32_t off,
			  const uint8_t *data, uint32_t len, bool final)
{
	uint8_t b[ISCSI_BHS_LEN];

	bhs(b, ISCSI_OP_DATA_OUT, final ? ISCSI_F_FINAL : 0, len, itt);
	put32(b + 20, ttt);
	put32(b + 28, t->exp_stat_sn);
	put32(b + 36, datasn);
	put32(b + 40, off);
	send_pdu(t, b, data, len);
}

static void send_abort_task(struct tgt *t, uint32_t itt, uint32_t ref_itt, uint32_t ref_cmd_sn)
{
	uint8_t b[ISCSI_BHS_LEN];

	bhs(b, ISCSI_OP_TASK_REQ | ISCSI_F_IMMEDIATE, ISCSI_F_FINAL | ISCSI_TMF_ABORT_TASK, 0, itt);
	put32(b + 20, ref_itt);
	put32(b + 24, t->cmd_sn); /* immediate: does not advance CmdSN */
	put32(b + 28, t->exp_stat_sn);
	put32(b + 32, ref_cmd_sn);
	send_pdu(t, b, NULL, 0);
}

static void send_nop(struct tgt *t, uint32_t itt)
{
	uint8_t b[ISCSI_BHS_LEN];

	bhs(b, ISCSI_OP_NOP_OUT | ISCSI_F_IMMEDIATE, ISCSI_F_FINAL, 0, itt);
	put32(b + 20, ISCSI_RESERVED_TAG);
	put32(b + 24, t->cmd_sn);
	put32(b + 28, t->exp_stat_sn);
	send_pdu(t, b, NULL, 0);
}

static uint8_t *pattern(uint32_t len, uint8_t seed)
{
	uint8_t *p = malloc(len);

	assert_non_null(p);
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 13 + (i >> 9));
	return p;
}

static void assert_volume(struct tgt *t, uint64_t off, const uint8_t *want, uint32_t len)
{
	uint8_t *got = malloc(len);

	assert_non_null(got);
	eng_read(t->ev, t->vols[0], off, len, got);
	assert_memory_equal(got, want, len);
	free(got);
}

static void assert_good(const struct pdu *p, uint32_t itt)
{
	assert_int_equal(p->op, ISCSI_OP_SCSI_RSP);
	assert_int_equal(p->itt, itt);
	assert_int_equal(p->b3, 0x00); /* GOOD */
	assert_int_equal(p->dsl, 0);
}

/* ---- tests ---- */

static void test_login_full_feature(void **state)
{
	struct tgt t;
	struct pdu p;
	(void)state;

	tgt_open(&t);
	login(&t);
	/* full feature phase: a command is served */
	send_tur(&t, 1);
	p = expect_pdu(&t);
	assert_good(&p, 1);
	assert_int_equal(p.w28, t.cmd_sn); /* ExpCmdSN moved past it */
	/* and a NOP-Out is answered with the same tag */
	send_nop(&t, 2);
	p = expect_pdu(&t);
	assert_int_equal(p.op, ISCSI_OP_NOP_IN);
	assert_int_equal(p.itt, 2);
	assert_int_equal(p.w20, ISCSI_RESERVED_TAG);
	tgt_close(&t);
}

/* A SCSI command before the login drops the connection (I1). */
static void test_command_before_login(void **state)
{
	struct tgt t;
	(void)state;

	tgt_open(&t);
	send_tur(&t, 1);
	WAIT_FOR(&t, t.s->shut);
	assert_int_equal(t.s->out_len, 0);
	tgt_close(&t);
}

/* A WRITE of 32 KiB with 4 KiB of immediate data (FirstBurstLength 8 KiB,
 * MaxBurstLength 16 KiB, InitialR2T=Yes): R2T 0 asks for 16 KiB at 4 KiB,
 * R2T 1 for the last 12 KiB; DataSN restarts at 0 for each; one GOOD. */
static void test_write_r2t_sequence(void **state)
{
	struct tgt t;
	struct pdu p, r0, r1;
	const uint32_t len = 32 * KIB, itt = 0x77;
	uint8_t *data = pattern(len, 5);
	uint32_t stat;
	(void)state;

	tgt_open(&t);
	login(&t);
	send_write(&t, itt, 8, (uint16_t)(len / 512), data, 4 * KIB);
	r0 = expect_pdu(&t);
	assert_int_equal(r0.op, ISCSI_OP_R2T);
	assert_int_equal(r0.itt, itt);
	assert_int_equal(r0.w36, 0);       /* R2TSN */
	assert_int_equal(r0.w40, 4 * KIB); /* buffer offset: after the immediate data */
	assert_int_equal(r0.w44, MAX_BURST);
	assert_int_not_equal(r0.w20, ISCSI_RESERVED_TAG);
	expect_silence(&t); /* MaxOutstandingR2T=1 */
	send_data_out(&t, itt, r0.w20, 0, 4 * KIB, data + 4 * KIB, 8 * KIB, false);
	send_data_out(&t, itt, r0.w20, 1, 12 * KIB, data + 12 * KIB, 8 * KIB, true);
	r1 = expect_pdu(&t);
	assert_int_equal(r1.op, ISCSI_OP_R2T);
	assert_int_equal(r1.itt, itt);
	assert_int_equal(r1.w36, 1);
	assert_int_equal(r1.w40, 20 * KIB);
	assert_int_equal(r1.w44, 12 * KIB);
	assert_int_equal(r1.w24, r0.w24); /* R2T carries StatSN, never advances it */
	send_data_out(&t, itt, r1.w20, 0, 20 * KIB, data + 20 * KIB, 12 * KIB, true);
	p = expect_pdu(&t);
	assert_good(&p, itt);
	stat = p.w24;
	assert_int_equal(stat, r1.w24); /* the status took the StatSN the R2Ts showed */
	assert_volume(&t, 8 * 512, data, len);
	/* the next status is StatSN + 1 (I3) */
	send_tur(&t, 0x78);
	p = expect_pdu(&t);
	assert_good(&p, 0x78);
	assert_int_equal(p.w24, stat + 1);
	free(data);
	tgt_close(&t);
}

/* A Data-Out whose DataSN is not the next one fails the command (CHECK
 * CONDITION, ABORTED COMMAND / DATA PHASE ERROR) once its sequence ends;
 * nothing is written and the session goes on. */
static void test_data_out_wrong_datasn(void **state)
{
	struct tgt t;
	struct pdu r, p;
	const uint32_t len = 16 * KIB, itt = 0x50;
	uint8_t *data = pattern(len, 9), *zero = calloc(1, len);
	(void)state;

	assert_non_null(zero);
	tgt_open(&t);
	login(&t);
	send_write(&t, itt, 0, (uint16_t)(len / 512), NULL, 0);
	r = expect_pdu(&t);
	assert_int_equal(r.op, ISCSI_OP_R2T);
	assert_int_equal(r.w40, 0);
	assert_int_equal(r.w44, len);
	send_data_out(&t, itt, r.w20, 0, 0, data, 8 * KIB, false);
	send_data_out(&t, itt, r.w20, 5 /* 1 expected */, 8 * KIB, data + 8 * KIB, 8 * KIB, true);
	p = expect_pdu(&t);
	assert_int_equal(p.op, ISCSI_OP_SCSI_RSP);
	assert_int_equal(p.itt, itt);
	assert_int_equal(p.b3, 0x02); /* CHECK CONDITION */
	assert_true(p.dsl >= 2 + 14);
	assert_int_equal(p.data[2 + 2] & 0x0f, 0x0b); /* sense key ABORTED COMMAND */
	assert_int_equal(p.data[2 + 12], 0x4b);       /* DATA PHASE ERROR */
	assert_int_equal(p.data[2 + 13], 0x00);
	expect_silence(&t);
	assert_volume(&t, 0, zero, len);
	send_tur(&t, 0x51);
	p = expect_pdu(&t);
	assert_good(&p, 0x51);
	free(data);
	free(zero);
	tgt_close(&t);
}

/* A Data-Out at an offset the R2T did not ask for is a protocol error: the
 * connection is closed, the command gets no response. */
static void test_data_out_wrong_offset(void **state)
{
	struct tgt t;
	struct pdu r, p;
	const uint32_t len = 16 * KIB, itt = 0x60;
	uint8_t *data = pattern(len, 3);
	(void)state;

	tgt_open(&t);
	login(&t);
	send_write(&t, itt, 0, (uint16_t)(len / 512), NULL, 0);
	r = expect_pdu(&t);
	assert_int_equal(r.op, ISCSI_OP_R2T);
	send_data_out(&t, itt, r.w20, 0, 512, data, 8 * KIB, true);
	WAIT_FOR(&t, t.s->shut);
	assert_false(next_pdu(&t, &p));
	WAIT_FOR(&t, iscsi_server_conns(t.srv) == 0);
	free(data);
	tgt_close(&t);
}

/* ABORT TASK of a WRITE waiting for its Data-Out: "function complete"; the
 * task sends nothing more, its late Data-Out is dropped, nothing written. */
static void test_abort_task_waiting_for_data(void **state)
{
	struct tgt t;
	struct pdu r, p;
	const uint32_t len = 16 * KIB, itt = 0x10;
	uint8_t *data = pattern(len, 7), *zero = calloc(1, len);
	uint32_t cmd_sn = 0;
	(void)state;

	assert_non_null(zero);
	tgt_open(&t);
	login(&t);
	cmd_sn = t.cmd_sn;
	send_write(&t, itt, 64, (uint16_t)(len / 512), NULL, 0);
	r = expect_pdu(&t);
	assert_int_equal(r.op, ISCSI_OP_R2T);
	send_abort_task(&t, 0x11, itt, cmd_sn);
	p = expect_pdu(&t);
	assert_int_equal(p.op, ISCSI_OP_TASK_RSP);
	assert_int_equal(p.itt, 0x11);
	assert_int_equal(p.b2, ISCSI_TMF_RSP_COMPLETE);
	/* the data the initiator had on its way anyway */
	send_data_out(&t, itt, r.w20, 0, 0, data, len, true);
	send_nop(&t, 0x12);
	p = expect_pdu(&t);
	assert_int_equal(p.op, ISCSI_OP_NOP_IN); /* no SCSI Response for 0x10 before it */
	assert_int_equal(p.itt, 0x12);
	expect_silence(&t);
	assert_volume(&t, 64 * 512, zero, len);
	/* the tag is free again */
	send_tur(&t, itt);
	p = expect_pdu(&t);
	assert_good(&p, itt);
	free(data);
	free(zero);
	tgt_close(&t);
}

/* ABORT TASK of a task already answered: this target answers "task does
 * not exist" (RFC 7143 11.5.1 would have "function complete" when RefCmdSN
 * is inside the window and older than the TMF: the task was received). */
static void test_abort_task_done(void **state)
{
	struct tgt t;
	struct pdu p;
	uint32_t cmd_sn;
	(void)state;

	tgt_open(&t);
	login(&t);
	cmd_sn = t.cmd_sn;
	send_tur(&t, 0x20);
	p = expect_pdu(&t);
	assert_good(&p, 0x20);
	send_abort_task(&t, 0x21, 0x20, cmd_sn);
	p = expect_pdu(&t);
	assert_int_equal(p.op, ISCSI_OP_TASK_RSP);
	assert_int_equal(p.itt, 0x21);
	assert_int_equal(p.b2, ISCSI_TMF_RSP_NO_TASK);
	expect_silence(&t);
	tgt_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_login_full_feature),
		cmocka_unit_test(test_command_before_login),
		cmocka_unit_test(test_write_r2t_sequence),
		cmocka_unit_test(test_data_out_wrong_datasn),
		cmocka_unit_test(test_data_out_wrong_offset),
		cmocka_unit_test(test_abort_task_waiting_for_data),
		cmocka_unit_test(test_abort_task_done),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
