/* File or block-device backing store on io_uring. O_DIRECT where the
 * filesystem takes it (not tmpfs), so the page cache does not hold a second
 * copy of what the volume caches; buffered otherwise. Short transfers resume
 * where they stopped; EAGAIN/EINTR resubmit. */
#include "bs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/util.h"

#define SYNC_MAX (256u * 1024) /* largest request the fast path copies inline */
/* Background I/O: best-effort class, lowest level (IOPRIO_PRIO_VALUE(2, 7));
 * a hint that schedulers honouring I/O priorities use, ignored by others. */
#define BULK_IOPRIO ((2u << 13) | 7u)

struct bs_file {
	struct bs bs;
	int fd;
	char *path; /* as opened (clone_to, replace_from) */
	bool blockdev;
	unsigned inflight; /* requests on the ring */
};

static void file_finish(struct bs_file *f, struct bs_io *io, int res)
{
	f->inflight--;
	io->cb(io, res);
}

static void file_issue(struct bs_file *f, struct bs_io *io);

static void file_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct bs_io *io = container_of(op, struct bs_io, op);
	struct bs_file *f = container_of(io->bs, struct bs_file, bs);
	(void)flags;

	if (res == -EAGAIN || res == -EINTR) {
		file_issue(f, io);
		return;
	}
	if (res < 0) {
		file_finish(f, io, res);
		return;
	}
	if (io->type == BS_READ || io->type == BS_WRITE) {
		if (res == 0) {
			/* A read at EOF of a file shorter than the volume reads zeros. */
			if (io->type == BS_READ) {
				memset((char *)io->buf + io->done, 0, io->len - io->done);
				io->done = io->len;
			} else {
				file_finish(f, io, -EIO);
				return;
			}
		}
		io->done += (uint64_t)res;
		if (io->done < io->len) {
			file_issue(f, io);
			return;
		}
	}
	file_finish(f, io, 0);
}

static void file_issue(struct bs_file *f, struct bs_io *io)
{
	struct io_uring_sqe *sqe;
	uint64_t off = io->off + io->done;
	/* A read or write SQE moves at most 1 GiB (its length is 32 bits); the
	 * rest follows as a resumed short transfer. fallocate takes 64 bits and
	 * is never split (it does not resume). */
	uint64_t left = io->len - io->done;

	if (io->type == BS_READ || io->type == BS_WRITE)
		left = MIN(left, (uint64_t)1 << 30);

	io->op.cb = file_cb;
	sqe = ev_sqe(f->bs.ev, &io->op);
	switch (io->type) {
	case BS_READ:
		io_uring_prep_read(sqe, f->fd, (char *)io->buf + io->done, (unsigned)left, off);
		/* A large read from the page cache is a memory copy that io_uring
		 * would do inline, on the loop's own core; a worker thread does it
		 * on another core while the loop sends the previous replies. */
		if (!f->bs.direct && left >= SYNC_MAX)
			sqe->flags |= IOSQE_ASYNC;
		if (io->flags & BS_F_BULK)
			sqe->ioprio = BULK_IOPRIO;
		break;
	case BS_WRITE:
		io_uring_prep_write(sqe, f->fd, (char *)io->buf + io->done, (unsigned)left, off);
		if (io->flags & BS_F_FUA)
			sqe->rw_flags = RWF_DSYNC;
		if (io->flags & BS_F_BULK)
			sqe->ioprio = BULK_IOPRIO;
		break;
	case BS_FLUSH:
		io_uring_prep_fsync(sqe, f->fd, IORING_FSYNC_DATASYNC);
		break;
	case BS_TRIM:
		io_uring_prep_fallocate(sqe, f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					off, left);
		break;
	case BS_ZERO:
		io_uring_prep_fallocate(sqe, f->fd,
					((io->flags & BS_F_MAY_TRIM) && !f->blockdev ?
						 FALLOC_FL_PUNCH_HOLE :
						 FALLOC_FL_ZERO_RANGE) |
						FALLOC_FL_KEEP_SIZE,
					off, left);
		break;
	default:
		/* Unreachable: bs_submit refuses an unknown type. */
		io_uring_prep_nop(sqe);
		break;
	}
}

/* The page-cache fast path (cache=writeback only). A read the page cache can
 * serve without blocking (RWF_NOWAIT) is copied at once; a small write is
 * done with pwrite when the store has nothing else in flight. Both save a
 * loop pass, and the write also the hop to an io_uring worker thread that
 * buffered writes take on filesystems without non-blocking buffered writes,
 * which is most of a queue-depth-1 client's latency. With other requests in
 * flight, writes stay on the ring so that one stalled by dirty-page
 * throttling never holds up the others. Completion still comes from the loop
 * (bs_complete_later), never from inside submit. Returns true when io is done. */
static bool file_try_sync(struct bs_file *f, struct bs_io *io)
{
	ssize_t n;

	if (f->bs.direct || io->len > SYNC_MAX || (io->flags & BS_F_NOSYNC))
		return false;
	if (io->type == BS_READ) {
		struct iovec iov = { .iov_base = io->buf, .iov_len = io->len };
		n = preadv2(f->fd, &iov, 1, (off_t)io->off, RWF_NOWAIT);
		if (n <= 0)
			return false;
		io->done = (uint64_t)n;
		if (io->done < io->len)
			return false; /* partly cached: the ring does the rest */
	} else if (io->type == BS_WRITE && !(io->flags & BS_F_FUA) && f->inflight == 0) {
		n = pwrite(f->fd, io->buf, io->len, (off_t)io->off);
		if (n < 0 && errno != EINTR && errno != EAGAIN) {
			bs_complete_later(f->bs.ev, io, -errno);
			return true;
		}
		if (n <= 0)
			return false;
		io->done = (uint64_t)n;
		if (io->done < io->len)
			return false;
	} else {
		return false;
	}
	bs_complete_later(f->bs.ev, io, 0);
	return true;
}

static void file_submit(struct bs *bs, struct bs_io *io)
{
	struct bs_file *f = container_of(bs, struct bs_file, bs);

	if (file_try_sync(f, io))
		return;
	f->inflight++;
	file_issue(f, io);
}

static int file_block_status(struct bs *bs, uint64_t off, uint64_t len, struct bs_extent *ext,
			     unsigned max, unsigned *n)
{
	struct bs_file *f = container_of(bs, struct bs_file, bs);
	uint64_t end = off + len, pos = off;
	unsigned k = 0;

	if (f->blockdev) {
		ext[0].len = len;
		ext[0].flags = 0;
		*n = 1;
		return 0;
	}
	while (pos < end && k < max) {
		off_t data = lseek(f->fd, (off_t)pos, SEEK_DATA);
		uint64_t next;
		if (data < 0 && errno != ENXIO)
			return -errno;
		if (data < 0 || (uint64_t)data > pos) {
			/* [pos, data) is a hole */
			next = data < 0 ? end : MIN((uint64_t)data, end);
			ext[k].len = next - pos;
			ext[k].flags = BS_EXT_HOLE | BS_EXT_ZERO;
		} else {
			off_t hole = lseek(f->fd, (off_t)pos, SEEK_HOLE);
			if (hole < 0)
				return -errno;
			next = MIN((uint64_t)hole, end);
			ext[k].len = next - pos;
			ext[k].flags = 0;
		}
		if (k > 0 && ext[k - 1].flags == ext[k].flags)
			ext[k - 1].len += ext[k].len;
		else
			k++;
		pos = next;
	}
	*n = k;
	return 0;
}

static int file_sync(struct bs *bs)
{
	struct bs_file *f = container_of(bs, struct bs_file, bs);
	return fdatasync(f->fd) < 0 ? -errno : 0;
}

static void file_close(struct bs *bs)
{
	struct bs_file *f = container_of(bs, struct bs_file, bs);
	close(f->fd);
	free(f->path);
	free(f);
}

static int file_clone_to(struct bs *bs, const char *path)
{
	struct bs_file *f = container_of(bs, struct bs_file, bs);
	int fd, r = 0;

	if (f->blockdev)
		return -EOPNOTSUPP;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, FICLONE, f->fd) < 0 || fsync(fd) < 0)
		r = -errno;
	close(fd);
	if (r)
		unlink(path);
	return r;
}

static int file_replace_from(struct bs *bs, const char *path)
{
	struct bs_file *f = container_of(bs, struct bs_file, bs);
	int fd;

	if (f->blockdev || f->inflight)
		return -EBUSY;
	fd = open(path, O_RDWR | O_CLOEXEC | (f->bs.direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	if (rename(path, f->path) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	/* the store's descriptor now names the copy (the same number: nothing
	 * else holds the old one) */
	if (dup3(fd, f->fd, O_CLOEXEC) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	close(fd);
	/* The caller next writes metadata saying the data is this copy: the
	 * rename must be on disk first, or a power cut could bring back the
	 * half-resynced image under the data's name, described as consistent. */
	return fsync_dir_of(f->path);
}

static const struct bs_ops bs_file_ops = {
	.name = "file",
	.submit = file_submit,
	.block_status = file_block_status,
	.sync = file_sync,
	.close = file_close,
	.clone_to = file_clone_to,
	.replace_from = file_replace_from,
};

/* Finds the O_DIRECT alignment by trying a 512-byte read, then 4096. */
static uint32_t probe_direct_align(int fd)
{
	void *buf = alloc_aligned(4096);
	uint32_t align = 0;

	if (!buf)
		return 4096;
	if (pread(fd, buf, 512, 0) >= 0)
		align = 512;
	else if (pread(fd, buf, 4096, 0) >= 0)
		align = 4096;
	free(buf);
	return align ? align : 4096;
}

int bs_file_open(struct ev_loop *ev, const char *path, uint64_t size, bool direct,
		 struct bs **out)
{
	struct bs_file *f;
	struct stat st;
	int fd = -1, r;

	if (direct)
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_DIRECT, 0600);
	if (!direct || (fd < 0 && errno == EINVAL)) {
		direct = false;
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		goto fail_errno;
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	f->fd = fd;
	f->path = strdup(path);
	if (!f->path) {
		free(f);
		close(fd);
		return -ENOMEM;
	}
	f->bs.ops = &bs_file_ops;
	f->bs.ev = ev;
	f->bs.size = size;
	f->bs.direct = direct;
	if (S_ISBLK(st.st_mode)) {
		uint64_t dev_size = 0;
		int ssz = 512;
		f->blockdev = true;
		if (ioctl(fd, BLKGETSIZE64, &dev_size) < 0) {
			r = -errno;
			goto fail;
		}
		if (dev_size < size) {
			log_err("%s: device holds %llu bytes, the volume needs %llu", path,
				(unsigned long long)dev_size, (unsigned long long)size);
			r = -ENOSPC;
			goto fail;
		}
		ioctl(fd, BLKSSZGET, &ssz);
		f->bs.align = direct ? (uint32_t)ssz : 1;
		f->bs.caps = BS_CAP_TRIM | BS_CAP_ZERO;
	} else if (S_ISREG(st.st_mode)) {
		if ((uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0) {
			r = -errno;
			goto fail;
		}
		f->bs.align = direct ? probe_direct_align(fd) : 1;
		f->bs.caps = BS_CAP_TRIM | BS_CAP_ZERO | BS_CAP_EXTENTS;
	} else {
		r = -EINVAL;
		goto fail;
	}
	*out = &f->bs;
	return 0;
fail_errno:
	r = -errno;
	close(fd);
	return r;
fail:
	close(fd);
	free(f->path);
	free(f);
	return r;
}
