/* The resync controller: see rsctl.h. */
#include "rsctl.h"

#include "../common/util.h"

#define START_WINDOW (256u << 10)
#define START_PIECE (64u << 10)
#define PIECE_TIME_NS 2000000ull /* one request takes about this long on the wire */

static uint64_t bw_max(const struct rsctl *c)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < RSCTL_BW_SLOTS; i++)
		m = MAX(m, c->bw[i]);
	return m;
}

uint64_t rsctl_bw(const struct rsctl *c)
{
	return bw_max(c) * (1000000000ull / RSCTL_INTERVAL_NS);
}

static uint64_t rtt_min(const struct rsctl *c)
{
	if (!c->rtt_min[0])
		return c->rtt_min[1];
	if (!c->rtt_min[1])
		return c->rtt_min[0];
	return MIN(c->rtt_min[0], c->rtt_min[1]);
}

void rsctl_init(struct rsctl *c, uint32_t min_piece, uint32_t max_piece, uint64_t now)
{
	*c = (struct rsctl){ 0 };
	c->min_piece = min_piece;
	c->max_piece = MAX(max_piece, min_piece);
	c->min_window = min_piece;
	c->piece = MIN(MAX(START_PIECE, min_piece), c->max_piece);
	c->window = MAX((uint64_t)START_WINDOW, c->min_window);
	c->rtt_bucket_ns = now;
	c->startup = true;
}

void rsctl_fg_done(struct rsctl *c, uint64_t lat_ns, uint64_t bytes)
{
	c->fg_n++;
	c->fg_lat_sum += lat_ns;
	c->delivered += bytes;
}

static uint32_t pow2_floor(uint64_t x)
{
	uint32_t p = 1;
	while ((uint64_t)p * 2 <= x && p < (1u << 30))
		p *= 2;
	return p;
}

void rsctl_rs_acked(struct rsctl *c, uint64_t rtt_ns, uint64_t bytes, uint64_t now)
{
	uint64_t m;

	c->delivered += bytes;
	if (now - c->rtt_bucket_ns >= 2 * RSCTL_REBASE_NS) {
		c->rtt_min[0] = c->rtt_min[1] = 0; /* both buckets are too old */
		c->rtt_bucket_ns = now;
	} else if (now - c->rtt_bucket_ns >= RSCTL_REBASE_NS) {
		c->rtt_min[1] = c->rtt_min[0];
		c->rtt_min[0] = 0;
		c->rtt_bucket_ns = now;
	}
	if (rtt_ns == 0)
		return;
	if (!c->rtt_min[0] || rtt_ns < c->rtt_min[0])
		c->rtt_min[0] = rtt_ns;
	/* Start-up: the window grows by what was delivered (doubling per round
	 * trip) until round trips grow: a queue is forming somewhere. */
	m = rtt_min(c);
	if (c->startup) {
		if (rtt_ns > 2 * m + RSCTL_QUEUE_NS)
			c->startup = false;
		else
			c->window = MIN(c->window + bytes, (uint64_t)RSCTL_MAX_WINDOW);
		/* requests grow with the window until the first interval sizes them */
		c->piece = MAX(c->piece, MIN(pow2_floor(c->window / 8), c->max_piece));
	}
}


static void size_piece(struct rsctl *c)
{
	uint64_t bw = rsctl_bw(c);
	uint32_t p;

	if (!bw)
		return;
	p = pow2_floor(bw * PIECE_TIME_NS / 1000000000ull);
	c->piece = MIN(MAX(p, c->min_piece), c->max_piece);
}

/* Twice the bandwidth-delay product (with the round trip of the smallest
 * requests) plus RSCTL_QUEUE_NS of the bandwidth and two requests: keeps the
 * link and both disks busy, while what a returning foreground finds queued
 * ahead of it drains within about RSCTL_QUEUE_NS. Without measurements yet,
 * the window holds. */
static uint64_t window_cap(const struct rsctl *c)
{
	uint64_t bw = rsctl_bw(c), rtt = rtt_min(c), cap;

	if (!bw || !rtt)
		return MAX(c->window, (uint64_t)START_WINDOW);
	cap = bw * (2 * rtt + RSCTL_QUEUE_NS) / 1000000000ull + 2ull * c->piece;
	return MIN(cap, RSCTL_MAX_WINDOW);
}

void rsctl_interval(struct rsctl *c, uint64_t now, uint64_t rs_inflight, bool fg_busy)
{
	bool active = c->fg_n > 0 || fg_busy;
	bool sampled = c->fg_n > 0;
	double mean = sampled ? (double)c->fg_lat_sum / (double)c->fg_n : 0;
	uint64_t cap;

	c->bw[c->bw_i] = c->delivered;
	c->bw_i = (c->bw_i + 1) % RSCTL_BW_SLOTS;
	c->delivered = 0;
	c->fg_n = 0;
	c->fg_lat_sum = 0;
	size_piece(c);
	cap = window_cap(c);

	if (!active) {
		c->q = RSQ_OFF;
		c->idle++;
		if (!c->startup)
			c->window = MIN(MAX(2 * c->window, c->min_window), cap);
		c->window = MIN(MAX(c->window, c->min_window), RSCTL_MAX_WINDOW);
		goto out;
	}
	c->startup = false;
	if (c->idle >= 3) {
		/* C2: the foreground is back; start from the bottom and learn. */
		c->window = c->min_window;
		c->base_lat = 0;
	}
	c->idle = 0;
	switch (c->q) {
	case RSQ_OFF:
		if (!c->base_lat || now - c->base_ns >= RSCTL_REBASE_NS) {
			c->q = rs_inflight ? RSQ_DRAIN : RSQ_MEASURE;
			goto out;
		}
		break;
	case RSQ_DRAIN:
		if (!rs_inflight)
			c->q = RSQ_MEASURE;
		goto out;
	case RSQ_MEASURE:
		/* the interval that just ended ran with nothing of the resync in flight */
		if (!sampled)
			goto out; /* no completion in it: measure the next one */
		c->base_lat = mean;
		c->base_ns = now;
		c->q = RSQ_OFF;
		goto out;
	}
	if (!sampled) {
		/* requests in flight, none completed: nothing to judge by */
		c->window = MIN(MAX(c->window, c->min_window), cap);
		goto out;
	}
	c->last_ratio = mean / c->base_lat;
	if (c->last_ratio > RSCTL_HIGH) {
		double f = RSCTL_LOW / c->last_ratio;
		c->window = (uint64_t)((double)c->window * MAX(f, 0.5));
	} else if (c->last_ratio < RSCTL_LOW) {
		c->window += MAX((uint64_t)c->min_piece, c->window / 8);
	}
	c->window = MIN(MAX(c->window, c->min_window), cap);
out:
	if (!c->startup)
		c->window = MIN(MAX(c->window, c->min_window), cap); /* C1, every path */
	c->quiet = c->q != RSQ_OFF;
}
