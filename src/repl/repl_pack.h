/* Compression of replicated payloads (include/proto/repl.h, REPL_HF_LZ4 and
 * REPL_HF_ZSTD): the two codecs with their reused contexts, and the cheap
 * test that keeps data that does not compress from costing a whole
 * compression. Pure: no sockets, no volumes, no clock; unit-tested and
 * fuzzed alone (repl_pack.c also holds the link's use of it, repl_int.h).
 * One struct pack per volume, used from its event loop only.
 * Never: returns compressed bytes that are not smaller than their input by
 * PACK_MIN_GAIN, or takes a payload that does not decompress to exactly the
 * length its message states. */
#ifndef TANDEM_REPL_PACK_H
#define TANDEM_REPL_PACK_H

#include <stddef.h>
#include <stdint.h>

#define PACK_MIN_GAIN 16u            /* worth it: at least 1/16 smaller */
#define PACK_SAMPLE (4u << 10)       /* the test compresses this much with LZ4 ... */
#define PACK_SAMPLE_FROM (64u << 10) /* ... of payloads from this size up */
#define PACK_ZSTD_LEVEL 1            /* zstd's fastest regular level */

struct pack;

/* 0 or -ENOMEM; the codecs' contexts are made on first use, once. */
int pack_new(struct pack **out);
void pack_free(struct pack *p); /* NULL is a no-op */

/* The room pack_compress needs for len bytes, which is also the most it
 * writes: len less the margin (0: too short to be worth it). */
size_t pack_bound(size_t len);

/* Compresses src[0..len) with codec (REPL_HF_LZ4 or REPL_HF_ZSTD) into dst
 * (pack_bound(len) bytes). Returns the compressed length, or 0 when the
 * payload goes raw: the cheap test (LZ4, on a PACK_SAMPLE from the middle
 * from PACK_SAMPLE_FROM up; below, for zstd, on the whole payload when the
 * previous one did not compress) did not shrink by the margin; or the whole
 * did not fit in pack_bound(len); or no context could be made. */
size_t pack_compress(struct pack *p, uint16_t codec, const void *src, size_t len, void *dst);

/* Decompresses src[0..clen), compressed with codec, into dst[0..len): 0 when
 * it is one valid block (LZ4) or frame (zstd, stating its content size)
 * that fills exactly len bytes and nothing follows it; -EBADMSG for
 * anything else (an unknown codec too); -ENOMEM without a context. dst may
 * hold garbage after a failure. */
int pack_decompress(struct pack *p, uint16_t codec, const void *src, size_t clen, void *dst,
		    size_t len);

/* "lz4", "zstd", "none" (0), "?" */
const char *pack_codec_name(uint16_t codec);

#endif
