/* Replication codec: see repl_codec.h. Every check on a received field is
 * here; the connection code acts only on what passed. */
#include "repl_codec.h"

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#define L16(x) ((x) = le16toh(x))
#define L32(x) ((x) = le32toh(x))
#define L64(x) ((x) = le64toh(x))
#define S16(x) ((x) = htole16(x))
#define S32(x) ((x) = htole32(x))
#define S64(x) ((x) = htole64(x))
/* A refusal with the rule it broke (shown when the connection ends). */
#define BAD(m, rule) ((m)->why = (rule), -EBADMSG)

/* Fixed body size per type; 0 for an unknown type (and BITMAP_END). */
static uint32_t fixed_len(uint16_t type)
{
	switch (type) {
	case REPL_HELLO: return sizeof(struct repl_hello);
	case REPL_AUTH: return sizeof(struct repl_auth);
	case REPL_STATE: return sizeof(struct repl_state);
	case REPL_CONTRACT: return sizeof(struct repl_contract);
	case REPL_BITMAP: return sizeof(struct repl_bitmap);
	case REPL_WRITE:
	case REPL_RS_DATA:
	case REPL_TRIM:
	case REPL_ZERO:
	case REPL_RS_ZERO:
	case REPL_READ:
	case REPL_RDATA: return sizeof(struct repl_io);
	case REPL_CSUM: return sizeof(struct repl_csum);
	case REPL_FLUSH: return sizeof(struct repl_flush);
	case REPL_ACK: return sizeof(struct repl_ack);
	case REPL_PING:
	case REPL_PONG:
	case REPL_SWITCH: return sizeof(struct repl_ping);
	case REPL_RS_DONE:
	case REPL_RS_START:
	case REPL_SET_GEN: return sizeof(struct repl_gen);
	default: return 0;
	}
}

int repl_decode_hdr(const uint8_t in[sizeof(struct repl_hdr)], struct repl_msg *m)
{
	struct repl_hdr h;
	uint32_t fl;

	memcpy(&h, in, sizeof(h));
	L32(h.magic);
	L16(h.type);
	L16(h.flags);
	L32(h.len);
	L32(h.reserved);
	memset(m, 0, sizeof(*m));
	if (h.magic != REPL_HDR_MAGIC)
		return BAD(m, "bad magic");
	if (h.reserved)
		return BAD(m, "reserved field not zero");
	if (h.flags && (h.type != REPL_WRITE && h.type != REPL_RS_DATA))
		return BAD(m, "flags on a message that has none");
	if (h.flags & ~REPL_HF_CODECS)
		return BAD(m, "unknown flags");
	if (h.flags == REPL_HF_CODECS)
		return BAD(m, "two compression codecs");
	fl = fixed_len(h.type);
	switch (h.type) {
	case REPL_BITMAP_END:
		if (h.len)
			return BAD(m, "length impossible for the type");
		break;
	case REPL_ERROR:
		if (h.len == 0 || h.len > REPL_MAX_ERROR)
			return BAD(m, "length impossible for the type");
		break;
	case REPL_META:
		if (h.len > REPL_MAX_META)
			return BAD(m, "length impossible for the type");
		break;
	case REPL_WRITE:
	case REPL_RS_DATA:
	case REPL_RDATA:
		if (h.len <= fl || h.len - fl > REPL_MAX_DATA)
			return BAD(m, "payload length out of range");
		break;
	case REPL_BITMAP:
		if (h.len <= fl || h.len - fl > REPL_MAX_BITMAP_WORDS * 8u || (h.len - fl) % 8)
			return BAD(m, "length impossible for the type");
		break;
	case REPL_ACK:
		if (h.len <= fl || h.len - fl > REPL_MAX_ACKS * sizeof(struct repl_ack_entry) ||
		    (h.len - fl) % sizeof(struct repl_ack_entry))
			return BAD(m, "length impossible for the type");
		break;
	default:
		if (fl == 0)
			return BAD(m, "unknown type");
		if (h.len != fl)
			return BAD(m, "length impossible for the type");
	}
	m->type = h.type;
	m->hflags = h.flags;
	m->len = h.len;
	return 0;
}

uint32_t repl_body_needed(const struct repl_msg *m)
{
	if (m->type == REPL_WRITE || m->type == REPL_RS_DATA || m->type == REPL_RDATA)
		return sizeof(struct repl_io);
	return m->len;
}

static int name_ok(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	if (n == 0 || n >= cap || n > 32)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return 0;
	}
	for (size_t i = n; i < cap; i++) /* NUL padded: nothing hides after the name */
		if (s[i])
			return 0;
	return 1;
}

static int zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

int repl_decode_body(const uint8_t *in, struct repl_msg *m)
{
	uint32_t fl = fixed_len(m->type);

	switch (m->type) {
	case REPL_HELLO: {
		struct repl_hello *h = &m->u.hello;
		memcpy(h, in, sizeof(*h));
		L64(h->magic);
		L16(h->proto_min);
		L16(h->proto_max);
		L32(h->reserved0);
		L64(h->features);
		if (h->magic != REPL_HELLO_MAGIC || h->proto_min == 0 ||
		    h->proto_min > h->proto_max || h->reserved0 ||
		    !zero(h->reserved, sizeof(h->reserved)) ||
		    !name_ok(h->cluster, sizeof(h->cluster)) || !name_ok(h->node, sizeof(h->node)) ||
		    !name_ok(h->volume, sizeof(h->volume)))
			return -EBADMSG;
		return 0;
	}
	case REPL_AUTH:
		memcpy(&m->u.auth, in, sizeof(m->u.auth));
		return 0;
	case REPL_STATE: {
		struct repl_state *s = &m->u.state;
		memcpy(s, in, sizeof(*s));
		L64(s->size);
		L64(s->gen_current);
		L64(s->gen_bitmap);
		for (unsigned i = 0; i < REPL_HISTORY; i++)
			L64(s->gen_history[i]);
		L32(s->flags);
		L16(s->reserved0);
		L32(s->bm_granularity);
		L32(s->reserved1);
		L64(s->oos_bits);
		if ((s->flags & ~REPL_ST_KNOWN) || s->role > REPL_ROLE_PRIMARY || s->disk > 5 ||
		    s->reserved0 || s->reserved1 || s->size == 0 || s->size % 4096 ||
		    s->bm_granularity < 4096 || s->bm_granularity > (64u << 20) ||
		    (s->bm_granularity & (s->bm_granularity - 1)))
			return -EBADMSG;
		return 0;
	}
	case REPL_CONTRACT: {
		struct repl_contract *k = &m->u.contract;
		memcpy(k, in, sizeof(*k));
		L16(k->reserved0);
		L32(k->peer_timeout_ms);
		L32(k->witness_timeout_ms);
		L64(k->async_backlog);
		L64(k->async_max_lag_ms);
		L32(k->bm_granularity);
		L32(k->reserved1);
		L64(k->resync_rate);
		L64(k->resync_min_rate);
		L32(k->quorum_timeout_ms);
		if (k->reserved0 || k->reserved1 || !zero(k->reserved2, sizeof(k->reserved2)) ||
		    !zero(k->reserved, sizeof(k->reserved)))
			return BAD(m, "reserved field not zero");
		if (k->mode > REPL_CT_ASYNC || k->on_congestion > 1 || k->failover > 1 ||
		    k->on_disk_failure > 1 || k->on_io_error > 1 || k->compression > 2 ||
		    (k->flags & ~REPL_CT_KNOWN))
			return BAD(m, "contract value out of range");
		if (!name_ok(k->first, sizeof(k->first)) ||
		    !name_ok(k->second, sizeof(k->second)) || strcmp(k->first, k->second) == 0)
			return BAD(m, "contract names no two nodes");
		if (k->peer_timeout_ms == 0 || k->witness_timeout_ms == 0 ||
		    k->quorum_timeout_ms == 0 || k->bm_granularity < 4096 ||
		    (k->bm_granularity & (k->bm_granularity - 1)))
			return BAD(m, "contract value out of range");
		return 0;
	}
	case REPL_BITMAP: {
		struct repl_bitmap *b = &m->u.bitmap;
		memcpy(b, in, sizeof(*b));
		L64(b->start);
		L32(b->words);
		L32(b->reserved);
		if (b->reserved || b->words == 0 || (uint64_t)b->words * 8 != m->len - fl ||
		    b->start > (UINT64_MAX >> 8))
			return -EBADMSG;
		m->var = in + fl;
		m->var_len = m->len - fl;
		return 0;
	}
	case REPL_BITMAP_END:
		return 0;
	case REPL_META:
		m->var = in;
		m->var_len = m->len;
		return 0;
	case REPL_ERROR:
		for (uint32_t i = 0; i < m->len; i++)
			if (in[i] < 0x20 || in[i] > 0x7e)
				return -EBADMSG;
		m->var = in;
		m->var_len = m->len;
		return 0;
	case REPL_WRITE:
	case REPL_RS_DATA:
	case REPL_TRIM:
	case REPL_ZERO:
	case REPL_RS_ZERO:
	case REPL_CSUM:
	case REPL_READ:
	case REPL_RDATA: {
		struct repl_io *io = &m->u.io;
		memcpy(io, in, sizeof(*io));
		L64(io->seq);
		L64(io->off);
		L32(io->len);
		L32(io->flags);
		if (io->seq == 0 || io->len == 0 || (io->flags & ~REPL_F_KNOWN) ||
		    io->off > UINT64_MAX - io->len || io->off % 512 || io->len % 512)
			return -EBADMSG;
		if ((m->type == REPL_RS_DATA || m->type == REPL_RS_ZERO || m->type == REPL_CSUM ||
		     m->type == REPL_READ || m->type == REPL_RDATA) &&
		    io->flags)
			return -EBADMSG;
		if (m->type == REPL_READ && io->len > REPL_MAX_DATA)
			return BAD(m, "read longer than the largest write");
		if (m->type == REPL_RDATA) {
			if (io->len != m->len - fl)
				return BAD(m, "read data of another length than its header says");
			m->data_len = io->len;
		}
		if (m->type == REPL_CSUM) {
			/* the receiver reads len bytes: as much as a WRITE carries */
			if (io->len > REPL_MAX_DATA)
				return -EBADMSG;
			memcpy(m->digest, in + sizeof(*io), REPL_DIGEST_LEN);
		}
		if (m->type == REPL_WRITE || m->type == REPL_RS_DATA) {
			/* compressed: fewer bytes than the data they stand for */
			if (m->hflags && io->len > REPL_MAX_DATA)
				return BAD(m, "compressed data longer than the largest write");
			if (m->hflags && m->len - fl >= io->len)
				return BAD(m, "compressed payload not smaller than its data");
			if (!m->hflags && io->len != m->len - fl)
				return -EBADMSG;
			m->data_len = m->len - fl;
		}
		return 0;
	}
	case REPL_FLUSH:
		memcpy(&m->u.flush, in, sizeof(m->u.flush));
		L64(m->u.flush.seq);
		return m->u.flush.seq ? 0 : -EBADMSG;
	case REPL_ACK: {
		struct repl_ack *a = &m->u.ack;
		memcpy(a, in, sizeof(*a));
		L32(a->count);
		L32(a->reserved);
		if (a->reserved || a->count == 0 ||
		    (uint64_t)a->count * sizeof(struct repl_ack_entry) != m->len - fl)
			return -EBADMSG;
		m->var = in + fl;
		m->var_len = m->len - fl;
		for (uint32_t i = 0; i < a->count; i++) {
			struct repl_ack_entry e;
			memcpy(&e, m->var + i * sizeof(e), sizeof(e));
			L64(e.seq);
			L32(e.res);
			L32(e.reserved);
			if (e.seq == 0 || e.reserved || e.res > REPL_ACK_DIFFERS || e.res < -4095)
				return -EBADMSG;
		}
		return 0;
	}
	case REPL_PING:
	case REPL_PONG:
	case REPL_SWITCH:
		memcpy(&m->u.ping, in, sizeof(m->u.ping));
		L64(m->u.ping.cookie);
		if (m->type == REPL_SWITCH && m->u.ping.cookie != REPL_SW_DEMOTE &&
		    m->u.ping.cookie != REPL_SW_PROMOTE)
			return -EBADMSG;
		return 0;
	case REPL_RS_DONE:
	case REPL_RS_START:
	case REPL_SET_GEN:
		memcpy(&m->u.gen, in, sizeof(m->u.gen));
		L64(m->u.gen.gen_current);
		L64(m->u.gen.gen_bitmap);
		/* 0 means "no data" and 1 "created empty": never a new generation. */
		if (m->u.gen.gen_current < 2)
			return -EBADMSG;
		return 0;
	default:
		return -EBADMSG;
	}
}

uint64_t repl_bitmap_word(const struct repl_msg *m, uint32_t i)
{
	uint64_t w;
	memcpy(&w, m->var + (size_t)i * 8, 8);
	return le64toh(w);
}

void repl_ack_entry(const struct repl_msg *m, uint32_t i, uint64_t *seq, int32_t *res)
{
	struct repl_ack_entry e;
	memcpy(&e, m->var + (size_t)i * sizeof(e), sizeof(e));
	*seq = le64toh(e.seq);
	*res = (int32_t)le32toh((uint32_t)e.res);
}

/* ---- encoders ---- */

size_t repl_enc_hdr(uint8_t *out, uint16_t type, uint32_t len)
{
	struct repl_hdr h = { .magic = REPL_HDR_MAGIC, .type = type, .len = len };
	S32(h.magic);
	S16(h.type);
	S32(h.len);
	memcpy(out, &h, sizeof(h));
	return sizeof(h);
}

size_t repl_enc_hello(uint8_t *out, const struct repl_hello *in)
{
	struct repl_hello h = *in;
	size_t n = repl_enc_hdr(out, REPL_HELLO, sizeof(h));
	S64(h.magic);
	S16(h.proto_min);
	S16(h.proto_max);
	S32(h.reserved0);
	S64(h.features);
	memcpy(out + n, &h, sizeof(h));
	return n + sizeof(h);
}

size_t repl_enc_auth(uint8_t *out, const struct repl_auth *a)
{
	size_t n = repl_enc_hdr(out, REPL_AUTH, sizeof(*a));
	memcpy(out + n, a, sizeof(*a));
	return n + sizeof(*a);
}

size_t repl_enc_state(uint8_t *out, const struct repl_state *in)
{
	struct repl_state s = *in;
	size_t n = repl_enc_hdr(out, REPL_STATE, sizeof(s));
	S64(s.size);
	S64(s.gen_current);
	S64(s.gen_bitmap);
	for (unsigned i = 0; i < REPL_HISTORY; i++)
		S64(s.gen_history[i]);
	S32(s.flags);
	S16(s.reserved0);
	S32(s.bm_granularity);
	S32(s.reserved1);
	S64(s.oos_bits);
	memcpy(out + n, &s, sizeof(s));
	return n + sizeof(s);
}

size_t repl_enc_contract(uint8_t *out, const struct repl_contract *in)
{
	struct repl_contract k = *in;
	size_t n = repl_enc_hdr(out, REPL_CONTRACT, sizeof(k));
	S16(k.reserved0);
	S32(k.peer_timeout_ms);
	S32(k.witness_timeout_ms);
	S64(k.async_backlog);
	S64(k.async_max_lag_ms);
	S32(k.bm_granularity);
	S32(k.reserved1);
	S64(k.resync_rate);
	S64(k.resync_min_rate);
	S32(k.quorum_timeout_ms);
	memcpy(out + n, &k, sizeof(k));
	return n + sizeof(k);
}

size_t repl_enc_bitmap(uint8_t *out, uint64_t start, uint32_t words)
{
	struct repl_bitmap b = { .start = start, .words = words };
	size_t n = repl_enc_hdr(out, REPL_BITMAP, (uint32_t)(sizeof(b) + words * 8u));
	S64(b.start);
	S32(b.words);
	memcpy(out + n, &b, sizeof(b));
	return n + sizeof(b);
}

void repl_put_word(uint8_t *out, uint64_t w)
{
	w = htole64(w);
	memcpy(out, &w, 8);
}

size_t repl_enc_io(uint8_t *out, uint16_t type, const struct repl_io *in)
{
	struct repl_io io = *in;
	uint32_t body =
		sizeof(io) +
		((type == REPL_WRITE || type == REPL_RS_DATA || type == REPL_RDATA) ? io.len : 0);
	size_t n = repl_enc_hdr(out, type, body);
	S64(io.seq);
	S64(io.off);
	S32(io.len);
	S32(io.flags);
	memcpy(out + n, &io, sizeof(io));
	return n + sizeof(io);
}

void repl_enc_packed(uint8_t *hdr, uint16_t codec, uint32_t wire_len)
{
	uint16_t f = htole16(codec);
	uint32_t len = htole32((uint32_t)sizeof(struct repl_io) + wire_len);

	memcpy(hdr + offsetof(struct repl_hdr, flags), &f, sizeof(f));
	memcpy(hdr + offsetof(struct repl_hdr, len), &len, sizeof(len));
}

size_t repl_enc_csum(uint8_t *out, const struct repl_io *in, const uint8_t digest[REPL_DIGEST_LEN])
{
	struct repl_io io = *in;
	size_t n = repl_enc_hdr(out, REPL_CSUM, sizeof(struct repl_csum));
	S64(io.seq);
	S64(io.off);
	S32(io.len);
	S32(io.flags);
	memcpy(out + n, &io, sizeof(io));
	memcpy(out + n + sizeof(io), digest, REPL_DIGEST_LEN);
	return n + sizeof(struct repl_csum);
}

size_t repl_enc_flush(uint8_t *out, uint64_t seq)
{
	size_t n = repl_enc_hdr(out, REPL_FLUSH, 8);
	repl_put_word(out + n, seq);
	return n + 8;
}

size_t repl_enc_ack_hdr(uint8_t *out, uint32_t count)
{
	struct repl_ack a = { .count = count };
	size_t n = repl_enc_hdr(out, REPL_ACK,
				(uint32_t)(sizeof(a) + count * sizeof(struct repl_ack_entry)));
	S32(a.count);
	memcpy(out + n, &a, sizeof(a));
	return n + sizeof(a);
}

void repl_enc_ack_entry(uint8_t *out, uint64_t seq, int32_t res)
{
	struct repl_ack_entry e = { .seq = seq, .res = res };
	S64(e.seq);
	e.res = (int32_t)htole32((uint32_t)e.res);
	memcpy(out, &e, sizeof(e));
}

size_t repl_enc_ping(uint8_t *out, uint16_t type, uint64_t cookie)
{
	size_t n = repl_enc_hdr(out, type, 8);
	repl_put_word(out + n, cookie);
	return n + 8;
}

size_t repl_enc_gen(uint8_t *out, uint16_t type, uint64_t current, uint64_t bitmap)
{
	size_t n = repl_enc_hdr(out, type, 16);
	repl_put_word(out + n, current);
	repl_put_word(out + n + 8, bitmap);
	return n + 16;
}

size_t repl_enc_error(uint8_t *out, const char *msg)
{
	size_t len = strnlen(msg, REPL_MAX_ERROR);
	size_t n = repl_enc_hdr(out, REPL_ERROR, (uint32_t)(len ? len : 1));
	if (!len) {
		out[n] = '?';
		return n + 1;
	}
	for (size_t i = 0; i < len; i++)
		out[n + i] = (msg[i] >= 0x20 && msg[i] <= 0x7e) ? (uint8_t)msg[i] : '?';
	return n + len;
}

size_t repl_enc_empty(uint8_t *out, uint16_t type)
{
	return repl_enc_hdr(out, type, 0);
}
