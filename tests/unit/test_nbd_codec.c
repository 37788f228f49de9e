/* The NBD codec: wire layout checked against hand-written bytes (big-endian,
 * per include/proto/nbd.h), the request validator command by command, the one
 * errno-to-wire map, and the option parsers against truncated and lying input.
 * Every parser input is copied into an exact-size heap buffer so that ASan
 * (make SAN=1 unit) catches a read one byte past the end. */
#include "unit.h"

#include <errno.h>
#include <limits.h>

#include "../../src/nbd/nbd_codec.h"

/* ---- request layout ---- */

static const uint8_t req_bytes[28] = {
	0x25, 0x60, 0x95, 0x13,                         /* magic */
	0xa1, 0xb2,                                     /* flags */
	0xc3, 0xd4,                                     /* type */
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* cookie */
	0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, /* offset */
	0x21, 0x22, 0x23, 0x24,                         /* length */
};

static void test_request_decode(void **state)
{
	struct nbd_req r;
	(void)state;

	nbd_decode_request(req_bytes, &r);
	assert_int_equal(r.magic, NBD_REQUEST_MAGIC);
	assert_int_equal(r.flags, 0xa1b2);
	assert_int_equal(r.type, 0xc3d4);
	assert_int_equal(r.cookie, 0x0102030405060708ull);
	assert_int_equal(r.offset, 0x1112131415161718ull);
	assert_int_equal(r.length, 0x21222324u);
}

static void test_request_encode(void **state)
{
	struct nbd_req r = {
		.magic = NBD_REQUEST_MAGIC,
		.flags = 0xa1b2,
		.type = 0xc3d4,
		.cookie = 0x0102030405060708ull,
		.offset = 0x1112131415161718ull,
		.length = 0x21222324u,
	};
	uint8_t out[28 + 4];
	(void)state;

	memset(out, 0xee, sizeof(out));
	nbd_encode_request(&r, out);
	assert_memory_equal(out, req_bytes, 28);
	for (size_t i = 28; i < sizeof(out); i++)
		assert_int_equal(out[i], 0xee); /* nothing written past the header */
}

static void test_request_round_trip(void **state)
{
	uint8_t in[28], out[28];
	struct nbd_req r;
	(void)state;

	/* every byte value in every position */
	for (unsigned seed = 0; seed < 256; seed++) {
		for (unsigned i = 0; i < sizeof(in); i++)
			in[i] = (uint8_t)(seed * 31 + i * 7);
		nbd_decode_request(in, &r);
		nbd_encode_request(&r, out);
		assert_memory_equal(in, out, sizeof(in));
	}
	assert_int_equal(sizeof(struct nbd_request), 28);
}

/* ---- validation ---- */

#define GIB (1ull << 30)
#define MIB (1ull << 20)

/* What the server advertises once structured replies are on. */
#define SERVER_TFLAGS                                                                     \
	(NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM |   \
	 NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN | NBD_FLAG_SEND_CACHE |          \
	 NBD_FLAG_SEND_FAST_ZERO | NBD_FLAG_SEND_DF)

enum exp_kind {
	X_FULL,   /* structured + base:allocation, every flag advertised */
	X_PLAIN,  /* simple replies only, no DF, no FAST_ZERO advertised */
	X_SDF,    /* SEND_DF advertised but structured replies not negotiated */
	X_NOMETA, /* structured, no meta context */
	X_HUGE,   /* size just below 2^64: offset + length can wrap */
	X_BYTE,   /* min_block 1 */
	X_ZEROB,  /* min_block 0 (means 1) */
};

static struct nbd_export_info export_of(enum exp_kind k)
{
	struct nbd_export_info e = {
		.size = GIB,
		.min_block = 512,
		.max_payload = NBD_MAX_PAYLOAD,
		.tflags = SERVER_TFLAGS,
		.structured = true,
		.meta_allocation = true,
	};

	switch (k) {
	case X_FULL: break;
	case X_PLAIN:
		e.tflags = SERVER_TFLAGS & ~(NBD_FLAG_SEND_DF | NBD_FLAG_SEND_FAST_ZERO);
		e.structured = false;
		e.meta_allocation = false;
		break;
	case X_SDF: e.structured = false; e.meta_allocation = false; break;
	case X_NOMETA: e.meta_allocation = false; break;
	case X_HUGE: e.size = UINT64_MAX - 4095; break; /* 2^64 - 4096, 512-aligned */
	case X_BYTE: e.min_block = 1; break;
	case X_ZEROB: e.min_block = 0; break;
	}
	return e;
}

struct vcase {
	int line;
	uint16_t type, flags;
	uint64_t off;
	uint32_t len;
	enum exp_kind x;
	uint32_t want;
};

#define V(type, flags, off, len, x, want) { __LINE__, type, flags, off, len, x, want }
#define FUA NBD_CMD_FLAG_FUA
#define NOHOLE NBD_CMD_FLAG_NO_HOLE
#define DF NBD_CMD_FLAG_DF
#define REQONE NBD_CMD_FLAG_REQ_ONE
#define FASTZ NBD_CMD_FLAG_FAST_ZERO
#define HUGE_END (UINT64_MAX - 4095)

static const struct vcase vcases[] = {
	/* READ */
	V(NBD_CMD_READ, 0, 0, 4096, X_FULL, 0),
	V(NBD_CMD_READ, 0, GIB - 4096, 4096, X_FULL, 0),    /* ends exactly at the end */
	V(NBD_CMD_READ, 0, GIB - 4096, 4608, X_FULL, NBD_EINVAL), /* one block past */
	V(NBD_CMD_READ, 0, GIB, 512, X_FULL, NBD_EINVAL),   /* starts at the end */
	V(NBD_CMD_READ, 0, GIB + 512, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_READ, 0, 0, 0, X_FULL, NBD_EINVAL),       /* zero length */
	V(NBD_CMD_READ, 0, 0, NBD_MAX_PAYLOAD, X_FULL, 0),
	V(NBD_CMD_READ, 0, 0, NBD_MAX_PAYLOAD + 512, X_FULL, NBD_EOVERFLOW),
	V(NBD_CMD_READ, 0, 0, UINT32_MAX, X_FULL, NBD_EOVERFLOW),
	V(NBD_CMD_READ, 0, 100, 512, X_FULL, NBD_EINVAL),   /* misaligned offset */
	V(NBD_CMD_READ, 0, 512, 100, X_FULL, NBD_EINVAL),   /* misaligned length */
	V(NBD_CMD_READ, 0, 100, 7, X_BYTE, 0),
	V(NBD_CMD_READ, 0, 100, 7, X_ZEROB, 0),
	/* offset + length wraps past 2^64: must be refused, never wrap to "small" */
	V(NBD_CMD_READ, 0, UINT64_MAX - 511, 1024, X_FULL, NBD_EINVAL),
	V(NBD_CMD_READ, 0, UINT64_MAX - 511, 1024, X_HUGE, NBD_EINVAL),
	V(NBD_CMD_READ, 0, HUGE_END - 4096, 8192, X_HUGE, NBD_EINVAL),
	V(NBD_CMD_READ, 0, HUGE_END - 4096, 4096, X_HUGE, 0),
	V(NBD_CMD_READ, 0, HUGE_END, 512, X_HUGE, NBD_EINVAL),
	V(NBD_CMD_READ, FUA, 0, 512, X_FULL, 0),
	V(NBD_CMD_READ, DF, 0, 512, X_FULL, 0),
	V(NBD_CMD_READ, DF, 0, 512, X_PLAIN, NBD_EINVAL),   /* DF not advertised */
	V(NBD_CMD_READ, DF, 0, 512, X_SDF, NBD_EINVAL),     /* DF without structured replies */
	V(NBD_CMD_READ, NOHOLE, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_READ, REQONE, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_READ, FASTZ, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_READ, 1u << 5, 0, 512, X_FULL, NBD_EINVAL), /* undefined bits */
	V(NBD_CMD_READ, 1u << 15, 0, 512, X_FULL, NBD_EINVAL),
	/* WRITE */
	V(NBD_CMD_WRITE, 0, 0, 4096, X_FULL, 0),
	V(NBD_CMD_WRITE, FUA, GIB - 512, 512, X_FULL, 0),
	V(NBD_CMD_WRITE, 0, GIB - 512, 1024, X_FULL, NBD_ENOSPC),
	V(NBD_CMD_WRITE, 0, GIB, 512, X_FULL, NBD_ENOSPC),
	V(NBD_CMD_WRITE, 0, UINT64_MAX - 511, 1024, X_FULL, NBD_ENOSPC),
	V(NBD_CMD_WRITE, 0, HUGE_END - 4096, 8192, X_HUGE, NBD_ENOSPC),
	V(NBD_CMD_WRITE, 0, 0, 0, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE, 0, 0, NBD_MAX_PAYLOAD, X_FULL, 0),
	V(NBD_CMD_WRITE, 0, 0, NBD_MAX_PAYLOAD + 1, X_BYTE, NBD_EOVERFLOW),
	V(NBD_CMD_WRITE, 0, 512, 513, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE, 0, 1, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE, DF, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE, NOHOLE, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE, REQONE, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE, FASTZ, 0, 512, X_FULL, NBD_EINVAL),
	/* TRIM: no payload, so no payload limit */
	V(NBD_CMD_TRIM, 0, 0, 4096, X_FULL, 0),
	V(NBD_CMD_TRIM, FUA, 0, 512u * MIB, X_FULL, 0),
	V(NBD_CMD_TRIM, 0, 0, 0, X_FULL, NBD_EINVAL),
	V(NBD_CMD_TRIM, 0, GIB - 512, 1024, X_FULL, NBD_ENOSPC),
	V(NBD_CMD_TRIM, 0, UINT64_MAX - 511, 1024, X_FULL, NBD_ENOSPC),
	V(NBD_CMD_TRIM, 0, 256, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_TRIM, NOHOLE, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_TRIM, DF, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_TRIM, FASTZ, 0, 512, X_FULL, NBD_EINVAL),
	/* WRITE_ZEROES */
	V(NBD_CMD_WRITE_ZEROES, 0, 0, 4096, X_FULL, 0),
	V(NBD_CMD_WRITE_ZEROES, FUA | NOHOLE, 0, 512u * MIB, X_FULL, 0),
	V(NBD_CMD_WRITE_ZEROES, FASTZ, 0, 4096, X_FULL, 0),
	V(NBD_CMD_WRITE_ZEROES, FASTZ, 0, 4096, X_PLAIN, NBD_EINVAL), /* not advertised */
	V(NBD_CMD_WRITE_ZEROES, 0, 0, 0, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE_ZEROES, 0, GIB, 512, X_FULL, NBD_ENOSPC),
	V(NBD_CMD_WRITE_ZEROES, 0, HUGE_END - 4096, 8192, X_HUGE, NBD_ENOSPC),
	V(NBD_CMD_WRITE_ZEROES, 0, 0, 100, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE_ZEROES, DF, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_WRITE_ZEROES, REQONE, 0, 512, X_FULL, NBD_EINVAL),
	/* BLOCK_STATUS: needs structured replies and base:allocation */
	V(NBD_CMD_BLOCK_STATUS, 0, 0, GIB, X_FULL, 0),  /* no payload limit, no alignment */
	V(NBD_CMD_BLOCK_STATUS, REQONE, 100, 7, X_FULL, 0),
	V(NBD_CMD_BLOCK_STATUS, 0, 0, 4096, X_NOMETA, NBD_EINVAL),
	V(NBD_CMD_BLOCK_STATUS, 0, 0, 4096, X_SDF, NBD_EINVAL),
	V(NBD_CMD_BLOCK_STATUS, 0, 0, 4096, X_PLAIN, NBD_EINVAL),
	V(NBD_CMD_BLOCK_STATUS, 0, 0, 0, X_FULL, NBD_EINVAL),
	V(NBD_CMD_BLOCK_STATUS, 0, GIB - 512, 1024, X_FULL, NBD_EINVAL),
	V(NBD_CMD_BLOCK_STATUS, 0, UINT64_MAX - 511, 1024, X_FULL, NBD_EINVAL),
	V(NBD_CMD_BLOCK_STATUS, DF, 0, 512, X_FULL, NBD_EINVAL),
	V(NBD_CMD_BLOCK_STATUS, NOHOLE, 0, 512, X_FULL, NBD_EINVAL),
	/* FLUSH and DISC: offset and length must be zero */
	V(NBD_CMD_FLUSH, 0, 0, 0, X_FULL, 0),
	V(NBD_CMD_FLUSH, 0, 4096, 0, X_FULL, NBD_EINVAL),
	V(NBD_CMD_FLUSH, 0, 0, 4096, X_FULL, NBD_EINVAL),
	V(NBD_CMD_FLUSH, 0, UINT64_MAX, UINT32_MAX, X_FULL, NBD_EINVAL),
	V(NBD_CMD_FLUSH, NOHOLE, 0, 0, X_FULL, NBD_EINVAL),
	V(NBD_CMD_FLUSH, DF, 0, 0, X_FULL, NBD_EINVAL),
	V(NBD_CMD_DISC, 0, 0, 0, X_FULL, 0),
	V(NBD_CMD_DISC, 0, 1, 0, X_FULL, NBD_EINVAL),
	V(NBD_CMD_DISC, 0, 0, 1, X_FULL, NBD_EINVAL),
	V(NBD_CMD_DISC, REQONE, 0, 0, X_FULL, NBD_EINVAL),
	/* CACHE: a hint; range checked, length 0 allowed */
	V(NBD_CMD_CACHE, 0, 0, 4096, X_FULL, 0),
	V(NBD_CMD_CACHE, 0, 0, 0, X_FULL, 0),
	V(NBD_CMD_CACHE, 0, GIB - 512, 1024, X_FULL, NBD_EINVAL),
	V(NBD_CMD_CACHE, 0, UINT64_MAX - 511, 1024, X_FULL, NBD_EINVAL),
	V(NBD_CMD_CACHE, NOHOLE, 0, 512, X_FULL, NBD_EINVAL),
	/* commands Tandem does not implement */
	V(NBD_CMD_RESIZE, 0, 0, 0, X_FULL, NBD_EINVAL),
	V(9, 0, 0, 512, X_FULL, NBD_EINVAL),
	V(0xffff, 0, 0, 512, X_FULL, NBD_EINVAL),
};

static void test_validate_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(vcases) / sizeof(vcases[0]); i++) {
		const struct vcase *c = &vcases[i];
		struct nbd_export_info e = export_of(c->x);
		struct nbd_req r = {
			.magic = NBD_REQUEST_MAGIC,
			.flags = c->flags,
			.type = c->type,
			.cookie = i,
			.offset = c->off,
			.length = c->len,
		};
		uint32_t got = nbd_validate_request(&r, &e);
		if (got != c->want)
			print_message("case at %s:%d: got %u, want %u\n", __FILE__, c->line, got,
				      c->want);
		assert_int_equal(got, c->want);
	}
}

/* The validator must not depend on the magic (the server judges it first)
 * nor on the cookie. */
static void test_validate_ignores_magic_and_cookie(void **state)
{
	struct nbd_export_info e = export_of(X_FULL);
	struct nbd_req r = { .magic = 0, .type = NBD_CMD_READ, .cookie = UINT64_MAX,
			     .offset = 0, .length = 512 };
	(void)state;

	assert_int_equal(nbd_validate_request(&r, &e), 0);
}

/* Every offset/length pair around the end of a near-2^64 export: accepted
 * exactly when the range fits, whatever the wrap. */
static void test_validate_range_sweep(void **state)
{
	struct nbd_export_info e = export_of(X_BYTE);
	(void)state;

	e.size = UINT64_MAX - 10;
	for (uint64_t back = 0; back <= 40; back++) {
		for (uint32_t len = 1; len <= 40; len++) {
			struct nbd_req r = { .type = NBD_CMD_READ,
					     .offset = UINT64_MAX - back, .length = len };
			bool fits = r.offset <= e.size && len <= e.size - r.offset;
			assert_int_equal(nbd_validate_request(&r, &e), fits ? 0 : NBD_EINVAL);
			r.type = NBD_CMD_WRITE;
			assert_int_equal(nbd_validate_request(&r, &e), fits ? 0 : NBD_ENOSPC);
		}
	}
}

/* NBD protocol, "Command flags": NBD_CMD_FLAG_FUA "is valid for all commands,
 * provided NBD_FLAG_SEND_FUA has been negotiated, in which case the server
 * MUST accept all commands with this bit set (even by ignoring the bit)",
 * and existing clients are known to set it on other commands. Tandem
 * advertises SEND_FUA, so FUA on FLUSH, CACHE, BLOCK_STATUS and DISC must be
 * accepted. */
static void test_validate_fua_on_every_command(void **state)
{
	static const struct {
		uint16_t type;
		uint64_t off;
		uint32_t len;
	} ok[] = {
		{ NBD_CMD_READ, 0, 512 },        { NBD_CMD_WRITE, 0, 512 },
		{ NBD_CMD_TRIM, 0, 512 },        { NBD_CMD_WRITE_ZEROES, 0, 512 },
		{ NBD_CMD_FLUSH, 0, 0 },         { NBD_CMD_CACHE, 0, 512 },
		{ NBD_CMD_BLOCK_STATUS, 0, 512 }, { NBD_CMD_DISC, 0, 0 },
	};
	struct nbd_export_info e = export_of(X_FULL);
	unsigned bad = 0;
	(void)state;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct nbd_req r = { .type = ok[i].type, .flags = NBD_CMD_FLAG_FUA,
				     .offset = ok[i].off, .length = ok[i].len };
		uint32_t got = nbd_validate_request(&r, &e);
		if (got) {
			print_message("command %u with FUA rejected with %u\n", ok[i].type, got);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* ---- errno to wire ---- */

static void test_errno_to_wire(void **state)
{
	static const struct {
		int err;
		uint32_t wire;
	} map[] = {
		{ 0, 0 },
		{ -EPERM, NBD_EPERM },
		{ -EROFS, NBD_EPERM },
		{ -EIO, NBD_EIO },
		{ -ENOMEM, NBD_ENOMEM },
		{ -EINVAL, NBD_EINVAL },
		{ -ENOSPC, NBD_ENOSPC },
		{ -EDQUOT, NBD_ENOSPC },
		{ -EFBIG, NBD_ENOSPC },
		{ -EOVERFLOW, NBD_EOVERFLOW },
		{ -ENOTSUP, NBD_ENOTSUP },
		{ -EOPNOTSUPP, NBD_ENOTSUP },
		{ -ESHUTDOWN, NBD_ESHUTDOWN },
		{ -EBADMSG, NBD_EIO },
		{ -ETIMEDOUT, NBD_EIO },
		{ -EAGAIN, NBD_EIO },
		{ -ENOENT, NBD_EIO },
		{ EIO, NBD_EIO }, /* a positive errno is a caller bug: still a wire error */
		{ INT_MIN, NBD_EIO },
		{ INT_MAX, NBD_EIO },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (nbd_errno_to_wire(map[i].err) != map[i].wire)
			print_message("errno %d\n", map[i].err);
		assert_int_equal(nbd_errno_to_wire(map[i].err), map[i].wire);
	}
	/* Whatever the errno, only values the NBD protocol defines go on the wire. */
	for (int e = 1; e < 4096; e++) {
		uint32_t w = nbd_errno_to_wire(-e);
		assert_true(w == NBD_EPERM || w == NBD_EIO || w == NBD_ENOMEM || w == NBD_EINVAL ||
			    w == NBD_ENOSPC || w == NBD_EOVERFLOW || w == NBD_ENOTSUP ||
			    w == NBD_ESHUTDOWN);
	}
}

/* ---- reply encodings ---- */

static void test_simple_reply(void **state)
{
	static const uint8_t want[16] = {
		0x67, 0x44, 0x66, 0x98, 0x00, 0x00, 0x00, 0x16,
		0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
	};
	uint8_t out[20];
	(void)state;

	memset(out, 0xee, sizeof(out));
	assert_int_equal(nbd_encode_simple_reply(out, NBD_EINVAL, 0xf1f2f3f4f5f6f7f8ull), 16);
	assert_memory_equal(out, want, 16);
	for (size_t i = 16; i < sizeof(out); i++)
		assert_int_equal(out[i], 0xee);
}

static void test_structured_hdr(void **state)
{
	static const uint8_t want[20] = {
		0x66, 0x8e, 0x33, 0xef, 0x00, 0x01, 0x00, 0x05, 0x01, 0x02,
		0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x0a, 0x0b, 0x0c, 0x0d,
	};
	static const uint8_t err_want[8] = { 0x66, 0x8e, 0x33, 0xef, 0x00, 0x01, 0x80, 0x01 };
	uint8_t out[24];
	(void)state;

	memset(out, 0xee, sizeof(out));
	assert_int_equal(nbd_encode_structured_hdr(out, NBD_REPLY_FLAG_DONE,
						   NBD_REPLY_TYPE_BLOCK_STATUS,
						   0x0102030405060708ull, 0x0a0b0c0du),
			 20);
	assert_memory_equal(out, want, 20);
	for (size_t i = 20; i < sizeof(out); i++)
		assert_int_equal(out[i], 0xee);

	nbd_encode_structured_hdr(out, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, 0, 0);
	assert_memory_equal(out, err_want, sizeof(err_want));
}

static void test_opt_reply(void **state)
{
	static const uint8_t want[20] = {
		0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9, /* NBD_REP_MAGIC */
		0x00, 0x00, 0x00, 0x07,                         /* NBD_OPT_GO */
		0x80, 0x00, 0x00, 0x06,                         /* NBD_REP_ERR_UNKNOWN */
		0x00, 0x01, 0x02, 0x03,                         /* length */
	};
	uint8_t out[24];
	(void)state;

	memset(out, 0xee, sizeof(out));
	assert_int_equal(nbd_encode_opt_reply(out, NBD_OPT_GO, NBD_REP_ERR_UNKNOWN, 0x00010203u),
			 20);
	assert_memory_equal(out, want, 20);
	for (size_t i = 20; i < sizeof(out); i++)
		assert_int_equal(out[i], 0xee);
}

/* ---- option parsers ---- */

struct buf {
	uint8_t d[3 * NBD_MAX_STRING];
	uint32_t len;
};

static void put_be32(struct buf *b, uint32_t v)
{
	b->d[b->len++] = (uint8_t)(v >> 24);
	b->d[b->len++] = (uint8_t)(v >> 16);
	b->d[b->len++] = (uint8_t)(v >> 8);
	b->d[b->len++] = (uint8_t)v;
}

static void put_be16(struct buf *b, uint16_t v)
{
	b->d[b->len++] = (uint8_t)(v >> 8);
	b->d[b->len++] = (uint8_t)v;
}

static void put_bytes(struct buf *b, const void *p, size_t n)
{
	memcpy(b->d + b->len, p, n);
	b->len += (uint32_t)n;
}

static void put_string(struct buf *b, const char *s)
{
	put_be32(b, (uint32_t)strlen(s));
	put_bytes(b, s, strlen(s));
}

/* Runs a parser on an exact-size heap copy of the first len bytes. */
static int parse_go_n(const struct buf *b, uint32_t len, struct nbd_go *go)
{
	uint8_t *p = malloc(len ? len : 1);
	int r;

	assert_non_null(p);
	memcpy(p, b->d, len);
	r = nbd_parse_go(p, len, go);
	free(p);
	return r;
}

static int parse_meta_n(const struct buf *b, uint32_t len, struct nbd_meta *m)
{
	uint8_t *p = malloc(len ? len : 1);
	int r;

	assert_non_null(p);
	memcpy(p, b->d, len);
	r = nbd_parse_meta(p, len, m);
	free(p);
	return r;
}

static void test_parse_go_valid(void **state)
{
	static struct buf b;
	static struct nbd_go go;
	(void)state;

	b.len = 0;
	put_string(&b, "vol0");
	put_be16(&b, 3);
	put_be16(&b, NBD_INFO_NAME);
	put_be16(&b, NBD_INFO_BLOCK_SIZE);
	put_be16(&b, 0x7777); /* unknown types are ignored */
	assert_int_equal(parse_go_n(&b, b.len, &go), 0);
	assert_string_equal(go.name, "vol0");
	assert_int_equal(go.nreqs, 3);
	assert_true(go.want_name);
	assert_true(go.want_block_size);
	assert_false(go.want_description);

	/* empty name (the default export), no requests */
	b.len = 0;
	put_string(&b, "");
	put_be16(&b, 0);
	assert_int_equal(parse_go_n(&b, b.len, &go), 0);
	assert_string_equal(go.name, "");
	assert_int_equal(go.nreqs, 0);
	assert_false(go.want_name || go.want_description || go.want_block_size);

	b.len = 0;
	put_string(&b, "x");
	put_be16(&b, 1);
	put_be16(&b, NBD_INFO_DESCRIPTION);
	assert_int_equal(parse_go_n(&b, b.len, &go), 0);
	assert_true(go.want_description);
	assert_false(go.want_name);
}

static void test_parse_go_max_name(void **state)
{
	static struct buf b;
	static struct nbd_go go;
	static char name[NBD_MAX_STRING + 2];
	(void)state;

	memset(name, 'n', NBD_MAX_STRING);
	name[NBD_MAX_STRING] = '\0';
	b.len = 0;
	put_string(&b, name);
	put_be16(&b, 0);
	assert_int_equal(parse_go_n(&b, b.len, &go), 0);
	assert_int_equal(strlen(go.name), NBD_MAX_STRING);

	name[NBD_MAX_STRING] = 'n';
	name[NBD_MAX_STRING + 1] = '\0';
	b.len = 0;
	put_string(&b, name);
	put_be16(&b, 0);
	assert_int_equal(parse_go_n(&b, b.len, &go), -EINVAL);
}

static void test_parse_go_truncated(void **state)
{
	static struct buf b;
	static struct nbd_go go;
	(void)state;

	b.len = 0;
	put_string(&b, "volume-name");
	put_be16(&b, 2);
	put_be16(&b, NBD_INFO_NAME);
	put_be16(&b, NBD_INFO_DESCRIPTION);
	assert_int_equal(parse_go_n(&b, b.len, &go), 0);
	for (uint32_t n = 0; n < b.len; n++) {
		int r = parse_go_n(&b, n, &go);
		if (r != -EINVAL)
			print_message("accepted when truncated to %u of %u\n", n, b.len);
		assert_int_equal(r, -EINVAL);
	}
	/* trailing garbage: the request count no longer matches */
	b.d[b.len++] = 0;
	assert_int_equal(parse_go_n(&b, b.len, &go), -EINVAL);
}

static void test_parse_go_lies(void **state)
{
	static struct buf b;
	static struct nbd_go go;
	(void)state;

	/* name length one more than what follows */
	b.len = 0;
	put_be32(&b, 5);
	put_bytes(&b, "abcd", 4);
	assert_int_equal(parse_go_n(&b, b.len, &go), -EINVAL);

	/* name length that would wrap a 32-bit position */
	static const uint32_t huge[] = { 0xffffffffu, 0xfffffffcu, 0x80000000u, NBD_MAX_STRING + 1 };
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		b.len = 0;
		put_be32(&b, huge[i]);
		put_bytes(&b, "abcdefgh", 8);
		put_be16(&b, 0);
		assert_int_equal(parse_go_n(&b, b.len, &go), -EINVAL);
	}

	/* request count larger than the data */
	b.len = 0;
	put_string(&b, "v");
	put_be16(&b, 0xffff);
	put_be16(&b, NBD_INFO_NAME);
	assert_int_equal(parse_go_n(&b, b.len, &go), -EINVAL);

	/* request count smaller than the data */
	b.len = 0;
	put_string(&b, "v");
	put_be16(&b, 1);
	put_be16(&b, NBD_INFO_NAME);
	put_be16(&b, NBD_INFO_NAME);
	assert_int_equal(parse_go_n(&b, b.len, &go), -EINVAL);

	/* embedded NUL in the name */
	b.len = 0;
	put_be32(&b, 4);
	put_bytes(&b, "v\0l0", 4);
	put_be16(&b, 0);
	assert_int_equal(parse_go_n(&b, b.len, &go), -EINVAL);
}

static void test_parse_meta_valid(void **state)
{
	static struct buf b;
	static struct nbd_meta m;
	(void)state;

	b.len = 0;
	put_string(&b, "vol0");
	put_be32(&b, 2);
	put_string(&b, "qemu:dirty-bitmap:x");
	put_string(&b, NBD_META_BASE_ALLOCATION);
	assert_int_equal(parse_meta_n(&b, b.len, &m), 0);
	assert_string_equal(m.name, "vol0");
	assert_int_equal(m.nqueries, 2);
	assert_true(m.base_allocation);
	assert_false(m.base_any);

	b.len = 0;
	put_string(&b, "vol0");
	put_be32(&b, 1);
	put_string(&b, "base:");
	assert_int_equal(parse_meta_n(&b, b.len, &m), 0);
	assert_true(m.base_any);
	assert_false(m.base_allocation);

	/* no queries (LIST: "all contexts"); and near-misses that are not ours */
	b.len = 0;
	put_string(&b, "vol0");
	put_be32(&b, 0);
	assert_int_equal(parse_meta_n(&b, b.len, &m), 0);
	assert_int_equal(m.nqueries, 0);
	assert_false(m.base_allocation || m.base_any);

	b.len = 0;
	put_string(&b, "");
	put_be32(&b, 3);
	put_string(&b, "base:allocation2");
	put_string(&b, "base");
	put_string(&b, "");
	assert_int_equal(parse_meta_n(&b, b.len, &m), 0);
	assert_false(m.base_allocation || m.base_any);
}

static void test_parse_meta_truncated(void **state)
{
	static struct buf b;
	static struct nbd_meta m;
	(void)state;

	b.len = 0;
	put_string(&b, "vol0");
	put_be32(&b, 2);
	put_string(&b, NBD_META_BASE_ALLOCATION);
	put_string(&b, "base:");
	assert_int_equal(parse_meta_n(&b, b.len, &m), 0);
	for (uint32_t n = 0; n < b.len; n++) {
		int r = parse_meta_n(&b, n, &m);
		if (r != -EINVAL)
			print_message("accepted when truncated to %u of %u\n", n, b.len);
		assert_int_equal(r, -EINVAL);
	}
	b.d[b.len++] = 'x'; /* trailing garbage */
	assert_int_equal(parse_meta_n(&b, b.len, &m), -EINVAL);
}

static void test_parse_meta_lies(void **state)
{
	static struct buf b;
	static struct nbd_meta m;
	static char q[NBD_MAX_STRING + 2];
	(void)state;

	/* query count far beyond the data: fails, and fast */
	b.len = 0;
	put_string(&b, "vol0");
	put_be32(&b, 0xffffffffu);
	put_string(&b, NBD_META_BASE_ALLOCATION);
	assert_int_equal(parse_meta_n(&b, b.len, &m), -EINVAL);

	/* query length larger than what remains, and lengths that would wrap */
	static const uint32_t lies[] = { 16, 0xffffffffu, 0xfffffff0u, 0x80000000u };
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		b.len = 0;
		put_string(&b, "vol0");
		put_be32(&b, 1);
		put_be32(&b, lies[i]);
		put_bytes(&b, NBD_META_BASE_ALLOCATION, strlen(NBD_META_BASE_ALLOCATION));
		assert_int_equal(parse_meta_n(&b, b.len, &m), -EINVAL);
	}

	/* embedded NUL: "base:allocation\0x" must not match base:allocation */
	b.len = 0;
	put_string(&b, "vol0");
	put_be32(&b, 1);
	put_be32(&b, 17);
	put_bytes(&b, "base:allocation\0x", 17);
	assert_int_equal(parse_meta_n(&b, b.len, &m), -EINVAL);
	assert_false(m.base_allocation);

	/* embedded NUL in the export name */
	b.len = 0;
	put_be32(&b, 3);
	put_bytes(&b, "a\0b", 3);
	put_be32(&b, 0);
	assert_int_equal(parse_meta_n(&b, b.len, &m), -EINVAL);

	/* a query of exactly the maximum length is fine; one more is not */
	memset(q, 'q', NBD_MAX_STRING);
	q[NBD_MAX_STRING] = '\0';
	b.len = 0;
	put_string(&b, "v");
	put_be32(&b, 1);
	put_string(&b, q);
	assert_int_equal(parse_meta_n(&b, b.len, &m), 0);
	q[NBD_MAX_STRING] = 'q';
	q[NBD_MAX_STRING + 1] = '\0';
	b.len = 0;
	put_string(&b, "v");
	put_be32(&b, 1);
	put_string(&b, q);
	assert_int_equal(parse_meta_n(&b, b.len, &m), -EINVAL);

	/* count says 3, data holds 2 */
	b.len = 0;
	put_string(&b, "v");
	put_be32(&b, 3);
	put_string(&b, "a");
	put_string(&b, "b");
	assert_int_equal(parse_meta_n(&b, b.len, &m), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_decode),
		cmocka_unit_test(test_request_encode),
		cmocka_unit_test(test_request_round_trip),
		cmocka_unit_test(test_validate_table),
		cmocka_unit_test(test_validate_ignores_magic_and_cookie),
		cmocka_unit_test(test_validate_range_sweep),
		cmocka_unit_test(test_validate_fua_on_every_command),
		cmocka_unit_test(test_errno_to_wire),
		cmocka_unit_test(test_simple_reply),
		cmocka_unit_test(test_structured_hdr),
		cmocka_unit_test(test_opt_reply),
		cmocka_unit_test(test_parse_go_valid),
		cmocka_unit_test(test_parse_go_max_name),
		cmocka_unit_test(test_parse_go_truncated),
		cmocka_unit_test(test_parse_go_lies),
		cmocka_unit_test(test_parse_meta_valid),
		cmocka_unit_test(test_parse_meta_truncated),
		cmocka_unit_test(test_parse_meta_lies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
