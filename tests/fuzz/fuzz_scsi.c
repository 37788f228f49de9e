/* libFuzzer harness for the SCSI command layer: every byte an initiator
 * controls (CDB, its length, the expected transfer length, the data-out
 * parameter list) and the logical unit the caller describes. Input layout:
 *   [0]      flags: bits 0-1 block (512, 4096, 1024, invalid), 2 ready,
 *            3 thin, 4 write cache, 5 target name, 6 no such LUN, 7 4K physical
 *   [1..8]   size in bytes (big-endian)   [9..12]  max_xfer_blocks
 *   [13..16] expected transfer length     [17]     CDB length (0..32)
 *   CDB, then one byte `max` (extents the caller has room for), then the
 *   parameter list (the rest).
 * Properties: data_len never exceeds sizeof(data) nor the CDB's allocation
 * length (computed here independently); a CHECK CONDITION carries 18 bytes of
 * fixed sense, anything else none; an I/O stays inside the volume, in whole
 * blocks, within the expected transfer (writes) and the block limits; the
 * extents of scsi_params() likewise; scsi_error() gives a known status.
 * A violated property calls abort() so that libFuzzer keeps the input. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/scsi/scsi.h"

#include "fuzz.h"

static uint64_t take(const uint8_t **p, size_t *n, unsigned bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++) {
		v = v << 8 | (*n ? **p : 0);
		if (*n) {
			(*p)++;
			(*n)--;
		}
	}
	return v;
}

static uint32_t be(const uint8_t *p, unsigned bytes)
{
	uint32_t v = 0;
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
		return len >= 12 ? be(cdb + 6, 4) : 0;
	default:
		return 0;
	}
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
		CHECK(r->sense[0] == 0x70 && r->sense[7] == 10);
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
	unsigned max;
	int k;

	if (size < 18)
		return 0;
	flags = (uint8_t)take(&p, &n, 1);
	lu.size = take(&p, &n, 8);
	lu.max_xfer_blocks = (uint32_t)take(&p, &n, 4);
	xfer = (uint32_t)take(&p, &n, 4);
	cdb_len = (uint32_t)take(&p, &n, 1) % 33;
	lu.block = blocks[flags & 3];
	lu.ready = flags & 0x04;
	lu.thin = flags & 0x08;
	lu.write_cache = flags & 0x10;
	lu.target_name = (flags & 0x20) ? long_name : NULL;
	lu.phys_block = (flags & 0x80) ? 4096 : 0;
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
	max = (unsigned)take(&p, &n, 1);
	list_len = (uint32_t)n;
	list = malloc(list_len ? list_len : 1);
	CHECK(list);
	memcpy(list, p, list_len);

	const struct scsi_lu *lup = (flags & 0x40) ? NULL : &lu;
	memset(r, 0x5a, sizeof(*r));
	scsi_exec(lup, cdb, cdb_len, xfer, r);
	alloc = alloc_len(cdb, cdb_len);
	if (r->kind == SCSI_DONE) {
		check_done(r);
		CHECK(r->data_len <= alloc);
	} else {
		CHECK(r->kind == SCSI_IO);
		CHECK(lup);
		/* volume I/O only when ready (MODE SELECT's list is not volume I/O) */
		CHECK(lu.ready || (r->needs_params && r->op == BS_OP_MAX));
		CHECK(r->status == SCSI_GOOD && r->data_len == 0);
		if (r->needs_params) {
			CHECK(r->data_out_len > 0 && r->data_out_len <= xfer);
		} else {
			CHECK(r->op < BS_OP_MAX);
			check_range(&lu, r->off, r->len);
			if (r->op == BS_READ) {
				CHECK(r->len > 0 && r->data_in_len == r->len && r->data_out_len == 0);
			} else if (r->op == BS_WRITE) {
				CHECK(r->len > 0 && r->data_out_len == r->len);
				CHECK(r->data_out_len <= xfer && r->data_in_len == 0);
			} else {
				CHECK(r->data_out_len == 0 && r->data_in_len == 0);
			}
			if ((r->op == BS_READ || r->op == BS_WRITE) && lu.max_xfer_blocks)
				CHECK(r->len / lu.block <= lu.max_xfer_blocks);
		}
		/* the caller's I/O result, whatever it is */
		memcpy(r2, r, sizeof(*r2));
		scsi_error(r2, -(int)(list_len ? list[0] : 5));
		check_done(r2);
		CHECK(r2->data_len == 0);
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
	} else {
		/* (r may differ: scsi_params decodes with no expected-length limit) */
		CHECK(r2->kind == SCSI_IO && (unsigned)k <= max);
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
