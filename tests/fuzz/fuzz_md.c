/* libFuzzer harness for the superblock codec. The first byte selects how the
 * rest (zero-padded to one slot) is presented: 0 as is; 1 with the CRC made
 * valid, so that the fuzzer reaches the checks behind the CRC (version, slot
 * size, names). Whatever decodes must survive encode -> decode unchanged:
 * the same fields, every defined byte (names included: the decoder only
 * accepts zero-padded names, so decoding is canonical) carried over, and a
 * second encode byte-identical to the first. */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/crc32c.h"
#include "../../src/md/md.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[TANDEM_MD_SLOT_SIZE], enc1[TANDEM_MD_SLOT_SIZE],
		enc2[TANDEM_MD_SLOT_SIZE];
	struct md_sb a, b;
	int r;

	if (size < 1)
		return 0;
	memset(buf, 0, sizeof(buf));
	memcpy(buf, data + 1, size - 1 < sizeof(buf) ? size - 1 : sizeof(buf));
	if (data[0] & 1) {
		uint32_t c = htole32(crc32c(0, buf, offsetof(struct tandem_md_sb, crc)));
		memcpy(buf + offsetof(struct tandem_md_sb, crc), &c, 4);
	}
	r = md_decode(buf, &a);
	CHECK(r == 0 || r == -EBADMSG || r == -EPROTONOSUPPORT);
	if (r)
		return 0;
	md_encode(&a, enc1);
	CHECK(md_decode(enc1, &b) == 0);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0);
	md_encode(&b, enc2);
	CHECK(memcmp(enc1, enc2, sizeof(enc1)) == 0);
	/* every field the format defines is carried over from the input;
	 * only the reserved space is not */
#define SAME(from, to) \
	CHECK(memcmp(enc1 + offsetof(struct tandem_md_sb, from), \
		     buf + offsetof(struct tandem_md_sb, from), \
		     offsetof(struct tandem_md_sb, to) - offsetof(struct tandem_md_sb, from)) == 0)
	SAME(magic, reserved0);
	SAME(created_unix, reserved);
#undef SAME
	return 0;
}
