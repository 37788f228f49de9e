/* CRC32C against the RFC 3720 B.4 vectors, on both code paths.
 * The source is included (not linked) so that the static bitwise fallback,
 * which only runs on CPUs without SSE4.2, is tested here too; on x86-64 the
 * public crc32c() takes the SSE4.2 path and is checked against it. */
#include "unit.h"

#include "../../src/common/crc32c.c"

/* The fallback with the same pre/post inversion as crc32c(). */
static uint32_t sw(uint32_t crc, const void *buf, size_t len)
{
	return ~crc32c_sw(~crc, buf, len);
}

struct vector {
	const char *name;
	uint8_t data[48];
	size_t len;
	uint32_t crc;
};

static void fill_vectors(struct vector v[5])
{
	static const uint8_t read_pdu[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};

	memset(v, 0, 5 * sizeof(*v));
	v[0] = (struct vector){ .name = "32 zeros", .len = 32, .crc = 0x8A9136AAu };
	v[1] = (struct vector){ .name = "32 x 0xff", .len = 32, .crc = 0x62A8AB43u };
	memset(v[1].data, 0xff, 32);
	v[2] = (struct vector){ .name = "0..31", .len = 32, .crc = 0x46DD794Eu };
	v[3] = (struct vector){ .name = "31..0", .len = 32, .crc = 0x113FDB5Cu };
	for (unsigned i = 0; i < 32; i++) {
		v[2].data[i] = (uint8_t)i;
		v[3].data[i] = (uint8_t)(31 - i);
	}
	v[4] = (struct vector){ .name = "iSCSI READ PDU", .len = 48, .crc = 0xD9963A56u };
	memcpy(v[4].data, read_pdu, sizeof(read_pdu));
}

static void test_rfc3720_vectors(void **state)
{
	struct vector v[5];
	(void)state;

	fill_vectors(v);
	for (unsigned i = 0; i < 5; i++) {
		if (crc32c(0, v[i].data, v[i].len) != v[i].crc)
			print_message("vector %s\n", v[i].name);
		assert_int_equal(crc32c(0, v[i].data, v[i].len), v[i].crc);
		assert_int_equal(sw(0, v[i].data, v[i].len), v[i].crc);
	}
}

static void test_check_value(void **state)
{
	(void)state;
	/* The catalogue check value of CRC-32C. */
	assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(sw(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(crc32c(0, "", 0), 0);
}

/* Feeding the result back in continues the CRC: any split equals one shot. */
static void test_incremental(void **state)
{
	uint8_t buf[131];
	(void)state;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 37 + 11);
	uint32_t whole = crc32c(0, buf, sizeof(buf));
	assert_int_equal(whole, sw(0, buf, sizeof(buf)));
	for (size_t k = 0; k <= sizeof(buf); k++) {
		assert_int_equal(crc32c(crc32c(0, buf, k), buf + k, sizeof(buf) - k), whole);
		assert_int_equal(sw(sw(0, buf, k), buf + k, sizeof(buf) - k), whole);
	}
	/* three pieces, byte by byte */
	uint32_t c = 0;
	for (size_t i = 0; i < sizeof(buf); i++)
		c = crc32c(c, buf + i, 1);
	assert_int_equal(c, whole);
}

/* The 8-bytes-at-a-time path must agree with the bitwise one for every
 * alignment and every tail length. */
static void test_paths_agree(void **state)
{
	uint8_t buf[96];
	(void)state;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(0xA5 ^ (i * 7));
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len + off <= sizeof(buf); len++)
			assert_int_equal(crc32c(0x12345678u, buf + off, len),
					 sw(0x12345678u, buf + off, len));
}

/* A single flipped bit changes the CRC (what md_decode relies on). */
static void test_detects_bit_flip(void **state)
{
	uint8_t buf[64] = { 0 };
	(void)state;

	uint32_t base = crc32c(0, buf, sizeof(buf));
	for (size_t bit = 0; bit < sizeof(buf) * 8; bit++) {
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(crc32c(0, buf, sizeof(buf)), base);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc3720_vectors), cmocka_unit_test(test_check_value),
		cmocka_unit_test(test_incremental),     cmocka_unit_test(test_paths_agree),
		cmocka_unit_test(test_detects_bit_flip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
