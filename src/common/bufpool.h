/* A pool of page-aligned buffers in power-of-two size classes (4 KiB to
 * 1 MiB), so that the data path does not pay an allocation (often an mmap,
 * page faults and an munmap) per request. Buffers above the largest class
 * are allocated and freed directly. Bounded: at most `cap` bytes of buffer
 * length are cached (a 1 MiB buffer takes 2 MiB: alloc_aligned()).
 * Owns: the cached buffers. Not thread-safe (one event loop). */
#ifndef TANDEM_BUFPOOL_H
#define TANDEM_BUFPOOL_H

#include <stddef.h>

#define BUFPOOL_CLASSES 9 /* 4K << 0 .. 4K << 8 = 1M */
#define BUFPOOL_PER_CLASS 64

struct bufpool {
	void *free[BUFPOOL_CLASSES][BUFPOOL_PER_CLASS];
	unsigned n[BUFPOOL_CLASSES];
	size_t cached, cap;
};

void bufpool_init(struct bufpool *p, size_t cap);
void *bufpool_get(struct bufpool *p, size_t len);         /* NULL when out of memory */
void bufpool_put(struct bufpool *p, void *buf, size_t len); /* len as given to get */
void bufpool_drain(struct bufpool *p);                      /* frees everything cached */

#endif
