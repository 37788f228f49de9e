/* Backing stores: where a volume's data area lives. A vtable so that the same
 * volume code runs on an io_uring file or block device, on RAM (tests), or on a
 * fault-injecting wrapper that fails the Nth operation.
 * Owns: the data area's fd or memory. Never: metadata (src/md) or policy. */
#ifndef TANDEM_BS_H
#define TANDEM_BS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "../ev/ev.h"

enum bs_op {
	BS_READ = 0,
	BS_WRITE,
	BS_FLUSH, /* everything completed before it is durable when it completes */
	BS_TRIM,  /* contents become unspecified (zero on a file, as it is punched) */
	BS_ZERO,  /* contents become zero */
	BS_OP_MAX
};

#define BS_F_FUA (1u << 0)     /* WRITE/ZERO: durable before completion */
#define BS_F_MAY_TRIM (1u << 1) /* ZERO: may deallocate */
#define BS_F_FAST (1u << 2)    /* ZERO: fail with -ENOTSUP rather than write zeros slowly */
#define BS_F_NOSYNC (1u << 3)  /* never complete at once (long internal chains) */
#define BS_F_BULK (1u << 4)    /* READ/WRITE: background (resync): lowest I/O priority */

/* One request. The submitter owns it until cb runs; cb runs from the event
 * loop, never from inside submit. */
struct bs_io {
	struct ev_op op;
	enum bs_op type;
	uint32_t flags;
	uint64_t off, len;
	void *buf;     /* READ/WRITE; aligned to bs->align when bs->align > 1 */
	uint64_t done; /* bytes completed so far (short transfers resume) */
	struct bs *bs;
	void (*cb)(struct bs_io *io, int res); /* res: 0 or -errno */
	struct ev_deferred defer; /* for bs_complete_later() */
	int later_res;
};

/* Completes io with res later in this loop pass (before the loop sleeps),
 * never inside the caller: for requests done at once or refused at once. */
void bs_complete_later(struct ev_loop *ev, struct bs_io *io, int res);

#define BS_EXT_HOLE 1u
#define BS_EXT_ZERO 2u
struct bs_extent {
	uint64_t len;
	uint32_t flags;
};

#define BS_CAP_TRIM (1u << 0)
#define BS_CAP_ZERO (1u << 1)     /* can zero without writing data */
#define BS_CAP_EXTENTS (1u << 2)  /* block_status knows holes */

struct bs_ops {
	const char *name;
	void (*submit)(struct bs *bs, struct bs_io *io);
	/* Synchronous, cheap: allocation map of [off, off+len). Fills at most max
	 * extents; *n gets the count. Returns 0 or -errno. */
	int (*block_status)(struct bs *bs, uint64_t off, uint64_t len, struct bs_extent *ext,
			    unsigned max, unsigned *n);
	/* Synchronous flush for shutdown paths only; never on the I/O path. */
	int (*sync)(struct bs *bs);
	void (*close)(struct bs *bs);
	/* Optional. A copy of the whole store at path, sharing its blocks
	 * (reflink: FICLONE), made durable; -EOPNOTSUPP (or the filesystem's
	 * -EXDEV, -EINVAL) where that cannot be. No write may be in flight. */
	int (*clone_to)(struct bs *bs, const char *path);
	/* Optional. The file at path (a copy clone_to made, on the same
	 * filesystem) replaces the store's file and becomes its contents,
	 * durably (the rename's directory is fsynced) before it returns 0. No
	 * I/O may be in flight. An error with path gone means the copy was
	 * swapped in (the store reads it) but may not survive a power cut. */
	int (*replace_from)(struct bs *bs, const char *path);
};

struct bs {
	const struct bs_ops *ops;
	struct ev_loop *ev;
	uint64_t size;
	uint32_t align; /* required alignment of offset, length and buffer; 1 = none */
	uint32_t caps;
	bool direct;    /* O_DIRECT in use */
};

/* Opens (creating sparse if needed) a file or block device of at least size
 * bytes; with O_DIRECT when direct is set and the filesystem allows it. */
int bs_file_open(struct ev_loop *ev, const char *path, uint64_t size, bool direct,
		 struct bs **out);
int bs_ram_open(struct ev_loop *ev, uint64_t size, struct bs **out);
/* Wraps inner: the op of type `type` numbered fail_nth (1-based, counting ops
 * of that type) and every later one when sticky fail with -err. Takes inner. */
int bs_fault_open(struct bs *inner, enum bs_op type, unsigned fail_nth, bool sticky, int err,
		  struct bs **out);

/* How many operations of its type a fault store has seen (0 for any other). */
unsigned bs_fault_count(const struct bs *bs);
/* A fault store fails nothing more from now (a no-op on any other). */
void bs_fault_disarm(struct bs *bs);
/* Wraps inner: every operation waits delay_ms (a timer) before it goes on,
 * a disk that is slow but answers (tests). bs_slow_set changes the delay of
 * such a store (0: none); -EINVAL on any other store. Takes inner. */
int bs_slow_open(struct bs *inner, unsigned delay_ms, struct bs **out);
int bs_slow_set(struct bs *bs, unsigned delay_ms);

struct crash_hook;
enum { BS_CRASH_ANY = 0, BS_CRASH_WRITE, BS_CRASH_FLUSH, BS_CRASH_META };
/* Wraps inner (a file at path) as a disk with a volatile write cache that
 * crashes at crash point number crash_at (1-based) of the kind given (data
 * writes, flushes, the metadata writers' points through *hook, or any),
 * leaving a prefix of the cached writes and a torn one, drawn from seed
 * (bs_crash.c). Takes inner. -EOPNOTSUPP without a path (RAM). Tests only. */
int bs_crash_open(struct bs *inner, const char *path, const char *name, uint64_t seed, int kind,
		  unsigned crash_at, struct bs **out, struct crash_hook **hook);

static inline void bs_submit(struct bs *bs, struct bs_io *io)
{
	io->bs = bs;
	io->done = 0;
	if ((unsigned)io->type >= BS_OP_MAX) { /* no store sees an unknown type */
		bs_complete_later(bs->ev, io, -EINVAL);
		return;
	}
	bs->ops->submit(bs, io);
}

static inline int bs_clone_to(struct bs *bs, const char *path)
{
	return bs->ops->clone_to ? bs->ops->clone_to(bs, path) : -EOPNOTSUPP;
}
static inline int bs_replace_from(struct bs *bs, const char *path)
{
	return bs->ops->replace_from ? bs->ops->replace_from(bs, path) : -EOPNOTSUPP;
}
static inline void bs_close(struct bs *bs)
{
	if (bs)
		bs->ops->close(bs);
}

/* Open the store named by spec: "ram:" for a RAM store, anything else a path. */
int bs_open_spec(struct ev_loop *ev, const char *spec, uint64_t size, bool direct,
		 struct bs **out);

#endif
