/* EXTENDED COPY (LID1) and RECEIVE COPY RESULTS against hand-written byte
 * offsets (SPC-4 6.4 and 6.18), the check order of xcopy.h rule 1, and the
 * scenarios of libiscsi's ExtendedCopy.* and ReceiveCopyResults.* tests,
 * with lists built the way libiscsi builds them (target descriptor E4h with
 * the NAA of VPD 83h, 28-byte 02h segments). CDBs and lists are copied into
 * exact-size heap buffers so that ASan (make SAN=1) catches an overread. */
#include "unit.h"

#include "../../src/common/be.h"
#include "../../src/scsi/scsi.h"
#include "scsi_unit.h"
#include "../../src/scsi/xcopy.h"

#define GIB (1ull << 30)

static const uint8_t naa[16] = { 0x60, 0x01, 0x40, 0x50, 0x11, 0x22, 0x33, 0x44,
				 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc };

static struct scsi_lu lu_make(void)
{
	struct scsi_lu lu = {
		.size = GIB,
		.block = 512,
		.vendor = "TANDEM",
		.product = "vol0",
		.serial = "0123456789abcdef",
		.ready = true,
	};
	memcpy(lu.naa, naa, sizeof(naa));
	return lu;
}

static uint64_t blocks(const struct scsi_lu *lu)
{
	return lu->size / lu->block;
}

/* ---- requests and checks ---- */

/* INVALID FIELD IN CDB / PARAMETER LIST with the field pointer at byte. */
static void assert_field(const struct scsi_req *r, bool cdb, unsigned byte)
{
	assert_sense(r, SCSI_KEY_ILLEGAL_REQUEST,
		     cdb ? SCSI_ASC_INVALID_FIELD_CDB : SCSI_ASC_INVALID_FIELD_PARAM);
	assert_int_equal(r->sense[15], cdb ? 0xc0 : 0x80);
	assert_int_equal(get16(r->sense + 16), byte);
}

static void assert_aborted(const struct scsi_req *r, int asc)
{
	assert_sense(r, SCSI_KEY_COPY_ABORTED, asc);
}

static void assert_illegal(const struct scsi_req *r, int asc)
{
	assert_sense(r, SCSI_KEY_ILLEGAL_REQUEST, asc);
}

static void xcopy_cdb(uint8_t *c, uint32_t plen)
{
	memset(c, 0, 16);
	c[0] = SCSI_EXTENDED_COPY;
	put32(c + 10, plen);
}

static void rcr_cdb(uint8_t *c, uint8_t sa, uint8_t list_id, uint32_t alloc)
{
	memset(c, 0, 16);
	c[0] = SCSI_RECEIVE_COPY_RESULTS;
	c[1] = sa;
	c[2] = list_id;
	put32(c + 10, alloc);
}

/* ---- parameter lists, built like libiscsi's populate_* helpers ---- */

struct xl {
	uint8_t b[4096];
	uint32_t t, s; /* target and segment list bytes so far */
};

static void xl_init(struct xl *x)
{
	memset(x, 0, sizeof(*x));
}

/* Appends an identification (E4h) target descriptor naming id; returns it
 * for the test to spoil. Targets come before segments. */
static uint8_t *xl_tgt_id(struct xl *x, const uint8_t *id, uint32_t block)
{
	uint8_t *d = x->b + 16 + x->t;

	assert_int_equal(x->s, 0);
	d[0] = XCOPY_TGT_ID;
	d[1] = 0x00; /* LU ID TYPE 0, NUL 0, peripheral type 0 (disk) */
	d[4] = 0x01; /* code set binary */
	d[5] = 0x03; /* association LU, designator type NAA */
	d[7] = 16;
	memcpy(d + 8, id, 16);
	d[29] = (uint8_t)(block >> 16);
	d[30] = (uint8_t)(block >> 8);
	d[31] = (uint8_t)block;
	x->t += 32;
	return d;
}

/* Appends a target descriptor of any type code and length (zeroed body). */
static uint8_t *xl_tgt_raw(struct xl *x, uint8_t type, uint32_t len)
{
	uint8_t *d = x->b + 16 + x->t;

	assert_int_equal(x->s, 0);
	d[0] = type;
	x->t += len;
	return d;
}

static uint8_t *xl_seg_b2b(struct xl *x, uint16_t si, uint16_t di, uint16_t nblk, uint64_t src,
			   uint64_t dst)
{
	uint8_t *d = x->b + 16 + x->t + x->s;

	d[0] = XCOPY_SEG_B2B;
	put16(d + 2, 0x18);
	put16(d + 4, si);
	put16(d + 6, di);
	put16(d + 10, nblk);
	put64(d + 12, src);
	put64(d + 20, dst);
	x->s += 28;
	return d;
}

static uint8_t *xl_seg_b2b_off(struct xl *x, uint16_t si, uint16_t di, uint32_t bytes,
			       uint64_t src, uint64_t dst)
{
	uint8_t *d = x->b + 16 + x->t + x->s;

	d[0] = XCOPY_SEG_B2B_OFF;
	put16(d + 2, 0x1c);
	put16(d + 4, si);
	put16(d + 6, di);
	put32(d + 8, bytes);
	put64(d + 12, src);
	put64(d + 20, dst);
	x->s += 32;
	return d;
}

/* A segment descriptor header of any type with its DESCRIPTOR LENGTH. */
static uint8_t *xl_seg_raw(struct xl *x, uint8_t type, uint32_t len)
{
	uint8_t *d = x->b + 16 + x->t + x->s;

	d[0] = type;
	put16(d + 2, (uint16_t)(len - 4));
	x->s += len;
	return d;
}

/* Writes the header (LIST ID USAGE usage, no inline data); returns the
 * parameter list length. */
static uint32_t xl_hdr(struct xl *x, uint8_t list_id, uint8_t usage)
{
	x->b[0] = list_id;
	x->b[1] = (uint8_t)((usage & 3) << 3);
	put16(x->b + 2, (uint16_t)x->t);
	put32(x->b + 8, x->s);
	put32(x->b + 12, 0);
	return 16 + x->t + x->s;
}

/* xcopy_parse() with a CDB announcing plen and len bytes of list, from
 * exact-size copies; checks the return conventions and every segment. */
static int parse_n(const struct scsi_lu *lu, const uint8_t *list, uint32_t plen, uint32_t len,
		   struct xcopy_seg *seg, unsigned max, uint8_t *list_id, struct scsi_req *r)
{
	uint8_t *c = malloc(16), *p = malloc(len ? len : 1);
	int n;

	assert_non_null(c);
	assert_non_null(p);
	xcopy_cdb(c, plen);
	if (len)
		memcpy(p, list, len);
	n = xcopy_parse(lu, c, p, len, seg, max, list_id, r);
	free(c);
	free(p);
	assert_int_equal(r->kind, SCSI_DONE);
	assert_int_equal(r->data_len, 0);
	if (n < 0) {
		assert_int_equal(n, -1);
		assert_int_equal(r->status, SCSI_CHECK_CONDITION);
		assert_int_equal(r->sense_len, 18);
		return n;
	}
	assert_good(r);
	assert_true((unsigned)n <= max);
	for (int i = 0; i < n; i++) {
		uint64_t end = blocks(lu) * lu->block;

		assert_true(seg[i].len > 0 && seg[i].len <= XCOPY_MAX_SEG_BYTES);
		assert_int_equal(seg[i].src_off % lu->block, 0);
		assert_int_equal(seg[i].dst_off % lu->block, 0);
		assert_int_equal(seg[i].len % lu->block, 0);
		assert_true(seg[i].src_off <= end && seg[i].len <= end - seg[i].src_off);
		assert_true(seg[i].dst_off <= end && seg[i].len <= end - seg[i].dst_off);
	}
	return n;
}

static int parse(const struct scsi_lu *lu, const struct xl *x, uint32_t len,
		 struct xcopy_seg *seg, struct scsi_req *r)
{
	return parse_n(lu, x->b, len, len, seg, XCOPY_MAX_SEG_DESC, NULL, r);
}

/* The one-target, one-segment list of libiscsi's tests: nblk blocks. */
static uint32_t simple_list(struct xl *x, const struct scsi_lu *lu, uint16_t nblk, uint64_t src,
			    uint64_t dst, uint8_t list_id, uint8_t usage)
{
	xl_init(x);
	xl_tgt_id(x, lu->naa, lu->block);
	xl_seg_b2b(x, 0, 0, nblk, src, dst);
	return xl_hdr(x, list_id, usage);
}

/* RECEIVE COPY RESULTS from an exact-size CDB; checks the conventions. */
static void results(const struct scsi_lu *lu, uint8_t sa, uint8_t list_id, uint32_t alloc,
		    const struct xcopy_status *st, struct scsi_req *r)
{
	uint8_t *c = malloc(16);

	assert_non_null(c);
	rcr_cdb(c, sa, list_id, alloc);
	xcopy_results(lu, c, st, r);
	free(c);
	assert_int_equal(r->kind, SCSI_DONE);
	assert_true(r->data_len <= alloc && r->data_len <= sizeof(r->data));
	if (r->status == SCSI_CHECK_CONDITION)
		assert_int_equal(r->sense_len, 18);
	else
		assert_int_equal(r->sense_len, 0);
}

/* ---- EXTENDED COPY: the CDB ---- */

static void test_cdb_len(void **state)
{
	struct scsi_req *r = req_new();
	uint8_t c[16];
	(void)state;

	xcopy_cdb(c, 76);
	assert_int_equal(xcopy_cdb_len(c, r), 76);
	xcopy_cdb(c, 0);
	assert_int_equal(xcopy_cdb_len(c, r), 0);
	xcopy_cdb(c, XCOPY_MAX_LIST);
	assert_int_equal(xcopy_cdb_len(c, r), XCOPY_MAX_LIST);
	c[15] = 0xc0; /* vendor bits are fine */
	assert_int_equal(xcopy_cdb_len(c, r), XCOPY_MAX_LIST);

	/* longer than we would ever accept: refused before it is received */
	xcopy_cdb(c, XCOPY_MAX_LIST + 1);
	assert_int_equal(xcopy_cdb_len(c, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	xcopy_cdb(c, UINT32_MAX);
	assert_int_equal(xcopy_cdb_len(c, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);

	/* LID4 (service action 01h) and anything else */
	for (uint8_t sa = 1; sa < 0x20; sa++) {
		xcopy_cdb(c, 76);
		c[1] = sa;
		assert_int_equal(xcopy_cdb_len(c, r), -1);
		assert_field(r, true, 1);
	}
	xcopy_cdb(c, 76);
	c[1] = 0xe0; /* bits above the service action are not it */
	assert_int_equal(xcopy_cdb_len(c, r), 76);
	xcopy_cdb(c, 76);
	c[15] = 0x04; /* NACA */
	assert_int_equal(xcopy_cdb_len(c, r), -1);
	assert_field(r, true, 15);
	c[15] = 0x01; /* LINK */
	assert_int_equal(xcopy_cdb_len(c, r), -1);
	assert_field(r, true, 15);
	xcopy_cdb(c, 76);
	c[0] = SCSI_RECEIVE_COPY_RESULTS;
	assert_int_equal(xcopy_cdb_len(c, r), -1);
	assert_field(r, true, 0);
	free(r);
}

/* ---- EXTENDED COPY: lists that copy ---- */

/* libiscsi ExtendedCopy.Simple: 2048 blocks from LBA 0 to the end. */
static void test_simple(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	struct xl x;
	uint64_t nb = blocks(&lu);
	uint32_t len = simple_list(&x, &lu, 2048, 0, nb - 2048, 1, 2 /* discard */);
	uint8_t id = 0xee;
	(void)state;

	assert_int_equal(len, 16 + 32 + 28);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, XCOPY_MAX_SEG_DESC, &id, r), 1);
	assert_int_equal(id, 1);
	assert_int_equal(seg[0].src_off, 0);
	assert_int_equal(seg[0].dst_off, (nb - 2048) * 512);
	assert_int_equal(seg[0].len, 2048 * 512);
	assert_false(xcopy_hold(x.b, len));

	/* the same with 4 KiB blocks: 8 MiB, still one segment */
	lu.block = 4096;
	nb = blocks(&lu);
	len = simple_list(&x, &lu, 2048, 0, nb - 2048, 7, 0 /* hold */);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, XCOPY_MAX_SEG_DESC, &id, r), 1);
	assert_int_equal(id, 7);
	assert_int_equal(seg[0].len, 8u << 20);
	assert_int_equal(seg[0].dst_off, (nb - 2048) * 4096);
	assert_true(xcopy_hold(x.b, len));
	free(r);
}

/* Two targets (both us), eight segments of both types, in list order;
 * empty segments are dropped. */
static void test_multiple_segments(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	struct xl x;
	uint64_t nb = blocks(&lu);
	uint32_t len;
	(void)state;

	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_seg_b2b(&x, 0, 1, 8, 0, 100);
	xl_seg_b2b_off(&x, 1, 0, 4096, 200, 300);
	xl_seg_b2b(&x, 1, 1, 0, 5, 6); /* empty */
	xl_seg_b2b(&x, 0, 0, 1, nb - 1, 0);
	xl_seg_b2b_off(&x, 0, 1, 0, 7, 8); /* empty */
	xl_seg_b2b(&x, 0, 0, 16, 10, 12); /* overlapping: allowed */
	xl_seg_b2b_off(&x, 1, 1, XCOPY_MAX_SEG_BYTES, 0, nb - XCOPY_MAX_SEG_BYTES / 512);
	xl_seg_b2b(&x, 0, 1, XCOPY_MAX_SEG_BYTES / 512, 1000, 1000 + XCOPY_MAX_SEG_BYTES / 512);
	len = xl_hdr(&x, 9, 0);
	assert_int_equal(len, 16 + 64 + 5 * 28 + 3 * 32);
	assert_int_equal(parse(&lu, &x, len, seg, r), 6);
	assert_int_equal(seg[0].src_off, 0);
	assert_int_equal(seg[0].dst_off, 100 * 512);
	assert_int_equal(seg[0].len, 8 * 512);
	assert_int_equal(seg[1].src_off, 200 * 512);
	assert_int_equal(seg[1].dst_off, 300 * 512);
	assert_int_equal(seg[1].len, 4096);
	assert_int_equal(seg[2].src_off, (nb - 1) * 512);
	assert_int_equal(seg[2].dst_off, 0);
	assert_int_equal(seg[2].len, 512);
	assert_int_equal(seg[3].src_off, 10 * 512);
	assert_int_equal(seg[3].dst_off, 12 * 512);
	assert_int_equal(seg[4].len, XCOPY_MAX_SEG_BYTES);
	assert_int_equal(seg[4].dst_off, lu.size - XCOPY_MAX_SEG_BYTES);
	assert_int_equal(seg[5].len, XCOPY_MAX_SEG_BYTES);
	assert_int_equal(seg[5].src_off, 1000 * 512);

	/* with fewer slots than segments: too many, never an overflow */
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, 7, NULL, r), -1);
	assert_illegal(r, XCOPY_ASC_TOO_MANY_SEG);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, 0, NULL, r), -1);
	assert_illegal(r, XCOPY_ASC_TOO_MANY_SEG);
	free(r);
}

/* Nothing to copy is GOOD: no list (libiscsi ParamHdr, length 0), only
 * targets, only empty segments. */
static void test_nothing_to_copy(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	uint8_t c[16], id = 0xee;
	struct xl x;
	uint32_t len;
	(void)state;

	xl_init(&x);
	assert_int_equal(parse_n(&lu, x.b, 0, 0, seg, XCOPY_MAX_SEG_DESC, &id, r), 0);
	assert_int_equal(id, 0);
	xcopy_cdb(c, 0);
	assert_int_equal(xcopy_parse(&lu, c, NULL, 0, seg, XCOPY_MAX_SEG_DESC, NULL, r), 0);
	assert_good(r);

	len = xl_hdr(&x, 3, 0); /* a bare header */
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, XCOPY_MAX_SEG_DESC, &id, r), 0);
	assert_int_equal(id, 3);
	xl_tgt_id(&x, lu.naa, lu.block);
	len = xl_hdr(&x, 3, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), 0);
	xl_seg_b2b(&x, 0, 0, 0, 0, 1);
	xl_seg_b2b_off(&x, 0, 0, 0, blocks(&lu), 0); /* at the very end, empty */
	len = xl_hdr(&x, 3, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), 0);
	free(r);
}

/* ---- EXTENDED COPY: errors, in the order of xcopy.h rule 1 ---- */

static void test_lu_state(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	struct xl x;
	uint32_t len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	uint8_t c[16];
	(void)state;

	assert_int_equal(parse(NULL, &x, len, seg, r), -1);
	assert_illegal(r, SCSI_ASC_LUN_NOT_SUPPORTED);
	lu.ready = false;
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_sense(r, SCSI_KEY_NOT_READY, SCSI_ASC_NOT_READY_STANDBY);
	assert_int_equal(parse(&lu, &x, 0, seg, r), -1); /* even with no list */
	assert_sense(r, SCSI_KEY_NOT_READY, SCSI_ASC_NOT_READY_STANDBY);
	/* the CDB is checked first */
	xcopy_cdb(c, len);
	c[1] = 1;
	assert_int_equal(xcopy_parse(&lu, c, x.b, len, seg, XCOPY_MAX_SEG_DESC, NULL, r), -1);
	assert_field(r, true, 1);
	lu.ready = true;
	/* a block size we cannot do arithmetic with */
	lu.block = 0;
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_sense(r, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
	lu.block = 1000;
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_sense(r, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
	free(r);
}

/* libiscsi ExtendedCopy.ParamHdr and the other length rules. */
static void test_param_list_length(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	struct xl x;
	uint32_t len = simple_list(&x, &lu, 2048, 0, blocks(&lu) - 2048, 1, 0);
	uint8_t id = 0;
	(void)state;

	/* truncating the target descriptor, then the segment descriptor */
	assert_int_equal(parse(&lu, &x, 16 + 32 - 1, seg, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	assert_int_equal(parse(&lu, &x, len - 1, seg, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	/* shorter than the header */
	for (uint32_t l = 1; l < 16; l++) {
		assert_int_equal(parse_n(&lu, x.b, l, l, seg, XCOPY_MAX_SEG_DESC, &id, r), -1);
		assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	}
	/* fewer bytes received than the CDB announced */
	assert_int_equal(parse_n(&lu, x.b, len, len - 1, seg, XCOPY_MAX_SEG_DESC, &id, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	assert_int_equal(id, 1); /* the header was there */
	assert_int_equal(xcopy_parse(&lu, (uint8_t[16]){ SCSI_EXTENDED_COPY, [13] = 76 }, NULL, 76,
				     seg, XCOPY_MAX_SEG_DESC, NULL, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	/* more received than announced: only the announced part is the list */
	assert_int_equal(parse_n(&lu, x.b, len, len + 100, seg, XCOPY_MAX_SEG_DESC, &id, r), 1);
	assert_int_equal(parse_n(&lu, x.b, len - 1, len, seg, XCOPY_MAX_SEG_DESC, &id, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	/* trailing bytes after the descriptors are not descriptors */
	assert_int_equal(parse(&lu, &x, len + 40, seg, r), 1);

	/* header lengths that do not fit, whatever their size */
	put16(x.b + 2, 0xffff);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	put16(x.b + 2, 32);
	put32(x.b + 8, UINT32_MAX);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	put32(x.b + 8, UINT32_MAX - 31); /* tdll + sdll wraps 32 bits */
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	put32(x.b + 8, 28);
	put32(x.b + 12, UINT32_MAX - 60); /* inline data length wraps */
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	free(r);
}

/* libiscsi ExtendedCopy.DescrLimits, with the limits read back from
 * OPERATING PARAMETERS as the test does. */
static void test_descr_limits(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC + 1];
	struct xl x;
	uint32_t max_tgt, max_seg, max_list, len, n;
	uint64_t nb = blocks(&lu);
	(void)state;

	results(&lu, XCOPY_RCR_OP_PARAMS, 0, 1024, NULL, r);
	assert_good(r);
	max_tgt = get16(r->data + 8);
	max_seg = get16(r->data + 10);
	max_list = get32(r->data + 12);
	assert_int_equal(max_tgt, XCOPY_MAX_TGT_DESC);
	assert_int_equal(max_seg, XCOPY_MAX_SEG_DESC);
	assert_int_equal(max_list, XCOPY_MAX_DESC_LIST);

	/* at the limits: accepted */
	xl_init(&x);
	for (uint32_t i = 0; i < max_tgt; i++)
		xl_tgt_id(&x, lu.naa, lu.block);
	for (uint32_t i = 0; i < max_seg; i++)
		xl_seg_b2b(&x, 0, 1, 2048, 0, nb - 2048);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), (int)max_seg);

	/* one target descriptor too many */
	xl_init(&x);
	for (uint32_t i = 0; i < max_tgt + 1; i++)
		xl_tgt_id(&x, lu.naa, lu.block);
	xl_seg_b2b(&x, 0, 0, 2048, 0, nb - 2048);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, XCOPY_ASC_TOO_MANY_TGT);

	/* one segment descriptor too many */
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	for (uint32_t i = 0; i < max_seg + 1; i++)
		xl_seg_b2b(&x, 0, 0, 2048, 0, nb - 2048);
	len = xl_hdr(&x, 2, 0);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, XCOPY_MAX_SEG_DESC + 1, NULL, r), -1);
	assert_illegal(r, XCOPY_ASC_TOO_MANY_SEG);

	/* descriptors beyond the maximum descriptor list length (and too many
	 * targets as well): the length answers */
	xl_init(&x);
	for (uint32_t i = 0; i < max_tgt + 1; i++)
		xl_tgt_id(&x, lu.naa, lu.block);
	n = (max_list + 28 - x.t) / 28;
	for (uint32_t i = 0; i < n; i++)
		xl_seg_b2b(&x, 0, 0, 2048, 0, nb - 2048);
	len = xl_hdr(&x, 3, 0);
	assert_true(x.t + x.s > max_list);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, SCSI_ASC_PARAM_LIST_LENGTH);
	/* the transport refuses it from the CDB alone when it is that long */
	assert_true(len > XCOPY_MAX_LIST);
	free(r);
}

/* libiscsi ExtendedCopy.DescrType, and every other unsupported code. */
static void test_descr_type(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	uint64_t nb = blocks(&lu);
	struct xl x;
	uint32_t len;
	(void)state;

	/* Fibre Channel N_Port_Name target descriptor (E0h) */
	xl_init(&x);
	xl_tgt_raw(&x, 0xe0, 32)[31] = 0x02;
	xl_seg_b2b(&x, 0, 0, 2048, 0, nb - 2048);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, XCOPY_ASC_UNSUPP_TGT);

	/* every other target code, of either length, and codes that are not
	 * target descriptors at all */
	for (unsigned t = 0; t < 256; t++) {
		uint32_t tl = (t == 0xea || t == 0xeb) ? 64 : 32;

		if (t == XCOPY_TGT_ID)
			continue;
		xl_init(&x);
		xl_tgt_raw(&x, (uint8_t)t, tl);
		len = xl_hdr(&x, 1, 0);
		assert_int_equal(parse(&lu, &x, len, seg, r), -1);
		assert_illegal(r, XCOPY_ASC_UNSUPP_TGT);
	}
	/* an unsupported one after a good one */
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_tgt_raw(&x, 0xea, 64);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, XCOPY_ASC_UNSUPP_TGT);

	/* stream-to-stream segment descriptor (03h, 20 bytes), and the rest */
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_seg_raw(&x, 0x03, 20);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(len, 16 + 32 + 20);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, XCOPY_ASC_UNSUPP_SEG);
	for (unsigned t = 0; t < 256; t++) {
		if (t == XCOPY_SEG_B2B || t == XCOPY_SEG_B2B_OFF)
			continue;
		xl_init(&x);
		xl_tgt_id(&x, lu.naa, lu.block);
		xl_seg_b2b(&x, 0, 0, 1, 0, 1);
		xl_seg_raw(&x, (uint8_t)t, 28);
		len = xl_hdr(&x, 1, 0);
		assert_int_equal(parse(&lu, &x, len, seg, r), -1);
		assert_illegal(r, XCOPY_ASC_UNSUPP_SEG);
	}
	/* the type codes answer before the content of any descriptor */
	xl_init(&x);
	xl_tgt_id(&x, (const uint8_t[16]){ 0x60 }, lu.block); /* not us */
	xl_seg_raw(&x, 0x01, 24);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, XCOPY_ASC_UNSUPP_SEG);
	free(r);
}

/* Descriptor lengths that do not agree with the lists that hold them. */
static void test_descr_lengths(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	struct xl x;
	uint32_t len;
	uint8_t *d;
	(void)state;

	/* a target list that cuts its last descriptor */
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	put16(x.b + 2, 31);
	put32(x.b + 8, 29);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 2);
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_tgt_id(&x, lu.naa, lu.block);
	len = xl_hdr(&x, 1, 0);
	put16(x.b + 2, 63);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 2);
	/* where the cut leaves a segment descriptor, its code is no target's */
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	put16(x.b + 2, 60);
	put32(x.b + 8, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_illegal(r, XCOPY_ASC_UNSUPP_TGT);

	/* a segment list that cuts a descriptor or its header */
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	put32(x.b + 8, 27);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 8);
	put32(x.b + 8, 3);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 8);
	assert_int_equal(parse(&lu, &x, 16 + 32 + 3, seg, r), -1); /* at the very end */
	assert_field(r, false, 8);

	/* a supported segment type with the wrong DESCRIPTOR LENGTH */
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	d = xl_seg_b2b(&x, 0, 0, 1, 0, 1);
	put16(d + 2, 0x1c);
	x.s += 4;
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 32 + 2);
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	d = xl_seg_b2b_off(&x, 0, 0, 512, 0, 1);
	put16(d + 2, 0x18);
	x.s -= 4;
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 32 + 2);
	free(r);
}

/* libiscsi ExtendedCopy.ValidTgtDescr (SPC-4 path) and the identity rule. */
static void test_tgt_descr(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	uint64_t nb = blocks(&lu);
	uint8_t other[16];
	struct xl x;
	uint32_t len;
	uint8_t *d;
	(void)state;

	/* LU ID TYPE reserved, NUL set, a relative port: obsolete, ignored */
	for (uint8_t b1 = 0; b1 < 0x08; b1++) {
		xl_init(&x);
		d = xl_tgt_id(&x, lu.naa, lu.block);
		d[1] = (uint8_t)(b1 << 5);
		put16(d + 2, 0x1234);
		d[28] = 0x04; /* PAD */
		xl_seg_b2b(&x, 0, 0, 2048, 0, nb - 2048);
		len = xl_hdr(&x, 1, 0);
		assert_int_equal(parse(&lu, &x, len, seg, r), 1);
	}
	/* PIV and a protocol identifier do not change who it names */
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	x.b[16 + 4] = 0x51;
	x.b[16 + 5] = 0x83;
	assert_int_equal(parse(&lu, &x, len, seg, r), 1);

	/* another LU: every byte of the NAA counts */
	for (int i = 0; i < 16; i++) {
		memcpy(other, lu.naa, 16);
		other[i] ^= 0x01;
		xl_init(&x);
		xl_tgt_id(&x, other, lu.block);
		xl_seg_b2b(&x, 0, 0, 1, 0, 1);
		len = xl_hdr(&x, 1, 0);
		assert_int_equal(parse(&lu, &x, len, seg, r), -1);
		assert_aborted(r, XCOPY_ASC_TARGET_UNREACHABLE);
	}
	/* an unused second descriptor naming someone else: still refused */
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_tgt_id(&x, other, lu.block);
	xl_seg_b2b(&x, 0, 0, 1, 0, 1);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_TARGET_UNREACHABLE);

	/* our bytes in another designator: not an NAA of the LU */
	static const struct {
		int at;
		uint8_t v;
	} spoil[] = {
		{ 4, 0x02 }, /* code set ASCII */
		{ 5, 0x13 }, /* association target port */
		{ 5, 0x23 }, /* association target device */
		{ 5, 0x02 }, /* EUI-64 */
		{ 5, 0x01 }, /* T10 vendor ID */
		{ 5, 0x08 }, /* SCSI name string */
		{ 7, 8 },    /* designator length */
		{ 7, 20 },
		{ 7, 0 },
	};
	for (size_t i = 0; i < sizeof(spoil) / sizeof(spoil[0]); i++) {
		len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
		x.b[16 + spoil[i].at] = spoil[i].v;
		assert_int_equal(parse(&lu, &x, len, seg, r), -1);
		assert_aborted(r, XCOPY_ASC_TARGET_UNREACHABLE);
	}
	/* a designator longer than its field: a malformed descriptor */
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	x.b[16 + 7] = 21;
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 7);
	x.b[16 + 7] = 0xff;
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 7);

	/* us, but not as a disk, or with another block length */
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	x.b[16 + 1] = 0x01; /* sequential access */
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 1);
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	x.b[16 + 30] = 0x10; /* 4096 */
	x.b[16 + 31] = 0x00;
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 29);
	x.b[16 + 29] = 0x01;
	x.b[16 + 30] = 0x02;
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 29);
	lu.block = 4096; /* the list says 512 */
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	lu.block = 512;
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 29);
	free(r);
}

/* libiscsi ExtendedCopy.ValidSegDescr and the range rules. */
static void test_seg_descr(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	uint64_t nb = blocks(&lu);
	struct xl x;
	uint32_t len;
	uint8_t *d;
	(void)state;

	/* an inaccessible destination, then source, target descriptor index */
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_seg_b2b(&x, 0, 1, 2048, 0, nb - 2048);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_TARGET_UNREACHABLE);
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_seg_b2b(&x, 0, 1, 1, 0, 1);
	xl_seg_b2b_off(&x, 0xffff, 0, 512, 0, 1);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_TARGET_UNREACHABLE);
	/* no target descriptors at all */
	xl_init(&x);
	xl_seg_b2b(&x, 0, 0, 1, 0, 1);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_TARGET_UNREACHABLE);

	/* beyond the end of the LU, as destination and as source */
	len = simple_list(&x, &lu, 2048, 0, nb - 1, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_NONE);
	len = simple_list(&x, &lu, 2048, nb - 2047, 0, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_NONE);
	len = simple_list(&x, &lu, 1, 0, UINT64_MAX, 1, 0); /* no wrap */
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_NONE);
	len = simple_list(&x, &lu, 0, nb + 1, 0, 1, 0); /* even when empty */
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_NONE);
	len = simple_list(&x, &lu, 2048, nb - 2048, nb - 2048, 1, 0); /* up to the end */
	assert_int_equal(parse(&lu, &x, len, seg, r), 1);
	/* a partial last block is not part of the LU */
	lu.size += 100;
	assert_int_equal(parse(&lu, &x, len, seg, r), 1);
	len = simple_list(&x, &lu, 1, nb, 0, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_NONE);
	lu.size -= 100;
	/* a bad segment after good ones: none of them is returned */
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_seg_b2b(&x, 0, 0, 1, 0, 1);
	xl_seg_b2b(&x, 0, 0, 1, 0, nb);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_aborted(r, XCOPY_ASC_NONE);

	/* larger than the maximum segment length */
	lu.block = 4096;
	nb = blocks(&lu);
	len = simple_list(&x, &lu, XCOPY_MAX_SEG_BYTES / 4096 + 1, 0, nb / 2, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 32 + 10);
	len = simple_list(&x, &lu, XCOPY_MAX_SEG_BYTES / 4096, 0, nb / 2, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), 1);
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	xl_seg_b2b_off(&x, 0, 0, XCOPY_MAX_SEG_BYTES + 4096, 0, nb / 2);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 32 + 8);

	/* 0Ah: byte offsets and partial blocks are refused, not rounded */
	xl_init(&x);
	xl_tgt_id(&x, lu.naa, lu.block);
	d = xl_seg_b2b_off(&x, 0, 0, 4096, 0, 8);
	len = xl_hdr(&x, 1, 0);
	assert_int_equal(parse(&lu, &x, len, seg, r), 1);
	put16(d + 28, 1);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 32 + 28);
	put16(d + 28, 0);
	put16(d + 30, 512);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 32 + 30);
	put16(d + 30, 0);
	put32(d + 8, 4096 + 512);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 32 + 8);
	put32(d + 8, UINT32_MAX);
	assert_int_equal(parse(&lu, &x, len, seg, r), -1);
	assert_field(r, false, 16 + 32 + 8);

	/* DC and CAT do not matter with one block size */
	len = simple_list(&x, &lu, 4, 0, 8, 1, 0);
	x.b[16 + 32 + 1] = 0x03;
	assert_int_equal(parse(&lu, &x, len, seg, r), 1);
	assert_int_equal(seg[0].len, 4 * 4096);
	free(r);
}

/* The header: inline data, LIST ID USAGE, the list identifier, and which
 * lists hold their result. */
static void test_header(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	uint8_t id;
	struct xl x;
	uint32_t len;
	(void)state;

	/* inline data: we advertise none (the length is in the list length) */
	len = simple_list(&x, &lu, 1, 0, 1, 1, 0);
	x.b[15] = 4;
	assert_int_equal(parse(&lu, &x, len + 4, seg, r), -1);
	assert_field(r, false, 12);
	x.b[15] = 0;

	/* LIST ID USAGE 00b hold, 10b discard, 11b none (list id 0), 01b bad */
	len = simple_list(&x, &lu, 1, 0, 1, 0x5a, 0);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, 8, &id, r), 1);
	assert_int_equal(id, 0x5a);
	assert_true(xcopy_hold(x.b, len));
	len = simple_list(&x, &lu, 1, 0, 1, 0x5a, 2);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, 8, &id, r), 1);
	assert_false(xcopy_hold(x.b, len));
	len = simple_list(&x, &lu, 1, 0, 1, 0, 3);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, 8, &id, r), 1);
	assert_int_equal(id, 0);
	assert_false(xcopy_hold(x.b, len));
	len = simple_list(&x, &lu, 1, 0, 1, 0x5a, 3);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, 8, &id, r), -1);
	assert_field(r, false, 0);
	assert_int_equal(id, 0x5a);
	len = simple_list(&x, &lu, 1, 0, 1, 0x5a, 1);
	assert_int_equal(parse_n(&lu, x.b, len, len, seg, 8, &id, r), -1);
	assert_field(r, false, 1);
	assert_false(xcopy_hold(x.b, 15));
	assert_false(xcopy_hold(NULL, 16));

	/* STR, PRIORITY and the reserved bytes are not checked */
	len = simple_list(&x, &lu, 1, 0, 1, 0x5a, 0);
	x.b[1] |= 0x27;
	x.b[4] = x.b[7] = 0xff;
	assert_int_equal(parse(&lu, &x, len, seg, r), 1);
	free(r);
}

/* ---- RECEIVE COPY RESULTS ---- */

/* libiscsi ReceiveCopyResults.OpParams, and each field by its offset. */
static void test_op_params(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	const uint8_t *d = r->data;
	(void)state;

	results(&lu, XCOPY_RCR_OP_PARAMS, 0, 1024, NULL, r);
	assert_good(r);
	assert_int_equal(r->data_len, 47);
	assert_int_equal(get32(d), 43);      /* AVAILABLE DATA (libiscsi needs >= 40) */
	assert_int_equal(d[4], 0x01);       /* SNLID */
	assert_int_equal(get16(d + 8), 2);   /* MAXIMUM TARGET DESCRIPTOR COUNT */
	assert_int_equal(get16(d + 10), 8);  /* MAXIMUM SEGMENT DESCRIPTOR COUNT */
	assert_int_equal(get32(d + 12), 1024); /* MAXIMUM DESCRIPTOR LIST LENGTH */
	assert_int_equal(get32(d + 16), 16u << 20); /* MAXIMUM SEGMENT LENGTH */
	assert_int_equal(get32(d + 20), 0);  /* MAXIMUM INLINE DATA LENGTH */
	assert_int_equal(get32(d + 24), 0);  /* HELD DATA LIMIT */
	assert_int_equal(get32(d + 28), 0);  /* MAXIMUM STREAM DEVICE TRANSFER SIZE */
	assert_int_equal(get16(d + 34), 1);  /* TOTAL CONCURRENT COPIES */
	assert_int_equal(d[36], 1);         /* MAXIMUM CONCURRENT COPIES */
	assert_int_equal(d[37], 9);         /* DATA SEGMENT GRANULARITY: 512 */
	assert_int_equal(d[38], 0);
	assert_int_equal(d[39], 0);
	assert_int_equal(d[43], 3);         /* IMPLEMENTED DESCRIPTOR LIST LENGTH */
	assert_int_equal(d[44], 0x02);
	assert_int_equal(d[45], 0x0a);
	assert_int_equal(d[46], 0xe4);
	for (int i = 5; i < 8; i++)
		assert_int_equal(d[i], 0);
	for (int i = 40; i < 43; i++)
		assert_int_equal(d[i], 0);

	lu.block = 4096;
	results(&lu, XCOPY_RCR_OP_PARAMS, 0, 1024, NULL, r);
	assert_int_equal(d[37], 12);
	/* the list identifier does not matter here; readiness neither */
	lu.ready = false;
	results(&lu, XCOPY_RCR_OP_PARAMS, 0x77, 1024, NULL, r);
	assert_good(r);
	assert_int_equal(r->data_len, 47);

	/* cut to the allocation length */
	results(&lu, XCOPY_RCR_OP_PARAMS, 0, 10, NULL, r);
	assert_good(r);
	assert_int_equal(r->data_len, 10);
	assert_int_equal(get32(d), 43);
	results(&lu, XCOPY_RCR_OP_PARAMS, 0, 0, NULL, r);
	assert_good(r);
	assert_int_equal(r->data_len, 0);
	free(r);
}

/* libiscsi ReceiveCopyResults.CopyStatus: nothing held, then a held copy. */
static void test_copy_status(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_status st = { 0 };
	const uint8_t *d = r->data;
	(void)state;

	/* no copy: INVALID FIELD IN CDB at the list identifier */
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, NULL, r);
	assert_field(r, true, 2);
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &st, r);
	assert_field(r, true, 2);

	/* the copy of the test: one 2048-block segment, done */
	st = (struct xcopy_status){ .valid = true, .list_id = 1, .done = true,
				    .segments_processed = 1, .bytes = 2048 * 512 };
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &st, r);
	assert_good(r);
	assert_int_equal(r->data_len, 12);
	assert_int_equal(get32(d), 8); /* AVAILABLE DATA: libiscsi needs >= 8 */
	assert_int_equal(d[4], 0x01); /* HDD 0, completed without errors */
	assert_int_equal(get16(d + 5), 1);
	assert_int_equal(d[7], 0);    /* bytes */
	assert_int_equal(get32(d + 8), 2048 * 512);
	/* another list identifier */
	results(&lu, XCOPY_RCR_COPY_STATUS, 2, 1024, &st, r);
	assert_field(r, true, 2);

	st.failed = true;
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &st, r);
	assert_int_equal(d[4], 0x02); /* completed with errors */
	st.done = false;
	st.failed = false;
	st.segments_processed = 0xabcd;
	st.bytes = 0;
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &st, r);
	assert_int_equal(d[4], 0x00); /* in progress */
	assert_int_equal(get16(d + 5), 0xabcd);
	assert_int_equal(get32(d + 8), 0);

	/* counts beyond 32 bits move to larger units */
	st.bytes = UINT32_MAX;
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &st, r);
	assert_int_equal(d[7], 0);
	assert_int_equal(get32(d + 8), UINT32_MAX);
	st.bytes = 1ull << 32;
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &st, r);
	assert_int_equal(d[7], 1); /* KiB */
	assert_int_equal(get32(d + 8), 1u << 22);
	st.bytes = UINT64_MAX;
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &st, r);
	assert_int_equal(d[7], 4); /* TiB */
	assert_int_equal(get32(d + 8), (1u << 24) - 1);

	/* cut to the allocation length; a status without the LU ready */
	lu.ready = false;
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 5, &st, r);
	assert_good(r);
	assert_int_equal(r->data_len, 5);
	st.valid = false;
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &st, r);
	assert_field(r, true, 2);
	free(r);
}

static void test_results_bad(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_status st = { .valid = true, .list_id = 0, .done = true };
	uint8_t c[16];
	(void)state;

	/* RECEIVE DATA, FAILED SEGMENT DETAILS, LID4 actions, reserved */
	for (uint8_t sa = 0; sa < 0x20; sa++) {
		if (sa == XCOPY_RCR_COPY_STATUS || sa == XCOPY_RCR_OP_PARAMS)
			continue;
		results(&lu, sa, 0, 1024, &st, r);
		assert_field(r, true, 1);
	}
	rcr_cdb(c, XCOPY_RCR_OP_PARAMS, 0, 1024);
	c[15] = 0x04;
	xcopy_results(&lu, c, &st, r);
	assert_field(r, true, 15);
	c[15] = 0x01;
	xcopy_results(&lu, c, &st, r);
	assert_field(r, true, 15);
	rcr_cdb(c, XCOPY_RCR_OP_PARAMS, 0, 1024);
	c[0] = SCSI_EXTENDED_COPY;
	xcopy_results(&lu, c, &st, r);
	assert_field(r, true, 0);
	results(NULL, XCOPY_RCR_OP_PARAMS, 0, 1024, &st, r);
	assert_illegal(r, SCSI_ASC_LUN_NOT_SUPPORTED);
	lu.block = 3;
	results(&lu, XCOPY_RCR_OP_PARAMS, 0, 1024, &st, r);
	assert_sense(r, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
	free(r);
}

/* The whole ReceiveCopyResults.CopyStatus flow as a caller runs it: parse,
 * copy, keep the result only when the list asks for it. */
static void test_flow(void **state)
{
	struct scsi_lu lu = lu_make();
	struct scsi_req *r = req_new();
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESC];
	struct xcopy_status held = { 0 };
	uint64_t nb = blocks(&lu);
	struct xl x;
	uint32_t len;
	uint8_t id;
	int n;
	(void)state;

	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &held, r);
	assert_field(r, true, 2);
	len = simple_list(&x, &lu, 2048, 0, nb - 2048, 1, 0);
	n = parse_n(&lu, x.b, len, len, seg, XCOPY_MAX_SEG_DESC, &id, r);
	assert_int_equal(n, 1);
	if (xcopy_hold(x.b, len))
		held = (struct xcopy_status){ .valid = true, .list_id = id, .done = true,
					      .segments_processed = (uint16_t)n,
					      .bytes = seg[0].len };
	scsi_error(r, 0);
	assert_good(r);
	results(&lu, XCOPY_RCR_COPY_STATUS, 1, 1024, &held, r);
	assert_good(r);
	assert_int_equal(r->data[4], 0x01);
	assert_int_equal(get32(r->data + 8), 2048 * 512);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cdb_len),
		cmocka_unit_test(test_simple),
		cmocka_unit_test(test_multiple_segments),
		cmocka_unit_test(test_nothing_to_copy),
		cmocka_unit_test(test_lu_state),
		cmocka_unit_test(test_param_list_length),
		cmocka_unit_test(test_descr_limits),
		cmocka_unit_test(test_descr_type),
		cmocka_unit_test(test_descr_lengths),
		cmocka_unit_test(test_tgt_descr),
		cmocka_unit_test(test_seg_descr),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_op_params),
		cmocka_unit_test(test_copy_status),
		cmocka_unit_test(test_results_bad),
		cmocka_unit_test(test_flow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
