/* libFuzzer harness for the TLS 1.3 record layer (src/net/tls_rec.c). The
 * first byte selects how the rest is used:
 *   0  a byte stream from the peer: records are cut with tls_rec_header and
 *      opened with a fixed key, as the receive side does; every header it
 *      accepts has a length within the bounds, and what opens (nothing a
 *      fuzzer can forge without the key) has a content type;
 *   1  an inner plaintext sealed with that key, then opened: the record
 *      opens to the same bytes, and a copy with any one byte flipped
 *      does not open; the inner parsers (content type, post-handshake
 *      message) take the plaintext as the peer could send it. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../src/net/tls_rec.h"

#include "fuzz.h"

static uint8_t rec[TLS_REC_HDR + TLS_REC_CIPHER_MAX], out[TLS_REC_CIPHER_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t secret[TLS_REC_SECRET] = { 7 };
	struct tls_rec_dir w, r;
	const uint8_t *p = data + 1;
	size_t n = size ? size - 1 : 0, len;
	uint8_t type;
	long k;
	int h;

	if (!size)
		return 0;
	CHECK(tls_rec_init(&r, TLS_SUITE_AES_128_GCM_SHA256, secret, false) == 0);
	if (data[0] & 1) {
		bool request;
		size_t m = n > TLS_REC_PLAIN_MAX ? TLS_REC_PLAIN_MAX : n;
		CHECK(tls_rec_init(&w, TLS_SUITE_AES_128_GCM_SHA256, secret, true) == 0);
		k = tls_rec_seal(&w, TLS_CT_APPDATA, p, m, rec);
		CHECK(k == (long)(m + TLS_REC_OVERHEAD));
		CHECK(tls_rec_header(rec, (size_t)k, &len) == 1 && len == m + 1 + TLS_REC_TAG);
		k = tls_rec_open(&r, rec, rec + TLS_REC_HDR, len, out, &type);
		CHECK(k == (long)m && type == TLS_CT_APPDATA && !memcmp(out, p, m));
		/* the same record again (seq moved on), and one byte flipped */
		if (m) {
			struct tls_rec_dir r2;
			CHECK(tls_rec_init(&r2, TLS_SUITE_AES_128_GCM_SHA256, secret, false) == 0);
			rec[TLS_REC_HDR + p[0] % len] ^= 0x40;
			CHECK(tls_rec_open(&r2, rec, rec + TLS_REC_HDR, len, out, &type) ==
			      -EBADMSG);
			tls_rec_free(&r2);
		}
		k = tls_rec_inner(p, n, &type);
		CHECK(k == -EBADMSG || (k >= 0 && (size_t)k < n));
		h = tls_rec_post_handshake(p, n, &request);
		CHECK(h == -EBADMSG || h == 0 || (h == 1 && n == 5));
		tls_rec_free(&w);
		tls_rec_free(&r);
		return 0;
	}
	while ((h = tls_rec_header(p, n, &len)) == 1) {
		CHECK(len >= 1 + TLS_REC_TAG && len <= TLS_REC_CIPHER_MAX);
		if (n < TLS_REC_HDR + len)
			break;
		k = tls_rec_open(&r, p, p + TLS_REC_HDR, len, out, &type);
		CHECK(k == -EBADMSG || (k >= 0 && (size_t)k < len - TLS_REC_TAG));
		p += TLS_REC_HDR + len;
		n -= TLS_REC_HDR + len;
	}
	CHECK(h == 0 || h == -EBADMSG || h == 1);
	tls_rec_free(&r);
	return 0;
}
