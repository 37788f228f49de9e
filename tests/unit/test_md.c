/* Volume metadata: the superblock codec (layout, CRC, version, names) and the
 * two-slot file (create, alternate, fall back after a torn write, refuse what
 * it cannot trust). Crash simulation is done by writing garbage over a slot
 * with pwrite, exactly where a torn superblock write would leave it. */
#include "unit.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "../../src/common/crash.h"
#include "../../src/common/crc32c.h"
#include "../../src/md/md.h"
#include "support/alloc_fault.h"

#define CRC_OFF offsetof(struct tandem_md_sb, crc)

static void fill_name(char *dst, char c, size_t n)
{
	memset(dst, 0, TANDEM_MD_NAME_LEN);
	memset(dst, c, n);
}

/* Every field set to a distinct, byte-order-revealing value. */
static void sample_sb(struct md_sb *sb)
{
	memset(sb, 0, sizeof(*sb));
	sb->seq = 0x0102030405060708ull;
	for (unsigned i = 0; i < 16; i++)
		sb->volume_uuid[i] = (uint8_t)(0xa0 + i);
	sb->size = 0x1112131415161718ull;
	sb->flags = TANDEM_MD_F_PRIMARY | TANDEM_MD_F_UPTODATE | 0x80000000u;
	sb->block_size = 4096;
	fill_name(sb->cluster, 'c', TANDEM_MD_NAME_LEN - 1); /* longest name that fits */
	snprintf(sb->volume, sizeof(sb->volume), "vol0");
	snprintf(sb->node, sizeof(sb->node), "node-a.example_1");
	sb->gen_current = 0x2122232425262728ull;
	sb->gen_bitmap = 0x3132333435363738ull;
	for (unsigned i = 0; i < TANDEM_MD_HISTORY; i++)
		sb->gen_history[i] = 0x4100000000000000ull + i;
	sb->bm_offset = TANDEM_MD_BITMAP_OFFSET;
	sb->bm_bytes = 0x5152535455565758ull;
	sb->bm_granularity = 0x61626364u;
	sb->created_unix = 0x7172737475767778ull;
}

/* Rewrites the CRC so that a deliberately changed field is the only defect. */
static void fix_crc(uint8_t buf[TANDEM_MD_SLOT_SIZE])
{
	uint32_t c = htole32(crc32c(0, buf, CRC_OFF));
	memcpy(buf + CRC_OFF, &c, 4);
}

static void test_codec_round_trip(void **state)
{
	struct md_sb in, out;
	uint8_t buf[TANDEM_MD_SLOT_SIZE];
	(void)state;

	sample_sb(&in);
	md_encode(&in, buf);
	memset(&out, 0x5a, sizeof(out));
	assert_int_equal(md_decode(buf, &out), 0);
	assert_int_equal(out.seq, in.seq);
	assert_memory_equal(out.volume_uuid, in.volume_uuid, 16);
	assert_int_equal(out.size, in.size);
	assert_int_equal(out.flags, in.flags);
	assert_int_equal(out.block_size, in.block_size);
	assert_string_equal(out.cluster, in.cluster);
	assert_string_equal(out.volume, in.volume);
	assert_string_equal(out.node, in.node);
	assert_int_equal(out.gen_current, in.gen_current);
	assert_int_equal(out.gen_bitmap, in.gen_bitmap);
	for (unsigned i = 0; i < TANDEM_MD_HISTORY; i++)
		assert_int_equal(out.gen_history[i], in.gen_history[i]);
	assert_int_equal(out.bm_offset, in.bm_offset);
	assert_int_equal(out.bm_bytes, in.bm_bytes);
	assert_int_equal(out.bm_granularity, in.bm_granularity);
	assert_int_equal(out.created_unix, in.created_unix);
	/* and as a whole, padding included (decode zeroes the struct first) */
	assert_memory_equal(&out, &in, sizeof(in));
}

/* The on-disk layout is little-endian at fixed offsets (ondisk.h). */
static void test_codec_layout(void **state)
{
	struct md_sb sb;
	uint8_t buf[TANDEM_MD_SLOT_SIZE];
	uint32_t crc;
	(void)state;

	sample_sb(&sb);
	md_encode(&sb, buf);
	assert_memory_equal(buf, "TANDMD01", 8);
	assert_memory_equal(buf + 8, "\x01\x00\x00\x00", 4);          /* version */
	assert_memory_equal(buf + 12, "\x00\x10\x00\x00", 4);         /* slot size 4096 */
	assert_memory_equal(buf + 16, "\x08\x07\x06\x05\x04\x03\x02\x01", 8); /* seq */
	assert_int_equal(buf[24], 0xa0);                             /* uuid */
	assert_memory_equal(buf + 40, "\x18\x17\x16\x15\x14\x13\x12\x11", 8); /* size */
	assert_int_equal(offsetof(struct tandem_md_sb, cluster), 56);
	assert_int_equal(buf[56 + 62], 'c');
	assert_int_equal(buf[56 + 63], 0);
	assert_memory_equal(buf + 120, "vol0\0", 5);
	memcpy(&crc, buf + CRC_OFF, 4);
	assert_int_equal(le32toh(crc), crc32c(0, buf, CRC_OFF));
	for (size_t i = offsetof(struct tandem_md_sb, reserved); i < CRC_OFF; i++)
		assert_int_equal(buf[i], 0);
}

/* Bytes after a name's NUL are not carried: encoding is canonical. */
static void test_codec_canonical(void **state)
{
	struct md_sb sb, out;
	uint8_t a[TANDEM_MD_SLOT_SIZE], b[TANDEM_MD_SLOT_SIZE];
	(void)state;

	sample_sb(&sb);
	memset(sb.volume, 'v', TANDEM_MD_NAME_LEN); /* no NUL at all: truncated to 63 */
	memcpy(sb.node, "ab\0garbage", 10);
	md_encode(&sb, a);
	assert_int_equal(md_decode(a, &out), 0);
	assert_int_equal(strlen(out.volume), TANDEM_MD_NAME_LEN - 1);
	assert_string_equal(out.node, "ab");
	md_encode(&out, b);
	assert_memory_equal(a, b, sizeof(a));
}

static void test_codec_flipped_byte(void **state)
{
	struct md_sb sb, out;
	uint8_t buf[TANDEM_MD_SLOT_SIZE];
	static const uint8_t masks[] = { 0x01, 0x80, 0xff };
	(void)state;

	sample_sb(&sb);
	md_encode(&sb, buf);
	for (size_t i = 0; i < sizeof(buf); i++) {
		for (size_t m = 0; m < sizeof(masks); m++) {
			buf[i] ^= masks[m];
			if (md_decode(buf, &out) != -EBADMSG) {
				print_message("byte %zu ^ 0x%02x not detected\n", i, masks[m]);
				fail();
			}
			buf[i] ^= masks[m];
		}
	}
	assert_int_equal(md_decode(buf, &out), 0);

	memset(buf, 0, sizeof(buf)); /* an unwritten slot */
	assert_int_equal(md_decode(buf, &out), -EBADMSG);
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(md_decode(buf, &out), -EBADMSG);
}

static void test_codec_version(void **state)
{
	struct md_sb sb, out;
	uint8_t buf[TANDEM_MD_SLOT_SIZE];
	static const uint32_t versions[] = { 2, 0x100, 0xffffffffu };
	(void)state;

	sample_sb(&sb);
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		uint32_t v = htole32(versions[i]);
		md_encode(&sb, buf);
		memcpy(buf + 8, &v, 4);
		fix_crc(buf);
		assert_int_equal(md_decode(buf, &out), -EPROTONOSUPPORT);
	}
}

static void test_codec_bad_fields_valid_crc(void **state)
{
	struct md_sb sb, out;
	uint8_t buf[TANDEM_MD_SLOT_SIZE];
	static const size_t names[] = { offsetof(struct tandem_md_sb, cluster),
					offsetof(struct tandem_md_sb, volume),
					offsetof(struct tandem_md_sb, node) };
	(void)state;

	sample_sb(&sb);
	/* a name that fills its field with no NUL */
	for (size_t i = 0; i < 3; i++) {
		md_encode(&sb, buf);
		memset(buf + names[i], 'x', TANDEM_MD_NAME_LEN);
		fix_crc(buf);
		assert_int_equal(md_decode(buf, &out), -EBADMSG);
		/* the same with the NUL in the last byte is fine */
		buf[names[i] + TANDEM_MD_NAME_LEN - 1] = '\0';
		fix_crc(buf);
		assert_int_equal(md_decode(buf, &out), 0);
	}
	/* wrong slot size */
	md_encode(&sb, buf);
	buf[13] = 0x20;
	fix_crc(buf);
	assert_int_equal(md_decode(buf, &out), -EBADMSG);
	/* wrong magic */
	md_encode(&sb, buf);
	buf[7] = '2';
	fix_crc(buf);
	assert_int_equal(md_decode(buf, &out), -EBADMSG);
}

/* ---- the metadata file ---- */

struct fixture {
	char *dir;
	char path[512];
	struct md_sb init;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->dir = unit_mkdtemp("md");
	snprintf(f->path, sizeof(f->path), "%s/vol0.md", f->dir);
	memset(&f->init, 0, sizeof(f->init));
	f->init.seq = 77; /* ignored: a new file starts at 1 */
	f->init.size = 1ull << 30;
	f->init.block_size = 512;
	f->init.flags = TANDEM_MD_F_CONSISTENT | TANDEM_MD_F_UPTODATE;
	f->init.bm_bytes = 8192;
	f->init.bm_granularity = 64 * 1024;
	f->init.gen_current = 5;
	snprintf(f->init.cluster, sizeof(f->init.cluster), "lab");
	snprintf(f->init.volume, sizeof(f->init.volume), "vol0");
	snprintf(f->init.node, sizeof(f->init.node), "a");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	unit_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static int read_slot(const char *path, unsigned slot, struct md_sb *sb)
{
	uint8_t buf[TANDEM_MD_SLOT_SIZE];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	assert_true(fd >= 0);
	n = pread(fd, buf, sizeof(buf), (off_t)slot * TANDEM_MD_SLOT_SIZE);
	close(fd);
	if (n != (ssize_t)sizeof(buf))
		return -EBADMSG;
	return md_decode(buf, sb);
}

static void write_at(const char *path, off_t off, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, p, n, off), (ssize_t)n);
	close(fd);
}

/* Flip bytes in place: every byte differs from what was there, so a tear of
 * one byte can never rewrite the same value (the slot holds a random UUID, so
 * its CRC differs from run to run). */
static void corrupt_at(const char *path, off_t off, const uint8_t *junk, size_t n)
{
	uint8_t old[TANDEM_MD_SLOT_SIZE];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0 && n <= sizeof(old));
	assert_int_equal(pread(fd, old, n, off), (ssize_t)n);
	close(fd);
	for (size_t i = 0; i < n; i++)
		old[i] ^= junk[i] | 1u;
	write_at(path, off, old, n);
}

/* Deterministic garbage for a torn slot. */
static void garbage(uint8_t *p, size_t n, unsigned seed)
{
	uint32_t x = 2463534242u ^ seed;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static off_t file_size(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void test_open_creates(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL, *md2 = NULL;
	struct md_sb disk;
	uint64_t before = (uint64_t)time(NULL);
	uint8_t uuid[16];

	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_non_null(md);
	assert_true(md->created);
	assert_int_equal(md->sb.seq, 1);
	assert_int_equal(md->slot, 0);
	assert_false(all_zero(md->sb.volume_uuid, 16));
	assert_int_equal(md->sb.bm_offset, TANDEM_MD_BITMAP_OFFSET);
	assert_int_equal(md->sb.size, f->init.size);
	assert_int_equal(md->sb.flags, f->init.flags);
	assert_int_equal(md->sb.gen_current, 5);
	assert_string_equal(md->sb.volume, "vol0");
	assert_true(md->sb.created_unix >= before && md->sb.created_unix <= (uint64_t)time(NULL));
	/* room for the bitmap after the reserved area */
	assert_int_equal(file_size(f->path), (off_t)(TANDEM_MD_BITMAP_OFFSET + 8192));
	/* slot 0 holds it on disk; slot 1 is still unwritten */
	assert_int_equal(read_slot(f->path, 0, &disk), 0);
	assert_int_equal(disk.seq, 1);
	assert_memory_equal(disk.volume_uuid, md->sb.volume_uuid, 16);
	assert_int_equal(read_slot(f->path, 1, &disk), -EBADMSG);
	memcpy(uuid, md->sb.volume_uuid, 16);
	md_close(md);

	/* reopening reads it back, creates nothing */
	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_false(md->created);
	assert_int_equal(md->sb.seq, 1);
	assert_memory_equal(md->sb.volume_uuid, uuid, 16);
	md_close(md);

	/* another volume gets another uuid */
	char other[600];
	snprintf(other, sizeof(other), "%s/other.md", f->dir);
	assert_int_equal(md_open(other, &f->init, &md2), 0);
	assert_memory_not_equal(md2->sb.volume_uuid, uuid, 16);
	md_close(md2);
	md_close(NULL);
}

/* An existing but empty file is "new" too (e.g. created by an installer). */
static void test_open_existing_empty(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	int fd = open(f->path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_true(md->created);
	assert_int_equal(md->sb.seq, 1);
	md_close(md);
}

static void test_write_alternates(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	struct md_sb s0, s1;

	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	for (unsigned i = 0; i < 6; i++) {
		md->sb.gen_current = 100 + i;
		assert_int_equal(md_write(md), 0);
		assert_int_equal(md->sb.seq, 2 + i);
		assert_int_equal(md->slot, (1 + i) % 2);
		/* the slot just written has the new seq, the other the previous one */
		assert_int_equal(read_slot(f->path, md->slot, &s0), 0);
		assert_int_equal(read_slot(f->path, md->slot ^ 1u, &s1), 0);
		assert_int_equal(s0.seq, 2 + i);
		assert_int_equal(s0.gen_current, 100 + i);
		assert_int_equal(s1.seq, 1 + i);
	}
	md_close(md);

	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_int_equal(md->sb.seq, 7);
	assert_int_equal(md->slot, 0);
	assert_int_equal(md->sb.gen_current, 105);
	md_close(md);
}

/* A write that fails leaves seq and slot as they were. */
static void test_write_failure_keeps_seq(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	int rw, ro;

	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	ro = open(f->path, O_RDONLY | O_CLOEXEC);
	assert_true(ro >= 0);
	rw = md->fd;
	md->fd = ro;
	assert_int_equal(md_write(md), -EBADF);
	assert_int_equal(md->sb.seq, 1);
	assert_int_equal(md->slot, 0);
	md->fd = rw;
	close(ro);
	assert_int_equal(md_write(md), 0);
	assert_int_equal(md->sb.seq, 2);
	md_close(md);
}

/* Torn write: the newest slot holds garbage; the older one wins, and the next
 * write reuses the torn slot. Both slot parities, whole and partial tears. */
static void test_torn_write_falls_back(void **state)
{
	struct fixture *f = *state;
	static const size_t tear[] = { TANDEM_MD_SLOT_SIZE, 512, 1, 4 };

	for (unsigned round = 0; round < 8; round++) {
		struct md *md = NULL;
		uint8_t junk[TANDEM_MD_SLOT_SIZE];
		unsigned newest;
		uint64_t seq;

		unlink(f->path);
		assert_int_equal(md_open(f->path, &f->init, &md), 0);
		md->sb.flags = 1; /* the state the older slot will hold */
		for (unsigned i = 0; i <= round % 2; i++)
			assert_int_equal(md_write(md), 0);
		md->sb.flags = 2; /* the state the torn write was carrying */
		assert_int_equal(md_write(md), 0);
		newest = md->slot;
		seq = md->sb.seq;
		md_close(md);

		garbage(junk, sizeof(junk), round);
		size_t n = tear[round / 2];
		/* a tear of a few bytes in the middle or at the CRC */
		off_t at = (off_t)newest * TANDEM_MD_SLOT_SIZE +
			   (n < 512 ? (round & 1 ? (off_t)CRC_OFF : 200) : 0);
		corrupt_at(f->path, at, junk, n);

		assert_int_equal(md_open(f->path, &f->init, &md), 0);
		assert_false(md->created);
		assert_int_equal(md->slot, newest ^ 1u);
		assert_int_equal(md->sb.seq, seq - 1);
		assert_int_equal(md->sb.flags, 1);
		/* next write goes over the torn slot, with the torn write's seq */
		assert_int_equal(md_write(md), 0);
		assert_int_equal(md->slot, newest);
		assert_int_equal(md->sb.seq, seq);
		md_close(md);

		assert_int_equal(md_open(f->path, &f->init, &md), 0);
		assert_int_equal(md->slot, newest);
		assert_int_equal(md->sb.seq, seq);
		md_close(md);
	}
}

/* Content but no valid superblock: refuse, and leave the file alone. */
static void test_both_slots_corrupt(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	uint8_t junk[2 * TANDEM_MD_SLOT_SIZE], after[sizeof(junk)];
	off_t size;
	int fd;

	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_int_equal(md_write(md), 0);
	md_close(md);
	garbage(junk, sizeof(junk), 99);
	write_at(f->path, 0, junk, sizeof(junk));
	size = file_size(f->path);

	md = NULL;
	assert_int_equal(md_open(f->path, &f->init, &md), -EUCLEAN);
	assert_null(md);
	assert_int_equal(file_size(f->path), size);
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, after, sizeof(after), 0), (ssize_t)sizeof(after));
	close(fd);
	assert_memory_equal(after, junk, sizeof(junk));

	/* a short file that is not ours (a typo in a path, say) */
	unlink(f->path);
	fd = open(f->path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello\n", 6), 6);
	close(fd);
	assert_int_equal(md_open(f->path, &f->init, &md), -EUCLEAN);
	assert_int_equal(file_size(f->path), 6);

	/* a file of zeros is what a creation cut short by a crash leaves (the
	 * size was set, the first superblock never reached the disk): it is
	 * initialized rather than blocking the volume forever */
	unlink(f->path);
	fd = open(f->path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_non_null(md);
	assert_int_equal(md->sb.seq, 1);
	md_close(md);
}

/* Makes slot `slot` of the file hold a superblock of format `version`. */
static void write_version(const char *path, unsigned slot, uint32_t version, uint64_t seq)
{
	struct md_sb sb;
	uint8_t buf[TANDEM_MD_SLOT_SIZE];
	uint32_t v = htole32(version);

	sample_sb(&sb);
	sb.seq = seq;
	md_encode(&sb, buf);
	memcpy(buf + 8, &v, 4);
	fix_crc(buf);
	write_at(path, (off_t)slot * TANDEM_MD_SLOT_SIZE, buf, sizeof(buf));
}

static void test_newer_version_refused(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	uint8_t junk[TANDEM_MD_SLOT_SIZE];

	/* both slots newer */
	write_version(f->path, 0, 2, 5);
	write_version(f->path, 1, 2, 6);
	assert_int_equal(md_open(f->path, &f->init, &md), -EPROTONOSUPPORT);
	assert_null(md);

	/* one newer slot, the other torn */
	garbage(junk, sizeof(junk), 7);
	write_at(f->path, 0, junk, sizeof(junk));
	assert_int_equal(md_open(f->path, &f->init, &md), -EPROTONOSUPPORT);
	assert_null(md);
}

/* A newer Tandem wrote the newest slot; the older slot is still version 1.
 * Opening from the stale v1 slot would then let md_write overwrite the newer
 * superblock (the slot after the stale one), silently downgrading the file
 * and resurrecting old flags (UPTODATE, PRIMARY). It must be refused. */
static void test_newer_version_in_newest_slot_refused(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	struct md_sb old;

	write_version(f->path, 0, TANDEM_MD_VERSION, 9);
	write_version(f->path, 1, TANDEM_MD_VERSION + 1, 10);
	assert_int_equal(read_slot(f->path, 0, &old), 0);
	int r = md_open(f->path, &f->init, &md);
	if (r == 0) {
		print_message("opened the stale v1 slot %u (seq %llu) despite a v2 slot\n",
			      md->slot, (unsigned long long)md->sb.seq);
		md_close(md);
	}
	assert_int_equal(r, -EPROTONOSUPPORT);
}

/* Volume attributes: none at first; each write goes to the other slot with
 * seq + 1 and is read back after a reopen; a torn newest slot falls back to
 * the older image; an image longer than the area is refused. */
static void test_meta_area(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	uint8_t img[300], got[TANDEM_MD_META_MAX];
	int fd;

	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_int_equal(md_meta_read(md, got, sizeof(got)), 0);
	assert_int_equal(md->meta_seq, 0);
	for (unsigned i = 0; i < 5; i++) {
		memset(img, 'a' + (int)i, sizeof(img));
		assert_int_equal(md_meta_write(md, img, 100 + i), 0);
		assert_int_equal(md->meta_seq, 1 + i);
		assert_int_equal(md->meta_slot, i % 2);
	}
	assert_int_equal(md_meta_write(md, img, TANDEM_MD_META_MAX + 1), -EFBIG);
	assert_int_equal(md->meta_seq, 5);
	md_close(md);

	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_int_equal(md_meta_read(md, got, sizeof(got)), 104);
	assert_int_equal(md->meta_seq, 5);
	memset(img, 'e', sizeof(img));
	assert_memory_equal(got, img, 104);
	/* a buffer too small for the image: that slot is not taken */
	assert_int_equal(md_meta_read(md, got, 103), 103);
	md_close(md);

	/* tear the newest slot (slot 0, seq 5): the older image (seq 4) is read */
	fd = open(f->path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "torn", 4, TANDEM_MD_META_OFFSET + 40), 4);
	close(fd);
	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_int_equal(md_meta_read(md, got, sizeof(got)), 103);
	assert_int_equal(md->meta_seq, 4);
	memset(img, 'd', sizeof(img));
	assert_memory_equal(got, img, 103);
	/* the next write replaces the torn slot, not the good one */
	assert_int_equal(md_meta_write(md, img, 7), 0);
	assert_int_equal(md->meta_slot, 0);
	assert_int_equal(md->meta_seq, 5);
	md_close(md);
	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_int_equal(md_meta_read(md, got, sizeof(got)), 7);
	md_close(md);
}

static void test_open_errors(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	char p[600];

	snprintf(p, sizeof(p), "%s/no/such/dir/x.md", f->dir);
	assert_int_equal(md_open(p, &f->init, &md), -ENOENT);
	assert_null(md);
	assert_int_equal(md_open(f->dir, &f->init, &md), -EISDIR);
	assert_null(md);
}

/* A write the file takes only in part (the file size limit cuts it, as a
 * full filesystem would): the superblock and the attribute area report
 * -EIO, a write the descriptor refuses -errno; the state in memory is
 * unchanged, and the next write, with room again, succeeds. */
static void test_short_and_failed_writes(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	struct rlimit old, lim;
	uint8_t attr[100] = { 1, 2, 3 };
	int rw, ro;

	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_int_equal(md->slot, 0);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = TANDEM_MD_SLOT_SIZE + 16; /* slot 1 is cut after 16 bytes */
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_int_equal(md_write(md), -EIO);
	assert_int_equal(md->slot, 0);
	lim.rlim_cur = TANDEM_MD_META_OFFSET + 16;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_int_equal(md_meta_write(md, attr, sizeof(attr)), -EIO);
	assert_int_equal(md->meta_seq, 0);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	ro = open(f->path, O_RDONLY | O_CLOEXEC);
	assert_true(ro >= 0);
	rw = md->fd;
	md->fd = ro;
	assert_int_equal(md_meta_write(md, attr, sizeof(attr)), -EBADF);
	md->fd = rw;
	close(ro);
	assert_int_equal(md_meta_write(md, attr, sizeof(attr)), 0);
	assert_int_equal(md->meta_seq, 1);
	assert_int_equal(md_write(md), 0);
	md_close(md);
}

/* Each allocation of an open, and of an attribute write, fails in turn:
 * -ENOMEM, nothing written, nothing leaked (the sanitizer build). */
static void test_alloc_faults(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	uint8_t attr[64] = { 7 };
	unsigned n;
	int r;

	for (n = 1; n < 32; n++) {
		unlink(f->path);
		md = NULL;
		alloc_fault_arm(n);
		r = md_open(f->path, &f->init, &md);
		bool fired = alloc_fault_fired();
		alloc_fault_arm(0);
		if (!fired) {
			assert_int_equal(r, 0);
			break;
		}
		assert_int_equal(r, -ENOMEM);
		assert_null(md);
	}
	assert_true(n > 1);
	alloc_fault_arm(1);
	r = md_meta_write(md, attr, sizeof(attr));
	assert_true(alloc_fault_fired());
	alloc_fault_arm(0);
	assert_int_equal(r, -ENOMEM);
	assert_int_equal(md->meta_seq, 0);
	assert_int_equal(md_meta_write(md, attr, sizeof(attr)), 0);
	md_close(md);
}

/* ---- the disk label ---- */

static void sample_label(struct md_label *l)
{
	memset(l, 0, sizeof(*l));
	l->seq = 0x0102030405060708ull;
	for (unsigned i = 0; i < 16; i++) {
		l->volume_uuid[i] = (uint8_t)(0xa0 + i);
		l->disk_uuid[i] = (uint8_t)(0xd0 + i);
	}
	l->size = 0x1112131415161718ull;
	l->created_unix = 0x7172737475767778ull;
}

#define LCRC_OFF offsetof(struct tandem_label, crc)

static void test_label_codec(void **state)
{
	struct md_label in, out;
	uint8_t buf[TANDEM_LABEL_SLOT];
	uint32_t crc;
	(void)state;

	sample_label(&in);
	md_label_encode(&in, buf);
	assert_memory_equal(buf, "TANDLAB1", 8);
	assert_memory_equal(buf + 8, "\x01\x00\x00\x00", 4);                  /* version */
	assert_memory_equal(buf + 12, "\x00\x02\x00\x00", 4);                 /* slot size 512 */
	assert_memory_equal(buf + 16, "\x08\x07\x06\x05\x04\x03\x02\x01", 8); /* seq */
	assert_int_equal(buf[24], 0xa0);                                      /* volume uuid */
	assert_int_equal(buf[40], 0xd0);                                      /* disk uuid */
	assert_memory_equal(buf + 56, "\x18\x17\x16\x15\x14\x13\x12\x11", 8); /* size */
	memcpy(&crc, buf + LCRC_OFF, 4);
	assert_int_equal(le32toh(crc), crc32c(0, buf, LCRC_OFF));
	assert_int_equal(LCRC_OFF, TANDEM_LABEL_SLOT - 4);
	assert_int_equal(md_label_decode(buf, &out), 0);
	assert_memory_equal(&in, &out, sizeof(in));
	/* every flipped byte is caught */
	for (size_t i = 0; i < TANDEM_LABEL_SLOT; i++) {
		buf[i] ^= 0x40;
		assert_int_equal(md_label_decode(buf, &out), -EBADMSG);
		buf[i] ^= 0x40;
	}
	/* a newer version with a valid CRC is not read as this one */
	buf[8] = 2;
	crc = htole32(crc32c(0, buf, LCRC_OFF));
	memcpy(buf + LCRC_OFF, &crc, 4);
	assert_int_equal(md_label_decode(buf, &out), -EPROTONOSUPPORT);
	/* nor is a superblock */
	{
		struct md_sb sb;
		uint8_t sbuf[TANDEM_MD_SLOT_SIZE];
		sample_sb(&sb);
		md_encode(&sb, sbuf);
		assert_int_equal(md_label_decode(sbuf, &out), -EBADMSG);
	}
}

/* The rules of md_disk_check, one by one. */
static void test_disk_check(void **state)
{
	struct md_sb sb;
	struct md_label l;
	(void)state;

	sample_sb(&sb);
	sample_label(&l);
	memcpy(l.volume_uuid, sb.volume_uuid, 16);
	l.size = sb.size;
	/* older metadata (no disk recorded): no label, or one of this volume */
	assert_int_equal(md_disk_check(&sb, -ENODATA, NULL), MD_DISK_UNRECORDED);
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_UNRECORDED);
	assert_int_equal(md_disk_check(&sb, -EBADMSG, NULL), MD_DISK_BADLABEL);
	l.volume_uuid[3] ^= 1;
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_FOREIGN);
	l.volume_uuid[3] ^= 1;
	/* recorded */
	memcpy(sb.disk_uuid, l.disk_uuid, 16);
	sb.label_seq = 10;
	l.seq = 10;
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_OK);
	l.seq = 11; /* a crash between the label and the superblock */
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_OK);
	l.seq = 9;
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_OLDER);
	l.seq = 12;
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_NEWER);
	l.seq = 10;
	assert_int_equal(md_disk_check(&sb, -ENODATA, NULL), MD_DISK_NOLABEL);
	assert_int_equal(md_disk_check(&sb, -EBADMSG, NULL), MD_DISK_BADLABEL);
	assert_int_equal(md_disk_check(&sb, -EPROTONOSUPPORT, NULL), MD_DISK_BADLABEL);
	l.disk_uuid[0] ^= 1;
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_OTHER);
	l.disk_uuid[0] ^= 1;
	l.volume_uuid[15] ^= 1;
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_FOREIGN);
	l.volume_uuid[15] ^= 1;
	l.size--;
	assert_int_equal(md_disk_check(&sb, 0, &l), MD_DISK_FOREIGN);
	for (int id = MD_DISK_OK; id <= MD_DISK_NEWER; id++)
		assert_string_not_equal(md_disk_id_what((enum md_disk_id)id), "?");
}

static int fail_label(struct crash_hook *h, const char *what, int fd, const void *buf, size_t len,
		      uint64_t off)
{
	(void)h, (void)fd, (void)buf, (void)len, (void)off;
	return strcmp(what, "label write") ? 0 : -EIO;
}

/* A disk labelled, its seq counted at every generation change (label
 * first), a torn newest slot falling back, a restored copy found older, and
 * a label that cannot be written leaving the metadata on the seq the disk
 * holds. */
static void test_label_file(void **state)
{
	struct fixture *f = *state;
	struct md *md = NULL;
	struct md_label l, old;
	struct crash_hook fail = { .point = fail_label };
	char disk[600];
	uint8_t area[TANDEM_LABEL_AREA], junk[TANDEM_LABEL_SLOT];
	uint8_t uuid[16];
	int fd;

	f->init.size = 1u << 20;
	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	snprintf(disk, sizeof(disk), "%s/disk.img", f->dir);
	assert_int_equal(md_disk_open(md, disk), -ENOENT);
	fd = open(disk, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	assert_int_equal(md_disk_open(md, disk), 0);
	assert_int_equal(md_label_read(md, &l), -ENODATA);
	assert_int_equal(md_disk_check(&md->sb, -ENODATA, NULL), MD_DISK_UNRECORDED);

	/* first label: a new disk uuid, seq 1; the file takes the label area */
	assert_int_equal(md_label_write(md, true), 0);
	assert_false(all_zero(md->sb.disk_uuid, 16));
	assert_int_equal(md->sb.label_seq, 1);
	assert_int_equal(file_size(disk), (1 << 20) + TANDEM_LABEL_AREA);
	assert_int_equal(md_write(md), 0); /* no generation change: no bump */
	assert_int_equal(md_label_read(md, &l), 0);
	assert_int_equal(l.seq, 1);
	assert_memory_equal(l.disk_uuid, md->sb.disk_uuid, 16);
	assert_memory_equal(l.volume_uuid, md->sb.volume_uuid, 16);
	assert_int_equal(md_disk_check(&md->sb, 0, &l), MD_DISK_OK);
	memcpy(uuid, md->sb.disk_uuid, 16);

	/* a copy of the disk now, then a generation change: seq 2 */
	fd = open(disk, O_RDONLY | O_CLOEXEC);
	assert_int_equal(pread(fd, area, sizeof(area), 1 << 20), (ssize_t)sizeof(area));
	close(fd);
	old = l;
	md->sb.gen_current = 77;
	assert_int_equal(md_write(md), 0);
	assert_int_equal(md->sb.label_seq, 2);
	assert_int_equal(md_label_read(md, &l), 0);
	assert_int_equal(l.seq, 2);
	assert_memory_equal(l.disk_uuid, uuid, 16);
	assert_int_equal(md_write(md), 0); /* same generation: no bump */
	assert_int_equal(md->sb.label_seq, 2);

	/* a crash after the label, before the superblock: one ahead is fine */
	assert_int_equal(md_label_write(md, false), 0);
	md->sb.label_seq = 2; /* what the superblock on disk still says */
	assert_int_equal(md_label_read(md, &l), 0);
	assert_int_equal(l.seq, 3);
	assert_int_equal(md_disk_check(&md->sb, 0, &l), MD_DISK_OK);
	md->sb.label_seq = 3;

	/* the newest slot torn: the other one is read (older than the record) */
	garbage(junk, sizeof(junk), 5);
	corrupt_at(disk, (off_t)((1 << 20) + md->label_slot * TANDEM_LABEL_SLOT), junk,
		   sizeof(junk));
	assert_int_equal(md_label_read(md, &l), 0);
	assert_int_equal(l.seq, 2);
	assert_int_equal(md_disk_check(&md->sb, 0, &l), MD_DISK_OLDER);
	/* the next label goes above every seq seen or tried */
	assert_int_equal(md_label_write(md, false), 0);
	assert_int_equal(md->sb.label_seq, 4);
	assert_int_equal(md_label_read(md, &l), 0);
	assert_int_equal(md_disk_check(&md->sb, 0, &l), MD_DISK_OK);

	/* the copy from before restored: older than the metadata */
	write_at(disk, 1 << 20, area, sizeof(area));
	assert_int_equal(md_label_read(md, &l), 0);
	assert_memory_equal(&l, &old, sizeof(l));
	assert_int_equal(md_disk_check(&md->sb, 0, &l), MD_DISK_OLDER);

	/* both slots damaged: no valid label, but not an empty area */
	garbage(area, sizeof(area), 9);
	write_at(disk, 1 << 20, area, sizeof(area));
	assert_int_equal(md_label_read(md, &l), -EBADMSG);
	/* a label that cannot be written: the metadata keeps what it had */
	md->crash = &fail;
	md->sb.gen_current = 78;
	assert_int_equal(md_write(md), 0);
	assert_int_equal(md->sb.label_seq, 4);
	assert_int_equal(md_label_write(md, true), -EIO);
	assert_memory_equal(md->sb.disk_uuid, uuid, 16);
	md->crash = NULL;
	/* relabelled as a new disk: another uuid, seq above all before */
	assert_int_equal(md_label_write(md, true), 0);
	assert_memory_not_equal(md->sb.disk_uuid, uuid, 16);
	assert_true(md->sb.label_seq > 4);
	assert_int_equal(md_label_read(md, &l), 0);
	assert_int_equal(md_disk_check(&md->sb, 0, &l), MD_DISK_OK);
	/* what the superblock records survives a reopen */
	memcpy(uuid, md->sb.disk_uuid, 16);
	assert_int_equal(md_write(md), 0);
	md_close(md);
	md = NULL;
	assert_int_equal(md_open(f->path, &f->init, &md), 0);
	assert_memory_equal(md->sb.disk_uuid, uuid, 16);
	assert_int_equal(md->sb.label_seq, l.seq);
	md_close(md);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_round_trip),
		cmocka_unit_test(test_codec_layout),
		cmocka_unit_test(test_codec_canonical),
		cmocka_unit_test(test_codec_flipped_byte),
		cmocka_unit_test(test_codec_version),
		cmocka_unit_test(test_codec_bad_fields_valid_crc),
		cmocka_unit_test_setup_teardown(test_open_creates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_existing_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_alternates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_failure_keeps_seq, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_write_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_both_slots_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_version_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_version_in_newest_slot_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_meta_area, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_and_failed_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_faults, setup, teardown),
		cmocka_unit_test(test_label_codec),
		cmocka_unit_test(test_disk_check),
		cmocka_unit_test_setup_teardown(test_label_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
