/* The replication codec (include/proto/repl.h, src/repl/repl_codec.c): the
 * wire layout checked against hand-written little-endian bytes, a round trip
 * of every message type, and one test per validation rule. Each rule test
 * starts from a message that decodes, changes one field, and checks that the
 * change is refused with -EBADMSG at the stage that owns the rule (header or
 * body). Every decoder input is copied into an exact-size heap buffer, as a
 * receiver would buffer it, so that ASan (make SAN=1 unit) sees a read one
 * byte past the end. The payload codecs (src/repl/repl_pack.h) are tested
 * here too: compressed WRITE / RS_DATA, round trips, the cheap test, and
 * every payload the decompressor must refuse. */
#include "unit.h"

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <zstd.h>

#include "../../src/repl/repl_codec.h"
#include "../../src/repl/repl_pack.h"

#define HDR ((size_t)sizeof(struct repl_hdr))
#define WIRE_MAX (HDR + sizeof(struct repl_bitmap) + REPL_MAX_BITMAP_WORDS * 8u)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MIN2(a, b) ((a) < (b) ? (a) : (b))

/* ---- receiving ---- */

enum stage { ST_OK, ST_HDR, ST_BODY };

/* Decodes wire[0..n) as the connection code receives it: the header, then
 * repl_body_needed() bytes of body (a heap copy of exactly that size), then
 * skips the payload. Returns where it failed. On success *body (when not NULL)
 * keeps the body copy, which m->var points into; the caller frees it. */
static enum stage rx(const uint8_t *wire, size_t n, struct repl_msg *m, uint8_t **body)
{
	uint8_t *h, *b;
	uint32_t need;
	int r;

	assert_true(n >= HDR);
	h = malloc(HDR);
	assert_non_null(h);
	memcpy(h, wire, HDR);
	r = repl_decode_hdr(h, m);
	free(h);
	if (r) {
		assert_int_equal(r, -EBADMSG);
		assert_non_null(m->why); /* the reason the connection ends with */
		return ST_HDR;
	}
	need = repl_body_needed(m);
	assert_true(need <= m->len);
	assert_true(n >= HDR + need); /* a test must hand over what it encoded */
	b = malloc(need ? need : 1);
	assert_non_null(b);
	memcpy(b, wire + HDR, need);
	r = repl_decode_body(b, m);
	if (r) {
		assert_int_equal(r, -EBADMSG);
		free(b);
		return ST_BODY;
	}
	/* what was not buffered is exactly the payload */
	assert_int_equal(need + m->data_len, m->len);
	assert_int_equal(n, HDR + m->len);
	if (body)
		*body = b;
	else
		free(b);
	return ST_OK;
}

static void put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

/* ---- valid messages, one builder per type ---- */

static void set_name(char *dst, const char *s)
{
	memset(dst, 0, REPL_NAME_LEN);
	memcpy(dst, s, strlen(s));
}

static struct repl_hello sample_hello(void)
{
	struct repl_hello h;

	memset(&h, 0, sizeof(h));
	h.magic = REPL_HELLO_MAGIC;
	h.proto_min = REPL_PROTO_MIN;
	h.proto_max = REPL_PROTO_MAX;
	h.features = 0x8000000000000001ull; /* unknown bits are offered, not refused */
	set_name(h.cluster, "prod-cluster.eu_1");
	set_name(h.node, "Node-A");
	set_name(h.volume, "vol0");
	for (unsigned i = 0; i < REPL_NONCE_LEN; i++)
		h.nonce[i] = (uint8_t)(0xa0 + i);
	return h;
}

static struct repl_state sample_state(void)
{
	struct repl_state s;

	memset(&s, 0, sizeof(s));
	s.size = 0x0000000102030000ull; /* 4 KiB multiple */
	s.gen_current = 0x1112131415161718ull;
	s.gen_bitmap = 0x2122232425262728ull;
	for (unsigned i = 0; i < REPL_HISTORY; i++)
		s.gen_history[i] = 0x3100000000000000ull + i;
	s.flags = REPL_ST_UPTODATE | REPL_ST_CONSISTENT | REPL_ST_CRASHED_PRIMARY;
	s.role = REPL_ROLE_PRIMARY;
	s.disk = 4;
	s.bm_granularity = 64u << 10;
	s.oos_bits = 0x4142434445464748ull;
	return s;
}

static size_t w_hello(uint8_t *w)
{
	struct repl_hello h = sample_hello();
	return repl_enc_hello(w, &h);
}

static size_t w_auth(uint8_t *w)
{
	struct repl_auth a;
	for (unsigned i = 0; i < REPL_MAC_LEN; i++)
		a.mac[i] = (uint8_t)(i * 37 + 1);
	return repl_enc_auth(w, &a);
}

static size_t w_state(uint8_t *w)
{
	struct repl_state s = sample_state();
	return repl_enc_state(w, &s);
}

static struct repl_contract sample_contract(void)
{
	struct repl_contract k;

	memset(&k, 0, sizeof(k));
	k.mode = REPL_CT_ASYNC;
	k.on_congestion = 1;
	k.failover = 1;
	k.on_disk_failure = 1;
	k.on_io_error = 1;
	k.flags = REPL_CT_WITNESS;
	k.peer_timeout_ms = 0x01020304u;
	k.witness_timeout_ms = 2000;
	k.async_backlog = 0x1112131415161718ull;
	k.async_max_lag_ms = 0x2122232425262728ull;
	k.bm_granularity = 64u << 10;
	set_name(k.first, "Node-A");
	set_name(k.second, "b");
	k.resync_rate = 0x3132333435363738ull;
	k.resync_min_rate = 256u << 10;
	k.quorum_timeout_ms = 30000;
	k.compression = 2;
	return k;
}

static size_t w_contract(uint8_t *w)
{
	struct repl_contract k = sample_contract();
	return repl_enc_contract(w, &k);
}

#define BM_START 0x0000001234567890ull
static const uint64_t bm_words_sample[3] = { 0x8000000000000001ull, 0, 0x0123456789abcdefull };

static size_t w_bitmap(uint8_t *w)
{
	size_t n = repl_enc_bitmap(w, BM_START, ARRAY_LEN(bm_words_sample));
	for (unsigned i = 0; i < ARRAY_LEN(bm_words_sample); i++, n += 8)
		repl_put_word(w + n, bm_words_sample[i]);
	return n;
}

static size_t w_bitmap_end(uint8_t *w)
{
	return repl_enc_empty(w, REPL_BITMAP_END);
}

#define ERROR_TEXT "peer refused: volume 'vol0' is not configured here ~!"

static size_t w_error(uint8_t *w)
{
	return repl_enc_error(w, ERROR_TEXT);
}

#define IO_LEN 4096u

static void payload(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 13 + 5);
}

static size_t w_io(uint8_t *w, uint16_t type, uint32_t flags)
{
	struct repl_io io = {
		.seq = 0x0102030405060708ull,
		.off = 0x0000000abcdef000ull,
		.len = IO_LEN,
		.flags = flags,
	};
	size_t n = repl_enc_io(w, type, &io);
	if (type == REPL_WRITE || type == REPL_RS_DATA || type == REPL_RDATA) {
		payload(w + n, IO_LEN);
		n += IO_LEN;
	}
	return n;
}

static size_t w_write(uint8_t *w)
{
	return w_io(w, REPL_WRITE, REPL_F_FUA);
}

static size_t w_rs_data(uint8_t *w)
{
	return w_io(w, REPL_RS_DATA, 0);
}

static size_t w_read(uint8_t *w)
{
	return w_io(w, REPL_READ, 0);
}

static size_t w_rdata(uint8_t *w)
{
	return w_io(w, REPL_RDATA, 0);
}

static size_t w_trim(uint8_t *w)
{
	return w_io(w, REPL_TRIM, REPL_F_FUA);
}

static size_t w_zero(uint8_t *w)
{
	return w_io(w, REPL_ZERO, 0);
}

static size_t w_rs_zero(uint8_t *w)
{
	return w_io(w, REPL_RS_ZERO, 0);
}

/* CSUM: the io part as for the other requests, then a digest whose every byte
 * differs, so that a shifted or truncated copy shows. */
static void digest_sample(uint8_t d[REPL_DIGEST_LEN])
{
	for (unsigned i = 0; i < REPL_DIGEST_LEN; i++)
		d[i] = (uint8_t)(0xd0 ^ (i * 7));
}

static size_t w_csum(uint8_t *w)
{
	struct repl_io io = {
		.seq = 0x0102030405060708ull,
		.off = 0x0000000abcdef000ull,
		.len = IO_LEN,
	};
	uint8_t d[REPL_DIGEST_LEN];

	digest_sample(d);
	return repl_enc_csum(w, &io, d);
}

static size_t w_flush(uint8_t *w)
{
	return repl_enc_flush(w, 0xfedcba9876543210ull);
}

struct ack_sample {
	uint64_t seq;
	int32_t res;
};
static const struct ack_sample acks_sample[4] = {
	{ 1, 0 }, { 2, -EIO }, { 0xffffffffffffffffull, -4095 }, { 7, -ENOSPC },
};

static size_t w_ack(uint8_t *w)
{
	size_t n = repl_enc_ack_hdr(w, ARRAY_LEN(acks_sample));
	for (unsigned i = 0; i < ARRAY_LEN(acks_sample); i++, n += sizeof(struct repl_ack_entry))
		repl_enc_ack_entry(w + n, acks_sample[i].seq, acks_sample[i].res);
	return n;
}

static size_t w_ping(uint8_t *w)
{
	return repl_enc_ping(w, REPL_PING, 0x1122334455667788ull);
}

static size_t w_pong(uint8_t *w)
{
	return repl_enc_ping(w, REPL_PONG, 0);
}

static size_t w_rs_done(uint8_t *w)
{
	return repl_enc_gen(w, REPL_RS_DONE, 0x5152535455565758ull, 0);
}

static size_t w_set_gen(uint8_t *w)
{
	return repl_enc_gen(w, REPL_SET_GEN, 2, 0x6162636465666768ull);
}

static size_t w_rs_start(uint8_t *w)
{
	return repl_enc_gen(w, REPL_RS_START, 0x7172737475767778ull, 0);
}

/* An ACK of a CSUM that differs among ordinary completions. */
static const struct ack_sample acks_differs[3] = {
	{ 9, REPL_ACK_DIFFERS }, { 10, 0 }, { 11, -EIO },
};

static size_t w_ack_differs(uint8_t *w)
{
	size_t n = repl_enc_ack_hdr(w, ARRAY_LEN(acks_differs));
	for (unsigned i = 0; i < ARRAY_LEN(acks_differs); i++, n += sizeof(struct repl_ack_entry))
		repl_enc_ack_entry(w + n, acks_differs[i].seq, acks_differs[i].res);
	return n;
}

typedef size_t (*builder)(uint8_t *w);

/* ---- layout ---- */

static void test_struct_sizes(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct repl_hdr), 16);
	assert_int_equal(sizeof(struct repl_hello), 280);
	assert_int_equal(sizeof(struct repl_auth), 32);
	assert_int_equal(sizeof(struct repl_state), 80);
	assert_int_equal(sizeof(struct repl_bitmap), 16);
	assert_int_equal(sizeof(struct repl_io), 24);
	assert_int_equal(sizeof(struct repl_flush), 8);
	assert_int_equal(sizeof(struct repl_ack), 8);
	assert_int_equal(sizeof(struct repl_ack_entry), 16);
	assert_int_equal(sizeof(struct repl_ping), 8);
	assert_int_equal(sizeof(struct repl_gen), 16);
	assert_int_equal(sizeof(struct repl_csum), 56);
	assert_int_equal(sizeof(struct repl_contract), 224);
	assert_int_equal(offsetof(struct repl_contract, first), 40);
	assert_int_equal(offsetof(struct repl_contract, resync_rate), 168);
	assert_int_equal(offsetof(struct repl_csum, digest), 24);
	assert_int_equal(REPL_DIGEST_LEN, 32);
	/* the largest fixed message fits REPL_ENC_MAX, and so does an ERROR */
	assert_true(HDR + REPL_MAX_ERROR <= REPL_ENC_MAX);
}

static void test_header_bytes(void **state)
{
	static const uint8_t want[16] = {
		'T', 'R', 'P', 'L',     /* magic 0x4c505254, little-endian */
		0x0e, 0x00,             /* type 14 (ACK) */
		0x00, 0x00,             /* flags */
		0x04, 0x03, 0x02, 0x01, /* len 0x01020304 */
		0x00, 0x00, 0x00, 0x00, /* reserved */
	};
	uint8_t out[HDR + 4];
	(void)state;

	memset(out, 0xee, sizeof(out));
	assert_int_equal(repl_enc_hdr(out, REPL_ACK, 0x01020304u), HDR);
	assert_memory_equal(out, want, sizeof(want));
	for (size_t i = HDR; i < sizeof(out); i++)
		assert_int_equal(out[i], 0xee); /* nothing past the header */
}

static void test_write_header_bytes(void **state)
{
	static const uint8_t want[40] = {
		'T', 'R', 'P', 'L',                             /* magic */
		0x0a, 0x00,                                     /* type 10 (WRITE) */
		0x00, 0x00,                                     /* flags */
		0x18, 0x02, 0x00, 0x00,                         /* len 24 + 512 */
		0x00, 0x00, 0x00, 0x00,                         /* reserved */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* seq */
		0x00, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, 0x10, /* off 0x1011121314151600 */
		0x00, 0x02, 0x00, 0x00,                         /* len 512 */
		0x01, 0x00, 0x00, 0x00,                         /* flags FUA */
	};
	struct repl_io io = {
		.seq = 0x0102030405060708ull,
		.off = 0x1011121314151600ull,
		.len = 512,
		.flags = REPL_F_FUA,
	};
	uint8_t out[REPL_ENC_MAX + 8];
	(void)state;

	memset(out, 0xee, sizeof(out));
	/* only header + fixed part: the caller sends the payload itself */
	assert_int_equal(repl_enc_io(out, REPL_WRITE, &io), sizeof(want));
	assert_memory_equal(out, want, sizeof(want));
	assert_int_equal(out[sizeof(want)], 0xee);

	/* TRIM and ZERO carry no payload: len is the fixed part only */
	io.flags = 0;
	assert_int_equal(repl_enc_io(out, REPL_TRIM, &io), 40);
	assert_int_equal(out[4], REPL_TRIM);
	assert_int_equal(out[8], 24);
	assert_int_equal(out[9], 0);
}

static void test_other_bytes(void **state)
{
	static const uint8_t hello_magic[8] = { 'T', 'A', 'N', 'D', 'R', 'E', 'P', '1' };
	static const uint8_t ack_entry[16] = {
		0x02, 0x01, 0, 0, 0, 0, 0, 0, /* seq 0x102 */
		0xfb, 0xff, 0xff, 0xff,       /* res -5 */
		0, 0, 0, 0,                   /* reserved */
	};
	uint8_t out[REPL_ENC_MAX];
	struct repl_state s = sample_state();
	(void)state;

	/* HELLO: its magic spells the protocol's name; proto range follows */
	w_hello(out);
	assert_memory_equal(out + HDR, hello_magic, 8);
	assert_int_equal(out[HDR + 8], REPL_PROTO_MIN);
	assert_int_equal(out[HDR + 10], REPL_PROTO_MAX);
	assert_memory_equal(out + HDR + offsetof(struct repl_hello, cluster), "prod-cluster.eu_1", 18);

	repl_enc_ack_entry(out, 0x102, -5);
	assert_memory_equal(out, ack_entry, sizeof(ack_entry));

	/* STATE: one field of each width at its documented offset */
	repl_enc_state(out, &s);
	assert_int_equal(out[HDR + 0], 0x00); /* size LE: 00 00 03 02 01 00 .. */
	assert_int_equal(out[HDR + 2], 0x03);
	assert_int_equal(out[HDR + 8], 0x18); /* gen_current low byte */
	assert_int_equal(out[HDR + 56], 0x07); /* flags */
	assert_int_equal(out[HDR + 60], REPL_ROLE_PRIMARY);
	assert_int_equal(out[HDR + 61], 4);
	assert_int_equal(out[HDR + 64], 0x00); /* granularity 0x10000 */
	assert_int_equal(out[HDR + 66], 0x01);
	assert_int_equal(out[HDR + 72], 0x48); /* oos_bits low byte */

	/* BITMAP and FLUSH */
	repl_enc_bitmap(out, 0x0102, 3);
	assert_int_equal(out[8], 16 + 24);
	assert_int_equal(out[HDR], 0x02);
	assert_int_equal(out[HDR + 1], 0x01);
	assert_int_equal(out[HDR + 8], 3);
	repl_enc_flush(out, 0x0102030405060708ull);
	assert_int_equal(out[8], 8);
	assert_int_equal(out[HDR], 0x08);
	assert_int_equal(out[HDR + 7], 0x01);
}

/* ---- round trips ---- */

static void test_rt_hello(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_hello h = sample_hello();
	struct repl_msg m;
	size_t n = w_hello(w);
	(void)state;

	assert_int_equal(n, HDR + sizeof(struct repl_hello));
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_HELLO);
	assert_int_equal(m.len, sizeof(struct repl_hello));
	assert_memory_equal(&m.u.hello, &h, sizeof(h));
	assert_null(m.var);
	assert_int_equal(m.data_len, 0);

	/* the longest name (32), every allowed character class, a wider range */
	memset(h.node, 0, sizeof(h.node));
	memset(h.node, 'z', 32);
	set_name(h.volume, "aZ09-_.");
	h.proto_min = 1;
	h.proto_max = 0xffff;
	n = repl_enc_hello(w, &h);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_memory_equal(&m.u.hello, &h, sizeof(h));
}

static void test_rt_auth(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_msg m;
	size_t n = w_auth(w);
	(void)state;

	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_AUTH);
	assert_memory_equal(m.u.auth.mac, w + HDR, REPL_MAC_LEN);
	assert_int_equal(m.u.auth.mac[1], 38);
}

static void test_rt_state(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_state s = sample_state();
	struct repl_msg m;
	size_t n = w_state(w);
	(void)state;

	assert_int_equal(n, HDR + sizeof(s));
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_STATE);
	assert_memory_equal(&m.u.state, &s, sizeof(s));

	/* the other end of every range */
	s.flags = 0;
	s.role = REPL_ROLE_SECONDARY;
	s.disk = 0;
	s.size = 4096;
	s.bm_granularity = 4096;
	s.gen_current = s.gen_bitmap = 0;
	memset(s.gen_history, 0, sizeof(s.gen_history));
	n = repl_enc_state(w, &s);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_memory_equal(&m.u.state, &s, sizeof(s));
	s.bm_granularity = 64u << 20;
	s.size = UINT64_MAX - 4095;
	n = repl_enc_state(w, &s);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_memory_equal(&m.u.state, &s, sizeof(s));
}

static void test_rt_bitmap(void **state)
{
	uint8_t *w = malloc(WIRE_MAX), *body = NULL;
	struct repl_msg m;
	size_t n;
	(void)state;

	assert_non_null(w);
	n = w_bitmap(w);
	assert_int_equal(rx(w, n, &m, &body), ST_OK);
	assert_int_equal(m.type, REPL_BITMAP);
	assert_int_equal(m.u.bitmap.start, BM_START);
	assert_int_equal(m.u.bitmap.words, 3);
	assert_ptr_equal(m.var, body + sizeof(struct repl_bitmap));
	assert_int_equal(m.var_len, 24);
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(repl_bitmap_word(&m, i), bm_words_sample[i]);
	free(body);

	/* the largest BITMAP message */
	n = repl_enc_bitmap(w, 0, REPL_MAX_BITMAP_WORDS);
	for (uint32_t i = 0; i < REPL_MAX_BITMAP_WORDS; i++, n += 8)
		repl_put_word(w + n, ~(uint64_t)i);
	assert_int_equal(n, WIRE_MAX);
	assert_int_equal(rx(w, n, &m, &body), ST_OK);
	assert_int_equal(m.u.bitmap.words, REPL_MAX_BITMAP_WORDS);
	for (uint32_t i = 0; i < REPL_MAX_BITMAP_WORDS; i++)
		assert_int_equal(repl_bitmap_word(&m, i), ~(uint64_t)i);
	free(body);

	/* the largest start the decoder takes */
	n = repl_enc_bitmap(w, UINT64_MAX >> 8, 1);
	repl_put_word(w + n, 1);
	n += 8;
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.u.bitmap.start, UINT64_MAX >> 8);
	free(w);
}

static void test_rt_bitmap_end(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_msg m;
	size_t n = w_bitmap_end(w);
	(void)state;

	assert_int_equal(n, HDR);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_BITMAP_END);
	assert_int_equal(m.len, 0);
	assert_int_equal(repl_body_needed(&m), 0);
}

static void test_rt_error(void **state)
{
	uint8_t w[REPL_ENC_MAX], *body = NULL;
	char longmsg[REPL_MAX_ERROR + 50];
	struct repl_msg m;
	size_t n = w_error(w);
	(void)state;

	assert_int_equal(n, HDR + strlen(ERROR_TEXT));
	assert_int_equal(rx(w, n, &m, &body), ST_OK);
	assert_int_equal(m.type, REPL_ERROR);
	assert_ptr_equal(m.var, body);
	assert_int_equal(m.var_len, strlen(ERROR_TEXT));
	assert_memory_equal(m.var, ERROR_TEXT, strlen(ERROR_TEXT));
	free(body);

	/* the encoder makes any text sendable: control bytes become '?', */
	n = repl_enc_error(w, "bad\tname\x7f\n");
	assert_int_equal(rx(w, n, &m, &body), ST_OK);
	assert_memory_equal(m.var, "bad?name??", 10);
	assert_int_equal(m.var_len, 10);
	free(body);
	/* an empty one becomes "?" (ERROR may not be empty), */
	n = repl_enc_error(w, "");
	assert_int_equal(rx(w, n, &m, &body), ST_OK);
	assert_int_equal(m.var_len, 1);
	assert_int_equal(m.var[0], '?');
	free(body);
	/* a long one is cut at REPL_MAX_ERROR */
	memset(longmsg, 'x', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = 0;
	n = repl_enc_error(w, longmsg);
	assert_int_equal(n, HDR + REPL_MAX_ERROR);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.var_len, REPL_MAX_ERROR);
}

static void check_rt_io(uint16_t type, uint32_t flags)
{
	uint8_t *w = malloc(HDR + sizeof(struct repl_io) + REPL_MAX_DATA);
	bool data = type == REPL_WRITE || type == REPL_RS_DATA || type == REPL_RDATA;
	struct repl_io io;
	struct repl_msg m;
	size_t n;

	assert_non_null(w);
	n = w_io(w, type, flags);
	assert_int_equal(n, HDR + sizeof(io) + (data ? IO_LEN : 0));
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, type);
	assert_int_equal(m.u.io.seq, 0x0102030405060708ull);
	assert_int_equal(m.u.io.off, 0x0000000abcdef000ull);
	assert_int_equal(m.u.io.len, IO_LEN);
	assert_int_equal(m.u.io.flags, flags);
	assert_int_equal(m.data_len, data ? IO_LEN : 0);
	assert_int_equal(repl_body_needed(&m), data ? sizeof(io) : m.len);
	assert_null(m.var);

	/* the edges: seq 1, the largest payload, a range near 2^64 */
	io = (struct repl_io){ .seq = 1, .off = 0, .len = REPL_MAX_DATA, .flags = flags };
	n = repl_enc_io(w, type, &io);
	if (data)
		n += REPL_MAX_DATA; /* contents do not matter to the codec */
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.u.io.len, REPL_MAX_DATA);
	assert_int_equal(m.data_len, data ? REPL_MAX_DATA : 0);
	io = (struct repl_io){ .seq = UINT64_MAX, .off = UINT64_MAX - 1023, .len = 512, .flags = flags };
	n = repl_enc_io(w, type, &io);
	if (data)
		n += 512;
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.u.io.off, UINT64_MAX - 1023);
	free(w);
}

static void test_rt_write(void **state)
{
	(void)state;
	check_rt_io(REPL_WRITE, REPL_F_FUA);
	check_rt_io(REPL_WRITE, 0);
}

static void test_rt_rs_data(void **state)
{
	(void)state;
	check_rt_io(REPL_RS_DATA, 0);
}

static void test_rt_trim_zero(void **state)
{
	(void)state;
	check_rt_io(REPL_TRIM, 0);
	check_rt_io(REPL_TRIM, REPL_F_FUA);
	check_rt_io(REPL_ZERO, 0);
	check_rt_io(REPL_ZERO, REPL_F_FUA);
}

static void test_rt_flush(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_msg m;
	size_t n = w_flush(w);
	(void)state;

	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_FLUSH);
	assert_int_equal(m.u.flush.seq, 0xfedcba9876543210ull);
}

static void test_rt_ack(void **state)
{
	uint8_t *w = malloc(HDR + 8 + REPL_MAX_ACKS * 16), *body = NULL;
	struct repl_msg m;
	uint64_t seq;
	int32_t res;
	size_t n;
	(void)state;

	assert_non_null(w);
	n = w_ack(w);
	assert_int_equal(n, HDR + 8 + 4 * 16);
	assert_int_equal(rx(w, n, &m, &body), ST_OK);
	assert_int_equal(m.type, REPL_ACK);
	assert_int_equal(m.u.ack.count, 4);
	assert_ptr_equal(m.var, body + sizeof(struct repl_ack));
	assert_int_equal(m.var_len, 4 * 16);
	for (uint32_t i = 0; i < 4; i++) {
		repl_ack_entry(&m, i, &seq, &res);
		assert_int_equal(seq, acks_sample[i].seq);
		assert_int_equal(res, acks_sample[i].res);
	}
	free(body);

	/* the largest ACK */
	n = repl_enc_ack_hdr(w, REPL_MAX_ACKS);
	for (uint32_t i = 0; i < REPL_MAX_ACKS; i++, n += 16)
		repl_enc_ack_entry(w + n, 1000 + i, -(int32_t)(i % 4096));
	assert_int_equal(rx(w, n, &m, &body), ST_OK);
	for (uint32_t i = 0; i < REPL_MAX_ACKS; i++) {
		repl_ack_entry(&m, i, &seq, &res);
		assert_int_equal(seq, 1000 + i);
		assert_int_equal(res, -(int32_t)(i % 4096));
	}
	free(body);
	free(w);
}

static void test_rt_ping_pong(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_msg m;
	size_t n;
	(void)state;

	n = w_ping(w);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_PING);
	assert_int_equal(m.u.ping.cookie, 0x1122334455667788ull);
	n = w_pong(w);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_PONG);
	assert_int_equal(m.u.ping.cookie, 0); /* any cookie, 0 included */
}

static void test_rt_gen(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_msg m;
	size_t n;
	(void)state;

	n = w_rs_done(w);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_RS_DONE);
	assert_int_equal(m.u.gen.gen_current, 0x5152535455565758ull);
	assert_int_equal(m.u.gen.gen_bitmap, 0);
	n = w_set_gen(w);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_SET_GEN);
	assert_int_equal(m.u.gen.gen_current, 2); /* the smallest real generation */
	assert_int_equal(m.u.gen.gen_bitmap, 0x6162636465666768ull);
}

/* ---- validation: one field changed in a message that decodes ---- */

/* Builds the message, checks it decodes, applies the change (width bytes of
 * value at byte `at` of the wire, little-endian), and checks it is refused at
 * stage `want`. */
static void reject_at(int line, builder build, size_t at, unsigned width, uint64_t value,
		      enum stage want)
{
	uint8_t *w = malloc(WIRE_MAX);
	struct repl_msg m;
	enum stage got;
	size_t n;

	assert_non_null(w);
	n = build(w);
	if (rx(w, n, &m, NULL) != ST_OK) {
		print_message("line %d: the unchanged message does not decode\n", line);
		fail();
	}
	assert_true(at + width <= n);
	switch (width) {
	case 1: w[at] = (uint8_t)value; break;
	case 2: put16(w + at, (uint16_t)value); break;
	case 4: put32(w + at, (uint32_t)value); break;
	case 8: put64(w + at, value); break;
	default: fail();
	}
	got = rx(w, n, &m, NULL);
	if (got != want)
		print_message("line %d: stage %d, want %d (0 accepted, 1 header, 2 body)\n", line,
			      got, want);
	assert_int_equal(got, want);
	free(w);
}

#define H_OFF(field) offsetof(struct repl_hdr, field)
#define B_OFF(type, field) (HDR + offsetof(struct type, field))
#define REJECT_HDR(b, at, width, v) reject_at(__LINE__, b, at, width, v, ST_HDR)
#define REJECT_BODY(b, at, width, v) reject_at(__LINE__, b, at, width, v, ST_BODY)
#define ACCEPT(b, at, width, v) reject_at(__LINE__, b, at, width, v, ST_OK)

static const builder all_types[] = {
	w_hello,
	w_auth,
	w_state,
	w_bitmap,
	w_bitmap_end,
	w_error,
	w_write,
	w_rs_data,
	w_trim,
	w_zero,
	w_flush,
	w_ack,
	w_ping,
	w_pong,
	w_rs_done,
	w_set_gen,
	/* RESYNC2 */
	w_rs_zero,
	w_csum,
	w_rs_start,
	w_ack_differs,
	/* READ */
	w_read,
	w_rdata,
	/* CONTRACT */
	w_contract,
};

/* META: an image of 0..REPL_MAX_META bytes, no fixed part. */
static void test_rt_meta(void **state)
{
	static uint8_t w[HDR + REPL_MAX_META + 1];
	uint8_t *body = NULL;
	struct repl_msg m;
	(void)state;

	for (uint32_t len = 0; len <= REPL_MAX_META; len = len ? len * 7 + 3 : 1) {
		size_t n = repl_enc_meta_hdr(w, len);
		assert_int_equal(n, HDR);
		for (uint32_t i = 0; i < len; i++)
			w[HDR + i] = (uint8_t)(i * 13 + 1);
		assert_int_equal(rx(w, HDR + len, &m, &body), ST_OK);
		assert_int_equal(m.type, REPL_META);
		assert_int_equal(m.var_len, len);
		if (len)
			assert_memory_equal(m.var, w + HDR, len);
		free(body);
		body = NULL;
	}
	repl_enc_meta_hdr(w, REPL_MAX_META);
	assert_int_equal(rx(w, HDR + REPL_MAX_META, &m, NULL), ST_OK);
	repl_enc_meta_hdr(w, REPL_MAX_META + 1);
	assert_int_equal(rx(w, HDR + REPL_MAX_META + 1, &m, NULL), ST_HDR);
	repl_enc_hdr(w, REPL_META, UINT32_MAX);
	assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
}

static void test_hdr_bad_magic(void **state)
{
	(void)state;
	for (size_t t = 0; t < ARRAY_LEN(all_types); t++) {
		REJECT_HDR(all_types[t], H_OFF(magic), 4, 0);
		REJECT_HDR(all_types[t], H_OFF(magic), 4, 0x4c505255); /* one bit off */
		REJECT_HDR(all_types[t], H_OFF(magic), 4, 0x5452504c); /* big-endian "TRPL" */
		REJECT_HDR(all_types[t], H_OFF(magic), 1, 't');
	}
}

static void test_hdr_unknown_type(void **state)
{
	/* every value that is not in enum repl_type, with each fixed length */
	static const uint16_t bad[] = { 0,  7,  8,  9,  17, 18, 19, REPL_TYPE_MAX, REPL_TYPE_MAX + 1,
					0x100, 0xffff };
	static const uint32_t lens[] = { 0, 1, 8, 16, 24, 32, 56, 80, 280 };
	uint8_t w[HDR];
	struct repl_msg m;
	(void)state;

	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		for (size_t j = 0; j < ARRAY_LEN(lens); j++) {
			repl_enc_hdr(w, bad[i], lens[j]);
			assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
		}
	/* and the body decoder refuses a type it does not know */
	memset(&m, 0, sizeof(m));
	m.type = 7;
	m.len = 8;
	assert_int_equal(repl_decode_body(w, &m), -EBADMSG);
}

static void test_hdr_flags_reserved(void **state)
{
	(void)state;
	for (size_t t = 0; t < ARRAY_LEN(all_types); t++) {
		/* a codec flag is for WRITE and RS_DATA only (and the raw
		 * payload of these is not smaller than its data: the body
		 * refuses them, test_packed_rules) */
		if (all_types[t] != w_write && all_types[t] != w_rs_data) {
			REJECT_HDR(all_types[t], H_OFF(flags), 2, REPL_HF_LZ4);
			REJECT_HDR(all_types[t], H_OFF(flags), 2, REPL_HF_ZSTD);
		}
		REJECT_HDR(all_types[t], H_OFF(flags), 2, REPL_HF_LZ4 | REPL_HF_ZSTD);
		REJECT_HDR(all_types[t], H_OFF(flags), 2, 4);
		REJECT_HDR(all_types[t], H_OFF(flags), 2, 0x8000);
		REJECT_HDR(all_types[t], H_OFF(reserved), 4, 1);
		REJECT_HDR(all_types[t], H_OFF(reserved), 4, 0x80000000u);
	}
}

/* Fixed-size types: any other length is refused by the header. */
static void test_hdr_len_fixed(void **state)
{
	static const struct {
		builder b;
		uint32_t len;
	} fixed[] = {
		{ w_hello, 280 },   { w_auth, 32 },      { w_state, 80 },   { w_trim, 24 },
		{ w_zero, 24 },     { w_flush, 8 },      { w_ping, 8 },     { w_pong, 8 },
		{ w_rs_done, 16 },  { w_set_gen, 16 },   { w_rs_zero, 24 }, { w_csum, 56 },
		{ w_rs_start, 16 }, { w_contract, 224 },
	};
	(void)state;

	for (size_t i = 0; i < ARRAY_LEN(fixed); i++) {
		uint32_t l = fixed[i].len;
		REJECT_HDR(fixed[i].b, H_OFF(len), 4, 0);
		REJECT_HDR(fixed[i].b, H_OFF(len), 4, l - 1);
		REJECT_HDR(fixed[i].b, H_OFF(len), 4, l + 1);
		REJECT_HDR(fixed[i].b, H_OFF(len), 4, l + 512); /* TRIM/ZERO/RS_ZERO carry no payload */
		REJECT_HDR(fixed[i].b, H_OFF(len), 4, l + IO_LEN); /* ... nor does CSUM */
		REJECT_HDR(fixed[i].b, H_OFF(len), 4, UINT32_MAX);
	}
	REJECT_HDR(w_bitmap_end, H_OFF(len), 4, 1);
	REJECT_HDR(w_bitmap_end, H_OFF(len), 4, 8);
	REJECT_HDR(w_bitmap_end, H_OFF(len), 4, UINT32_MAX);
}

static void test_hdr_len_write(void **state)
{
	(void)state;
	/* no data at all, less than the fixed part, more than the largest payload */
	REJECT_HDR(w_write, H_OFF(len), 4, 0);
	REJECT_HDR(w_write, H_OFF(len), 4, 23);
	REJECT_HDR(w_write, H_OFF(len), 4, 24);
	REJECT_HDR(w_write, H_OFF(len), 4, 24 + REPL_MAX_DATA + 1);
	REJECT_HDR(w_write, H_OFF(len), 4, 24 + REPL_MAX_DATA + 512);
	REJECT_HDR(w_write, H_OFF(len), 4, UINT32_MAX);
	REJECT_HDR(w_rs_data, H_OFF(len), 4, 24);
	REJECT_HDR(w_rs_data, H_OFF(len), 4, 24 + REPL_MAX_DATA + 512);
	REJECT_HDR(w_rs_data, H_OFF(len), 4, UINT32_MAX);
}

static void test_hdr_len_bitmap(void **state)
{
	(void)state;
	REJECT_HDR(w_bitmap, H_OFF(len), 4, 0);
	REJECT_HDR(w_bitmap, H_OFF(len), 4, 16);     /* no words */
	REJECT_HDR(w_bitmap, H_OFF(len), 4, 16 + 7); /* not whole words */
	REJECT_HDR(w_bitmap, H_OFF(len), 4, 16 + 12);
	REJECT_HDR(w_bitmap, H_OFF(len), 4, 16 + (REPL_MAX_BITMAP_WORDS + 1) * 8);
	REJECT_HDR(w_bitmap, H_OFF(len), 4, UINT32_MAX);
}

static void test_hdr_len_ack(void **state)
{
	(void)state;
	REJECT_HDR(w_ack, H_OFF(len), 4, 0);
	REJECT_HDR(w_ack, H_OFF(len), 4, 8);      /* no entries */
	REJECT_HDR(w_ack, H_OFF(len), 4, 8 + 8);  /* half an entry */
	REJECT_HDR(w_ack, H_OFF(len), 4, 8 + 17);
	REJECT_HDR(w_ack, H_OFF(len), 4, 8 + (REPL_MAX_ACKS + 1) * 16);
	REJECT_HDR(w_ack, H_OFF(len), 4, UINT32_MAX);
}

static void test_hdr_len_error(void **state)
{
	uint8_t w[HDR];
	struct repl_msg m;
	(void)state;

	REJECT_HDR(w_error, H_OFF(len), 4, 0);
	REJECT_HDR(w_error, H_OFF(len), 4, REPL_MAX_ERROR + 1);
	REJECT_HDR(w_error, H_OFF(len), 4, UINT32_MAX);
	repl_enc_hdr(w, REPL_ERROR, REPL_MAX_ERROR);
	assert_int_equal(repl_decode_hdr(w, &m), 0);
}

static void test_write_len_mismatch(void **state)
{
	(void)state;
	/* header says one length, io.len another: the stream would lose framing */
	REJECT_BODY(w_write, B_OFF(repl_io, len), 4, IO_LEN - 512);
	REJECT_BODY(w_write, B_OFF(repl_io, len), 4, IO_LEN + 512);
	REJECT_BODY(w_write, H_OFF(len), 4, 24 + IO_LEN - 512);
	REJECT_BODY(w_write, H_OFF(len), 4, 24 + IO_LEN + 512);
	REJECT_BODY(w_rs_data, B_OFF(repl_io, len), 4, IO_LEN * 2);
	REJECT_BODY(w_rs_data, H_OFF(len), 4, 24 + IO_LEN - 512);
}

static void test_write_data_too_big(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_io io = { .seq = 1, .off = 0, .len = REPL_MAX_DATA + 512 };
	struct repl_msg m;
	(void)state;

	/* consistent header and io.len, both one block over the limit */
	repl_enc_io(w, REPL_WRITE, &io);
	assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
	repl_enc_io(w, REPL_RS_DATA, &io);
	assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
	/* io.len so large that the header's 24 + len wraps to a valid 512: the
	 * header passes, and the body refuses io.len != 512 - 24 */
	io.len = UINT32_MAX - 23 + 512;
	repl_enc_io(w, REPL_WRITE, &io);
	assert_int_equal(repl_decode_hdr(w, &m), 0);
	assert_int_equal(m.len, 512);
	assert_int_equal(repl_decode_body(w + HDR, &m), -EBADMSG);
}

static void test_io_zero_seq(void **state)
{
	(void)state;
	REJECT_BODY(w_write, B_OFF(repl_io, seq), 8, 0);
	REJECT_BODY(w_rs_data, B_OFF(repl_io, seq), 8, 0);
	REJECT_BODY(w_trim, B_OFF(repl_io, seq), 8, 0);
	REJECT_BODY(w_zero, B_OFF(repl_io, seq), 8, 0);
	REJECT_BODY(w_rs_zero, B_OFF(repl_io, seq), 8, 0);
	REJECT_BODY(w_csum, B_OFF(repl_io, seq), 8, 0);
	ACCEPT(w_csum, B_OFF(repl_io, seq), 8, 1);
	REJECT_BODY(w_flush, HDR, 8, 0);
	ACCEPT(w_flush, HDR, 8, 1);
}

static void test_io_misaligned(void **state)
{
	static const builder io_types[] = { w_write, w_rs_data, w_trim, w_zero, w_rs_zero, w_csum };
	(void)state;

	for (size_t t = 0; t < ARRAY_LEN(io_types); t++) {
		REJECT_BODY(io_types[t], B_OFF(repl_io, off), 8, 0x1000 + 1);
		REJECT_BODY(io_types[t], B_OFF(repl_io, off), 8, 0x1000 + 256);
		REJECT_BODY(io_types[t], B_OFF(repl_io, off), 8, 511);
		ACCEPT(io_types[t], B_OFF(repl_io, off), 8, 512);
	}
	/* length: for TRIM/ZERO only io.len says it (no payload to match) */
	REJECT_BODY(w_trim, B_OFF(repl_io, len), 4, 100);
	REJECT_BODY(w_trim, B_OFF(repl_io, len), 4, 4096 + 1);
	REJECT_BODY(w_zero, B_OFF(repl_io, len), 4, 511);
	ACCEPT(w_zero, B_OFF(repl_io, len), 4, 512);
	REJECT_BODY(w_rs_zero, B_OFF(repl_io, len), 4, 100);
	REJECT_BODY(w_rs_zero, B_OFF(repl_io, len), 4, 4096 + 256);
	ACCEPT(w_rs_zero, B_OFF(repl_io, len), 4, 512);
	REJECT_BODY(w_csum, B_OFF(repl_io, len), 4, 1);
	REJECT_BODY(w_csum, B_OFF(repl_io, len), 4, 4096 - 1);
	REJECT_BODY(w_csum, B_OFF(repl_io, len), 4, 4096 + 511);
	ACCEPT(w_csum, B_OFF(repl_io, len), 4, 512);
	ACCEPT(w_trim, B_OFF(repl_io, len), 4, UINT32_MAX - 511); /* no payload limit */
}

static void test_io_misaligned_write(void **state)
{
	uint8_t w[REPL_ENC_MAX + 600];
	struct repl_io io = { .seq = 1, .off = 0, .len = 100 };
	struct repl_msg m;
	size_t n;
	(void)state;

	/* header and io.len agree, but the length is not whole sectors */
	n = repl_enc_io(w, REPL_WRITE, &io);
	memset(w + n, 0, 100);
	assert_int_equal(rx(w, n + 100, &m, NULL), ST_BODY);
	io.len = 513;
	n = repl_enc_io(w, REPL_RS_DATA, &io);
	memset(w + n, 0, 513);
	assert_int_equal(rx(w, n + 513, &m, NULL), ST_BODY);
}

static void test_io_zero_len_and_wrap(void **state)
{
	(void)state;
	REJECT_BODY(w_trim, B_OFF(repl_io, len), 4, 0);
	REJECT_BODY(w_zero, B_OFF(repl_io, len), 4, 0);
	REJECT_BODY(w_rs_zero, B_OFF(repl_io, len), 4, 0);
	REJECT_BODY(w_csum, B_OFF(repl_io, len), 4, 0);
	/* off + len past 2^64 must be refused, never wrap to a small offset */
	REJECT_BODY(w_rs_zero, B_OFF(repl_io, off), 8, UINT64_MAX - 511);
	REJECT_BODY(w_csum, B_OFF(repl_io, off), 8, UINT64_MAX - 511);
	ACCEPT(w_csum, B_OFF(repl_io, off), 8, UINT64_MAX - 8191);
	REJECT_BODY(w_trim, B_OFF(repl_io, off), 8, UINT64_MAX - 511);
	REJECT_BODY(w_write, B_OFF(repl_io, off), 8, UINT64_MAX - 511);
	REJECT_BODY(w_zero, B_OFF(repl_io, off), 8, UINT64_MAX - 4095 + 512);
	ACCEPT(w_zero, B_OFF(repl_io, off), 8, UINT64_MAX - 8191); /* ends at 2^64 - 4096 */
}

static void test_io_unknown_flags(void **state)
{
	static const builder io_types[] = { w_write, w_trim, w_zero };
	(void)state;

	for (size_t t = 0; t < ARRAY_LEN(io_types); t++) {
		REJECT_BODY(io_types[t], B_OFF(repl_io, flags), 4, 2);
		REJECT_BODY(io_types[t], B_OFF(repl_io, flags), 4, REPL_F_FUA | 4);
		REJECT_BODY(io_types[t], B_OFF(repl_io, flags), 4, 0x80000000u);
		ACCEPT(io_types[t], B_OFF(repl_io, flags), 4, REPL_F_FUA);
	}
}

/* READ and RDATA (REPL_FEAT_READ): as any request; RDATA carries the data */
static void test_rt_read(void **state)
{
	(void)state;
	check_rt_io(REPL_READ, 0);
	check_rt_io(REPL_RDATA, 0);
	/* no flags: a read has no FUA, and its data is never compressed */
	REJECT_BODY(w_read, B_OFF(repl_io, flags), 4, REPL_F_FUA);
	REJECT_BODY(w_rdata, B_OFF(repl_io, flags), 4, REPL_F_FUA);
	REJECT_HDR(w_rdata, H_OFF(flags), 2, REPL_HF_LZ4);
}

static void test_rs_data_flags(void **state)
{
	(void)state;
	/* resync data is never FUA: the target flushes once at RS_DONE */
	REJECT_BODY(w_rs_data, B_OFF(repl_io, flags), 4, REPL_F_FUA);
	REJECT_BODY(w_rs_data, B_OFF(repl_io, flags), 4, 2);
}

static void test_hello_magic_proto_reserved(void **state)
{
	(void)state;
	REJECT_BODY(w_hello, B_OFF(repl_hello, magic), 8, 0);
	REJECT_BODY(w_hello, B_OFF(repl_hello, magic), 8, REPL_HELLO_MAGIC ^ 1);
	REJECT_BODY(w_hello, B_OFF(repl_hello, proto_min), 2, 0);
	REJECT_BODY(w_hello, B_OFF(repl_hello, reserved0), 4, 1);
	REJECT_BODY(w_hello, B_OFF(repl_hello, reserved), 1, 1);
	REJECT_BODY(w_hello, B_OFF(repl_hello, reserved) + 31, 1, 0x80);
	/* features are offered, not checked: unknown bits are fine */
	ACCEPT(w_hello, B_OFF(repl_hello, features), 8, UINT64_MAX);
}

static void test_hello_proto_range(void **state)
{
	(void)state;
	/* sample is min 1, max 1 */
	REJECT_BODY(w_hello, B_OFF(repl_hello, proto_min), 2, 2);
	REJECT_BODY(w_hello, B_OFF(repl_hello, proto_min), 2, 0xffff);
	REJECT_BODY(w_hello, B_OFF(repl_hello, proto_max), 2, 0);
	ACCEPT(w_hello, B_OFF(repl_hello, proto_max), 2, 7);
}

static const size_t name_offs[3] = {
	B_OFF(repl_hello, cluster),
	B_OFF(repl_hello, node),
	B_OFF(repl_hello, volume),
};

/* sample names: "prod-cluster.eu_1" (17), "Node-A" (6), "vol0" (4) */
static void test_hello_name_padding(void **state)
{
	(void)state;
	for (size_t i = 0; i < 3; i++) {
		size_t o = name_offs[i];
		/* something after the terminating NUL */
		REJECT_BODY(w_hello, o + 20, 1, 'x');
		REJECT_BODY(w_hello, o + REPL_NAME_LEN - 1, 1, 'x');
		REJECT_BODY(w_hello, o + REPL_NAME_LEN - 1, 1, 0x01);
	}
}

static void fill_name_wire(uint8_t *w, size_t o, size_t n, char c)
{
	memset(w + o, 0, REPL_NAME_LEN);
	memset(w + o, c, n);
}

static void test_hello_name_length(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_msg m;
	(void)state;

	for (size_t i = 0; i < 3; i++) {
		size_t o = name_offs[i];
		size_t n = w_hello(w);
		static const size_t bad[] = { 0, 33, 63, 64 }; /* 64: no NUL at all */
		for (size_t k = 0; k < ARRAY_LEN(bad); k++) {
			fill_name_wire(w, o, bad[k], 'n');
			assert_int_equal(rx(w, n, &m, NULL), ST_BODY);
		}
		fill_name_wire(w, o, 32, 'n');
		assert_int_equal(rx(w, n, &m, NULL), ST_OK);
		fill_name_wire(w, o, 1, 'n');
		assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	}
}

static void test_hello_name_chars(void **state)
{
	static const uint8_t bad[] = { ' ', '/', '\\', ':', '@', '\t', '\n', 0x7f, 0x80, 0xff,
				       '[', '`', '{', '~', '*', '\'' };
	(void)state;

	for (size_t i = 0; i < 3; i++)
		for (size_t k = 0; k < ARRAY_LEN(bad); k++) {
			REJECT_BODY(w_hello, name_offs[i], 1, bad[k]);     /* first */
			REJECT_BODY(w_hello, name_offs[i] + 3, 1, bad[k]); /* last of "vol0" */
		}
	ACCEPT(w_hello, B_OFF(repl_hello, volume) + 3, 1, '.');
	ACCEPT(w_hello, B_OFF(repl_hello, volume), 1, 'V');
}

static void test_state_granularity(void **state)
{
	static const uint32_t bad[] = { 0, 1, 512, 2048, 4095, 4097, 12288, 65536 + 4096,
					(64u << 20) * 2, 0x80000000u, UINT32_MAX };
	(void)state;

	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		REJECT_BODY(w_state, B_OFF(repl_state, bm_granularity), 4, bad[i]);
	ACCEPT(w_state, B_OFF(repl_state, bm_granularity), 4, 4096);
	ACCEPT(w_state, B_OFF(repl_state, bm_granularity), 4, 64u << 20);
}

static void test_state_role_disk(void **state)
{
	(void)state;
	REJECT_BODY(w_state, B_OFF(repl_state, role), 1, 2);
	REJECT_BODY(w_state, B_OFF(repl_state, role), 1, 0xff);
	REJECT_BODY(w_state, B_OFF(repl_state, disk), 1, 6);
	REJECT_BODY(w_state, B_OFF(repl_state, disk), 1, 0xff);
	ACCEPT(w_state, B_OFF(repl_state, role), 1, REPL_ROLE_SECONDARY);
	ACCEPT(w_state, B_OFF(repl_state, disk), 1, 5); /* consistent */
	ACCEPT(w_state, B_OFF(repl_state, disk), 1, 0);
}

static void test_state_flags_reserved(void **state)
{
	(void)state;
	REJECT_BODY(w_state, B_OFF(repl_state, flags), 4, REPL_ST_KNOWN + 1);
	REJECT_BODY(w_state, B_OFF(repl_state, flags), 4, 0x80000000u | REPL_ST_UPTODATE);
	REJECT_BODY(w_state, B_OFF(repl_state, reserved0), 2, 1);
	REJECT_BODY(w_state, B_OFF(repl_state, reserved1), 4, 1);
	ACCEPT(w_state, B_OFF(repl_state, flags), 4, 0);
}

static void test_state_size(void **state)
{
	(void)state;
	REJECT_BODY(w_state, B_OFF(repl_state, size), 8, 0);
	REJECT_BODY(w_state, B_OFF(repl_state, size), 8, 512);
	REJECT_BODY(w_state, B_OFF(repl_state, size), 8, 4096 + 512);
	REJECT_BODY(w_state, B_OFF(repl_state, size), 8, UINT64_MAX);
	ACCEPT(w_state, B_OFF(repl_state, size), 8, 4096);
}

/* CONTRACT: every field as sent; little-endian on the wire. */
static void test_rt_contract(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_contract k = sample_contract();
	struct repl_msg m;
	size_t n = w_contract(w);
	(void)state;

	assert_int_equal(n, HDR + sizeof(k));
	assert_int_equal(w[4], REPL_CONTRACT);
	assert_int_equal(w[5], 0);
	/* peer_timeout_ms 0x01020304 at offset 8 of the body, low byte first */
	assert_int_equal(w[HDR + 8], 0x04);
	assert_int_equal(w[HDR + 11], 0x01);
	assert_int_equal(w[HDR + offsetof(struct repl_contract, async_backlog)], 0x18);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_CONTRACT);
	assert_memory_equal(&m.u.contract, &k, sizeof(k));

	/* the other end of every range */
	memset(&k, 0, sizeof(k));
	k.peer_timeout_ms = k.witness_timeout_ms = k.quorum_timeout_ms = 1;
	k.bm_granularity = 4096;
	k.flags = REPL_CT_KNOWN;
	set_name(k.first, "b");
	set_name(k.second, "a");
	n = repl_enc_contract(w, &k);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_memory_equal(&m.u.contract, &k, sizeof(k));
	/* `nodes` names two nodes */
	set_name(k.second, "b");
	n = repl_enc_contract(w, &k);
	assert_int_equal(rx(w, n, &m, NULL), ST_BODY);
}

static void test_contract_fields(void **state)
{
	(void)state;
	/* enumerations in range */
	REJECT_BODY(w_contract, B_OFF(repl_contract, mode), 1, 2);
	REJECT_BODY(w_contract, B_OFF(repl_contract, mode), 1, 0xff);
	ACCEPT(w_contract, B_OFF(repl_contract, mode), 1, REPL_CT_SYNC);
	REJECT_BODY(w_contract, B_OFF(repl_contract, on_congestion), 1, 2);
	REJECT_BODY(w_contract, B_OFF(repl_contract, failover), 1, 2);
	REJECT_BODY(w_contract, B_OFF(repl_contract, on_disk_failure), 1, 2);
	REJECT_BODY(w_contract, B_OFF(repl_contract, on_io_error), 1, 2);
	REJECT_BODY(w_contract, B_OFF(repl_contract, compression), 1, 3);
	ACCEPT(w_contract, B_OFF(repl_contract, compression), 1, 0);
	REJECT_BODY(w_contract, B_OFF(repl_contract, flags), 1, REPL_CT_KNOWN + 1);
	REJECT_BODY(w_contract, B_OFF(repl_contract, flags), 1, 0x80);
	/* reserved zero */
	REJECT_BODY(w_contract, B_OFF(repl_contract, reserved0), 2, 1);
	REJECT_BODY(w_contract, B_OFF(repl_contract, reserved1), 4, 0x80000000u);
	REJECT_BODY(w_contract, B_OFF(repl_contract, reserved2), 1, 1);
	REJECT_BODY(w_contract, B_OFF(repl_contract, reserved2) + 2, 1, 1);
	REJECT_BODY(w_contract, B_OFF(repl_contract, reserved), 1, 1);
	REJECT_BODY(w_contract, B_OFF(repl_contract, reserved) + 31, 1, 0x80);
	/* times and granularity */
	REJECT_BODY(w_contract, B_OFF(repl_contract, peer_timeout_ms), 4, 0);
	REJECT_BODY(w_contract, B_OFF(repl_contract, witness_timeout_ms), 4, 0);
	REJECT_BODY(w_contract, B_OFF(repl_contract, quorum_timeout_ms), 4, 0);
	REJECT_BODY(w_contract, B_OFF(repl_contract, bm_granularity), 4, 0);
	REJECT_BODY(w_contract, B_OFF(repl_contract, bm_granularity), 4, 2048);
	REJECT_BODY(w_contract, B_OFF(repl_contract, bm_granularity), 4, 12288);
	ACCEPT(w_contract, B_OFF(repl_contract, async_backlog), 8, UINT64_MAX);
	ACCEPT(w_contract, B_OFF(repl_contract, async_max_lag_ms), 8, 0);
	/* two node names, NUL padded, not the same */
	REJECT_BODY(w_contract, B_OFF(repl_contract, first), 1, 0);
	REJECT_BODY(w_contract, B_OFF(repl_contract, second), 1, 0);
	REJECT_BODY(w_contract, B_OFF(repl_contract, second), 1, ' ');
	REJECT_BODY(w_contract, B_OFF(repl_contract, first) + 63, 1, 'x');
	REJECT_BODY(w_contract, B_OFF(repl_contract, second) + 2, 1, 'x'); /* after the NUL */
	ACCEPT(w_contract, B_OFF(repl_contract, second), 1, 'c');
}

static void test_ack_count(void **state)
{
	(void)state;
	/* sample has 4 entries */
	REJECT_BODY(w_ack, B_OFF(repl_ack, count), 4, 0);
	REJECT_BODY(w_ack, B_OFF(repl_ack, count), 4, 3);
	REJECT_BODY(w_ack, B_OFF(repl_ack, count), 4, 5);
	REJECT_BODY(w_ack, B_OFF(repl_ack, count), 4, UINT32_MAX); /* count * 16 must not wrap */
	REJECT_BODY(w_ack, B_OFF(repl_ack, count), 4, 0x10000004u);
	REJECT_BODY(w_ack, B_OFF(repl_ack, reserved), 4, 1);
}

#define ENTRY(i) (HDR + sizeof(struct repl_ack) + (i) * sizeof(struct repl_ack_entry))

static void test_ack_entries(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(acks_sample); i++) {
		size_t e = ENTRY(i);
		REJECT_BODY(w_ack, e + offsetof(struct repl_ack_entry, seq), 8, 0);
		REJECT_BODY(w_ack, e + offsetof(struct repl_ack_entry, res), 4, 2); /* > DIFFERS */
		REJECT_BODY(w_ack, e + offsetof(struct repl_ack_entry, res), 4, 0x7fffffff);
		REJECT_BODY(w_ack, e + offsetof(struct repl_ack_entry, res), 4, (uint32_t)-4096);
		REJECT_BODY(w_ack, e + offsetof(struct repl_ack_entry, res), 4, 0x80000000u);
		REJECT_BODY(w_ack, e + offsetof(struct repl_ack_entry, reserved), 4, 1);
		ACCEPT(w_ack, e + offsetof(struct repl_ack_entry, res), 4, (uint32_t)-1);
		ACCEPT(w_ack, e + offsetof(struct repl_ack_entry, res), 4, REPL_ACK_DIFFERS);
	}
}

/* ---- RESYNC2: RS_ZERO, CSUM, RS_START, ACK "differs" ---- */

static void test_rt_rs_zero(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_io io = { .seq = 3, .off = 1ull << 40, .len = UINT32_MAX - 511 };
	struct repl_msg m;
	size_t n;
	(void)state;

	/* the io part only, like ZERO: no payload, so body = fixed part */
	check_rt_io(REPL_RS_ZERO, 0);
	n = w_rs_zero(w);
	assert_int_equal(n, HDR + sizeof(struct repl_io));
	assert_int_equal(w[4], REPL_RS_ZERO);
	assert_int_equal(w[8], 24);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.len, sizeof(struct repl_io));
	assert_int_equal(m.data_len, 0);
	/* like ZERO, its length is not bounded by a payload limit */
	n = repl_enc_io(w, REPL_RS_ZERO, &io);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.u.io.len, UINT32_MAX - 511);
	assert_int_equal(m.u.io.off, 1ull << 40);
}

static void test_csum_bytes(void **state)
{
	static const uint8_t want[HDR + 24] = {
		'T', 'R', 'P', 'L',                             /* magic */
		0x18, 0x00,                                     /* type 24 (CSUM) */
		0x00, 0x00,                                     /* flags */
		0x38, 0x00, 0x00, 0x00,                         /* len 56: io + digest */
		0x00, 0x00, 0x00, 0x00,                         /* reserved */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* seq */
		0x00, 0xf0, 0xde, 0xbc, 0x0a, 0x00, 0x00, 0x00, /* off 0xabcdef000 */
		0x00, 0x10, 0x00, 0x00,                         /* len 4096 */
		0x00, 0x00, 0x00, 0x00,                         /* flags */
	};
	uint8_t out[REPL_ENC_MAX], d[REPL_DIGEST_LEN];
	(void)state;

	memset(out, 0xee, sizeof(out));
	digest_sample(d);
	assert_int_equal(w_csum(out), HDR + sizeof(struct repl_csum));
	assert_memory_equal(out, want, sizeof(want));
	/* the digest follows the io part as it is: bytes, not a number */
	assert_memory_equal(out + HDR + 24, d, REPL_DIGEST_LEN);
	assert_int_equal(out[HDR + sizeof(struct repl_csum)], 0xee); /* nothing past it */
}

static void test_rt_csum(void **state)
{
	uint8_t w[REPL_ENC_MAX], d[REPL_DIGEST_LEN];
	struct repl_io io;
	struct repl_msg m;
	size_t n;
	(void)state;

	digest_sample(d);
	n = w_csum(w);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_CSUM);
	assert_int_equal(m.len, sizeof(struct repl_csum));
	assert_int_equal(repl_body_needed(&m), sizeof(struct repl_csum)); /* digest buffered */
	assert_int_equal(m.u.io.seq, 0x0102030405060708ull);
	assert_int_equal(m.u.io.off, 0x0000000abcdef000ull);
	assert_int_equal(m.u.io.len, IO_LEN);
	assert_int_equal(m.u.io.flags, 0);
	assert_memory_equal(m.digest, d, REPL_DIGEST_LEN);
	assert_int_equal(m.data_len, 0);
	assert_null(m.var);

	/* the edges: seq 1 and the largest region, a digest of all ones; then
	 * seq 2^64-1 near the end of the address space, a digest of zeros */
	io = (struct repl_io){ .seq = 1, .off = 0, .len = REPL_MAX_DATA };
	memset(d, 0xff, sizeof(d));
	n = repl_enc_csum(w, &io, d);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.u.io.len, REPL_MAX_DATA);
	assert_memory_equal(m.digest, d, REPL_DIGEST_LEN);
	io = (struct repl_io){ .seq = UINT64_MAX, .off = UINT64_MAX - 1023, .len = 512 };
	memset(d, 0, sizeof(d));
	n = repl_enc_csum(w, &io, d);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.u.io.seq, UINT64_MAX);
	assert_int_equal(m.u.io.off, UINT64_MAX - 1023);
	assert_memory_equal(m.digest, d, REPL_DIGEST_LEN);

	/* every digest byte arrives where it was put */
	for (unsigned i = 0; i < REPL_DIGEST_LEN; i++) {
		n = w_csum(w);
		w[HDR + 24 + i] ^= 0x5a;
		digest_sample(d);
		d[i] ^= 0x5a;
		assert_int_equal(rx(w, n, &m, NULL), ST_OK);
		assert_memory_equal(m.digest, d, REPL_DIGEST_LEN);
	}
}

static void test_csum_len_limit(void **state)
{
	uint8_t w[REPL_ENC_MAX], d[REPL_DIGEST_LEN];
	struct repl_io io = { .seq = 1, .off = 0, .len = REPL_MAX_DATA + 512 };
	struct repl_msg m;
	size_t n;
	(void)state;

	/* the receiver reads len bytes: no more than a WRITE may carry */
	digest_sample(d);
	n = repl_enc_csum(w, &io, d);
	assert_int_equal(rx(w, n, &m, NULL), ST_BODY);
	io.len = UINT32_MAX - 511;
	n = repl_enc_csum(w, &io, d);
	assert_int_equal(rx(w, n, &m, NULL), ST_BODY);
	REJECT_BODY(w_csum, B_OFF(repl_io, len), 4, REPL_MAX_DATA + 512);
	REJECT_BODY(w_csum, B_OFF(repl_io, len), 4, 2 * REPL_MAX_DATA);
	ACCEPT(w_csum, B_OFF(repl_io, len), 4, REPL_MAX_DATA);
}

static void test_resync2_flags(void **state)
{
	(void)state;
	/* RS_ZERO and CSUM carry no flags at all, FUA included */
	REJECT_BODY(w_rs_zero, B_OFF(repl_io, flags), 4, REPL_F_FUA);
	REJECT_BODY(w_rs_zero, B_OFF(repl_io, flags), 4, 2);
	REJECT_BODY(w_rs_zero, B_OFF(repl_io, flags), 4, 0x80000000u);
	REJECT_BODY(w_csum, B_OFF(repl_io, flags), 4, REPL_F_FUA);
	REJECT_BODY(w_csum, B_OFF(repl_io, flags), 4, 2);
	REJECT_BODY(w_csum, B_OFF(repl_io, flags), 4, 0x80000000u);
	/* and the header's flags stay zero for them like for every type */
	REJECT_HDR(w_rs_zero, H_OFF(flags), 2, REPL_F_FUA);
	REJECT_HDR(w_csum, H_OFF(flags), 2, REPL_F_FUA);
}

static void test_resync2_len(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_io io = { .seq = 5, .off = 0, .len = IO_LEN };
	struct repl_msg m;
	(void)state;

	/* RS_ZERO sent as if data followed (header len = 24 + io.len) */
	repl_enc_hdr(w, REPL_RS_ZERO, (uint32_t)(sizeof(io) + IO_LEN));
	assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
	/* CSUM without its digest, or with the digest and more */
	repl_enc_io(w, REPL_CSUM, &io);
	assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
	REJECT_HDR(w_csum, H_OFF(len), 4, 24);
	REJECT_HDR(w_csum, H_OFF(len), 4, 56 + 32);
	REJECT_HDR(w_csum, H_OFF(len), 4, 56 - 1);
	REJECT_HDR(w_rs_start, H_OFF(len), 4, 8);
	REJECT_HDR(w_rs_start, H_OFF(len), 4, 24);
	REJECT_HDR(w_rs_zero, H_OFF(len), 4, 16);
	REJECT_HDR(w_rs_zero, H_OFF(len), 4, 56);
}

static void test_rt_rs_start(void **state)
{
	uint8_t w[REPL_ENC_MAX];
	struct repl_msg m;
	size_t n;
	(void)state;

	n = w_rs_start(w);
	assert_int_equal(n, HDR + sizeof(struct repl_gen));
	assert_int_equal(w[4], REPL_RS_START);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.type, REPL_RS_START);
	assert_int_equal(m.u.gen.gen_current, 0x7172737475767778ull);
	assert_int_equal(m.u.gen.gen_bitmap, 0);
	assert_null(m.var);
	/* the smallest real generation, and a second field that is passed through */
	n = repl_enc_gen(w, REPL_RS_START, 2, 0x0102030405060708ull);
	assert_int_equal(rx(w, n, &m, NULL), ST_OK);
	assert_int_equal(m.u.gen.gen_current, 2);
	assert_int_equal(m.u.gen.gen_bitmap, 0x0102030405060708ull);
	/* 0 (no data) and 1 (created empty) are never a generation to resync to */
	n = repl_enc_gen(w, REPL_RS_START, 1, 0);
	assert_int_equal(rx(w, n, &m, NULL), ST_BODY);
	n = repl_enc_gen(w, REPL_RS_START, 0, 0);
	assert_int_equal(rx(w, n, &m, NULL), ST_BODY);
}

static void test_rt_ack_differs(void **state)
{
	uint8_t w[REPL_ENC_MAX], *body = NULL;
	static const uint8_t entry[16] = {
		0x09, 0, 0, 0, 0, 0, 0, 0, /* seq 9 */
		0x01, 0, 0, 0,             /* res 1: differs */
		0, 0, 0, 0,                /* reserved */
	};
	struct repl_msg m;
	uint64_t seq;
	int32_t res;
	size_t n;
	(void)state;

	assert_int_equal(REPL_ACK_DIFFERS, 1);
	n = w_ack_differs(w);
	assert_memory_equal(w + HDR + sizeof(struct repl_ack), entry, sizeof(entry));
	assert_int_equal(rx(w, n, &m, &body), ST_OK);
	assert_int_equal(m.u.ack.count, ARRAY_LEN(acks_differs));
	for (uint32_t i = 0; i < ARRAY_LEN(acks_differs); i++) {
		repl_ack_entry(&m, i, &seq, &res);
		assert_int_equal(seq, acks_differs[i].seq);
		assert_int_equal(res, acks_differs[i].res);
	}
	free(body);
	/* nothing above "differs" has a meaning: refused, in any entry */
	for (uint32_t i = 0; i < ARRAY_LEN(acks_differs); i++) {
		size_t e = ENTRY(i) + offsetof(struct repl_ack_entry, res);
		REJECT_BODY(w_ack_differs, e, 4, 2);
		REJECT_BODY(w_ack_differs, e, 4, 3);
		REJECT_BODY(w_ack_differs, e, 4, 0x7fffffff);
		ACCEPT(w_ack_differs, e, 4, REPL_ACK_DIFFERS);
		ACCEPT(w_ack_differs, e, 4, 0);
	}
}

static void test_bitmap_words(void **state)
{
	(void)state;
	/* sample has 3 words */
	REJECT_BODY(w_bitmap, B_OFF(repl_bitmap, words), 4, 0);
	REJECT_BODY(w_bitmap, B_OFF(repl_bitmap, words), 4, 2);
	REJECT_BODY(w_bitmap, B_OFF(repl_bitmap, words), 4, 4);
	REJECT_BODY(w_bitmap, B_OFF(repl_bitmap, words), 4, 0x20000003u); /* * 8 wraps to 24 */
	REJECT_BODY(w_bitmap, B_OFF(repl_bitmap, words), 4, UINT32_MAX);
	REJECT_BODY(w_bitmap, B_OFF(repl_bitmap, reserved), 4, 1);
	REJECT_BODY(w_bitmap, B_OFF(repl_bitmap, start), 8, (UINT64_MAX >> 8) + 1);
	REJECT_BODY(w_bitmap, B_OFF(repl_bitmap, start), 8, UINT64_MAX);
}

static void test_error_text(void **state)
{
	static const uint8_t bad[] = { 0, 0x01, '\t', '\n', 0x1f, 0x7f, 0x80, 0xff };
	(void)state;

	for (size_t k = 0; k < ARRAY_LEN(bad); k++) {
		REJECT_BODY(w_error, HDR, 1, bad[k]);
		REJECT_BODY(w_error, HDR + 10, 1, bad[k]);
		REJECT_BODY(w_error, HDR + strlen(ERROR_TEXT) - 1, 1, bad[k]);
	}
	ACCEPT(w_error, HDR, 1, ' ');
	ACCEPT(w_error, HDR, 1, '~');
}

static void test_gen_too_small(void **state)
{
	(void)state;
	REJECT_BODY(w_rs_done, B_OFF(repl_gen, gen_current), 8, 0);
	REJECT_BODY(w_rs_done, B_OFF(repl_gen, gen_current), 8, 1);
	REJECT_BODY(w_set_gen, B_OFF(repl_gen, gen_current), 8, 0);
	REJECT_BODY(w_set_gen, B_OFF(repl_gen, gen_current), 8, 1);
	REJECT_BODY(w_rs_start, B_OFF(repl_gen, gen_current), 8, 0);
	REJECT_BODY(w_rs_start, B_OFF(repl_gen, gen_current), 8, 1);
	ACCEPT(w_rs_done, B_OFF(repl_gen, gen_current), 8, 2);
	ACCEPT(w_rs_start, B_OFF(repl_gen, gen_current), 8, 2);
	ACCEPT(w_rs_start, B_OFF(repl_gen, gen_current), 8, UINT64_MAX);
	ACCEPT(w_set_gen, B_OFF(repl_gen, gen_current), 8, UINT64_MAX);
}

/* A WRITE whose fixed part fails still says how long it is: the receiver can
 * drain the payload and stay framed (the header alone decides the length). */
static void test_rejected_write_keeps_framing(void **state)
{
	uint8_t *w = malloc(WIRE_MAX);
	struct repl_msg m;
	size_t n;
	(void)state;

	assert_non_null(w);
	n = w_write(w);
	put64(w + B_OFF(repl_io, seq), 0);
	assert_int_equal(repl_decode_hdr(w, &m), 0);
	assert_int_equal(repl_body_needed(&m), sizeof(struct repl_io));
	assert_int_equal(HDR + m.len, n);
	assert_int_equal(repl_decode_body(w + HDR, &m), -EBADMSG);
	free(w);
}

/* Two messages back to back: decoding the first never reads into the second. */
static void test_stream(void **state)
{
	uint8_t *w = malloc(WIRE_MAX * 2);
	size_t n = 0, pos = 0;
	unsigned seen = 0;
	(void)state;

	assert_non_null(w);
	for (size_t t = 0; t < ARRAY_LEN(all_types); t++)
		n += all_types[t](w + n);
	while (pos < n) {
		struct repl_msg m;
		uint32_t len;
		assert_int_equal(repl_decode_hdr(w + pos, &m), 0);
		len = m.len;
		assert_int_equal(repl_decode_body(w + pos + HDR, &m), 0);
		pos += HDR + len;
		seen++;
	}
	assert_int_equal(pos, n);
	assert_int_equal(seen, ARRAY_LEN(all_types));
	free(w);
}

/* ---- compressed payloads (REPL_FEAT_COMPRESS) and the codecs ---- */

/* A WRITE or RS_DATA whose payload (w_io's, which repeats every 256 bytes)
 * goes compressed with codec, as repl_pack sends it. */
static size_t w_packed(uint8_t *w, uint16_t type, uint16_t codec)
{
	struct repl_io io = {
		.seq = 0x0102030405060708ull,
		.off = 0x0000000abcdef000ull,
		.len = IO_LEN,
		.flags = type == REPL_WRITE ? REPL_F_FUA : 0,
	};
	uint8_t data[IO_LEN];
	struct pack *p;
	size_t n = repl_enc_io(w, type, &io), z;

	payload(data, IO_LEN);
	assert_int_equal(pack_new(&p), 0);
	z = pack_compress(p, codec, data, IO_LEN, w + n);
	pack_free(p);
	assert_true(z > 0 && z <= pack_bound(IO_LEN));
	repl_enc_packed(w, codec, (uint32_t)z);
	return n + z;
}

static size_t w_write_lz4(uint8_t *w)
{
	return w_packed(w, REPL_WRITE, REPL_HF_LZ4);
}

static size_t w_rs_data_zstd(uint8_t *w)
{
	return w_packed(w, REPL_RS_DATA, REPL_HF_ZSTD);
}

/* The header says the codec and the compressed length; the fixed part keeps
 * the data's length; the payload decompresses to the data. */
static void test_packed_bytes(void **state)
{
	static const struct {
		builder b;
		uint16_t type, codec;
	} cases[] = { { w_write_lz4, REPL_WRITE, REPL_HF_LZ4 },
		      { w_rs_data_zstd, REPL_RS_DATA, REPL_HF_ZSTD } };
	uint8_t *w = malloc(WIRE_MAX), *body = NULL, want[IO_LEN];
	struct pack *p;
	(void)state;

	assert_non_null(w);
	assert_int_equal(pack_new(&p), 0);
	payload(want, IO_LEN);
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct repl_msg m;
		size_t n = cases[i].b(w);
		uint32_t z = (uint32_t)(n - HDR - sizeof(struct repl_io));
		uint8_t *out = malloc(IO_LEN); /* exact: ASan sees a write past it */

		assert_non_null(out);
		assert_int_equal(w[4], cases[i].type);
		assert_int_equal(w[6], cases[i].codec); /* flags, little-endian */
		assert_int_equal(w[7], 0);
		assert_int_equal(w[8] | w[9] << 8 | w[10] << 16 | w[11] << 24, 24 + z);
		assert_true(z < IO_LEN / 4); /* it repeats every 256 bytes */
		assert_int_equal(rx(w, n, &m, &body), ST_OK);
		assert_int_equal(m.hflags, cases[i].codec);
		assert_int_equal(m.u.io.len, IO_LEN);
		assert_int_equal(m.data_len, z);
		assert_int_equal(pack_decompress(p, m.hflags, w + HDR + sizeof(struct repl_io),
						 m.data_len, out, m.u.io.len),
				 0);
		assert_memory_equal(out, want, IO_LEN);
		free(out);
		free(body);
		body = NULL;
	}
	pack_free(p);
	free(w);
}

/* What the decoder refuses of a compressed message, and the reason it gives. */
static void test_packed_rules(void **state)
{
	uint8_t w[HDR + sizeof(struct repl_io)];
	struct repl_io io = { .seq = 1, .off = 0, .len = 8192 };
	struct repl_msg m;
	(void)state;

	/* one codec, and only a known one */
	REJECT_HDR(w_write_lz4, H_OFF(flags), 2, REPL_HF_LZ4 | REPL_HF_ZSTD);
	REJECT_HDR(w_write_lz4, H_OFF(flags), 2, 4);
	REJECT_HDR(w_rs_data_zstd, H_OFF(flags), 2, 0x8000 | REPL_HF_ZSTD);
	/* the codec is the payload's business: another one passes the codec
	 * (and fails decompression) */
	ACCEPT(w_write_lz4, H_OFF(flags), 2, REPL_HF_ZSTD);
	/* without a flag, the short payload no longer matches io.len */
	REJECT_BODY(w_write_lz4, H_OFF(flags), 2, 0);
	REJECT_BODY(w_rs_data_zstd, H_OFF(flags), 2, 0);
	/* compressed, but not smaller than the data */
	REJECT_BODY(w_write_lz4, H_OFF(len), 4, 24 + IO_LEN);
	REJECT_BODY(w_write_lz4, H_OFF(len), 4, 24 + IO_LEN + 512);
	REJECT_BODY(w_rs_data_zstd, H_OFF(len), 4, 24 + IO_LEN * 2);
	/* any shorter payload passes the codec (decompression checks it) */
	for (uint32_t zl = 1; zl < IO_LEN; zl += IO_LEN / 4 - 1) {
		uint8_t *full = malloc(WIRE_MAX);
		assert_non_null(full);
		w_write_lz4(full);
		put32(full + H_OFF(len), 24 + zl);
		assert_int_equal(repl_decode_hdr(full, &m), 0);
		assert_int_equal(repl_decode_body(full + HDR, &m), 0);
		assert_int_equal(m.data_len, zl);
		assert_int_equal(m.u.io.len, IO_LEN);
		free(full);
	}
	/* standing for more data than a write may hold */
	REJECT_BODY(w_write_lz4, B_OFF(repl_io, len), 4, REPL_MAX_DATA + 512);
	REJECT_BODY(w_rs_data_zstd, B_OFF(repl_io, len), 4, UINT32_MAX - 511);
	ACCEPT(w_write_lz4, B_OFF(repl_io, len), 4, REPL_MAX_DATA);
	/* the other fields keep their rules */
	REJECT_BODY(w_write_lz4, B_OFF(repl_io, seq), 8, 0);
	REJECT_BODY(w_write_lz4, B_OFF(repl_io, len), 4, IO_LEN + 1);
	REJECT_BODY(w_rs_data_zstd, B_OFF(repl_io, flags), 4, REPL_F_FUA);

	/* the reasons a connection ends with */
	repl_enc_io(w, REPL_TRIM, &io);
	repl_enc_packed(w, REPL_HF_LZ4, 0);
	put32(w + H_OFF(len), 24); /* (TRIM's length) */
	assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
	assert_non_null(m.why);
	assert_non_null(strstr(m.why, "flags on a message"));
	repl_enc_io(w, REPL_WRITE, &io);
	repl_enc_packed(w, REPL_HF_LZ4 | REPL_HF_ZSTD, 100);
	assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
	assert_non_null(strstr(m.why, "two compression codecs"));
	repl_enc_packed(w, 0x10, 100);
	assert_int_equal(repl_decode_hdr(w, &m), -EBADMSG);
	assert_non_null(strstr(m.why, "unknown flags"));
	repl_enc_packed(w, REPL_HF_ZSTD, 8192);
	assert_int_equal(repl_decode_hdr(w, &m), 0);
	assert_null(m.why);
	assert_int_equal(repl_decode_body(w + HDR, &m), -EBADMSG);
	assert_non_null(strstr(m.why, "not smaller"));
}

/* xorshift64*: data no codec can shrink, the same on every run */
static void noise(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed | 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		p[i] = (uint8_t)((x * 0x2545f4914f6cdd1dull) >> 56);
	}
}

/* Half of every 512 bytes random, half zeros: fio's
 * buffer_compress_percentage=50 (buffer_compress_chunk=512) looks so. */
static void half_noise(uint8_t *p, size_t n, uint64_t seed)
{
	noise(p, n, seed);
	for (size_t i = 0; i < n; i += 512)
		memset(p + i + 256, 0, MIN2(256, n - i > 256 ? n - i - 256 : 0));
}

static const uint16_t codecs[] = { REPL_HF_LZ4, REPL_HF_ZSTD };

/* Compressible data of every size class comes back whole; the compressed
 * form is smaller by the margin. */
static void test_pack_roundtrip(void **state)
{
	static const size_t lens[] = { 512, 4096, 65536 - 512, 65536, 1u << 20, 4u << 20 };
	struct pack *p;
	(void)state;

	assert_int_equal(pack_new(&p), 0);
	for (size_t c = 0; c < ARRAY_LEN(codecs); c++)
		for (size_t l = 0; l < ARRAY_LEN(lens); l++)
			for (int kind = 0; kind < 3; kind++) {
				size_t len = lens[l], z;
				uint8_t *in = malloc(len), *zb = malloc(pack_bound(len));
				uint8_t *out = malloc(len);
				assert_true(in && zb && out);
				if (kind == 0)
					memset(in, 0x5a, len);
				else if (kind == 1)
					payload(in, len);
				else
					half_noise(in, len, len + c);
				z = pack_compress(p, codecs[c], in, len, zb);
				if (!z)
					fail_msg("%s did not compress %zu bytes of kind %d",
						 pack_codec_name(codecs[c]), len, kind);
				assert_true(z <= pack_bound(len));
				assert_int_equal(pack_decompress(p, codecs[c], zb, z, out, len), 0);
				assert_memory_equal(in, out, len);
				free(in);
				free(zb);
				free(out);
			}
	pack_free(p);
}

/* Data that does not shrink by the margin goes raw (0), and from
 * PACK_SAMPLE_FROM up the sample in the middle decides alone. */
static void test_pack_incompressible(void **state)
{
	static const size_t lens[] = { 512, 4096, 65536, 1u << 20 };
	struct pack *p;
	uint8_t *in = malloc(1u << 20), *zb = malloc(1u << 20);
	size_t len = 1u << 20, mid = len / 2;
	(void)state;

	assert_true(in && zb);
	assert_int_equal(pack_new(&p), 0);
	assert_int_equal(pack_bound(0), 0);
	assert_int_equal(pack_bound(PACK_MIN_GAIN - 1), 0);
	assert_int_equal(pack_bound(4096), 4096 - 4096 / PACK_MIN_GAIN);
	for (size_t c = 0; c < ARRAY_LEN(codecs); c++) {
		memset(in, 0, 8);
		assert_int_equal(pack_compress(p, codecs[c], in, 8, zb), 0); /* too short */
		for (size_t l = 0; l < ARRAY_LEN(lens); l++) {
			noise(in, lens[l], lens[l]);
			assert_int_equal(pack_compress(p, codecs[c], in, lens[l], zb), 0);
		}
		/* zeros but for noise around the middle: the sample says no */
		memset(in, 0, len);
		noise(in + mid - PACK_SAMPLE, 2 * PACK_SAMPLE, 7);
		assert_int_equal(pack_compress(p, codecs[c], in, len, zb), 0);
		/* noise but for zeros around the middle: the sample says yes, the
		 * whole does not fit in the bound */
		noise(in, len, 8);
		memset(in + mid - PACK_SAMPLE, 0, 2 * PACK_SAMPLE);
		assert_int_equal(pack_compress(p, codecs[c], in, len, zb), 0);
		/* below PACK_SAMPLE_FROM no sample is taken: the whole decides */
		memset(in, 0, PACK_SAMPLE_FROM - 512);
		noise(in + (PACK_SAMPLE_FROM - 512) / 2 - 1024, 2048, 9);
		assert_true(pack_compress(p, codecs[c], in, PACK_SAMPLE_FROM - 512, zb) > 0);
		/* an unknown codec compresses nothing */
		assert_int_equal(pack_compress(p, 0, in, 4096, zb), 0);
		assert_int_equal(pack_compress(p, REPL_HF_CODECS, in, 4096, zb), 0);
	}
	/* zstd below PACK_SAMPLE_FROM: hex digits of noise (no repeats for LZ4,
	 * half the entropy for zstd) compress while the payload before did;
	 * after one that did not, LZ4's test sends them raw until a payload
	 * with repeats comes */
	pack_free(p);
	assert_int_equal(pack_new(&p), 0);
	noise(in, 4096, 10);
	for (size_t i = 0; i < 4096; i++) {
		static const char hex[] = "0123456789abcdef";
		in[4096 + i] = (uint8_t)hex[in[i] & 15];
	}
	assert_true(pack_compress(p, REPL_HF_ZSTD, in + 4096, 4096, zb) > 0);
	assert_int_equal(pack_compress(p, REPL_HF_ZSTD, in, 4096, zb), 0); /* noise */
	assert_int_equal(pack_compress(p, REPL_HF_ZSTD, in + 4096, 4096, zb), 0);
	assert_int_equal(pack_compress(p, REPL_HF_LZ4, in + 4096, 4096, zb), 0);
	memset(in + 8192, 0x11, 4096);
	assert_true(pack_compress(p, REPL_HF_ZSTD, in + 8192, 4096, zb) > 0);
	assert_true(pack_compress(p, REPL_HF_ZSTD, in + 4096, 4096, zb) > 0);
	assert_string_equal(pack_codec_name(0), "none");
	assert_string_equal(pack_codec_name(REPL_HF_LZ4), "lz4");
	assert_string_equal(pack_codec_name(REPL_HF_ZSTD), "zstd");
	pack_free(p);
	pack_free(NULL);
	free(in);
	free(zb);
}

/* Decompresses into an exact-size heap buffer (ASan: no write past len). */
static int unpack_exact(struct pack *p, uint16_t codec, const uint8_t *z, size_t zl, size_t len)
{
	uint8_t *src = malloc(zl ? zl : 1), *out = malloc(len ? len : 1);
	int r;

	assert_true(src && out);
	memcpy(src, z, zl);
	r = pack_decompress(p, codec, src, zl, out, len);
	free(src);
	free(out);
	return r;
}

/* Everything but one whole block or frame that fills exactly len is refused. */
static void test_pack_decompress_rejects(void **state)
{
	enum { L = 65536 };
	static uint8_t in[L], z[2][2 * L + 64], two[2 * L + 128];
	size_t zl[2];
	struct pack *p;
	(void)state;

	assert_int_equal(pack_new(&p), 0);
	half_noise(in, L, 3);
	for (size_t c = 0; c < 2; c++) {
		zl[c] = pack_compress(p, codecs[c], in, L, z[c]);
		assert_true(zl[c] > 0);
		assert_int_equal(unpack_exact(p, codecs[c], z[c], zl[c], L), 0);
		/* truncated, with a byte more, short of len, beyond len */
		assert_int_equal(unpack_exact(p, codecs[c], z[c], zl[c] - 1, L), -EBADMSG);
		assert_int_equal(unpack_exact(p, codecs[c], z[c], zl[c] / 2, L), -EBADMSG);
		assert_int_equal(unpack_exact(p, codecs[c], z[c], 0, L), -EBADMSG);
		z[c][zl[c]] = 0;
		assert_int_equal(unpack_exact(p, codecs[c], z[c], zl[c] + 1, L), -EBADMSG);
		assert_int_equal(unpack_exact(p, codecs[c], z[c], zl[c], L - 512), -EBADMSG);
		assert_int_equal(unpack_exact(p, codecs[c], z[c], zl[c], L + 512), -EBADMSG);
		/* the other codec, or none known */
		assert_int_equal(unpack_exact(p, codecs[1 - c], z[c], zl[c], L), -EBADMSG);
		assert_int_equal(unpack_exact(p, 0, z[c], zl[c], L), -EBADMSG);
		assert_int_equal(unpack_exact(p, REPL_HF_CODECS, z[c], zl[c], L), -EBADMSG);
		assert_int_equal(unpack_exact(p, 0x100, z[c], zl[c], L), -EBADMSG);
	}
	/* zstd: two frames that together fill len; a frame that does not say
	 * its size; a skippable frame */
	{
		size_t a = ZSTD_compress(two, sizeof(two), in, L / 2, 1), b;
		ZSTD_CCtx *cc = ZSTD_createCCtx();
		assert_false(ZSTD_isError(a));
		b = ZSTD_compress(two + a, sizeof(two) - a, in + L / 2, L / 2, 1);
		assert_false(ZSTD_isError(b));
		assert_int_equal(unpack_exact(p, REPL_HF_ZSTD, two, a + b, L), -EBADMSG);
		assert_int_equal(unpack_exact(p, REPL_HF_ZSTD, two, a, L / 2), 0);
		assert_non_null(cc);
		assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)));
		a = ZSTD_compress2(cc, two, sizeof(two), in, L);
		assert_false(ZSTD_isError(a));
		assert_int_equal(unpack_exact(p, REPL_HF_ZSTD, two, a, L), -EBADMSG);
		ZSTD_freeCCtx(cc);
		put32(two, 0x184D2A50); /* skippable frame magic, 8 bytes of content */
		put32(two + 4, 8);
		memset(two + 8, 0, 8);
		assert_int_equal(unpack_exact(p, REPL_HF_ZSTD, two, 16, 512), -EBADMSG);
	}
	pack_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_struct_sizes),
		cmocka_unit_test(test_header_bytes),
		cmocka_unit_test(test_write_header_bytes),
		cmocka_unit_test(test_other_bytes),
		cmocka_unit_test(test_rt_hello),
		cmocka_unit_test(test_rt_auth),
		cmocka_unit_test(test_rt_state),
		cmocka_unit_test(test_rt_bitmap),
		cmocka_unit_test(test_rt_bitmap_end),
		cmocka_unit_test(test_rt_error),
		cmocka_unit_test(test_rt_write),
		cmocka_unit_test(test_rt_rs_data),
		cmocka_unit_test(test_rt_read),
		cmocka_unit_test(test_rt_trim_zero),
		cmocka_unit_test(test_rt_flush),
		cmocka_unit_test(test_rt_ack),
		cmocka_unit_test(test_rt_ping_pong),
		cmocka_unit_test(test_rt_gen),
		cmocka_unit_test(test_rt_rs_zero),
		cmocka_unit_test(test_csum_bytes),
		cmocka_unit_test(test_rt_csum),
		cmocka_unit_test(test_csum_len_limit),
		cmocka_unit_test(test_resync2_flags),
		cmocka_unit_test(test_resync2_len),
		cmocka_unit_test(test_rt_rs_start),
		cmocka_unit_test(test_rt_ack_differs),
		cmocka_unit_test(test_hdr_bad_magic),
		cmocka_unit_test(test_rt_meta),
		cmocka_unit_test(test_hdr_unknown_type),
		cmocka_unit_test(test_hdr_flags_reserved),
		cmocka_unit_test(test_hdr_len_fixed),
		cmocka_unit_test(test_hdr_len_write),
		cmocka_unit_test(test_hdr_len_bitmap),
		cmocka_unit_test(test_hdr_len_ack),
		cmocka_unit_test(test_hdr_len_error),
		cmocka_unit_test(test_write_len_mismatch),
		cmocka_unit_test(test_write_data_too_big),
		cmocka_unit_test(test_io_zero_seq),
		cmocka_unit_test(test_io_misaligned),
		cmocka_unit_test(test_io_misaligned_write),
		cmocka_unit_test(test_io_zero_len_and_wrap),
		cmocka_unit_test(test_io_unknown_flags),
		cmocka_unit_test(test_rs_data_flags),
		cmocka_unit_test(test_hello_magic_proto_reserved),
		cmocka_unit_test(test_hello_proto_range),
		cmocka_unit_test(test_hello_name_padding),
		cmocka_unit_test(test_hello_name_length),
		cmocka_unit_test(test_hello_name_chars),
		cmocka_unit_test(test_state_granularity),
		cmocka_unit_test(test_state_role_disk),
		cmocka_unit_test(test_state_flags_reserved),
		cmocka_unit_test(test_state_size),
		cmocka_unit_test(test_rt_contract),
		cmocka_unit_test(test_contract_fields),
		cmocka_unit_test(test_ack_count),
		cmocka_unit_test(test_ack_entries),
		cmocka_unit_test(test_bitmap_words),
		cmocka_unit_test(test_error_text),
		cmocka_unit_test(test_gen_too_small),
		cmocka_unit_test(test_rejected_write_keeps_framing),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_packed_bytes),
		cmocka_unit_test(test_packed_rules),
		cmocka_unit_test(test_pack_roundtrip),
		cmocka_unit_test(test_pack_incompressible),
		cmocka_unit_test(test_pack_decompress_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
