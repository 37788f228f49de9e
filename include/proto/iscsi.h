/* iSCSI (RFC 7143) wire format: the Basic Header Segment and its fields.
 *
 * Every PDU is a 48-byte BHS, TotalAHSLength x 4 bytes of additional
 * headers, an optional header digest, DataSegmentLength bytes of data padded
 * to a multiple of 4, and an optional data digest. All integers are
 * big-endian. Field offsets below are bytes into the BHS.
 *
 * Common to every PDU:
 *   [0]      bit 6: immediate delivery (I); bits 0-5: opcode
 *   [1]      bit 7: final (F); the rest opcode-specific
 *   [4]      TotalAHSLength (4-byte words)
 *   [5..7]   DataSegmentLength (24 bits)
 *   [8..15]  LUN or opcode-specific
 *   [16..19] Initiator Task Tag
 */
#ifndef TANDEM_PROTO_ISCSI_H
#define TANDEM_PROTO_ISCSI_H

#include <stdint.h>

#define ISCSI_BHS_LEN 48u
#define ISCSI_RESERVED_TAG 0xffffffffu

/* initiator opcodes */
#define ISCSI_OP_NOP_OUT 0x00
#define ISCSI_OP_SCSI_CMD 0x01
#define ISCSI_OP_TASK_REQ 0x02
#define ISCSI_OP_LOGIN_REQ 0x03
#define ISCSI_OP_TEXT_REQ 0x04
#define ISCSI_OP_DATA_OUT 0x05
#define ISCSI_OP_LOGOUT_REQ 0x06
#define ISCSI_OP_SNACK_REQ 0x10
/* target opcodes */
#define ISCSI_OP_NOP_IN 0x20
#define ISCSI_OP_SCSI_RSP 0x21
#define ISCSI_OP_TASK_RSP 0x22
#define ISCSI_OP_LOGIN_RSP 0x23
#define ISCSI_OP_TEXT_RSP 0x24
#define ISCSI_OP_DATA_IN 0x25
#define ISCSI_OP_LOGOUT_RSP 0x26
#define ISCSI_OP_R2T 0x31
#define ISCSI_OP_ASYNC 0x32
#define ISCSI_OP_REJECT 0x3f

#define ISCSI_OP_MASK 0x3f
#define ISCSI_F_IMMEDIATE 0x40 /* byte 0 */
#define ISCSI_F_FINAL 0x80     /* byte 1 */

/* SCSI Command byte 1 */
#define ISCSI_CMD_READ 0x40
#define ISCSI_CMD_WRITE 0x20
/* SCSI Command: [20] expected data transfer length, [24] CmdSN, [28]
 * ExpStatSN, [32..47] CDB */
#define ISCSI_CDB_LEN 16u

/* Data-In byte 1 */
#define ISCSI_DIN_ACK 0x40
#define ISCSI_DIN_OVERFLOW 0x04
#define ISCSI_DIN_UNDERFLOW 0x02
#define ISCSI_DIN_STATUS 0x01

/* SCSI Response byte 1 */
#define ISCSI_RSP_OVERFLOW 0x04
#define ISCSI_RSP_UNDERFLOW 0x02

/* Login byte 1: T (transit), C (continue), CSG (bits 2-3), NSG (bits 0-1) */
#define ISCSI_LOGIN_T 0x80
#define ISCSI_LOGIN_C 0x40
#define ISCSI_STAGE_SECURITY 0
#define ISCSI_STAGE_OPERATIONAL 1
#define ISCSI_STAGE_FULL 3
#define ISCSI_LOGIN_CSG(b) (((b) >> 2) & 3)
#define ISCSI_LOGIN_NSG(b) ((b)&3)

/* Login response status (class << 8 | detail) */
#define ISCSI_LOGIN_OK 0x0000
#define ISCSI_LOGIN_AUTH_FAILED 0x0201
#define ISCSI_LOGIN_FORBIDDEN 0x0202
#define ISCSI_LOGIN_NOT_FOUND 0x0203
#define ISCSI_LOGIN_MISSING_PARAM 0x0207
#define ISCSI_LOGIN_INIT_ERROR 0x0200
#define ISCSI_LOGIN_UNSUPPORTED_VERSION 0x0205
#define ISCSI_LOGIN_TARGET_ERROR 0x0300

/* Reject reasons */
#define ISCSI_REJECT_DIGEST 0x02
#define ISCSI_REJECT_SNACK 0x03
#define ISCSI_REJECT_PROTOCOL 0x04
#define ISCSI_REJECT_CMD_NOT_SUPPORTED 0x05
#define ISCSI_REJECT_IMM_CMD 0x06 /* immediate command reject: too many immediate commands */
#define ISCSI_REJECT_INVALID_PDU_FIELD 0x09
#define ISCSI_REJECT_NEGOTIATION_RESET 0x0b

/* Task management functions (byte 1 & 0x7f) and responses */
#define ISCSI_TMF_ABORT_TASK 1
#define ISCSI_TMF_ABORT_TASK_SET 2
#define ISCSI_TMF_CLEAR_ACA 3
#define ISCSI_TMF_CLEAR_TASK_SET 4
#define ISCSI_TMF_LUN_RESET 5
#define ISCSI_TMF_TARGET_WARM_RESET 6
#define ISCSI_TMF_TARGET_COLD_RESET 7
#define ISCSI_TMF_TASK_REASSIGN 8
#define ISCSI_TMF_RSP_COMPLETE 0
#define ISCSI_TMF_RSP_NO_TASK 1
#define ISCSI_TMF_RSP_NO_LUN 2
#define ISCSI_TMF_RSP_NOT_SUPPORTED 5
#define ISCSI_TMF_RSP_REJECTED 255

#endif
