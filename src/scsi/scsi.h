/* SCSI command layer (SPC-4 primary commands, SBC-3 block commands) for one
 * logical unit, independent of the transport. Pure: decodes a CDB against a
 * struct scsi_lu and either answers it completely (data-in or status + sense)
 * or says which volume I/O the caller performs. Never does I/O, never keeps
 * state between commands, never trusts a length from the initiator.
 * The one place that writes sense bytes is sense_fixed() in scsi.c; the one place
 * that maps an -errno to status + sense is scsi_error().
 *
 * Calling sequence (src/scsi/lu.c decodes, exec.c runs the I/O):
 *   scsi_exec(lu, cdb, cdb_len, edtl, &req);
 *   DONE                  -> send req.data[0..data_len) (the caller also caps
 *                            it at edtl and reports the residual), req.status,
 *                            req.sense; drain any data-out the initiator sends.
 *   IO, !needs_params     -> receive data_out_len bytes (WRITE), run op on
 *                            [off, off+len) (FUA when fua), then
 *                            scsi_error(&req, res) and send as DONE (for READ
 *                            the data-in is the caller's buffer, data_in_len).
 *                            xop != NONE: the compare / merge step of enum
 *                            scsi_xop around op; a miscompare is
 *                            scsi_miscompare(&req, first differing byte).
 *                            exact_out: an expected length other than
 *                            data_out_len is refused (also when DONE).
 *   IO, needs_params      -> receive data_out_len bytes, then
 *                            n = scsi_params(lu, cdb, cdb_len, buf, got, ext,
 *                                                max, &req);
 *                            n > 0: run op on each extent, then scsi_error();
 *                            n <= 0: req is DONE (GOOD, or CHECK CONDITION).
 *
 * Commands (everything else: ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE):
 *   0x00 TEST UNIT READY          GOOD, or NOT READY 04/0B when !ready
 *   0x03 REQUEST SENSE            fixed format only (DESC=1: INVALID FIELD);
 *                                 NO SENSE, or NOT READY 04/0B when !ready
 *   0x12 INQUIRY                  standard data (TPGS 11b: implicit and
 *                                 explicit ALUA); VPD 0x00 0x80 0x83 0xB0 0xB1
 *                                 0xB2; 0x83 holds the NAA id, the target name,
 *                                 the relative target port and the target port
 *                                 group of this node (tpg[0])
 *   0x1A/0x5A MODE SENSE 6/10     pages 0x08 caching (WCE), 0x0A control (SWP
 *                                 changeable), 0x1C informational exceptions,
 *                                 0x3F all; DBD, LLBAA; PC current/changeable/
 *                                 default; saved: 39/00. The header's WP bit
 *                                 is SWP.
 *   0x15/0x55 MODE SELECT 6/10    PF=1, SP=0 only. Accepted when it changes
 *                                 nothing but SWP (pages equal to the current
 *                                 values, block descriptor with our block
 *                                 length); scsi_params() then gives the new
 *                                 SWP in req.swp for the caller to keep;
 *                                 anything else: INVALID FIELD IN PARAMETER LIST
 *   0xA3/0x0A REPORT TARGET PORT GROUPS  lu->tpg[0..ntpg): length-only or
 *                                 extended header (PARAMETER DATA FORMAT 0, 1)
 *   0xA4/0x0A SET TARGET PORT GROUPS     -> SCSI_IO, xop STPG, needs the
 *                                 parameter list: scsi_stpg() says which group
 *                                 is to be active/optimized, the caller makes
 *                                 that node primary (a planned switchover)
 *   0x1B START STOP UNIT          GOOD, no effect
 *   0x25 READ CAPACITY 10         last LBA capped at 0xFFFFFFFF
 *   0x9E/0x10 READ CAPACITY 16    LBPME when thin, physical block exponent
 *   0x9E/0x12 GET LBA STATUS      one descriptor: "mapped" from the LBA to the
 *                                 end of the medium (at most 2^32-1 blocks)
 *   0x08/0x28/0xA8/0x88 READ 6/10/12/16         -> BS_READ
 *   0x0A/0x2A/0xAA/0x8A WRITE 6/10/12/16        -> BS_WRITE (FUA; DPO ignored)
 *   0x2E/0xAE/0x8E WRITE AND VERIFY 10/12/16    -> BS_WRITE with FUA (what is
 *                                 compared is what was just written); BYTCHK
 *                                 1x: INVALID FIELD IN CDB
 *   0x2F/0xAF/0x8F VERIFY 10/12/16  BYTCHK=00: GOOD without I/O after the
 *                                 range check; 01: -> BS_READ, xop VERIFY,
 *                                 data-out n blocks compared with the range;
 *                                 11: -> BS_READ, xop VERIFY_SAME, data-out one
 *                                 block compared with each block; data_in_len
 *                                 0; 10: INVALID FIELD IN CDB. 0 blocks: GOOD
 *   0x89 COMPARE AND WRITE        -> BS_WRITE of the n blocks (byte 13, at most
 *                                 SCSI_CAW_MAX_BLOCKS, VPD B0 byte 5), xop CAW:
 *                                 data-out 2n blocks, compared with the first n,
 *                                 the second n written when equal; exact_out;
 *                                 FUA. n 0: GOOD, exact_out with no data-out
 *   0x8B ORWRITE 16               -> BS_WRITE, xop ORWRITE (the data-out ORed
 *                                 into the range under a range lock); FUA
 *   0x35/0x91 SYNCHRONIZE CACHE 10/16           -> BS_FLUSH of the whole volume
 *                                 (off/len carry the requested range; IMMED is
 *                                 honoured by completing after the flush)
 *   0x34/0x90 PRE-FETCH 10/16     GOOD after the range check, no I/O
 *   0x37/0xB7 READ DEFECT DATA 10/12  an empty list: the header with the
 *                                 PLISTV/GLISTV and format bits asked for
 *   0x42 UNMAP                    only when thin (else invalid opcode);
 *                                 needs_params -> BS_TRIM per descriptor
 *   0x41/0x93 WRITE SAME 10/16    needs_params (one block, exact_out); NDOB
 *                                 (16) needs no data. UNMAP bit (thin only)
 *                                 -> BS_TRIM, else BS_ZERO; a block that is not
 *                                 all zero: scsi_params() makes op BS_WRITE and
 *                                 sets pattern (that block over the extent),
 *                                 UNMAP or not (LBPRZ=0). NUMBER OF BLOCKS 0
 *                                 (WSNZ=0): to the end of the medium, GOOD
 *                                 without I/O when the LBA is the end; at most
 *                                 SCSI_WRITE_SAME_MAX_BLOCKS either way.
 *   0xA0 REPORT LUNS              LUN 0 only (select report 0, 1, 2)
 *   0xA3/0x0C REPORT SUPPORTED OPERATION CODES   options 0, 1, 2, 3; RCTD
 *
 * Rules every command follows:
 *   - Control byte with NACA or LINK set: INVALID FIELD IN CDB.
 *   - A cdb_len shorter than the opcode's CDB: INVALID FIELD IN CDB.
 *   - When !lu->ready (this node's port group is in standby, SPC-4 5.15.2.4.4)
 *     only INQUIRY, REPORT LUNS, REQUEST SENSE, MODE SENSE, MODE SELECT,
 *     PERSISTENT RESERVE IN, REPORT and SET TARGET PORT GROUPS, REPORT
 *     SUPPORTED OPERATION CODES and READ CAPACITY 10/16 run; every other
 *     command gets NOT READY 04/0B (logical unit not accessible, target port
 *     in standby state), checked before the CDB fields. PERSISTENT RESERVE
 *     OUT is among the refused: only the primary stores reservations.
 *   - When lu->swp (software write protect): commands that change the medium
 *     (WRITE, WRITE AND VERIFY, COMPARE AND WRITE, ORWRITE, WRITE SAME, UNMAP,
 *     EXTENDED COPY) get DATA PROTECT 27/00 WRITE PROTECTED, after readiness.
 *   - LBA + blocks beyond the capacity: LBA OUT OF RANGE 21/00.
 *   - Transfer length 0: READ(6)/WRITE(6) mean 256 blocks; WRITE SAME means
 *     to the end of the medium; others are GOOD without I/O (after the LBA
 *     check).
 *   - Transfer length above the block limits maximum: INVALID FIELD IN CDB
 *     (COMPARE AND WRITE: above SCSI_CAW_MAX_BLOCKS; WRITE SAME: above
 *     SCSI_WRITE_SAME_MAX_BLOCKS).
 *   - RDPROTECT/WRPROTECT/VRPROTECT/ORPROTECT != 0: INVALID FIELD IN CDB (no
 *     protection information).
 *   - A data-out command whose expected_xfer is smaller than the data it needs
 *     is refused with INVALID FIELD IN CDB (we would write part of a command);
 *     a larger expected_xfer is an underflow the transport reports.
 *   - data_len <= allocation length, <= sizeof(data). expected_xfer does not
 *     truncate data-in: the transport sends min(data_len, expected_xfer) and
 *     reports the residual.
 *   - lu == NULL means the addressed LUN does not exist: INQUIRY answers with
 *     peripheral qualifier 011b, REPORT LUNS and REQUEST SENSE answer, the
 *     rest get ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED 25/00.
 *
 * Stateful commands: PERSISTENT RESERVE IN/OUT, RESERVE/RELEASE 6/10,
 * EXTENDED COPY and RECEIVE COPY RESULTS are checked here (CDB length,
 * control byte, service action, readiness, parameter list length up to
 * SCSI_PARAM_MAX) and handed to the caller as SCSI_IO with an xop; the caller
 * keeps their state and runs src/scsi/pr.c or xcopy.c. Unit attentions are
 * per I_T nexus and kept by src/scsi/lu.c.
 * TODO (next): SANITIZE. Until then INVALID COMMAND OPERATION CODE. Wire
 * constants live here rather than in include/proto/ until the SCSI layer has
 * a proto header. */
#ifndef TANDEM_SCSI_H
#define TANDEM_SCSI_H

#include <stdbool.h>
#include <stdint.h>

#include "../bs/bs.h"

/* SAM status codes. */
#define SCSI_GOOD 0x00
#define SCSI_CHECK_CONDITION 0x02
#define SCSI_BUSY 0x08
#define SCSI_RESERVATION_CONFLICT 0x18
#define SCSI_TASK_SET_FULL 0x28

/* Sense keys. */
#define SCSI_KEY_NO_SENSE 0x0
#define SCSI_KEY_NOT_READY 0x2
#define SCSI_KEY_MEDIUM_ERROR 0x3
#define SCSI_KEY_HARDWARE_ERROR 0x4
#define SCSI_KEY_ILLEGAL_REQUEST 0x5
#define SCSI_KEY_UNIT_ATTENTION 0x6
#define SCSI_KEY_DATA_PROTECT 0x7
#define SCSI_KEY_ABORTED_COMMAND 0xb
#define SCSI_KEY_MISCOMPARE 0xe

/* Additional sense code and qualifier as ASC << 8 | ASCQ. */
#define SCSI_ASC_NONE 0x0000
#define SCSI_ASC_LU_COMM_FAILURE 0x0800      /* logical unit communication failure */
#define SCSI_ASC_NOT_READY_STANDBY 0x040b    /* LU not accessible, port in standby */
#define SCSI_ASC_NOT_READY_TRANSITION 0x040a /* ... asymmetric access state transition */
#define SCSI_ASC_WRITE_ERROR 0x0c00
#define SCSI_ASC_READ_ERROR 0x1100           /* unrecovered read error */
#define SCSI_ASC_PARAM_LIST_LENGTH 0x1a00    /* parameter list length error */
#define SCSI_ASC_INVALID_OPCODE 0x2000
#define SCSI_ASC_LBA_OUT_OF_RANGE 0x2100
#define SCSI_ASC_INVALID_FIELD_CDB 0x2400
#define SCSI_ASC_LUN_NOT_SUPPORTED 0x2500
#define SCSI_ASC_INVALID_FIELD_PARAM 0x2600
#define SCSI_ASC_WRITE_PROTECTED 0x2700
#define SCSI_ASC_SPACE_ALLOC_FAILED 0x2707   /* space allocation failed write protect */
#define SCSI_ASC_SAVING_NOT_SUPPORTED 0x3900
#define SCSI_ASC_INTERNAL_FAILURE 0x4400     /* internal target failure */
#define SCSI_ASC_CRC_ERROR 0x4705            /* protocol service CRC error */
#define SCSI_ASC_DATA_PHASE_ERROR 0x4b00
#define SCSI_ASC_MISCOMPARE_VERIFY 0x1d00    /* miscompare during verify operation */
#define SCSI_ASC_MODE_CHANGED 0x2a01         /* mode parameters changed */
#define SCSI_ASC_ALUA_CHANGED 0x2a06         /* asymmetric access state changed */
#define SCSI_ASC_STPG_FAILED 0x670a          /* set target port groups command failed */

/* Operation codes. */
#define SCSI_TEST_UNIT_READY 0x00
#define SCSI_REQUEST_SENSE 0x03
#define SCSI_READ_6 0x08
#define SCSI_WRITE_6 0x0a
#define SCSI_INQUIRY 0x12
#define SCSI_MODE_SELECT_6 0x15
#define SCSI_MODE_SENSE_6 0x1a
#define SCSI_START_STOP_UNIT 0x1b
#define SCSI_READ_CAPACITY_10 0x25
#define SCSI_READ_10 0x28
#define SCSI_WRITE_10 0x2a
#define SCSI_VERIFY_10 0x2f
#define SCSI_PRE_FETCH_10 0x34
#define SCSI_SYNCHRONIZE_CACHE_10 0x35
#define SCSI_WRITE_SAME_10 0x41
#define SCSI_UNMAP 0x42
#define SCSI_MODE_SELECT_10 0x55
#define SCSI_MODE_SENSE_10 0x5a
#define SCSI_READ_16 0x88
#define SCSI_WRITE_16 0x8a
#define SCSI_VERIFY_16 0x8f
#define SCSI_PRE_FETCH_16 0x90
#define SCSI_SYNCHRONIZE_CACHE_16 0x91
#define SCSI_WRITE_SAME_16 0x93
#define SCSI_SERVICE_ACTION_IN_16 0x9e
#define SCSI_SAI_READ_CAPACITY_16 0x10
#define SCSI_SAI_GET_LBA_STATUS 0x12
#define SCSI_REPORT_LUNS 0xa0
#define SCSI_MAINTENANCE_IN 0xa3
#define SCSI_MI_REPORT_SUPPORTED_OPCODES 0x0c
#define SCSI_MI_REPORT_TPG 0x0a
#define SCSI_MAINTENANCE_OUT 0xa4
#define SCSI_MO_SET_TPG 0x0a
#define SCSI_READ_12 0xa8
#define SCSI_WRITE_12 0xaa
#define SCSI_WRITE_VERIFY_10 0x2e
#define SCSI_WRITE_VERIFY_12 0xae
#define SCSI_WRITE_VERIFY_16 0x8e
#define SCSI_VERIFY_12 0xaf
#define SCSI_COMPARE_AND_WRITE 0x89
#define SCSI_ORWRITE_16 0x8b
#define SCSI_READ_DEFECT_DATA_10 0x37
#define SCSI_READ_DEFECT_DATA_12 0xb7
#define SCSI_RESERVE_6 0x16
#define SCSI_RELEASE_6 0x17
#define SCSI_RESERVE_10 0x56
#define SCSI_RELEASE_10 0x57
#define SCSI_PERSISTENT_RESERVE_IN 0x5e
#define SCSI_PERSISTENT_RESERVE_OUT 0x5f
#define SCSI_EXTENDED_COPY 0x83
#define SCSI_RECEIVE_COPY_RESULTS 0x84
#define SCSI_PARAM_MAX 65536u /* longest PERSISTENT RESERVE OUT / EXTENDED COPY list */

/* Limits advertised in VPD 0xB0 and enforced. */
#define SCSI_UNMAP_MAX_DESC 255u            /* 8 + 16 * 255 = 4088 bytes of list */
#define SCSI_UNMAP_MAX_LIST (8u + 16u * SCSI_UNMAP_MAX_DESC)
#define SCSI_WRITE_SAME_MAX_BLOCKS (1u << 22)
#define SCSI_SENSE_FIXED_LEN 18u
#define SCSI_CAW_MAX_BLOCKS 255u            /* COMPARE AND WRITE (VPD B0 byte 5) */

/* Asymmetric access states (SPC-4 6.37) that Tandem reports. */
#define SCSI_ALUA_OPTIMIZED 0x0   /* the primary's port group */
#define SCSI_ALUA_STANDBY 0x2     /* the secondary's */
#define SCSI_ALUA_UNAVAILABLE 0x3 /* the peer's, to a primary that cannot reach it */
#define SCSI_ALUA_TRANSITIONING 0xf /* a primary without its lease (L5): retry */
/* the peer's, to a secondary that cannot reach it: not reported */
#define SCSI_ALUA_UNKNOWN 0xff

/* One target port group: each node of a volume is one group with one
 * target port; both ids are the node's index in the configuration + 1. */
struct scsi_tpg {
	uint16_t id;    /* target port group */
	uint16_t port;  /* its relative target port identifier */
	uint8_t access; /* asymmetric access state: SCSI_ALUA_* */
};

/* The logical unit, filled by the caller; scsi_* only read it. */
struct scsi_lu {
	uint64_t size;           /* bytes; whole blocks are used */
	uint32_t block;          /* logical block size, a power of two >= 512 */
	uint32_t phys_block;     /* physical block size for READ CAPACITY 16; 0 = block */
	uint8_t naa[16];         /* NAA IEEE Registered Extended (type 6) identifier from
				  * the target name (src/scsi/lu.c); the same on every node */
	const char *vendor;      /* "TANDEM"; at most 8 used */
	const char *product;     /* volume name; at most 16 used */
	const char *serial;      /* unit serial number (VPD 0x80); at most 64 used */
	const char *target_name; /* iSCSI target IQN for the VPD 0x83 SCSI name
				  * designator; NULL: none. At most 251 bytes used. */
	bool ready;              /* this node may serve medium access (primary, disk ok) */
	bool swp;                /* software write protect (control mode page) */
	struct scsi_tpg tpg[2];  /* [0] this node's port group, [1] the peer's */
	unsigned ntpg;           /* 1 (a volume on one node) or 2; 0: no ALUA */
	bool thin;               /* LBPME: UNMAP and WRITE SAME with UNMAP supported */
	bool write_cache;        /* WCE in the caching mode page */
	uint32_t max_xfer_blocks;/* READ/WRITE maximum (VPD B0); 0 = no limit of ours */
};

enum scsi_kind {
	SCSI_DONE, /* complete: status, sense, data-in are set */
	SCSI_IO,   /* the caller performs op (see the calling sequence above) */
};

/* What the caller does around the I/O beyond a plain read or write. */
enum scsi_xop {
	SCSI_XOP_NONE = 0,
	SCSI_XOP_VERIFY,      /* op READ of [off, len); compare with the data-out */
	SCSI_XOP_VERIFY_SAME, /* op READ; compare each block with the one data-out block */
	SCSI_XOP_CAW,         /* lock [off, len), read it, compare with the first half of
			       * the data-out; equal: write the second half; unlock */
	SCSI_XOP_ORWRITE,     /* lock, read, OR the data-out into it, write, unlock */
	/* commands whose state lives with the caller (src/scsi/pr.h, xcopy.h):
	 * the CDB was checked for its length and control byte, readiness and
	 * the data-out length; the caller runs the module */
	SCSI_XOP_PR_IN,        /* PERSISTENT RESERVE IN: pr_in() */
	SCSI_XOP_PR_OUT,       /* PERSISTENT RESERVE OUT, RESERVE/RELEASE 6/10: pr_out()
				* with the data_out_len bytes of parameter list */
	SCSI_XOP_XCOPY,        /* EXTENDED COPY: xcopy_parse() of the parameter list */
	SCSI_XOP_COPY_RESULTS, /* RECEIVE COPY RESULTS: xcopy_results() */
	SCSI_XOP_STPG,         /* SET TARGET PORT GROUPS: scsi_stpg() of the list */
};

struct scsi_extent {
	uint64_t off, len; /* bytes */
};

/* One command's outcome. Written entirely by scsi_exec(); caller-owned. */
struct scsi_req {
	enum scsi_kind kind;
	uint8_t status;          /* SAM status when DONE */
	uint8_t sense[32];       /* fixed-format sense when CHECK CONDITION */
	uint32_t sense_len;
	uint8_t data[4096];      /* data-in when DONE, already cut to the allocation length */
	uint32_t data_len;
	/* SCSI_IO */
	enum bs_op op;           /* BS_READ, BS_WRITE, BS_FLUSH, BS_TRIM, BS_ZERO */
	uint64_t off, len;       /* bytes; when needs_params, scsi_params() gives extents */
	bool fua;                /* writes only: durable before completion */
	uint32_t data_out_len;   /* bytes the initiator must send, 0 otherwise */
	uint32_t data_in_len;    /* READ: bytes the caller returns */
	bool needs_params;       /* the data-out goes through scsi_params() before I/O */
	enum scsi_xop xop;       /* compare / merge steps (see enum scsi_xop) */
	bool exact_out;          /* the expected transfer length must equal data_out_len */
	bool pattern;            /* WRITE SAME (after scsi_params): op is BS_WRITE of the
				  * one data-out block repeated over each extent */
	int8_t swp;              /* MODE SELECT (after scsi_params): the new SWP, or -1 */
};

/* Decodes and executes cdb[0..cdb_len) for lu (NULL: no such LUN).
 * expected_xfer is the transport's expected data transfer length. Always
 * fills *out completely. */
void scsi_exec(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len,
	       uint32_t expected_xfer, struct scsi_req *out);

/* For a SCSI_IO with needs_params: checks the data-out data[0..len) of the
 * same cdb (UNMAP parameter list, WRITE SAME block, MODE SELECT list).
 * Returns n > 0: the extents ext[0..n) to run out->op on (max must be at least
 * SCSI_UNMAP_MAX_DESC for UNMAP; 1 is enough for WRITE SAME);
 * 0: nothing to do, out is DONE with GOOD (an UNMAP list of zero-length
 * descriptors, a MODE SELECT that changes nothing); -EINVAL: out is DONE with
 * CHECK CONDITION. The CDB is decoded again (not taken from out), so every
 * check of scsi_exec() applies. UNMAP: the UNMAP DATA LENGTH field is not
 * checked, the descriptors the BLOCK DESCRIPTOR DATA LENGTH announces must all
 * be present and in range (all or none run); zero-length ones are dropped. */
int scsi_params(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len, const uint8_t *data,
		uint32_t len, struct scsi_extent *ext, unsigned max, struct scsi_req *out);

/* SET TARGET PORT GROUPS: checks the parameter list data[0..len) of cdb
 * against lu->tpg. Returns the id of the group that is to become
 * active/optimized (the other one then is standby), 0 when nothing is to
 * change (out is DONE with GOOD), or -EINVAL (out is DONE with CHECK
 * CONDITION: a group we do not have, a state other than active/optimized,
 * active/non-optimized or standby, or two groups asked to be active). */
int scsi_stpg(const struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len, const uint8_t *data,
	      uint32_t len, struct scsi_req *out);

/* The caller's I/O result for a SCSI_IO request: makes out DONE with GOOD
 * (err 0) or the status and sense for -errno; the only errno map:
 *   -EROFS -ENOTCONN -EPERM       NOT READY 04/0B (not primary here)
 *   -EIO -EUCLEAN                 MEDIUM ERROR 11/00 (read) or 0C/00 (others)
 *   -EINVAL -ERANGE -EOVERFLOW    ILLEGAL REQUEST 21/00 LBA out of range
 *   -ENOSPC -EDQUOT -EFBIG        DATA PROTECT 27/07 space allocation failed
 *   -ENOTSUP -EOPNOTSUPP          ILLEGAL REQUEST 24/00 invalid field in CDB
 *   -ENXIO                        ILLEGAL REQUEST 25/00 LUN not supported
 *   -EBADMSG                      ABORTED COMMAND 47/05 CRC error (digest)
 *   -EPROTO                       ABORTED COMMAND 4B/00 data phase error
 *   -ECONNRESET -ETIMEDOUT -ESHUTDOWN -ECANCELED
 *                                 ABORTED COMMAND 08/00 LU communication failure
 *   -EBUSY -EAGAIN                BUSY status, no sense
 *   -ENOMEM                       TASK SET FULL status, no sense
 *   anything else                 HARDWARE ERROR 44/00 internal target failure */
void scsi_error(struct scsi_req *out, int err);

/* Builders for the other SCSI modules (src/scsi/pr.c, src/scsi/xcopy.c), so
 * that sense bytes are still written in one place. All make out DONE.
 *   scsi_done:      status without sense (GOOD, RESERVATION CONFLICT, BUSY)
 *   scsi_check:     CHECK CONDITION, key and ASC<<8|ASCQ
 *   scsi_bad_cdb:   ILLEGAL REQUEST, INVALID FIELD IN CDB, pointing at byte
 *   scsi_bad_param: ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST, at byte
 *   scsi_data_in:   GOOD with out->data[0..len), cut to alloc */
void scsi_done(struct scsi_req *out, uint8_t status);
void scsi_check(struct scsi_req *out, uint8_t key, uint16_t asc);
void scsi_bad_cdb(struct scsi_req *out, unsigned byte);
void scsi_bad_param(struct scsi_req *out, unsigned byte);
void scsi_data_in(struct scsi_req *out, uint32_t len, uint32_t alloc);
/* MISCOMPARE, MISCOMPARE DURING VERIFY OPERATION, INFORMATION = offset (the
 * first differing byte of the compared data-out). */
void scsi_miscompare(struct scsi_req *out, uint32_t offset);

/* Sense key / ASC<<8|ASCQ of fixed-format sense bytes; -1 when not sense. */
int scsi_sense_key(const uint8_t *sense, uint32_t len);
int scsi_sense_asc(const uint8_t *sense, uint32_t len);

#endif
