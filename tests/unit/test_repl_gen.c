/* Generation identifiers (src/repl/repl_gen.c): the decision table of
 * gen_decide, row by row, each row checked from both sides, and a property
 * test over random pairs drawn from a small pool of values (so that equal
 * generations, shared ancestors and crossed bitmaps happen often): the
 * decision must be mirror-symmetric as repl_gen.h promises, or two nodes can
 * both wait for data (TARGET/TARGET) or both send it (SOURCE/SOURCE).
 * Then both tables as tables (gen_decide's G rows, hs_decide's H rows: every
 * row reached, the neighbours of each boundary one row apart), and the
 * agreement of the two sides' handshake decisions over every simple pair. */
#include "unit.h"

#include <stdbool.h>

#include "../../src/repl/repl_gen.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Arbitrary generation values (real ones are random 64-bit numbers). */
#define G_A 0x1111111111111111ull
#define G_B 0x2222222222222222ull
#define G_C 0x3333333333333333ull
#define G_D 0x4444444444444444ull
#define G_E 0x5555555555555555ull

static struct gen_view view(uint64_t current, uint64_t bitmap)
{
	struct gen_view v;

	memset(&v, 0, sizeof(v));
	v.current = current;
	v.bitmap = bitmap;
	return v;
}

static enum gen_verdict mirror(enum gen_verdict v)
{
	if (v == GEN_SOURCE)
		return GEN_TARGET;
	if (v == GEN_TARGET)
		return GEN_SOURCE;
	return v;
}

/* Checks decide(me, peer, me_first) and its mirror decide(peer, me, !me_first). */
static void expect(int line, const struct gen_view *me, const struct gen_view *peer,
		   bool me_first, enum gen_verdict want, bool full)
{
	struct gen_decision d = gen_decide(me, peer, me_first);
	struct gen_decision r = gen_decide(peer, me, !me_first);

	if (d.verdict != want || d.full != full)
		print_message("line %d: got %s%s, want %s%s\n", line, gen_verdict_name(d.verdict),
			      d.full ? " (full)" : "", gen_verdict_name(want), full ? " (full)" : "");
	assert_int_equal(d.verdict, want);
	assert_int_equal(d.full, full);
	if (r.verdict != mirror(want) || r.full != full)
		print_message("line %d: mirror got %s%s, want %s%s\n", line,
			      gen_verdict_name(r.verdict), r.full ? " (full)" : "",
			      gen_verdict_name(mirror(want)), full ? " (full)" : "");
	assert_int_equal(r.verdict, mirror(want));
	assert_int_equal(r.full, full);
}

#define EXPECT(me, peer, me_first, want, full) expect(__LINE__, me, peer, me_first, want, full)

static void test_equal(void **state)
{
	struct gen_view a = view(G_A, 0), b = view(G_A, 0);
	(void)state;

	EXPECT(&a, &b, true, GEN_EQUAL, false);
	EXPECT(&a, &b, false, GEN_EQUAL, false);
	/* roles do not matter without bits */
	a.primary = true;
	b.crashed_primary = true;
	EXPECT(&a, &b, false, GEN_EQUAL, false);
	/* different histories do not matter either */
	a.history[0] = G_B;
	b.history[0] = G_C;
	EXPECT(&a, &b, true, GEN_EQUAL, false);
	/* a pair created empty and never written */
	a = view(GEN_EMPTY, 0);
	b = view(GEN_EMPTY, 0);
	EXPECT(&a, &b, true, GEN_EQUAL, false);
}

static void test_equal_with_bits(void **state)
{
	struct gen_view a = view(G_A, 0), b = view(G_A, 0);
	(void)state;

	/* the primary was writing: its regions go to the secondary */
	a.has_bits = true;
	a.primary = true;
	EXPECT(&a, &b, false, GEN_SOURCE, false);
	EXPECT(&b, &a, true, GEN_TARGET, false);
	/* whichever side has the bits: primary still wins */
	a.has_bits = false;
	b.has_bits = true;
	EXPECT(&a, &b, false, GEN_SOURCE, false);
	a.has_bits = true;
	EXPECT(&a, &b, false, GEN_SOURCE, false);

	/* neither is primary now: the one that crashed as primary wins */
	a = view(G_A, 0);
	b = view(G_A, 0);
	b.has_bits = true;
	b.crashed_primary = true;
	EXPECT(&a, &b, true, GEN_TARGET, false);
	EXPECT(&b, &a, false, GEN_SOURCE, false);
	/* both primary (or both crashed primaries): crashed primary decides */
	a.primary = b.primary = true;
	EXPECT(&a, &b, true, GEN_TARGET, false);

	/* nothing to tell them apart: the tie-break by name order */
	a = view(G_A, 0);
	b = view(G_A, 0);
	a.has_bits = b.has_bits = true;
	EXPECT(&a, &b, true, GEN_SOURCE, false);
	EXPECT(&a, &b, false, GEN_TARGET, false);
	a.crashed_primary = b.crashed_primary = true;
	a.primary = b.primary = true;
	EXPECT(&a, &b, true, GEN_SOURCE, false);
	EXPECT(&a, &b, false, GEN_TARGET, false);

	/* created empty, bits set (written while still "empty"?): same rules */
	a = view(GEN_EMPTY, 0);
	b = view(GEN_EMPTY, 0);
	a.has_bits = true;
	b.primary = true;
	EXPECT(&a, &b, true, GEN_TARGET, false);
}

static void test_branched(void **state)
{
	/* a was primary alone: bitmap = what both held, current = new */
	struct gen_view a = view(G_B, G_A), b = view(G_A, 0);
	(void)state;

	EXPECT(&a, &b, true, GEN_SOURCE, false);
	EXPECT(&a, &b, false, GEN_SOURCE, false);
	EXPECT(&b, &a, true, GEN_TARGET, false);
	EXPECT(&b, &a, false, GEN_TARGET, false);
	/* roles and bits do not change it */
	b.primary = true;
	b.has_bits = true;
	a.has_bits = true;
	EXPECT(&a, &b, false, GEN_SOURCE, false);
	/* with histories, still the bitmap rule (not a full sync) */
	a.history[0] = G_C;
	b.history[0] = G_C;
	EXPECT(&a, &b, true, GEN_SOURCE, false);

	/* branched from "created empty": the bitmap covers every write */
	a = view(G_B, GEN_EMPTY);
	b = view(GEN_EMPTY, 0);
	EXPECT(&a, &b, true, GEN_SOURCE, false);
	EXPECT(&b, &a, true, GEN_TARGET, false);
}

static void test_created_empty_vs_written(void **state)
{
	/* b was written (rotated away from EMPTY), a was created empty and has
	 * no bitmap that could say what changed: copy all */
	struct gen_view a = view(GEN_EMPTY, 0), b = view(G_A, 0);
	(void)state;

	EXPECT(&a, &b, true, GEN_TARGET, true);
	EXPECT(&a, &b, false, GEN_TARGET, true);
	EXPECT(&b, &a, true, GEN_SOURCE, true);
	b.history[0] = G_C;
	b.bitmap = G_D;
	EXPECT(&b, &a, false, GEN_SOURCE, true);
}

static void test_no_data_vs_data(void **state)
{
	struct gen_view a = view(GEN_NONE, 0), b = view(G_A, 0);
	(void)state;

	EXPECT(&a, &b, true, GEN_TARGET, true);
	EXPECT(&b, &a, true, GEN_SOURCE, true);
	b.primary = true;
	b.bitmap = G_B;
	b.history[0] = G_C;
	EXPECT(&a, &b, false, GEN_TARGET, true);
	/* even with a history, a side without data is never the source */
	a.history[0] = G_A;
	EXPECT(&a, &b, false, GEN_TARGET, true);
}

/* A side with no data (invalidated) facing a pair member that was created
 * empty: the empty side's contents are known (zeros), the other side's are
 * not, so the empty side is the source of a full copy. Both sides must
 * agree; TARGET/TARGET would leave the pair waiting forever. */
static void test_no_data_vs_created_empty(void **state)
{
	struct gen_view a = view(GEN_NONE, 0), b = view(GEN_EMPTY, 0);
	(void)state;

	EXPECT(&a, &b, true, GEN_TARGET, true);
	EXPECT(&a, &b, false, GEN_TARGET, true);
}

static void test_both_none(void **state)
{
	struct gen_view a = view(GEN_NONE, 0), b = view(GEN_NONE, 0);
	(void)state;

	EXPECT(&a, &b, true, GEN_NO_DATA, false);
	a.has_bits = b.has_bits = true;
	a.primary = true;
	a.history[0] = G_A;
	b.history[0] = G_A;
	EXPECT(&a, &b, false, GEN_NO_DATA, false);
}

static void test_split_brain_same_bitmap(void **state)
{
	/* both went primary alone from G_A */
	struct gen_view a = view(G_B, G_A), b = view(G_C, G_A);
	(void)state;

	EXPECT(&a, &b, true, GEN_SPLIT_BRAIN, false);
	EXPECT(&a, &b, false, GEN_SPLIT_BRAIN, false);
	a.primary = true;
	a.has_bits = b.has_bits = true;
	EXPECT(&a, &b, false, GEN_SPLIT_BRAIN, false);
}

static void test_split_brain_history(void **state)
{
	/* both wrote since G_A, seen through histories and bitmaps */
	struct gen_view a = view(G_B, 0), b = view(G_C, 0);
	(void)state;

	a.history[0] = G_A;
	b.history[2] = G_A;
	EXPECT(&a, &b, true, GEN_SPLIT_BRAIN, false);
	/* ancestor in one side's bitmap and the other's history */
	a = view(G_B, G_A);
	b = view(G_C, 0);
	b.history[3] = G_A;
	EXPECT(&a, &b, true, GEN_SPLIT_BRAIN, false);
	EXPECT(&b, &a, true, GEN_SPLIT_BRAIN, false);
	/* different bitmaps that are each in the other's history */
	a = view(G_B, G_D);
	b = view(G_C, G_E);
	a.history[1] = G_E;
	EXPECT(&a, &b, false, GEN_SPLIT_BRAIN, false);
}

static void test_unrelated(void **state)
{
	struct gen_view a = view(G_A, 0), b = view(G_B, 0);
	(void)state;

	EXPECT(&a, &b, true, GEN_UNRELATED, false);
	a = view(G_A, G_C);
	b = view(G_B, G_D);
	a.history[0] = G_E;
	b.history[0] = 0x6666666666666666ull;
	EXPECT(&a, &b, true, GEN_UNRELATED, false);
	/* both wrote without the other since the pair was created empty: the
	 * same divergence as any other, a split brain */
	a = view(G_A, GEN_EMPTY);
	b = view(G_B, GEN_EMPTY);
	EXPECT(&a, &b, true, GEN_SPLIT_BRAIN, false);
	/* "created empty" in the history is not a common ancestor */
	a = view(G_A, 0);
	b = view(G_B, 0);
	a.history[0] = GEN_EMPTY;
	b.history[0] = GEN_EMPTY;
	EXPECT(&a, &b, false, GEN_UNRELATED, false);
}

static void test_history_full_sync(void **state)
{
	/* b holds G_A, which a left behind (a's bitmap no longer says what
	 * changed since G_A): a is source of a full copy */
	struct gen_view a = view(G_C, 0), b = view(G_A, 0);
	(void)state;

	a.history[0] = G_B;
	a.history[1] = G_A;
	EXPECT(&a, &b, true, GEN_SOURCE, true);
	EXPECT(&a, &b, false, GEN_SOURCE, true);
	EXPECT(&b, &a, true, GEN_TARGET, true);
	/* deepest history slot */
	a.history[1] = 0;
	a.history[3] = G_A;
	EXPECT(&a, &b, true, GEN_SOURCE, true);
	/* b's own bitmap and history do not change it */
	b.bitmap = G_D;
	b.history[0] = G_E;
	EXPECT(&b, &a, false, GEN_TARGET, true);
}

static void test_push_history(void **state)
{
	uint64_t h[GEN_HISTORY] = { 0 };
	(void)state;

	gen_push_history(h, GEN_NONE);
	gen_push_history(h, GEN_EMPTY);
	assert_int_equal(h[0], 0);
	gen_push_history(h, G_A);
	gen_push_history(h, G_A); /* no duplicate at the head */
	gen_push_history(h, G_B);
	gen_push_history(h, G_C);
	gen_push_history(h, G_D);
	assert_int_equal(h[0], G_D);
	assert_int_equal(h[3], G_A);
	gen_push_history(h, G_E);
	assert_int_equal(h[0], G_E);
	assert_int_equal(h[3], G_B); /* oldest dropped */
	assert_string_equal(gen_verdict_name(GEN_SPLIT_BRAIN), "split-brain");
	assert_string_equal(gen_verdict_name(GEN_SOURCE), "source");
}

/* ---- the symmetry property ---- */

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64: deterministic, so a failure reproduces */
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static const uint64_t pool[] = { GEN_NONE, GEN_EMPTY, G_A, G_B, G_C };

static uint64_t pick(uint64_t *s)
{
	return pool[rng_next(s) % ARRAY_LEN(pool)];
}

static void random_view(uint64_t *s, struct gen_view *v)
{
	memset(v, 0, sizeof(*v));
	v->current = pick(s);
	v->bitmap = rng_next(s) % 2 ? pick(s) : GEN_NONE;
	for (int i = 0; i < GEN_HISTORY; i++)
		v->history[i] = rng_next(s) % 2 ? pick(s) : GEN_NONE;
	v->primary = rng_next(s) % 2;
	v->crashed_primary = rng_next(s) % 2;
	v->has_bits = rng_next(s) % 2;
	v->inconsistent = rng_next(s) % 4 == 0;
	v->outdated = !v->inconsistent && rng_next(s) % 3 == 0;
	v->unverified = !v->inconsistent && !v->outdated && rng_next(s) % 3 == 0;
}

static void print_view(const char *tag, const struct gen_view *v)
{
	print_message("  %s: current %#llx bitmap %#llx history %#llx %#llx %#llx %#llx%s%s%s\n",
		      tag, (unsigned long long)v->current, (unsigned long long)v->bitmap,
		      (unsigned long long)v->history[0], (unsigned long long)v->history[1],
		      (unsigned long long)v->history[2], (unsigned long long)v->history[3],
		      v->primary ? " primary" : "", v->crashed_primary ? " crashed-primary" : "",
		      v->has_bits ? " has-bits" : "");
	if (v->inconsistent)
		print_message("  %s: inconsistent\n", tag);
}

#define PROPERTY_RUNS 5000

static void test_symmetry_property(void **state)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	unsigned bad = 0;
	(void)state;

	for (unsigned run = 0; run < PROPERTY_RUNS; run++) {
		struct gen_view a, b;
		bool x = rng_next(&s) % 2;
		struct gen_decision d, r;

		random_view(&s, &a);
		random_view(&s, &b);
		d = gen_decide(&a, &b, x);
		r = gen_decide(&b, &a, !x);
		if (r.verdict == mirror(d.verdict) && r.full == d.full)
			continue;
		if (bad++ < 5) {
			print_message("asymmetric (run %u): decide(a, b, %d) = %s%s, "
				      "decide(b, a, %d) = %s%s\n",
				      run, x, gen_verdict_name(d.verdict), d.full ? " (full)" : "", !x,
				      gen_verdict_name(r.verdict), r.full ? " (full)" : "");
			print_view("a", &a);
			print_view("b", &b);
		}
	}
	if (bad)
		print_message("%u of %u random pairs decided asymmetrically\n", bad, PROPERTY_RUNS);
	assert_int_equal(bad, 0);
}

/* The property test finds two families of asymmetric pairs: a side without
 * data facing one created empty (test_no_data_vs_created_empty), and this
 * one, kept as a named case so that a fix shows up here first. */
/* Same generation, bits set, neither primary nor crashed: the side that kept
 * up (uptodate) is the source rather than the one that lost its primary. */
static void test_equal_uptodate_over_outdated(void **state)
{
	struct gen_view a = view(G_A, 0), b = view(G_A, 0);
	(void)state;

	a.has_bits = true;
	a.outdated = true;
	assert_int_equal(gen_decide(&a, &b, true).verdict, GEN_TARGET);
	assert_int_equal(gen_decide(&b, &a, false).verdict, GEN_SOURCE);
}

/* Same generation, bits set, two secondaries: a side that restarted since
 * (unverified: its "up to date" is only what it was when it stopped) loses
 * to one that kept up, and wins over one known to be outdated. */
static void test_equal_standing_of_unverified(void **state)
{
	struct gen_view a = view(G_A, 0), b = view(G_A, 0);
	(void)state;

	a.has_bits = true;
	a.unverified = true;
	assert_int_equal(gen_decide(&a, &b, true).verdict, GEN_TARGET);
	assert_int_equal(gen_decide(&b, &a, false).verdict, GEN_SOURCE);
	b.outdated = true;
	assert_int_equal(gen_decide(&a, &b, false).verdict, GEN_SOURCE);
	assert_int_equal(gen_decide(&b, &a, true).verdict, GEN_TARGET);
}

/* An inconsistent side (an interrupted sync target) is never the source. */
static void test_inconsistent_never_source(void **state)
{
	struct gen_view a = view(G_A, 0), b = view(G_A, 0);
	struct gen_decision d;
	(void)state;

	/* same generation, bits on both: the consistent side, whatever the roles */
	a.has_bits = b.has_bits = true;
	a.inconsistent = true;
	a.primary = false;
	b.primary = false;
	d = gen_decide(&a, &b, true);
	assert_int_equal(d.verdict, GEN_TARGET);
	assert_false(d.full);
	d = gen_decide(&b, &a, false);
	assert_int_equal(d.verdict, GEN_SOURCE);
	/* no bits left to say what differs: all of it */
	a.has_bits = b.has_bits = false;
	d = gen_decide(&a, &b, true);
	assert_int_equal(d.verdict, GEN_TARGET);
	assert_true(d.full);
	/* both inconsistent with the same generation: nobody can be the source */
	b.inconsistent = true;
	a.has_bits = true;
	assert_int_equal(gen_decide(&a, &b, true).verdict, GEN_NO_DATA);
	assert_int_equal(gen_decide(&b, &a, false).verdict, GEN_NO_DATA);
	/* newer by generation, but inconsistent: refused rather than copied */
	a = view(G_B, G_A);
	b = view(G_A, 0);
	a.inconsistent = true;
	assert_int_equal(gen_decide(&a, &b, true).verdict, GEN_NO_DATA);
	assert_int_equal(gen_decide(&b, &a, false).verdict, GEN_NO_DATA);
}

static void test_symmetry_crossed_bitmaps(void **state)
{
	/* each side's bitmap is the other's current */
	struct gen_view a = view(G_A, G_B), b = view(G_B, G_A);
	struct gen_decision d, r;
	(void)state;

	d = gen_decide(&a, &b, true);
	r = gen_decide(&b, &a, false);
	if (r.verdict != mirror(d.verdict))
		print_message("decide(a, b) = %s, decide(b, a) = %s\n", gen_verdict_name(d.verdict),
			      gen_verdict_name(r.verdict));
	assert_int_equal(r.verdict, mirror(d.verdict));
	assert_int_equal(r.full, d.full);
}

/* gen_decide's table (repl_gen.h), row by row: each row names the rule that
 * must decide it, so that every rule is shown reachable and the boundary
 * between two neighbouring rules is one row apart. */
struct gen_row {
	int line;
	struct gen_view me, peer;
	bool me_first;
	enum gen_verdict want;
	bool full;
	int rule;
};

#define GV(cur, bm, ...)                                      \
	{                                                     \
		.current = (cur), .bitmap = (bm), __VA_ARGS__ \
	}
#define GROW(m, p, first, v, f, g)             \
	{                                      \
		__LINE__, m, p, first, v, f, g \
	}

static const struct gen_row gen_rows[] = {
	GROW(GV(0, 0), GV(0, 0), true, GEN_NO_DATA, false, 1),
	GROW(GV(0, 0), GV(GEN_EMPTY, 0), true, GEN_TARGET, true, 2),
	GROW(GV(0, 0, .primary = true), GV(G_A, 0), true, GEN_TARGET, true, 2),
	GROW(GV(G_A, 0), GV(0, 0, .primary = true), false, GEN_SOURCE, true, 3),
	/* crossed bitmaps, and one side of them (the boundary G4/G5) */
	GROW(GV(G_A, G_B), GV(G_B, G_A), true, GEN_SPLIT_BRAIN, false, 4),
	GROW(GV(G_A, G_C), GV(G_B, G_A), true, GEN_TARGET, false, 5),
	GROW(GV(G_A, 0), GV(G_B, G_A, .has_bits = true), false, GEN_TARGET, false, 5),
	GROW(GV(G_B, G_A), GV(G_A, 0, .primary = true), false, GEN_SOURCE, false, 6),
	/* branched from "created empty": the bitmap rule, not the empty one */
	GROW(GV(GEN_EMPTY, 0), GV(G_B, GEN_EMPTY), true, GEN_TARGET, false, 5),
	GROW(GV(G_B, GEN_EMPTY), GV(GEN_EMPTY, 0), true, GEN_SOURCE, false, 6),
	/* a disk replaced by an empty one, facing written data */
	GROW(GV(GEN_EMPTY, 0), GV(G_B, 0), true, GEN_TARGET, true, 7),
	GROW(GV(G_B, G_C), GV(GEN_EMPTY, 0), true, GEN_SOURCE, true, 8),
	/* same generation: one inconsistent (G9), full only without bits */
	GROW(GV(G_A, 0, .inconsistent = true), GV(G_A, 0), true, GEN_TARGET, true, 9),
	GROW(GV(G_A, 0, .inconsistent = true, .primary = true), GV(G_A, 0, .has_bits = true), true,
	     GEN_TARGET, false, 9),
	GROW(GV(G_A, 0), GV(G_A, 0, .inconsistent = true, .has_bits = true), false, GEN_SOURCE,
	     false, 9),
	/* both inconsistent, no bits: equal (nothing to tell them apart) */
	GROW(GV(G_A, 0, .inconsistent = true), GV(G_A, 0, .inconsistent = true), true, GEN_EQUAL,
	     false, 10),
	GROW(GV(G_A, 0, .primary = true, .crashed_primary = true), GV(G_A, 0, .outdated = true),
	     false, GEN_EQUAL, false, 10),
	GROW(GV(GEN_EMPTY, 0), GV(GEN_EMPTY, 0), true, GEN_EQUAL, false, 10),
	/* same generation with bits: the ladder G11..G14 */
	GROW(GV(G_A, 0, .primary = true), GV(G_A, 0, .has_bits = true, .crashed_primary = true),
	     false, GEN_SOURCE, false, 11),
	GROW(GV(G_A, 0, .has_bits = true), GV(G_A, 0, .crashed_primary = true), true, GEN_TARGET,
	     false, 12),
	GROW(GV(G_A, 0, .has_bits = true, .primary = true, .crashed_primary = true),
	     GV(G_A, 0, .primary = true), true, GEN_SOURCE, false, 12),
	GROW(GV(G_A, 0, .has_bits = true, .outdated = true), GV(G_A, 0), true, GEN_TARGET, false,
	     13),
	GROW(GV(G_A, 0, .has_bits = true, .unverified = true), GV(G_A, 0, .outdated = true), false,
	     GEN_SOURCE, false, 13),
	GROW(GV(G_A, 0, .has_bits = true, .unverified = true), GV(G_A, 0), true, GEN_TARGET, false,
	     13),
	GROW(GV(G_A, 0, .has_bits = true), GV(G_A, 0), true, GEN_SOURCE, false, 14),
	GROW(GV(G_A, 0, .has_bits = true, .outdated = true), GV(G_A, 0, .outdated = true), false,
	     GEN_TARGET, false, 14),
	/* both branched from the same generation; before the history rules */
	GROW(GV(G_B, G_A, .history = { G_C }), GV(G_C, G_A), true, GEN_SPLIT_BRAIN, false, 15),
	/* history: one-sided (G16/G17), both ways (G18), only "empty" (G19) */
	GROW(GV(G_B, 0, .history = { G_A }), GV(G_A, 0), true, GEN_SOURCE, true, 16),
	GROW(GV(G_A, 0), GV(G_B, 0, .history = { G_A }), true, GEN_TARGET, true, 17),
	GROW(GV(G_B, 0, .history = { G_A, G_C }), GV(G_A, 0, .history = { G_B, G_C }), true,
	     GEN_SPLIT_BRAIN, false, 18),
	GROW(GV(G_B, 0, .history = { G_C }), GV(G_D, G_C), true, GEN_SPLIT_BRAIN, false, 18),
	GROW(GV(G_B, 0, .history = { GEN_EMPTY }), GV(G_D, 0, .history = { GEN_EMPTY }), true,
	     GEN_UNRELATED, false, 19),
	GROW(GV(G_B, 0), GV(G_D, 0), true, GEN_UNRELATED, false, 19),
	/* the source would be inconsistent */
	GROW(GV(G_B, G_A, .inconsistent = true), GV(G_A, 0), true, GEN_NO_DATA, false, 20),
	GROW(GV(G_A, 0), GV(0, 0, .inconsistent = true), true, GEN_SOURCE, true, 3),
	GROW(GV(G_A, 0, .inconsistent = true), GV(0, 0), true, GEN_NO_DATA, false, 20),
	GROW(GV(G_A, 0, .inconsistent = true, .has_bits = true, .primary = true),
	     GV(G_A, 0, .inconsistent = true), true, GEN_NO_DATA, false, 20),
};

static void test_gen_table(void **state)
{
	bool seen[21] = { false };
	(void)state;

	for (size_t i = 0; i < ARRAY_LEN(gen_rows); i++) {
		const struct gen_row *t = &gen_rows[i];
		struct gen_decision d = gen_decide(&t->me, &t->peer, t->me_first);
		struct gen_decision r = gen_decide(&t->peer, &t->me, !t->me_first);

		if (d.verdict != t->want || d.full != t->full || d.rule != t->rule)
			print_message("line %d: got %s%s (G%d), want %s%s (G%d)\n", t->line,
				      gen_verdict_name(d.verdict), d.full ? " full" : "", d.rule,
				      gen_verdict_name(t->want), t->full ? " full" : "", t->rule);
		assert_int_equal(d.verdict, t->want);
		assert_int_equal(d.full, t->full);
		assert_int_equal(d.rule, t->rule);
		/* the peer, deciding the same pair, comes to the mirror answer */
		if (r.verdict != mirror(t->want))
			print_message("line %d: mirror got %s\n", t->line,
				      gen_verdict_name(r.verdict));
		assert_int_equal(r.verdict, mirror(t->want));
		assert_int_equal(r.full, t->full);
		seen[d.rule] = true;
	}
	for (int g = 1; g <= 20; g++) {
		if (!seen[g])
			print_message("no row of the table reaches G%d\n", g);
		assert_true(seen[g]);
	}
}

/* hs_decide's table (repl_gen.c), row by row. A side is given as its node
 * would send it: the gen_view flags follow the disk state as fill_state and
 * fill_view make them (repl_hs.c). */
struct side {
	enum vol_disk disk;
	bool primary, crashed, no_lease, bits;
	uint64_t cur, bm, hist0;
};

enum {
	F_SB = 1 << 0,       /* split_brain */
	F_CLEAR = 1 << 1,    /* clear_marks */
	F_UPTODATE = 1 << 2, /* uptodate */
	F_MARKALL = 1 << 3,  /* mark_all */
	F_FLUSH = 1 << 4,    /* flush */
	F_ROTATE = 1 << 5,   /* rotate */
	F_PULL = 1 << 6,     /* pull */
	F_NEWPAIR = 1 << 7,  /* new_pair */
	F_WARN = 1 << 8,     /* note_warn */
};

struct hs_row {
	int line;
	struct side me, peer;
	/* the rest of the input; sizes and granularities equal unless set */
	uint64_t peer_size;
	uint32_t peer_gran;
	bool me_first, pulling, first_node, created;
	uint64_t oos;
	/* expected */
	enum hs_action action;
	int rule;
	enum hs_run run;
	unsigned flags;
	enum hs_kept kept;
	const char *reason; /* a part of the reason text, or NULL for "" */
};

#define SIZE 0x100000ull
#define GRAN 4096u

static struct hs_side side_of(const struct side *s)
{
	struct hs_side h;
	bool consistent =
		s->disk == VOL_UPTODATE || s->disk == VOL_OUTDATED || s->disk == VOL_CONSISTENT;

	memset(&h, 0, sizeof(h));
	h.gen.current = s->cur;
	h.gen.bitmap = s->bm;
	h.gen.history[0] = s->hist0;
	h.gen.primary = s->primary;
	h.gen.crashed_primary = s->crashed;
	h.gen.has_bits = s->bits;
	h.gen.inconsistent = !consistent;
	h.gen.unverified = consistent && s->disk == VOL_CONSISTENT;
	h.gen.outdated = consistent && s->disk == VOL_OUTDATED;
	h.size = SIZE;
	h.bm_granularity = GRAN;
	h.disk = s->disk;
	h.lease = !s->no_lease;
	return h;
}

static struct hs_input input_of(const struct hs_row *t)
{
	struct hs_input in;

	memset(&in, 0, sizeof(in));
	in.me = side_of(&t->me);
	in.peer = side_of(&t->peer);
	if (t->peer_size)
		in.peer.size = t->peer_size;
	if (t->peer_gran)
		in.peer.bm_granularity = t->peer_gran;
	in.volume = "vol0";
	in.peer_node = "b";
	in.me_first = t->me_first;
	in.pulling = t->pulling;
	in.first_node = t->first_node;
	in.created = t->created;
	in.oos = t->oos;
	return in;
}

static unsigned flags_of(const struct hs_decision *d)
{
	return (d->split_brain ? F_SB : 0) | (d->clear_marks ? F_CLEAR : 0) |
	       (d->uptodate ? F_UPTODATE : 0) | (d->mark_all ? F_MARKALL : 0) |
	       (d->flush ? F_FLUSH : 0) | (d->rotate ? F_ROTATE : 0) | (d->pull ? F_PULL : 0) |
	       (d->new_pair ? F_NEWPAIR : 0) | (d->note_warn ? F_WARN : 0);
}

#define UP VOL_UPTODATE
#define OUTD VOL_OUTDATED
#define UNVER VOL_CONSISTENT
#define INC VOL_INCONSISTENT
#define FAIL VOL_FAILED
#define DLESS VOL_DISKLESS
#define S(d, ...)                        \
	{                                \
		.disk = (d), __VA_ARGS__ \
	}
#define P .primary = true
#define ROW(...)                      \
	{                             \
		__LINE__, __VA_ARGS__ \
	}
#define REFUSED(h, f, text) .action = HS_REFUSE, .rule = (h), .flags = (f), .reason = (text)
#define EST(h, f) .action = HS_CONNECT, .rule = (h), .run = HS_ESTABLISHED, .flags = (f)
#define FLUSHED (F_FLUSH)

static const struct hs_row hs_rows[] = {
	/* H1, H2: before anything else, even two primaries */
	ROW(S(UP, P, .cur = G_A), S(UP, P, .cur = G_A), .peer_size = 2 * SIZE,
	    REFUSED(1, 0, "volume sizes differ: 1048576 here, 2097152 on b")),
	ROW(S(UP, .cur = G_A), S(UP, .cur = G_A), .peer_gran = 2 * GRAN,
	    REFUSED(2, 0, "bitmap granularities differ: 4096 here, 8192 on b")),
	/* H3..H5: two primaries, by their leases (L6) */
	ROW(S(UP, P, .no_lease = true, .cur = G_A), S(UP, P, .cur = G_B, .bm = G_A),
	    .action = HS_YIELD, .rule = 3, .reason = "b is primary and this node has no lease"),
	ROW(S(UP, P, .cur = G_A), S(UP, P, .no_lease = true, .cur = G_A),
	    .action = HS_PEER_STEPS_DOWN, .rule = 4,
	    .reason = "b is primary without a lease; it steps down"),
	ROW(S(UP, P, .cur = G_A), S(UP, P, .cur = G_A),
	    REFUSED(5, F_SB, "split brain: both nodes are primary")),
	ROW(S(DLESS, P, .no_lease = true, .cur = G_A), S(INC, P, .no_lease = true, .cur = G_A),
	    REFUSED(5, F_SB, "split brain: both nodes are primary")),
	/* one primary: no lease question (a secondary's lease is not asked) */
	ROW(S(UP, .no_lease = true, .cur = G_A), S(UP, P, .cur = G_A), EST(11, F_CLEAR | F_ROTATE)),
	/* H6..H8: the verdicts that refuse; the split brain names my bitmap, or
	 * my newest history entry */
	ROW(S(UP, .cur = G_B, .bm = G_A), S(UP, .cur = G_C, .bm = G_A),
	    REFUSED(6, F_SB, "since generation 1111111111111111; run `tandemctl invalidate vol0`")),
	ROW(S(UP, .cur = G_B, .hist0 = G_C), S(UP, .cur = G_D, .bm = G_C),
	    REFUSED(6, F_SB, "since generation 3333333333333333;")),
	ROW(S(UP, .cur = G_B), S(UP, .cur = G_D),
	    REFUSED(7, 0,
		    "generations 2222222222222222 here and 4444444444444444 on b share no "
		    "history")),
	ROW(S(INC, .cur = 0), S(INC, .cur = 0), REFUSED(8, 0, "no consistent copy")),
	/* (G20) newer by generation, but not consistent: a gone disk too */
	ROW(S(INC, .cur = G_B, .bm = G_A), S(UP, .cur = G_A), REFUSED(8, 0, "no consistent copy")),
	ROW(S(FAIL, .cur = G_B, .bm = G_A), S(UP, .cur = G_A), REFUSED(8, 0, "no consistent copy")),
	ROW(S(UP, .cur = G_B, .bm = G_A), S(DLESS, .cur = G_D, .bm = G_B),
	    REFUSED(8, 0, "no consistent copy")),
	/* H9: a primary with a usable disk is never a target; being filled or
	 * gone it is (H22, H23) */
	ROW(S(UP, P, .cur = G_A), S(UP, .cur = G_B, .bm = G_A),
	    REFUSED(9, 0, "this primary would become sync target of b; demote it first")),
	ROW(S(OUTD, P, .cur = G_A), S(UP, .cur = G_B, .bm = G_A), REFUSED(9, 0, "demote it first")),
	ROW(S(INC, P, .cur = G_A), S(UP, .cur = G_B, .bm = G_A), EST(22, FLUSHED | F_PULL)),
	ROW(S(FAIL, P, .cur = G_A), S(UP, .cur = G_A), EST(23, FLUSHED | F_MARKALL | F_WARN),
	    .reason = "the disk is failed: no resync from b onto it until `tandemctl attach`"),
	/* H10: the peer the same way */
	ROW(S(UP, .cur = G_B, .bm = G_A), S(UP, P, .cur = G_A),
	    REFUSED(10, 0, "primary b would become sync target; demote it first")),
	ROW(S(UP, .cur = G_B, .bm = G_A), S(INC, P, .cur = G_A), EST(18, FLUSHED),
	    .reason = "b fills its disk from this copy"),
	/* H11..H14: equal */
	ROW(S(UP, .cur = G_A), S(UP, .cur = G_A), EST(11, F_CLEAR | F_ROTATE)),
	ROW(S(OUTD, .cur = G_A), S(UP, P, .cur = G_A), EST(11, F_CLEAR | F_ROTATE | F_UPTODATE)),
	ROW(S(UNVER, .cur = G_A), S(UNVER, .cur = G_A), EST(11, F_CLEAR | F_ROTATE | F_UPTODATE)),
	ROW(S(UP, P, .cur = G_A), S(UP, .cur = G_A), .pulling = true, EST(11, F_ROTATE)),
	ROW(S(INC, .cur = G_A), S(INC, P, .cur = G_A), EST(11, F_ROTATE)),
	ROW(S(INC, .cur = G_A), S(INC, .cur = G_A), EST(11, F_CLEAR | F_ROTATE)),
	ROW(S(FAIL, .cur = G_A), S(INC, .cur = G_A), EST(11, F_ROTATE)),
	ROW(S(INC, .cur = G_A), S(DLESS, .cur = G_A), EST(11, F_ROTATE)),
	ROW(S(INC, .cur = GEN_EMPTY), S(INC, .cur = GEN_EMPTY),
	    EST(11, F_CLEAR | F_ROTATE | F_UPTODATE)),
	ROW(S(INC, .cur = GEN_EMPTY), S(INC, .cur = GEN_EMPTY), .first_node = true,
	    EST(11, F_CLEAR | F_ROTATE | F_UPTODATE | F_NEWPAIR)),
	/* H16, H17, H20: the source */
	ROW(S(UP, .cur = G_B, .bm = G_A), S(UP, .cur = G_A), .run = HS_SYNC_SOURCE,
	    .action = HS_CONNECT, .rule = 20, .flags = FLUSHED),
	ROW(S(UNVER, .cur = G_B, .bm = G_A), S(OUTD, .cur = G_A), .run = HS_SYNC_SOURCE,
	    .action = HS_CONNECT, .rule = 20, .flags = FLUSHED | F_UPTODATE),
	ROW(S(OUTD, .cur = G_B, .bm = G_A), S(UP, .cur = G_A), .run = HS_SYNC_SOURCE,
	    .action = HS_CONNECT, .rule = 20, .flags = FLUSHED),
	ROW(S(UP, .cur = G_A), S(INC, .cur = 0), .run = HS_SYNC_SOURCE, .action = HS_CONNECT,
	    .rule = 20, .flags = FLUSHED | F_MARKALL),
	ROW(S(OUTD, .cur = G_A), S(INC, P, .cur = G_A), EST(18, FLUSHED | F_MARKALL | F_UPTODATE),
	    .reason = "b fills its disk from this copy"),
	ROW(S(OUTD, .cur = G_A), S(INC, P, .cur = G_A, .bits = true), EST(18, FLUSHED | F_UPTODATE),
	    .reason = "b fills its disk from this copy"),
	ROW(S(OUTD, .cur = G_A), S(DLESS, P, .cur = G_A),
	    EST(19, FLUSHED | F_MARKALL | F_UPTODATE | F_WARN),
	    .reason = "b's disk is failed: nothing is copied to it until `tandemctl attach` there"),
	/* (not the same generation, or not a primary: outdated stays) */
	ROW(S(OUTD, .cur = G_B, .bm = G_A), S(INC, P, .cur = G_A), EST(18, FLUSHED),
	    .reason = "b fills its disk from this copy"),
	ROW(S(OUTD, .cur = G_A), S(FAIL, .cur = G_A), EST(19, FLUSHED | F_MARKALL | F_WARN),
	    .reason = "b's disk is failed"),
	/* H22: a pull already running is not started again */
	ROW(S(INC, P, .cur = G_A), S(UP, .cur = G_A), EST(22, FLUSHED | F_MARKALL | F_PULL)),
	ROW(S(INC, P, .cur = G_A), S(UP, .cur = G_A), .pulling = true,
	    EST(22, FLUSHED | F_MARKALL)),
	ROW(S(DLESS, .cur = G_A), S(OUTD, .cur = G_A, .bits = true), EST(23, FLUSHED | F_WARN),
	    .reason = "the disk is failed"),
	/* H24: the target and its kept copy */
	ROW(S(UP, .cur = G_A), S(UP, .cur = G_B, .bm = G_A), .run = HS_SYNC_TARGET,
	    .action = HS_CONNECT, .rule = 24, .flags = FLUSHED, .kept = HS_KEPT_NO_SYNC),
	ROW(S(UP, .cur = G_A), S(UP, .cur = G_B, .bm = G_A), .oos = 1, .run = HS_SYNC_TARGET,
	    .action = HS_CONNECT, .rule = 24, .flags = FLUSHED, .kept = HS_KEPT_TAKE),
	ROW(S(OUTD, .cur = G_A), S(UP, .cur = G_B, .hist0 = G_A), .run = HS_SYNC_TARGET,
	    .action = HS_CONNECT, .rule = 24, .flags = FLUSHED | F_MARKALL, .kept = HS_KEPT_TAKE),
	ROW(S(INC, .cur = G_A, .bits = true), S(UP, .cur = G_A), .oos = 3, .run = HS_SYNC_TARGET,
	    .action = HS_CONNECT, .rule = 24, .flags = FLUSHED, .kept = HS_KEPT_NONE),
	ROW(S(INC, .cur = 0), S(UP, .cur = G_A), .run = HS_SYNC_TARGET, .action = HS_CONNECT,
	    .rule = 24, .flags = FLUSHED | F_MARKALL, .kept = HS_KEPT_NONE),
	/* H25: the first primary of a new pair (I2) */
	ROW(S(UP, .cur = GEN_EMPTY), S(UP, .cur = GEN_EMPTY), .first_node = true,
	    EST(11, F_CLEAR | F_ROTATE | F_NEWPAIR)),
	ROW(S(UP, .cur = GEN_EMPTY), S(UP, .cur = GEN_EMPTY), EST(11, F_CLEAR | F_ROTATE)),
	ROW(S(UP, .cur = GEN_EMPTY), S(UP, P, .cur = GEN_EMPTY), .first_node = true,
	    EST(11, F_CLEAR | F_ROTATE)),
	ROW(S(UP, .cur = G_A), S(INC, .cur = GEN_EMPTY), .first_node = true, .created = true,
	    .run = HS_SYNC_SOURCE, .action = HS_CONNECT, .rule = 20,
	    .flags = FLUSHED | F_MARKALL | F_NEWPAIR),
	ROW(S(UP, .cur = G_A), S(INC, .cur = 0), .first_node = true, .created = true,
	    .run = HS_SYNC_SOURCE, .action = HS_CONNECT, .rule = 20,
	    .flags = FLUSHED | F_MARKALL | F_NEWPAIR),
	ROW(S(UP, .cur = G_A), S(INC, .cur = GEN_EMPTY), .first_node = true, .run = HS_SYNC_SOURCE,
	    .action = HS_CONNECT, .rule = 20, .flags = FLUSHED | F_MARKALL),
	ROW(S(UP, .cur = GEN_EMPTY), S(INC, .cur = 0), .first_node = true, .run = HS_SYNC_SOURCE,
	    .action = HS_CONNECT, .rule = 20, .flags = FLUSHED | F_MARKALL | F_NEWPAIR),
	/* (a target: new_pair_promote finds its disk not uptodate and does nothing) */
	ROW(S(INC, .cur = GEN_EMPTY), S(UP, .cur = GEN_EMPTY), .first_node = true, .created = true,
	    .run = HS_SYNC_TARGET, .action = HS_CONNECT, .rule = 24,
	    .flags = FLUSHED | F_MARKALL | F_NEWPAIR, .kept = HS_KEPT_NONE),
};

static void check_hs(int line, const struct hs_input *in, const struct hs_row *t)
{
	struct hs_decision d = hs_decide(in);
	unsigned f = flags_of(&d);
	bool text_ok = t->reason ? strstr(d.reason, t->reason) != NULL : d.reason[0] == '\0';

	if (d.action != t->action || d.rule != t->rule || f != t->flags ||
	    (d.action == HS_CONNECT && (d.run != t->run || d.kept != t->kept)) || !text_ok)
		print_message("line %d: got action %d H%d run %d flags %#x kept %d \"%s\" (%s); "
			      "want action %d H%d run %d flags %#x kept %d \"%s\"\n",
			      line, d.action, d.rule, d.run, f, d.kept, d.reason,
			      gen_verdict_name(d.gen.verdict), t->action, t->rule, t->run, t->flags,
			      t->kept, t->reason ? t->reason : "");
	assert_int_equal(d.action, t->action);
	assert_int_equal(d.rule, t->rule);
	assert_int_equal(f, t->flags);
	assert_true(text_ok);
	if (d.action == HS_CONNECT) {
		assert_int_equal(d.run, t->run);
		assert_int_equal(d.kept, t->kept);
	}
}

static void test_hs_table(void **state)
{
	bool seen[26] = { false };
	(void)state;

	for (size_t i = 0; i < ARRAY_LEN(hs_rows); i++) {
		struct hs_input in = input_of(&hs_rows[i]);
		struct hs_decision d = hs_decide(&in);

		check_hs(hs_rows[i].line, &in, &hs_rows[i]);
		seen[d.rule] = true;
		seen[12] |= d.clear_marks;
		seen[13] |=
			d.uptodate && d.gen.verdict == GEN_EQUAL && in.me.gen.current != GEN_EMPTY;
		seen[14] |= d.uptodate && d.gen.verdict == GEN_EQUAL && in.me.disk == INC;
		seen[16] |= d.uptodate && d.gen.verdict == GEN_SOURCE && in.me.disk == UNVER;
		seen[17] |= d.uptodate && d.gen.verdict == GEN_SOURCE && in.me.disk == OUTD;
		seen[25] |= d.new_pair;
	}
	/* H15 and H21 take a gone disk that calls itself consistent, which no
	 * STATE says (G20 refuses it first): reached by hand */
	{
		struct hs_row t = { __LINE__, S(FAIL, .cur = G_B, .bm = G_A), S(UP, .cur = G_A),
				    EST(15, F_WARN),
				    .reason =
					    "this copy is newer than b's, but its disk is failed: "
					    "no resync; what only it held is lost" };
		struct hs_input in = input_of(&t);
		in.me.gen.inconsistent = false;
		check_hs(t.line, &in, &t);
		seen[15] = true;
	}
	{
		struct hs_row t = {
			__LINE__, S(UP, .cur = G_A), S(DLESS, .cur = G_B, .bm = G_A),
			EST(21, FLUSHED | F_WARN),
			.reason = "b's copy is newer, but its disk is diskless: no resync"
		};
		struct hs_input in = input_of(&t);
		in.peer.gen.inconsistent = false;
		check_hs(t.line, &in, &t);
		seen[21] = true;
	}
	for (int h = 1; h <= 25; h++) {
		if (!seen[h])
			print_message("no row of the table reaches H%d\n", h);
		assert_true(seen[h]);
	}
}

/* Both sides decide on each other's STATE: over every pair of simple sides
 * (at most one primary: two are H3..H5), what one side runs as must match
 * the other's (run_state in repl_hs.c starts over otherwise), and a refusal
 * on one side is one on the other. Each side's own marks include the
 * peer's, merged from its bitmap before the decision. */
static void test_hs_both_sides_agree(void **state)
{
	static const enum vol_disk disks[] = { UP, OUTD, UNVER, INC, FAIL, DLESS };
	static const uint64_t gens[][2] = {
		{ G_A, 0 }, { G_B, G_A }, { GEN_EMPTY, 0 }, { 0, 0 }, { G_C, G_A }, { G_B, 0 },
	};
	const size_t nd = ARRAY_LEN(disks), ng = ARRAY_LEN(gens);
	unsigned pairs = 0;
	(void)state;

	for (size_t n = 0; n < nd * nd * ng * ng * 16; n++) {
		size_t da = n % nd, db = n / nd % nd, ga = n / nd / nd % ng;
		size_t gb = n / nd / nd / ng % ng;
		unsigned x = (unsigned)(n / nd / nd / ng / ng);
		struct side a = S(disks[da], .cur = gens[ga][0], .bm = gens[ga][1],
				  .primary = x & 1, .bits = x & 4);
		struct side b = S(disks[db], .cur = gens[gb][0], .bm = gens[gb][1],
				  .primary = (x & 2) && !(x & 1), .bits = x & 8);
		struct hs_row ra = { .me = a, .peer = b, .me_first = true, .oos = x & 12 };
		struct hs_row rb = { .me = b, .peer = a, .me_first = false, .oos = x & 12 };
		struct hs_input ia = input_of(&ra), ib = input_of(&rb);
		struct hs_decision d, e;
		bool agree;

		ia.me.gen.has_bits |= ia.peer.gen.has_bits;
		ib.me.gen.has_bits |= ib.peer.gen.has_bits;
		d = hs_decide(&ia);
		e = hs_decide(&ib);
		pairs++;
		agree = (d.action == HS_CONNECT) == (e.action == HS_CONNECT);
		if (agree && d.action == HS_CONNECT)
			agree = (d.run == HS_SYNC_SOURCE) == (e.run == HS_SYNC_TARGET) &&
				(e.run == HS_SYNC_SOURCE) == (d.run == HS_SYNC_TARGET);
		if (!agree)
			print_message("disks %s/%s gens %zu/%zu x %u: H%d run %d vs H%d run %d\n",
				      vol_disk_name(disks[da]), vol_disk_name(disks[db]), ga, gb, x,
				      d.rule, d.run, e.rule, e.run);
		assert_true(agree);
	}
	assert_true(pairs > 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_equal_with_bits),
		cmocka_unit_test(test_branched),
		cmocka_unit_test(test_created_empty_vs_written),
		cmocka_unit_test(test_no_data_vs_data),
		cmocka_unit_test(test_no_data_vs_created_empty),
		cmocka_unit_test(test_both_none),
		cmocka_unit_test(test_split_brain_same_bitmap),
		cmocka_unit_test(test_split_brain_history),
		cmocka_unit_test(test_unrelated),
		cmocka_unit_test(test_history_full_sync),
		cmocka_unit_test(test_push_history),
		cmocka_unit_test(test_symmetry_property),
		cmocka_unit_test(test_symmetry_crossed_bitmaps),
		cmocka_unit_test(test_inconsistent_never_source),
		cmocka_unit_test(test_equal_uptodate_over_outdated),
		cmocka_unit_test(test_equal_standing_of_unverified),
		cmocka_unit_test(test_gen_table),
		cmocka_unit_test(test_hs_table),
		cmocka_unit_test(test_hs_both_sides_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
