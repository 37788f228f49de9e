/* A volume replica on this node: the only I/O API the front-ends call.
 * Owns: the data store (src/bs), the metadata (src/md), role and disk state.
 * Never: speaks a front-end protocol; never blocks the loop on I/O.
 *
 * States (SPEC.md): role primary|secondary; disk uptodate|inconsistent|
 * outdated|diskless|failed. Transitions written here so far:
 *   disk   uptodate -> failed       [vol_io_done: the store returned EIO]
 *   role   (open) -> primary        [vol_open: single-node volume]
 *   role   (open) -> secondary      [vol_open: another node is first primary]
 * Invariants:
 *   V1. Only a primary with a disk that is not failed accepts I/O
 *       (vol_submit fails everything else with -EROFS / -EIO).
 *   V2. Every request completes exactly once, from the event loop.
 */
#ifndef TANDEM_VOL_H
#define TANDEM_VOL_H

#include <stdbool.h>
#include <stdint.h>

#include "../bs/bs.h"
#include "../config/config.h"
#include "../md/md.h"

enum vol_role { VOL_SECONDARY = 0, VOL_PRIMARY };
enum vol_disk { VOL_UPTODATE = 0, VOL_INCONSISTENT, VOL_OUTDATED, VOL_DISKLESS, VOL_FAILED };

const char *vol_role_name(enum vol_role r);
const char *vol_disk_name(enum vol_disk d);

struct vol_stats {
	uint64_t reads, writes, flushes, trims, zeroes;
	uint64_t read_bytes, write_bytes, errors;
};

struct vol {
	char name[CFG_NAME_MAX];
	uint64_t size;
	uint32_t min_block; /* alignment required of READ/WRITE offset and length */
	enum vol_role role;
	enum vol_disk disk;
	struct bs *bs;
	struct md *md;
	struct ev_loop *ev;
	void *zero_buf; /* ZERO fallback source, vol->zero_len bytes of zeros */
	uint32_t zero_len;
	unsigned inflight;
	struct vol_stats stats;
};

/* A request from a front-end. The front-end fills type, flags, off, len, buf
 * (aligned as vol->min_block and 4096 for buffers) and cb, and owns the memory
 * until cb(res) with res 0 or -errno. */
struct vol_io {
	struct bs_io bio;
	enum bs_op type;
	uint32_t flags;
	uint64_t off, len;
	void *buf;
	struct vol *vol;
	uint64_t zero_done;
	void (*cb)(struct vol_io *io, int res);
};

/* Opens volume cfg->volumes[vi] as node ni: data store, metadata, role. */
int vol_open(struct ev_loop *ev, const struct cfg *cfg, unsigned vi, unsigned ni, struct vol **out,
	     char *err, size_t errlen);
void vol_close(struct vol *v); /* NULL is a no-op; marks metadata clean */

void vol_submit(struct vol *v, struct vol_io *io);
/* Allocation map (synchronous, cheap). */
int vol_block_status(struct vol *v, uint64_t off, uint64_t len, struct bs_extent *ext,
		     unsigned max, unsigned *n);

#endif
