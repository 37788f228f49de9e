/* A FIFO arena: allocations are carved in order from one reserved mapping
 * (backed by huge pages where the kernel gives them) and released in any
 * order; space is reused once everything allocated before it is released.
 * Made for a queue whose entries leave roughly in the order they came (the
 * async stream's backlog): no allocator call per entry, and no page fault
 * either once the mapping is resident. With prefault, a helper thread makes
 * it resident right away (MADV_POPULATE_WRITE), so that the first burst
 * neither waits for the kernel to find pages nor meets an out-of-memory kill
 * halfway; the memory then stays resident until arena_fini().
 *
 * Invariants:
 *   F1. Blocks lie in the mapping in allocation order, wrapping once at its
 *       end: from the oldest block to head is in use, the rest is free.
 *   F2. A released block's bytes are reused only after every block allocated
 *       before it is released too (the fifo's front is always a live block).
 *   F3. When the arena empties, allocation starts again at its beginning.
 *   F4. The helper thread touches only the kernel's view of the mapping
 *       (page tables, never the bytes) and is joined before it is unmapped.
 * Owns: the mapping and the helper thread. Not thread-safe (one event loop). */
#ifndef TANDEM_ARENA_H
#define TANDEM_ARENA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "list.h"

struct arena {
	unsigned char *map, *base; /* the mapping, and its 2 MiB-aligned start */
	size_t map_len, size;      /* bytes mapped, bytes usable from base */
	size_t head;               /* the next block starts here */
	struct list fifo;          /* blocks in allocation order, front live (F2) */
	pthread_t filler;          /* prefaults the mapping (F4) */
	bool filling;              /* filler was started and is not joined yet */
	atomic_bool stop;          /* asks filler to end early */
	atomic_size_t filled;      /* bytes filler made resident so far */
};

/* Reserves size bytes (rounded up to 2 MiB); with prefault, starts making
 * them resident in the background. 0 or -errno. */
int arena_init(struct arena *a, size_t size, bool prefault);
void arena_fini(struct arena *a); /* a zeroed or finished arena is a no-op */
/* len bytes, 16-byte aligned; NULL when the arena has no room for them now. */
void *arena_alloc(struct arena *a, size_t len);
void arena_free(struct arena *a, void *p); /* p from arena_alloc(a, ...) */
bool arena_owns(const struct arena *a, const void *p);
bool arena_empty(const struct arena *a);
size_t arena_size(const struct arena *a);
size_t arena_resident(const struct arena *a); /* what the filler made resident */

#endif
