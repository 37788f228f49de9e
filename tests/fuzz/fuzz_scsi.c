/* libFuzzer harness for the SCSI command layer: every byte an initiator
 * controls (CDB, its length, the expected transfer length, the data-out
 * parameter list) and the logical unit the caller describes. Input layout:
 *   [0]      flags: bits 0-1 block (512, 4096, 1024, invalid), 2 ready,
 *            3 thin, 4 write cache, 5 target name, 6 no such LUN, 7 4K physical
 *   [1..8]   size in bytes (big-endian)   [9..12]  max_xfer_blocks (its top
 *            bits: 31-30 port groups 0..2, 29 SWP, 28-27 the peer group's state)
 *   [13..16] expected transfer length     [17]     CDB length (0..32)
 *   CDB, then one byte `max` (extents the caller has room for), then the
 *   parameter list (the rest).
 * Properties: data_len never exceeds sizeof(data) nor the CDB's allocation
 * length (computed here independently); a CHECK CONDITION carries 18 bytes of
 * fixed sense, anything else none; a completed command leaves no transfer,
 * compare step or pattern behind; an I/O stays inside the volume, in whole
 * blocks, within the expected transfer (data-out) and the block limits, and
 * its data-out is what its compare step needs: the range for READ (VERIFY
 * BYTCHK 01), one block (BYTCHK 11), the range for WRITE (ORWRITE too) or
 * twice it (COMPARE AND WRITE, at most SCSI_CAW_MAX_BLOCKS, exact_out); the
 * step matches the opcode (decoded here), and so do the LBA and length of
 * WRITE SAME (0 blocks: to the end of the medium) and COMPARE AND WRITE; the
 * extents of scsi_params() stay inside the volume, and a WRITE SAME is a
 * pattern (BS_WRITE of one extent) exactly when its block is not all zero;
 * reservations and copies (run by the caller with its state) carry their xop,
 * no volume I/O and the CDB's parameter list length; scsi_error() gives a
 * known status, scsi_miscompare() its sense. With SWP no I/O that changes
 * the medium is handed out; a MODE SELECT's new SWP comes only from MODE
 * SELECT; scsi_stpg() names a group the unit has and that is not active
 * already, or answers the command itself.
 * A violated property calls abort() so that libFuzzer keeps the input. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/scsi/scsi.h"

#include "fuzz.h"

static uint64_t be(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* The allocation length of a data-in command, per SPC-4/SBC-3; 0 for every
 * command that must not return data. */
static uint32_t alloc_len(const uint8_t *cdb, uint32_t len)
{
	if (len == 0)
		return 0;
	switch (cdb[0]) {
	case SCSI_REQUEST_SENSE:
	case SCSI_MODE_SENSE_6:
		return len >= 6 ? cdb[4] : 0;
	case SCSI_INQUIRY:
		return len >= 6 ? be(cdb + 3, 2) : 0;
	case SCSI_MODE_SENSE_10:
		return len >= 10 ? be(cdb + 7, 2) : 0;
	case SCSI_READ_CAPACITY_10:
		return 8;
	case SCSI_SERVICE_ACTION_IN_16:
		return len >= 16 ? be(cdb + 10, 4) : 0;
	case SCSI_REPORT_LUNS:
	case SCSI_MAINTENANCE_IN:
	case SCSI_READ_DEFECT_DATA_12:
		return len >= 12 ? be(cdb + 6, 4) : 0;
	case SCSI_READ_DEFECT_DATA_10:
		return len >= 10 ? be(cdb + 7, 2) : 0;
	default:
		return 0;
	}
}

/* The compare / merge step an I/O of this CDB must carry. */
static enum scsi_xop want_xop(const uint8_t *cdb)
{
	switch (cdb[0]) {
	case SCSI_VERIFY_10:
	case SCSI_VERIFY_12:
	case SCSI_VERIFY_16:
		return ((cdb[1] >> 1) & 3) == 3 ? SCSI_XOP_VERIFY_SAME : SCSI_XOP_VERIFY;
	case SCSI_COMPARE_AND_WRITE:
		return SCSI_XOP_CAW;
	case SCSI_ORWRITE_16:
		return SCSI_XOP_ORWRITE;
	case SCSI_PERSISTENT_RESERVE_IN:
		return SCSI_XOP_PR_IN;
	case SCSI_PERSISTENT_RESERVE_OUT:
	case SCSI_RESERVE_6:
	case SCSI_RELEASE_6:
	case SCSI_RESERVE_10:
	case SCSI_RELEASE_10:
		return SCSI_XOP_PR_OUT;
	case SCSI_EXTENDED_COPY:
		return SCSI_XOP_XCOPY;
	case SCSI_RECEIVE_COPY_RESULTS:
		return SCSI_XOP_COPY_RESULTS;
	case SCSI_MAINTENANCE_OUT: return SCSI_XOP_STPG;
	default:
		return SCSI_XOP_NONE;
	}
}

/* Run by the caller with its state (src/scsi/pr.h, xcopy.h), no volume I/O. */
static bool stateful(enum scsi_xop x)
{
	return x == SCSI_XOP_PR_IN || x == SCSI_XOP_PR_OUT || x == SCSI_XOP_XCOPY ||
	       x == SCSI_XOP_COPY_RESULTS || x == SCSI_XOP_STPG;
}

static bool is_write_same(const uint8_t *cdb, uint32_t len)
{
	return (len >= 10 && cdb[0] == SCSI_WRITE_SAME_10) ||
	       (len >= 16 && cdb[0] == SCSI_WRITE_SAME_16);
}

static bool all_zero(const uint8_t *p, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static bool known_status(uint8_t s)
{
	return s == SCSI_GOOD || s == SCSI_CHECK_CONDITION || s == SCSI_BUSY ||
	       s == SCSI_TASK_SET_FULL;
}

static void check_done(const struct scsi_req *r)
{
	CHECK(r->kind == SCSI_DONE);
	CHECK(known_status(r->status));
	CHECK(r->data_len <= sizeof(r->data));
	if (r->status == SCSI_CHECK_CONDITION) {
		CHECK(r->sense_len == SCSI_SENSE_FIXED_LEN);
		CHECK((r->sense[0] & 0x7f) == 0x70 && r->sense[7] == 10); /* 0x80: VALID */
		CHECK(scsi_sense_key(r->sense, r->sense_len) > 0);
		CHECK(r->data_len == 0);
	} else {
		CHECK(r->sense_len == 0);
	}
}

static void check_range(const struct scsi_lu *lu, uint64_t off, uint64_t len)
{
	uint64_t usable = lu->size / lu->block * lu->block;

	CHECK(off % lu->block == 0 && len % lu->block == 0);
	CHECK(off <= usable && len <= usable - off);
}

static const char long_name[] =
	"iqn.2026-11.org.tandem:a-very-long-target-name-that-goes-on-and-on-"
	"0123456789012345678901234567890123456789012345678901234567890123456789"
	"0123456789012345678901234567890123456789012345678901234567890123456789"
	"0123456789012345678901234567890123456789012345678901234567890123456789";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t blocks[] = { 512, 4096, 1024, 1000 };
	const uint8_t *p = data;
	size_t n = size;
	struct scsi_lu lu = { 0 };
	struct scsi_req *r, *r2;
	struct scsi_extent *ext;
	uint8_t flags, *cdb, *list;
	uint32_t xfer, cdb_len, alloc, list_len;
	uint64_t ws_lba = 0, ws_n = 0;
	unsigned max;
	bool ws, lu_ok;
	int k;

	if (size < 18)
		return 0;
	flags = (uint8_t)fuzz_take(&p, &n, 1);
	lu.size = fuzz_take(&p, &n, 8);
	lu.max_xfer_blocks = (uint32_t)fuzz_take(&p, &n, 4);
	xfer = (uint32_t)fuzz_take(&p, &n, 4);
	cdb_len = (uint32_t)fuzz_take(&p, &n, 1) % 33;
	lu.block = blocks[flags & 3];
	lu.ready = flags & 0x04;
	lu.thin = flags & 0x08;
	lu.write_cache = flags & 0x10;
	lu.target_name = (flags & 0x20) ? long_name : NULL;
	lu.phys_block = (flags & 0x80) ? 4096 : 0;
	lu.ntpg = (lu.max_xfer_blocks >> 30) % 3;
	lu.swp = (lu.max_xfer_blocks >> 29) & 1;
	lu.tpg[0].id = 2;
	lu.tpg[0].port = 2;
	lu.tpg[0].access = lu.ready ? SCSI_ALUA_OPTIMIZED : SCSI_ALUA_STANDBY;
	lu.tpg[1].id = 1;
	lu.tpg[1].port = 1;
	lu.tpg[1].access = (uint8_t)((lu.max_xfer_blocks >> 27) & 3);
	lu_ok = (flags & 3) != 3; /* 1000 is not a valid block size */
	lu.vendor = "TANDEM";
	lu.product = "fuzz\x01volume-name-too-long";
	lu.serial = long_name;
	memset(lu.naa, 0x6a, sizeof(lu.naa));

	if (cdb_len > n)
		cdb_len = (uint32_t)n;
	cdb = malloc(cdb_len ? cdb_len : 1); /* exact size: ASan sees an overread */
	r = malloc(sizeof(*r));
	r2 = malloc(sizeof(*r2));
	ext = malloc((SCSI_UNMAP_MAX_DESC + 1) * sizeof(*ext));
	CHECK(cdb && r && r2 && ext);
	memcpy(cdb, p, cdb_len);
	p += cdb_len;
	n -= cdb_len;
	max = (unsigned)fuzz_take(&p, &n, 1);
	list_len = (uint32_t)n;
	list = malloc(list_len ? list_len : 1);
	CHECK(list);
	memcpy(list, p, list_len);

	const struct scsi_lu *lup = (flags & 0x40) ? NULL : &lu;
	memset(r, 0x5a, sizeof(*r));
	scsi_exec(lup, cdb, cdb_len, xfer, r);
	alloc = alloc_len(cdb, cdb_len);
	ws = is_write_same(cdb, cdb_len);
	if (ws) { /* WRITE SAME 10/16: the range, decoded here */
		bool ten = cdb[0] == SCSI_WRITE_SAME_10;
		ws_lba = ten ? be(cdb + 2, 4) : be(cdb + 2, 8);
		ws_n = ten ? be(cdb + 7, 2) : be(cdb + 10, 4);
	}
	if (r->kind == SCSI_DONE) {
		check_done(r);
		CHECK(r->data_len <= alloc);
		/* nothing of an I/O is left behind (a refused PERSISTENT RESERVE
		 * OUT or EXTENDED COPY keeps its xop, which DONE makes moot) */
		CHECK(r->data_out_len == 0 && r->data_in_len == 0 && !r->needs_params);
		CHECK((r->xop == SCSI_XOP_NONE || stateful(r->xop)) && !r->pattern);
		/* exact_out when done: no data-out may come (COMPARE AND WRITE of 0) */
		CHECK(!r->exact_out ||
		      (r->status == SCSI_GOOD && cdb[0] == SCSI_COMPARE_AND_WRITE));
		/* WRITE SAME of 0 blocks is GOOD without I/O only at the end */
		if (ws && ws_n == 0 && r->status == SCSI_GOOD)
			CHECK(lu_ok && ws_lba == lu.size / lu.block);
	} else {
		CHECK(r->kind == SCSI_IO);
		CHECK(lup);
		/* volume I/O only when ready (MODE SELECT's list, PERSISTENT
		 * RESERVE IN and SET TARGET PORT GROUPS are not volume I/O) */
		CHECK(lu.ready || r->op == BS_OP_MAX);
		CHECK(r->status == SCSI_GOOD && r->data_len == 0);
		CHECK(r->xop == want_xop(cdb));
		CHECK(!r->pattern); /* only scsi_params() sees the block */
		if (stateful(r->xop)) {
			/* the parameter list, if any, is the module's to check; the
			 * expected transfer is not looked at */
			CHECK(r->op == BS_OP_MAX && !r->needs_params && !r->exact_out);
			CHECK(r->data_in_len == 0 && r->data_out_len <= SCSI_PARAM_MAX);
			if (cdb[0] == SCSI_PERSISTENT_RESERVE_OUT)
				CHECK(r->data_out_len == be(cdb + 5, 4));
			else if (cdb[0] == SCSI_EXTENDED_COPY)
				CHECK(r->data_out_len == be(cdb + 10, 4));
			else if (cdb[0] == SCSI_MAINTENANCE_OUT)
				CHECK(r->data_out_len == be(cdb + 6, 4) && r->data_out_len <= xfer);
			else
				CHECK(r->data_out_len == 0);
		} else if (r->needs_params) {
			CHECK(r->data_out_len <= xfer);
			CHECK(r->data_out_len > 0 && r->xop == SCSI_XOP_NONE);
			/* WRITE SAME: exactly one block; the other lists: up to xfer */
			CHECK(r->exact_out == ws);
			if (ws)
				CHECK(r->data_out_len == lu.block);
		} else {
			CHECK(r->op < BS_OP_MAX && r->data_out_len <= xfer);
			check_range(&lu, r->off, r->len);
			if (r->op == BS_READ) {
				CHECK(r->len > 0 && !r->exact_out);
				if (r->xop == SCSI_XOP_NONE) /* READ */
					CHECK(r->data_in_len == r->len && r->data_out_len == 0);
				else if (r->xop == SCSI_XOP_VERIFY) /* BYTCHK 01 */
					CHECK(r->data_out_len == r->len && r->data_in_len == 0);
				else /* BYTCHK 11: one block compared with each */
					CHECK(r->xop == SCSI_XOP_VERIFY_SAME &&
					      r->data_in_len == 0 && r->data_out_len == lu.block);
			} else if (r->op == BS_WRITE) {
				CHECK(r->len > 0 && r->data_in_len == 0);
				if (r->xop == SCSI_XOP_CAW) {
					CHECK(r->data_out_len == 2 * r->len && r->exact_out);
					CHECK(r->len / lu.block <= SCSI_CAW_MAX_BLOCKS);
					CHECK(r->off == be(cdb + 2, 8) * lu.block);
					CHECK(r->len == (uint64_t)cdb[13] * lu.block);
				} else {
					CHECK(r->xop == SCSI_XOP_NONE ||
					      r->xop == SCSI_XOP_ORWRITE);
					CHECK(r->data_out_len == r->len && !r->exact_out);
				}
				if (cdb[0] == SCSI_WRITE_VERIFY_10 ||
				    cdb[0] == SCSI_WRITE_VERIFY_12 ||
				    cdb[0] == SCSI_WRITE_VERIFY_16)
					CHECK(r->fua);
			} else {
				CHECK(r->data_out_len == 0 && r->data_in_len == 0);
				CHECK(r->xop == SCSI_XOP_NONE && !r->exact_out);
			}
			/* COMPARE AND WRITE too: its maximum is never above this one */
			if ((r->op == BS_READ || r->op == BS_WRITE) && lu.max_xfer_blocks)
				CHECK(r->len / lu.block <= lu.max_xfer_blocks);
		}
		if (ws) { /* NDOB or not: the LBA, and 0 blocks reach the end */
			CHECK(r->off == ws_lba * lu.block);
			if (ws_n)
				CHECK(r->len == ws_n * lu.block);
			else
				CHECK(r->off + r->len == lu.size / lu.block * lu.block);
		}
		/* the caller's I/O result, whatever it is */
		memcpy(r2, r, sizeof(*r2));
		scsi_error(r2, -(int)(list_len ? list[0] : 5));
		check_done(r2);
		CHECK(r2->data_len == 0);
		/* a compare that failed at some byte of the data-out */
		if (r->xop == SCSI_XOP_VERIFY || r->xop == SCSI_XOP_VERIFY_SAME ||
		    r->xop == SCSI_XOP_CAW) {
			uint32_t at = xfer % r->data_out_len;

			memcpy(r2, r, sizeof(*r2));
			scsi_miscompare(r2, at);
			check_done(r2);
			CHECK(r2->status == SCSI_CHECK_CONDITION && r2->sense[0] == 0xf0);
			CHECK(scsi_sense_key(r2->sense, r2->sense_len) == SCSI_KEY_MISCOMPARE);
			CHECK(scsi_sense_asc(r2->sense, r2->sense_len) ==
			      SCSI_ASC_MISCOMPARE_VERIFY);
			CHECK(be(r2->sense + 3, 4) == at);
		}
	}

	/* software write protect: nothing that changes the medium goes out */
	if (lup && lu.swp && r->kind == SCSI_IO)
		CHECK(r->op != BS_WRITE && r->op != BS_TRIM && r->op != BS_ZERO &&
		      r->xop != SCSI_XOP_XCOPY);

	/* SET TARGET PORT GROUPS, for any CDB */
	memset(r2, 0xa5, sizeof(*r2));
	k = scsi_stpg(lup, cdb, cdb_len, list, list_len, r2);
	if (k <= 0) {
		check_done(r2);
		CHECK(k == 0 ? r2->status == SCSI_GOOD : r2->status == SCSI_CHECK_CONDITION);
	} else {
		CHECK(lup && cdb[0] == SCSI_MAINTENANCE_OUT && lu.ntpg >= 1);
		CHECK((k == lu.tpg[0].id && lu.tpg[0].access != SCSI_ALUA_OPTIMIZED) ||
		      (lu.ntpg == 2 && k == lu.tpg[1].id &&
		       lu.tpg[1].access != SCSI_ALUA_OPTIMIZED));
	}

	/* The parameter list path, for any CDB. */
	if (max > SCSI_UNMAP_MAX_DESC + 1)
		max = SCSI_UNMAP_MAX_DESC + 1;
	memset(r2, 0xa5, sizeof(*r2));
	k = scsi_params(lup, cdb, cdb_len, list, list_len, ext, max, r2);
	if (k <= 0) {
		check_done(r2);
		CHECK(k == 0 ? r2->status == SCSI_GOOD : r2->status == SCSI_CHECK_CONDITION);
		CHECK(r2->data_len <= alloc);
		CHECK(r2->swp < 0 ||
		      (k == 0 && (cdb[0] == SCSI_MODE_SELECT_6 || cdb[0] == SCSI_MODE_SELECT_10)));
	} else {
		/* (r may differ: scsi_params decodes with no expected-length limit) */
		CHECK(r2->kind == SCSI_IO && (unsigned)k <= max);
		CHECK(r2->xop == SCSI_XOP_NONE);
		if (ws) /* a pattern exactly when the block is not all zero */
			CHECK(r2->pattern == !all_zero(list, lu.block));
		if (r2->pattern) /* the block written over the command's range */
			CHECK(ws && r2->op == BS_WRITE && k == 1 && ext[0].off == r2->off &&
			      ext[0].len == r2->len);
		else
			CHECK(r2->op == BS_TRIM || r2->op == BS_ZERO);
		for (int i = 0; i < k; i++) {
			CHECK(ext[i].len > 0);
			check_range(&lu, ext[i].off, ext[i].len);
		}
	}

	free(list);
	free(ext);
	free(r2);
	free(r);
	free(cdb);
	return 0;
}
