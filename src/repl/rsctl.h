/* The resync controller (docs/RESYNC.md): how many resync bytes may be in
 * flight and how large one resync request is, from what the link and the
 * foreground show. Pure: fed with measurements and timestamps, unit-tested.
 *
 * Inputs: the latency of every replicated foreground write (submission to
 * completion, so local disk + link + peer disk + queueing), the round trip of
 * every resync request, and the bytes the peer acknowledged.
 * Outputs: window (bytes in flight), piece (bytes per request), quiet (issue
 * nothing new: the foreground baseline is being measured).
 *
 * Start-up (until the foreground shows or a round trip exceeds twice the
 * minimum plus RSCTL_QUEUE_NS): the window grows by every byte acknowledged,
 * doubling per round trip, as TCP's slow start does.
 * Every RSCTL_INTERVAL_NS the owner calls rsctl_interval():
 *   foreground active (a completion in the interval, or requests in flight;
 *   without a completion the window holds):
 *     no baseline yet, or one older than RSCTL_REBASE_NS -> quiet: wait until
 *       nothing of the resync is in flight, then one interval measures the
 *       foreground's own latency: the baseline
 *     mean latency > RSCTL_HIGH x baseline -> window cut in proportion (>= x0.5)
 *     mean latency < RSCTL_LOW x baseline  -> window grows by an eighth
 *   foreground idle: window doubles per interval
 *   always: min_window <= window <= bandwidth x (2 x min round trip +
 *     RSCTL_QUEUE_NS) + 2 pieces (bandwidth: the most bytes acknowledged in an
 *     interval of the last second; round trip: the shortest of a resync
 *     request in the last five to ten seconds): an idle link is kept full,
 *     and what a returning foreground finds queued ahead of it drains in
 *     about RSCTL_QUEUE_NS.
 * Invariants:
 *   C1. min_window <= window <= RSCTL_MAX_WINDOW; min_piece <= piece <= max_piece.
 *   C2. A foreground that comes back after an idle spell finds at most
 *       min_window of resync queued ahead of it once the window is applied.
 *   C3. While quiet, the owner issues no new resync request (at least one
 *       is always allowed otherwise, so resync always progresses). */
#ifndef TANDEM_RSCTL_H
#define TANDEM_RSCTL_H

#include <stdbool.h>
#include <stdint.h>

#define RSCTL_INTERVAL_NS 100000000ull   /* 100 ms */
#define RSCTL_REBASE_NS 5000000000ull    /* re-measure the baseline every 5 s */
#define RSCTL_HIGH 1.15
#define RSCTL_LOW 1.05
#define RSCTL_MAX_WINDOW (64ull << 20)
#define RSCTL_QUEUE_NS 10000000ull       /* queue an idle-link resync may build: 10 ms */
#define RSCTL_BW_SLOTS 10u

enum rsctl_quiet { RSQ_OFF = 0, RSQ_DRAIN, RSQ_MEASURE };

struct rsctl {
	/* outputs */
	uint64_t window;
	uint32_t piece;
	bool quiet;
	/* limits */
	uint32_t min_piece, max_piece;
	uint64_t min_window;
	/* this interval */
	uint64_t fg_n, fg_lat_sum, delivered;
	/* filters */
	uint64_t bw[RSCTL_BW_SLOTS];
	unsigned bw_i;
	uint64_t rtt_min[2]; /* this and the previous 5 s bucket, 0 = none */
	uint64_t rtt_bucket_ns;
	bool startup;        /* growing by what is delivered, until round trips grow */
	double base_lat;     /* ns; 0 = none */
	uint64_t base_ns;    /* when it was measured */
	enum rsctl_quiet q;
	unsigned idle;       /* consecutive intervals without foreground */
	double last_ratio;   /* mean / baseline of the last active interval */
};

void rsctl_init(struct rsctl *c, uint32_t min_piece, uint32_t max_piece, uint64_t now);
void rsctl_fg_done(struct rsctl *c, uint64_t lat_ns, uint64_t bytes);
/* A resync request was acknowledged: its round trip (0: none to learn from,
 * e.g. a zero extent) and the bytes it delivered. */
void rsctl_rs_acked(struct rsctl *c, uint64_t rtt_ns, uint64_t bytes, uint64_t now);
/* fg_busy: replicated foreground requests are in flight now. */
void rsctl_interval(struct rsctl *c, uint64_t now, uint64_t rs_inflight, bool fg_busy);
uint64_t rsctl_bw(const struct rsctl *c); /* bytes/s, 0 = not known */

#endif
