/* On-disk metadata of a volume replica, kept in its own file
 * (<data-dir>/<volume>.md) so that the data areas of two replicas compare
 * byte for byte.
 *
 * Byte order: little-endian for every integer field.
 *
 * Layout of the metadata file:
 *   [0, 4096)          superblock slot 0
 *   [4096, 8192)       superblock slot 1
 *   [8192, 960 KiB)    activity log (so at most 952 KiB * 8 * 64 regions of the
 *                      change bitmap): one bit per 64 bits of the change bitmap
 *                      (an "extent" of 64 regions), set before a write to the
 *                      extent is issued and cleared lazily once the extent is
 *                      idle and its change bits are on disk. After a crash,
 *                      every extent set here is treated as out of sync.
 *   [960 KiB, 1 MiB)   volume attributes kept beside the data (the SCSI
 *                      persistent reservations): two slots of 32 KiB, each a
 *                      struct tandem_md_meta header and `len` bytes of an
 *                      image whose format belongs to its user (src/scsi/pr.h);
 *                      the same two-slot rule as the superblock (seq, CRC32C
 *                      over header and image). An all-zero area: no attributes.
 *   [1 MiB, ...)       change bitmap, bm_bytes long (used by replication)
 *
 * Crash safety: a write goes to the slot that does NOT hold the newest valid
 * copy, with seq one higher, then is fsynced. A torn or lost write leaves the
 * other slot intact, so a reader always finds a valid superblock: the valid
 * slot (magic, version, CRC32C) with the highest seq wins.
 *
 * The disk label (SPEC guarantee 8: a disk is tied to the metadata that
 * describes it). The data disk itself carries who it is, in reserved space
 * right after the data area, so that the data areas of two replicas still
 * compare byte for byte (`cmp -n SIZE`) and a block device needs only
 * TANDEM_LABEL_AREA bytes more than the volume:
 *   [size, size + 4096)   label area on the data disk (file or device):
 *     [0, 512)            label slot 0 (struct tandem_label)
 *     [512, 1024)         label slot 1
 *     [1024, 4096)        zero, reserved
 * The label names the volume (volume_uuid of its superblock) and the disk (a
 * random disk_uuid made when the label is first written), and counts
 * (label seq) every open and every change of gen_current. The superblock
 * records the disk_uuid and the label seq it last wrote. The label is written
 * (and fsynced) before the superblock that records it, so at a start the
 * label's seq is the recorded one or one more (a crash between the two
 * writes). Same two-slot rule as the superblock; a slot is one 512-byte
 * sector, so a torn write never spoils the other slot.
 *
 * Compatibility: a superblock written before labels existed has an all-zero
 * disk_uuid (the field was reserved, written as zeros): it records no disk,
 * and the next start labels the disk and records it.
 */
#ifndef TANDEM_PROTO_ONDISK_H
#define TANDEM_PROTO_ONDISK_H

#include <stdint.h>

#define TANDEM_MD_MAGIC 0x3130444d444e4154ull /* "TANDMD01" read as LE u64 */
#define TANDEM_MD_VERSION 1u
#define TANDEM_MD_SLOT_SIZE 4096u
#define TANDEM_MD_SLOTS 2u
#define TANDEM_MD_AL_OFFSET 8192u
#define TANDEM_MD_BITMAP_OFFSET (1024u * 1024u)
#define TANDEM_MD_META_OFFSET (960u * 1024u)
#define TANDEM_MD_META_SLOT 32768u
#define TANDEM_MD_META_MAGIC 0x3141544d444e4154ull /* "TANDMTA1" read as LE u64 */
#define TANDEM_MD_META_MAX (TANDEM_MD_META_SLOT - 32u)
#define TANDEM_MD_NAME_LEN 64u
#define TANDEM_MD_HISTORY 4u
/* gen_current / gen_bitmap values with a meaning of their own; every other
 * value is a random data generation (md_new_gen). */
#define TANDEM_MD_GEN_NONE 0ull  /* no data: content unknown, or thrown away (invalidate) */
#define TANDEM_MD_GEN_EMPTY 1ull /* created empty, never written */

/* flags */
#define TANDEM_MD_F_PRIMARY (1u << 0)     /* was primary when last written */
#define TANDEM_MD_F_CONSISTENT (1u << 1)  /* data area is a consistent image */
#define TANDEM_MD_F_UPTODATE (1u << 2)    /* data area was up to date */
#define TANDEM_MD_F_CLEAN (1u << 3)       /* shut down cleanly */
/* FAILED: the disk returned an I/O error; CONSISTENT and UPTODATE then say
 * what it was when it failed. PEER_ONLY: since it failed, a write went only
 * to the peer, which the old disk lacks. */
#define TANDEM_MD_F_FAILED (1u << 4)
#define TANDEM_MD_F_PEER_ONLY (1u << 5)

struct tandem_md_sb {
	uint64_t magic;
	uint32_t version;
	uint32_t slot_size;         /* TANDEM_MD_SLOT_SIZE */
	uint64_t seq;               /* bumped on every superblock write */
	uint8_t volume_uuid[16];    /* same on every replica of the volume */
	uint64_t size;              /* data area bytes */
	uint32_t flags;
	uint32_t block_size;        /* logical block of the data area */
	char cluster[TANDEM_MD_NAME_LEN]; /* NUL padded */
	char volume[TANDEM_MD_NAME_LEN];
	char node[TANDEM_MD_NAME_LEN];
	/* generation identifiers (replication): current, bitmap, history */
	uint64_t gen_current;
	uint64_t gen_bitmap;
	uint64_t gen_history[TANDEM_MD_HISTORY];
	/* change bitmap (replication) */
	uint64_t bm_offset;         /* TANDEM_MD_BITMAP_OFFSET */
	uint64_t bm_bytes;
	uint32_t bm_granularity;    /* bytes of data per bit */
	uint32_t reserved0;
	uint64_t created_unix;
	/* the label of the data disk this describes (all zero: none recorded) */
	uint8_t disk_uuid[16];
	uint64_t label_seq; /* label seq last written to that disk */
	uint8_t reserved[3740];
	uint32_t crc;               /* CRC32C of every byte before this field */
} __attribute__((packed));

_Static_assert(sizeof(struct tandem_md_sb) == TANDEM_MD_SLOT_SIZE, "superblock is one slot");

/* Header of a volume attribute slot; the image follows. */
struct tandem_md_meta {
	uint64_t magic;  /* TANDEM_MD_META_MAGIC */
	uint64_t seq;    /* higher wins */
	uint32_t len;    /* image bytes, <= TANDEM_MD_META_MAX */
	uint32_t crc;    /* CRC32C of this header (crc zero) and the image */
	uint64_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct tandem_md_meta) == 32, "meta header is 32 bytes");

/* The disk label (layout above). */
#define TANDEM_LABEL_MAGIC 0x3142414c444e4154ull /* "TANDLAB1" read as LE u64 */
#define TANDEM_LABEL_VERSION 1u
#define TANDEM_LABEL_AREA 4096u /* reserved on the disk after the data area */
#define TANDEM_LABEL_SLOT 512u
#define TANDEM_LABEL_SLOTS 2u

struct tandem_label {
	uint64_t magic;          /* TANDEM_LABEL_MAGIC */
	uint32_t version;        /* TANDEM_LABEL_VERSION */
	uint32_t slot_size;      /* TANDEM_LABEL_SLOT */
	uint64_t seq;            /* higher wins; bumped at every open and gen change */
	uint8_t volume_uuid[16]; /* volume_uuid of the superblock that wrote it */
	uint8_t disk_uuid[16];   /* random, made when the disk was first labelled */
	uint64_t size;           /* data area bytes: where this label lives */
	uint64_t created_unix;   /* when this label was written */
	uint8_t reserved[436];
	uint32_t crc; /* CRC32C of every byte before this field */
} __attribute__((packed));
_Static_assert(sizeof(struct tandem_label) == TANDEM_LABEL_SLOT, "a label is one slot");

#endif
