/* Superblock codec and the crash-safe metadata file (see include/proto/ondisk.h
 * for the layout and the two-slot rule). Writes are synchronous: they happen on
 * role and state changes, never per I/O. */
#include "../common/crash.h"
#include "md.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/crc32c.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/util.h"

static void copy_name(char *dst, const char *src)
{
	size_t n = strnlen(src, TANDEM_MD_NAME_LEN - 1);
	memset(dst, 0, TANDEM_MD_NAME_LEN);
	memcpy(dst, src, n);
}

void md_encode(const struct md_sb *sb, uint8_t out[TANDEM_MD_SLOT_SIZE])
{
	struct tandem_md_sb d;

	memset(&d, 0, sizeof(d));
	d.magic = htole64(TANDEM_MD_MAGIC);
	d.version = htole32(TANDEM_MD_VERSION);
	d.slot_size = htole32(TANDEM_MD_SLOT_SIZE);
	d.seq = htole64(sb->seq);
	memcpy(d.volume_uuid, sb->volume_uuid, 16);
	d.size = htole64(sb->size);
	d.flags = htole32(sb->flags);
	d.block_size = htole32(sb->block_size);
	copy_name(d.cluster, sb->cluster);
	copy_name(d.volume, sb->volume);
	copy_name(d.node, sb->node);
	d.gen_current = htole64(sb->gen_current);
	d.gen_bitmap = htole64(sb->gen_bitmap);
	for (unsigned i = 0; i < TANDEM_MD_HISTORY; i++)
		d.gen_history[i] = htole64(sb->gen_history[i]);
	d.bm_offset = htole64(sb->bm_offset);
	d.bm_bytes = htole64(sb->bm_bytes);
	d.bm_granularity = htole32(sb->bm_granularity);
	d.created_unix = htole64(sb->created_unix);
	memcpy(d.disk_uuid, sb->disk_uuid, 16);
	d.label_seq = htole64(sb->label_seq);
	d.crc = htole32(crc32c(0, &d, offsetof(struct tandem_md_sb, crc)));
	memcpy(out, &d, sizeof(d));
}

static int name_ok(const char *n)
{
	/* NUL-terminated inside the field and zero-padded, as md_encode writes it,
	 * so that decoding is canonical (encode(decode(x)) == x). */
	const char *z = memchr(n, '\0', TANDEM_MD_NAME_LEN);
	if (!z)
		return 0;
	for (; z < n + TANDEM_MD_NAME_LEN; z++)
		if (*z)
			return 0;
	return 1;
}

int md_decode(const uint8_t in[TANDEM_MD_SLOT_SIZE], struct md_sb *sb)
{
	struct tandem_md_sb d;

	memcpy(&d, in, sizeof(d));
	if (le64toh(d.magic) != TANDEM_MD_MAGIC)
		return -EBADMSG;
	if (le32toh(d.crc) != crc32c(0, &d, offsetof(struct tandem_md_sb, crc)))
		return -EBADMSG;
	if (le32toh(d.version) != TANDEM_MD_VERSION)
		return -EPROTONOSUPPORT;
	if (le32toh(d.slot_size) != TANDEM_MD_SLOT_SIZE || !name_ok(d.cluster) ||
	    !name_ok(d.volume) || !name_ok(d.node))
		return -EBADMSG;
	memset(sb, 0, sizeof(*sb));
	sb->seq = le64toh(d.seq);
	memcpy(sb->volume_uuid, d.volume_uuid, 16);
	sb->size = le64toh(d.size);
	sb->flags = le32toh(d.flags);
	sb->block_size = le32toh(d.block_size);
	memcpy(sb->cluster, d.cluster, TANDEM_MD_NAME_LEN);
	memcpy(sb->volume, d.volume, TANDEM_MD_NAME_LEN);
	memcpy(sb->node, d.node, TANDEM_MD_NAME_LEN);
	sb->gen_current = le64toh(d.gen_current);
	sb->gen_bitmap = le64toh(d.gen_bitmap);
	for (unsigned i = 0; i < TANDEM_MD_HISTORY; i++)
		sb->gen_history[i] = le64toh(d.gen_history[i]);
	sb->bm_offset = le64toh(d.bm_offset);
	sb->bm_bytes = le64toh(d.bm_bytes);
	sb->bm_granularity = le32toh(d.bm_granularity);
	sb->created_unix = le64toh(d.created_unix);
	memcpy(sb->disk_uuid, d.disk_uuid, 16);
	sb->label_seq = le64toh(d.label_seq);
	return 0;
}

static int write_slot(struct md *md, unsigned slot)
{
	uint8_t buf[TANDEM_MD_SLOT_SIZE];
	ssize_t n;

	md_encode(&md->sb, buf);
	n = crash_point(md->crash, "superblock write", md->fd, buf, sizeof(buf),
			(uint64_t)slot * TANDEM_MD_SLOT_SIZE);
	if (n < 0)
		return (int)n;
	n = pwrite(md->fd, buf, sizeof(buf), (off_t)slot * TANDEM_MD_SLOT_SIZE);
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(buf))
		return -EIO;
	if (fdatasync(md->fd) < 0)
		return -errno;
	md->slot = slot;
	return 0;
}

int md_write(struct md *md)
{
	unsigned slot = md->slot ^ 1u;
	int r;

	/* A new generation is counted on the disk too (label first, then the
	 * superblock that records it), so that a copy of the disk from before
	 * it is told apart. A label that cannot be written is not a metadata
	 * failure: the superblock then records the seq the label still holds. */
	if (md->disk_fd >= 0 && md->sb.gen_current != md->label_gen) {
		r = md_label_write(md, false);
		if (r)
			log_warn("volume %s: writing the disk label: %s", md->sb.volume,
				 strerror(-r));
	}
	md->sb.seq++;
	r = write_slot(md, slot);
	if (r)
		md->sb.seq--;
	return r;
}

/* True when both slots read as zeros: a file whose creation was cut short
 * before its first superblock reached the disk, which is safe to initialize. */
static bool all_zero(int fd)
{
	static const uint8_t zero[TANDEM_MD_SLOT_SIZE];
	uint8_t buf[TANDEM_MD_SLOT_SIZE];

	for (unsigned i = 0; i < TANDEM_MD_SLOTS; i++) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)i * TANDEM_MD_SLOT_SIZE);
		if (n < 0 || (n > 0 && memcmp(buf, zero, (size_t)n)))
			return false;
	}
	return true;
}

int md_open(const char *path, const struct md_sb *init, struct md **out)
{
	struct md *md;
	struct md_sb s[TANDEM_MD_SLOTS];
	int valid[TANDEM_MD_SLOTS], r = 0, best = -1, newer = 0;
	struct stat st;

	md = calloc(1, sizeof(*md));
	if (!md)
		return -ENOMEM;
	md->disk_fd = -1;
	md->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (md->fd < 0) {
		r = -errno;
		free(md);
		return r;
	}
	for (unsigned i = 0; i < TANDEM_MD_SLOTS; i++) {
		uint8_t buf[TANDEM_MD_SLOT_SIZE];
		ssize_t n = pread(md->fd, buf, sizeof(buf), (off_t)i * TANDEM_MD_SLOT_SIZE);
		valid[i] = n == (ssize_t)sizeof(buf) ? md_decode(buf, &s[i]) : -EBADMSG;
		if (valid[i] == -EPROTONOSUPPORT)
			newer = 1;
		if (valid[i] == 0 && (best < 0 || s[i].seq > s[best].seq))
			best = (int)i;
	}
	/* A slot from a newer format means a newer Tandem wrote here; its seq
	 * cannot be read, so the older slot may be stale. Refuse rather than
	 * silently downgrade the file on the next write. */
	if (newer) {
		r = -EPROTONOSUPPORT;
	} else if (best >= 0) {
		md->sb = s[best];
		md->slot = (unsigned)best;
	} else if (fstat(md->fd, &st) == 0 && (st.st_size == 0 || all_zero(md->fd))) {
		md->sb = *init;
		md->sb.seq = 0;
		md->sb.bm_offset = TANDEM_MD_BITMAP_OFFSET;
		md->sb.created_unix = (uint64_t)time(NULL);
		if (getrandom(md->sb.volume_uuid, 16, 0) != 16)
			r = -EIO;
		/* The first write goes to slot 0 (slot ^ 1 with slot = 1). */
		md->slot = 1;
		if (!r)
			r = md_write(md);
		if (!r && ftruncate(md->fd, (off_t)(TANDEM_MD_BITMAP_OFFSET + md->sb.bm_bytes)) < 0)
			r = -errno;
		if (!r && fdatasync(md->fd) < 0)
			r = -errno;
		if (!r)
			r = fsync_dir_of(path);
		md->created = true;
	} else {
		r = -EUCLEAN;
	}
	if (r) {
		close(md->fd);
		free(md);
		return r;
	}
	*out = md;
	return 0;
}

void md_close(struct md *md)
{
	if (!md)
		return;
	md_disk_close(md);
	close(md->fd);
	free(md);
}

/* ---- volume attributes ---- */

static uint32_t meta_crc(const struct tandem_md_meta *h, const uint8_t *img, uint32_t len)
{
	struct tandem_md_meta c = *h;
	c.crc = 0;
	return crc32c(crc32c(0, &c, sizeof(c)), img, len);
}

int md_meta_read(struct md *md, uint8_t *buf, size_t max)
{
	uint8_t *slot = malloc(TANDEM_MD_META_SLOT);
	int best = 0;

	if (!slot)
		return -ENOMEM;
	md->meta_seq = 0;
	for (unsigned i = 0; i < 2; i++) {
		struct tandem_md_meta h;
		ssize_t n = pread(md->fd, slot, TANDEM_MD_META_SLOT,
				  (off_t)TANDEM_MD_META_OFFSET + (off_t)i * TANDEM_MD_META_SLOT);
		uint32_t len;

		if (n < (ssize_t)sizeof(h))
			continue; /* short file: nothing stored yet */
		memcpy(&h, slot, sizeof(h));
		len = le32toh(h.len);
		if (le64toh(h.magic) != TANDEM_MD_META_MAGIC || len > TANDEM_MD_META_MAX ||
		    (size_t)n < sizeof(h) + len || len > max)
			continue;
		h.magic = le64toh(h.magic);
		h.seq = le64toh(h.seq);
		h.len = len;
		{
			struct tandem_md_meta le = h;
			le.magic = htole64(h.magic);
			le.seq = htole64(h.seq);
			le.len = htole32(len);
			if (meta_crc(&le, slot + sizeof(h), len) != le32toh(h.crc))
				continue;
		}
		if (h.seq > md->meta_seq) {
			md->meta_seq = h.seq;
			md->meta_slot = i;
			memcpy(buf, slot + sizeof(h), len);
			best = (int)len;
		}
	}
	free(slot);
	return best;
}

int md_meta_write(struct md *md, const uint8_t *buf, size_t len)
{
	unsigned slot = md->meta_seq ? md->meta_slot ^ 1u : 0;
	uint8_t *img;
	struct tandem_md_meta h;
	ssize_t n;
	size_t total = sizeof(h) + len;

	if (len > TANDEM_MD_META_MAX)
		return -EFBIG;
	img = calloc(1, total);
	if (!img)
		return -ENOMEM;
	memset(&h, 0, sizeof(h));
	h.magic = htole64(TANDEM_MD_META_MAGIC);
	h.seq = htole64(md->meta_seq + 1);
	h.len = htole32((uint32_t)len);
	h.crc = htole32(meta_crc(&h, buf, (uint32_t)len));
	memcpy(img, &h, sizeof(h));
	memcpy(img + sizeof(h), buf, len);
	n = crash_point(md->crash, "attribute write", md->fd, img, total,
			(uint64_t)TANDEM_MD_META_OFFSET + (uint64_t)slot * TANDEM_MD_META_SLOT);
	if (n < 0) {
		free(img);
		return (int)n;
	}
	n = pwrite(md->fd, img, total, (off_t)TANDEM_MD_META_OFFSET + (off_t)slot * TANDEM_MD_META_SLOT);
	free(img);
	if (n < 0)
		return -errno;
	if ((size_t)n != total)
		return -EIO;
	if (fdatasync(md->fd) < 0)
		return -errno;
	md->meta_seq++;
	md->meta_slot = slot;
	return 0;
}

uint64_t md_new_gen(void)
{
	uint64_t g = 0;
	while (g <= 1)
		if (getrandom(&g, sizeof(g), 0) != sizeof(g))
			g = now_ns() ^ ((uint64_t)getpid() << 32);
	return g;
}

/* ---- the disk label ---- */

void md_label_encode(const struct md_label *l, uint8_t out[TANDEM_LABEL_SLOT])
{
	struct tandem_label d;

	memset(&d, 0, sizeof(d));
	d.magic = htole64(TANDEM_LABEL_MAGIC);
	d.version = htole32(TANDEM_LABEL_VERSION);
	d.slot_size = htole32(TANDEM_LABEL_SLOT);
	d.seq = htole64(l->seq);
	memcpy(d.volume_uuid, l->volume_uuid, 16);
	memcpy(d.disk_uuid, l->disk_uuid, 16);
	d.size = htole64(l->size);
	d.created_unix = htole64(l->created_unix);
	d.crc = htole32(crc32c(0, &d, offsetof(struct tandem_label, crc)));
	memcpy(out, &d, sizeof(d));
}

int md_label_decode(const uint8_t in[TANDEM_LABEL_SLOT], struct md_label *l)
{
	struct tandem_label d;

	memcpy(&d, in, sizeof(d));
	if (le64toh(d.magic) != TANDEM_LABEL_MAGIC)
		return -EBADMSG;
	if (le32toh(d.crc) != crc32c(0, &d, offsetof(struct tandem_label, crc)))
		return -EBADMSG;
	if (le32toh(d.version) != TANDEM_LABEL_VERSION)
		return -EPROTONOSUPPORT;
	if (le32toh(d.slot_size) != TANDEM_LABEL_SLOT)
		return -EBADMSG;
	memset(l, 0, sizeof(*l));
	l->seq = le64toh(d.seq);
	memcpy(l->volume_uuid, d.volume_uuid, 16);
	memcpy(l->disk_uuid, d.disk_uuid, 16);
	l->size = le64toh(d.size);
	l->created_unix = le64toh(d.created_unix);
	return 0;
}

static bool uuid_zero(const uint8_t u[16])
{
	static const uint8_t zero[16];
	return memcmp(u, zero, 16) == 0;
}

enum md_disk_id md_disk_check(const struct md_sb *sb, int rd, const struct md_label *l)
{
	bool mine = rd == 0 && !memcmp(l->volume_uuid, sb->volume_uuid, 16) && l->size == sb->size;

	if (uuid_zero(sb->disk_uuid)) {
		/* older metadata: a label of this volume is adopted, no label is
		 * written; anything else is not this volume's disk */
		if (rd == -ENODATA || mine)
			return MD_DISK_UNRECORDED;
		return rd == 0 ? MD_DISK_FOREIGN : MD_DISK_BADLABEL;
	}
	if (rd == -ENODATA)
		return MD_DISK_NOLABEL;
	if (rd)
		return MD_DISK_BADLABEL;
	if (!mine)
		return MD_DISK_FOREIGN;
	if (memcmp(l->disk_uuid, sb->disk_uuid, 16))
		return MD_DISK_OTHER;
	/* label first, then metadata: one ahead is a crash between the two */
	if (l->seq < sb->label_seq)
		return MD_DISK_OLDER;
	if (l->seq > sb->label_seq + 1)
		return MD_DISK_NEWER;
	return MD_DISK_OK;
}

const char *md_disk_id_what(enum md_disk_id id)
{
	switch (id) {
	case MD_DISK_OK: return "is the disk its metadata describes";
	case MD_DISK_UNRECORDED: return "is not recorded in its metadata (older metadata)";
	case MD_DISK_NOLABEL: return "carries no label (new or emptied disk)";
	case MD_DISK_BADLABEL: return "carries a damaged or unknown label";
	case MD_DISK_FOREIGN: return "carries the label of another volume or node";
	case MD_DISK_OTHER: return "is another disk than the one its metadata describes";
	case MD_DISK_OLDER: return "is older than its metadata (a restored copy)";
	case MD_DISK_NEWER: return "is newer than its metadata (the metadata is a restored copy)";
	}
	return "?";
}

int md_disk_open(struct md *md, const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	md_disk_close(md);
	md->disk_fd = fd;
	md->label_slot = 1; /* the first write goes to slot 0 */
	return 0;
}

void md_disk_close(struct md *md)
{
	if (md->disk_fd >= 0)
		close(md->disk_fd);
	md->disk_fd = -1;
}

static off_t label_off(const struct md *md, unsigned slot)
{
	return (off_t)(md->sb.size + (uint64_t)slot * TANDEM_LABEL_SLOT);
}

int md_label_read(struct md *md, struct md_label *l)
{
	static const uint8_t zero[TANDEM_LABEL_SLOT];
	struct md_label s[TANDEM_LABEL_SLOTS];
	int best = -1, bad = 0, newer = 0;

	for (unsigned i = 0; i < TANDEM_LABEL_SLOTS; i++) {
		uint8_t buf[TANDEM_LABEL_SLOT];
		ssize_t n = pread(md->disk_fd, buf, sizeof(buf), label_off(md, i));
		int d;

		if (n < 0)
			return -errno;
		if (n < (ssize_t)sizeof(buf))
			memset(buf + n, 0, sizeof(buf) - (size_t)n); /* beyond the end: zeros */
		if (!memcmp(buf, zero, sizeof(buf)))
			continue;
		d = md_label_decode(buf, &s[i]);
		if (d == -EPROTONOSUPPORT)
			newer = 1;
		else if (d)
			bad = 1;
		else if (best < 0 || s[i].seq > s[best].seq)
			best = (int)i;
	}
	if (newer)
		return -EPROTONOSUPPORT;
	if (best < 0)
		return bad ? -EBADMSG : -ENODATA;
	*l = s[best];
	md->label_slot = (unsigned)best;
	md->label_top = MAX(md->label_top, s[best].seq);
	return 0;
}

void md_label_adopt(struct md *md, const struct md_label *l)
{
	memcpy(md->sb.disk_uuid, l->disk_uuid, 16);
	md->sb.label_seq = l->seq;
}

int md_label_write(struct md *md, bool fresh)
{
	uint8_t buf[TANDEM_LABEL_SLOT];
	struct md_label l;
	unsigned slot = md->label_slot ^ 1u;
	struct stat st;
	ssize_t n;

	if (md->disk_fd < 0)
		return -EBADF;
	memset(&l, 0, sizeof(l));
	memcpy(l.volume_uuid, md->sb.volume_uuid, 16);
	memcpy(l.disk_uuid, md->sb.disk_uuid, 16);
	if (fresh || uuid_zero(l.disk_uuid)) {
		if (getrandom(l.disk_uuid, 16, 0) != 16)
			return -EIO;
		l.disk_uuid[0] |= 1; /* never all zero: that means "none recorded" */
	}
	l.size = md->sb.size;
	l.created_unix = (uint64_t)time(NULL);
	/* above every seq this disk may hold, written or tried */
	l.seq = MAX(md->label_top, md->sb.label_seq) + 1;
	md->label_top = l.seq;
	md->label_gen = md->sb.gen_current;
	md_label_encode(&l, buf);
	/* a file takes the whole label area at once: its length is size + 4 KiB
	 * from the first label on, so a shorter one was truncated */
	if (fstat(md->disk_fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size < l.size + TANDEM_LABEL_AREA &&
	    ftruncate(md->disk_fd, (off_t)(l.size + TANDEM_LABEL_AREA)) < 0)
		return -errno;
	n = crash_point(md->crash, "label write", md->disk_fd, buf, sizeof(buf),
			(uint64_t)label_off(md, slot));
	if (n < 0)
		return (int)n;
	n = pwrite(md->disk_fd, buf, sizeof(buf), label_off(md, slot));
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(buf))
		return -EIO;
	if (fdatasync(md->disk_fd) < 0)
		return -errno;
	md->label_slot = slot;
	md_label_adopt(md, &l);
	return 0;
}
