/* Replication protocol codec (include/proto/repl.h): pure functions that
 * encode messages and decode and validate every field received. Never
 * touches sockets or volumes; unit-tested and fuzzed alone. */
#ifndef TANDEM_REPL_CODEC_H
#define TANDEM_REPL_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "../../include/proto/repl.h"

/* A decoded message, host byte order. For WRITE and RS_DATA only the fixed
 * part is decoded; data_len payload bytes follow it on the wire: u.io.len
 * bytes of data, or fewer compressed ones when hflags names a codec. For ACK,
 * BITMAP and ERROR, `var` points at the variable part inside the caller's
 * buffer (entries, words or text: read them with the accessors below). */
struct repl_msg {
	uint16_t type;
	uint16_t hflags; /* header flags: REPL_HF_LZ4 or REPL_HF_ZSTD (WRITE, RS_DATA), else 0 */
	uint32_t len;    /* body length from the header */
	union {
		struct repl_hello hello;
		struct repl_auth auth;
		struct repl_state state;
		struct repl_contract contract;
		struct repl_bitmap bitmap;
		struct repl_io io;
		struct repl_flush flush;
		struct repl_ack ack;
		struct repl_ping ping;
		struct repl_gen gen;
	} u;
	const uint8_t *var;
	uint32_t var_len;
	uint32_t data_len; /* WRITE / RS_DATA payload that follows */
	uint8_t digest[REPL_DIGEST_LEN]; /* CSUM (u.io holds the rest) */
	const char *why; /* a refused header (always) or body (some): the rule it broke */
};

/* Header: 0, or -EBADMSG (bad magic, unknown type, reserved not zero, flags
 * other than one codec on WRITE / RS_DATA, length impossible for the type).
 * Flags are checked here as the format allows them; whether the connection
 * negotiated them (REPL_FEAT_COMPRESS) is its own check. */
int repl_decode_hdr(const uint8_t in[sizeof(struct repl_hdr)], struct repl_msg *m);
/* Bytes of body that must be buffered before repl_decode_body can run (the
 * whole body, except the payload of WRITE / RS_DATA). */
uint32_t repl_body_needed(const struct repl_msg *m);
/* Body (repl_body_needed(m) bytes at in): 0 or -EBADMSG for any invalid field. */
int repl_decode_body(const uint8_t *in, struct repl_msg *m);

uint64_t repl_bitmap_word(const struct repl_msg *m, uint32_t i);
void repl_ack_entry(const struct repl_msg *m, uint32_t i, uint64_t *seq, int32_t *res);

/* Encoders write header + fixed body at out and return the byte count; out
 * must have room for REPL_ENC_MAX bytes (variable parts are written by the
 * callers that own them: payloads, ack entries, bitmap words, error text). */
#define REPL_ENC_MAX (sizeof(struct repl_hdr) + sizeof(struct repl_hello))
size_t repl_enc_hdr(uint8_t *out, uint16_t type, uint32_t len);
size_t repl_enc_hello(uint8_t *out, const struct repl_hello *h);
size_t repl_enc_auth(uint8_t *out, const struct repl_auth *a);
size_t repl_enc_state(uint8_t *out, const struct repl_state *s);
size_t repl_enc_contract(uint8_t *out, const struct repl_contract *k);
size_t repl_enc_bitmap(uint8_t *out, uint64_t start, uint32_t words); /* words follow */
size_t repl_enc_io(uint8_t *out, uint16_t type, const struct repl_io *io); /* + payload */
/* Rewrites the header of a WRITE / RS_DATA that repl_enc_io wrote at hdr:
 * its payload goes compressed with codec (REPL_HF_*), wire_len bytes. */
void repl_enc_packed(uint8_t *hdr, uint16_t codec, uint32_t wire_len);
size_t repl_enc_flush(uint8_t *out, uint64_t seq);
size_t repl_enc_csum(uint8_t *out, const struct repl_io *io, const uint8_t digest[REPL_DIGEST_LEN]);
size_t repl_enc_ack_hdr(uint8_t *out, uint32_t count); /* count entries follow */
void repl_enc_ack_entry(uint8_t *out, uint64_t seq, int32_t res);
size_t repl_enc_ping(uint8_t *out, uint16_t type, uint64_t cookie);
size_t repl_enc_gen(uint8_t *out, uint16_t type, uint64_t current, uint64_t bitmap);
size_t repl_enc_error(uint8_t *out, const char *msg); /* header + text */
size_t repl_enc_empty(uint8_t *out, uint16_t type);    /* BITMAP_END */
/* META: the header; len bytes of image follow */
#define repl_enc_meta_hdr(out, len) repl_enc_hdr((out), REPL_META, (len))
void repl_put_word(uint8_t *out, uint64_t w);

#endif
