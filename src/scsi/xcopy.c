/* EXTENDED COPY (LID1) and RECEIVE COPY RESULTS; xcopy.h has the rules and
 * the order of the checks. Parameter list (SPC-4 6.4.3, all big-endian):
 *   [0] LIST IDENTIFIER  [1] STR (5), LIST ID USAGE (4-3), PRIORITY (2-0)
 *   [2-3] TARGET DESCRIPTOR LIST LENGTH  [8-11] SEGMENT DESCRIPTOR LIST LENGTH
 *   [12-15] INLINE DATA LENGTH; then the target descriptors, the segment
 *   descriptors, the inline data.
 * The list is walked twice: first its shape (lengths, counts, type codes), so
 * that a count or type error answers before a content error, as libiscsi's
 * DescrLimits/DescrType expect; then the content. Every offset is checked
 * against the end of the list before a byte there is read. */
#include "xcopy.h"

#include <stddef.h>
#include <string.h>

#include "../common/be.h"

#define TGT_DESC_LEN 32u     /* E0h..E9h, and the E4h we implement */
#define TGT_DESC_LEN_IP 64u  /* EAh, EBh */
#define SEG_B2B_LEN 28u      /* 02h: DESCRIPTOR LENGTH 0018h + 4 */
#define SEG_B2B_OFF_LEN 32u  /* 0Ah: DESCRIPTOR LENGTH 001Ch + 4 */
#define OP_PARAMS_LEN 44u    /* OPERATING PARAMETERS before the type codes */

/* The implemented descriptor type codes, ascending, as advertised. */
static const uint8_t impl_codes[] = { XCOPY_SEG_B2B, XCOPY_SEG_B2B_OFF, XCOPY_TGT_ID };

/* The same trust rule as scsi.c: the caller's LU is trusted for meaning, not
 * for arithmetic (a zero block size would divide by zero). */
static bool lu_ok(const struct scsi_lu *lu)
{
	uint32_t b = lu->block;

	return b >= 512 && b <= 65536 && !(b & (b - 1));
}

static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static int fail(struct scsi_req *out, uint8_t key, uint16_t asc)
{
	scsi_check(out, key, asc);
	return -1;
}

static int list_len_error(struct scsi_req *out)
{
	return fail(out, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_PARAM_LIST_LENGTH);
}

static int bad_param(struct scsi_req *out, uint32_t byte)
{
	scsi_bad_param(out, byte);
	return -1;
}

static int unreachable(struct scsi_req *out)
{
	return fail(out, SCSI_KEY_COPY_ABORTED, XCOPY_ASC_TARGET_UNREACHABLE);
}

int64_t xcopy_cdb_len(const uint8_t *cdb, struct scsi_req *out)
{
	uint32_t plen;

	if (cdb[0] != SCSI_EXTENDED_COPY) {
		scsi_bad_cdb(out, 0);
		return -1;
	}
	if ((cdb[1] & 0x1f) != XCOPY_SA_LID1) {
		scsi_bad_cdb(out, 1);
		return -1;
	}
	if (cdb[15] & 0x05) { /* NACA, LINK */
		scsi_bad_cdb(out, 15);
		return -1;
	}
	plen = get32(cdb + 10);
	if (plen > XCOPY_MAX_LIST) /* refused before the transport buffers it */
		return list_len_error(out);
	return plen;
}

bool xcopy_hold(const uint8_t *param, uint32_t len)
{
	return param && len >= XCOPY_HDR_LEN && ((param[1] >> 3) & 3) == 0;
}

/* Length of a target descriptor from its type code; 0: a code we cannot
 * step over (not a target descriptor, or reserved). */
static uint32_t tgt_desc_len(uint8_t type)
{
	if (type >= 0xe0 && type <= 0xe9)
		return TGT_DESC_LEN;
	if (type == 0xea || type == 0xeb)
		return TGT_DESC_LEN_IP;
	return 0;
}

/* An identification target descriptor at param[off..off+32): must name lu. */
static int check_tgt(const struct scsi_lu *lu, const uint8_t *param, uint32_t off,
		     struct scsi_req *out)
{
	const uint8_t *d = param + off;
	bool ours;

	if (d[7] > 20) /* DESIGNATOR LENGTH past the 24-byte designation field */
		return bad_param(out, off + 7);
	/* code set binary; association LU, designator type NAA (PIV and the
	 * protocol identifier do not matter: libiscsi leaves them 0) */
	ours = (d[4] & 0x0f) == 0x01 && (d[5] & 0x3f) == 0x03 && d[7] == 16 &&
	       memcmp(d + 8, lu->naa, 16) == 0;
	if (!ours)
		return unreachable(out);
	if ((d[1] & 0x1f) != 0x00) /* PERIPHERAL DEVICE TYPE: we are a disk */
		return bad_param(out, off + 1);
	if (get24(d + 29) != lu->block) /* DISK BLOCK LENGTH */
		return bad_param(out, off + 29);
	return 0;
}

/* A segment descriptor at param[off..) of a checked type and length; adds
 * its range to seg[*n] unless it is empty. */
static int check_seg(const struct scsi_lu *lu, const uint8_t *param, uint32_t off,
		     uint32_t ntgt, struct xcopy_seg *seg, unsigned *n, struct scsi_req *out)
{
	const uint8_t *d = param + off;
	uint64_t cap = lu->size / lu->block, nblk, src, dst;
	uint32_t count_at;

	if (get16(d + 4) >= ntgt || get16(d + 6) >= ntgt)
		return unreachable(out);
	if (d[0] == XCOPY_SEG_B2B) {
		count_at = 10;
		nblk = get16(d + 10);
	} else {
		uint32_t bytes = get32(d + 8);

		count_at = 8;
		if (get16(d + 28)) /* SOURCE BYTE OFFSET: we copy whole blocks */
			return bad_param(out, off + 28);
		if (get16(d + 30)) /* DESTINATION BYTE OFFSET */
			return bad_param(out, off + 30);
		if (bytes % lu->block)
			return bad_param(out, off + 8);
		nblk = bytes / lu->block;
	}
	if (nblk > XCOPY_MAX_SEG_BYTES / lu->block)
		return bad_param(out, off + count_at);
	src = get64(d + 12);
	dst = get64(d + 20);
	if (src > cap || nblk > cap - src || dst > cap || nblk > cap - dst)
		return fail(out, SCSI_KEY_COPY_ABORTED, XCOPY_ASC_NONE);
	if (nblk == 0)
		return 0;
	seg[*n].src_off = src * lu->block;
	seg[*n].dst_off = dst * lu->block;
	seg[*n].len = nblk * lu->block;
	(*n)++;
	return 0;
}

int xcopy_parse(const struct scsi_lu *lu, const uint8_t *cdb, const uint8_t *param,
		uint32_t len, struct xcopy_seg *seg, unsigned max, uint8_t *list_id,
		struct scsi_req *out)
{
	uint32_t tgt_off[XCOPY_MAX_TGT_DESC], seg_off[XCOPY_MAX_SEG_DESC];
	uint32_t ntgt = 0, nseg = 0, off, tend, send, tdll, sdll, inl;
	unsigned lim = max < XCOPY_MAX_SEG_DESC ? max : XCOPY_MAX_SEG_DESC, n = 0;
	int64_t plen;

	if (list_id)
		*list_id = 0;
	plen = xcopy_cdb_len(cdb, out);
	if (plen < 0)
		return -1;
	if (!lu)
		return fail(out, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_LUN_NOT_SUPPORTED);
	if (!lu_ok(lu))
		return fail(out, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
	if (!lu->ready)
		return fail(out, SCSI_KEY_NOT_READY, SCSI_ASC_NOT_READY_STANDBY);
	if (plen == 0) { /* SPC-4: not an error, nothing is copied */
		scsi_done(out, SCSI_GOOD);
		return 0;
	}
	if (list_id && param && len >= XCOPY_HDR_LEN && plen >= XCOPY_HDR_LEN)
		*list_id = param[0];
	/* Only what the CDB announced is the list; less than that is short. */
	if (!param || len < plen || plen < XCOPY_HDR_LEN)
		return list_len_error(out);
	len = (uint32_t)plen;

	tdll = get16(param + 2);
	sdll = get32(param + 8);
	inl = get32(param + 12);
	/* The advertised MAXIMUM DESCRIPTOR LIST LENGTH; xcopy_cdb_len() implies
	 * it while no inline data is accepted, this keeps it when that changes. */
	if ((uint64_t)tdll + sdll > XCOPY_MAX_DESC_LIST ||
	    (uint64_t)XCOPY_HDR_LEN + tdll + sdll + inl > len)
		return list_len_error(out);
	if (inl) /* MAXIMUM INLINE DATA LENGTH is 0 */
		return bad_param(out, 12);
	switch ((param[1] >> 3) & 3) { /* LIST ID USAGE */
	case 0: /* hold the result */
	case 2: /* need not hold it */
		break;
	case 3: /* no list identifier: it must be zero */
		if (param[0])
			return bad_param(out, 0);
		break;
	default: /* 01b reserved */
		return bad_param(out, 1);
	}

	/* Shape of the target descriptor list. */
	tend = XCOPY_HDR_LEN + tdll;
	for (off = XCOPY_HDR_LEN; off < tend;) {
		uint32_t l = tgt_desc_len(param[off]);

		if (!l)
			return fail(out, SCSI_KEY_ILLEGAL_REQUEST, XCOPY_ASC_UNSUPP_TGT);
		if (l > tend - off) /* the list length cuts a descriptor */
			return bad_param(out, 2);
		if (ntgt == XCOPY_MAX_TGT_DESC)
			return fail(out, SCSI_KEY_ILLEGAL_REQUEST, XCOPY_ASC_TOO_MANY_TGT);
		tgt_off[ntgt++] = off;
		off += l;
	}
	for (uint32_t i = 0; i < ntgt; i++)
		if (param[tgt_off[i]] != XCOPY_TGT_ID)
			return fail(out, SCSI_KEY_ILLEGAL_REQUEST, XCOPY_ASC_UNSUPP_TGT);

	/* Shape of the segment descriptor list: each carries its own length. */
	send = tend + sdll;
	for (off = tend; off < send;) {
		uint32_t l;

		if (send - off < 4)
			return bad_param(out, 8);
		l = get16(param + off + 2) + 4u;
		if (l > send - off)
			return bad_param(out, 8);
		if (nseg == lim)
			return fail(out, SCSI_KEY_ILLEGAL_REQUEST, XCOPY_ASC_TOO_MANY_SEG);
		seg_off[nseg++] = off;
		off += l;
	}
	for (uint32_t i = 0; i < nseg; i++) {
		uint8_t type = param[seg_off[i]];
		uint32_t l = get16(param + seg_off[i] + 2) + 4u;

		if (type != XCOPY_SEG_B2B && type != XCOPY_SEG_B2B_OFF)
			return fail(out, SCSI_KEY_ILLEGAL_REQUEST, XCOPY_ASC_UNSUPP_SEG);
		if (l != (type == XCOPY_SEG_B2B ? SEG_B2B_LEN : SEG_B2B_OFF_LEN))
			return bad_param(out, seg_off[i] + 2);
	}

	/* Content: every target names this LU, then every segment, all before
	 * any segment is handed out. */
	for (uint32_t i = 0; i < ntgt; i++)
		if (check_tgt(lu, param, tgt_off[i], out) < 0)
			return -1;
	for (uint32_t i = 0; i < nseg; i++)
		if (check_seg(lu, param, seg_off[i], ntgt, seg, &n, out) < 0)
			return -1;
	scsi_done(out, SCSI_GOOD);
	return (int)n;
}

/* ---- RECEIVE COPY RESULTS ---- */

static uint32_t op_params(const struct scsi_lu *lu, uint8_t *d)
{
	const uint32_t n = OP_PARAMS_LEN + sizeof(impl_codes);
	uint8_t gran = 0;

	while (gran < 31 && (2u << gran) <= lu->block)
		gran++;
	memset(d, 0, n);
	put32(d, n - 4);                       /* AVAILABLE DATA */
	d[4] = 0x01;                           /* SNLID: LIST ID USAGE 11b works */
	put16(d + 8, XCOPY_MAX_TGT_DESC);
	put16(d + 10, XCOPY_MAX_SEG_DESC);
	put32(d + 12, XCOPY_MAX_DESC_LIST);
	put32(d + 16, XCOPY_MAX_SEG_BYTES);
	/* 20: MAXIMUM INLINE DATA LENGTH, 24: HELD DATA LIMIT, 28: MAXIMUM
	 * STREAM DEVICE TRANSFER SIZE: 0, no inline, held or stream data. */
	put16(d + 34, XCOPY_MAX_CONCURRENT);   /* TOTAL CONCURRENT COPIES */
	d[36] = XCOPY_MAX_CONCURRENT;          /* MAXIMUM CONCURRENT COPIES */
	d[37] = gran;                          /* DATA SEGMENT GRANULARITY, log2 */
	d[43] = sizeof(impl_codes);            /* IMPLEMENTED DESCRIPTOR LIST LENGTH */
	memcpy(d + OP_PARAMS_LEN, impl_codes, sizeof(impl_codes));
	return n;
}

static uint32_t copy_status(const struct xcopy_status *st, uint8_t *d)
{
	uint64_t count = st->bytes;
	uint8_t units = 0; /* 00h bytes, 01h KiB, ... 06h EiB: 2^(10 * units) */

	while (count > UINT32_MAX) {
		count >>= 10;
		units++;
	}
	memset(d, 0, 12);
	put32(d, 8);                            /* AVAILABLE DATA */
	d[4] = !st->done ? 0x00 : st->failed ? 0x02 : 0x01; /* HDD 0, status */
	put16(d + 5, st->segments_processed);
	d[7] = units;
	put32(d + 8, (uint32_t)count);
	return 12;
}

void xcopy_results(const struct scsi_lu *lu, const uint8_t *cdb,
		   const struct xcopy_status *st, struct scsi_req *out)
{
	uint32_t alloc = get32(cdb + 10);

	if (cdb[0] != SCSI_RECEIVE_COPY_RESULTS)
		return scsi_bad_cdb(out, 0);
	if (cdb[15] & 0x05) /* NACA, LINK */
		return scsi_bad_cdb(out, 15);
	if (!lu)
		return scsi_check(out, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_LUN_NOT_SUPPORTED);
	if (!lu_ok(lu))
		return scsi_check(out, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
	switch (cdb[1] & 0x1f) {
	case XCOPY_RCR_OP_PARAMS:
		return scsi_data_in(out, op_params(lu, out->data), alloc);
	case XCOPY_RCR_COPY_STATUS:
		if (!st || !st->valid || st->list_id != cdb[2])
			return scsi_bad_cdb(out, 2);
		return scsi_data_in(out, copy_status(st, out->data), alloc);
	default: /* RECEIVE DATA, FAILED SEGMENT DETAILS: nothing is held */
		return scsi_bad_cdb(out, 1);
	}
}
