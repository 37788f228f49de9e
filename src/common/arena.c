/* FIFO arena: see arena.h. */
#include "arena.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

#define HUGE (2u << 20)
#define FILL_STEP (64u << 20) /* the filler checks for stop this often */

struct blk {
	struct list link; /* arena fifo */
	size_t off;       /* place in the arena */
	bool dead;        /* released, waiting for the blocks before it (F2) */
} __attribute__((aligned(16)));

static void *fill(void *arg)
{
	struct arena *a = arg;

	/* F4: faults the pages in; their bytes (zeros, or what the event loop
	 * already wrote) are left as they are. Best effort: a kernel without
	 * MADV_POPULATE_WRITE leaves the faults to the first use. */
	for (size_t off = 0; off < a->size && !atomic_load(&a->stop); off += FILL_STEP) {
		size_t n = MIN((size_t)FILL_STEP, a->size - off);
		if (madvise(a->base + off, n, MADV_POPULATE_WRITE) < 0)
			break;
		atomic_store(&a->filled, off + n);
	}
	return NULL;
}

int arena_init(struct arena *a, size_t size, bool prefault)
{
	void *m;

	memset(a, 0, sizeof(*a));
	list_init(&a->fifo);
	a->size = ALIGN_UP(size, HUGE);
	a->map_len = a->size + HUGE;
	m = mmap(NULL, a->map_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		a->size = a->map_len = 0;
		return -errno;
	}
	a->map = m;
	a->base = (unsigned char *)ALIGN_UP((uintptr_t)m, HUGE);
	(void)madvise(a->base, a->size, MADV_HUGEPAGE); /* best effort */
	atomic_init(&a->stop, false);
	atomic_init(&a->filled, 0);
	if (prefault)
		a->filling = pthread_create(&a->filler, NULL, fill, a) == 0;
	return 0;
}

void arena_fini(struct arena *a)
{
	if (a->filling) {
		atomic_store(&a->stop, true);
		pthread_join(a->filler, NULL);
	}
	if (a->map)
		munmap(a->map, a->map_len);
	memset(a, 0, sizeof(*a));
	list_init(&a->fifo);
}

bool arena_owns(const struct arena *a, const void *p)
{
	const unsigned char *c = p;
	return a->base && c >= a->base && c < a->base + a->size;
}

bool arena_empty(const struct arena *a)
{
	return list_empty(&a->fifo);
}

size_t arena_size(const struct arena *a)
{
	return a->size;
}

size_t arena_resident(const struct arena *a)
{
	return atomic_load(&((struct arena *)a)->filled);
}

void *arena_alloc(struct arena *a, size_t len)
{
	size_t n = ALIGN_UP(len + sizeof(struct blk), 16), off;
	struct blk *b;

	if (!a->base || n > a->size)
		return NULL;
	if (list_empty(&a->fifo)) {
		off = 0; /* F3 */
	} else {
		size_t tail = container_of(a->fifo.next, struct blk, link)->off;
		if (a->head > tail) { /* F1: [tail, head) in use */
			if (a->head + n <= a->size)
				off = a->head;
			else if (n <= tail)
				off = 0; /* wraps; [head, size) stays unused this round */
			else
				return NULL;
		} else if (a->head + n <= tail) { /* wrapped: [tail, size) and [0, head) */
			off = a->head;
		} else {
			return NULL;
		}
	}
	b = (struct blk *)(a->base + off);
	b->off = off;
	b->dead = false;
	list_add_tail(&a->fifo, &b->link);
	a->head = off + n;
	return b + 1;
}

void arena_free(struct arena *a, void *p)
{
	struct blk *b = (struct blk *)p - 1;

	b->dead = true;
	while (!list_empty(&a->fifo)) {
		struct blk *f = container_of(a->fifo.next, struct blk, link);
		if (!f->dead)
			return;
		list_del(&f->link);
	}
	a->head = 0; /* F3 */
}
