/* libFuzzer harness for the replication codec: every byte a peer controls.
 * The input is a stream of messages as it arrives on a connection, after one
 * leading mode byte that decides how headers are presented (so that the
 * fuzzer spends its time behind the first checks):
 *   bit 0: the header magic is forced valid;
 *   bit 1: the header's reserved field is forced to zero, and of its flags
 *          only the codec bits (REPL_HF_CODECS) are kept.
 * Messages are decoded one after the other as the connection code does it:
 * the 16-byte header, then repl_body_needed() bytes of body copied into a
 * heap buffer of exactly that size (ASan sees any read past it), then the
 * body; a raw WRITE / RS_DATA payload is skipped, a compressed one (of at
 * most UNPACK_MAX bytes of data) is decompressed as the receiver does it,
 * from an exact-size heap copy into an exact-size buffer: the result is 0 or
 * -EBADMSG, and data that decompressed goes through pack_compress and back
 * unchanged. The stream ends at the first refused or incomplete message.
 * Every accepted message must satisfy the limits the connection code relies
 * on; the var part must lie inside the body and is read through
 * repl_bitmap_word / repl_ack_entry; re-encoding the decoded message must
 * give the received bytes back, and decoding those must give the same
 * struct. A violated property calls abort(). */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/repl/repl_codec.h"
#include "../../src/repl/repl_pack.h"

#include "fuzz.h"

#define HDR sizeof(struct repl_hdr)
#define OUT_MAX (HDR + sizeof(struct repl_bitmap) + REPL_MAX_BITMAP_WORDS * 8u)
#define UNPACK_MAX (1u << 20) /* larger compressed payloads are only decoded */

static int name_ok(const char *s)
{
	size_t n = strnlen(s, REPL_NAME_LEN);

	if (n == 0 || n > 32)
		return 0;
	for (size_t i = n; i < REPL_NAME_LEN; i++)
		if (s[i])
			return 0;
	return 1;
}

/* The fixed part of the union that the type uses (CSUM: the io part; its
 * digest is m->digest). */
static size_t fixed_size(uint16_t type)
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
	case REPL_CSUM:
	case REPL_READ:
	case REPL_RDATA: return sizeof(struct repl_io);
	case REPL_FLUSH: return sizeof(struct repl_flush);
	case REPL_ACK: return sizeof(struct repl_ack);
	case REPL_PING:
	case REPL_PONG:
	case REPL_SWITCH: return sizeof(struct repl_ping);
	case REPL_RS_DONE:
	case REPL_RS_START:
	case REPL_SET_GEN: return sizeof(struct repl_gen);
	case REPL_BITMAP_END:
	case REPL_META:
	case REPL_ERROR: return 0;
	default: abort(); /* an unknown type was accepted */
	}
}

/* Checks what the connection code relies on for an accepted message. */
static void check_fields(const struct repl_msg *m, const uint8_t *body, uint32_t need)
{
	size_t fl = fixed_size(m->type);

	CHECK(need <= m->len);
	if (m->var) {
		CHECK(m->var >= body && m->var_len <= need &&
		      (size_t)(m->var - body) <= need - m->var_len);
		CHECK(m->var == body + fl);
		CHECK(m->var_len == m->len - fl);
	} else {
		CHECK(m->var_len == 0);
	}
	if (m->type == REPL_RDATA) { /* its data follows, never compressed */
		CHECK(need == sizeof(struct repl_io) && m->hflags == 0);
	} else if (m->type != REPL_WRITE && m->type != REPL_RS_DATA) {
		CHECK(m->data_len == 0);
		CHECK(need == m->len);
		CHECK(m->hflags == 0);
	}
	switch (m->type) {
	case REPL_HELLO: {
		const struct repl_hello *h = &m->u.hello;
		CHECK(m->len == sizeof(*h));
		CHECK(h->magic == REPL_HELLO_MAGIC);
		CHECK(h->proto_min >= 1 && h->proto_min <= h->proto_max);
		CHECK(name_ok(h->cluster) && name_ok(h->node) && name_ok(h->volume));
		for (size_t i = 0; i < sizeof(h->reserved); i++)
			CHECK(h->reserved[i] == 0);
		CHECK(h->reserved0 == 0);
		break;
	}
	case REPL_AUTH: CHECK(m->len == sizeof(struct repl_auth)); break;
	case REPL_STATE: {
		const struct repl_state *s = &m->u.state;
		uint32_t g = s->bm_granularity;
		CHECK(m->len == sizeof(*s));
		CHECK(s->size > 0 && s->size % 4096 == 0);
		CHECK(g >= 4096 && g <= (64u << 20) && (g & (g - 1)) == 0);
		CHECK(s->role <= REPL_ROLE_PRIMARY && s->disk <= 5);
		CHECK(!(s->flags & ~REPL_ST_KNOWN) && !s->reserved0 && !s->reserved1);
		break;
	}
	case REPL_CONTRACT: {
		const struct repl_contract *k = &m->u.contract;
		uint32_t g = k->bm_granularity;
		CHECK(m->len == sizeof(*k));
		CHECK(k->mode <= REPL_CT_ASYNC && k->on_congestion <= 1 && k->failover <= 1);
		CHECK(k->on_disk_failure <= 1 && k->on_io_error <= 1 && k->compression <= 2);
		CHECK(!(k->flags & ~REPL_CT_KNOWN) && !k->reserved0 && !k->reserved1);
		for (size_t i = 0; i < sizeof(k->reserved2); i++)
			CHECK(k->reserved2[i] == 0);
		for (size_t i = 0; i < sizeof(k->reserved); i++)
			CHECK(k->reserved[i] == 0);
		CHECK(name_ok(k->first) && name_ok(k->second) && strcmp(k->first, k->second));
		CHECK(k->peer_timeout_ms && k->witness_timeout_ms && k->quorum_timeout_ms);
		CHECK(g >= 4096 && (g & (g - 1)) == 0);
		break;
	}
	case REPL_BITMAP: {
		const struct repl_bitmap *b = &m->u.bitmap;
		uint64_t acc = 0;
		CHECK(b->words >= 1 && b->words <= REPL_MAX_BITMAP_WORDS);
		CHECK(m->var && m->var_len == b->words * 8u);
		CHECK(b->start <= (UINT64_MAX >> 8) && b->reserved == 0);
		for (uint32_t i = 0; i < b->words; i++)
			acc ^= repl_bitmap_word(m, i);
		(void)acc;
		break;
	}
	case REPL_BITMAP_END: CHECK(m->len == 0); break;
	case REPL_META:
		CHECK(m->var == body && m->var_len == m->len && m->len <= REPL_MAX_META);
		break;
	case REPL_ERROR:
		CHECK(m->var == body && m->var_len == m->len);
		CHECK(m->len >= 1 && m->len <= REPL_MAX_ERROR);
		for (uint32_t i = 0; i < m->var_len; i++)
			CHECK(m->var[i] >= 0x20 && m->var[i] <= 0x7e);
		break;
	case REPL_WRITE:
	case REPL_RS_DATA:
	case REPL_TRIM:
	case REPL_ZERO:
	case REPL_RS_ZERO:
	case REPL_CSUM:
	case REPL_READ:
	case REPL_RDATA: {
		const struct repl_io *io = &m->u.io;
		CHECK(io->seq != 0);
		CHECK(io->len > 0 && io->len % 512 == 0 && io->off % 512 == 0);
		CHECK(io->off + io->len > io->off); /* no wrap */
		CHECK(!(io->flags & ~REPL_F_KNOWN));
		if (m->type == REPL_WRITE || m->type == REPL_RS_DATA) {
			CHECK(need == sizeof(*io));
			CHECK(io->len <= REPL_MAX_DATA);
			if (m->hflags) /* one codec; fewer bytes than the data */
				CHECK((m->hflags == REPL_HF_LZ4 || m->hflags == REPL_HF_ZSTD) &&
				      m->data_len > 0 && m->data_len < io->len);
			else
				CHECK(m->data_len == io->len);
			CHECK(m->len == sizeof(*io) + m->data_len);
		} else if (m->type == REPL_CSUM) {
			/* the receiver reads io->len bytes to compare */
			CHECK(m->len == sizeof(struct repl_csum) && io->len <= REPL_MAX_DATA);
		} else if (m->type == REPL_RDATA) {
			/* received straight into a buffer of io->len bytes */
			CHECK(io->len <= REPL_MAX_DATA && m->data_len == io->len);
			CHECK(m->len == sizeof(*io) + m->data_len);
		} else if (m->type == REPL_READ) {
			CHECK(m->len == sizeof(*io) && io->len <= REPL_MAX_DATA);
		} else {
			CHECK(m->len == sizeof(*io));
		}
		if (m->type == REPL_RS_DATA || m->type == REPL_RS_ZERO || m->type == REPL_CSUM ||
		    m->type == REPL_READ || m->type == REPL_RDATA)
			CHECK(io->flags == 0);
		break;
	}
	case REPL_FLUSH: CHECK(m->u.flush.seq != 0); break;
	case REPL_ACK: {
		const struct repl_ack *a = &m->u.ack;
		CHECK(a->count >= 1 && a->count <= REPL_MAX_ACKS && a->reserved == 0);
		CHECK(m->var && m->var_len == a->count * sizeof(struct repl_ack_entry));
		for (uint32_t i = 0; i < a->count; i++) {
			uint64_t seq;
			int32_t res;
			repl_ack_entry(m, i, &seq, &res);
			CHECK(seq != 0 && res <= REPL_ACK_DIFFERS && res >= -4095);
		}
		break;
	}
	case REPL_PING:
	case REPL_PONG:
	case REPL_SWITCH: break;
	case REPL_RS_DONE:
	case REPL_RS_START:
	case REPL_SET_GEN: CHECK(m->u.gen.gen_current >= 2); break;
	default: abort();
	}
}

/* Encodes m again (header, fixed part and var part; not the payload). */
static size_t reencode(const struct repl_msg *m, uint8_t *out)
{
	size_t n = 0;

	switch (m->type) {
	case REPL_HELLO: return repl_enc_hello(out, &m->u.hello);
	case REPL_AUTH: return repl_enc_auth(out, &m->u.auth);
	case REPL_STATE: return repl_enc_state(out, &m->u.state);
	case REPL_CONTRACT: return repl_enc_contract(out, &m->u.contract);
	case REPL_BITMAP:
		n = repl_enc_bitmap(out, m->u.bitmap.start, m->u.bitmap.words);
		for (uint32_t i = 0; i < m->u.bitmap.words; i++, n += 8)
			repl_put_word(out + n, repl_bitmap_word(m, i));
		return n;
	case REPL_BITMAP_END: return repl_enc_empty(out, REPL_BITMAP_END);
	case REPL_META:
		n = repl_enc_meta_hdr(out, m->var_len);
		memcpy(out + n, m->var, m->var_len);
		return n + m->var_len;
	case REPL_ERROR: {
		char text[REPL_MAX_ERROR + 1];
		memcpy(text, m->var, m->var_len);
		text[m->var_len] = 0;
		return repl_enc_error(out, text);
	}
	case REPL_WRITE:
	case REPL_RS_DATA:
		n = repl_enc_io(out, m->type, &m->u.io);
		if (m->hflags)
			repl_enc_packed(out, m->hflags, m->data_len);
		return n;
	case REPL_TRIM:
	case REPL_ZERO:
	case REPL_RS_ZERO:
	case REPL_READ:
	case REPL_RDATA: return repl_enc_io(out, m->type, &m->u.io);
	case REPL_CSUM: return repl_enc_csum(out, &m->u.io, m->digest);
	case REPL_FLUSH: return repl_enc_flush(out, m->u.flush.seq);
	case REPL_ACK:
		n = repl_enc_ack_hdr(out, m->u.ack.count);
		for (uint32_t i = 0; i < m->u.ack.count; i++, n += sizeof(struct repl_ack_entry)) {
			uint64_t seq;
			int32_t res;
			repl_ack_entry(m, i, &seq, &res);
			repl_enc_ack_entry(out + n, seq, res);
		}
		return n;
	case REPL_PING:
	case REPL_PONG:
	case REPL_SWITCH: return repl_enc_ping(out, m->type, m->u.ping.cookie);
	case REPL_RS_DONE:
	case REPL_RS_START:
	case REPL_SET_GEN:
		return repl_enc_gen(out, m->type, m->u.gen.gen_current, m->u.gen.gen_bitmap);
	default: abort();
	}
}

/* decode(encode(m)) == m, and encode(m) is what was received. */
static void check_reencode(const struct repl_msg *m, const uint8_t hdr[HDR], const uint8_t *body,
			   uint32_t need)
{
	static uint8_t out[OUT_MAX];
	struct repl_msg m2;
	size_t n = reencode(m, out);

	CHECK(n == HDR + need);
	CHECK(memcmp(out, hdr, HDR) == 0);
	CHECK(memcmp(out + HDR, body, need) == 0);
	CHECK(repl_decode_hdr(out, &m2) == 0);
	CHECK(m2.type == m->type && m2.len == m->len && m2.hflags == m->hflags);
	CHECK(repl_body_needed(&m2) == need);
	CHECK(repl_decode_body(out + HDR, &m2) == 0);
	CHECK(memcmp(&m2.u, &m->u, fixed_size(m->type)) == 0);
	CHECK(memcmp(m2.digest, m->digest, REPL_DIGEST_LEN) == 0); /* zero but for CSUM */
	CHECK(m2.data_len == m->data_len && m2.var_len == m->var_len);
	CHECK((m2.var == NULL) == (m->var == NULL));
	if (m->var)
		CHECK(memcmp(m2.var, m->var, m->var_len) == 0);
}

/* The receiver's decompression of a compressed payload (zl bytes at z) of
 * a message that decoded: 0 or -EBADMSG; what came out compresses and
 * decompresses back to itself. */
static void check_unpack(const struct repl_msg *m, const uint8_t *z, uint32_t zl)
{
	static struct pack *pk; /* the contexts live as long as the process */
	uint32_t len = m->u.io.len;
	uint8_t *src, *out, *again, *back;
	size_t n;
	int r;

	if (!pk)
		CHECK(pack_new(&pk) == 0);
	src = malloc(zl);
	out = malloc(len);
	CHECK(src && out);
	memcpy(src, z, zl);
	r = pack_decompress(pk, m->hflags, src, zl, out, len);
	CHECK(r == 0 || r == -EBADMSG);
	if (r == 0) {
		again = malloc(pack_bound(len) ? pack_bound(len) : 1);
		CHECK(again != NULL);
		n = pack_compress(pk, m->hflags, out, len, again);
		CHECK(n <= pack_bound(len));
		if (n) {
			back = malloc(len);
			CHECK(back != NULL);
			CHECK(pack_decompress(pk, m->hflags, again, n, back, len) == 0);
			CHECK(memcmp(back, out, len) == 0);
			free(back);
		}
		free(again);
	}
	free(src);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p;
	size_t left;
	unsigned mode;

	if (size < 1)
		return 0;
	mode = data[0];
	p = data + 1;
	left = size - 1;
	while (left >= HDR) {
		uint8_t hdr[HDR], *body;
		struct repl_msg m;
		uint32_t need, len;
		int r;

		memcpy(hdr, p, HDR);
		if (mode & 1) {
			uint32_t magic = htole32(REPL_HDR_MAGIC);
			memcpy(hdr + offsetof(struct repl_hdr, magic), &magic, 4);
		}
		if (mode & 2) {
			hdr[offsetof(struct repl_hdr, flags)] &= REPL_HF_CODECS;
			hdr[offsetof(struct repl_hdr, flags) + 1] = 0;
			memset(hdr + offsetof(struct repl_hdr, reserved), 0, 4);
		}
		r = repl_decode_hdr(hdr, &m);
		CHECK(r == 0 || (r == -EBADMSG && m.why)); /* a refusal says why */
		if (r)
			break;
		len = m.len;
		need = repl_body_needed(&m);
		CHECK(need <= len);
		if (left - HDR < need)
			break; /* incomplete: a receiver would wait for more */
		body = malloc(need ? need : 1);
		CHECK(body != NULL);
		memcpy(body, p + HDR, need);
		r = repl_decode_body(body, &m);
		CHECK(r == 0 || r == -EBADMSG);
		if (r == 0) {
			CHECK(m.type == (hdr[4] | hdr[5] << 8) && m.len == len); /* the header is kept */
			check_fields(&m, body, need);
			check_reencode(&m, hdr, body, need);
			if (m.hflags && left - HDR >= len && m.u.io.len <= UNPACK_MAX)
				check_unpack(&m, p + HDR + need, m.data_len);
		}
		free(body);
		if (r || left - HDR < len)
			break; /* refused, or the payload is not all there */
		p += HDR + len;
		left -= HDR + len;
	}
	return 0;
}
