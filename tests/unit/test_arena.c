/* The FIFO arena of the async backlog (src/common/arena.c): allocation in
 * order, wrapping at the end, reuse only behind the oldest live block (F2),
 * a fresh start once empty (F3), and the prefaulting thread (F4) on a real
 * mapping. */
#include "unit.h"

#include <stdint.h>
#include <time.h>

#include "../../src/common/arena.h"
#include "../../src/common/util.h"

#define MIB (1024u * 1024)

static size_t off_of(const struct arena *a, const void *p)
{
	return (size_t)((const unsigned char *)p - a->base);
}

static void test_order_and_reuse(void **state)
{
	struct arena a;
	void *p[4];
	(void)state;

	assert_int_equal(arena_init(&a, 3 * MIB, false), 0);
	assert_int_equal(arena_size(&a), 4 * MIB); /* whole 2 MiB pages */
	assert_true(arena_empty(&a));
	p[0] = arena_alloc(&a, 1000);
	p[1] = arena_alloc(&a, 1000);
	assert_non_null(p[0]);
	assert_non_null(p[1]);
	assert_true(off_of(&a, p[1]) > off_of(&a, p[0]));
	assert_int_equal((uintptr_t)p[0] % 16, 0);
	assert_int_equal((uintptr_t)p[1] % 16, 0);
	assert_true(arena_owns(&a, p[0]));
	assert_false(arena_owns(&a, &a));
	memset(p[0], 0xaa, 1000);
	memset(p[1], 0xbb, 1000);
	assert_int_equal(((unsigned char *)p[0])[999], 0xaa);
	/* F3: once empty, the next block starts at the beginning again */
	arena_free(&a, p[0]);
	arena_free(&a, p[1]);
	assert_true(arena_empty(&a));
	p[2] = arena_alloc(&a, 5000);
	assert_ptr_equal(p[2], p[0]);
	arena_free(&a, p[2]);
	/* larger than the arena: no */
	assert_null(arena_alloc(&a, 4 * MIB));
	arena_fini(&a);
	arena_fini(&a); /* twice is a no-op */
}

static void test_wrap_and_fifo(void **state)
{
	struct arena a;
	void *b[3], *c, *d;
	(void)state;

	assert_int_equal(arena_init(&a, 4 * MIB, false), 0);
	b[0] = arena_alloc(&a, 3 * MIB / 2);
	b[1] = arena_alloc(&a, 3 * MIB / 2);
	assert_non_null(b[0]);
	assert_non_null(b[1]);
	/* 1 MiB left at the end, less headers: 1.5 MiB does not fit */
	assert_null(arena_alloc(&a, 3 * MIB / 2));
	/* F2: the younger block goes first; its bytes wait for the older one */
	arena_free(&a, b[1]);
	assert_null(arena_alloc(&a, 3 * MIB / 2));
	assert_false(arena_empty(&a));
	/* the oldest goes: the space before the next live block is free, and
	 * an allocation that does not fit at the end wraps to the start */
	b[2] = arena_alloc(&a, MIB / 2); /* fits at the end */
	assert_non_null(b[2]);
	assert_true(off_of(&a, b[2]) > off_of(&a, b[1]));
	arena_free(&a, b[0]);
	c = arena_alloc(&a, MIB);
	assert_non_null(c);
	assert_true(off_of(&a, c) < off_of(&a, b[0]) + 64); /* wrapped to the start */
	/* wrapped: between head and the oldest live block (b[2]) only */
	d = arena_alloc(&a, 3 * MIB);
	assert_null(d);
	d = arena_alloc(&a, MIB);
	assert_non_null(d);
	assert_true(off_of(&a, d) > off_of(&a, c));
	assert_true(off_of(&a, d) < off_of(&a, b[2]));
	memset(c, 1, MIB);
	memset(d, 2, MIB);
	memset(b[2], 3, MIB / 2);
	assert_int_equal(((unsigned char *)c)[MIB - 1], 1);
	assert_int_equal(((unsigned char *)b[2])[0], 3);
	arena_free(&a, b[2]);
	arena_free(&a, d);
	assert_false(arena_empty(&a));
	arena_free(&a, c);
	assert_true(arena_empty(&a));
	arena_fini(&a);
}

static void test_prefault(void **state)
{
	struct arena a;
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	unsigned char *p;
	(void)state;

	assert_int_equal(arena_init(&a, 64 * MIB, true), 0);
	/* the event loop may use it while the filler runs: bytes stay as written */
	p = arena_alloc(&a, MIB);
	assert_non_null(p);
	memset(p, 0x5a, MIB);
	for (int i = 0; i < 1000 && arena_resident(&a) < arena_size(&a); i++)
		nanosleep(&ts, NULL);
	assert_int_equal(arena_resident(&a), arena_size(&a));
	assert_int_equal(p[0], 0x5a);
	assert_int_equal(p[MIB - 1], 0x5a);
	arena_free(&a, p);
	arena_fini(&a);
	/* finished while the filler still runs: stops it and joins */
	assert_int_equal(arena_init(&a, 1024 * MIB, true), 0);
	arena_fini(&a);
	assert_int_equal(arena_size(&a), 0);
	assert_int_equal(arena_resident(&a), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_reuse),
		cmocka_unit_test(test_wrap_and_fifo),
		cmocka_unit_test(test_prefault),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
