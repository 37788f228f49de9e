/* Shared by the libFuzzer harnesses: the entry point's prototype and CHECK,
 * which aborts on a violated property so that libFuzzer keeps the input. */
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

#endif
