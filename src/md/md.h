/* Volume metadata: the superblock codec (pure, fuzzed) and the metadata file
 * that holds two superblock slots and room for the change bitmap.
 * Owns: the metadata fd. Never: the data area. */
#ifndef TANDEM_MD_H
#define TANDEM_MD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../include/proto/ondisk.h"

/* Decoded, host-order view of a superblock. */
struct md_sb {
	uint64_t seq;
	uint8_t volume_uuid[16];
	uint64_t size;
	uint32_t flags;
	uint32_t block_size;
	char cluster[TANDEM_MD_NAME_LEN];
	char volume[TANDEM_MD_NAME_LEN];
	char node[TANDEM_MD_NAME_LEN];
	uint64_t gen_current, gen_bitmap, gen_history[TANDEM_MD_HISTORY];
	uint64_t bm_offset, bm_bytes;
	uint32_t bm_granularity;
	uint64_t created_unix;
};

/* Codec. decode returns 0, -EBADMSG (bad magic or CRC: an unwritten or torn
 * slot), or -EPROTONOSUPPORT (a newer format). */
void md_encode(const struct md_sb *sb, uint8_t out[TANDEM_MD_SLOT_SIZE]);
int md_decode(const uint8_t in[TANDEM_MD_SLOT_SIZE], struct md_sb *sb);

struct crash_hook;
struct md {
	int fd;
	struct md_sb sb;
	unsigned slot; /* slot holding sb */
	bool created;  /* made by this open */
	uint64_t meta_seq;   /* newest attribute slot's seq (0: none) */
	unsigned meta_slot;  /* and where it is */
	struct crash_hook *crash; /* tests: a simulated crash before each write */
};

/* Opens path; when it holds no valid superblock and is empty, creates one from
 * *init (seq, uuid and timestamps filled in). Returns 0 or -errno; -EUCLEAN when
 * the file has content but no valid superblock (never overwritten silently). */
int md_open(const char *path, const struct md_sb *init, struct md **out);
/* Persists md->sb with seq+1 into the other slot, fsynced. Synchronous. */
int md_write(struct md *md);
void md_close(struct md *md); /* NULL is a no-op */

/* A new random data generation (never 0, "no data", or 1, "created empty"). */
uint64_t md_new_gen(void);

/* Volume attributes (ondisk.h: the meta area). md_meta_read fills buf (max
 * bytes) with the newest valid image and returns its length, 0 when there is
 * none; md_meta_write stores len bytes in the other slot with seq + 1 and
 * fsyncs. Synchronous; both return -errno on failure (-EFBIG: too long). */
int md_meta_read(struct md *md, uint8_t *buf, size_t max);
int md_meta_write(struct md *md, const uint8_t *buf, size_t len);

#endif
