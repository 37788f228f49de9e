/* libFuzzer harness for the NBD codec: every byte a client controls.
 * The first input byte selects the target:
 *   0: a 28-byte request plus fuzzed export parameters -> decode, validate;
 *      an accepted request must really fit the export (checked here
 *      independently), and encode(decode(x)) must give x back;
 *   1: NBD_OPT_GO / NBD_OPT_INFO data -> nbd_parse_go;
 *   2: NBD_OPT_{LIST,SET}_META_CONTEXT data -> nbd_parse_meta;
 *   3: nbd_errno_to_wire on a fuzzed int.
 * A violated property calls abort() so that libFuzzer keeps the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/nbd/nbd_codec.h"

#include "fuzz.h"

static int wire_error(uint32_t e)
{
	return e == 0 || e == NBD_EPERM || e == NBD_EIO || e == NBD_ENOMEM || e == NBD_EINVAL ||
	       e == NBD_ENOSPC || e == NBD_EOVERFLOW || e == NBD_ENOTSUP || e == NBD_ESHUTDOWN;
}

static void request(const uint8_t *p, size_t n)
{
	uint8_t raw[sizeof(struct nbd_request)], again[sizeof(raw)];
	struct nbd_export_info e;
	struct nbd_req r;
	uint32_t err;
	uint64_t m;

	if (n < sizeof(raw))
		return;
	memcpy(raw, p, sizeof(raw));
	p += sizeof(raw);
	n -= sizeof(raw);
	nbd_decode_request(raw, &r);
	nbd_encode_request(&r, again);
	CHECK(memcmp(raw, again, sizeof(raw)) == 0);

	memset(&e, 0, sizeof(e));
	e.size = fuzz_take(&p, &n, 8);
	e.min_block = (uint32_t)fuzz_take(&p, &n, 4);
	e.max_payload = (uint32_t)fuzz_take(&p, &n, 4);
	e.tflags = (uint16_t)fuzz_take(&p, &n, 2);
	m = fuzz_take(&p, &n, 1);
	e.structured = m & 1;
	e.meta_allocation = (m >> 1) & 1;

	err = nbd_validate_request(&r, &e);
	CHECK(wire_error(err));
	if (err)
		return;
	/* Accepted: the range must fit without wrapping, whatever the command. */
	switch (r.type) {
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		CHECK(r.length > 0 && r.length <= e.max_payload);
		/* fall through */
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES: {
		uint64_t mb = e.min_block ? e.min_block : 1;
		CHECK(r.length > 0);
		CHECK(r.offset % mb == 0 && r.length % mb == 0);
	}
		/* fall through */
	case NBD_CMD_CACHE:
	case NBD_CMD_BLOCK_STATUS:
		CHECK(r.offset <= e.size && r.length <= e.size - r.offset);
		CHECK(r.offset + r.length >= r.offset); /* no wrap */
		if (r.type == NBD_CMD_BLOCK_STATUS)
			CHECK(e.structured && e.meta_allocation && r.length > 0);
		break;
	case NBD_CMD_FLUSH:
	case NBD_CMD_DISC:
		CHECK(r.offset == 0 && r.length == 0);
		break;
	default:
		abort(); /* an unknown command was accepted */
	}
	if (r.flags & NBD_CMD_FLAG_DF)
		CHECK(e.structured && r.type == NBD_CMD_READ && (e.tflags & NBD_FLAG_SEND_DF));
	if (r.flags & NBD_CMD_FLAG_FAST_ZERO)
		CHECK(r.type == NBD_CMD_WRITE_ZEROES && (e.tflags & NBD_FLAG_SEND_FAST_ZERO));
	CHECK(!(r.flags & ~0x1fu));
}

static void go(const uint8_t *p, size_t n)
{
	static struct nbd_go g;
	uint32_t len = (uint32_t)n;

	if (n > UINT32_MAX)
		return;
	if (nbd_parse_go(p, len, &g) == 0) {
		size_t nl = strlen(g.name);
		CHECK(nl <= NBD_MAX_STRING);
		/* the accepted data is exactly name + count + requests */
		CHECK(4 + nl + 2 + 2u * g.nreqs == n);
		CHECK(memcmp(p + 4, g.name, nl) == 0);
	}
}

static void meta(const uint8_t *p, size_t n)
{
	static struct nbd_meta m;

	if (n > UINT32_MAX)
		return;
	if (nbd_parse_meta(p, (uint32_t)n, &m) == 0) {
		size_t nl = strlen(m.name);
		CHECK(nl <= NBD_MAX_STRING);
		/* every query takes at least its 4-byte length */
		CHECK(4 + nl + 4 + 4ull * m.nqueries <= n);
		if (m.base_allocation || m.base_any)
			CHECK(m.nqueries > 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0: request(data + 1, size - 1); break;
	case 1: go(data + 1, size - 1); break;
	case 2: meta(data + 1, size - 1); break;
	case 3: {
		const uint8_t *p = data + 1;
		size_t n = size - 1;
		CHECK(wire_error(nbd_errno_to_wire((int)(uint32_t)fuzz_take(&p, &n, 4))));
		break;
	}
	}
	return 0;
}
