/* iSCSI PDU headers (include/proto/iscsi.h): decode and validate a Basic
 * Header Segment, encode the target's. Pure; unit-tested and fuzzed. */
#ifndef TANDEM_ISCSI_PDU_H
#define TANDEM_ISCSI_PDU_H

#include <stdbool.h>
#include <stdint.h>

#include "../../include/proto/iscsi.h"

struct iscsi_bhs {
	uint8_t opcode;   /* ISCSI_OP_* */
	bool immediate;
	uint8_t flags;    /* byte 1 */
	uint8_t b2, b3;
	uint32_t ahs_len; /* bytes */
	uint32_t dsl;     /* data segment bytes (before padding) */
	uint64_t lun;     /* bytes 8..15 as a big-endian number */
	uint32_t itt;
	uint32_t w20, w24, w28, w32, w36, w40, w44; /* words at those offsets */
	uint8_t cdb[ISCSI_CDB_LEN];                   /* SCSI Command: bytes 32..47 */
	uint8_t isid[6];                              /* Login: bytes 8..13 */
	uint16_t tsih, cid;                           /* Login: 14..15, 20..21 */
};

/* 0, or -EBADMSG: not an initiator opcode, AHS beyond ahs_max bytes, data
 * segment beyond dsl_max, or a field this target requires to be zero. */
int iscsi_bhs_decode(const uint8_t bhs[ISCSI_BHS_LEN], uint32_t ahs_max, uint32_t dsl_max,
		     struct iscsi_bhs *out);
/* Bytes on the wire after the BHS: AHS + data + padding (no digests). */
static inline uint64_t iscsi_rest_len(const struct iscsi_bhs *h)
{
	return (uint64_t)h->ahs_len + (((uint64_t)h->dsl + 3) & ~3ull);
}

/* Encoding helpers for the target's PDUs. */
void iscsi_put32(uint8_t *p, uint32_t v);
void iscsi_put16(uint8_t *p, uint16_t v);
uint32_t iscsi_get32(const uint8_t *p);
void iscsi_bhs_init(uint8_t bhs[ISCSI_BHS_LEN], uint8_t opcode, uint8_t flags, uint32_t dsl,
		    uint32_t itt);

#endif
