/* SCSI reservations of one logical unit: SPC-4 persistent reservations
 * (PERSISTENT RESERVE IN/OUT) and the SPC-2 RESERVE/RELEASE(6/10) that
 * older initiators still send. Pure: the state is a plain struct the caller
 * owns, persists (pr_encode) and replicates; these functions decide, fill a
 * struct scsi_req through the scsi.h builders, and say whether the state
 * changed. Never does I/O, never keeps time, never sends a unit attention and
 * never aborts a task (the caller does both, see pr_ua() and PREEMPT below),
 * never trusts a length or a count from an initiator or from a stored image.
 *
 * Calling sequence (src/scsi/lu.c and exec.c), for every command of the logical unit:
 *   if (pr_conflict(s, who, cdb))        -> RESERVATION CONFLICT, not executed
 *   else if opcode is PRIN               -> pr_in(s, cdb, &req)
 *   else if PROUT or RESERVE/RELEASE     -> receive the data-out (PROUT),
 *                                           changed = pr_out(s, who, cdb, p, n, &req);
 *                                           changed: persist + replicate *s, give
 *                                           every other nexus n its pr_ua(), then answer
 *   else                                 -> scsi_exec() as before
 *   session gone (logout, connection lost) -> pr_nexus_lost(s, who)
 *   LUN RESET, TARGET WARM/COLD RESET      -> pr_reset(s)
 *   the whole volume starts from storage   -> pr_power_on(s) (not on failover)
 * PREEMPT AND ABORT: the registrations present before and absent after the
 * call are the preempted I_T nexuses whose tasks the caller aborts.
 *
 * What we report in REPORT CAPABILITIES: CRH=0, SIP_C=0, ATP_C=0, PTPL_C=1,
 * TMV=1, ALLOW COMMANDS=011b, the six types WE EA WERO EARO WEAR EAAR.
 * Refused: SPEC_I_PT and ALL_TG_PT (INVALID FIELD IN PARAMETER LIST), REGISTER
 * AND MOVE and REPLACE LOST RESERVATION (INVALID FIELD IN CDB), a scope other
 * than LU_SCOPE, third-party RESERVE(10) (INVALID FIELD IN CDB).
 *
 * State: registrations reg[0..nreg) in registration order (READ KEYS order);
 * the persistent reservation (holder, type); the SPC-2 reservation (legacy,
 * legacy_nexus). Transitions (all in pr_out unless named):
 *   reservation none -> held(h, type)   RESERVE by a registrant
 *               held -> held (same)     RESERVE again by a holder, same type
 *               held -> none            RELEASE by a holder; CLEAR; the holder
 *                                       unregisters (all-registrants types:
 *                                       the last registrant unregisters)
 *               held -> held(me, type') PREEMPT of the holder's key (or key 0
 *                                       for all-registrants types)
 *   registration absent -> key          REGISTER(+IGNORE) with a key != 0
 *                key -> key'            REGISTER(+IGNORE) by the same nexus
 *                key -> absent          REGISTER(+IGNORE) with key 0; CLEAR;
 *                                       PREEMPT naming its key
 *   legacy none -> held(who)            RESERVE(6/10), no registration exists
 *          held -> none                 RELEASE(6/10) by who; pr_nexus_lost(who);
 *                                       pr_reset; pr_power_on
 *   everything -> none, generation 0    pr_power_on when !aptpl
 * Invariants (pr_valid() checks P1-P3; the unit tests and the fuzzer check all):
 *   P1. nreg <= PR_MAX_REG; every registered key is non-zero; no two
 *       registrations have the same I_T nexus; names are NUL-terminated.
 *   P2. holder == -1 and type == 0, or 0 <= holder < nreg and type is one of
 *       the six types. For an all-registrants type every registrant holds the
 *       reservation and holder names one of them (SPC-4 5.13.9): it lives
 *       while any registration does.
 *   P3. legacy implies nreg == 0: with CRH=0 a RESERVE(6/10) conflicts while
 *       any registration exists, and every PROUT conflicts while a RESERVE is
 *       held (SPC-2 5.5.1), so the two kinds never coexist.
 *   P4. generation grows by one for each REGISTER, REGISTER AND IGNORE
 *       EXISTING KEY, CLEAR, PREEMPT, PREEMPT AND ABORT that changes state
 *       (a GOOD no-op REGISTER of key 0 by an unregistered nexus does not);
 *       RESERVE and RELEASE never change it; pr_power_on sets it to 0.
 *   P5. pr_in and pr_conflict never change *s; pr_out returns 1 exactly when
 *       *s changed (and then the answer is GOOD).
 *
 * Conflicts (pr_conflict), SPC-4 tables 52/53 and SBC-3 table 13 for a nexus
 * that does not hold the persistent reservation:
 *   always allowed   INQUIRY, REPORT LUNS, REQUEST SENSE, TEST UNIT READY, LOG
 *                    SENSE, READ CAPACITY 10/16, PRIN, REPORT SUPPORTED OPERATION
 *                    CODES / TASK MANAGEMENT FUNCTIONS, REPORT TARGET PORT
 *                    GROUPS and the other MAINTENANCE IN reports, REPORT
 *                    REFERRALS, READ MEDIA SERIAL NUMBER, ACCESS CONTROL IN/OUT,
 *                    PREVENT ALLOW MEDIUM REMOVAL with PREVENT 0, START STOP
 *                    UNIT with START 1 and POWER CONDITION 0
 *   reads            READ, VERIFY, PRE-FETCH, GET LBA STATUS, READ DEFECT DATA,
 *                    READ LONG, MODE SENSE, READ BUFFER, RECEIVE DIAGNOSTIC
 *                    RESULTS, READ ATTRIBUTE, RECEIVE COPY RESULTS, SECURITY
 *                    PROTOCOL IN: allowed under WE, conflict under EA; under
 *                    the RO and AR types allowed for registrants, and for
 *                    the others allowed under WERO/WEAR, conflict under
 *                    EARO/EAAR
 *   everything else  (writes, UNMAP, WRITE SAME, COMPARE AND WRITE, SYNCHRONIZE
 *                    CACHE, FORMAT, SANITIZE, EXTENDED COPY, MODE/LOG SELECT,
 *                    unknown opcodes ...): conflict under WE and EA; under
 *                    the RO and AR types allowed for registrants only
 *   PROUT            REGISTER(+IGNORE) allowed; CLEAR, PREEMPT(+ABORT), RELEASE
 *                    for registrants only; RESERVE, REGISTER AND MOVE conflict
 *   RESERVE/RELEASE(6/10)  conflict while any registration exists (CRH=0)
 * and, while an SPC-2 RESERVE is held, for every other nexus everything except
 * INQUIRY, REPORT LUNS, REQUEST SENSE, LOG SENSE, REPORT TARGET PORT GROUPS,
 * PREVENT ALLOW MEDIUM REMOVAL with PREVENT 0 and RELEASE(6/10) (a GOOD no-op);
 * PRIN and PROUT conflict for every nexus, the holder included (SPC-2 5.5.1).
 *
 * Image (pr_encode/pr_decode), big-endian, version 1:
 *   0  u32 magic 0x54505231 ("TPR1")   4  u16 version (1)   6  u16 flags
 *      (bit 0 aptpl, bit 1 legacy; others zero)
 *   8  u32 length of the whole image  12  u32 generation
 *  16  u16 nreg (<= PR_MAX_REG)       18  u16 holder (0xffff: none)
 *  20  u8 type   21..23 zero
 *  24  nreg registrations: u64 key (non-zero), nexus
 *      then, when legacy, the legacy nexus
 *  nexus: u16 tport, u8 n (< PR_NAME_MAX), n name bytes without NUL (none is 0)
 * The image ends exactly at its length; bytes after it are ignored. */
#ifndef TANDEM_PR_H
#define TANDEM_PR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scsi.h"

/* Operation codes. */
#define PR_OP_RESERVE_6 0x16
#define PR_OP_RELEASE_6 0x17
#define PR_OP_RESERVE_10 0x56
#define PR_OP_RELEASE_10 0x57
#define PR_OP_IN 0x5e  /* PERSISTENT RESERVE IN */
#define PR_OP_OUT 0x5f /* PERSISTENT RESERVE OUT */

/* PERSISTENT RESERVE IN service actions (cdb[1] & 0x1f). */
#define PR_IN_READ_KEYS 0x00
#define PR_IN_READ_RESERVATION 0x01
#define PR_IN_REPORT_CAPABILITIES 0x02
#define PR_IN_READ_FULL_STATUS 0x03

/* PERSISTENT RESERVE OUT service actions (cdb[1] & 0x1f). */
#define PR_OUT_REGISTER 0x00
#define PR_OUT_RESERVE 0x01
#define PR_OUT_RELEASE 0x02
#define PR_OUT_CLEAR 0x03
#define PR_OUT_PREEMPT 0x04
#define PR_OUT_PREEMPT_AND_ABORT 0x05
#define PR_OUT_REGISTER_AND_IGNORE 0x06
#define PR_OUT_REGISTER_AND_MOVE 0x07 /* refused */

/* Persistent reservation types (cdb[2] & 0x0f); scope LU_SCOPE is 0. */
#define PR_TYPE_WE 0x1   /* write exclusive */
#define PR_TYPE_EA 0x3   /* exclusive access */
#define PR_TYPE_WERO 0x5 /* write exclusive, registrants only */
#define PR_TYPE_EARO 0x6 /* exclusive access, registrants only */
#define PR_TYPE_WEAR 0x7 /* write exclusive, all registrants */
#define PR_TYPE_EAAR 0x8 /* exclusive access, all registrants */
#define PR_SCOPE_LU 0x0

/* PROUT parameter list (24 bytes): reservation key 0..7, service action
 * reservation key 8..15, obsolete 16..19, flags 20, reserved 21, obsolete 22..23. */
#define PR_PARAM_LEN 24u
#define PR_SPEC_I_PT 0x08
#define PR_ALL_TG_PT 0x04
#define PR_APTPL 0x01

/* Sense codes of this module (ASC << 8 | ASCQ), ILLEGAL REQUEST. */
#define PR_ASC_INVALID_RELEASE 0x2604       /* invalid release of persistent reservation */
#define PR_ASC_INSUFFICIENT_REG 0x5504      /* insufficient registration resources */
/* Unit attentions that pr_ua() names (sense key UNIT ATTENTION). */
#define PR_UA_RES_PREEMPTED 0x2a03          /* RESERVATIONS PREEMPTED */
#define PR_UA_RES_RELEASED 0x2a04           /* RESERVATIONS RELEASED */
#define PR_UA_REG_PREEMPTED 0x2a05          /* REGISTRATIONS PREEMPTED */

#define PR_MAX_REG 32            /* registrations per logical unit */
/* initiator port name incl. NUL, e.g. "iqn.x:y,i,0x00023d000001": room for
 * an iSCSI name of 223 bytes (RFC 7143 4.2.7.1) + ",i,0x" + 12 hex digits */
#define PR_NAME_MAX 244
#define PR_IMAGE_MAX 10240       /* pr_encode never needs more */

struct pr_nexus {                /* one I_T nexus: who sends a command */
	char initiator[PR_NAME_MAX]; /* iSCSI initiator port name: "<iqn>,i,0x<isid 12 hex>";
				      * the bytes before the first NUL (at most
				      * PR_NAME_MAX - 1) are the name */
	uint16_t tport;          /* relative target port identifier (1-based) */
};

struct pr_reg {
	uint64_t key;
	struct pr_nexus n;
};

/* One logical unit's reservations; caller-owned, see the invariants above.
 * Copyable by assignment; compare with pr_equal(), not memcmp (padding). */
struct pr_state {
	uint32_t generation;     /* PRgeneration */
	uint32_t nreg;
	struct pr_reg reg[PR_MAX_REG];
	int holder;              /* index into reg of the reservation holder, -1 none */
	uint8_t type;            /* PR type when holder >= 0, else 0 */
	bool aptpl;              /* the last APTPL bit of a REGISTER that changed state */
	bool legacy;             /* a RESERVE(6)/(10) reservation is held by legacy_nexus */
	struct pr_nexus legacy_nexus;
};

/* Empty state: no registration, no reservation, generation 0. */
void pr_init(struct pr_state *s);

/* Does this command from who conflict with the reservations (table above)?
 * true: the caller answers RESERVATION CONFLICT without executing it. cdb is
 * at least 16 bytes (the transport zero-pads). */
bool pr_conflict(const struct pr_state *s, const struct pr_nexus *who, const uint8_t *cdb);

/* PERSISTENT RESERVE IN (cdb at least 10 bytes): READ KEYS, READ RESERVATION,
 * REPORT CAPABILITIES, READ FULL STATUS as data-in cut to the allocation
 * length (ADDITIONAL LENGTH always counts all the data), or CHECK CONDITION:
 * another service action or NACA/LINK: INVALID FIELD IN CDB. READ FULL STATUS
 * longer than out->data (4096) is cut there too. */
void pr_in(const struct pr_state *s, const uint8_t *cdb, struct scsi_req *out);

/* PERSISTENT RESERVE OUT with its parameter list param[0..len) (the CDB's
 * PARAMETER LIST LENGTH must be 24 and len at least that), and RESERVE(6/10),
 * RELEASE(6/10) (param unused, len 0). cdb at least 10 bytes. Fills out with
 * GOOD, RESERVATION CONFLICT or CHECK CONDITION (SPC-4 5.13, 6.16). Returns 1
 * when *s changed (the caller persists and replicates it before answering),
 * 0 when not. Keeps P1-P4 by itself, whether or not pr_conflict() ran first. */
int pr_out(struct pr_state *s, const struct pr_nexus *who, const uint8_t *cdb,
	   const uint8_t *param, uint32_t len, struct scsi_req *out);

/* The unit attention (ASC << 8 | ASCQ; 0: none) that the pr_out() by who with
 * cdb, which changed *before into *after, owes the I_T nexus n (SPC-4
 * 5.13.11): only nexuses registered before and other than who get one.
 *   PR_UA_RES_PREEMPTED  n lost its registration to a CLEAR
 *   PR_UA_REG_PREEMPTED  n lost its registration to a PREEMPT (AND ABORT); for
 *                        PREEMPT AND ABORT the caller also aborts n's tasks
 *   PR_UA_RES_RELEASED   n stays registered, and a registrants-only or
 *                        all-registrants reservation was released (RELEASE,
 *                        or its holder unregistered), or a PREEMPT changed
 *                        the reservation's type
 * RESERVE/RELEASE(6/10) owe nobody anything. Pure, like the rest. */
uint16_t pr_ua(const struct pr_state *before, const struct pr_state *after, const uint8_t *cdb,
	       const struct pr_nexus *who, const struct pr_nexus *n);

/* Transport events; each returns 1 when *s changed.
 * pr_nexus_lost: the I_T nexus is gone (logout, connection loss): the SPC-2
 * reservation it holds is released; registrations stay.
 * pr_reset: LUN RESET, TARGET WARM or COLD RESET: the SPC-2 reservation is
 * released; persistent reservations and registrations stay.
 * pr_power_on: the logical unit starts from its stored image after all nodes
 * were down (not a failover): the SPC-2 reservation is dropped, generation
 * becomes 0, and unless aptpl the registrations and the reservation too. */
int pr_nexus_lost(struct pr_state *s, const struct pr_nexus *who);
int pr_reset(struct pr_state *s);
int pr_power_on(struct pr_state *s);

/* P1-P3 hold. */
bool pr_valid(const struct pr_state *s);
/* Same registrations (in order), reservation, generation, aptpl, legacy. */
bool pr_equal(const struct pr_state *a, const struct pr_state *b);

/* Persistence codec (layout above, no CRC: the caller adds one).
 * pr_encode: bytes written (<= max, never more than PR_IMAGE_MAX), -ENOSPC
 * when max is too small, -EINVAL when !pr_valid(s).
 * pr_decode: 0, or -EBADMSG for anything malformed or violating P1-P3; *s is
 * only written on success. */
int pr_encode(const struct pr_state *s, uint8_t *buf, size_t max);
int pr_decode(struct pr_state *s, const uint8_t *buf, size_t len);

#endif
