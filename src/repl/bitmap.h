/* The persistent change bitmap of a replicated volume: one bit per
 * `granularity` bytes of the data area, kept in the metadata file.
 *
 * Meaning of a bit ON DISK: "this region may differ from the peer's copy".
 * It is set, durably, before any write to the region is issued (write
 * intent), so that neither a crash of this node nor the loss of the peer can
 * lose track of a region that changed. In memory the module keeps:
 *   oos    regions known to be out of sync (the peer lacks a write, or a
 *          resync has not copied them yet);
 *   disk   the bits as on disk (or as they will be once the pending flush
 *          completes): always a superset of oos and of every region with a
 *          write in flight;
 * Bits of `disk` that are neither out of sync nor busy are cleared lazily by
 * bm_clean(), so that hot regions cost no metadata write per request.
 *
 * Invariants:
 *   B1. oos ⊆ disk, in memory at every moment.
 *   B2. A waiter of bm_intent() runs only once the bits it needs are durable.
 *   B3. At most one flush (page writes + fdatasync) is in flight.
 * Owns: its memory; writes the bitmap area of the metadata fd it is given.
 * Never: closes that fd; touches the superblock slots. */
#ifndef TANDEM_REPL_BITMAP_H
#define TANDEM_REPL_BITMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/list.h"
#include "../ev/ev.h"

struct bm_waiter {
	struct list link;
	void (*cb)(struct bm_waiter *w, int err);
};

struct bm;

/* Bitmap for size bytes at granularity (a power of two >= 4096) in the file
 * fd at byte off. With load, reads the bits that are on disk (synchronously;
 * start-up only) and takes every set bit as out of sync. */
int bm_open(struct ev_loop *ev, int fd, uint64_t off, uint64_t size, uint32_t granularity,
	    bool load, struct bm **out);
/* Flushes nothing; waiters must be gone (bm_busy() false). NULL is a no-op. */
void bm_free(struct bm *bm);

uint64_t bm_bytes_on_disk(uint64_t size, uint32_t granularity);
uint32_t bm_granularity(const struct bm *bm);
uint64_t bm_nbits(const struct bm *bm);
uint64_t bm_words(const struct bm *bm);

/* Write intent for [off, off+len): returns true when the bits are already
 * durable (go ahead now), else false and w->cb runs once they are. */
bool bm_intent(struct bm *bm, uint64_t off, uint64_t len, struct bm_waiter *w);
/* Marks [off, off+len) out of sync (every chunk it touches). The disk bits are
 * already durable when the range had a completed bm_intent; otherwise they are
 * written by the next flush. */
void bm_set_oos(struct bm *bm, uint64_t off, uint64_t len);
/* Marks every bit out of sync (full sync). */
void bm_set_all(struct bm *bm);
/* ORs words[0..n) into oos (and disk) from word index start. */
void bm_merge_words(struct bm *bm, uint64_t start, const uint64_t *words, uint32_t n);
/* Clears oos for every chunk entirely inside [off, off+len) (a chunk that
 * ends at the end of the volume counts as entirely inside when covered to the
 * end). Memory only; bm_clean() makes it reach the disk. */
void bm_clear_oos(struct bm *bm, uint64_t off, uint64_t len);
void bm_clear_all_oos(struct bm *bm);
bool bm_test_oos(const struct bm *bm, uint64_t chunk);
uint64_t bm_oos_count(const struct bm *bm);
/* The on-disk view word i (for sending to the peer). */
uint64_t bm_disk_word(const struct bm *bm, uint64_t i);
/* First out-of-sync chunk at or after `from`, wrapping once; -1 if none. */
int64_t bm_next_oos(const struct bm *bm, uint64_t from);

/* Lazy clearing, in two steps around a flush of the data on both nodes (a
 * bit may only go once both copies of its region are durable):
 * prepare fills cand (bm_words() words) with the disk bits that are neither
 * out of sync, nor busy (chunks with writes in flight, marked by the caller),
 * nor written since the previous prepare, and returns how many there are;
 * commit clears those of them still untouched and not out of sync. */
uint64_t bm_clean_prepare(struct bm *bm, const uint64_t *busy, uint64_t *cand);
void bm_clean_commit(struct bm *bm, const uint64_t *cand);
void bm_mark_range(uint64_t *words, const struct bm *bm, uint64_t off, uint64_t len);

/* Writes whatever is dirty; w (optional) runs once it is durable. */
void bm_flush(struct bm *bm, struct bm_waiter *w);
bool bm_busy(const struct bm *bm); /* a flush or waiters outstanding */
/* Synchronous write of every dirty page plus fdatasync (shutdown paths). */
int bm_sync(struct bm *bm);

#endif
