/* The persistent change bitmap of a replicated volume, and its activity log.
 *
 * Change bitmap: one bit per `granularity` bytes of the data area (a
 * "region"), kept in the metadata file. A bit means "this region may differ
 * from the peer's copy". In memory:
 *   oos    regions known to be out of sync (the peer lacks a write, or a
 *          resync has not copied them yet);
 *   disk   the bits as on disk or as the next flush writes them: a superset
 *          of oos. Set bits reach the disk lazily; cleared ones only through
 *          bm_clean_*, after the data of both copies was flushed.
 * Activity log (AL): one bit per 64 regions (an "extent", one word of the
 * bitmap). Before any write to an extent is issued, its AL bit is durable
 * (write intent), so that a crash loses no record of a write in flight or of
 * an out-of-sync bit not yet written: after a crash, every extent in the AL
 * counts as out of sync. AL bits are cleared lazily once an extent is idle and
 * its change bits are on disk, so hot extents cost no metadata write.
 *
 * Invariants:
 *   B1. oos ⊆ disk, in memory at every moment.
 *   B2. A waiter of bm_intent() runs only once the AL bits it needs are durable.
 *   B3. An AL bit is cleared on disk only after the change bits of its extent
 *       are durable, and never while a write to the extent is in flight.
 *   B4. At most one flush (page writes + fdatasync) is in flight.
 *   B5. A waiter waits only for its own extents: one whose AL bit is durable
 *       (set on disk and not cleared since) goes at once, whatever else its
 *       AL page waits for; one whose bit a flush in flight writes rides it.
 *       AL bits are cleared only while no flush is in flight.
 *   B6. A sequential run of intents spanning two extents has the AL bits of
 *       the extents ahead of it set and flushed in the background: at most
 *       AL_AHEAD_MAX bytes beyond its last write (what a crash adds to the
 *       resync). They stay in the AL through the next clean round;
 *       bm_al_to_oos() leaves out those no write has reached.
 *   B7. A change bit whose extent is durable in the AL reaches the disk with
 *       the next flush, or within BM_LAZY_NS; any other change is flushed at
 *       once. (B3 keeps the extent in the AL until its bits are on disk.)
 * Owns: its memory; writes the AL and bitmap areas of the metadata fd given.
 * Never: closes that fd; touches the superblock slots. */
#ifndef TANDEM_BM_BITMAP_H
#define TANDEM_BM_BITMAP_H

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
 * fd: the AL at al_off (room for al_bytes), the bitmap at off. With load,
 * reads both (synchronously; start-up only) and takes every set bit as out of
 * sync; with crashed, also every extent of the AL. Returns -ENOSPC when the
 * AL does not fit in al_bytes. */
int bm_open(struct ev_loop *ev, int fd, uint64_t al_off, uint64_t al_bytes, uint64_t off,
	    uint64_t size, uint32_t granularity, bool load, bool crashed, struct bm **out);
struct crash_hook;
/* Tests: *hook (the metadata file's, which may change) is a crash point
 * before each page write. */
void bm_set_crash(struct bm *bm, struct crash_hook *const *hook);
/* Flushes nothing; waiters must be gone (bm_busy() false). NULL is a no-op. */
void bm_free(struct bm *bm);

uint64_t bm_bytes_on_disk(uint64_t size, uint32_t granularity);
uint32_t bm_granularity(const struct bm *bm);
uint64_t bm_nbits(const struct bm *bm);
uint64_t bm_words(const struct bm *bm);

/* Write intent for [off, off+len): returns true when the AL bits of its
 * extents are already durable (go ahead now), else false and w->cb runs once
 * they are. */
bool bm_intent(struct bm *bm, uint64_t off, uint64_t len, struct bm_waiter *w);
/* Marks [off, off+len) out of sync (every region it touches); the bits reach
 * the disk with the next flush (the AL covers them until then). */
void bm_set_oos(struct bm *bm, uint64_t off, uint64_t len);
/* Marks every region of every extent in the AL that was written to out of
 * sync: what the peer may lack when it can no longer be trusted to have kept
 * what it acknowledged (it was lost, or failed a flush). */
void bm_al_to_oos(struct bm *bm);
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
/* Whether any bit is set as on disk (the disk words). */
bool bm_disk_marks(const struct bm *bm);
/* First out-of-sync chunk at or after `from`, wrapping once; -1 if none. */
int64_t bm_next_oos(const struct bm *bm, uint64_t from);

/* Lazy clearing, in two steps around a flush of the data on both nodes (a
 * change bit may only go once both copies of its region are durable):
 * prepare picks the change bits that are neither out of sync, nor busy
 * (regions with writes in flight, marked by the caller in busy[], bm_words()
 * words), nor written since the previous prepare, and the AL extents that are
 * idle; it returns how many it picked. commit clears those still untouched,
 * writes the bitmap, then clears the AL bits (B3) and runs w (optional). */
uint64_t bm_clean_prepare(struct bm *bm, const uint64_t *busy);
/* No extent in the activity log: every write was flushed on both nodes. */
bool bm_al_empty(const struct bm *bm);
void bm_clean_commit(struct bm *bm, struct bm_waiter *w);
void bm_mark_range(uint64_t *words, const struct bm *bm, uint64_t off, uint64_t len);

/* Writes whatever is dirty; w (optional) runs once it is durable. */
void bm_flush(struct bm *bm, struct bm_waiter *w);
bool bm_busy(const struct bm *bm); /* a flush or waiters outstanding */
/* Clean shutdown (synchronous): writes every dirty page, fdatasyncs, then
 * empties the AL on disk. The data area must have been flushed first. */
int bm_sync(struct bm *bm);

#endif
