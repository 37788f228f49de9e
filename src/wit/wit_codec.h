/* Witness protocol codec (include/proto/witness.h): pure functions that
 * encode messages and decode and validate every field received. Never
 * touches sockets; unit-tested and fuzzed alone. */
#ifndef TANDEM_WIT_CODEC_H
#define TANDEM_WIT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "../../include/proto/witness.h"

/* A decoded message, host byte order. ERROR and STATUS: `var` points at the
 * text inside the caller's buffer (var_len bytes, not NUL-terminated). */
struct wit_msg {
	uint16_t type;
	uint32_t len;
	union {
		struct wit_hello hello;
		struct wit_auth auth;
		struct wit_ping ping;
		struct wit_vol_msg vol;  /* REPORT, CLAIM */
		struct wit_verdict verd; /* REPORT_ACK, CLAIM_REPLY */
	} u;
	const uint8_t *var;
	uint32_t var_len;
};

/* Header: 0, or -EBADMSG (bad magic, unknown type, reserved bits, a length
 * impossible for the type). */
int wit_decode_hdr(const uint8_t in[sizeof(struct wit_hdr)], struct wit_msg *m);
/* Body (m->len bytes at in): 0 or -EBADMSG for any invalid field. */
int wit_decode_body(const uint8_t *in, struct wit_msg *m);

/* Encoders write header + body at out (WIT_ENC_MAX bytes of room, or for
 * the text messages 12 + the text) and return the byte count. Names longer
 * than WIT_NAME_LEN - 1 are the caller's bug (config names are shorter). */
#define WIT_ENC_MAX (sizeof(struct wit_hdr) + sizeof(struct wit_hello))
/* timeout_ms: a node's witness-timeout; 0 from the witness and admin clients */
size_t wit_enc_hello(uint8_t *out, const char *cluster, const char *name,
		     const uint8_t nonce[WIT_NONCE_LEN], uint32_t flags, uint64_t timeout_ms);
size_t wit_enc_auth(uint8_t *out, const uint8_t mac[WIT_MAC_LEN]);
size_t wit_enc_ping(uint8_t *out, uint16_t type, uint64_t cookie);
size_t wit_enc_vol(uint8_t *out, uint16_t type, const struct wit_vol_msg *v);
size_t wit_enc_verdict(uint8_t *out, uint16_t type, const struct wit_verdict *v);
size_t wit_enc_text(uint8_t *out, uint16_t type, const char *text, size_t len);
size_t wit_enc_empty(uint8_t *out, uint16_t type);

const char *wit_reason_name(uint32_t reason);

/* The AUTH proof (include/proto/witness.h): dir 'N' from the node (or admin
 * client), 'W' from the witness. */
void wit_mac(const char *secret, char dir, const uint8_t nonce_node[WIT_NONCE_LEN],
	     const uint8_t nonce_wit[WIT_NONCE_LEN], const char *cluster, const char *node,
	     uint8_t out[WIT_MAC_LEN]);

#endif
