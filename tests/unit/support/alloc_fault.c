/* See alloc_fault.h. */
#include "alloc_fault.h"

#include <errno.h>
#include <execinfo.h>
#include <stddef.h>
#include <stdint.h>
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
	const void *site[ALLOC_FAULT_SITES];
} F;

void alloc_fault_arm(unsigned n)
{
	F.n = n;
	if (!n)
		return; /* what was seen stays readable */
	F.seen = 0;
	F.fired = false;
}

const void *alloc_fault_site(unsigned k)
{
	return k >= 1 && k <= F.seen && k <= ALLOC_FAULT_SITES ? F.site[k - 1] : NULL;
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

/* The call site of an allocation: its caller and the two frames above
 * (helpers such as an aligned allocation or a buffer pool have callers of
 * their own), folded into one value. */
__attribute__((noinline)) static const void *site_of(void)
{
	void *fr[6];
	int n = backtrace(fr, 6);
	uintptr_t h = 0;

	for (int i = 3; i < n; i++) /* 0 here, 1 fail_now, 2 the __wrap_ function */
		h = h * 1000003u ^ (uintptr_t)fr[i];
	return (const void *)h;
}

/* Whether this allocation is the one to fail. */
__attribute__((noinline)) static bool fail_now(void)
{
	const void *site;

	if (!F.n || F.paused)
		return false;
	site = site_of();
	if (F.seen < ALLOC_FAULT_SITES)
		F.site[F.seen] = site;
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
