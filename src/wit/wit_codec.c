/* Witness codec: see wit_codec.h. Every check on a received field is here;
 * the session code acts only on what passed. */
#include "wit_codec.h"

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

static uint32_t fixed_len(uint16_t type)
{
	switch (type) {
	case WIT_HELLO: return sizeof(struct wit_hello);
	case WIT_AUTH: return sizeof(struct wit_auth);
	case WIT_PING:
	case WIT_PONG: return sizeof(struct wit_ping);
	case WIT_REPORT:
	case WIT_CLAIM: return sizeof(struct wit_vol_msg);
	case WIT_REPORT_ACK:
	case WIT_CLAIM_REPLY: return sizeof(struct wit_verdict);
	default: return 0;
	}
}

int wit_decode_hdr(const uint8_t in[sizeof(struct wit_hdr)], struct wit_msg *m)
{
	struct wit_hdr h;

	memcpy(&h, in, sizeof(h));
	memset(m, 0, sizeof(*m));
	h.magic = le32toh(h.magic);
	h.type = le16toh(h.type);
	h.len = le32toh(h.len);
	if (h.magic != WIT_HDR_MAGIC || h.reserved || h.type == 0 || h.type > WIT_TYPE_MAX)
		return -EBADMSG;
	switch (h.type) {
	case WIT_ERROR:
		if (h.len == 0 || h.len > WIT_MAX_ERROR)
			return -EBADMSG;
		break;
	case WIT_STATUS:
		if (h.len > WIT_MAX_STATUS)
			return -EBADMSG;
		break;
	case WIT_STATUS_REQ:
		if (h.len)
			return -EBADMSG;
		break;
	default:
		if (h.len != fixed_len(h.type))
			return -EBADMSG;
	}
	m->type = h.type;
	m->len = h.len;
	return 0;
}

/* A name field: NUL-terminated inside, nothing but NULs after the end, and
 * (when required) not empty. */
static bool name_ok(const char *s, bool required)
{
	const char *end = memchr(s, 0, WIT_NAME_LEN);

	if (!end || (required && end == s))
		return false;
	for (const char *p = end; p < s + WIT_NAME_LEN; p++)
		if (*p)
			return false;
	for (const char *p = s; p < end; p++)
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
			return false;
	return true;
}

int wit_decode_body(const uint8_t *in, struct wit_msg *m)
{
	switch (m->type) {
	case WIT_HELLO: {
		struct wit_hello *h = &m->u.hello;
		memcpy(h, in, sizeof(*h));
		h->magic = le64toh(h->magic);
		h->proto_min = le16toh(h->proto_min);
		h->proto_max = le16toh(h->proto_max);
		h->flags = le32toh(h->flags);
		h->timeout_ms = le64toh(h->timeout_ms);
		if (h->magic != WIT_HELLO_MAGIC || h->proto_min == 0 ||
		    h->proto_min > h->proto_max || (h->flags & ~WIT_HELLO_F_ADMIN) ||
		    !name_ok(h->cluster, true) || !name_ok(h->name, true))
			return -EBADMSG;
		return 0;
	}
	case WIT_AUTH: memcpy(&m->u.auth, in, sizeof(m->u.auth)); return 0;
	case WIT_PING:
	case WIT_PONG:
		memcpy(&m->u.ping, in, sizeof(m->u.ping));
		m->u.ping.cookie = le64toh(m->u.ping.cookie);
		return 0;
	case WIT_REPORT:
	case WIT_CLAIM: {
		struct wit_vol_msg *v = &m->u.vol;
		memcpy(v, in, sizeof(*v));
		v->seq = le64toh(v->seq);
		v->gen = le64toh(v->gen);
		for (unsigned i = 0; i < WIT_HISTORY; i++)
			v->history[i] = le64toh(v->history[i]);
		v->flags = le32toh(v->flags);
		if (!name_ok(v->volume, true) || v->reserved || (v->flags & ~WIT_F_KNOWN))
			return -EBADMSG;
		if (m->type == WIT_REPORT
			    ? (v->flags & (WIT_F_FORCE | WIT_F_ADMIN | WIT_F_PEER_GONE)) != 0 ||
				      ((v->flags & WIT_F_RELEASE) && (v->flags & WIT_F_PRIMARY))
			    : (v->flags & ~(WIT_F_FORCE | WIT_F_ADMIN | WIT_F_PEER_GONE)) != 0 ||
				      ((v->flags & WIT_F_FORCE) && !(v->flags & WIT_F_ADMIN)))
			return -EBADMSG;
		return 0;
	}
	case WIT_REPORT_ACK:
	case WIT_CLAIM_REPLY: {
		struct wit_verdict *v = &m->u.verd;
		memcpy(v, in, sizeof(*v));
		v->seq = le64toh(v->seq);
		v->result = le32toh(v->result);
		v->reason = le32toh(v->reason);
		v->gen = le64toh(v->gen);
		v->epoch = le64toh(v->epoch);
		if (!name_ok(v->volume, true) || !name_ok(v->primary, false) ||
		    v->result > WIT_R_DENIED || v->reason > WIT_REASON_MAX)
			return -EBADMSG;
		if (m->type == WIT_REPORT_ACK ? v->result == WIT_R_DENIED
					      : v->result == WIT_R_DEPOSED)
			return -EBADMSG;
		return 0;
	}
	case WIT_ERROR:
	case WIT_STATUS:
		m->var = in;
		m->var_len = m->len;
		return 0;
	case WIT_STATUS_REQ: return 0;
	}
	return -EBADMSG;
}

static size_t hdr(uint8_t *out, uint16_t type, uint32_t len)
{
	struct wit_hdr h = { .magic = htole32(WIT_HDR_MAGIC),
			     .type = htole16(type),
			     .reserved = 0,
			     .len = htole32(len) };
	memcpy(out, &h, sizeof(h));
	return sizeof(h);
}

static void put_name(char dst[WIT_NAME_LEN], const char *src)
{
	size_t n = strnlen(src, WIT_NAME_LEN - 1);
	memset(dst, 0, WIT_NAME_LEN);
	memcpy(dst, src, n);
}

size_t wit_enc_hello(uint8_t *out, const char *cluster, const char *name,
		     const uint8_t nonce[WIT_NONCE_LEN], uint32_t flags, uint64_t timeout_ms)
{
	struct wit_hello h;

	memset(&h, 0, sizeof(h));
	h.magic = htole64(WIT_HELLO_MAGIC);
	h.proto_min = htole16(WIT_PROTO);
	h.proto_max = htole16(WIT_PROTO);
	h.flags = htole32(flags);
	put_name(h.cluster, cluster);
	put_name(h.name, name);
	memcpy(h.nonce, nonce, WIT_NONCE_LEN);
	h.timeout_ms = htole64(timeout_ms);
	hdr(out, WIT_HELLO, sizeof(h));
	memcpy(out + sizeof(struct wit_hdr), &h, sizeof(h));
	return sizeof(struct wit_hdr) + sizeof(h);
}

size_t wit_enc_auth(uint8_t *out, const uint8_t mac[WIT_MAC_LEN])
{
	hdr(out, WIT_AUTH, WIT_MAC_LEN);
	memcpy(out + sizeof(struct wit_hdr), mac, WIT_MAC_LEN);
	return sizeof(struct wit_hdr) + WIT_MAC_LEN;
}

size_t wit_enc_ping(uint8_t *out, uint16_t type, uint64_t cookie)
{
	uint64_t c = htole64(cookie);
	hdr(out, type, sizeof(c));
	memcpy(out + sizeof(struct wit_hdr), &c, sizeof(c));
	return sizeof(struct wit_hdr) + sizeof(c);
}

size_t wit_enc_vol(uint8_t *out, uint16_t type, const struct wit_vol_msg *v)
{
	struct wit_vol_msg w;

	memset(&w, 0, sizeof(w));
	put_name(w.volume, v->volume);
	w.seq = htole64(v->seq);
	w.gen = htole64(v->gen);
	for (unsigned i = 0; i < WIT_HISTORY; i++)
		w.history[i] = htole64(v->history[i]);
	w.flags = htole32(v->flags);
	hdr(out, type, sizeof(w));
	memcpy(out + sizeof(struct wit_hdr), &w, sizeof(w));
	return sizeof(struct wit_hdr) + sizeof(w);
}

size_t wit_enc_verdict(uint8_t *out, uint16_t type, const struct wit_verdict *v)
{
	struct wit_verdict w;

	memset(&w, 0, sizeof(w));
	put_name(w.volume, v->volume);
	put_name(w.primary, v->primary);
	w.seq = htole64(v->seq);
	w.result = htole32(v->result);
	w.reason = htole32(v->reason);
	w.gen = htole64(v->gen);
	w.epoch = htole64(v->epoch);
	hdr(out, type, sizeof(w));
	memcpy(out + sizeof(struct wit_hdr), &w, sizeof(w));
	return sizeof(struct wit_hdr) + sizeof(w);
}

size_t wit_enc_text(uint8_t *out, uint16_t type, const char *text, size_t len)
{
	hdr(out, type, (uint32_t)len);
	memcpy(out + sizeof(struct wit_hdr), text, len);
	return sizeof(struct wit_hdr) + len;
}

size_t wit_enc_empty(uint8_t *out, uint16_t type)
{
	return hdr(out, type, 0);
}

const char *wit_reason_name(uint32_t reason)
{
	switch (reason) {
	case WIT_NONE: return "none";
	case WIT_NOT_SYNCED: return "the primary may have acknowledged writes this node lacks";
	case WIT_OLDER_DATA:
		return "this node's data generation is not the one the witness vouched for";
	case WIT_PRIMARY_ALIVE: return "the primary still holds its session with the witness";
	case WIT_NO_RECORD: return "no primary ever reported this volume to the witness";
	case WIT_NOT_MEMBER: return "the witness does not know this volume or node";
	}
	return "?";
}

void wit_mac(const char *secret, char dir, const uint8_t nonce_node[WIT_NONCE_LEN],
	     const uint8_t nonce_wit[WIT_NONCE_LEN], const char *cluster, const char *node,
	     uint8_t out[WIT_MAC_LEN])
{
	static const char label[] = "tandem-witness-auth-1";
	uint8_t msg[sizeof(label) - 1 + 1 + 2 * WIT_NONCE_LEN + 2 * WIT_NAME_LEN];
	unsigned int len = WIT_MAC_LEN;
	size_t n = 0;

	memcpy(msg, label, sizeof(label) - 1);
	n += sizeof(label) - 1;
	msg[n++] = (uint8_t)dir;
	memcpy(msg + n, nonce_node, WIT_NONCE_LEN);
	n += WIT_NONCE_LEN;
	memcpy(msg + n, nonce_wit, WIT_NONCE_LEN);
	n += WIT_NONCE_LEN;
	put_name((char *)msg + n, cluster);
	n += WIT_NAME_LEN;
	put_name((char *)msg + n, node);
	n += WIT_NAME_LEN;
	HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, n, out, &len);
}
