/* iSCSI PDU headers: see iscsi_pdu.h. */
#include "iscsi_pdu.h"

#include <errno.h>
#include <string.h>

#include "../common/be.h"

uint32_t iscsi_get32(const uint8_t *p)
{
	return get32(p);
}

void iscsi_put32(uint8_t *p, uint32_t v)
{
	put32(p, v);
}

void iscsi_put16(uint8_t *p, uint16_t v)
{
	put16(p, v);
}

void iscsi_bhs_init(uint8_t bhs[ISCSI_BHS_LEN], uint8_t opcode, uint8_t flags, uint32_t dsl,
		    uint32_t itt)
{
	memset(bhs, 0, ISCSI_BHS_LEN);
	bhs[0] = opcode;
	bhs[1] = flags;
	bhs[5] = (uint8_t)(dsl >> 16);
	bhs[6] = (uint8_t)(dsl >> 8);
	bhs[7] = (uint8_t)dsl;
	iscsi_put32(bhs + 16, itt);
}

int iscsi_bhs_decode(const uint8_t b[ISCSI_BHS_LEN], uint32_t ahs_max, uint32_t dsl_max,
		     struct iscsi_bhs *h)
{
	memset(h, 0, sizeof(*h));
	h->opcode = b[0] & ISCSI_OP_MASK;
	h->immediate = b[0] & ISCSI_F_IMMEDIATE;
	h->flags = b[1];
	h->b2 = b[2];
	h->b3 = b[3];
	h->ahs_len = (uint32_t)b[4] * 4u;
	h->dsl = (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
	for (int i = 0; i < 8; i++)
		h->lun = h->lun << 8 | b[8 + i];
	h->itt = iscsi_get32(b + 16);
	h->w20 = iscsi_get32(b + 20);
	h->w24 = iscsi_get32(b + 24);
	h->w28 = iscsi_get32(b + 28);
	h->w32 = iscsi_get32(b + 32);
	h->w36 = iscsi_get32(b + 36);
	h->w40 = iscsi_get32(b + 40);
	h->w44 = iscsi_get32(b + 44);
	memcpy(h->cdb, b + 32, ISCSI_CDB_LEN);
	memcpy(h->isid, b + 8, 6);
	h->tsih = (uint16_t)(b[14] << 8 | b[15]);
	h->cid = (uint16_t)(b[20] << 8 | b[21]);
	if ((b[0] & 0x80) || h->ahs_len > ahs_max || h->dsl > dsl_max)
		return -EBADMSG;
	switch (h->opcode) {
	case ISCSI_OP_NOP_OUT:
	case ISCSI_OP_SCSI_CMD:
	case ISCSI_OP_TASK_REQ:
	case ISCSI_OP_LOGIN_REQ:
	case ISCSI_OP_TEXT_REQ:
	case ISCSI_OP_DATA_OUT:
	case ISCSI_OP_LOGOUT_REQ:
	case ISCSI_OP_SNACK_REQ:
		break;
	default:
		return -EBADMSG;
	}
	/* No data where the RFC allows none. */
	if ((h->opcode == ISCSI_OP_TASK_REQ || h->opcode == ISCSI_OP_LOGOUT_REQ ||
	     h->opcode == ISCSI_OP_SNACK_REQ) && h->dsl)
		return -EBADMSG;
	/* A command's read and write bits with an expected length of zero and
	 * data, or data on a pure read, are the initiator's problem, answered
	 * by the command layer; here only the frame is checked. */
	return 0;
}
