/* TLS 1.3 record protection (RFC 8446 5.2-5.4, 7.1-7.2, 4.6.3) for a
 * connection whose handshake OpenSSL ran: application_data records sealed
 * straight from the owner's buffer into the ciphertext queue, and opened
 * from the receive buffer straight into the owner's destination, one pass
 * over the bytes each way (OpenSSL's own record layer copies them twice
 * more; this kernel has no kTLS to hand them to).
 * Owns: one direction's traffic secret, its key, IV and sequence number.
 * Never: parses a handshake beyond KeyUpdate, or releases plaintext of a
 * record whose tag did not verify (tls_rec_open says so first).
 *
 * Suites: TLS_AES_128_GCM_SHA256 and TLS_CHACHA20_POLY1305_SHA256, the two
 * net_tls_ctx offers; both use SHA-256 (32-byte secrets) and 12-byte IVs.
 * Invariants:
 *   R1. Record n of a direction is sealed and opened with nonce
 *       iv XOR n (n from 0 after the handshake and after each KeyUpdate);
 *       n never wraps (tls_rec_seal/open refuse at 2^64-1).
 *   R2. A key update replaces secret, key and IV together and sets n to 0;
 *       the old secret is wiped.
 */
#ifndef TANDEM_NET_TLS_REC_H
#define TANDEM_NET_TLS_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TLS_REC_HDR 5
#define TLS_REC_TAG 16
#define TLS_REC_PLAIN_MAX 16384u /* 2^14 */
/* what one record adds to its plaintext: header, content type, tag */
#define TLS_REC_OVERHEAD (TLS_REC_HDR + 1 + TLS_REC_TAG)
/* the largest ciphertext length a peer may send (RFC 8446 5.2) */
#define TLS_REC_CIPHER_MAX (TLS_REC_PLAIN_MAX + 256u)
#define TLS_REC_SECRET 32

/* content types */
#define TLS_CT_ALERT 21
#define TLS_CT_HANDSHAKE 22
#define TLS_CT_APPDATA 23

/* cipher suites (the low 16 bits of SSL_CIPHER_get_id) */
#define TLS_SUITE_AES_128_GCM_SHA256 0x1301
#define TLS_SUITE_CHACHA20_POLY1305_SHA256 0x1303

struct tls_rec_dir {
	void *cx;           /* EVP_CIPHER_CTX *, keyed */
	const void *cipher; /* EVP_CIPHER * */
	bool enc;
	uint8_t secret[TLS_REC_SECRET];
	uint8_t iv[12];
	uint64_t seq;
};

/* Keys one direction from its traffic secret. 0, -ENOTSUP (another suite),
 * -ENOMEM or -EIO. */
int tls_rec_init(struct tls_rec_dir *d, unsigned suite, const uint8_t secret[TLS_REC_SECRET],
		 bool enc);
/* KeyUpdate (R2): the next generation's secret, key and IV. 0 or -EIO. */
int tls_rec_update(struct tls_rec_dir *d);
void tls_rec_free(struct tls_rec_dir *d); /* wipes; an unused one: no-op */

/* Seals one record of `type` around len <= TLS_REC_PLAIN_MAX bytes into out
 * (room for len + TLS_REC_OVERHEAD). Bytes written, or -EIO. */
long tls_rec_seal(struct tls_rec_dir *d, uint8_t type, const void *pt, size_t len, uint8_t *out);

/* The header of the next record: 1 with *len = its ciphertext length (after
 * the header), 0 when fewer than TLS_REC_HDR bytes are there, -EBADMSG when
 * the bytes are no TLS 1.3 protected record. */
int tls_rec_header(const uint8_t *p, size_t n, size_t *len);
/* Opens the record whose header is hdr and ciphertext ct (ctlen from
 * tls_rec_header) into out (room for ctlen - TLS_REC_TAG bytes; out may be
 * ct). Writes plaintext there before the tag is checked: on an error the
 * bytes in out are garbage and must not be used. Returns the length of the
 * content and its type in *type, -EBADMSG when the tag does not verify or
 * the inner plaintext has no content type, -EIO. */
long tls_rec_open(struct tls_rec_dir *d, const uint8_t *hdr, const uint8_t *ct, size_t ctlen,
		  uint8_t *out, uint8_t *type);
/* The content type and length of an inner plaintext (zero padding
 * stripped): the length, or -EBADMSG when it is all zeros. */
long tls_rec_inner(const uint8_t *p, size_t n, uint8_t *type);

/* A handshake record's message after the handshake: KeyUpdate (1, with
 * *request = update_requested) or NewSessionTicket (0: ignored);
 * -EBADMSG for anything else or a malformed message. */
int tls_rec_post_handshake(const uint8_t *p, size_t n, bool *request);

#endif
