/* iSCSI text keys (RFC 7143 section 6, 13): key=value pairs, each NUL
 * terminated, in login and text PDUs, and the negotiation of the
 * operational keys. Pure functions: unit-tested and fuzzed.
 *
 * Negotiation here (this target's offer, and how a result is reached):
 *   HeaderDigest, DataDigest   list; the first of CRC32C, None that the list names
 *   MaxConnections             min(offer, 1)
 *   InitialR2T                 OR: Yes only if the initiator insists
 *   ImmediateData              AND: Yes unless the initiator says No
 *   MaxRecvDataSegmentLength   declarative: the initiator's bounds our Data-In
 *                              and text segments; ours is ISCSI_TGT_MRDSL
 *   MaxBurstLength             min(offer, ISCSI_MAX_BURST)
 *   FirstBurstLength           min(offer, ISCSI_FIRST_BURST, MaxBurstLength)
 *   DefaultTime2Wait           max(offer, 2); DefaultTime2Retain min(offer, 0)
 *   MaxOutstandingR2T          min(offer, 1)
 *   DataPDUInOrder, DataSequenceInOrder   OR: Yes
 *   ErrorRecoveryLevel         min(offer, 0)
 *   IFMarker, OFMarker         AND: No
 *   anything else operational  NotUnderstood
 * Values are validated against RFC ranges; an out-of-range or malformed
 * value is a negotiation failure (login fails with an initiator error). */
#ifndef TANDEM_ISCSI_TEXT_H
#define TANDEM_ISCSI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ISCSI_KEY_MAX 63u      /* key names */
#define ISCSI_VALUE_MAX 255u   /* values this target accepts (RFC: 255 for most) */
#define ISCSI_NAME_MAX 223u    /* iSCSI names (RFC 7143 4.2.7.1); longer is refused */
#define ISCSI_TGT_MRDSL (256u << 10)
#define ISCSI_MAX_BURST (1u << 20)
#define ISCSI_FIRST_BURST (256u << 10)
#define ISCSI_TEXT_MAX 8192u   /* one login/text exchange, all its PDUs */

struct iscsi_params {
	uint32_t mrdsl_initiator; /* bytes of data we may send in one PDU */
	uint32_t max_burst, first_burst;
	uint32_t max_r2t;
	bool initial_r2t, immediate_data;
	bool header_digest, data_digest; /* CRC32C agreed (in force after the login) */
	uint32_t time2wait, time2retain;
};

void iscsi_params_default(struct iscsi_params *p);

/* Calls cb(ctx, key, value) for every pair in data[0..len). Returns 0, the
 * first non-zero cb result, or -EBADMSG for a malformed text (a pair without
 * '=', an empty or too long key, a too long value, no final NUL). */
int iscsi_text_parse(const uint8_t *data, uint32_t len,
		     int (*cb)(void *ctx, const char *key, const char *val), void *ctx);

struct iscsi_text {
	char buf[ISCSI_TEXT_MAX];
	uint32_t len;
};
/* Appends "key=val\0". -ENOSPC when it does not fit. */
int iscsi_text_add(struct iscsi_text *t, const char *key, const char *val);

/* An operational key of a login: writes the answer to resp (empty when the
 * key needs none) and updates p. 0, or -EINVAL for a value outside what the
 * RFC allows (resp then holds "Reject"). Keys of the security phase and the
 * login's identity keys (InitiatorName, TargetName, SessionType, ...) are
 * not handled here. */
int iscsi_negotiate(struct iscsi_params *p, const char *key, const char *val, char *resp,
		    size_t resp_len);

#endif
