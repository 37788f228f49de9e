/* libFuzzer harness for EXTENDED COPY / RECEIVE COPY RESULTS (src/scsi/xcopy.c):
 * every byte an initiator controls (both CDBs, the parameter list and its
 * length against the CDB's) and the LU and held result the caller describes.
 * Input layout:
 *   [0]      flags: bits 0-1 block (512, 4096, 1024, invalid 1000), 2 ready,
 *            3 no such LUN, 4 stamp our NAA designator into every 32-byte
 *            slot of the target list, 5 stamp our block length there, 6 make the
 *            EXTENDED COPY CDB announce exactly the list, 7 hold a result
 *   [1..8]   LU size in bytes          [9]  segment slots the caller has
 *   [10..25] EXTENDED COPY CDB         [26..41] RECEIVE COPY RESULTS CDB
 *   [42]     held: bit 0 done, 1 failed, 2 pass NULL   [43] held list id
 *   [44..45] segments processed        [46..53] bytes copied
 *   then the parameter list (the rest).
 * The stamps let random lists get past the identity check, which a mutation
 * would almost never hit by chance (16 bytes of NAA).
 * Properties: a returned segment is non-empty, whole blocks, inside the LU,
 * at most XCOPY_MAX_SEG_BYTES, and there are at most max of them (seg[] is
 * exactly max long, so ASan sees a write past it); segments only for a
 * usable, ready LU and a non-empty list; every answer is DONE with GOOD or
 * with 18 bytes of fixed sense; data_len never exceeds the allocation length
 * nor sizeof(data); the announced list length is what the CDB says and never
 * above XCOPY_MAX_LIST. A violated property calls abort(). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/scsi/scsi.h"
#include "../../src/scsi/xcopy.h"

#include "fuzz.h"

static void takev(const uint8_t **p, size_t *n, uint8_t *to, size_t len)
{
	for (size_t i = 0; i < len; i++)
		to[i] = (uint8_t)fuzz_take(p, n, 1);
}

static uint32_t be(const uint8_t *p, unsigned bytes)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

static void check_done(const struct scsi_req *r)
{
	CHECK(r->kind == SCSI_DONE);
	CHECK(r->status == SCSI_GOOD || r->status == SCSI_CHECK_CONDITION);
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

static bool lu_usable(const struct scsi_lu *lu)
{
	return lu && lu->block >= 512 && lu->block <= 65536 && !(lu->block & (lu->block - 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t blocks[] = { 512, 4096, 1024, 1000 };
	static const uint8_t naa[16] = { 0x60, 0x01, 0x40, 0x50, 0x11, 0x22, 0x33, 0x44,
					 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc };
	const uint8_t *p = data;
	size_t n = size;
	struct scsi_lu lu = { 0 };
	struct xcopy_status st = { 0 };
	struct xcopy_seg *seg;
	struct scsi_req *r;
	uint8_t flags, held, *cdb, *rcr, *list, list_id = 0xee;
	uint32_t list_len, alloc;
	unsigned max;
	int64_t plen;
	int k;

	if (size < 10)
		return 0;
	flags = (uint8_t)fuzz_take(&p, &n, 1);
	lu.size = fuzz_take(&p, &n, 8);
	max = (unsigned)fuzz_take(&p, &n, 1) % (XCOPY_MAX_SEG_DESC + 3);
	lu.block = blocks[flags & 3];
	lu.ready = flags & 0x04;
	lu.vendor = "TANDEM";
	lu.product = "fuzz";
	memcpy(lu.naa, naa, sizeof(naa));

	cdb = malloc(16); /* exact sizes: ASan sees an overread */
	rcr = malloc(16);
	r = malloc(sizeof(*r));
	seg = malloc((max ? max : 1) * sizeof(*seg));
	CHECK(cdb && rcr && r && seg);
	takev(&p, &n, cdb, 16);
	takev(&p, &n, rcr, 16);
	held = (uint8_t)fuzz_take(&p, &n, 1);
	st.valid = flags & 0x80;
	st.done = held & 1;
	st.failed = held & 2;
	st.list_id = (uint8_t)fuzz_take(&p, &n, 1);
	st.segments_processed = (uint16_t)fuzz_take(&p, &n, 2);
	st.bytes = fuzz_take(&p, &n, 8);
	list_len = (uint32_t)n;
	list = malloc(list_len ? list_len : 1);
	CHECK(list);
	memcpy(list, p, list_len);

	if (flags & 0x30 && list_len >= 4) {
		uint32_t end = 16 + be(list + 2, 2);

		for (uint32_t off = 16; off + 32 <= end && off + 32 <= list_len; off += 32) {
			if (flags & 0x10) { /* binary, LU, NAA, 16 bytes */
				memcpy(list + off + 4, "\x01\x03\x00\x10", 4);
				memcpy(list + off + 8, naa, 16);
			}
			if (flags & 0x20) {
				list[off + 29] = (uint8_t)(lu.block >> 16);
				list[off + 30] = (uint8_t)(lu.block >> 8);
				list[off + 31] = (uint8_t)lu.block;
			}
		}
	}
	if (flags & 0x40) {
		cdb[0] = SCSI_EXTENDED_COPY;
		cdb[1] &= 0xe0;
		cdb[10] = (uint8_t)(list_len >> 24);
		cdb[11] = (uint8_t)(list_len >> 16);
		cdb[12] = (uint8_t)(list_len >> 8);
		cdb[13] = (uint8_t)list_len;
	}
	const struct scsi_lu *lup = (flags & 0x08) ? NULL : &lu;

	memset(r, 0xa5, sizeof(*r));
	plen = xcopy_cdb_len(cdb, r);
	if (plen < 0) {
		check_done(r);
		CHECK(r->status == SCSI_CHECK_CONDITION);
	} else {
		CHECK(plen == be(cdb + 10, 4) && plen <= XCOPY_MAX_LIST);
	}

	memset(r, 0x5a, sizeof(*r));
	k = xcopy_parse(lup, cdb, list, list_len, seg, max, &list_id, r);
	check_done(r);
	CHECK(r->data_len == 0);
	CHECK(k >= -1 && k <= (int)max && k <= XCOPY_MAX_SEG_DESC);
	CHECK(k < 0 ? r->status == SCSI_CHECK_CONDITION : r->status == SCSI_GOOD);
	if (plen < 0)
		CHECK(k < 0);
	if (k >= 0 && plen >= 16)
		CHECK(list_len >= plen && list_id == list[0]);
	if (k > 0) {
		uint64_t usable;

		CHECK(lup && lu_usable(lup) && lu.ready && plen > 0);
		usable = lu.size / lu.block * lu.block;
		for (int i = 0; i < k; i++) {
			CHECK(seg[i].len > 0 && seg[i].len <= XCOPY_MAX_SEG_BYTES);
			CHECK(seg[i].len % lu.block == 0);
			CHECK(seg[i].src_off % lu.block == 0 && seg[i].dst_off % lu.block == 0);
			CHECK(seg[i].src_off <= usable && seg[i].len <= usable - seg[i].src_off);
			CHECK(seg[i].dst_off <= usable && seg[i].len <= usable - seg[i].dst_off);
		}
	}
	(void)xcopy_hold(list, list_len);

	memset(r, 0xa5, sizeof(*r));
	alloc = be(rcr + 10, 4);
	xcopy_results(lup, rcr, (held & 4) ? NULL : &st, r);
	check_done(r);
	CHECK(r->data_len <= alloc);
	if (r->status == SCSI_GOOD) {
		CHECK(lup && rcr[0] == SCSI_RECEIVE_COPY_RESULTS);
		if ((rcr[1] & 0x1f) == XCOPY_RCR_OP_PARAMS)
			CHECK(r->data_len == (alloc < 47 ? alloc : 47));
		else
			CHECK((rcr[1] & 0x1f) == XCOPY_RCR_COPY_STATUS && !(held & 4) && st.valid &&
			      st.list_id == rcr[2] && r->data_len == (alloc < 12 ? alloc : 12));
	}

	free(list);
	free(seg);
	free(r);
	free(rcr);
	free(cdb);
	return 0;
}
