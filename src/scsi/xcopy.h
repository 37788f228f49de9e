/* EXTENDED COPY (LID1, opcode 83h service action 00h) and RECEIVE COPY RESULTS
 * (opcode 84h: COPY STATUS 00h, OPERATING PARAMETERS 03h), SPC-4, with the one
 * logical unit as the only copy target. Owns: checking a copy parameter list
 * and turning it into byte ranges of that LU, and the RECEIVE COPY RESULTS
 * data. Pure: never does I/O, never keeps state (the last copy's result is the
 * caller's struct xcopy_status), never trusts a length from the initiator,
 * never writes sense bytes itself (scsi_check() and friends in scsi.c do).
 *
 * Calling sequence (src/scsi/lu.c and exec.c):
 *   plen = xcopy_cdb_len(cdb, &req);  < 0: req is DONE (bad CDB, list too long)
 *   receive plen bytes (the command's expected transfer length must cover it)
 *   n = xcopy_parse(lu, cdb, buf, got, seg, XCOPY_MAX_SEG_DESC, &id, &req);
 *   n < 0:  req is DONE with CHECK CONDITION; hold nothing
 *   n == 0: req is DONE with GOOD (no list, or only empty segments)
 *   n > 0:  copy seg[0..n) in order, each [src_off, src_off + len) to
 *           [dst_off, dst_off + len); then scsi_error(&req, res). When
 *           xcopy_hold(buf, got), keep { valid, id, done, failed, segments
 *           processed, bytes } for RECEIVE COPY RESULTS.
 *   RECEIVE COPY RESULTS: xcopy_results(lu, cdb, &held, &req), always DONE.
 *
 * Rules:
 *   1. Checks run in this order, the first failure answers (as in scsi.c):
 *      the CDB (INVALID FIELD IN CDB); LU missing (25/00), unusable (HARDWARE
 *      ERROR 44/00) or not ready (NOT READY 04/0B); PARAMETER LIST LENGTH 0:
 *      GOOD, nothing to do; the list shorter than the CDB says or than its
 *      header, header + target list + segment list + inline data longer than
 *      the list, or target + segment lists above XCOPY_MAX_DESC_LIST:
 *      PARAMETER LIST LENGTH ERROR 1A/00; inline data (we advertise none),
 *      LIST ID USAGE 01b, or 11b with a non-zero LIST IDENTIFIER: INVALID
 *      FIELD IN PARAMETER LIST; more than XCOPY_MAX_TGT_DESC target
 *      descriptors: 26/06; a target type other than E4h: 26/07 (one whose
 *      length we cannot know answers where it stands); more than
 *      min(max, XCOPY_MAX_SEG_DESC) segment descriptors: 26/08; a segment type
 *      other than 02h/0Ah: 26/09; then each target descriptor, then each
 *      segment descriptor, in list order.
 *   2. Every target descriptor must name this LU: designator NAA, binary,
 *      associated with the LU, 16 bytes equal to lu->naa. Anything else, and a
 *      segment's target index past the target list, is COPY ABORTED 0D/02
 *      COPY TARGET DEVICE NOT REACHABLE (what libiscsi's ExtendedCopy tests
 *      accept). Naming this LU with a peripheral type other than 00h or a
 *      DISK BLOCK LENGTH other than lu->block is INVALID FIELD IN PARAMETER
 *      LIST (a wrong block length would copy the wrong bytes). The LU ID TYPE
 *      and NUL bits are obsolete in SPC-4 and ignored.
 *   3. A segment outside the LU is COPY ABORTED 00/00 (libiscsi accepts only
 *      00/00, 08/04 or 0D/02 there, not LBA OUT OF RANGE). A segment above
 *      XCOPY_MAX_SEG_BYTES, or a 0Ah segment with a byte offset or a byte
 *      count that is not whole blocks, is INVALID FIELD IN PARAMETER LIST.
 *   4. Returned segments are whole blocks, inside the LU, 0 < len <=
 *      XCOPY_MAX_SEG_BYTES, at most max of them; empty segments are dropped.
 *      All are checked before any is returned: all or none run.
 *   5. Source and destination may overlap (one LU): the caller copies like
 *      memmove (backwards in chunks when dst_off > src_off), and in list
 *      order, since a later segment may read what an earlier one wrote.
 *   6. RECEIVE COPY RESULTS data is cut to the allocation length; an unknown
 *      service action, or COPY STATUS for a list identifier we do not hold,
 *      is INVALID FIELD IN CDB. The held result is per I_T nexus in SPC-4;
 *      keep it per session (a new login starts with none), not per LU. */
#ifndef TANDEM_SCSI_XCOPY_H
#define TANDEM_SCSI_XCOPY_H

#include <stdbool.h>
#include <stdint.h>

#include "scsi.h"

/* Operation codes and the sense key, unless scsi.h (included above) has
 * taken them over for its command table: no redefinition under -Werror. */
#ifndef SCSI_EXTENDED_COPY
#define SCSI_EXTENDED_COPY 0x83
#endif
#ifndef SCSI_RECEIVE_COPY_RESULTS
#define SCSI_RECEIVE_COPY_RESULTS 0x84
#endif
#ifndef SCSI_KEY_COPY_ABORTED
#define SCSI_KEY_COPY_ABORTED 0xa
#endif
#define XCOPY_SA_LID1 0x00
#define XCOPY_RCR_COPY_STATUS 0x00
#define XCOPY_RCR_OP_PARAMS 0x03

/* ASC << 8 | ASCQ that scsi.h does not have. */
#define XCOPY_ASC_NONE 0x0000              /* no additional sense information */
#define XCOPY_ASC_OP_IN_PROGRESS 0x0016    /* for the caller: list id in use */
#define XCOPY_ASC_TARGET_UNREACHABLE 0x0d02 /* copy target device not reachable */
#define XCOPY_ASC_TOO_MANY_TGT 0x2606      /* too many target descriptors */
#define XCOPY_ASC_UNSUPP_TGT 0x2607        /* unsupported target descriptor type code */
#define XCOPY_ASC_TOO_MANY_SEG 0x2608      /* too many segment descriptors */
#define XCOPY_ASC_UNSUPP_SEG 0x2609        /* unsupported segment descriptor type code */

/* Descriptor type codes we implement (advertised in OPERATING PARAMETERS). */
#define XCOPY_SEG_B2B 0x02      /* block -> block, NUMBER OF BLOCKS (16 bit) */
#define XCOPY_SEG_B2B_OFF 0x0a  /* block<o> -> block<o>, byte count (32 bit) */
#define XCOPY_TGT_ID 0xe4       /* identification descriptor target */

/* Limits, advertised in OPERATING PARAMETERS and enforced. A segment is one
 * contiguous copy the caller runs to completion: 16 MiB bounds that work and
 * still takes libiscsi's 2048-block copies with blocks up to 8 KiB. The
 * descriptor list limit comfortably holds 2 target (32 bytes) + 8 segment
 * (at most 32 bytes) descriptors; XCOPY_MAX_LIST is the largest parameter
 * list (header + descriptors, no inline data) the transport must receive. */
#define XCOPY_MAX_TGT_DESC 2
#define XCOPY_MAX_SEG_DESC 8
#define XCOPY_MAX_SEG_BYTES (16u << 20)
#define XCOPY_MAX_DESC_LIST 1024u
#define XCOPY_HDR_LEN 16u
#define XCOPY_MAX_LIST (XCOPY_HDR_LEN + XCOPY_MAX_DESC_LIST)
#define XCOPY_MAX_CONCURRENT 1 /* one held result: TOTAL/MAXIMUM CONCURRENT COPIES */

struct xcopy_seg {
	uint64_t src_off, dst_off, len; /* bytes, in the one LU */
};

/* The PARAMETER LIST LENGTH of EXTENDED COPY cdb (16 bytes), for the
 * transport to receive; 0 = none. Returns -1 with out DONE on a bad CDB
 * (opcode, service action other than LID1, NACA/LINK: INVALID FIELD IN CDB) or
 * a list longer than XCOPY_MAX_LIST (PARAMETER LIST LENGTH ERROR). */
int64_t xcopy_cdb_len(const uint8_t *cdb, struct scsi_req *out);

/* Checks the EXTENDED COPY parameter list param[0..len) received for cdb (16
 * bytes) against lu, the only copy target (rules 1-5 above). Returns n > 0
 * segments in seg[0..n) (n <= max; max should be XCOPY_MAX_SEG_DESC), 0 with
 * out GOOD when there is nothing to copy, or -1 with out CHECK CONDITION.
 * On n > 0 out is DONE with GOOD; the caller replaces it with scsi_error()
 * after the copy.
 * *list_id (may be NULL) gets the LIST IDENTIFIER, 0 without a header. */
int xcopy_parse(const struct scsi_lu *lu, const uint8_t *cdb, const uint8_t *param,
		uint32_t len, struct xcopy_seg *seg, unsigned max, uint8_t *list_id,
		struct scsi_req *out);

/* True when the list's LIST ID USAGE (00b) asks the copy manager to hold the
 * result for RECEIVE COPY RESULTS; 10b and 11b do not. param/len as given to
 * xcopy_parse(); meaningful only after it returned >= 0. */
bool xcopy_hold(const uint8_t *param, uint32_t len);

/* The last copy's result, kept by the caller (rule 6). done: the copy ended;
 * failed: it ended with an error; bytes: bytes copied so far. */
struct xcopy_status {
	bool valid;
	uint8_t list_id;
	bool done;
	bool failed;
	uint16_t segments_processed;
	uint64_t bytes;
};

/* RECEIVE COPY RESULTS cdb (16 bytes): OPERATING PARAMETERS (the limits
 * above, the implemented descriptor codes), COPY STATUS for the CDB's list
 * identifier from st (NULL or !valid: nothing held); anything else INVALID
 * FIELD IN CDB. Always fills out completely. */
void xcopy_results(const struct scsi_lu *lu, const uint8_t *cdb,
		   const struct xcopy_status *st, struct scsi_req *out);

#endif
