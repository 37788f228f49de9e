/* SCSI reservations (src/scsi/pr.c): the libiscsi iscsi-test-cu scenarios
 * (PrinReadKeys, PrinReportCapabilities, PrinServiceactionRange, ProutRegister,
 * ProutReserve Simple/Access/Ownership, ProutClear, ProutPreempt, Reserve6)
 * replayed the way the transport drives the module (pr_conflict first, then
 * pr_in / pr_out), the conflict table per type and role, the PROUT error
 * rules, PRgeneration, the data-in formats and cuts, the transport events and
 * the image codec. CDBs and parameter lists are copied into exact-size heap
 * buffers so that ASan (make SAN=1) catches a read past their end; after every
 * PROUT the invariants P1-P3 and the "changed" return (P5) are checked. */
#include "unit.h"

#include <errno.h>

#include "../../src/common/be.h"
#include "../../src/scsi/pr.h"

/* ---- helpers ---- */

static const uint8_t types[] = { PR_TYPE_WE, PR_TYPE_EA, PR_TYPE_WERO,
				 PR_TYPE_EARO, PR_TYPE_WEAR, PR_TYPE_EAAR };

static bool all_reg(uint8_t t)
{
	return t == PR_TYPE_WEAR || t == PR_TYPE_EAAR;
}

static struct pr_nexus nexus(const char *name, uint16_t tport)
{
	struct pr_nexus n;

	memset(&n, 0, sizeof(n));
	snprintf(n.initiator, sizeof(n.initiator), "%s", name);
	n.tport = tport;
	return n;
}

/* Two initiators (libiscsi's initiatorname1 / initiatorname2) and a third. */
#define NAME_A "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test,i,0x23d000000001"
#define NAME_B "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2,i,0x23d000000002"
#define NAME_C "iqn.1994-05.com.redhat:c0ffee,i,0x23d000000003"

struct fx {
	struct pr_state *s;
	struct scsi_req *r;
	struct pr_nexus a, b, c;
};

static struct fx fx_new(void)
{
	struct fx f;

	f.s = malloc(sizeof(*f.s));
	f.r = malloc(sizeof(*f.r));
	assert_non_null(f.s);
	assert_non_null(f.r);
	memset(f.s, 0x5a, sizeof(*f.s)); /* pr_init must set everything */
	pr_init(f.s);
	assert_true(pr_valid(f.s));
	memset(f.r, 0xa5, sizeof(*f.r)); /* nothing may rely on a zeroed request */
	f.a = nexus(NAME_A, 1);
	f.b = nexus(NAME_B, 1);
	f.c = nexus(NAME_C, 2);
	return f;
}

static void fx_free(struct fx *f)
{
	free(f->s);
	free(f->r);
}

static void assert_status(const struct scsi_req *r, uint8_t status)
{
	assert_int_equal(r->kind, SCSI_DONE);
	assert_int_equal(r->status, status);
	if (status == SCSI_CHECK_CONDITION) {
		assert_int_equal(r->sense_len, 18);
		assert_int_equal(r->data_len, 0);
	} else {
		assert_int_equal(r->sense_len, 0);
	}
}

static void assert_sense(const struct scsi_req *r, int key, int asc)
{
	assert_status(r, SCSI_CHECK_CONDITION);
	assert_int_equal(scsi_sense_key(r->sense, r->sense_len), key);
	assert_int_equal(scsi_sense_asc(r->sense, r->sense_len), asc);
}

/* The field pointer of an INVALID FIELD sense: C/D and the byte. */
static void assert_pointer(const struct scsi_req *r, bool cdb, unsigned byte)
{
	assert_int_equal(r->sense[15], cdb ? 0xc0 : 0x80);
	assert_int_equal(get16(r->sense + 16), byte);
}

/* pr_out on exact-size copies; checks P1-P3 and that it returns 1 exactly
 * when the state changed, and then with GOOD. */
static int out_raw(struct fx *f, const struct pr_nexus *who, const uint8_t *cdb, unsigned cdb_len,
		   const uint8_t *param, uint32_t len)
{
	struct pr_state *before = malloc(sizeof(*before));
	uint8_t *c = malloc(cdb_len), *p = malloc(len ? len : 1);
	int changed;

	assert_non_null(before);
	assert_non_null(c);
	assert_non_null(p);
	*before = *f->s;
	memcpy(c, cdb, cdb_len);
	if (len)
		memcpy(p, param, len);
	changed = pr_out(f->s, who, c, len ? p : NULL, len, f->r);
	assert_true(changed == 0 || changed == 1);
	assert_true(pr_valid(f->s));
	assert_int_equal(changed, !pr_equal(before, f->s));
	if (changed)
		assert_status(f->r, SCSI_GOOD);
	free(before);
	free(c);
	free(p);
	return changed;
}

static void prout_cdb(uint8_t *c, uint8_t sa, uint8_t scope_type, uint32_t plen)
{
	memset(c, 0, 16);
	c[0] = PR_OP_OUT;
	c[1] = sa;
	c[2] = scope_type;
	put32(c + 5, plen);
}

static void prout_param(uint8_t *p, uint64_t key, uint64_t sark, uint8_t flags)
{
	memset(p, 0, PR_PARAM_LEN);
	put64(p, key);
	put64(p + 8, sark);
	p[20] = flags;
}

/* One command as the transport runs it: pr_conflict, then pr_in / pr_out, or
 * "executed" (GOOD) for any other command. Returns the SAM status. */
static uint8_t exec(struct fx *f, const struct pr_nexus *who, const uint8_t *cdb16,
		    const uint8_t *param, uint32_t len)
{
	uint8_t *c = malloc(16);
	bool conflict;

	assert_non_null(c);
	memcpy(c, cdb16, 16);
	conflict = pr_conflict(f->s, who, c);
	free(c);
	if (conflict) {
		f->r->status = SCSI_RESERVATION_CONFLICT;
		return SCSI_RESERVATION_CONFLICT;
	}
	if (cdb16[0] == PR_OP_IN) {
		struct pr_state *before = malloc(sizeof(*before));

		assert_non_null(before);
		*before = *f->s;
		c = malloc(10);
		assert_non_null(c);
		memcpy(c, cdb16, 10);
		pr_in(f->s, c, f->r);
		free(c);
		assert_true(pr_equal(before, f->s));
		free(before);
		assert_true(f->r->data_len <= get16(cdb16 + 7));
		assert_status(f->r, f->r->status);
		return f->r->status;
	}
	if (cdb16[0] == PR_OP_OUT || cdb16[0] == PR_OP_RESERVE_6 || cdb16[0] == PR_OP_RELEASE_6 ||
	    cdb16[0] == PR_OP_RESERVE_10 || cdb16[0] == PR_OP_RELEASE_10) {
		out_raw(f, who, cdb16, cdb16[0] == PR_OP_RESERVE_6 || cdb16[0] == PR_OP_RELEASE_6 ? 6 : 10,
			param, len);
		return f->r->status;
	}
	f->r->status = SCSI_GOOD;
	return SCSI_GOOD;
}

static uint8_t prout(struct fx *f, const struct pr_nexus *who, uint8_t sa, uint8_t type,
		     uint64_t key, uint64_t sark, uint8_t flags)
{
	uint8_t c[16], p[PR_PARAM_LEN];

	prout_cdb(c, sa, type, PR_PARAM_LEN);
	prout_param(p, key, sark, flags);
	return exec(f, who, c, p, sizeof(p));
}

static uint8_t reg_ignore(struct fx *f, const struct pr_nexus *who, uint64_t key)
{
	return prout(f, who, PR_OUT_REGISTER_AND_IGNORE, 0, 0, key, 0);
}

static uint8_t reg(struct fx *f, const struct pr_nexus *who, uint64_t key, uint64_t sark)
{
	return prout(f, who, PR_OUT_REGISTER, 0, key, sark, 0);
}

static uint8_t reserve(struct fx *f, const struct pr_nexus *who, uint64_t key, uint8_t type)
{
	return prout(f, who, PR_OUT_RESERVE, type, key, 0, 0);
}

static uint8_t release(struct fx *f, const struct pr_nexus *who, uint64_t key, uint8_t type)
{
	return prout(f, who, PR_OUT_RELEASE, type, key, 0, 0);
}

static uint8_t prin(struct fx *f, const struct pr_nexus *who, uint8_t sa, uint16_t alloc)
{
	uint8_t c[16] = { PR_OP_IN, sa };

	put16(c + 7, alloc);
	return exec(f, who, c, NULL, 0);
}

static uint8_t simple(struct fx *f, const struct pr_nexus *who, uint8_t op)
{
	uint8_t c[16] = { op };

	if (op == SCSI_READ_10 || op == SCSI_WRITE_10)
		c[8] = 1; /* one block at LBA 0 (libiscsi uses LBA 1, it does not matter) */
	return exec(f, who, c, NULL, 0);
}

/* READ KEYS with a large allocation length: the keys, in order. */
static uint32_t keys(struct fx *f, uint64_t *k, uint32_t max)
{
	uint32_t n;

	assert_int_equal(prin(f, &f->a, PR_IN_READ_KEYS, 16384), SCSI_GOOD);
	assert_int_equal(f->r->data_len, 8 + get32(f->r->data + 4));
	assert_int_equal(get32(f->r->data), f->s->generation);
	n = get32(f->r->data + 4) / 8;
	assert_true(n <= max);
	for (uint32_t i = 0; i < n; i++)
		k[i] = get64(f->r->data + 8 + 8 * i);
	return n;
}

static bool key_present(struct fx *f, uint64_t key)
{
	uint64_t k[PR_MAX_REG];
	uint32_t n = keys(f, k, PR_MAX_REG);

	for (uint32_t i = 0; i < n; i++)
		if (k[i] == key)
			return true;
	return false;
}

/* READ RESERVATION: reserved with key and type (libiscsi prin_verify_reserved_as). */
static void assert_reserved_as(struct fx *f, uint64_t key, uint8_t type)
{
	assert_int_equal(prin(f, &f->a, PR_IN_READ_RESERVATION, 16384), SCSI_GOOD);
	assert_int_equal(f->r->data_len, 24);
	assert_int_equal(get32(f->r->data), f->s->generation);
	assert_int_equal(get32(f->r->data + 4), 16);
	assert_true(get64(f->r->data + 8) == key);
	assert_int_equal(f->r->data[21], type); /* scope LU_SCOPE (0) << 4 | type */
	for (int i = 16; i < 24; i++)
		if (i != 21)
			assert_int_equal(f->r->data[i], 0);
}

static void assert_not_reserved(struct fx *f)
{
	assert_int_equal(prin(f, &f->a, PR_IN_READ_RESERVATION, 16384), SCSI_GOOD);
	assert_int_equal(f->r->data_len, 8);
	assert_int_equal(get32(f->r->data + 4), 0);
}

/* ---- PERSISTENT RESERVE IN ---- */

static void test_init(void **state)
{
	struct fx f = fx_new();
	uint64_t k[PR_MAX_REG];
	(void)state;

	assert_int_equal(f.s->nreg, 0);
	assert_int_equal(f.s->holder, -1);
	assert_int_equal(f.s->generation, 0);
	assert_false(f.s->legacy);
	assert_int_equal(keys(&f, k, PR_MAX_REG), 0);
	assert_not_reserved(&f);
	fx_free(&f);
}

/* PrinServiceactionRange: 0-3 GOOD, 4-0x1f INVALID FIELD IN CDB. */
static void test_prin_service_actions(void **state)
{
	struct fx f = fx_new();
	uint8_t c[16] = { PR_OP_IN };
	(void)state;

	for (uint8_t sa = 0; sa < 0x20; sa++) {
		assert_int_equal(prin(&f, &f.a, sa, 16384), sa < 4 ? SCSI_GOOD : SCSI_CHECK_CONDITION);
		if (sa >= 4) {
			assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_CDB);
			assert_pointer(f.r, true, 1);
		}
	}
	/* bits 7-5 of byte 1 are reserved: the service action is bits 4-0 */
	c[1] = 0xe0 | PR_IN_READ_KEYS;
	put16(c + 7, 100);
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_GOOD);
	/* NACA / LINK */
	c[1] = 0;
	c[9] = 0x04;
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_CHECK_CONDITION);
	assert_pointer(f.r, true, 9);
	c[9] = 0x01;
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_CHECK_CONDITION);
	fx_free(&f);
}

/* PrinReadKeys Simple and Truncate. */
static void test_read_keys(void **state)
{
	struct fx f = fx_new();
	uint64_t k[PR_MAX_REG];
	(void)state;

	assert_int_equal(reg_ignore(&f, &f.a, 0x1111), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.b, 0x2222), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.c, 0x1111), SCSI_GOOD); /* keys need not be unique */
	assert_int_equal(keys(&f, k, PR_MAX_REG), 3);
	assert_true(k[0] == 0x1111 && k[1] == 0x2222 && k[2] == 0x1111); /* registration order */

	/* alloc 8: the header only, ADDITIONAL LENGTH still counts every key */
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_KEYS, 8), SCSI_GOOD);
	assert_int_equal(f.r->data_len, 8);
	assert_int_equal(get32(f.r->data), 3);
	assert_int_equal(get32(f.r->data + 4), 24);
	/* a cut inside a key */
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_KEYS, 13), SCSI_GOOD);
	assert_int_equal(f.r->data_len, 13);
	assert_int_equal(get32(f.r->data + 4), 24);
	/* inside the header; and 0 */
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_KEYS, 3), SCSI_GOOD);
	assert_int_equal(f.r->data_len, 3);
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_KEYS, 0), SCSI_GOOD);
	assert_int_equal(f.r->data_len, 0);
	/* READ RESERVATION cut the same way */
	assert_int_equal(reserve(&f, &f.a, 0x1111, PR_TYPE_WE), SCSI_GOOD);
	assert_int_equal(prin(&f, &f.b, PR_IN_READ_RESERVATION, 8), SCSI_GOOD);
	assert_int_equal(f.r->data_len, 8);
	assert_int_equal(get32(f.r->data + 4), 16);
	fx_free(&f);
}

/* PrinReportCapabilities. */
static void test_report_capabilities(void **state)
{
	struct fx f = fx_new();
	const uint8_t *d = f.r->data;
	(void)state;

	assert_int_equal(prin(&f, &f.a, PR_IN_REPORT_CAPABILITIES, 16384), SCSI_GOOD);
	assert_int_equal(f.r->data_len, 8);
	assert_int_equal(get16(d), 8);          /* LENGTH */
	assert_int_equal(d[2], 0x01);          /* RLR_C 0, CRH 0, SIP_C 0, ATP_C 0, PTPL_C 1 */
	assert_int_equal(d[3] & 0x80, 0x80);   /* TMV */
	assert_int_equal((d[3] >> 4) & 7, 3);  /* ALLOW COMMANDS (libiscsi: <= 5) */
	assert_int_equal(d[3] & 0x01, 0);      /* PTPL_A */
	assert_int_equal(get16(d + 4), 0xea01); /* the six types, nothing else */
	assert_int_equal(d[6] | d[7], 0);
	/* every type it reports can be reserved, read back and released */
	assert_int_equal(prout(&f, &f.a, PR_OUT_REGISTER_AND_IGNORE, 0, 0, 0x77, PR_APTPL),
			 SCSI_GOOD);
	assert_int_equal(prin(&f, &f.a, PR_IN_REPORT_CAPABILITIES, 16384), SCSI_GOOD);
	assert_int_equal(d[3] & 0x01, 1); /* PTPL_A follows the last REGISTER */
	for (size_t i = 0; i < sizeof(types); i++) {
		assert_int_equal(reserve(&f, &f.a, 0x77, types[i]), SCSI_GOOD);
		assert_reserved_as(&f, all_reg(types[i]) ? 0 : 0x77, types[i]);
		assert_int_equal(release(&f, &f.a, 0x77, types[i]), SCSI_GOOD);
		assert_not_reserved(&f);
	}
	/* cut */
	assert_int_equal(prin(&f, &f.a, PR_IN_REPORT_CAPABILITIES, 2), SCSI_GOOD);
	assert_int_equal(f.r->data_len, 2);
	fx_free(&f);
}

static void test_read_full_status(void **state)
{
	struct fx f = fx_new();
	struct pr_nexus odd = nexus("iqn.x", 7); /* no ISID: format 00b, padded to 20 */
	const uint8_t *d = f.r->data, *e;
	uint32_t tid;
	(void)state;

	assert_int_equal(reg_ignore(&f, &f.a, 0xaa), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &odd, 0xbb), SCSI_GOOD);
	assert_int_equal(reserve(&f, &odd, 0xbb, PR_TYPE_EARO), SCSI_GOOD);
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_FULL_STATUS, 16384), SCSI_GOOD);
	assert_int_equal(get32(d), 2);
	assert_int_equal(f.r->data_len, 8 + get32(d + 4));
	/* A: not the holder */
	e = d + 8;
	assert_true(get64(e) == 0xaa);
	assert_int_equal(e[12], 0x00);
	assert_int_equal(e[13], 0x00);
	assert_int_equal(get16(e + 18), 1);
	tid = get32(e + 20);
	assert_int_equal(tid, 4 + ((strlen(NAME_A) + 1 + 3) & ~3u));
	assert_int_equal(e[24], 0x45); /* format 01b, iSCSI */
	assert_int_equal(get16(e + 26), tid - 4);
	assert_memory_equal(e + 28, NAME_A, strlen(NAME_A) + 1);
	for (uint32_t i = 28 + strlen(NAME_A); i < 24 + tid; i++)
		assert_int_equal(e[i], 0);
	/* odd: the holder */
	e += 24 + tid;
	assert_true(get64(e) == 0xbb);
	assert_int_equal(e[12], 0x01);
	assert_int_equal(e[13], PR_TYPE_EARO);
	assert_int_equal(get16(e + 18), 7);
	assert_int_equal(get32(e + 20), 24);
	assert_int_equal(e[24], 0x05);
	assert_int_equal(get16(e + 26), 20);
	assert_memory_equal(e + 28, "iqn.x", 6);
	assert_int_equal(f.r->data_len, (uint32_t)(e + 48 - d));

	/* all registrants: everyone holds */
	assert_int_equal(release(&f, &odd, 0xbb, PR_TYPE_EARO), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.a, 0xaa, PR_TYPE_WEAR), SCSI_GOOD);
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_FULL_STATUS, 16384), SCSI_GOOD);
	e = d + 8;
	assert_int_equal(e[12], 0x01);
	assert_int_equal(e[13], PR_TYPE_WEAR);
	e += 24 + get32(e + 20);
	assert_int_equal(e[12], 0x01);
	assert_int_equal(e[13], PR_TYPE_WEAR);
	fx_free(&f);
}

/* 32 registrations with the longest names: more than the 4096-byte data-in
 * buffer. ADDITIONAL LENGTH counts all of it; the data-in stops at 4096. */
static void test_read_full_status_large(void **state)
{
	struct fx f = fx_new();
	char name[PR_NAME_MAX];
	uint32_t total;
	(void)state;

	for (int i = 0; i < PR_MAX_REG; i++) {
		struct pr_nexus n;

		memset(name, 'n', sizeof(name));
		snprintf(name, 32, "iqn.%02d", i);
		name[strlen(name)] = 'n';
		name[PR_NAME_MAX - 1] = 0;
		n = nexus(name, (uint16_t)(i + 1));
		assert_int_equal(reg_ignore(&f, &n, (uint64_t)i + 1), SCSI_GOOD);
	}
	assert_int_equal(f.s->nreg, PR_MAX_REG);
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_FULL_STATUS, 65535), SCSI_GOOD);
	total = 8 + get32(f.r->data + 4);
	/* a TransportID holds the name, its NUL, padding to a multiple of 4 */
	assert_int_equal(total, 8 + PR_MAX_REG * (24 + 4 + ((PR_NAME_MAX + 3) & ~3)));
	assert_int_equal(f.r->data_len, sizeof(f.r->data));
	assert_true(get64(f.r->data + 8 + 15 * (24 + 4 + ((PR_NAME_MAX + 3) & ~3))) == 16);
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_FULL_STATUS, 100), SCSI_GOOD);
	assert_int_equal(f.r->data_len, 100);
	assert_int_equal(8 + get32(f.r->data + 4), total);
	fx_free(&f);
}

/* ---- REGISTER ---- */

/* ProutRegister.Simple, then the rest of the REGISTER rules. */
static void test_register(void **state)
{
	struct fx f = fx_new();
	uint64_t k[PR_MAX_REG];
	(void)state;

	assert_int_equal(reg_ignore(&f, &f.a, 0x1234), SCSI_GOOD);
	assert_true(key_present(&f, 0x1234));
	assert_int_equal(f.s->generation, 1);
	/* REGISTER with RESERVATION KEY 0 while registered: conflict */
	assert_int_equal(reg(&f, &f.a, 0, 0x1235), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(f.s->generation, 1);
	/* unregister */
	assert_int_equal(reg(&f, &f.a, 0x1234, 0), SCSI_GOOD);
	assert_false(key_present(&f, 0x1234));
	assert_int_equal(f.s->generation, 2);

	/* unregistered: REGISTER with a non-zero RESERVATION KEY conflicts */
	assert_int_equal(reg(&f, &f.a, 0x99, 0x1234), SCSI_RESERVATION_CONFLICT);
	/* unregistered, key 0: GOOD, nothing happens (generation too) */
	assert_int_equal(reg(&f, &f.a, 0, 0), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.a, 0), SCSI_GOOD);
	assert_int_equal(f.s->generation, 2);
	assert_int_equal(f.s->nreg, 0);
	/* REGISTER with key 0 registers; the right key changes it */
	assert_int_equal(reg(&f, &f.a, 0, 0x10), SCSI_GOOD);
	assert_int_equal(reg(&f, &f.a, 0x10, 0x11), SCSI_GOOD);
	assert_int_equal(reg(&f, &f.a, 0x10, 0x12), SCSI_RESERVATION_CONFLICT);
	/* REGISTER AND IGNORE EXISTING KEY ignores the key */
	assert_int_equal(prout(&f, &f.a, PR_OUT_REGISTER_AND_IGNORE, 0, 0xdead, 0x12, 0), SCSI_GOOD);
	assert_int_equal(keys(&f, k, PR_MAX_REG), 1);
	assert_true(k[0] == 0x12);
	assert_int_equal(f.s->generation, 5);
	/* the same initiator through another target port is another nexus */
	struct pr_nexus a2 = f.a;
	a2.tport = 2;
	assert_int_equal(reg(&f, &a2, 0, 0x12), SCSI_GOOD);
	/* ... and another ISID too */
	struct pr_nexus a3 = nexus("iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test,i,0x23d000000009", 1);
	assert_int_equal(reg(&f, &a3, 0, 0x13), SCSI_GOOD);
	assert_int_equal(keys(&f, k, PR_MAX_REG), 3);
	/* type and scope are ignored by REGISTER */
	assert_int_equal(prout(&f, &f.b, PR_OUT_REGISTER, 0xf2, 0, 0x14, 0), SCSI_GOOD);
	assert_int_equal(f.s->nreg, 4);
	fx_free(&f);
}

static void test_register_full(void **state)
{
	struct fx f = fx_new();
	char name[64];
	(void)state;

	for (int i = 0; i < PR_MAX_REG; i++) {
		snprintf(name, sizeof(name), "iqn.2026-11.test:%d,i,0x%012d", i, i);
		struct pr_nexus n = nexus(name, 1);
		assert_int_equal(reg_ignore(&f, &n, 100 + (uint64_t)i), SCSI_GOOD);
	}
	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_CHECK_CONDITION);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, PR_ASC_INSUFFICIENT_REG);
	assert_int_equal(f.s->nreg, PR_MAX_REG);
	assert_int_equal(f.s->generation, PR_MAX_REG);
	/* a registered nexus can still change its key */
	snprintf(name, sizeof(name), "iqn.2026-11.test:%d,i,0x%012d", 5, 5);
	struct pr_nexus n5 = nexus(name, 1);
	assert_int_equal(reg(&f, &n5, 105, 5), SCSI_GOOD);
	assert_int_equal(reg(&f, &n5, 5, 0), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_GOOD);
	fx_free(&f);
}

/* The CDB and parameter-list checks, and APTPL. */
static void test_prout_checks(void **state)
{
	struct fx f = fx_new();
	uint8_t c[16], p[32];
	(void)state;

	/* PARAMETER LIST LENGTH must be 24, and the data must be there */
	static const uint32_t bad_len[] = { 0, 8, 23, 25, 32, 0x01000018 };
	for (size_t i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++) {
		prout_cdb(c, PR_OUT_REGISTER_AND_IGNORE, 0, bad_len[i]);
		prout_param(p, 0, 1, 0);
		assert_int_equal(exec(&f, &f.a, c, p, bad_len[i] < 32 ? bad_len[i] : 32),
				 SCSI_CHECK_CONDITION);
		assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_PARAM_LIST_LENGTH);
	}
	prout_cdb(c, PR_OUT_REGISTER_AND_IGNORE, 0, 24);
	assert_int_equal(exec(&f, &f.a, c, p, 23), SCSI_CHECK_CONDITION);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_PARAM_LIST_LENGTH);
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_CHECK_CONDITION);
	/* SPEC_I_PT (whatever the length) and ALL_TG_PT */
	prout_param(p, 0, 1, PR_SPEC_I_PT);
	assert_int_equal(exec(&f, &f.a, c, p, 24), SCSI_CHECK_CONDITION);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_PARAM);
	assert_pointer(f.r, false, 20);
	prout_cdb(c, PR_OUT_REGISTER_AND_IGNORE, 0, 32);
	assert_int_equal(exec(&f, &f.a, c, p, 32), SCSI_CHECK_CONDITION);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_PARAM);
	prout_cdb(c, PR_OUT_REGISTER, 0, 24);
	prout_param(p, 0, 1, PR_ALL_TG_PT);
	assert_int_equal(exec(&f, &f.a, c, p, 24), SCSI_CHECK_CONDITION);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_PARAM);
	assert_int_equal(f.s->nreg, 0);
	/* REGISTER AND MOVE, REPLACE LOST RESERVATION, reserved service actions */
	for (uint8_t sa = 7; sa < 0x20; sa++) {
		assert_int_equal(prout(&f, &f.a, sa, PR_TYPE_WE, 0, 1, 0), SCSI_CHECK_CONDITION);
		assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_CDB);
		assert_pointer(f.r, true, 1);
	}
	/* NACA / LINK */
	prout_cdb(c, PR_OUT_REGISTER_AND_IGNORE, 0, 24);
	prout_param(p, 0, 1, 0);
	c[9] = 0x04;
	assert_int_equal(exec(&f, &f.a, c, p, 24), SCSI_CHECK_CONDITION);
	assert_pointer(f.r, true, 9);
	assert_int_equal(f.s->nreg, 0);
	assert_int_equal(f.s->generation, 0);

	/* ALL_TG_PT is ignored by the other service actions */
	assert_int_equal(reg_ignore(&f, &f.a, 5), SCSI_GOOD);
	assert_int_equal(prout(&f, &f.a, PR_OUT_RESERVE, PR_TYPE_WE, 5, 0, PR_ALL_TG_PT), SCSI_GOOD);
	/* scope and type of RESERVE / RELEASE / PREEMPT */
	static const uint8_t bad_type[] = { 0x00, 0x02, 0x04, 0x09, 0x0f, 0x11, 0x21 };
	static const uint8_t typed[] = { PR_OUT_RESERVE, PR_OUT_RELEASE, PR_OUT_PREEMPT,
					 PR_OUT_PREEMPT_AND_ABORT };
	for (size_t i = 0; i < sizeof(bad_type); i++)
		for (size_t j = 0; j < sizeof(typed); j++) {
			assert_int_equal(prout(&f, &f.a, typed[j], bad_type[i], 5, 5, 0),
					 SCSI_CHECK_CONDITION);
			assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_CDB);
			assert_pointer(f.r, true, 2);
		}
	assert_reserved_as(&f, 5, PR_TYPE_WE);

	/* APTPL: set by REGISTER (and its unregister), ignored elsewhere */
	assert_false(f.s->aptpl);
	assert_int_equal(prout(&f, &f.a, PR_OUT_REGISTER, 0, 5, 6, PR_APTPL), SCSI_GOOD);
	assert_true(f.s->aptpl);
	assert_int_equal(prout(&f, &f.a, PR_OUT_RELEASE, PR_TYPE_WE, 6, 0, 0), SCSI_GOOD);
	assert_true(f.s->aptpl);
	assert_int_equal(prout(&f, &f.a, PR_OUT_REGISTER, 0, 6, 0, 0), SCSI_GOOD);
	assert_false(f.s->aptpl);
	fx_free(&f);
}

/* ---- RESERVE / RELEASE ---- */

/* ProutReserve.Simple: each type in turn; PRgeneration does not move. */
static void test_reserve_simple(void **state)
{
	struct fx f = fx_new();
	(void)state;

	assert_int_equal(reg_ignore(&f, &f.a, 0xabc), SCSI_GOOD);
	for (size_t i = 0; i < sizeof(types); i++) {
		assert_int_equal(reserve(&f, &f.a, 0xabc, types[i]), SCSI_GOOD);
		assert_reserved_as(&f, all_reg(types[i]) ? 0 : 0xabc, types[i]);
		assert_int_equal(release(&f, &f.a, 0xabc, types[i]), SCSI_GOOD);
		assert_not_reserved(&f);
	}
	assert_int_equal(f.s->generation, 1);
	assert_int_equal(reg(&f, &f.a, 0xabc, 0), SCSI_GOOD);
	assert_int_equal(f.s->generation, 2);
	fx_free(&f);
}

static void test_reserve_rules(void **state)
{
	struct fx f = fx_new();
	(void)state;

	/* not registered, wrong key */
	assert_int_equal(reserve(&f, &f.a, 0, PR_TYPE_WE), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.b, 2), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.a, 2, PR_TYPE_WE), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(reserve(&f, &f.c, 0, PR_TYPE_WE), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(f.s->holder, -1);
	/* again by the holder: same type GOOD, another type conflict */
	assert_int_equal(reserve(&f, &f.a, 1, PR_TYPE_WE), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.a, 1, PR_TYPE_WE), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.a, 1, PR_TYPE_EA), SCSI_RESERVATION_CONFLICT);
	/* another registrant: conflict (whatever the type) */
	assert_int_equal(reserve(&f, &f.b, 2, PR_TYPE_WE), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(reserve(&f, &f.b, 2, PR_TYPE_EA), SCSI_RESERVATION_CONFLICT);
	assert_reserved_as(&f, 1, PR_TYPE_WE);
	/* pr_out alone, without pr_conflict, reaches the same answer */
	uint8_t c[16], p[PR_PARAM_LEN];
	prout_cdb(c, PR_OUT_RESERVE, PR_TYPE_WE, 24);
	prout_param(p, 2, 0, 0);
	assert_int_equal(out_raw(&f, &f.b, c, 10, p, 24), 0);
	assert_status(f.r, SCSI_RESERVATION_CONFLICT);
	assert_int_equal(release(&f, &f.a, 1, PR_TYPE_WE), SCSI_GOOD);

	/* all registrants: every registrant holds it */
	assert_int_equal(reserve(&f, &f.a, 1, PR_TYPE_EAAR), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.b, 2, PR_TYPE_EAAR), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.b, 2, PR_TYPE_WEAR), SCSI_RESERVATION_CONFLICT);
	assert_reserved_as(&f, 0, PR_TYPE_EAAR);
	assert_int_equal(release(&f, &f.b, 2, PR_TYPE_EAAR), SCSI_GOOD);
	assert_not_reserved(&f);
	assert_int_equal(f.s->generation, 2);
	fx_free(&f);
}

static void test_release_rules(void **state)
{
	struct fx f = fx_new();
	(void)state;

	/* nothing reserved, not registered: conflict; registered: GOOD no-op */
	assert_int_equal(release(&f, &f.a, 0, PR_TYPE_WE), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.b, 2), SCSI_GOOD);
	assert_int_equal(release(&f, &f.a, 1, PR_TYPE_WE), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.a, 1, PR_TYPE_WERO), SCSI_GOOD);
	/* wrong key: conflict */
	assert_int_equal(release(&f, &f.a, 2, PR_TYPE_WERO), SCSI_RESERVATION_CONFLICT);
	/* a registered non-holder: GOOD, the reservation stays (any type) */
	assert_int_equal(release(&f, &f.b, 2, PR_TYPE_WERO), SCSI_GOOD);
	assert_int_equal(release(&f, &f.b, 2, PR_TYPE_EA), SCSI_GOOD);
	assert_reserved_as(&f, 1, PR_TYPE_WERO);
	/* not registered: conflict */
	assert_int_equal(release(&f, &f.c, 0, PR_TYPE_WERO), SCSI_RESERVATION_CONFLICT);
	/* the holder with another type: INVALID RELEASE OF PERSISTENT RESERVATION */
	assert_int_equal(release(&f, &f.a, 1, PR_TYPE_WE), SCSI_CHECK_CONDITION);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, PR_ASC_INVALID_RELEASE);
	assert_reserved_as(&f, 1, PR_TYPE_WERO);
	assert_int_equal(release(&f, &f.a, 1, PR_TYPE_WERO), SCSI_GOOD);
	assert_not_reserved(&f);
	assert_int_equal(f.s->generation, 2);
	fx_free(&f);
}

/* ProutReserve.Access*: what a second initiator may do, registered and not,
 * while the first holds each type. */
static void test_reserve_access(void **state)
{
	static const struct {
		uint8_t type;
		bool reg_read, reg_write, unreg_read, unreg_write;
	} t[] = {
		{ PR_TYPE_EA, 0, 0, 0, 0 },   { PR_TYPE_WE, 1, 0, 1, 0 },
		{ PR_TYPE_EARO, 1, 1, 0, 0 }, { PR_TYPE_WERO, 1, 1, 1, 0 },
		{ PR_TYPE_EAAR, 1, 1, 0, 0 }, { PR_TYPE_WEAR, 1, 1, 1, 0 },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct fx f = fx_new();
		uint8_t ok = SCSI_GOOD, no = SCSI_RESERVATION_CONFLICT;

		assert_int_equal(reg_ignore(&f, &f.a, 0x1001), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.b, 0x2002), SCSI_GOOD);
		assert_int_equal(reserve(&f, &f.a, 0x1001, t[i].type), SCSI_GOOD);
		assert_reserved_as(&f, all_reg(t[i].type) ? 0 : 0x1001, t[i].type);
		assert_int_equal(simple(&f, &f.a, SCSI_READ_10), ok);
		assert_int_equal(simple(&f, &f.a, SCSI_WRITE_10), ok);
		assert_int_equal(simple(&f, &f.b, SCSI_READ_10), t[i].reg_read ? ok : no);
		assert_int_equal(simple(&f, &f.b, SCSI_WRITE_10), t[i].reg_write ? ok : no);
		assert_int_equal(reg(&f, &f.b, 0x2002, 0), SCSI_GOOD);
		assert_int_equal(simple(&f, &f.b, SCSI_READ_10), t[i].unreg_read ? ok : no);
		assert_int_equal(simple(&f, &f.b, SCSI_WRITE_10), t[i].unreg_write ? ok : no);
		assert_int_equal(release(&f, &f.a, 0x1001, t[i].type), SCSI_GOOD);
		assert_int_equal(reg(&f, &f.a, 0x1001, 0), SCSI_GOOD);
		assert_int_equal(f.s->nreg, 0);
		assert_int_equal(simple(&f, &f.b, SCSI_WRITE_10), ok);
		fx_free(&f);
	}
}

/* ProutReserve.Ownership*: the holder unregisters. */
static void test_reserve_ownership(void **state)
{
	(void)state;

	for (size_t i = 0; i < sizeof(types); i++) {
		struct fx f = fx_new();
		uint8_t type = types[i];

		assert_int_equal(reg_ignore(&f, &f.a, 0x11), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.b, 0x22), SCSI_GOOD);
		assert_int_equal(reserve(&f, &f.a, 0x11, type), SCSI_GOOD);
		assert_reserved_as(&f, all_reg(type) ? 0 : 0x11, type);
		assert_int_equal(reg(&f, &f.a, 0x11, 0), SCSI_GOOD);
		if (all_reg(type)) {
			/* it stays with the remaining registrant, who may release it */
			assert_reserved_as(&f, 0, type);
			assert_int_equal(f.s->holder, 0);
			assert_int_equal(release(&f, &f.b, 0x22, type), SCSI_GOOD);
		}
		assert_not_reserved(&f);
		assert_int_equal(reg(&f, &f.b, 0x22, 0), SCSI_GOOD);
		assert_int_equal(f.s->nreg, 0);
		fx_free(&f);
	}
	/* all registrants: the reservation ends with the last registration */
	struct fx f = fx_new();
	assert_int_equal(reg_ignore(&f, &f.a, 0x11), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.b, 0x22), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.c, 0x33), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.c, 0x33, PR_TYPE_WEAR), SCSI_GOOD);
	assert_int_equal(f.s->holder, 2);
	assert_int_equal(reg(&f, &f.a, 0x11, 0), SCSI_GOOD);
	assert_int_equal(f.s->holder, 1); /* follows the move of C's entry */
	assert_int_equal(reg(&f, &f.c, 0x33, 0), SCSI_GOOD);
	assert_reserved_as(&f, 0, PR_TYPE_WEAR);
	assert_int_equal(reg(&f, &f.b, 0x22, 0), SCSI_GOOD);
	assert_not_reserved(&f);
	/* a non-holder unregistering leaves the reservation and moves the index */
	assert_int_equal(reg_ignore(&f, &f.a, 0x11), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.b, 0x22), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.b, 0x22, PR_TYPE_EA), SCSI_GOOD);
	assert_int_equal(reg(&f, &f.a, 0x11, 0), SCSI_GOOD);
	assert_reserved_as(&f, 0x22, PR_TYPE_EA);
	assert_int_equal(f.s->holder, 0);
	/* the holder changing its key keeps the reservation under the new key */
	assert_int_equal(reg(&f, &f.b, 0x22, 0x23), SCSI_GOOD);
	assert_reserved_as(&f, 0x23, PR_TYPE_EA);
	fx_free(&f);
}

/* ---- the conflict table ---- */

enum role { HOLDER, REGISTRANT, STRANGER };

/* Expected conflicts for a read-class and a write-class command (SPC-4 /
 * SBC-3 tables), written out per type in pr.h order. */
static bool expect_conflict(uint8_t type, enum role who, bool read)
{
	if (who == HOLDER || (who == REGISTRANT && all_reg(type)))
		return false;
	switch (type) {
	case PR_TYPE_WE:
		return !read;
	case PR_TYPE_EA:
		return true;
	case PR_TYPE_WERO:
	case PR_TYPE_WEAR:
		return who == STRANGER && !read;
	default: /* EARO, EAAR */
		return who == STRANGER;
	}
}

static void test_conflict_table(void **state)
{
	static const uint8_t always[][16] = {
		{ SCSI_INQUIRY },
		{ SCSI_REPORT_LUNS },
		{ SCSI_REQUEST_SENSE },
		{ SCSI_TEST_UNIT_READY },
		{ SCSI_READ_CAPACITY_10 },
		{ SCSI_SERVICE_ACTION_IN_16, SCSI_SAI_READ_CAPACITY_16 },
		{ SCSI_MAINTENANCE_IN, SCSI_MI_REPORT_SUPPORTED_OPCODES },
		{ SCSI_MAINTENANCE_IN, 0x0a }, /* REPORT TARGET PORT GROUPS */
		{ PR_OP_IN, PR_IN_READ_KEYS },
		{ 0x4d },                      /* LOG SENSE */
		{ 0x1e, 0, 0, 0, 0 },          /* PREVENT ALLOW, PREVENT 0 */
		{ 0x1b, 0, 0, 0, 0x01 },       /* START STOP UNIT, START */
		{ 0xab, 0x01 },                /* READ MEDIA SERIAL NUMBER */
	};
	static const uint8_t reads[][16] = {
		{ SCSI_READ_6 },  { SCSI_READ_10 },       { SCSI_READ_12 },      { SCSI_READ_16 },
		{ SCSI_VERIFY_10 }, { SCSI_VERIFY_16 },   { 0xaf },              /* VERIFY 12 */
		{ SCSI_PRE_FETCH_10 }, { SCSI_PRE_FETCH_16 },
		{ SCSI_SERVICE_ACTION_IN_16, SCSI_SAI_GET_LBA_STATUS },
		{ SCSI_MODE_SENSE_6 }, { SCSI_MODE_SENSE_10 },
		{ 0x37 }, { 0x3c }, { 0x1c }, { 0x84 }, /* READ DEFECT DATA, READ BUFFER, ... */
		{ 0x7f, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x09 }, /* READ(32) */
	};
	static const uint8_t writes[][16] = {
		{ SCSI_WRITE_6 }, { SCSI_WRITE_10 }, { SCSI_WRITE_12 }, { SCSI_WRITE_16 },
		{ 0x2e }, { 0xae }, { 0x8e },          /* WRITE AND VERIFY */
		{ SCSI_WRITE_SAME_10 }, { SCSI_WRITE_SAME_16 }, { SCSI_UNMAP },
		{ 0x89 }, { 0x8b },                    /* COMPARE AND WRITE, ORWRITE */
		{ SCSI_SYNCHRONIZE_CACHE_10 }, { SCSI_SYNCHRONIZE_CACHE_16 },
		{ 0x48 }, { 0x04 }, { 0x83 },          /* SANITIZE, FORMAT UNIT, EXTENDED COPY */
		{ SCSI_MODE_SELECT_6 }, { SCSI_MODE_SELECT_10 }, { 0x4c }, /* LOG SELECT */
		{ 0x3b }, { 0x1d },                    /* WRITE BUFFER, SEND DIAGNOSTIC */
		{ 0x1e, 0, 0, 0, 1 },                  /* PREVENT ALLOW, PREVENT 1 */
		{ 0x1b, 0, 0, 0, 0 },                  /* START STOP UNIT, stop */
		{ 0x1b, 0, 0, 0, 0x11 },               /* ... a power condition */
		{ 0x7f, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x0b }, /* WRITE(32) */
		{ 0xc5 }, { 0xff },                    /* unknown opcodes */
	};
	(void)state;

	for (size_t t = 0; t < sizeof(types); t++) {
		struct fx f = fx_new();
		const struct pr_nexus *who[3] = { &f.a, &f.b, &f.c };

		assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.b, 2), SCSI_GOOD);
		assert_int_equal(reserve(&f, &f.a, 1, types[t]), SCSI_GOOD);
		for (int w = HOLDER; w <= STRANGER; w++) {
			for (size_t i = 0; i < sizeof(always) / 16; i++)
				assert_false(pr_conflict(f.s, who[w], always[i]));
			for (size_t i = 0; i < sizeof(reads) / 16; i++)
				assert_int_equal(pr_conflict(f.s, who[w], reads[i]),
						 expect_conflict(types[t], (enum role)w, true));
			for (size_t i = 0; i < sizeof(writes) / 16; i++)
				assert_int_equal(pr_conflict(f.s, who[w], writes[i]),
						 expect_conflict(types[t], (enum role)w, false));
		}
		/* PROUT: REGISTER always; CLEAR, PREEMPT, RELEASE for registrants;
		 * RESERVE for holders */
		uint8_t c[16];
		prout_cdb(c, PR_OUT_REGISTER, 0, 24);
		assert_false(pr_conflict(f.s, &f.c, c));
		prout_cdb(c, PR_OUT_REGISTER_AND_IGNORE, 0, 24);
		assert_false(pr_conflict(f.s, &f.c, c));
		static const uint8_t reg_only[] = { PR_OUT_CLEAR, PR_OUT_PREEMPT,
						    PR_OUT_PREEMPT_AND_ABORT, PR_OUT_RELEASE };
		for (size_t i = 0; i < sizeof(reg_only); i++) {
			prout_cdb(c, reg_only[i], types[t], 24);
			assert_false(pr_conflict(f.s, &f.a, c));
			assert_false(pr_conflict(f.s, &f.b, c));
			assert_true(pr_conflict(f.s, &f.c, c));
		}
		prout_cdb(c, PR_OUT_RESERVE, types[t], 24);
		assert_false(pr_conflict(f.s, &f.a, c));
		assert_int_equal(pr_conflict(f.s, &f.b, c), !all_reg(types[t]));
		assert_true(pr_conflict(f.s, &f.c, c));
		prout_cdb(c, PR_OUT_REGISTER_AND_MOVE, types[t], 24);
		assert_true(pr_conflict(f.s, &f.c, c));
		prout_cdb(c, 0x08, types[t], 24); /* reserved: pr_out answers it */
		assert_false(pr_conflict(f.s, &f.c, c));
		assert_int_equal(exec(&f, &f.c, c, NULL, 0), SCSI_CHECK_CONDITION);
		assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_CDB);
		/* RESERVE(6) / RELEASE(6) with registrations present (CRH=0) */
		uint8_t r6[16] = { PR_OP_RESERVE_6 }, l6[16] = { PR_OP_RELEASE_6 };
		assert_true(pr_conflict(f.s, &f.a, r6));
		assert_true(pr_conflict(f.s, &f.c, l6));
		fx_free(&f);
	}
	/* no reservation: registrations alone restrict nothing but RESERVE(6) */
	struct fx f = fx_new();
	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_GOOD);
	for (size_t i = 0; i < sizeof(writes) / 16; i++)
		assert_false(pr_conflict(f.s, &f.c, writes[i]));
	uint8_t r10[16] = { PR_OP_RESERVE_10 };
	assert_true(pr_conflict(f.s, &f.c, r10));
	assert_int_equal(simple(&f, &f.c, PR_OP_RESERVE_10), SCSI_RESERVATION_CONFLICT);
	/* pr_out refuses it by itself too */
	assert_int_equal(out_raw(&f, &f.c, r10, 10, NULL, 0), 0);
	assert_status(f.r, SCSI_RESERVATION_CONFLICT);
	assert_int_equal(out_raw(&f, &f.a, (const uint8_t[16]){ PR_OP_RELEASE_6 }, 6, NULL, 0), 0);
	assert_status(f.r, SCSI_RESERVATION_CONFLICT);
	fx_free(&f);
}

/* ---- CLEAR, PREEMPT ---- */

/* ProutClear.Simple. */
static void test_clear(void **state)
{
	struct fx f = fx_new();
	uint64_t k[PR_MAX_REG];
	uint32_t gen;
	(void)state;

	assert_int_equal(reg_ignore(&f, &f.a, 0x5151), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.b, 0x5252), SCSI_GOOD);
	assert_int_not_equal(keys(&f, k, PR_MAX_REG), 0);
	gen = f.s->generation;
	assert_int_equal(reserve(&f, &f.a, 0x5151, PR_TYPE_EA), SCSI_GOOD);
	assert_reserved_as(&f, 0x5151, PR_TYPE_EA);
	/* not registered, wrong key */
	assert_int_equal(prout(&f, &f.c, PR_OUT_CLEAR, 0, 0, 0, 0), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(prout(&f, &f.a, PR_OUT_CLEAR, 0, 0x5252, 0, 0), SCSI_RESERVATION_CONFLICT);
	/* by a registered non-holder: allowed under EA */
	assert_int_equal(prout(&f, &f.b, PR_OUT_CLEAR, 0, 0x5252, 0, 0), SCSI_GOOD);
	assert_not_reserved(&f);
	assert_int_equal(keys(&f, k, PR_MAX_REG), 0);
	assert_int_equal(f.s->generation, gen + 1);
	fx_free(&f);
}

/* ProutPreempt.RemoveRegistration, then the other PREEMPT cases. */
static void test_preempt_remove_registration(void **state)
{
	struct fx f = fx_new();
	uint64_t k[PR_MAX_REG];
	uint32_t gen;
	(void)state;

	assert_int_equal(reg_ignore(&f, &f.a, 0xa1), SCSI_GOOD);
	assert_int_equal(prout(&f, &f.a, PR_OUT_CLEAR, 0, 0xa1, 0, 0), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.a, 0xa1), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.b, 0xb2), SCSI_GOOD);
	assert_int_equal(keys(&f, k, PR_MAX_REG), 2);
	gen = f.s->generation;
	assert_int_equal(prout(&f, &f.b, PR_OUT_PREEMPT, PR_TYPE_EA, 0xb2, 0xa1, 0), SCSI_GOOD);
	assert_int_equal(keys(&f, k, PR_MAX_REG), 1);
	assert_true(k[0] == 0xb2);
	assert_int_equal(f.s->generation, gen + 1);
	assert_not_reserved(&f); /* no reservation was there, none is made */
	/* a key nobody has: conflict; key 0 without reservation: invalid field */
	assert_int_equal(prout(&f, &f.b, PR_OUT_PREEMPT, PR_TYPE_EA, 0xb2, 0xa1, 0),
			 SCSI_RESERVATION_CONFLICT);
	assert_int_equal(prout(&f, &f.b, PR_OUT_PREEMPT, PR_TYPE_EA, 0xb2, 0, 0),
			 SCSI_CHECK_CONDITION);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_PARAM);
	assert_pointer(f.r, false, 8);
	/* its own key: GOOD, it stays registered */
	assert_int_equal(prout(&f, &f.b, PR_OUT_PREEMPT, PR_TYPE_EA, 0xb2, 0xb2, 0), SCSI_GOOD);
	assert_int_equal(f.s->nreg, 1);
	/* not registered, wrong key */
	assert_int_equal(prout(&f, &f.a, PR_OUT_PREEMPT, PR_TYPE_EA, 0, 0xb2, 0),
			 SCSI_RESERVATION_CONFLICT);
	assert_int_equal(prout(&f, &f.b, PR_OUT_PREEMPT, PR_TYPE_EA, 0xb3, 0xb2, 0),
			 SCSI_RESERVATION_CONFLICT);
	assert_int_equal(f.s->generation, gen + 2);
	fx_free(&f);
}

static void test_preempt_reservation(void **state)
{
	(void)state;

	for (int abort_too = 0; abort_too < 2; abort_too++) {
		uint8_t sa = abort_too ? PR_OUT_PREEMPT_AND_ABORT : PR_OUT_PREEMPT;
		struct fx f = fx_new();
		struct pr_nexus a2 = f.a;
		uint64_t k[PR_MAX_REG];

		a2.tport = 2;
		/* a holder's key, shared by two nexuses: both go, B holds the new type */
		assert_int_equal(reg_ignore(&f, &f.a, 0xa), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.b, 0xb), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &a2, 0xa), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.c, 0xc), SCSI_GOOD);
		assert_int_equal(reserve(&f, &f.a, 0xa, PR_TYPE_WE), SCSI_GOOD);
		assert_int_equal(prout(&f, &f.b, sa, PR_TYPE_EARO, 0xb, 0xa, 0), SCSI_GOOD);
		assert_reserved_as(&f, 0xb, PR_TYPE_EARO);
		assert_int_equal(keys(&f, k, PR_MAX_REG), 2);
		assert_true(k[0] == 0xb && k[1] == 0xc);
		assert_int_equal(f.s->generation, 5);
		/* SARK 0 with a reservation that is not all-registrants */
		assert_int_equal(prout(&f, &f.c, sa, PR_TYPE_EA, 0xc, 0, 0), SCSI_CHECK_CONDITION);
		assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_PARAM);
		/* a non-holder's key: only that registration goes */
		assert_int_equal(reg_ignore(&f, &f.a, 0xd), SCSI_GOOD);
		assert_int_equal(prout(&f, &f.c, sa, PR_TYPE_EA, 0xc, 0xd, 0), SCSI_GOOD);
		assert_reserved_as(&f, 0xb, PR_TYPE_EARO);
		assert_int_equal(f.s->nreg, 2);
		/* the holder preempts itself: a new type, same holder */
		assert_int_equal(prout(&f, &f.b, sa, PR_TYPE_WE, 0xb, 0xb, 0), SCSI_GOOD);
		assert_reserved_as(&f, 0xb, PR_TYPE_WE);
		assert_int_equal(f.s->nreg, 2);
		/* unregistered: conflict from the table */
		assert_int_equal(prout(&f, &f.a, sa, PR_TYPE_WE, 0xd, 0xb, 0),
				 SCSI_RESERVATION_CONFLICT);
		fx_free(&f);

		/* all registrants, SARK 0: everyone else goes, C holds the new type */
		f = fx_new();
		assert_int_equal(reg_ignore(&f, &f.a, 0xa), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.b, 0xb), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.c, 0xc), SCSI_GOOD);
		assert_int_equal(reserve(&f, &f.a, 0xa, PR_TYPE_EAAR), SCSI_GOOD);
		assert_int_equal(prout(&f, &f.c, sa, PR_TYPE_WERO, 0xc, 0, 0), SCSI_GOOD);
		assert_reserved_as(&f, 0xc, PR_TYPE_WERO);
		assert_int_equal(f.s->nreg, 1);
		fx_free(&f);

		/* all registrants, a key: those registrations go, the reservation stays */
		f = fx_new();
		assert_int_equal(reg_ignore(&f, &f.a, 0xa), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.b, 0xb), SCSI_GOOD);
		assert_int_equal(reg_ignore(&f, &f.c, 0xc), SCSI_GOOD);
		assert_int_equal(reserve(&f, &f.b, 0xb, PR_TYPE_WEAR), SCSI_GOOD);
		assert_int_equal(prout(&f, &f.c, sa, PR_TYPE_WEAR, 0xc, 0xa, 0), SCSI_GOOD);
		assert_reserved_as(&f, 0, PR_TYPE_WEAR);
		assert_int_equal(f.s->nreg, 2);
		assert_int_equal(prout(&f, &f.c, sa, PR_TYPE_WEAR, 0xc, 0xb, 0), SCSI_GOOD);
		assert_reserved_as(&f, 0, PR_TYPE_WEAR);
		assert_int_equal(f.s->nreg, 1);
		assert_int_equal(f.s->holder, 0);
		fx_free(&f);
	}
}

/* One PROUT by who, then pr_ua() for A, B and C against the state before it. */
static void ua_prout(struct fx *f, const struct pr_nexus *who, uint8_t sa, uint8_t type,
		     uint64_t key, uint64_t sark, uint16_t ua[3])
{
	struct pr_state *before = malloc(sizeof(*before));
	uint8_t c[16], p[PR_PARAM_LEN];

	assert_non_null(before);
	*before = *f->s;
	prout_cdb(c, sa, type, PR_PARAM_LEN);
	prout_param(p, key, sark, 0);
	assert_int_equal(exec(f, who, c, p, sizeof(p)), SCSI_GOOD);
	assert_false(pr_equal(before, f->s)); /* pr_ua is only asked after a change */
	ua[0] = pr_ua(before, f->s, c, who, &f->a);
	ua[1] = pr_ua(before, f->s, c, who, &f->b);
	ua[2] = pr_ua(before, f->s, c, who, &f->c);
	free(before);
}

static void assert_ua(const uint16_t ua[3], uint16_t a, uint16_t b, uint16_t c)
{
	assert_int_equal(ua[0], a);
	assert_int_equal(ua[1], b);
	assert_int_equal(ua[2], c);
}

static void reg_abc(struct fx *f)
{
	assert_int_equal(reg_ignore(f, &f->a, 0xa), SCSI_GOOD);
	assert_int_equal(reg_ignore(f, &f->b, 0xb), SCSI_GOOD);
	assert_int_equal(reg_ignore(f, &f->c, 0xc), SCSI_GOOD);
}

/* SPC-4 5.13.11: who is told what after a PROUT by another nexus. */
static void test_unit_attentions(void **state)
{
	uint16_t ua[3];
	(void)state;

	for (int abort_too = 0; abort_too < 2; abort_too++) {
		uint8_t sa = abort_too ? PR_OUT_PREEMPT_AND_ABORT : PR_OUT_PREEMPT;
		struct fx f = fx_new();

		reg_abc(&f);
		assert_int_equal(reserve(&f, &f.a, 0xa, PR_TYPE_WE), SCSI_GOOD);
		/* B takes A's reservation, same type: only A hears of it */
		ua_prout(&f, &f.b, sa, PR_TYPE_WE, 0xb, 0xa, ua);
		assert_ua(ua, PR_UA_REG_PREEMPTED, 0, 0);
		/* B preempts itself into another type: C, still registered, is told */
		ua_prout(&f, &f.b, sa, PR_TYPE_EA, 0xb, 0xb, ua);
		assert_ua(ua, 0, 0, PR_UA_RES_RELEASED);
		/* a non-holder's registration: C is told, nobody else */
		ua_prout(&f, &f.b, sa, PR_TYPE_EA, 0xb, 0xc, ua);
		assert_ua(ua, 0, 0, PR_UA_REG_PREEMPTED);
		fx_free(&f);

		/* all registrants: a key goes, the reservation stays; then SARK 0 */
		f = fx_new();
		reg_abc(&f);
		assert_int_equal(reserve(&f, &f.a, 0xa, PR_TYPE_WEAR), SCSI_GOOD);
		ua_prout(&f, &f.c, sa, PR_TYPE_WEAR, 0xc, 0xa, ua);
		assert_ua(ua, PR_UA_REG_PREEMPTED, 0, 0);
		ua_prout(&f, &f.c, sa, PR_TYPE_EA, 0xc, 0, ua);
		assert_ua(ua, 0, PR_UA_REG_PREEMPTED, 0);
		fx_free(&f);
	}

	/* CLEAR: every other registrant, and only registrants */
	struct fx f = fx_new();
	assert_int_equal(reg_ignore(&f, &f.b, 0xb), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.c, 0xc), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.b, 0xb, PR_TYPE_EA), SCSI_GOOD);
	ua_prout(&f, &f.c, PR_OUT_CLEAR, 0, 0xc, 0, ua);
	assert_ua(ua, 0, PR_UA_RES_PREEMPTED, 0);
	fx_free(&f);

	/* RELEASE and a holder unregistering: told for the shared types only */
	for (size_t i = 0; i < sizeof(types); i++) {
		uint16_t want = types[i] == PR_TYPE_WE || types[i] == PR_TYPE_EA ? 0
										  : PR_UA_RES_RELEASED;
		f = fx_new();
		reg_abc(&f);
		assert_int_equal(reserve(&f, &f.a, 0xa, types[i]), SCSI_GOOD);
		ua_prout(&f, &f.a, PR_OUT_RELEASE, types[i], 0xa, 0, ua);
		assert_ua(ua, 0, want, want);
		if (!all_reg(types[i])) { /* (all registrants: it lives while B and C do) */
			assert_int_equal(reserve(&f, &f.a, 0xa, types[i]), SCSI_GOOD);
			ua_prout(&f, &f.a, PR_OUT_REGISTER, 0, 0xa, 0, ua);
			assert_ua(ua, 0, want, want);
		}
		/* a key change, a reservation taken: nobody is told */
		ua_prout(&f, &f.b, PR_OUT_REGISTER, 0, 0xb, 0xbb, ua);
		assert_ua(ua, 0, 0, 0);
		if (f.s->holder < 0) {
			ua_prout(&f, &f.b, PR_OUT_RESERVE, types[i], 0xbb, 0, ua);
			assert_ua(ua, 0, 0, 0);
		}
		fx_free(&f);
	}

	/* RESERVE(6) and RELEASE(6): nothing to tell */
	f = fx_new();
	uint8_t c6[16] = { PR_OP_RESERVE_6 };
	assert_int_equal(simple(&f, &f.a, PR_OP_RESERVE_6), SCSI_GOOD);
	struct pr_state *empty = malloc(sizeof(*empty));
	assert_non_null(empty);
	pr_init(empty);
	assert_int_equal(pr_ua(empty, f.s, c6, &f.a, &f.b), 0);
	free(empty);
	fx_free(&f);
}

/* Every PROUT that changes registrations moves PRgeneration by one;
 * RESERVE, RELEASE, refusals and no-ops do not. */
static void test_generation(void **state)
{
	struct fx f = fx_new();
	(void)state;

	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_GOOD);               /* 1 */
	assert_int_equal(reg(&f, &f.b, 0, 2), SCSI_GOOD);                   /* 2 */
	assert_int_equal(reg(&f, &f.b, 2, 3), SCSI_GOOD);                   /* 3 */
	assert_int_equal(reg(&f, &f.b, 2, 4), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(reserve(&f, &f.a, 1, PR_TYPE_WE), SCSI_GOOD);
	assert_int_equal(release(&f, &f.a, 1, PR_TYPE_EA), SCSI_CHECK_CONDITION);
	assert_int_equal(release(&f, &f.a, 1, PR_TYPE_WE), SCSI_GOOD);
	assert_int_equal(reg(&f, &f.c, 0, 0), SCSI_GOOD);
	assert_int_equal(f.s->generation, 3);
	assert_int_equal(prout(&f, &f.a, PR_OUT_PREEMPT, PR_TYPE_WE, 1, 3, 0), SCSI_GOOD); /* 4 */
	assert_int_equal(prout(&f, &f.a, PR_OUT_CLEAR, 0, 1, 0, 0), SCSI_GOOD);           /* 5 */
	assert_int_equal(f.s->generation, 5);
	/* the counter wraps */
	f.s->generation = 0xffffffff;
	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_GOOD);
	assert_int_equal(f.s->generation, 0);
	fx_free(&f);
}

/* ---- RESERVE(6/10), RELEASE(6/10) ---- */

/* Reserve6.Simple and Reserve6.2Initiators. */
static void test_reserve6(void **state)
{
	struct fx f = fx_new();
	uint8_t ms6[16] = { SCSI_MODE_SENSE_6, 0, 0x3f, 0, 255 };
	(void)state;

	assert_int_equal(simple(&f, &f.a, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.a, PR_OP_RELEASE_6), SCSI_GOOD);
	assert_false(f.s->legacy);

	assert_int_equal(simple(&f, &f.a, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.a, PR_OP_RESERVE_6), SCSI_GOOD); /* again: GOOD */
	assert_int_equal(simple(&f, &f.b, PR_OP_RESERVE_6), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &f.b, PR_OP_RELEASE_6), SCSI_GOOD); /* a no-op */
	assert_true(f.s->legacy);
	assert_int_equal(exec(&f, &f.a, ms6, NULL, 0), SCSI_GOOD);
	assert_int_equal(exec(&f, &f.b, ms6, NULL, 0), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &f.b, PR_OP_RESERVE_6), SCSI_RESERVATION_CONFLICT);
	/* what the other initiator may still do, and what not */
	assert_int_equal(simple(&f, &f.b, SCSI_INQUIRY), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, SCSI_REPORT_LUNS), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, SCSI_REQUEST_SENSE), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, 0x4d), SCSI_GOOD); /* LOG SENSE */
	assert_int_equal(exec(&f, &f.b, (const uint8_t[16]){ SCSI_MAINTENANCE_IN, 0x0a }, NULL, 0),
			 SCSI_GOOD);
	assert_int_equal(exec(&f, &f.b, (const uint8_t[16]){ 0x1e, 0, 0, 0, 0 }, NULL, 0),
			 SCSI_GOOD);
	assert_int_equal(exec(&f, &f.b, (const uint8_t[16]){ 0x1e, 0, 0, 0, 1 }, NULL, 0),
			 SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &f.b, SCSI_TEST_UNIT_READY), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &f.b, SCSI_READ_10), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &f.b, SCSI_WRITE_10), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &f.b, SCSI_READ_CAPACITY_10), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &f.b, PR_OP_RESERVE_10), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &f.a, SCSI_WRITE_10), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.a, SCSI_TEST_UNIT_READY), SCSI_GOOD);
	/* PRIN and PROUT conflict for everyone, the holder included */
	assert_int_equal(prin(&f, &f.a, PR_IN_READ_KEYS, 100), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(prin(&f, &f.b, PR_IN_REPORT_CAPABILITIES, 100), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(reg_ignore(&f, &f.b, 1), SCSI_RESERVATION_CONFLICT);
	/* ... and pr_out keeps P3 without pr_conflict */
	uint8_t c[16], p[PR_PARAM_LEN];
	prout_cdb(c, PR_OUT_REGISTER_AND_IGNORE, 0, 24);
	prout_param(p, 0, 1, 0);
	assert_int_equal(out_raw(&f, &f.a, c, 10, p, 24), 0);
	assert_status(f.r, SCSI_RESERVATION_CONFLICT);
	assert_int_equal(f.s->nreg, 0);
	/* a legacy RELEASE of ours ends it; then the other initiator gets it */
	assert_int_equal(simple(&f, &f.a, PR_OP_RELEASE_6), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, PR_OP_RELEASE_10), SCSI_GOOD); /* 6 and 10 are one */
	assert_false(f.s->legacy);
	assert_int_equal(simple(&f, &f.b, PR_OP_RELEASE_6), SCSI_GOOD); /* nothing held: GOOD */
	/* the same initiator name through another port is another nexus */
	struct pr_nexus a2 = f.a;
	a2.tport = 2;
	assert_int_equal(simple(&f, &f.a, PR_OP_RESERVE_10), SCSI_GOOD);
	assert_int_equal(simple(&f, &a2, PR_OP_RESERVE_10), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(simple(&f, &a2, SCSI_READ_10), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(f.s->generation, 0);
	fx_free(&f);
}

static void test_reserve6_checks(void **state)
{
	struct fx f = fx_new();
	uint8_t c[16];
	(void)state;

	/* third party, long id, extents: refused */
	memset(c, 0, 16);
	c[0] = PR_OP_RESERVE_10;
	c[1] = 0x10; /* 3RDPTY */
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_CHECK_CONDITION);
	assert_pointer(f.r, true, 1);
	c[1] = 0x02; /* LONGID */
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_CHECK_CONDITION);
	c[0] = PR_OP_RESERVE_6;
	c[1] = 0x01; /* EXTENT */
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_CHECK_CONDITION);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_CDB);
	c[1] = 0xe0; /* the old LUN field is ignored */
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_GOOD);
	/* NACA in the control byte of each length */
	c[1] = 0;
	c[0] = PR_OP_RELEASE_6;
	c[5] = 0x04;
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_CHECK_CONDITION);
	assert_pointer(f.r, true, 5);
	assert_true(f.s->legacy);
	c[5] = 0;
	c[0] = PR_OP_RELEASE_10;
	c[9] = 0x04;
	assert_int_equal(exec(&f, &f.a, c, NULL, 0), SCSI_CHECK_CONDITION);
	assert_pointer(f.r, true, 9);
	assert_true(f.s->legacy);
	/* not a reservation command: a caller bug, refused */
	memset(c, 0, 16);
	c[0] = SCSI_INQUIRY;
	assert_int_equal(out_raw(&f, &f.a, c, 10, NULL, 0), 0);
	assert_sense(f.r, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_OPCODE);
	fx_free(&f);
}

/* Reserve6.Logout / ITNexusLoss / LUNReset / TargetWarmReset / TargetColdReset. */
static void test_reserve6_events(void **state)
{
	struct fx f = fx_new();
	struct pr_nexus a2 = f.a;
	(void)state;

	a2.tport = 2;
	/* another nexus going away changes nothing */
	assert_int_equal(simple(&f, &f.a, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, PR_OP_RESERVE_6), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(pr_nexus_lost(f.s, &f.b), 0);
	assert_int_equal(pr_nexus_lost(f.s, &a2), 0);
	assert_true(f.s->legacy);
	/* the holder's session ends (logout or connection loss) */
	assert_int_equal(pr_nexus_lost(f.s, &f.a), 1);
	assert_false(f.s->legacy);
	assert_int_equal(pr_nexus_lost(f.s, &f.a), 0);
	assert_int_equal(simple(&f, &f.b, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, PR_OP_RELEASE_6), SCSI_GOOD);
	/* LUN reset, target warm / cold reset */
	assert_int_equal(simple(&f, &f.a, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(pr_reset(f.s), 1);
	assert_int_equal(pr_reset(f.s), 0);
	assert_int_equal(simple(&f, &f.b, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, PR_OP_RELEASE_6), SCSI_GOOD);
	/* persistent reservations survive all of it */
	assert_int_equal(reg_ignore(&f, &f.a, 7), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.a, 7, PR_TYPE_EA), SCSI_GOOD);
	assert_int_equal(pr_nexus_lost(f.s, &f.a), 0);
	assert_int_equal(pr_reset(f.s), 0);
	assert_reserved_as(&f, 7, PR_TYPE_EA);
	assert_int_equal(simple(&f, &f.b, SCSI_READ_10), SCSI_RESERVATION_CONFLICT);
	fx_free(&f);
}

static void test_power_on(void **state)
{
	struct fx f = fx_new();
	(void)state;

	assert_int_equal(pr_power_on(f.s), 0);
	assert_int_equal(reg_ignore(&f, &f.a, 7), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.a, 7, PR_TYPE_EA), SCSI_GOOD);
	assert_int_equal(pr_power_on(f.s), 1); /* APTPL 0: all gone */
	assert_int_equal(f.s->nreg, 0);
	assert_int_equal(f.s->holder, -1);
	assert_int_equal(f.s->generation, 0);
	assert_true(pr_valid(f.s));
	assert_int_equal(prout(&f, &f.a, PR_OUT_REGISTER_AND_IGNORE, 0, 0, 7, PR_APTPL), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.a, 7, PR_TYPE_EA), SCSI_GOOD);
	assert_int_equal(pr_power_on(f.s), 1); /* APTPL 1: kept, generation 0 */
	assert_reserved_as(&f, 7, PR_TYPE_EA);
	assert_int_equal(f.s->generation, 0);
	assert_int_equal(pr_power_on(f.s), 0);
	assert_int_equal(prout(&f, &f.a, PR_OUT_CLEAR, 0, 7, 0, 0), SCSI_GOOD);
	assert_int_equal(simple(&f, &f.b, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(pr_power_on(f.s), 1);
	assert_false(f.s->legacy);
	fx_free(&f);
}

/* A caller's name without a NUL in PR_NAME_MAX bytes is cut to
 * PR_NAME_MAX - 1 and still finds its registration. */
static void test_long_name(void **state)
{
	struct fx f = fx_new();
	struct pr_nexus n;
	(void)state;

	memset(n.initiator, 'x', sizeof(n.initiator));
	n.tport = 1;
	assert_int_equal(reg_ignore(&f, &n, 9), SCSI_GOOD);
	assert_int_equal(strlen(f.s->reg[0].n.initiator), PR_NAME_MAX - 1);
	assert_int_equal(reserve(&f, &n, 9, PR_TYPE_EA), SCSI_GOOD);
	assert_false(pr_conflict(f.s, &n, (const uint8_t[16]){ SCSI_WRITE_10 }));
	assert_int_equal(simple(&f, &n, PR_OP_RESERVE_6), SCSI_RESERVATION_CONFLICT);
	assert_int_equal(reg(&f, &n, 9, 0), SCSI_GOOD);
	assert_int_equal(simple(&f, &n, PR_OP_RESERVE_6), SCSI_GOOD);
	assert_int_equal(strlen(f.s->legacy_nexus.initiator), PR_NAME_MAX - 1);
	assert_int_equal(pr_nexus_lost(f.s, &n), 1);
	fx_free(&f);
}

/* pr_valid() on states nothing in pr.c would build (P1-P3). */
static void test_valid(void **state)
{
	struct fx f = fx_new();
	struct pr_state *t = malloc(sizeof(*t));
	(void)state;

	assert_non_null(t);
	assert_int_equal(reg_ignore(&f, &f.a, 1), SCSI_GOOD);
	assert_int_equal(reg_ignore(&f, &f.b, 2), SCSI_GOOD);
	assert_int_equal(reserve(&f, &f.b, 2, PR_TYPE_WERO), SCSI_GOOD);
	assert_true(pr_valid(f.s));
#define INVALID(stmt)                       \
	do {                                \
		*t = *f.s;                  \
		stmt;                       \
		assert_false(pr_valid(t));  \
	} while (0)
	INVALID(t->nreg = PR_MAX_REG + 1);
	INVALID(t->reg[0].key = 0);
	INVALID(memset(t->reg[1].n.initiator, 'x', PR_NAME_MAX)); /* no NUL */
	INVALID(t->reg[1].n = t->reg[0].n);                        /* one nexus twice */
	INVALID(t->holder = 2);
	INVALID(t->holder = -2);
	INVALID(t->type = 0);
	INVALID(t->type = 4);
	INVALID(t->holder = -1);                                   /* type without holder */
	INVALID(t->legacy = true);                                 /* with registrations */
#undef INVALID
	*t = *f.s;
	t->holder = -1;
	t->type = 0;
	t->nreg = 0;
	t->legacy = true;
	assert_true(pr_valid(t));
	memset(t->legacy_nexus.initiator, 'y', PR_NAME_MAX);
	assert_false(pr_valid(t));

	/* pr_equal: names up to their NUL, every field */
	*t = *f.s;
	assert_true(pr_equal(t, f.s));
	memset(t->reg[0].n.initiator + strlen(NAME_A) + 1, 'j', 8); /* after the NUL */
	assert_true(pr_equal(t, f.s));
	t->reg[0].n.initiator[0] = 'I';
	assert_false(pr_equal(t, f.s));
	*t = *f.s;
	t->reg[1].key = 3;
	assert_false(pr_equal(t, f.s));
	*t = *f.s;
	t->reg[1].n.tport = 9;
	assert_false(pr_equal(t, f.s));
	*t = *f.s;
	t->aptpl = !t->aptpl;
	assert_false(pr_equal(t, f.s));
	free(t);
	fx_free(&f);
}

/* ---- image ---- */

static void roundtrip(const struct pr_state *s)
{
	uint8_t *buf = malloc(PR_IMAGE_MAX + 16), *again = malloc(PR_IMAGE_MAX);
	struct pr_state *t = malloc(sizeof(*t));
	int n;

	assert_non_null(buf);
	assert_non_null(again);
	assert_non_null(t);
	n = pr_encode(s, buf, PR_IMAGE_MAX);
	assert_true(n >= 24 && n <= PR_IMAGE_MAX);
	assert_int_equal(get32(buf + 8), n);
	assert_int_equal(pr_encode(s, buf, (size_t)n - 1), -ENOSPC);
	assert_int_equal(pr_encode(s, buf, (size_t)n), n);
	memset(t, 0x5a, sizeof(*t));
	assert_int_equal(pr_decode(t, buf, (size_t)n), 0);
	assert_true(pr_equal(s, t));
	assert_true(pr_valid(t));
	assert_int_equal(pr_encode(t, again, PR_IMAGE_MAX), n);
	assert_memory_equal(buf, again, (size_t)n);
	/* bytes after the image are not part of it */
	memset(buf + n, 0xee, 16);
	assert_int_equal(pr_decode(t, buf, (size_t)n + 16), 0);
	assert_true(pr_equal(s, t));
	/* every shorter buffer is refused */
	for (int len = 0; len < n; len++)
		assert_int_equal(pr_decode(t, buf, (size_t)len), -EBADMSG);
	free(t);
	free(again);
	free(buf);
}

static void test_codec_roundtrip(void **state)
{
	struct fx f = fx_new();
	char name[PR_NAME_MAX];
	(void)state;

	roundtrip(f.s);
	assert_int_equal(simple(&f, &f.c, PR_OP_RESERVE_6), SCSI_GOOD);
	roundtrip(f.s);
	assert_int_equal(pr_reset(f.s), 1);
	assert_int_equal(prout(&f, &f.a, PR_OUT_REGISTER_AND_IGNORE, 0, 0, 0x0102030405060708ull,
			       PR_APTPL), SCSI_GOOD);
	roundtrip(f.s);
	assert_int_equal(reserve(&f, &f.a, 0x0102030405060708ull, PR_TYPE_EARO), SCSI_GOOD);
	roundtrip(f.s);
	/* the largest: every registration with a name of PR_NAME_MAX - 1 */
	for (int i = 1; i < PR_MAX_REG; i++) {
		memset(name, 'a' + i % 26, sizeof(name));
		name[PR_NAME_MAX - 1] = 0;
		struct pr_nexus n = nexus(name, (uint16_t)(0xffff - i));
		assert_int_equal(reg_ignore(&f, &n, ~0ull - (uint64_t)i), SCSI_GOOD);
	}
	assert_int_equal(reserve(&f, &f.a, 0x0102030405060708ull, PR_TYPE_EARO),
			 SCSI_GOOD);
	f.s->generation = 0xfedcba98;
	roundtrip(f.s);
	/* holder not first */
	assert_int_equal(release(&f, &f.a, 0x0102030405060708ull, PR_TYPE_EARO), SCSI_GOOD);
	struct pr_nexus last = f.s->reg[PR_MAX_REG - 1].n;
	assert_int_equal(reserve(&f, &last, ~0ull - (PR_MAX_REG - 1), PR_TYPE_WEAR), SCSI_GOOD);
	roundtrip(f.s);
	/* an invalid state is not encoded */
	uint8_t buf[64];
	f.s->type = 2;
	assert_int_equal(pr_encode(f.s, buf, sizeof(buf)), -EINVAL);
	fx_free(&f);
}

/* A valid image with two registrations (A the holder, type EA) and aptpl. */
static int sample(uint8_t *buf, struct fx *f)
{
	assert_int_equal(prout(f, &f->a, PR_OUT_REGISTER_AND_IGNORE, 0, 0, 0x11, PR_APTPL),
			 SCSI_GOOD);
	assert_int_equal(reg_ignore(f, &f->b, 0x22), SCSI_GOOD);
	assert_int_equal(reserve(f, &f->a, 0x11, PR_TYPE_EA), SCSI_GOOD);
	return pr_encode(f->s, buf, PR_IMAGE_MAX);
}

static void expect_bad(const uint8_t *img, size_t len)
{
	struct pr_state *t = malloc(sizeof(*t));
	uint8_t *copy = malloc(len);

	assert_non_null(t);
	assert_non_null(copy);
	memcpy(copy, img, len);
	pr_init(t);
	t->generation = 77;
	assert_int_equal(pr_decode(t, copy, len), -EBADMSG);
	assert_int_equal(t->generation, 77); /* untouched on failure */
	free(copy);
	free(t);
}

static void test_codec_corrupt(void **state)
{
	struct fx f = fx_new();
	uint8_t *img = malloc(PR_IMAGE_MAX), *bad = malloc(PR_IMAGE_MAX);
	size_t reg0 = 24, reg1;
	int n;
	(void)state;

	assert_non_null(img);
	assert_non_null(bad);
	n = sample(img, &f);
	assert_true(n > 0);
	reg1 = reg0 + 8 + 3 + strlen(NAME_A);
	assert_int_equal(img[reg0 + 10], strlen(NAME_A));
	assert_int_equal(img[reg1 + 10], strlen(NAME_B));

#define BAD(stmt)                                \
	do {                                     \
		memcpy(bad, img, (size_t)n);     \
		stmt;                            \
		expect_bad(bad, (size_t)n);      \
	} while (0)
	BAD(bad[0] ^= 1);                         /* magic */
	BAD(put16(bad + 4, 2));                    /* version */
	BAD(put16(bad + 6, 0x0005));               /* unknown flag */
	BAD(put32(bad + 8, (uint32_t)n + 1));      /* longer than the buffer */
	BAD(put32(bad + 8, (uint32_t)n - 1));      /* shorter than its content */
	BAD(put32(bad + 8, 23));                   /* shorter than the header */
	BAD(put32(bad + 8, 0xffffffff));
	BAD(put16(bad + 16, 3));                   /* more registrations than there are */
	BAD(put16(bad + 16, 1));                   /* fewer: bytes left over */
	BAD(put16(bad + 16, 0xffff));
	BAD(put16(bad + 18, 2));                   /* holder out of range */
	BAD(put16(bad + 18, 0x7fff));
	BAD(bad[20] = 0);                         /* a holder without a type */
	BAD(bad[20] = 2);                         /* no such type */
	BAD(bad[20] = 9);
	BAD((put16(bad + 18, 0xffff)));            /* a type without a holder */
	BAD(bad[21] = 1);                         /* reserved */
	BAD(bad[23] = 0x80);
	BAD(memset(bad + reg0, 0, 8));            /* key 0 */
	BAD(bad[reg0 + 10] = (uint8_t)(strlen(NAME_A) + 1)); /* name runs into the next */
	BAD(bad[reg0 + 10] = 0xff);               /* name too long (and past the end) */
	BAD(bad[reg0 + 11 + 5] = 0);              /* NUL inside a name */
	BAD(put16(bad + 6, 0x0003));               /* legacy flag: a nexus that is not there */
	/* a duplicate nexus */
	BAD(memcpy(bad + reg1 + 8, bad + reg0 + 8, 3 + strlen(NAME_A)); put16(bad + 16, 2);
	    put32(bad + 8, (uint32_t)(reg1 + 8 + 3 + strlen(NAME_A))));
#undef BAD
	/* legacy together with registrations (P3), well-formed otherwise */
	memcpy(bad, img, (size_t)n);
	put16(bad + 6, 0x0003);
	bad[n] = 0;
	bad[n + 1] = 1;
	bad[n + 2] = 1;
	bad[n + 3] = 'q';
	put32(bad + 8, (uint32_t)n + 4);
	expect_bad(bad, (size_t)n + 4);
	/* ... and the same legacy nexus alone decodes */
	struct pr_state *t = malloc(sizeof(*t));
	assert_non_null(t);
	memset(bad, 0, 28);
	put32(bad, 0x54505231);
	put16(bad + 4, 1);
	put16(bad + 6, 0x0002);
	put32(bad + 8, 28);
	put16(bad + 18, 0xffff);
	bad[24] = 0;
	bad[25] = 1;
	bad[26] = 1;
	bad[27] = 'q';
	assert_int_equal(pr_decode(t, bad, 28), 0);
	assert_true(t->legacy);
	assert_string_equal(t->legacy_nexus.initiator, "q");
	assert_int_equal(t->legacy_nexus.tport, 1);
	/* every single-byte change either fails or decodes to a valid state */
	for (int i = 0; i < n; i++)
		for (int bit = 0; bit < 8; bit++) {
			memcpy(bad, img, (size_t)n);
			bad[i] ^= (uint8_t)(1 << bit);
			if (pr_decode(t, bad, (size_t)n) == 0)
				assert_true(pr_valid(t));
		}
	free(t);
	free(bad);
	free(img);
	fx_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_prin_service_actions),
		cmocka_unit_test(test_read_keys),
		cmocka_unit_test(test_report_capabilities),
		cmocka_unit_test(test_read_full_status),
		cmocka_unit_test(test_read_full_status_large),
		cmocka_unit_test(test_register),
		cmocka_unit_test(test_register_full),
		cmocka_unit_test(test_prout_checks),
		cmocka_unit_test(test_reserve_simple),
		cmocka_unit_test(test_reserve_rules),
		cmocka_unit_test(test_release_rules),
		cmocka_unit_test(test_reserve_access),
		cmocka_unit_test(test_reserve_ownership),
		cmocka_unit_test(test_conflict_table),
		cmocka_unit_test(test_clear),
		cmocka_unit_test(test_preempt_remove_registration),
		cmocka_unit_test(test_preempt_reservation),
		cmocka_unit_test(test_unit_attentions),
		cmocka_unit_test(test_generation),
		cmocka_unit_test(test_reserve6),
		cmocka_unit_test(test_reserve6_checks),
		cmocka_unit_test(test_reserve6_events),
		cmocka_unit_test(test_power_on),
		cmocka_unit_test(test_long_name),
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_codec_roundtrip),
		cmocka_unit_test(test_codec_corrupt),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
