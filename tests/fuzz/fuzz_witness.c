/* libFuzzer harness for the witness codec: every byte a node, an admin
 * client or a witness controls. The input is a stream of messages as it
 * arrives on a session, after one leading mode byte (bit 0: the header magic
 * is forced valid, so the fuzzer spends its time behind the first check).
 * Each header is decoded, then exactly its body is copied into a heap buffer
 * of that size (ASan sees any read past it) and decoded. For an accepted
 * fixed-size message, encoding the decoded struct must give the received
 * bytes back. The stream ends at the first refused or incomplete message.
 * A violated property calls abort(). */
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/wit/wit_codec.h"

#include "fuzz.h"

#define HDR sizeof(struct wit_hdr)

static size_t reencode(const struct wit_msg *m, uint8_t *out)
{
	switch (m->type) {
	case WIT_HELLO: {
		/* The encoder offers only this build's version; a peer may
		 * offer a range, so the range is put back before comparing. */
		size_t n = wit_enc_hello(out, m->u.hello.cluster, m->u.hello.name, m->u.hello.nonce,
					 m->u.hello.flags, m->u.hello.timeout_ms);
		uint16_t lo = htole16(m->u.hello.proto_min), hi = htole16(m->u.hello.proto_max);

		memcpy(out + HDR + offsetof(struct wit_hello, proto_min), &lo, sizeof(lo));
		memcpy(out + HDR + offsetof(struct wit_hello, proto_max), &hi, sizeof(hi));
		return n;
	}
	case WIT_AUTH: return wit_enc_auth(out, m->u.auth.mac);
	case WIT_PING:
	case WIT_PONG: return wit_enc_ping(out, m->type, m->u.ping.cookie);
	case WIT_REPORT:
	case WIT_CLAIM: return wit_enc_vol(out, m->type, &m->u.vol);
	case WIT_REPORT_ACK:
	case WIT_CLAIM_REPLY: return wit_enc_verdict(out, m->type, &m->u.verd);
	default: return 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mode, hb[HDR], out[WIT_ENC_MAX];
	struct wit_msg m;

	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	while (size >= HDR) {
		uint8_t *body;
		size_t n;
		int rc;

		memcpy(hb, data, HDR);
		if (mode & 1) {
			uint32_t magic = htole32(WIT_HDR_MAGIC);
			memcpy(hb, &magic, 4);
		}
		if (wit_decode_hdr(hb, &m))
			return 0;
		CHECK(m.type >= 1 && m.type <= WIT_TYPE_MAX);
		CHECK(m.len <= WIT_MAX_STATUS);
		data += HDR;
		size -= HDR;
		if (size < m.len)
			return 0;
		body = malloc(m.len ? m.len : 1);
		CHECK(body);
		memcpy(body, data, m.len);
		rc = wit_decode_body(body, &m);
		if (rc == 0) {
			if (m.type == WIT_ERROR || m.type == WIT_STATUS)
				CHECK(m.var == body && m.var_len == m.len);
			if (m.type == WIT_HELLO || m.type == WIT_REPORT || m.type == WIT_CLAIM) {
				const char *name =
					m.type == WIT_HELLO ? m.u.hello.name : m.u.vol.volume;
				CHECK(memchr(name, 0, WIT_NAME_LEN) != NULL && name[0]);
			}
			n = reencode(&m, out);
			if (n) {
				CHECK(n == HDR + m.len);
				CHECK(memcmp(out, hb, HDR) == 0);
				CHECK(memcmp(out + HDR, body, m.len) == 0);
			}
		}
		free(body);
		if (rc)
			return 0;
		data += m.len;
		size -= m.len;
	}
	return 0;
}
