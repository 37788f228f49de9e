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
	uint8_t disk_uuid[16]; /* all zero: no disk recorded (older metadata) */
	uint64_t label_seq;
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
	/* The data disk's label (ondisk.h); disk_fd -1: no label (a RAM store) */
	int disk_fd;
	unsigned label_slot; /* slot holding the newest label */
	uint64_t label_top;  /* highest label seq written or tried */
	uint64_t label_gen;  /* gen_current when the label was last bumped */
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

/* ---- the disk label (ondisk.h) ---- */

struct md_label {
	uint64_t seq;
	uint8_t volume_uuid[16];
	uint8_t disk_uuid[16];
	uint64_t size;
	uint64_t created_unix;
};

/* Codec; decode returns 0, -EBADMSG or -EPROTONOSUPPORT as md_decode. */
void md_label_encode(const struct md_label *l, uint8_t out[TANDEM_LABEL_SLOT]);
int md_label_decode(const uint8_t in[TANDEM_LABEL_SLOT], struct md_label *l);

/* What a disk's label says about it, measured against the superblock. */
enum md_disk_id {
	MD_DISK_OK = 0,     /* the recorded disk, as new as its metadata */
	MD_DISK_UNRECORDED, /* the metadata records no disk (older metadata), and
			     * the disk carries no label or one of this volume */
	MD_DISK_NOLABEL,    /* no label: a new or emptied disk */
	MD_DISK_BADLABEL,   /* a label area that is neither zeros nor a valid label */
	MD_DISK_FOREIGN,    /* another volume's disk (volume uuid or size differ) */
	MD_DISK_OTHER,      /* another disk of this volume (disk uuid differs) */
	MD_DISK_OLDER,      /* the recorded disk, older than its metadata (a restored copy) */
	MD_DISK_NEWER,      /* the recorded disk, newer than its metadata (old metadata) */
};
/* rd: what md_label_read returned; l: the label when rd == 0. Pure. */
enum md_disk_id md_disk_check(const struct md_sb *sb, int rd, const struct md_label *l);
const char *md_disk_id_what(enum md_disk_id id); /* "carries no label (...)" */

/* Opens the data disk at path for its label, which lives at sb.size.
 * Returns 0 or -errno. md_close closes it. */
int md_disk_open(struct md *md, const char *path);
/* Labels are no longer written (a failed disk: nothing more goes to it). */
void md_disk_close(struct md *md);
/* The newest valid label: 0, -ENODATA (both slots zeros or beyond the end:
 * no label), -EBADMSG (no valid slot, not all zeros), -EPROTONOSUPPORT (a
 * newer format), or another -errno (a read error). */
int md_label_read(struct md *md, struct md_label *l);
/* Labels the disk: a new disk uuid when fresh, else the recorded one, with a
 * seq above every one written; written and fsynced, then recorded in md->sb
 * (the caller's next md_write persists it: label first, then metadata).
 * Returns 0 or -errno (the superblock then records what it did before). */
int md_label_write(struct md *md, bool fresh);
/* Takes the label l (of this volume) as the recorded disk. */
void md_label_adopt(struct md *md, const struct md_label *l);

#endif
