/* Buffer pool: see bufpool.h. */
#include "bufpool.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static int class_of(size_t len)
{
	int c = 0;
	size_t sz = 4096;

	while (sz < len && c < BUFPOOL_CLASSES) {
		sz <<= 1;
		c++;
	}
	return c < BUFPOOL_CLASSES ? c : -1;
}

void bufpool_init(struct bufpool *p, size_t cap)
{
	memset(p, 0, sizeof(*p));
	p->cap = cap;
}

void *bufpool_get(struct bufpool *p, size_t len)
{
	int c = class_of(len);

	if (c < 0)
		return alloc_aligned(len);
	if (p->n[c]) {
		p->cached -= (size_t)4096 << c;
		return p->free[c][--p->n[c]];
	}
	return alloc_aligned((size_t)4096 << c);
}

void bufpool_put(struct bufpool *p, void *buf, size_t len)
{
	int c = class_of(len);
	size_t sz;

	if (!buf)
		return;
	if (c < 0) {
		free(buf);
		return;
	}
	sz = (size_t)4096 << c;
	if (p->n[c] == BUFPOOL_PER_CLASS || p->cached + sz > p->cap) {
		free(buf);
		return;
	}
	p->free[c][p->n[c]++] = buf;
	p->cached += sz;
}

void bufpool_drain(struct bufpool *p)
{
	for (int c = 0; c < BUFPOOL_CLASSES; c++)
		while (p->n[c])
			free(p->free[c][--p->n[c]]);
	p->cached = 0;
}
