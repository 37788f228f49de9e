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
 * Every RSCTL_INTERVAL_NS the owner calls rsctl_interval():
 *   foreground active (>= RSCTL_MIN_FG completions in the interval):
 *     no baseline yet, or one older than RSCTL_REBASE_NS -> quiet: wait until
 *       nothing of the resync is in flight, then one interval measures the
 *       foreground's own latency: the baseline
 *     mean latency > RSCTL_HIGH x baseline -> window cut in proportion (>= x0.5)
 *     mean latency < RSCTL_LOW x baseline  -> window grows by an eighth
 *   foreground idle: window grows by half per interval
 *   always: min_window <= window <= 2 x bandwidth x min round trip + piece
 *     (bandwidth: the most bytes acknowledged in an interval of the last
 *     second; round trip: the shortest of a request of the current piece
 *     size in the last ten seconds), so an idle link is kept full without
 *     a standing queue that a returning foreground would wait behind.
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
#define RSCTL_MIN_FG 4u
#define RSCTL_HIGH 1.15
#define RSCTL_LOW 1.05
#define RSCTL_MAX_WINDOW (64ull << 20)
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
	uint32_t rtt_piece;  /* the piece size the round trips were measured with */
	double base_lat;     /* ns; 0 = none */
	uint64_t base_ns;    /* when it was measured */
	enum rsctl_quiet q;
	unsigned idle;       /* consecutive intervals without foreground */
	double last_ratio;   /* mean / baseline of the last active interval */
};

void rsctl_init(struct rsctl *c, uint32_t min_piece, uint32_t max_piece, uint64_t now);
void rsctl_fg_done(struct rsctl *c, uint64_t lat_ns, uint64_t bytes);
void rsctl_rs_acked(struct rsctl *c, uint64_t rtt_ns, uint64_t bytes, uint32_t piece_len,
		    uint64_t now);
void rsctl_interval(struct rsctl *c, uint64_t now, uint64_t rs_inflight);
uint64_t rsctl_bw(const struct rsctl *c); /* bytes/s, 0 = not known */

#endif
