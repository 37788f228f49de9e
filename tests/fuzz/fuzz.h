/* Shared by the libFuzzer harnesses: the entry point's prototype, CHECK,
 * which aborts on a violated property so that libFuzzer keeps the input, and
 * fuzz_take, which reads numbers from the input. */
#ifndef TANDEM_FUZZ_H
#define TANDEM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                 \
	do {                     \
		if (!(x))        \
			abort(); \
	} while (0)

/* The next `bytes` input bytes as a big-endian number (zeros once the input
 * runs out), consuming them from *p / *n. */
static inline uint64_t fuzz_take(const uint8_t **p, size_t *n, unsigned bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++) {
		v = v << 8 | (*n ? **p : 0);
		if (*n) {
			(*p)++;
			(*n)--;
		}
	}
	return v;
}

#endif
