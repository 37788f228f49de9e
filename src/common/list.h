/* Intrusive doubly linked list (circular, with a head node). Embed a
 * struct list in the element; recover it with container_of(). No allocation,
 * O(1) insert and remove; removal while walking needs list_for_each_safe. */
#ifndef TANDEM_LIST_H
#define TANDEM_LIST_H

#include <stdbool.h>

struct list {
	struct list *prev, *next;
};

static inline void list_init(struct list *h)
{
	h->prev = h->next = h;
}

static inline bool list_empty(const struct list *h)
{
	return h->next == h;
}

static inline void list_add(struct list *h, struct list *e)
{
	e->next = h->next;
	e->prev = h;
	h->next->prev = e;
	h->next = e;
}

/* Appends e at the end (FIFO order with list_first). */
static inline void list_add_tail(struct list *h, struct list *e)
{
	list_add(h->prev, e);
}

/* Moves every element of from to the end of to; from becomes empty. */
static inline void list_splice_tail(struct list *to, struct list *from)
{
	if (from->next == from)
		return;
	from->next->prev = to->prev;
	to->prev->next = from->next;
	from->prev->next = to;
	to->prev = from->prev;
	from->prev = from->next = from;
}

static inline void list_del(struct list *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}

#define list_for_each_safe(pos, tmp, head) \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

#endif
