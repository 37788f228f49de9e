/* CRC32C: uses the SSE4.2 crc32 instruction when the CPU has it, else a
 * byte-at-a-time table. Both produce the reflected Castagnoli polynomial
 * 0x82F63B78; tests check them against the RFC 3720 B.4 vectors. */
#include "crc32c.h"

#include <string.h>

static uint32_t crc32c_table_step(uint32_t crc, uint8_t b)
{
	crc ^= b;
	for (int k = 0; k < 8; k++)
		crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
	return crc;
}

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	/* A 256-entry table built on first use would be mutable global state; the
	 * bitwise loop is slow but only serves CPUs without SSE4.2. */
	while (len--)
		crc = crc32c_table_step(crc, *p++);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p,
							     size_t len)
{
	uint64_t c = crc;
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		crc = crc32c_hw(crc, buf, len);
	else
#endif
		crc = crc32c_sw(crc, buf, len);
	return ~crc;
}
