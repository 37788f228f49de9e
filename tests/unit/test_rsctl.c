/* The resync controller (src/repl/rsctl.[ch]), driven with synthetic
 * timestamps and measurements: no clock, no sockets.
 *
 *  - a property test: thousands of random intervals (foreground latencies and
 *    requests in flight, acknowledgements, round trips, irregular intervals,
 *    long stalls), checking C1 after every call and every rule that can be
 *    stated from one step: start-up growth by what is acknowledged, idle
 *    doubling within the cap, quiet never opening the window, a cut of at
 *    most a half, growth of at most an eighth (or one minimal piece), the
 *    piece from the bandwidth, C2 on a return after three idle intervals;
 *  - one scenario per rule of rsctl.h: start-up, quiet and the baseline, cut
 *    and growth against the baseline, idle growth up to the cap, the
 *    returning foreground (C2), the rebaseline every RSCTL_REBASE_NS, and the
 *    piece size from the bandwidth.
 * Expected values are computed here from the rules as rsctl.h states them
 * (bandwidth = the most bytes acknowledged in one of the last ten intervals
 * x 10; round trip = the shortest in the current or previous 5 s bucket;
 * cap = bw x (2 x rtt + RSCTL_QUEUE_NS) + 2 pieces, at most RSCTL_MAX_WINDOW,
 * "the window holds" without a bandwidth or round trip), in 128-bit
 * arithmetic, not read back from the controller. */
#include "unit.h"

#include <stdbool.h>

#include "../../src/repl/rsctl.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define MS 1000000ull
#define IV RSCTL_INTERVAL_NS
#define MIN_PIECE ((uint32_t)(4 * KIB)) /* repl.c's floor (RS_MIN_PIECE) on 512/4096-byte disks */
#define MAX_PIECE ((uint32_t)MIB)
#define START_PIECE ((uint32_t)(64 * KIB)) /* rsctl.c's starting values */
#define START_WINDOW (256 * KIB)

/* ---- a controller on a synthetic clock ---- */

struct rig {
	struct rsctl c;
	uint64_t now;    /* the last interval boundary */
	uint64_t per_iv; /* a link: bytes acknowledged per interval (0: none) ... */
	uint64_t rtt;    /* ... with this round trip */
};

static void check_c1_at(int line, const struct rsctl *c)
{
	bool ok = c->min_window >= 1 && c->min_window <= c->window &&
		  c->window <= RSCTL_MAX_WINDOW && c->min_piece <= c->piece &&
		  c->piece <= c->max_piece && c->quiet == (c->q != RSQ_OFF);

	if (!ok)
		print_message("line %d: C1 violated: window %llu (min %llu, max %llu), piece %u "
			      "(min %u, max %u), quiet %d q %d\n",
			      line, (unsigned long long)c->window,
			      (unsigned long long)c->min_window, (unsigned long long)RSCTL_MAX_WINDOW,
			      c->piece, c->min_piece, c->max_piece, c->quiet, (int)c->q);
	assert_true(ok);
}

#define CHECK_C1(c) check_c1_at(__LINE__, c)

static void rig_init(struct rig *r, uint32_t min_piece, uint32_t max_piece)
{
	memset(r, 0, sizeof(*r));
	r->now = 7 * RSCTL_REBASE_NS + 12345; /* any origin: only differences matter */
	rsctl_init(&r->c, min_piece, max_piece, r->now);
	CHECK_C1(&r->c);
	assert_true(r->c.startup);
}

/* n foreground completions of lat_ns each (no bytes: the bandwidth stays ours) */
static void fg(struct rig *r, unsigned n, uint64_t lat_ns)
{
	for (unsigned i = 0; i < n; i++)
		rsctl_fg_done(&r->c, lat_ns, 0);
}

/* n resync requests of `bytes` acknowledged after rtt_ns, inside this interval */
static void acks(struct rig *r, unsigned n, uint64_t rtt_ns, uint64_t bytes)
{
	for (unsigned i = 0; i < n; i++)
		rsctl_rs_acked(&r->c, rtt_ns, bytes, r->now + 1 + i);
}

/* A link that acknowledges per_iv bytes per interval with round trips of rtt,
 * past start-up: one round trip sets the minimum, one far above it ends
 * start-up (a queue formed), neither delivers anything. */
static void link_up(struct rig *r, uint64_t per_iv, uint64_t rtt)
{
	uint64_t w = r->c.window;

	r->per_iv = per_iv;
	r->rtt = rtt;
	acks(r, 1, rtt, 0);
	acks(r, 1, 3 * rtt + RSCTL_QUEUE_NS, 0);
	assert_false(r->c.startup);
	assert_int_equal(r->c.window, w);
}

static void tick_busy(struct rig *r, uint64_t inflight, bool fg_busy)
{
	if (r->per_iv)
		acks(r, 1, r->rtt, r->per_iv);
	r->now += IV;
	rsctl_interval(&r->c, r->now, inflight, fg_busy);
	CHECK_C1(&r->c);
}

static void tick(struct rig *r, uint64_t inflight)
{
	tick_busy(r, inflight, false);
}

/* One active interval (8 completions at lat_ns) that must not be quiet. */
static void active(struct rig *r, uint64_t lat_ns)
{
	fg(r, 8, lat_ns);
	tick_busy(r, 64 * KIB, true);
	assert_false(r->c.quiet);
}

/* From a controller without a baseline: two intervals measure it. */
static void baseline(struct rig *r, uint64_t lat_ns)
{
	fg(r, 8, lat_ns);
	tick_busy(r, 0, true); /* nothing in flight: straight to measuring */
	assert_true(r->c.quiet);
	assert_int_equal(r->c.q, RSQ_MEASURE);
	fg(r, 8, lat_ns);
	tick_busy(r, 0, true);
	assert_false(r->c.quiet);
	assert_true(r->c.base_lat == (double)lat_ns);
	assert_int_equal(r->c.base_ns, r->now);
	assert_false(r->c.startup);
}

static uint64_t pow2_floor(uint64_t x)
{
	uint64_t p = 1;
	while (p * 2 <= x)
		p *= 2;
	return p;
}

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/* The documented piece for a bandwidth: 2 ms of it, a power of two, clamped. */
static uint32_t want_piece(uint64_t bw, uint32_t min_piece, uint32_t max_piece)
{
	uint64_t p = pow2_floor(bw / 500); /* bytes per 2 ms */
	if (p < min_piece)
		p = min_piece;
	if (p > max_piece)
		p = max_piece;
	return (uint32_t)p;
}

/* The documented cap for a known bandwidth and round trip. */
static uint64_t want_cap(uint64_t bw, uint64_t rtt_ns, uint32_t piece)
{
	unsigned __int128 cap;

	assert_true(bw && rtt_ns);
	cap = (unsigned __int128)bw * (2 * (unsigned __int128)rtt_ns + RSCTL_QUEUE_NS) /
		      1000000000u +
	      2ull * piece;
	return cap > RSCTL_MAX_WINDOW ? RSCTL_MAX_WINDOW : (uint64_t)cap;
}

static uint64_t rtt_of(const struct rsctl *c)
{
	uint64_t a = c->rtt_min[0], b = c->rtt_min[1];
	return !a ? b : !b ? a : (a < b ? a : b);
}

/* The cap an interval applies, from the controller's own filters (the random
 * test's inputs are too many to model) and the window it started with:
 * without a bandwidth or a round trip the window holds (or returns to the
 * start value). */
static uint64_t cap_of(const struct rsctl *c, uint64_t window_before)
{
	uint64_t bw = rsctl_bw(c), rtt = rtt_of(c);

	if (!bw || !rtt)
		return window_before > START_WINDOW ? window_before : START_WINDOW;
	return want_cap(bw, rtt, c->piece);
}

/* ---- (a) property: C1 and the per-interval rules under random input ---- */

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64: deterministic, so a failure reproduces */
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 0 or a value of 1..bits bits, each bit length equally likely */
static uint64_t rng_log(uint64_t *s, unsigned bits)
{
	unsigned b = (unsigned)(rng_next(s) % (bits + 1));
	if (!b)
		return 0;
	return (1ull << (b - 1)) | (rng_next(s) & ((1ull << (b - 1)) - 1));
}

struct limits {
	uint32_t min_piece, max_piece;
};

#define PROPERTY_STEPS 4000

struct seen {
	unsigned quiet, cut, halved, grown, held, idle_grown, capped, c2, rebase, piece_change;
	unsigned startup_grown, startup_end;
};

/* One acknowledgement, and what it may do to the window: grow it by its bytes
 * in start-up, nothing otherwise. */
static void property_ack(struct rig *r, uint64_t rtt, uint64_t bytes, uint64_t at,
			 struct seen *seen)
{
	struct rsctl b = r->c;

	rsctl_rs_acked(&r->c, rtt, bytes, at);
	CHECK_C1(&r->c);
	if (!b.startup || !rtt) {
		assert_int_equal(r->c.window, b.window);
		assert_int_equal(r->c.startup, b.startup);
		return;
	}
	if (rtt > 2 * rtt_of(&r->c) + RSCTL_QUEUE_NS) {
		/* round trips grew: a queue formed, start-up is over */
		assert_false(r->c.startup);
		assert_int_equal(r->c.window, b.window);
		seen->startup_end++;
	} else {
		uint64_t w = b.window + bytes;
		assert_true(r->c.startup);
		assert_int_equal(r->c.window, w < RSCTL_MAX_WINDOW ? w : RSCTL_MAX_WINDOW);
		seen->startup_grown += r->c.window > b.window;
	}
}

static void property_run(uint64_t seed, struct limits lim, struct seen *seen)
{
	uint64_t s = seed;
	struct rig r;
	unsigned regime = 0;
	uint64_t base_lat = 1 * MS, link_rtt = 1 * MS;

	rig_init(&r, lim.min_piece, lim.max_piece);
	assert_int_equal(r.c.min_piece, lim.min_piece);
	assert_int_equal(r.c.max_piece, lim.max_piece > lim.min_piece ? lim.max_piece : lim.min_piece);
	assert_int_equal(r.c.min_window, lim.min_piece);
	for (unsigned step = 0; step < PROPERTY_STEPS; step++) {
		struct rsctl before;
		unsigned n_fg = 0, n_ack;
		uint64_t dt, inflight, cap;
		bool busy = false, is_active, ratio_ran;

		/* regimes of a few dozen intervals, so that every rule gets its turn */
		if (step % 40 == 0) {
			regime = (unsigned)(rng_next(&s) % 6);
			base_lat = 100000 + rng_next(&s) % (20 * MS);
			link_rtt = 100000 + rng_next(&s) % (50 * MS);
		}
		switch (regime) {
		case 0: /* idle */
			break;
		case 1: /* steady foreground near its baseline */
		case 2: /* a foreground that suffers: well above it */
			n_fg = 1 + (unsigned)(rng_next(&s) % 60);
			for (unsigned i = 0; i < n_fg; i++) {
				uint64_t lat = base_lat + rng_next(&s) % (base_lat / 4 + 1);
				if (regime == 2)
					lat *= 1 + rng_next(&s) % 4;
				rsctl_fg_done(&r.c, lat, rng_next(&s) % 2 ? 4096 : 0);
			}
			busy = rng_next(&s) % 2;
			break;
		case 3: /* anything at all */
			n_fg = (unsigned)(rng_next(&s) % 8 ? rng_next(&s) % 100 : 0);
			for (unsigned i = 0; i < n_fg; i++)
				rsctl_fg_done(&r.c, rng_log(&s, 34), rng_log(&s, 21));
			busy = rng_next(&s) % 3 == 0;
			break;
		case 4: /* flapping between idle and active */
			n_fg = step % 2 ? 0 : 1 + (unsigned)(rng_next(&s) % 8);
			fg(&r, n_fg, base_lat);
			break;
		case 5: /* requests that take longer than an interval */
			n_fg = rng_next(&s) % 3 == 0;
			fg(&r, n_fg, 150 * MS);
			busy = true;
			break;
		}
		n_ack = (unsigned)(rng_next(&s) % 24);
		for (unsigned i = 0; i < n_ack; i++) {
			uint64_t rtt, bytes = 512 * (1 + rng_next(&s) % 4096);
			switch (rng_next(&s) % 8) {
			case 0: rtt = 0; bytes = 64; break; /* a zero extent */
			case 1: rtt = rng_log(&s, 30); break;
			case 2: rtt = link_rtt * (2 + rng_next(&s) % 4) + RSCTL_QUEUE_NS; break;
			default: rtt = link_rtt + rng_next(&s) % (link_rtt / 2 + 1);
			}
			property_ack(&r, rtt, bytes, r.now + 1 + i, seen);
		}
		/* mostly on time; sometimes late; now and then a long stall */
		switch (rng_next(&s) % 16) {
		case 0: dt = IV + rng_next(&s) % (12 * RSCTL_REBASE_NS / 5); break;
		case 1: case 2: dt = IV / 2 + rng_next(&s) % (2 * IV); break;
		default: dt = IV;
		}
		inflight = rng_next(&s) % 3 ? 0 : 1 + rng_next(&s) % (r.c.window + 1);

		before = r.c;
		is_active = n_fg > 0 || busy;
		r.now += dt;
		rsctl_interval(&r.c, r.now, inflight, busy);
		if (r.c.min_window > r.c.window || r.c.window > RSCTL_MAX_WINDOW ||
		    r.c.piece < r.c.min_piece || r.c.piece > r.c.max_piece)
			print_message("seed %#llx step %u: C1 violated\n", (unsigned long long)seed,
				      step);
		CHECK_C1(&r.c);

		/* the piece: unchanged while the bandwidth is unknown, else 2 ms of it */
		if (rsctl_bw(&r.c))
			assert_int_equal(r.c.piece,
					 want_piece(rsctl_bw(&r.c), r.c.min_piece, r.c.max_piece));
		else
			assert_int_equal(r.c.piece, before.piece);
		if (is_pow2(lim.min_piece) && is_pow2(lim.max_piece))
			assert_true(is_pow2(r.c.piece));
		seen->piece_change += r.c.piece != before.piece;
		cap = cap_of(&r.c, before.window);

		if (!is_active) {
			/* idle: never quiet; in start-up the window holds (it grows by
			 * what is acknowledged), after it doubles within the cap */
			uint64_t grow = 2 * before.window;
			assert_false(r.c.quiet);
			assert_int_equal(r.c.idle, before.idle + 1);
			assert_int_equal(r.c.startup, before.startup);
			if (before.startup) {
				assert_int_equal(r.c.window, before.window);
				continue;
			}
			assert_true(r.c.window <= cap);
			if (grow < r.c.min_window)
				grow = r.c.min_window;
			assert_int_equal(r.c.window, grow < cap ? grow : cap);
			seen->idle_grown += r.c.window > before.window;
			seen->capped += r.c.window == cap && grow > cap;
			continue;
		}
		assert_int_equal(r.c.idle, 0);
		assert_false(r.c.startup); /* the foreground shows: start-up is over */
		if (before.idle >= 3) {
			/* C2: the returning foreground starts from the bottom, unmeasured */
			assert_int_equal(r.c.window, r.c.min_window);
			assert_true(r.c.base_lat == 0);
			assert_true(r.c.quiet);
			seen->c2++;
			continue;
		}
		if (r.c.quiet) {
			/* C3 is the owner's; here: quiet never opens the window */
			assert_true(r.c.window <= before.window);
			seen->quiet++;
			seen->rebase += before.base_lat != 0 && before.q == RSQ_OFF;
			continue;
		}
		ratio_ran = before.q == RSQ_OFF && before.base_lat != 0 &&
			    r.now - before.base_ns < RSCTL_REBASE_NS;
		if (!ratio_ran) {
			/* the measuring interval ended: baseline set */
			assert_int_equal(before.q, RSQ_MEASURE);
			assert_true(n_fg > 0);
			assert_int_equal(r.c.base_ns, r.now);
			assert_true(r.c.window <= before.window);
			continue;
		}
		if (n_fg == 0) {
			/* requests in flight, none completed: the window holds, within the cap */
			uint64_t w = before.window < cap ? before.window : cap;
			assert_int_equal(r.c.window, w > r.c.min_window ? w : r.c.min_window);
			seen->held++;
			continue;
		}
		{
			uint64_t lo = before.window / 2, hi;
			if (lo < r.c.min_window)
				lo = r.c.min_window;
			if (lo > cap)
				lo = cap;
			hi = before.window + (before.window / 8 > r.c.min_piece ? before.window / 8
										  : r.c.min_piece);
			assert_true(r.c.window <= cap);
			assert_true(r.c.window >= lo); /* at most halved */
			assert_true(r.c.window <= hi); /* at most an eighth (or one piece) more */
			seen->cut += r.c.window < before.window;
			seen->halved += r.c.window == lo && lo < before.window;
			seen->grown += r.c.window > before.window;
		}
	}
}

static void test_property_random(void **state)
{
	static const struct limits lims[] = {
		{ MIN_PIECE, MAX_PIECE },     /* repl.c on ordinary disks */
		{ 16 * KIB, MAX_PIECE },
		{ 64 * KIB, MAX_PIECE },      /* a 64 KiB-block store */
		{ MIN_PIECE, MIN_PIECE },     /* one size only */
		{ MAX_PIECE, MAX_PIECE },
		{ 128 * KIB, 64 * KIB },      /* max below min: max is raised to min */
		{ 12 * KIB, 96 * KIB },       /* not powers of two */
	};
	static const uint64_t seeds[] = { 0x9e3779b97f4a7c15ull, 0x243f6a8885a308d3ull,
					  0xb7e151628aed2a6bull, 1 };
	struct seen seen = { 0 };
	(void)state;

	for (size_t l = 0; l < ARRAY_LEN(lims); l++)
		for (size_t i = 0; i < ARRAY_LEN(seeds); i++)
			property_run(seeds[i] ^ (l * 0x100000001b3ull), lims[l], &seen);
	print_message("%zu runs of %u intervals: %u quiet, %u cut (%u halved), %u grown, %u held, "
		      "%u idle-grown, %u clamped by the cap, %u C2, %u rebaselines, "
		      "%u piece changes, %u start-up growths, %u start-up ends\n",
		      ARRAY_LEN(lims) * ARRAY_LEN(seeds), PROPERTY_STEPS, seen.quiet, seen.cut,
		      seen.halved, seen.grown, seen.held, seen.idle_grown, seen.capped, seen.c2,
		      seen.rebase, seen.piece_change, seen.startup_grown, seen.startup_end);
	/* the random input reached every rule, or the test proves nothing */
	assert_true(seen.quiet > 0 && seen.cut > 0 && seen.halved > 0 && seen.grown > 0);
	assert_true(seen.held > 0 && seen.idle_grown > 0 && seen.capped > 0 && seen.c2 > 0);
	assert_true(seen.rebase > 0 && seen.piece_change > 0);
	assert_true(seen.startup_grown > 0 && seen.startup_end > 0);
}

/* C1 at the extremes: huge and zero measurements. */
static void test_c1_extremes(void **state)
{
	struct rig r;
	(void)state;

	rig_init(&r, MIN_PIECE, MAX_PIECE);
	assert_int_equal(r.c.piece, START_PIECE);
	assert_int_equal(r.c.window, START_WINDOW);
	assert_int_equal(r.c.min_window, MIN_PIECE);
	assert_false(r.c.quiet);
	/* start-up on a 10 GB/s link: the window grows to 64 MiB, no further */
	for (int i = 0; i < 20; i++) {
		acks(&r, 1, 1 * MS, 1ull << 30);
		tick(&r, 0);
	}
	assert_true(r.c.startup);
	assert_int_equal(r.c.window, RSCTL_MAX_WINDOW);
	assert_int_equal(r.c.piece, MAX_PIECE);
	/* the foreground returns (C2: to the bottom), with a 1 ns baseline ... */
	fg(&r, 8, 1);
	tick(&r, 0);
	assert_int_equal(r.c.window, r.c.min_window);
	fg(&r, 8, 1);
	tick(&r, 0);
	assert_true(r.c.base_lat == 1.0);
	/* ... then a latency of days: halved, but never below min_window */
	for (int i = 0; i < 10; i++)
		active(&r, 1000000 * 1000 * MS);
	assert_int_equal(r.c.window, r.c.min_window);
	/* zero latencies: below any baseline, so growth, within the bounds */
	for (int i = 0; i < 30; i++)
		active(&r, 0);
	assert_true(r.c.window > r.c.min_window);
	/* min_piece larger than the default start piece and window */
	rig_init(&r, 2 * MIB, 4 * MIB);
	assert_int_equal(r.c.piece, 2 * MIB);
	assert_int_equal(r.c.min_window, 2 * MIB);
	assert_int_equal(r.c.window, 2 * MIB);
	rig_init(&r, 4 * KIB, 32 * KIB);
	assert_int_equal(r.c.piece, 32 * KIB);
}

/* ---- start-up: grow by what is acknowledged until round trips grow ---- */

static void test_startup(void **state)
{
	struct rig r;
	uint64_t w;
	(void)state;

	rig_init(&r, MIN_PIECE, MAX_PIECE);
	/* every acknowledged byte adds to the window: doubling per round trip */
	acks(&r, 4, 2 * MS, 64 * KIB);
	assert_int_equal(r.c.window, START_WINDOW + 4 * 64 * KIB);
	/* a zero extent (no round trip) delivers, but teaches nothing */
	rsctl_rs_acked(&r.c, 0, 64, r.now + 10);
	assert_int_equal(r.c.window, START_WINDOW + 4 * 64 * KIB);
	/* idle intervals do not double it on top: start-up has its own growth */
	tick(&r, r.c.window);
	tick(&r, r.c.window);
	assert_true(r.c.startup);
	assert_int_equal(r.c.window, START_WINDOW + 4 * 64 * KIB);
	/* round trips up to twice the minimum plus RSCTL_QUEUE_NS: still start-up */
	w = r.c.window;
	acks(&r, 1, 2 * 2 * MS + RSCTL_QUEUE_NS, 128 * KIB);
	assert_true(r.c.startup);
	assert_int_equal(r.c.window, w + 128 * KIB);
	/* a shorter one lowers the minimum, and the threshold with it */
	w = r.c.window;
	acks(&r, 1, 1 * MS, 128 * KIB);
	acks(&r, 1, 2 * 1 * MS + RSCTL_QUEUE_NS + 1, 128 * KIB);
	assert_false(r.c.startup);
	assert_int_equal(r.c.window, w + 128 * KIB); /* the late one added nothing */
	/* from now on, acknowledgements do not move the window */
	w = r.c.window;
	acks(&r, 8, 1 * MS, MIB);
	assert_int_equal(r.c.window, w);

	/* start-up ends when the foreground shows, even without a completion */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	acks(&r, 2, 1 * MS, MIB);
	tick_busy(&r, 0, true);
	assert_false(r.c.startup);
	w = r.c.window;
	acks(&r, 2, 1 * MS, MIB);
	assert_int_equal(r.c.window, w);
}

/* ---- (b) quiet: drain, measure one interval, baseline, leave ---- */

static void test_quiet_baseline(void **state)
{
	struct rig r;
	uint64_t w;
	(void)state;

	/* resync in flight when the foreground appears: drain first */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	w = r.c.window;
	fg(&r, 8, 5 * MS);
	tick(&r, 128 * KIB);
	assert_true(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_DRAIN);
	assert_true(r.c.base_lat == 0);
	/* still draining: quiet, no baseline, window untouched whatever the latency */
	fg(&r, 8, 50 * MS);
	tick(&r, 64 * KIB);
	assert_true(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_DRAIN);
	assert_true(r.c.base_lat == 0);
	assert_int_equal(r.c.window, w);
	/* drained at this boundary: the next interval is the measurement */
	fg(&r, 8, 50 * MS);
	tick(&r, 0);
	assert_true(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_MEASURE);
	assert_true(r.c.base_lat == 0);
	assert_int_equal(r.c.window, w);
	/* a measuring interval without a completion measures nothing: again */
	tick_busy(&r, 0, true);
	assert_true(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_MEASURE);
	assert_true(r.c.base_lat == 0);
	/* the measured interval: its mean (not the drain's latencies) is the baseline */
	fg(&r, 4, 1 * MS);
	fg(&r, 4, 3 * MS);
	tick(&r, 0);
	assert_false(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_OFF);
	assert_true(r.c.base_lat == 2.0 * MS);
	assert_int_equal(r.c.base_ns, r.now);
	assert_int_equal(r.c.window, w);
	/* and then the rules run against it: at the baseline, the window grows */
	link_up(&r, 4 * MIB, 20 * MS);
	active(&r, 2 * MS);
	assert_int_equal(r.c.window, w + w / 8);
	assert_true(r.c.last_ratio == 1.0);

	/* nothing in flight when the foreground appears: measure at once */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	fg(&r, 8, 1 * MS);
	tick(&r, 0);
	assert_true(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_MEASURE);
	fg(&r, 8, 1 * MS);
	tick(&r, 0);
	assert_false(r.c.quiet);
	assert_true(r.c.base_lat == 1.0 * MS);

	/* one completion is a foreground; so are requests in flight without one */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	fg(&r, 1, 1 * MS);
	tick(&r, 64 * KIB);
	assert_true(r.c.quiet);
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	tick_busy(&r, 64 * KIB, true);
	assert_true(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_DRAIN);
	/* a foreground that leaves mid-drain ends the quiet and measures nothing */
	tick(&r, 64 * KIB);
	assert_false(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_OFF);
	assert_true(r.c.base_lat == 0);
	/* and one that leaves during the measurement: no baseline from an idle interval */
	fg(&r, 8, 1 * MS);
	tick(&r, 0);
	assert_int_equal(r.c.q, RSQ_MEASURE);
	tick(&r, 0);
	assert_false(r.c.quiet);
	assert_true(r.c.base_lat == 0);
}

/* ---- (c) cut above RSCTL_HIGH x baseline, growth below RSCTL_LOW x ---- */

static void test_cut_and_grow(void **state)
{
	struct rig r;
	uint64_t w, cap;
	(void)state;

	/* a link with room: 1000 MiB/s, rtt 20 ms; cap = 50 ms of it + 2 MiB */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	link_up(&r, 100 * MIB, 20 * MS);
	baseline(&r, 1 * MS);
	cap = want_cap(1000 * MIB, 20 * MS, MAX_PIECE);
	assert_int_equal(cap, 1000 * MIB / 20 + 2 * MIB);
	w = r.c.window;
	assert_int_equal(w, START_WINDOW);

	/* twice the baseline (as a mean: 1 and 3 ms): cut to LOW / 2 of it */
	fg(&r, 4, 1 * MS);
	fg(&r, 4, 3 * MS);
	tick_busy(&r, 64 * KIB, true);
	assert_false(r.c.quiet);
	assert_true(r.c.last_ratio == 2.0);
	assert_int_equal(r.c.window, (uint64_t)((double)w * (RSCTL_LOW / 2.0)));
	assert_true(r.c.window >= w / 2 && r.c.window < w);
	/* barely over the threshold: a small cut */
	w = r.c.window;
	active(&r, 1160000);
	assert_true(r.c.window < w && r.c.window > w * 9 / 10);

	/* at the thresholds and between them: unchanged */
	w = r.c.window;
	active(&r, 1150000); /* exactly RSCTL_HIGH: not above */
	assert_true(r.c.last_ratio == RSCTL_HIGH);
	assert_int_equal(r.c.window, w);
	active(&r, 1050000); /* exactly RSCTL_LOW: not below */
	assert_true(r.c.last_ratio == RSCTL_LOW);
	assert_int_equal(r.c.window, w);
	active(&r, 1100000);
	assert_int_equal(r.c.window, w);
	/* requests in flight, none completed: nothing to judge by, the window holds */
	tick_busy(&r, 64 * KIB, true);
	assert_false(r.c.quiet);
	assert_int_equal(r.c.window, w);
	assert_true(r.c.base_lat == 1.0 * MS);

	/* far above it: never more than halved per interval, down to min_window */
	for (int i = 0; i < 12; i++) {
		w = r.c.window;
		active(&r, 100 * MS);
		assert_int_equal(r.c.window, w / 2 > r.c.min_window ? w / 2 : r.c.min_window);
	}
	assert_int_equal(r.c.window, r.c.min_window);

	/* below RSCTL_LOW: one minimal piece while small, then an eighth */
	for (int i = 0; i < 24; i++) {
		uint64_t step;
		w = r.c.window;
		active(&r, i % 2 ? 1 * MS : 900000);
		step = w / 8 > MIN_PIECE ? w / 8 : MIN_PIECE;
		assert_int_equal(r.c.window, w + step);
	}
	assert_true(r.c.window > 8 * MIN_PIECE); /* past the point where an eighth is more */
	assert_true(r.c.window < cap);

	/* one idle interval keeps the baseline: the next active one is judged by it */
	tick(&r, 64 * KIB);
	assert_true(r.c.base_lat == 1.0 * MS);
	w = r.c.window;
	active(&r, 10 * MS);
	assert_int_equal(r.c.window, w / 2);
}

/* ---- (d) idle: the window doubles per interval up to the cap ---- */

/* Feeds `intervals` idle intervals that each deliver `per_iv` bytes in
 * pieces of the current size, with round trips of rtt_ns (and longer ones,
 * which must not count); checks the growth and the cap against
 * want_cap(bw, rtt_ns, piece). Returns how many intervals grew. */
static unsigned idle_link(struct rig *r, uint64_t per_iv, uint64_t rtt_ns, unsigned intervals)
{
	unsigned grew = 0;

	for (unsigned i = 0; i < intervals; i++) {
		uint64_t w = r->c.window, cap, want;
		uint32_t piece = r->c.piece;
		unsigned n = (unsigned)(per_iv / piece);

		assert_true(n >= 2 && per_iv % piece == 0);
		acks(r, n - 2, rtt_ns + 3 * MS, piece);
		acks(r, 1, rtt_ns, piece);
		acks(r, 1, rtt_ns * 2, piece);
		tick(r, w);
		assert_false(r->c.quiet);
		assert_int_equal(rsctl_bw(&r->c), per_iv * 10);
		cap = want_cap(per_iv * 10, rtt_ns, r->c.piece);
		want = 2 * w < cap ? 2 * w : cap;
		if (r->c.window != want)
			print_message("interval %u: window %llu, want %llu (was %llu, cap %llu)\n", i,
				      (unsigned long long)r->c.window, (unsigned long long)want,
				      (unsigned long long)w, (unsigned long long)cap);
		assert_int_equal(r->c.window, want);
		assert_true(r->c.window <= cap);
		grew += r->c.window > w;
	}
	return grew;
}

/* Past start-up: a round trip of rtt seen, nothing delivered yet. */
static void rig_past_startup(struct rig *r, uint64_t rtt)
{
	rig_init(r, MIN_PIECE, MAX_PIECE);
	acks(r, 1, rtt, 0);
	acks(r, 1, 3 * rtt + RSCTL_QUEUE_NS, 0);
	assert_false(r->c.startup);
	assert_int_equal(r->c.window, START_WINDOW);
}

static void test_idle_growth_to_cap(void **state)
{
	struct rig r;
	uint64_t cap;
	unsigned grew;
	(void)state;

	/* 40 MiB/s: 2 ms is 83886 bytes, so the piece stays 64 KiB; rtt 50 ms:
	 * cap = 41943040 x 0.110 + 2 x 65536 = 4744806. From 256 KiB that is four
	 * doublings and a last step to the cap. */
	rig_past_startup(&r, 50 * MS);
	grew = idle_link(&r, 4 * MIB, 50 * MS, 100); /* 10 s: the round-trip buckets turn */
	assert_int_equal(r.c.piece, 64 * KIB);
	cap = want_cap(40 * MIB, 50 * MS, 64 * KIB);
	assert_int_equal(cap, 4613734 + 2 * 64 * KIB);
	assert_int_equal(grew, 5);
	assert_int_equal(r.c.window, cap);

	/* a shorter round trip lowers the cap: the window follows at once */
	idle_link(&r, 4 * MIB, 10 * MS, 3);
	assert_int_equal(r.c.window, want_cap(40 * MIB, 10 * MS, 64 * KIB));
	assert_int_equal(r.c.window, 1258291 + 2 * 64 * KIB);

	/* 1000 MiB/s: the piece is clamped to 1 MiB; rtt 20 ms: cap = 50 MiB + 2 MiB */
	rig_past_startup(&r, 20 * MS);
	grew = idle_link(&r, 100 * MIB, 20 * MS, 60);
	assert_int_equal(r.c.piece, MAX_PIECE);
	assert_int_equal(r.c.window, 52 * MIB);
	assert_true(grew >= 5);
	/* rtt 40 ms would allow 92 MiB: RSCTL_MAX_WINDOW bounds it */
	rig_past_startup(&r, 40 * MS);
	idle_link(&r, 100 * MIB, 40 * MS, 60);
	assert_int_equal(r.c.window, RSCTL_MAX_WINDOW);

	/* a round trip of almost nothing: RSCTL_QUEUE_NS of the link and two pieces */
	rig_past_startup(&r, 1000);
	idle_link(&r, 4 * MIB, 1000, 30);
	assert_int_equal(r.c.window, want_cap(40 * MIB, 1000, 64 * KIB));
	assert_int_equal(r.c.window, 419514 + 2 * 64 * KIB);

	/* without a bandwidth the window holds ... */
	rig_past_startup(&r, 1 * MS);
	for (int i = 0; i < 10; i++)
		tick(&r, 0);
	assert_int_equal(r.c.window, START_WINDOW);
	/* ... or climbs back to the start value when below it */
	fg(&r, 8, 1 * MS);
	tick(&r, 0); /* C2: to the bottom */
	assert_int_equal(r.c.window, MIN_PIECE);
	for (int i = 0; i < 10; i++) {
		uint64_t w = r.c.window;
		tick(&r, 0);
		assert_int_equal(r.c.window, 2 * w < START_WINDOW ? 2 * w : START_WINDOW);
	}
	assert_int_equal(r.c.window, START_WINDOW);
}

/* ---- (e) C2: a foreground back after >= 3 idle intervals ---- */

static void test_c2_returning_foreground(void **state)
{
	struct rig r;
	uint64_t w;
	(void)state;

	/* two idle intervals are not a spell: window and baseline kept */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	link_up(&r, 4 * MIB, 50 * MS);
	baseline(&r, 1 * MS);
	tick(&r, 0);
	tick(&r, 0);
	w = r.c.window;
	assert_int_equal(w, 4 * START_WINDOW);
	active(&r, 1 * MS);
	assert_int_equal(r.c.window, w + w / 8);
	assert_true(r.c.base_lat == 1.0 * MS);

	/* three: the window drops to min_window, the baseline is forgotten */
	for (unsigned idle = 3; idle <= 300; idle = idle * 3 + 1) {
		rig_init(&r, MIN_PIECE, MAX_PIECE);
		link_up(&r, 4 * MIB, 50 * MS);
		baseline(&r, 1 * MS);
		for (unsigned i = 0; i < idle; i++)
			tick(&r, r.c.window); /* an idle link filling up */
		assert_true(r.c.window >= 8 * START_WINDOW);
		fg(&r, 8, 1 * MS);
		tick(&r, 1 * MIB); /* what the idle link had in flight */
		assert_int_equal(r.c.window, r.c.min_window);
		assert_int_equal(r.c.window, MIN_PIECE);
		assert_true(r.c.base_lat == 0);
		assert_true(r.c.quiet);
		assert_int_equal(r.c.q, RSQ_DRAIN);
		/* it stays at the bottom through drain and measurement */
		fg(&r, 8, 5 * MS);
		tick(&r, 0);
		assert_true(r.c.quiet);
		assert_int_equal(r.c.window, MIN_PIECE);
		fg(&r, 8, 1 * MS);
		tick(&r, 0);
		assert_false(r.c.quiet);
		assert_true(r.c.base_lat == 1.0 * MS);
		assert_int_equal(r.c.window, MIN_PIECE);
		/* then learns upwards from there */
		active(&r, 1 * MS);
		assert_int_equal(r.c.window, 2 * MIN_PIECE);
	}

	/* a return with requests in flight but none completed yet is a return */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	link_up(&r, 4 * MIB, 50 * MS);
	baseline(&r, 1 * MS);
	for (int i = 0; i < 5; i++)
		tick(&r, 0);
	tick_busy(&r, 0, true);
	assert_int_equal(r.c.window, MIN_PIECE);
	assert_int_equal(r.c.q, RSQ_MEASURE); /* nothing in flight: measure at once */

	/* a returning foreground that never had a baseline: the same */
	rig_init(&r, 64 * KIB, MAX_PIECE);
	for (int i = 0; i < 3; i++)
		tick(&r, 0);
	fg(&r, 8, 1 * MS);
	tick(&r, 0);
	assert_int_equal(r.c.window, 64 * KIB);
}

/* ---- (f) rebaseline every RSCTL_REBASE_NS ---- */

static void test_rebaseline(void **state)
{
	struct rig r;
	uint64_t lat = 1 * MS;
	(void)state;

	rig_init(&r, MIN_PIECE, MAX_PIECE);
	link_up(&r, 4 * MIB, 20 * MS);
	baseline(&r, lat);
	for (int cycle = 0; cycle < 4; cycle++) {
		uint64_t t0 = r.c.base_ns;
		unsigned n = 0;

		/* active at 1.1 x the baseline (window unchanged): not quiet until the
		 * baseline is RSCTL_REBASE_NS old */
		for (;;) {
			uint64_t w = r.c.window;
			fg(&r, 8, lat + lat / 10);
			tick(&r, 64 * KIB);
			if (r.c.quiet)
				break;
			n++;
			assert_true(r.now - t0 < RSCTL_REBASE_NS);
			assert_int_equal(r.c.window, w);
		}
		assert_int_equal(r.now - t0, RSCTL_REBASE_NS);
		/* (after the first cycle, one of those intervals is the check below) */
		assert_int_equal(n, RSCTL_REBASE_NS / IV - 1 - (cycle > 0));
		assert_int_equal(r.c.q, RSQ_DRAIN);
		/* the foreground got slower meanwhile: the new baseline is its new normal */
		lat += lat / 2;
		fg(&r, 8, lat);
		tick(&r, 0);
		assert_int_equal(r.c.q, RSQ_MEASURE);
		fg(&r, 8, lat);
		tick(&r, 0);
		assert_false(r.c.quiet);
		assert_true(r.c.base_lat == (double)lat);
		assert_int_equal(r.c.base_ns, r.now);
		/* so it is no longer "above the baseline": growth, not a cut */
		{
			uint64_t w = r.c.window;
			active(&r, lat);
			assert_int_equal(r.c.window, w + w / 8);
		}
	}

	/* a late timer: an interval that crosses the age is enough */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	baseline(&r, lat);
	fg(&r, 8, lat);
	r.now += RSCTL_REBASE_NS - 1;
	rsctl_interval(&r.c, r.now, 0, true);
	assert_false(r.c.quiet);
	fg(&r, 8, lat);
	r.now += 1;
	rsctl_interval(&r.c, r.now, 0, true);
	assert_true(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_MEASURE);
	/* requests in flight alone also start the rebaseline */
	fg(&r, 8, lat);
	tick(&r, 0);
	assert_false(r.c.quiet);
	r.now += RSCTL_REBASE_NS;
	rsctl_interval(&r.c, r.now, 64 * KIB, true);
	assert_true(r.c.quiet);
	assert_int_equal(r.c.q, RSQ_DRAIN);
}

/* ---- (g) the piece follows the bandwidth ---- */

static void test_piece_from_bandwidth(void **state)
{
	static const struct {
		uint64_t per_iv; /* bytes acknowledged in one interval: bw = x10 */
		uint32_t min_piece, piece;
	} cases[] = {
		{ 0, MIN_PIECE, START_PIECE },      /* unknown: the start value */
		{ 1, MIN_PIECE, MIN_PIECE },        /* 10 B/s */
		{ 100000, MIN_PIECE, MIN_PIECE },   /* 1 MB/s: 2000 B, clamped up */
		{ 250000, MIN_PIECE, 4 * KIB },     /* 20 Mbit/s: 5000 B */
		{ 250000, 16 * KIB, 16 * KIB },     /* ... with a 16 KiB floor */
		{ 1250000, MIN_PIECE, 16 * KIB },   /* 100 Mbit/s: 25000 B */
		{ 1250000, 64 * KIB, 64 * KIB },    /* ... on a 64 KiB-block store */
		{ 3276799, MIN_PIECE, 32 * KIB },   /* 2 ms is 65535.98 B */
		{ 3276800, MIN_PIECE, 64 * KIB },   /* 2 ms is exactly 64 KiB */
		{ 12500000, MIN_PIECE, 128 * KIB }, /* 1 Gbit/s: 250000 B */
		{ 52428800, MIN_PIECE, MAX_PIECE }, /* 2 ms is exactly 1 MiB */
		{ 125000000, MIN_PIECE, MAX_PIECE }, /* 10 Gbit/s: 2.5 MB, clamped down */
		{ 1ull << 34, MIN_PIECE, MAX_PIECE }, /* 170 GB/s */
	};
	uint64_t s = 0x0123456789abcdefull;
	struct rig r;
	(void)state;

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		rig_init(&r, cases[i].min_piece, MAX_PIECE);
		rsctl_rs_acked(&r.c, 0, cases[i].per_iv, r.now + 1);
		tick(&r, 0);
		assert_int_equal(rsctl_bw(&r.c), cases[i].per_iv * 10);
		if (r.c.piece != cases[i].piece)
			print_message("case %zu: piece %u, want %u\n", i, r.c.piece, cases[i].piece);
		assert_int_equal(r.c.piece, cases[i].piece);
	}

	/* any bandwidth: a power of two in (1 ms, 2 ms] of it unless clamped */
	for (int i = 0; i < 2000; i++) {
		uint64_t per_iv = rng_log(&s, 36), bw, t2; /* up to 680 GB/s */
		rig_init(&r, MIN_PIECE, MAX_PIECE);
		rsctl_fg_done(&r.c, 1, per_iv / 3); /* foreground bytes count too */
		rsctl_rs_acked(&r.c, 0, per_iv - per_iv / 3, r.now + 1);
		tick(&r, 0);
		bw = rsctl_bw(&r.c);
		assert_int_equal(bw, per_iv * 10);
		if (!bw)
			continue;
		t2 = bw * 2 / 1000; /* bytes per 2 ms */
		assert_true(is_pow2(r.c.piece));
		assert_true(r.c.piece == MIN_PIECE || r.c.piece <= t2);
		assert_true(r.c.piece == MAX_PIECE || r.c.piece > t2 / 2);
		assert_int_equal(r.c.piece, want_piece(bw, MIN_PIECE, MAX_PIECE));
	}

	/* the bandwidth is the best interval of the last second: a burst holds the
	 * piece up for ten intervals, then it follows the link down */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	rsctl_rs_acked(&r.c, 0, 12500000, r.now + 1);
	tick(&r, 0);
	assert_int_equal(r.c.piece, 128 * KIB);
	for (unsigned i = 1; i < RSCTL_BW_SLOTS; i++) {
		rsctl_rs_acked(&r.c, 0, 1250000, r.now + 1);
		tick(&r, 0);
		assert_int_equal(rsctl_bw(&r.c), 125000000);
		assert_int_equal(r.c.piece, 128 * KIB);
	}
	rsctl_rs_acked(&r.c, 0, 1250000, r.now + 1);
	tick(&r, 0);
	assert_int_equal(rsctl_bw(&r.c), 12500000);
	assert_int_equal(r.c.piece, 16 * KIB);

	/* round trips are of any request: a new piece size keeps what was learnt */
	rig_init(&r, MIN_PIECE, MAX_PIECE);
	acks(&r, 4, 3 * MS, START_PIECE);
	assert_int_equal(r.c.rtt_min[0], 3 * MS);
	rsctl_rs_acked(&r.c, 0, 12500000, r.now + 1);
	tick(&r, 0);
	assert_int_equal(r.c.piece, 128 * KIB);
	assert_int_equal(r.c.rtt_min[0], 3 * MS);
	acks(&r, 4, 1 * MS, 16 * KIB);
	assert_int_equal(r.c.rtt_min[0], 1 * MS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_property_random),
		cmocka_unit_test(test_c1_extremes),
		cmocka_unit_test(test_startup),
		cmocka_unit_test(test_quiet_baseline),
		cmocka_unit_test(test_cut_and_grow),
		cmocka_unit_test(test_idle_growth_to_cap),
		cmocka_unit_test(test_c2_returning_foreground),
		cmocka_unit_test(test_rebaseline),
		cmocka_unit_test(test_piece_from_bandwidth),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
