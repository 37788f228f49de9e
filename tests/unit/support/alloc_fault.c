/* See alloc_fault.h. */
#include "alloc_fault.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
char *__wrap_strdup(const char *s);

/* The test binary's fault plan: test-only state, one per process. */
static struct {
	unsigned n, seen, paused;
	bool fired;
} F;

void alloc_fault_arm(unsigned n)
{
	F.n = n;
	F.seen = 0;
	F.fired = false;
}

unsigned alloc_fault_seen(void)
{
	return F.seen;
}

bool alloc_fault_fired(void)
{
	return F.fired;
}

void alloc_fault_pause(bool on)
{
	if (on)
		F.paused++;
	else if (F.paused)
		F.paused--;
}

/* Whether this allocation is the one to fail. */
static bool fail_now(void)
{
	if (!F.n || F.paused)
		return false;
	if (++F.seen != F.n)
		return false;
	F.fired = true;
	return true;
}

void *__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
	return fail_now() ? NULL : __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	return fail_now() ? ENOMEM : __real_posix_memalign(p, align, n);
}

char *__wrap_strdup(const char *s)
{
	return fail_now() ? NULL : __real_strdup(s);
}
