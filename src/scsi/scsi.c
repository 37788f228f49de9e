/* SCSI command layer (see scsi.h for the command list and the rules).
 * All multi-byte CDB and data fields are big-endian. Every response is built
 * in out->data (4096 bytes; the largest, REPORT SUPPORTED OPERATION CODES with
 * timeouts, is under 1 KiB) and then cut to the allocation length by data_in().
 * Sense bytes are written by sense_fixed() only; errno is mapped by
 * scsi_error() only. */
#include "scsi.h"

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "../common/be.h"

/* ---- status and sense ---- */

/* Sense-key specific field pointer (SPC-4 4.5.2.4.2): SKSV, C/D, byte. */
#define SKS_CDB(byte) (0x80c00000u | (uint32_t)(byte))
#define SKS_PARAM(byte) (0x80800000u | (uint32_t)(byte))

/* The only writer of sense bytes: fixed format, current error. */
static void sense_fixed(uint8_t *s, uint8_t key, uint16_t asc, uint32_t sks)
{
	memset(s, 0, SCSI_SENSE_FIXED_LEN);
	s[0] = 0x70;
	s[2] = key;
	s[7] = SCSI_SENSE_FIXED_LEN - 8; /* additional sense length */
	s[12] = (uint8_t)(asc >> 8);
	s[13] = (uint8_t)asc;
	if (sks) {
		s[15] = (uint8_t)(sks >> 16);
		s[16] = (uint8_t)(sks >> 8);
		s[17] = (uint8_t)sks;
	}
}

/* Completes the command: status, and sense for CHECK CONDITION. */
static void finish(struct scsi_req *out, uint8_t status, uint8_t key, uint16_t asc, uint32_t sks)
{
	out->kind = SCSI_DONE;
	out->status = status;
	out->data_len = 0;
	out->needs_params = false;
	out->sense_len = 0;
	if (status == SCSI_CHECK_CONDITION) {
		sense_fixed(out->sense, key, asc, sks);
		out->sense_len = SCSI_SENSE_FIXED_LEN;
	}
}

static void check(struct scsi_req *out, uint8_t key, uint16_t asc)
{
	finish(out, SCSI_CHECK_CONDITION, key, asc, 0);
}

static void good(struct scsi_req *out)
{
	finish(out, SCSI_GOOD, 0, 0, 0);
}

static void bad_cdb(struct scsi_req *out, unsigned byte)
{
	finish(out, SCSI_CHECK_CONDITION, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_CDB,
	       SKS_CDB(byte));
}

static void bad_param(struct scsi_req *out, unsigned byte)
{
	finish(out, SCSI_CHECK_CONDITION, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_PARAM,
	       SKS_PARAM(byte > 0xffff ? 0xffff : byte));
}

static void illegal(struct scsi_req *out, uint16_t asc)
{
	check(out, SCSI_KEY_ILLEGAL_REQUEST, asc);
}

/* GOOD with len bytes of out->data, cut to the allocation length. */
static void data_in(struct scsi_req *out, uint32_t len, uint32_t alloc)
{
	good(out);
	if (len > sizeof(out->data)) /* a builder bug; never send past the buffer */
		len = sizeof(out->data);
	out->data_len = len < alloc ? len : alloc;
}

/* For the other SCSI modules (reservations, copy): the same builders. */
void scsi_done(struct scsi_req *out, uint8_t status)
{
	finish(out, status, 0, 0, 0);
}

void scsi_check(struct scsi_req *out, uint8_t key, uint16_t asc)
{
	check(out, key, asc);
}

void scsi_bad_cdb(struct scsi_req *out, unsigned byte)
{
	bad_cdb(out, byte);
}

void scsi_bad_param(struct scsi_req *out, unsigned byte)
{
	bad_param(out, byte);
}

void scsi_data_in(struct scsi_req *out, uint32_t len, uint32_t alloc)
{
	data_in(out, len, alloc);
}

void scsi_miscompare(struct scsi_req *out, uint32_t offset)
{
	check(out, SCSI_KEY_MISCOMPARE, SCSI_ASC_MISCOMPARE_VERIFY);
	out->sense[0] |= 0x80; /* VALID: the INFORMATION field holds the offset */
	put32(out->sense + 3, offset);
}

/* Why the unit is not ready: its port in standby, or (a primary that lost
 * its lease) in transition. */
static uint16_t not_ready_asc(const struct scsi_lu *lu)
{
	return lu->tpg[0].access == SCSI_ALUA_TRANSITIONING ? SCSI_ASC_NOT_READY_TRANSITION
							    : SCSI_ASC_NOT_READY_STANDBY;
}

void scsi_error(struct scsi_req *out, int err)
{
	bool rd = out->kind == SCSI_IO && out->op == BS_READ;

	switch (err) {
	case 0:
		good(out);
		return;
	case -EROFS:
	case -ENOTCONN:
	case -EPERM:
		check(out, SCSI_KEY_NOT_READY, SCSI_ASC_NOT_READY_STANDBY);
		return;
	case -ESTALE: /* the primary's lease ran out: the initiator retries */
		check(out, SCSI_KEY_NOT_READY, SCSI_ASC_NOT_READY_TRANSITION);
		return;
	case -EIO:
	case -EUCLEAN:
		check(out, SCSI_KEY_MEDIUM_ERROR, rd ? SCSI_ASC_READ_ERROR : SCSI_ASC_WRITE_ERROR);
		return;
	case -EINVAL:
	case -ERANGE:
	case -EOVERFLOW:
		illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
		return;
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
		check(out, SCSI_KEY_DATA_PROTECT, SCSI_ASC_SPACE_ALLOC_FAILED);
		return;
	case -ENOTSUP:
#if EOPNOTSUPP != ENOTSUP
	case -EOPNOTSUPP:
#endif
		illegal(out, SCSI_ASC_INVALID_FIELD_CDB);
		return;
	case -ENXIO:
		illegal(out, SCSI_ASC_LUN_NOT_SUPPORTED);
		return;
	case -EBADMSG:
		check(out, SCSI_KEY_ABORTED_COMMAND, SCSI_ASC_CRC_ERROR);
		return;
	case -EPROTO:
		check(out, SCSI_KEY_ABORTED_COMMAND, SCSI_ASC_DATA_PHASE_ERROR);
		return;
	case -ECONNRESET:
	case -ETIMEDOUT:
	case -ESHUTDOWN:
	case -ECANCELED:
		check(out, SCSI_KEY_ABORTED_COMMAND, SCSI_ASC_LU_COMM_FAILURE);
		return;
	case -EBUSY:
	case -EAGAIN:
		finish(out, SCSI_BUSY, 0, 0, 0);
		return;
	case -ENOMEM:
		finish(out, SCSI_TASK_SET_FULL, 0, 0, 0);
		return;
	default:
		check(out, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
		return;
	}
}

int scsi_sense_key(const uint8_t *sense, uint32_t len)
{
	if (!sense || len < 14 || (sense[0] & 0x7e) != 0x70)
		return -1;
	return sense[2] & 0x0f;
}

int scsi_sense_asc(const uint8_t *sense, uint32_t len)
{
	if (!sense || len < 14 || (sense[0] & 0x7e) != 0x70)
		return -1;
	return sense[12] << 8 | sense[13];
}

/* ---- the logical unit ---- */

static bool pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* The caller's description is trusted for meaning, not for arithmetic. */
static bool lu_valid(const struct scsi_lu *lu)
{
	if (!pow2(lu->block) || lu->block < 512 || lu->block > 65536)
		return false;
	if (lu->phys_block && (!pow2(lu->phys_block) || lu->phys_block < lu->block ||
			       lu->phys_block / lu->block > (1u << 15)))
		return false;
	return true;
}

static uint64_t lu_blocks(const struct scsi_lu *lu)
{
	return lu->size / lu->block;
}

static uint32_t lu_phys_per_log(const struct scsi_lu *lu)
{
	return lu->phys_block ? lu->phys_block / lu->block : 1;
}

/* Largest READ/WRITE in blocks: the caller's limit, and the byte count must fit
 * data_in_len / data_out_len. */
static uint32_t lu_max_xfer(const struct scsi_lu *lu)
{
	uint32_t m = UINT32_MAX / lu->block;

	if (lu->max_xfer_blocks && lu->max_xfer_blocks < m)
		m = lu->max_xfer_blocks;
	return m;
}

static bool range_ok(const struct scsi_lu *lu, uint64_t lba, uint64_t n)
{
	uint64_t nb = lu_blocks(lu);

	return lba <= nb && n <= nb - lba;
}

/* Space-padded printable ASCII, as INQUIRY fields require. */
static void put_ascii(uint8_t *dst, const char *src, size_t width)
{
	size_t i = 0;

	for (; src && src[i] && i < width; i++)
		dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? (uint8_t)src[i] : '_';
	for (; i < width; i++)
		dst[i] = ' ';
}

/* ---- LBA and length fields of the block commands ---- */

struct lba_range {
	uint64_t lba;
	uint32_t n;      /* blocks, as in the CDB (READ/WRITE(6) 0 made 256 by the caller) */
	unsigned len_at; /* byte of the length field, for the sense field pointer */
};

/* By CDB group: 6, 10, 16 or 12 bytes. Only called for opcodes of the table,
 * after the CDB length was checked. */
static void decode_lba(const uint8_t *cdb, struct lba_range *r)
{
	switch (cdb[0] >> 5) {
	case 0:
		r->lba = (uint64_t)(cdb[1] & 0x1f) << 16 | (uint64_t)cdb[2] << 8 | cdb[3];
		r->n = cdb[4];
		r->len_at = 4;
		break;
	case 4:
		r->lba = get64(cdb + 2);
		r->n = get32(cdb + 10);
		r->len_at = 10;
		break;
	case 5:
		r->lba = get32(cdb + 2);
		r->n = get32(cdb + 6);
		r->len_at = 6;
		break;
	default: /* groups 1 and 2: 10 bytes */
		r->lba = get32(cdb + 2);
		r->n = get16(cdb + 7);
		r->len_at = 7;
		break;
	}
}

static void io(struct scsi_req *out, enum bs_op op, const struct scsi_lu *lu, uint64_t lba,
	       uint64_t n)
{
	out->kind = SCSI_IO;
	out->status = SCSI_GOOD;
	out->op = op;
	out->off = lba * lu->block; /* lba + n <= blocks: no overflow */
	out->len = n * lu->block;
}

/* ---- SBC: block commands ---- */

/* What every block transfer checks after its flags: the range, zero blocks
 * (GOOD without I/O), the block limits, and that the expected transfer holds
 * the `need` bytes of data-out. True: go on; false: out is completed. */
static bool xfer_ok(const struct scsi_lu *lu, const struct lba_range *r, uint32_t xfer,
		    uint64_t need, struct scsi_req *out)
{
	if (!range_ok(lu, r->lba, r->n))
		illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
	else if (r->n == 0)
		good(out);
	else if (r->n > lu_max_xfer(lu) || xfer < need)
		bad_cdb(out, r->len_at);
	else
		return true;
	return false;
}

static void sbc_rw(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
		   struct scsi_req *out)
{
	bool write = cdb[0] == SCSI_WRITE_6 || cdb[0] == SCSI_WRITE_10 ||
		     cdb[0] == SCSI_WRITE_12 || cdb[0] == SCSI_WRITE_16;
	bool six = cdb[0] == SCSI_READ_6 || cdb[0] == SCSI_WRITE_6;
	uint8_t flags = six ? 0 : cdb[1];
	struct lba_range r;
	uint32_t bytes;

	decode_lba(cdb, &r);
	if (six && r.n == 0)
		r.n = 256;
	if (flags & 0xe0) /* RDPROTECT / WRPROTECT: no protection information */
		return bad_cdb(out, 1);
	if (!xfer_ok(lu, &r, xfer, write ? (uint64_t)r.n * lu->block : 0, out))
		return;
	bytes = r.n * lu->block; /* r.n <= lu_max_xfer(): fits */
	io(out, write ? BS_WRITE : BS_READ, lu, r.lba, r.n);
	if (write) {
		out->fua = flags & 0x08;
		out->data_out_len = bytes;
	} else {
		out->data_in_len = bytes;
	}
}

/* BYTCHK 00: the medium is checked (GOOD, no I/O); 01: the data-out is
 * compared with the medium; 11: one block of data-out is compared with each
 * block; 10: reserved. The caller reads the range and compares (xop). */
static void sbc_verify(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
		       struct scsi_req *out)
{
	unsigned bytchk = (cdb[1] >> 1) & 3;
	struct lba_range r;

	if (cdb[1] & 0xe0) /* VRPROTECT */
		return bad_cdb(out, 1);
	if (bytchk == 2)
		return bad_cdb(out, 1);
	decode_lba(cdb, &r);
	if (bytchk == 0 && !range_ok(lu, r.lba, r.n))
		return illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
	if (bytchk == 0)
		return good(out);
	if (!xfer_ok(lu, &r, xfer, bytchk == 3 ? lu->block : (uint64_t)r.n * lu->block, out))
		return;
	io(out, BS_READ, lu, r.lba, r.n);
	out->xop = bytchk == 3 ? SCSI_XOP_VERIFY_SAME : SCSI_XOP_VERIFY;
	out->data_out_len = bytchk == 3 ? lu->block : r.n * lu->block;
	out->data_in_len = 0;
}

/* WRITE AND VERIFY 10/12/16: a write that is durable before it completes (the
 * verification is of what we just wrote; BYTCHK 00 and 01 only). ORWRITE(16):
 * the data-out is ORed into the medium, under a range lock (xop). */
static void sbc_write_ext(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			  struct scsi_req *out)
{
	bool orw = cdb[0] == SCSI_ORWRITE_16;
	struct lba_range r;

	if (cdb[1] & 0xe0) /* WRPROTECT / ORPROTECT */
		return bad_cdb(out, 1);
	if (!orw && (cdb[1] & 0x04)) /* BYTCHK 1x: reserved */
		return bad_cdb(out, 1);
	decode_lba(cdb, &r);
	if (!xfer_ok(lu, &r, xfer, (uint64_t)r.n * lu->block, out))
		return;
	io(out, BS_WRITE, lu, r.lba, r.n);
	out->xop = orw ? SCSI_XOP_ORWRITE : SCSI_XOP_NONE;
	out->fua = orw ? cdb[1] & 0x08 : true;
	out->data_out_len = r.n * lu->block;
}

/* The COMPARE AND WRITE maximum: never above the maximum transfer length. */
static uint32_t caw_max(const struct scsi_lu *lu)
{
	return lu_max_xfer(lu) < SCSI_CAW_MAX_BLOCKS ? lu_max_xfer(lu) : SCSI_CAW_MAX_BLOCKS;
}

/* COMPARE AND WRITE: 2 * n blocks of data-out, the first n compared with the
 * medium and, when equal, the second n written, atomically with respect to
 * every other write of the volume (the caller holds a range lock). */
static void sbc_compare_and_write(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
				  struct scsi_req *out)
{
	uint64_t lba = get64(cdb + 2);
	uint32_t n = cdb[13];

	if (cdb[1] & 0xe0) /* WRPROTECT */
		return bad_cdb(out, 1);
	if (n > caw_max(lu))
		return bad_cdb(out, 13);
	if (!range_ok(lu, lba, n))
		return illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
	if (n == 0) { /* nothing to compare; data-out offered anyway is an error */
		good(out);
		out->exact_out = true;
		return;
	}
	if (xfer < 2 * n * lu->block)
		return bad_cdb(out, 13);
	io(out, BS_WRITE, lu, lba, n);
	out->xop = SCSI_XOP_CAW;
	out->fua = cdb[1] & 0x08;
	out->data_out_len = 2 * n * lu->block;
	out->exact_out = true;
}

/* Reservations and copies: checked here for what every command shares; the
 * caller runs src/scsi/pr.c or xcopy.c with its state (enum scsi_xop). */
static void spc_stateful(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			 struct scsi_req *out)
{
	uint32_t plen = 0;
	(void)lu;
	(void)xfer;

	out->kind = SCSI_IO;
	out->status = SCSI_GOOD;
	switch (cdb[0]) {
	case SCSI_PERSISTENT_RESERVE_IN:
		out->xop = SCSI_XOP_PR_IN;
		return;
	case SCSI_RECEIVE_COPY_RESULTS:
		out->xop = SCSI_XOP_COPY_RESULTS;
		return;
	case SCSI_PERSISTENT_RESERVE_OUT:
		plen = get32(cdb + 5);
		out->xop = SCSI_XOP_PR_OUT;
		break;
	case SCSI_EXTENDED_COPY:
		plen = get32(cdb + 10);
		out->xop = SCSI_XOP_XCOPY;
		break;
	default: /* RESERVE, RELEASE: no parameter list of ours */
		out->xop = SCSI_XOP_PR_OUT;
		return;
	}
	if (plen > SCSI_PARAM_MAX)
		return illegal(out, SCSI_ASC_PARAM_LIST_LENGTH);
	out->data_out_len = plen;
}

/* READ DEFECT DATA 10/12: an empty list in the requested format. */
static void sbc_read_defect(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			    struct scsi_req *out)
{
	bool twelve = cdb[0] == SCSI_READ_DEFECT_DATA_12;
	(void)lu;
	(void)xfer;

	memset(out->data, 0, 8);
	if (twelve) {
		out->data[1] = cdb[1] & 0x1f; /* PLIST, GLIST, format */
		return data_in(out, 8, get32(cdb + 6));
	}
	out->data[1] = cdb[2] & 0x1f;
	data_in(out, 4, get16(cdb + 7));
}

static void sbc_prefetch(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			 struct scsi_req *out)
{
	struct lba_range r;
	(void)xfer;

	decode_lba(cdb, &r);
	if (!range_ok(lu, r.lba, r.n))
		return illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
	good(out);
}

static void sbc_sync(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
		     struct scsi_req *out)
{
	struct lba_range r;
	uint64_t n;
	(void)xfer;

	decode_lba(cdb, &r);
	if (!range_ok(lu, r.lba, r.n) || (r.n == 0 && r.lba > lu_blocks(lu)))
		return illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
	n = r.n ? r.n : lu_blocks(lu) - r.lba; /* 0: to the end of the medium */
	io(out, BS_FLUSH, lu, r.lba, n);
}

static void sbc_write_same(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			   struct scsi_req *out)
{
	bool ndob = cdb[0] == SCSI_WRITE_SAME_16 && (cdb[1] & 0x01);
	bool unmap = cdb[1] & 0x08;
	struct lba_range r;
	uint64_t n;

	if (cdb[1] & 0xe0) /* WRPROTECT */
		return bad_cdb(out, 1);
	if (cdb[1] & 0x16) /* ANCHOR, PBDATA, LBDATA */
		return bad_cdb(out, 1);
	if (unmap && !lu->thin)
		return bad_cdb(out, 1);
	decode_lba(cdb, &r);
	if (!range_ok(lu, r.lba, r.n))
		return illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
	/* WSNZ=0: zero blocks mean up to the end of the medium (64 bits) */
	n = r.n ? r.n : lu_blocks(lu) - r.lba;
	if (n == 0)
		return good(out);
	if (n > SCSI_WRITE_SAME_MAX_BLOCKS)
		return bad_cdb(out, r.len_at);
	if (!ndob && xfer < lu->block)
		return bad_cdb(out, r.len_at);
	io(out, unmap ? BS_TRIM : BS_ZERO, lu, r.lba, n);
	if (!ndob) {
		out->data_out_len = lu->block;
		out->needs_params = true;
		out->exact_out = true;
	}
}

static void sbc_unmap(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
		      struct scsi_req *out)
{
	uint32_t plen = get16(cdb + 7);
	(void)lu;

	if (cdb[1] & 0x01) /* ANCHOR */
		return bad_cdb(out, 1);
	if (plen == 0)
		return good(out);
	if (plen < 8)
		return illegal(out, SCSI_ASC_PARAM_LIST_LENGTH);
	if (plen > SCSI_UNMAP_MAX_LIST || xfer < plen)
		return bad_cdb(out, 7);
	out->kind = SCSI_IO;
	out->op = BS_TRIM;
	out->data_out_len = plen;
	out->needs_params = true;
}

static void sbc_read_capacity_10(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
				 struct scsi_req *out)
{
	uint64_t nb = lu_blocks(lu), last = nb ? nb - 1 : 0;
	(void)xfer;

	/* SBC-3: PMI=0 needs LOGICAL BLOCK ADDRESS 0 */
	if (!(cdb[8] & 0x01) && get32(cdb + 2))
		return bad_cdb(out, 2);
	put32(out->data, last > UINT32_MAX ? UINT32_MAX : (uint32_t)last);
	put32(out->data + 4, lu->block);
	data_in(out, 8, 8);
}

static void sbc_read_capacity_16(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
				 struct scsi_req *out)
{
	uint64_t nb = lu_blocks(lu);
	uint32_t ppl = lu_phys_per_log(lu);
	uint8_t *d = out->data, exp = 0;
	(void)xfer;

	while ((1u << exp) < ppl)
		exp++;
	memset(d, 0, 32);
	put64(d, nb ? nb - 1 : 0);
	put32(d + 8, lu->block);
	d[13] = exp & 0x0f;       /* logical blocks per physical block exponent */
	d[14] = lu->thin ? 0x80 : 0; /* LBPME; LBPRZ stays 0 (TRIM leaves garbage) */
	data_in(out, 32, get32(cdb + 10));
}

static void sbc_get_lba_status(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			       struct scsi_req *out)
{
	uint64_t lba = get64(cdb + 2), nb = lu_blocks(lu);
	uint8_t *d = out->data;
	(void)xfer;

	if (lba >= nb)
		return illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
	memset(d, 0, 24);
	put32(d, 20); /* parameter data length: header rest + one descriptor */
	put64(d + 8, lba);
	put32(d + 16, nb - lba > UINT32_MAX ? UINT32_MAX : (uint32_t)(nb - lba));
	d[20] = 0; /* mapped (or unknown) */
	data_in(out, 24, get32(cdb + 10));
}

/* ---- SPC: primary commands ---- */

static void spc_tur(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
		    struct scsi_req *out)
{
	(void)lu;
	(void)cdb;
	(void)xfer;
	good(out); /* NOT READY is decided by the medium flag before we get here */
}

static void spc_start_stop(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			   struct scsi_req *out)
{
	(void)lu;
	(void)cdb;
	(void)xfer;
	good(out);
}

static void spc_request_sense(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			      struct scsi_req *out)
{
	(void)xfer;
	if (cdb[1] & 0x01) /* DESC: descriptor format is not supported */
		return bad_cdb(out, 1);
	/* Status is GOOD: the sense goes in the data, nothing is pending. */
	if (!lu)
		sense_fixed(out->data, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_LUN_NOT_SUPPORTED, 0);
	else if (!lu->ready)
		sense_fixed(out->data, SCSI_KEY_NOT_READY, not_ready_asc(lu), 0);
	else
		sense_fixed(out->data, SCSI_KEY_NO_SENSE, SCSI_ASC_NONE, 0);
	data_in(out, SCSI_SENSE_FIXED_LEN, cdb[4]);
}

static void spc_report_luns(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			    struct scsi_req *out)
{
	uint32_t alloc = get32(cdb + 6), nluns;
	(void)lu;
	(void)xfer;

	if (alloc < 16)
		return bad_cdb(out, 6);
	switch (cdb[2]) {
	case 0x00: /* all logical units */
	case 0x02: /* all, well-known included: we have none */
		nluns = 1;
		break;
	case 0x01: /* well-known only */
		nluns = 0;
		break;
	default:
		return bad_cdb(out, 2);
	}
	memset(out->data, 0, 16);
	put32(out->data, 8 * nluns); /* LUN 0 is eight zero bytes */
	data_in(out, 8 + 8 * nluns, alloc);
}

/* Standard INQUIRY data; no_lun: peripheral qualifier 011b, device type 1Fh. */
static uint32_t inquiry_std(const struct scsi_lu *lu, uint8_t *d)
{
	static const uint16_t versions[] = { 0x00a0 /* SAM-5 */, 0x0460 /* SPC-4 */,
					     0x04c0 /* SBC-3 */ };
	const uint32_t n = 58 + 2 * sizeof(versions) / sizeof(versions[0]);

	memset(d, 0, n);
	d[0] = lu ? 0x00 : 0x7f; /* direct-access block device */
	d[2] = 0x06;             /* SPC-4 */
	d[3] = 0x12;             /* HISUP, response data format 2 */
	d[4] = (uint8_t)(n - 5);
	d[5] = lu && lu->ntpg ? 0x30 : 0; /* TPGS 11b: implicit and explicit ALUA */
	d[7] = 0x02;             /* CMDQUE */
	put_ascii(d + 8, lu ? lu->vendor : NULL, 8);
	put_ascii(d + 16, lu ? lu->product : NULL, 16);
	put_ascii(d + 32, "0001", 4);
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		put16(d + 58 + 2 * i, versions[i]);
	return n;
}

static const uint8_t vpd_pages[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };

static uint32_t vpd_supported(uint8_t *d)
{
	memset(d, 0, 4);
	d[3] = sizeof(vpd_pages);
	memcpy(d + 4, vpd_pages, sizeof(vpd_pages));
	return 4 + sizeof(vpd_pages);
}

static uint32_t vpd_serial(const struct scsi_lu *lu, uint8_t *d)
{
	size_t len = lu->serial ? strnlen(lu->serial, 64) : 0;

	memset(d, 0, 4);
	d[1] = 0x80;
	d[3] = (uint8_t)len;
	put_ascii(d + 4, lu->serial, len);
	return 4 + (uint32_t)len;
}

static uint32_t vpd_device_id(const struct scsi_lu *lu, uint8_t *d)
{
	uint32_t p = 4;

	memset(d, 0, 4);
	d[1] = 0x83;
	/* NAA, binary, associated with the logical unit: the same on both nodes,
	 * which is what lets multipath see one device through two targets. */
	d[p] = 0x01;
	d[p + 1] = 0x03;
	d[p + 2] = 0;
	d[p + 3] = 16;
	memcpy(d + p + 4, lu->naa, 16);
	p += 20;
	if (lu->target_name) {
		/* SCSI name string, UTF-8, iSCSI, target device: NUL-terminated and
		 * padded to a multiple of 4, at most 256 bytes. */
		size_t tl = strnlen(lu->target_name, 251);
		uint32_t dl = (uint32_t)(tl + 4) & ~3u;

		d[p] = 0x53;     /* protocol iSCSI, code set UTF-8 */
		d[p + 1] = 0xa8; /* PIV, association target device, type SCSI name */
		d[p + 2] = 0;
		d[p + 3] = (uint8_t)dl;
		memset(d + p + 4, 0, dl);
		memcpy(d + p + 4, lu->target_name, tl);
		p += 4 + dl;
	}
	if (lu->ntpg) {
		/* binary, PIV, protocol iSCSI, association target port: the
		 * relative target port (type 4), then its port group (type 5) */
		for (unsigned t = 4; t <= 5; t++) {
			d[p] = 0x51;
			d[p + 1] = (uint8_t)(0x90 | t);
			d[p + 2] = 0;
			d[p + 3] = 4;
			put16(d + p + 4, 0);
			put16(d + p + 6, t == 4 ? lu->tpg[0].port : lu->tpg[0].id);
			p += 8;
		}
	}
	put16(d + 2, (uint16_t)(p - 4));
	return p;
}

static uint32_t vpd_block_limits(const struct scsi_lu *lu, uint8_t *d)
{
	uint64_t nb = lu_blocks(lu);
	uint32_t gran = lu_phys_per_log(lu);

	memset(d, 0, 64);
	d[1] = 0xb0;
	d[3] = 0x3c;
	/* WSNZ=0: WRITE SAME of 0 blocks writes to the end of the medium */
	d[5] = (uint8_t)caw_max(lu); /* maximum COMPARE AND WRITE length */
	put16(d + 6, gran > 0xffff ? 0xffff : (uint16_t)gran);
	put32(d + 8, lu_max_xfer(lu));
	put32(d + 12, lu_max_xfer(lu));
	if (lu->thin) {
		put32(d + 20, UINT32_MAX); /* maximum UNMAP LBA count: no limit */
		put32(d + 24, SCSI_UNMAP_MAX_DESC);
		put32(d + 28, gran);       /* optimal unmap granularity */
	}
	put64(d + 36, nb < SCSI_WRITE_SAME_MAX_BLOCKS ? nb : SCSI_WRITE_SAME_MAX_BLOCKS);
	return 64;
}

static uint32_t vpd_block_characteristics(uint8_t *d)
{
	memset(d, 0, 64);
	d[1] = 0xb1;
	d[3] = 0x3c;
	put16(d + 4, 1); /* medium rotation rate: non-rotating */
	return 64;
}

static uint32_t vpd_provisioning(const struct scsi_lu *lu, uint8_t *d)
{
	memset(d, 0, 8);
	d[1] = 0xb2;
	d[3] = 4;
	if (lu->thin) {
		d[5] = 0xe0; /* LBPU, LBPWS, LBPWS10; LBPRZ 0 */
		d[6] = 0x02; /* provisioning type: thin */
	}
	return 8;
}

static void spc_inquiry(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			struct scsi_req *out)
{
	uint32_t alloc = get16(cdb + 3), n;
	uint8_t *d = out->data;
	(void)xfer;

	if (cdb[1] & 0x02) /* CMDDT, obsolete */
		return bad_cdb(out, 1);
	if (!(cdb[1] & 0x01)) {
		if (cdb[2])
			return bad_cdb(out, 2);
		return data_in(out, inquiry_std(lu, d), alloc);
	}
	if (!lu)
		return illegal(out, SCSI_ASC_LUN_NOT_SUPPORTED);
	switch (cdb[2]) {
	case 0x00: n = vpd_supported(d); break;
	case 0x80: n = vpd_serial(lu, d); break;
	case 0x83: n = vpd_device_id(lu, d); break;
	case 0xb0: n = vpd_block_limits(lu, d); break;
	case 0xb1: n = vpd_block_characteristics(d); break;
	case 0xb2: n = vpd_provisioning(lu, d); break;
	default: return bad_cdb(out, 2);
	}
	data_in(out, n, alloc);
}

/* ---- mode pages ---- */

#define PC_CURRENT 0
#define PC_CHANGEABLE 1
#define PC_DEFAULT 2
#define PC_SAVED 3

/* Writes page `page` for page control pc at p; returns its length, 0 when we
 * have no such page. Only SWP (control page) is changeable. */
static uint32_t mode_page(const struct scsi_lu *lu, uint8_t page, unsigned pc, uint8_t *p)
{
	uint32_t n;

	switch (page) {
	case 0x08: /* caching */
		n = 20;
		memset(p, 0, n);
		if (pc != PC_CHANGEABLE && lu->write_cache)
			p[2] = 0x04; /* WCE */
		break;
	case 0x0a: /* control */
		n = 12;
		memset(p, 0, n);
		if (pc != PC_CHANGEABLE) {
			p[2] = 0x02; /* GLTSD; D_SENSE 0: fixed-format sense */
			p[3] = 0x10; /* queue algorithm modifier: unrestricted */
		}
		if (pc == PC_CHANGEABLE || (pc == PC_CURRENT && lu->swp))
			p[4] = 0x08; /* SWP: the one changeable field */
		break;
	case 0x1c: /* informational exceptions control */
		n = 12;
		memset(p, 0, n);
		if (pc != PC_CHANGEABLE)
			p[2] = 0x08; /* DEXCPT: no exceptions reported */
		break;
	default:
		return 0;
	}
	p[0] = page;
	p[1] = (uint8_t)(n - 2);
	return n;
}

static const uint8_t mode_pages[] = { 0x08, 0x0a, 0x1c };

static void spc_mode_sense(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			   struct scsi_req *out)
{
	bool ten = cdb[0] == SCSI_MODE_SENSE_10;
	bool dbd = cdb[1] & 0x08, llbaa = ten && (cdb[1] & 0x10);
	unsigned pc = cdb[2] >> 6;
	uint8_t page = cdb[2] & 0x3f, sub = cdb[3];
	uint32_t alloc = ten ? get16(cdb + 7) : cdb[4];
	uint32_t hdr = ten ? 8 : 4, bdl = dbd ? 0 : (llbaa ? 16 : 8), p;
	uint64_t nb = lu_blocks(lu);
	uint8_t *d = out->data;
	(void)xfer;

	if (pc == PC_SAVED)
		return illegal(out, SCSI_ASC_SAVING_NOT_SUPPORTED);
	if (sub != 0 && !(page == 0x3f && sub == 0xff))
		return bad_cdb(out, 3);
	memset(d, 0, hdr + bdl);
	p = hdr;
	if (bdl == 8) {
		put32(d + p, nb > 0xffffff ? 0xffffff : (uint32_t)nb); /* byte 0: density 0 */
		d[p] = 0;
		put32(d + p + 4, lu->block & 0xffffff);
	} else if (bdl == 16) {
		put64(d + p, nb);
		put32(d + p + 12, lu->block);
	}
	p += bdl;
	if (page == 0x3f) {
		for (size_t i = 0; i < sizeof(mode_pages); i++)
			p += mode_page(lu, mode_pages[i], pc, d + p);
	} else {
		uint32_t k = mode_page(lu, page, pc, d + p);
		if (!k)
			return bad_cdb(out, 2);
		p += k;
	}
	if (ten) {
		put16(d, (uint16_t)(p - 2));
		d[3] = (lu->swp ? 0x80 : 0) | 0x10; /* WP, DPOFUA */
		d[4] = bdl == 16 ? 0x01 : 0; /* LONGLBA */
		put16(d + 6, (uint16_t)bdl);
	} else {
		d[0] = (uint8_t)(p - 1);
		d[2] = (lu->swp ? 0x80 : 0) | 0x10; /* WP, DPOFUA */
		d[3] = (uint8_t)bdl;
	}
	data_in(out, p, alloc);
}

static void spc_mode_select(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			    struct scsi_req *out)
{
	bool ten = cdb[0] == SCSI_MODE_SELECT_10;
	uint32_t plen = ten ? get16(cdb + 7) : cdb[4];
	(void)lu;

	if (plen == 0)
		return good(out);
	if (!(cdb[1] & 0x10) || (cdb[1] & 0x01)) /* PF must be 1; SP: nothing is saved */
		return bad_cdb(out, 1);
	if (xfer < plen)
		return bad_cdb(out, ten ? 7 : 4);
	out->kind = SCSI_IO;
	out->op = BS_OP_MAX; /* no volume I/O: scsi_params() completes it */
	out->data_out_len = plen;
	out->needs_params = true;
}

/* ---- ALUA (SPC-4 5.15): one target port group per node ---- */

static void spc_report_tpg(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			   struct scsi_req *out)
{
	unsigned fmt = cdb[1] >> 5;
	uint32_t alloc = get32(cdb + 6), p, h = fmt == 1 ? 8 : 4;
	uint8_t *d = out->data;
	(void)xfer;

	if (fmt > 1)
		return bad_cdb(out, 1);
	memset(d, 0, h);
	if (fmt == 1) {
		d[4] = 0x10; /* format type 001b: extended header */
		d[5] = 0;    /* implicit transition time: not stated */
	}
	p = h;
	for (unsigned i = 0; i < lu->ntpg && i < 2; i++) {
		const struct scsi_tpg *g = &lu->tpg[i];

		/* An initiator applies a group's state to every path of the
		 * group, also those it reaches through the other node: a node
		 * does not speak for a primary it cannot see. */
		if (g->access == SCSI_ALUA_UNKNOWN)
			continue;
		memset(d + p, 0, 12);
		d[p] = g->access & 0x0f;
		d[p + 1] = 0x0d; /* U_SUP, S_SUP, AO_SUP */
		put16(d + p + 2, g->id);
		d[p + 7] = 1; /* one target port */
		put16(d + p + 10, g->port);
		p += 12;
	}
	put32(d, p - 4);
	data_in(out, p, alloc);
}

static void spc_set_tpg(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			struct scsi_req *out)
{
	uint32_t plen = get32(cdb + 6);
	(void)lu;

	if (plen == 0)
		return good(out);
	if (plen > SCSI_PARAM_MAX || xfer < plen)
		return bad_cdb(out, 6);
	out->kind = SCSI_IO;
	out->op = BS_OP_MAX; /* no volume I/O: the caller switches roles */
	out->data_out_len = plen;
	out->xop = SCSI_XOP_STPG;
}

/* ---- REPORT SUPPORTED OPERATION CODES and the command table ---- */

typedef void cmd_fn(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
		    struct scsi_req *out);

#define CMD_STANDBY 0x01 /* served when !lu->ready (standby); others: NOT READY */
#define CMD_THIN 0x02    /* exists only when lu->thin */
#define CMD_ANY_LUN 0x04 /* answered for a LUN that does not exist */
#define CMD_WRITE 0x08   /* changes the medium: DATA PROTECT while lu->swp */
#define CMD_ALUA 0x10    /* exists only when lu->ntpg */

struct cmd {
	cmd_fn *fn;
	const struct cmd *sa; /* service actions by cdb[1] & 0x1f; then fn is NULL */
	uint8_t len;          /* CDB length */
	uint8_t flags;
	/* CDB usage data (SPC-4 6.35.3); byte 0 and the service action bits are
	 * filled in when reported. */
	uint8_t usage[16];
};

static void spc_report_opcodes(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			       struct scsi_req *out);

/* The tables are laid out by hand, one command per entry. */
/* clang-format off */
#define CTL 0x04 /* control byte: NACA is examined (and refused) */

static const struct cmd sai_tab[32] = {
	[SCSI_SAI_READ_CAPACITY_16] = { .fn = sbc_read_capacity_16, .len = 16, .flags = CMD_STANDBY,
		.usage = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
	[SCSI_SAI_GET_LBA_STATUS] = { .fn = sbc_get_lba_status, .len = 16,
		.usage = { 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			   0xff, 0xff, 0xff, 0xff, 0, CTL } },
};

static const struct cmd mi_tab[32] = {
	[SCSI_MI_REPORT_SUPPORTED_OPCODES] = { .fn = spc_report_opcodes, .len = 12, .flags = CMD_STANDBY,
		.usage = { 0, 0, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
	[SCSI_MI_REPORT_TPG] = { .fn = spc_report_tpg, .len = 12, .flags = CMD_STANDBY | CMD_ALUA,
		.usage = { 0, 0xe0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
};

static const struct cmd mo_tab[32] = {
	[SCSI_MO_SET_TPG] = { .fn = spc_set_tpg, .len = 12, .flags = CMD_STANDBY | CMD_ALUA,
		.usage = { 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
};

#define PRIN { .fn = spc_stateful, .len = 10, .flags = CMD_STANDBY, \
	       .usage = { 0, 0x1f, 0, 0, 0, 0, 0, 0xff, 0xff, CTL } }
#define PROUT { .fn = spc_stateful, .len = 10, \
		.usage = { 0, 0x1f, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, CTL } }
static const struct cmd prin_tab[32] = { [0] = PRIN, [1] = PRIN, [2] = PRIN, [3] = PRIN };
static const struct cmd prout_tab[32] = { [0] = PROUT, [1] = PROUT, [2] = PROUT, [3] = PROUT,
					   [4] = PROUT, [5] = PROUT, [6] = PROUT };
static const struct cmd xcopy_tab[32] = {
	[0] = { .fn = spc_stateful, .len = 16, .flags = CMD_WRITE,
		.usage = { 0, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
};
static const struct cmd rcr_tab[32] = {
	[0] = { .fn = spc_stateful, .len = 16,
		.usage = { 0, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
	[3] = { .fn = spc_stateful, .len = 16,
		.usage = { 0, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
};

#define RW10 { 0, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, CTL }
#define RW12 { 0, 0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL }
#define RW16 { 0, 0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, \
	       0xff, 0xff, 0xff, 0xff, 0x1f, CTL }
#define W10 { 0, 0xf8, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, CTL }
#define W12 { 0, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL }
#define W16 { 0, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, \
	      0xff, 0xff, 0xff, 0xff, 0x1f, CTL }
#define LBA10(b1) { 0, b1, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, CTL }
#define LBA16(b1) { 0, b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, \
		    0xff, 0xff, 0xff, 0xff, 0x1f, CTL }

static const struct cmd op_tab[256] = {
	[SCSI_TEST_UNIT_READY] = { .fn = spc_tur, .len = 6,
		.usage = { 0, 0, 0, 0, 0, CTL } },
	[SCSI_REQUEST_SENSE] = { .fn = spc_request_sense, .len = 6, .flags = CMD_ANY_LUN | CMD_STANDBY,
		.usage = { 0, 0x01, 0, 0, 0xff, CTL } },
	[SCSI_READ_6] = { .fn = sbc_rw, .len = 6,
		.usage = { 0, 0x1f, 0xff, 0xff, 0xff, CTL } },
	[SCSI_WRITE_6] = { .fn = sbc_rw, .len = 6, .flags = CMD_WRITE,
		.usage = { 0, 0x1f, 0xff, 0xff, 0xff, CTL } },
	[SCSI_INQUIRY] = { .fn = spc_inquiry, .len = 6, .flags = CMD_ANY_LUN | CMD_STANDBY,
		.usage = { 0, 0x01, 0xff, 0xff, 0xff, CTL } },
	[SCSI_MODE_SELECT_6] = { .fn = spc_mode_select, .len = 6, .flags = CMD_STANDBY,
		.usage = { 0, 0x11, 0, 0, 0xff, CTL } },
	[SCSI_MODE_SENSE_6] = { .fn = spc_mode_sense, .len = 6, .flags = CMD_STANDBY,
		.usage = { 0, 0x08, 0xff, 0xff, 0xff, CTL } },
	[SCSI_START_STOP_UNIT] = { .fn = spc_start_stop, .len = 6,
		.usage = { 0, 0x01, 0, 0x0f, 0xf7, CTL } },
	[SCSI_READ_CAPACITY_10] = { .fn = sbc_read_capacity_10, .len = 10, .flags = CMD_STANDBY,
		.usage = { 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, CTL } },
	[SCSI_READ_10] = { .fn = sbc_rw, .len = 10, .usage = RW10 },
	[SCSI_WRITE_10] = { .fn = sbc_rw, .len = 10, .flags = CMD_WRITE, .usage = W10 },
	[SCSI_VERIFY_10] = { .fn = sbc_verify, .len = 10,
		.usage = LBA10(0xf6) },
	[SCSI_PRE_FETCH_10] = { .fn = sbc_prefetch, .len = 10,
		.usage = LBA10(0x02) },
	[SCSI_SYNCHRONIZE_CACHE_10] = { .fn = sbc_sync, .len = 10,
		.usage = LBA10(0x06) },
	[SCSI_WRITE_SAME_10] = { .fn = sbc_write_same, .len = 10, .flags = CMD_WRITE,
		.usage = LBA10(0xfe) },
	[SCSI_UNMAP] = { .fn = sbc_unmap, .len = 10, .flags = CMD_THIN | CMD_WRITE,
		.usage = { 0, 0x01, 0, 0, 0, 0, 0x1f, 0xff, 0xff, CTL } },
	[SCSI_MODE_SELECT_10] = { .fn = spc_mode_select, .len = 10, .flags = CMD_STANDBY,
		.usage = { 0, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, CTL } },
	[SCSI_MODE_SENSE_10] = { .fn = spc_mode_sense, .len = 10, .flags = CMD_STANDBY,
		.usage = { 0, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, CTL } },
	[SCSI_READ_16] = { .fn = sbc_rw, .len = 16, .usage = RW16 },
	[SCSI_WRITE_16] = { .fn = sbc_rw, .len = 16, .flags = CMD_WRITE, .usage = W16 },
	[SCSI_VERIFY_16] = { .fn = sbc_verify, .len = 16,
		.usage = LBA16(0xf6) },
	[SCSI_PRE_FETCH_16] = { .fn = sbc_prefetch, .len = 16,
		.usage = LBA16(0x02) },
	[SCSI_SYNCHRONIZE_CACHE_16] = { .fn = sbc_sync, .len = 16,
		.usage = LBA16(0x06) },
	[SCSI_WRITE_SAME_16] = { .fn = sbc_write_same, .len = 16, .flags = CMD_WRITE,
		.usage = LBA16(0xff) },
	[SCSI_SERVICE_ACTION_IN_16] = { .sa = sai_tab, .len = 16 },
	[SCSI_REPORT_LUNS] = { .fn = spc_report_luns, .len = 12, .flags = CMD_ANY_LUN | CMD_STANDBY,
		.usage = { 0, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
	[SCSI_MAINTENANCE_IN] = { .sa = mi_tab, .len = 12 },
	[SCSI_MAINTENANCE_OUT] = { .sa = mo_tab, .len = 12 },
	[SCSI_READ_12] = { .fn = sbc_rw, .len = 12, .usage = RW12 },
	[SCSI_WRITE_12] = { .fn = sbc_rw, .len = 12, .flags = CMD_WRITE, .usage = W12 },
	[SCSI_WRITE_VERIFY_10] = { .fn = sbc_write_ext, .len = 10, .flags = CMD_WRITE,
		.usage = LBA10(0xf2) },
	[SCSI_WRITE_VERIFY_12] = { .fn = sbc_write_ext, .len = 12, .flags = CMD_WRITE,
		.usage = { 0, 0xf2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL } },
	[SCSI_WRITE_VERIFY_16] = { .fn = sbc_write_ext, .len = 16, .flags = CMD_WRITE,
		.usage = LBA16(0xf2) },
	[SCSI_VERIFY_12] = { .fn = sbc_verify, .len = 12,
		.usage = { 0, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL } },
	[SCSI_COMPARE_AND_WRITE] = { .fn = sbc_compare_and_write, .len = 16, .flags = CMD_WRITE,
		.usage = { 0, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0,
			   0xff, 0x1f, CTL } },
	[SCSI_ORWRITE_16] = { .fn = sbc_write_ext, .len = 16, .flags = CMD_WRITE,
		.usage = LBA16(0xf8) },
	[SCSI_RESERVE_6] = { .fn = spc_stateful, .len = 6,
		.usage = { 0, 0, 0, 0, 0, CTL } },
	[SCSI_RELEASE_6] = { .fn = spc_stateful, .len = 6,
		.usage = { 0, 0, 0, 0, 0, CTL } },
	[SCSI_RESERVE_10] = { .fn = spc_stateful, .len = 10,
		.usage = { 0, 0, 0, 0, 0, 0, 0, 0, 0, CTL } },
	[SCSI_RELEASE_10] = { .fn = spc_stateful, .len = 10,
		.usage = { 0, 0, 0, 0, 0, 0, 0, 0, 0, CTL } },
	[SCSI_PERSISTENT_RESERVE_IN] = { .sa = prin_tab, .len = 10 },
	[SCSI_PERSISTENT_RESERVE_OUT] = { .sa = prout_tab, .len = 10 },
	[SCSI_EXTENDED_COPY] = { .sa = xcopy_tab, .len = 16 },
	[SCSI_RECEIVE_COPY_RESULTS] = { .sa = rcr_tab, .len = 16 },
	[SCSI_READ_DEFECT_DATA_10] = { .fn = sbc_read_defect, .len = 10,
		.usage = { 0, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, CTL } },
	[SCSI_READ_DEFECT_DATA_12] = { .fn = sbc_read_defect, .len = 12,
		.usage = { 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL } },
};
/* clang-format on */

static bool cmd_visible(const struct scsi_lu *lu, const struct cmd *c)
{
	return c && c->fn && (!(c->flags & CMD_THIN) || (lu && lu->thin)) &&
	       (!(c->flags & CMD_ALUA) || (lu && lu->ntpg));
}

/* Timeouts descriptor (SPC-4 6.35.4): length 0Ah, no timeouts stated. */
static uint32_t put_timeouts(uint8_t *d)
{
	memset(d, 0, 12);
	put16(d, 0x0a);
	return 12;
}

static uint32_t put_descriptor(uint8_t *d, uint8_t op, int sa, const struct cmd *c, bool rctd)
{
	memset(d, 0, 8);
	d[0] = op;
	put16(d + 2, sa < 0 ? 0 : (uint16_t)sa);
	d[5] = (rctd ? 0x02 : 0) | (sa < 0 ? 0 : 0x01); /* CTDP, SERVACTV */
	put16(d + 6, c->len);
	return rctd ? 8 + put_timeouts(d + 8) : 8;
}

static void spc_report_opcodes(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t xfer,
			       struct scsi_req *out)
{
	bool rctd = cdb[2] & 0x80;
	uint8_t rop = cdb[3];
	uint16_t rsa = get16(cdb + 4);
	uint32_t alloc = get32(cdb + 6), p;
	const struct cmd *top = &op_tab[rop], *c = NULL;
	uint8_t *d = out->data;
	int sa = -1;
	(void)xfer;

	switch (cdb[2] & 0x07) {
	case 0: /* all commands */
		p = 4;
		for (unsigned op = 0; op < 256; op++) {
			const struct cmd *t = &op_tab[op];
			if (t->sa) {
				for (unsigned s = 0; s < 32; s++)
					if (cmd_visible(lu, &t->sa[s]))
						p += put_descriptor(d + p, (uint8_t)op, (int)s,
								    &t->sa[s], rctd);
			} else if (cmd_visible(lu, t)) {
				p += put_descriptor(d + p, (uint8_t)op, -1, t, rctd);
			}
		}
		put32(d, p - 4);
		return data_in(out, p, alloc);
	case 1: /* one opcode without service actions */
		if (top->sa)
			return bad_cdb(out, 2);
		c = top;
		break;
	case 2: /* one opcode and service action */
		if (!top->sa)
			return bad_cdb(out, 2);
		if (rsa < 32)
			c = &top->sa[rsa];
		sa = rsa;
		break;
	case 3: /* either */
		if (top->sa) {
			if (rsa < 32)
				c = &top->sa[rsa];
			sa = rsa;
		} else if (rsa == 0) {
			c = top;
		}
		break;
	default:
		return bad_cdb(out, 2);
	}
	memset(d, 0, 4);
	if (!cmd_visible(lu, c)) {
		d[1] = 0x01; /* not supported */
		return data_in(out, 4, alloc);
	}
	d[1] = (rctd ? 0x80 : 0) | 0x03; /* CTDP; supported as the standard says */
	put16(d + 2, c->len);
	memcpy(d + 4, c->usage, c->len);
	d[4] = rop;
	if (sa >= 0)
		d[5] = (uint8_t)((c->usage[1] & 0xe0) | sa);
	p = 4 + c->len;
	if (rctd)
		p += put_timeouts(d + p);
	data_in(out, p, alloc);
}

/* ---- entry points ---- */

static void reset(struct scsi_req *out)
{
	out->kind = SCSI_DONE;
	out->status = SCSI_GOOD;
	out->sense_len = 0;
	out->data_len = 0;
	out->op = BS_OP_MAX;
	out->off = 0;
	out->len = 0;
	out->fua = false;
	out->data_out_len = 0;
	out->data_in_len = 0;
	out->needs_params = false;
	out->xop = SCSI_XOP_NONE;
	out->exact_out = false;
	out->pattern = false;
	out->swp = -1;
}

/* Finds the command and checks what every command shares: CDB length,
 * control byte, LUN, readiness. NULL when out was completed. */
static const struct cmd *lookup(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len,
				struct scsi_req *out)
{
	const struct cmd *c;

	if (!cdb || cdb_len == 0) {
		bad_cdb(out, 0);
		return NULL;
	}
	c = &op_tab[cdb[0]];
	if (c->sa) {
		if (cdb_len < 2) {
			bad_cdb(out, 1);
			return NULL;
		}
		c = &c->sa[cdb[1] & 0x1f];
		if (!c->fn || (lu && !cmd_visible(lu, c))) { /* no such service action */
			bad_cdb(out, 1);
			return NULL;
		}
	}
	if (!cmd_visible(lu, c) && !(c->fn && !lu)) {
		illegal(out, SCSI_ASC_INVALID_OPCODE);
		return NULL;
	}
	if (cdb_len < c->len) {
		bad_cdb(out, cdb_len);
		return NULL;
	}
	if (cdb[c->len - 1] & 0x05) { /* NACA, LINK */
		bad_cdb(out, c->len - 1u);
		return NULL;
	}
	if (!lu) {
		if (c->flags & CMD_ANY_LUN)
			return c;
		illegal(out, SCSI_ASC_LUN_NOT_SUPPORTED);
		return NULL;
	}
	if (!lu_valid(lu)) {
		check(out, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
		return NULL;
	}
	if (!(c->flags & CMD_STANDBY) && !lu->ready) {
		check(out, SCSI_KEY_NOT_READY, not_ready_asc(lu));
		return NULL;
	}
	if ((c->flags & CMD_WRITE) && lu->swp) {
		check(out, SCSI_KEY_DATA_PROTECT, SCSI_ASC_WRITE_PROTECTED);
		return NULL;
	}
	return c;
}

void scsi_exec(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len,
	       uint32_t expected_xfer, struct scsi_req *out)
{
	const struct cmd *c;

	reset(out);
	c = lookup(lu, cdb, cdb_len, out);
	if (c)
		c->fn(lu, cdb, expected_xfer, out);
}

/* ---- data-out parameter lists ---- */

static int params_unmap(const struct scsi_lu *lu, const uint8_t *d, uint32_t len,
			struct scsi_extent *ext, unsigned max, struct scsi_req *out)
{
	uint32_t bdl, ndesc;
	unsigned k = 0;

	if (len < 8) {
		illegal(out, SCSI_ASC_PARAM_LIST_LENGTH);
		return -EINVAL;
	}
	/* UNMAP DATA LENGTH is not checked (initiators get it wrong and it says
	 * nothing the block descriptor length does not); the descriptors must be
	 * there, though: a list is never run in part. */
	bdl = get16(d + 2);
	if (bdl + 8 > len) {
		bad_param(out, 2);
		return -EINVAL;
	}
	ndesc = bdl / 16; /* a trailing partial descriptor is ignored */
	if (ndesc > SCSI_UNMAP_MAX_DESC || ndesc > max) {
		bad_param(out, 2);
		return -EINVAL;
	}
	/* All or nothing: every descriptor is checked before any extent is given. */
	for (uint32_t i = 0; i < ndesc; i++) {
		const uint8_t *b = d + 8 + 16 * i;
		if (!range_ok(lu, get64(b), get32(b + 8))) {
			illegal(out, SCSI_ASC_LBA_OUT_OF_RANGE);
			return -EINVAL;
		}
	}
	for (uint32_t i = 0; i < ndesc; i++) {
		const uint8_t *b = d + 8 + 16 * i;
		uint64_t lba = get64(b), n = get32(b + 8);
		if (n == 0)
			continue;
		ext[k].off = lba * lu->block;
		ext[k].len = n * lu->block;
		k++;
	}
	if (k == 0)
		good(out);
	return (int)k;
}

static int params_write_same(const struct scsi_lu *lu, const uint8_t *d, uint32_t len,
			     struct scsi_extent *ext, unsigned max, struct scsi_req *out)
{
	if (len < lu->block) {
		illegal(out, SCSI_ASC_PARAM_LIST_LENGTH);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < lu->block; i++) {
		if (d[i]) { /* a pattern: written, even with UNMAP (LBPRZ=0) */
			out->op = BS_WRITE;
			out->pattern = true;
			break;
		}
	}
	if (max < 1) {
		check(out, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
		return -EINVAL;
	}
	ext[0].off = out->off;
	ext[0].len = out->len;
	return 1;
}

/* Accepted only when it changes nothing: see scsi.h. */
static int params_mode_select(const struct scsi_lu *lu, const uint8_t *cdb, const uint8_t *d,
			      uint32_t len, struct scsi_req *out)
{
	bool ten = cdb[0] == SCSI_MODE_SELECT_10;
	uint32_t hdr = ten ? 8 : 4, bdl, q;
	uint8_t cur[32];
	int swp = -1; /* the control page's SWP when the list has that page */

	if (len < hdr) {
		illegal(out, SCSI_ASC_PARAM_LIST_LENGTH);
		return -EINVAL;
	}
	bdl = ten ? get16(d + 6) : d[3];
	if (bdl) {
		bool longlba = ten && (d[4] & 0x01);
		uint32_t want = longlba ? 16 : 8, blk;

		if (bdl != want || hdr + bdl > len) {
			bad_param(out, ten ? 6 : 3);
			return -EINVAL;
		}
		/* only now is the descriptor known to be there */
		if (longlba)
			blk = get32(d + hdr + 12);
		else
			blk = (uint32_t)d[hdr + 5] << 16 | (uint32_t)d[hdr + 6] << 8 | d[hdr + 7];
		if (blk != lu->block) {
			bad_param(out, hdr + (longlba ? 12 : 5));
			return -EINVAL;
		}
	}
	for (q = hdr + bdl; q < len;) {
		uint32_t k;

		if (len - q < 2 || (d[q] & 0x40) || (uint32_t)d[q + 1] + 2 > len - q) {
			bad_param(out, q);
			return -EINVAL;
		}
		k = mode_page(lu, d[q] & 0x3f, PC_CURRENT, cur);
		if (!k || k != (uint32_t)d[q + 1] + 2) {
			bad_param(out, q);
			return -EINVAL;
		}
		if ((d[q] & 0x3f) == 0x0a) { /* SWP may change: compare the rest */
			swp = (d[q + 4] & 0x08) != 0;
			cur[4] = (uint8_t)((cur[4] & ~0x08) | (d[q + 4] & 0x08));
		}
		if (memcmp(cur + 1, d + q + 1, k - 1)) {
			bad_param(out, q);
			return -EINVAL;
		}
		q += k;
	}
	good(out);
	out->swp = (int8_t)swp;
	return 0;
}

int scsi_stpg(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len, const uint8_t *data,
	      uint32_t len, struct scsi_req *out)
{
	int active = -1, standby = -1; /* indexes into lu->tpg */
	bool named[2] = { false, false };

	scsi_exec(lu, cdb, cdb_len, UINT32_MAX, out);
	if (out->kind == SCSI_DONE) /* refused, or an empty list */
		return out->status == SCSI_GOOD ? 0 : -EINVAL;
	if (out->xop != SCSI_XOP_STPG) {
		check(out, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
		return -EINVAL;
	}
	if (!data)
		len = 0;
	if (len > out->data_out_len)
		len = out->data_out_len;
	if (len < 4 || (len - 4) % 4) {
		illegal(out, SCSI_ASC_PARAM_LIST_LENGTH);
		return -EINVAL;
	}
	for (uint32_t q = 4; q < len; q += 4) {
		unsigned st = data[q] & 0x0f;
		uint16_t id = get16(data + q + 2);
		int g = -1;

		for (unsigned i = 0; i < lu->ntpg && i < 2; i++)
			if (lu->tpg[i].id == id)
				g = (int)i;
		if (g < 0 || named[g]) { /* no such group, or named twice */
			bad_param(out, q + 2);
			return -EINVAL;
		}
		named[g] = true;
		/* the states REPORT TARGET PORT GROUPS says are supported and that
		 * a node can be asked for: active/optimized and standby */
		if (st == SCSI_ALUA_OPTIMIZED && active < 0) {
			active = g;
		} else if (st == SCSI_ALUA_STANDBY && standby < 0) {
			standby = g;
		} else { /* another state, or every group active or standby */
			bad_param(out, q);
			return -EINVAL;
		}
	}
	if (active >= 0 && standby >= 0 && active == standby) {
		bad_param(out, 4);
		return -EINVAL;
	}
	if (active < 0 && standby >= 0) {
		if (lu->ntpg < 2) { /* a lone node cannot hand its role to anyone */
			bad_param(out, 4);
			return -EINVAL;
		}
		active = 1 - standby;
	}
	if (active < 0 || lu->tpg[active].access == SCSI_ALUA_OPTIMIZED) {
		good(out); /* nothing asked, or already so */
		return 0;
	}
	return lu->tpg[active].id;
}

int scsi_params(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len,
		const uint8_t *data, uint32_t len, struct scsi_extent *ext, unsigned max,
		struct scsi_req *out)
{
	/* Decode the CDB again rather than trust out: the same checks, the same
	 * op/off/len, whatever the caller kept. */
	scsi_exec(lu, cdb, cdb_len, UINT32_MAX, out);
	if (out->kind == SCSI_DONE) /* refused, or nothing to transfer (UNMAP of 0) */
		return out->status == SCSI_GOOD ? 0 : -EINVAL;
	if (!out->needs_params) { /* not a command with a parameter list */
		check(out, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
		return -EINVAL;
	}
	if (!data)
		len = 0;
	if (len > out->data_out_len) /* the initiator sent more: ignore the rest */
		len = out->data_out_len;
	switch (cdb[0]) {
	case SCSI_UNMAP:
		return params_unmap(lu, data, len, ext, max, out);
	case SCSI_WRITE_SAME_10:
	case SCSI_WRITE_SAME_16:
		return params_write_same(lu, data, len, ext, max, out);
	case SCSI_MODE_SELECT_6:
	case SCSI_MODE_SELECT_10:
		return params_mode_select(lu, cdb, data, len, out);
	default:
		check(out, SCSI_KEY_HARDWARE_ERROR, SCSI_ASC_INTERNAL_FAILURE);
		return -EINVAL;
	}
}
