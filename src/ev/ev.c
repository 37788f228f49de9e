/* The single event loop. A pass is:
 *   1. run deferred work (replies flushed, batched submissions prepared),
 *   2. submit every prepared SQE and sleep until a completion or the next timer,
 *   3. dispatch completions, then expired timers.
 * Ordering rule: work deferred during step 3 runs in step 1 of the next pass,
 * before the loop sleeps again, so nothing queued is left waiting on a sleep. */
#include "ev.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"

struct ev_loop {
	struct io_uring ring;
	struct ev_deferred *deferred; /* LIFO; order inside a pass does not matter */
	struct ev_timer *timers;      /* sorted by deadline */
	uint64_t now;
	uint64_t (*clock)(void *arg); /* ev_set_clock: a test's virtual clock */
	void *clock_arg;
	uint64_t spin_ns;   /* how long to poll before sleeping after a busy pass */
	unsigned last_n;    /* completions handled in the previous pass */
	bool stop;
};

/* The loop's clock: monotonic time, or the test's (ev_set_clock). */
static uint64_t clk(const struct ev_loop *ev)
{
	return ev->clock ? ev->clock(ev->clock_arg) : now_ns();
}

struct ev_loop *ev_new(unsigned entries)
{
	struct ev_loop *ev = calloc(1, sizeof(*ev));
	struct io_uring_params p;
	int r;

	if (!ev)
		return NULL;
	/* One thread owns the ring and reaps only when it waits, so completions'
	 * kernel-side work can be deferred to that moment (fewer interrupts of
	 * the loop); older kernels refuse the flags and get the plain ring. */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	p.cq_entries = entries * 4;
	r = io_uring_queue_init_params(entries, &ev->ring, &p);
	if (r == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = entries * 4;
		r = io_uring_queue_init_params(entries, &ev->ring, &p);
	}
	if (r < 0) {
		log_err("io_uring setup failed: %s", strerror(-r));
		free(ev);
		errno = -r;
		return NULL;
	}
	ev->now = now_ns();
	return ev;
}

void ev_free(struct ev_loop *ev)
{
	if (!ev)
		return;
	io_uring_queue_exit(&ev->ring);
	free(ev);
}

struct io_uring_sqe *ev_sqe(struct ev_loop *ev, struct ev_op *op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ev->ring);

	while (!sqe) {
		io_uring_submit(&ev->ring);
		sqe = io_uring_get_sqe(&ev->ring);
	}
	io_uring_sqe_set_data(sqe, op);
	return sqe;
}

void ev_defer(struct ev_loop *ev, struct ev_deferred *d)
{
	if (d->queued)
		return;
	d->queued = true;
	d->next = ev->deferred;
	ev->deferred = d;
}

void ev_undefer(struct ev_loop *ev, struct ev_deferred *d)
{
	if (!d->queued)
		return;
	for (struct ev_deferred **pp = &ev->deferred; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	d->queued = false;
}

void ev_timer_cancel(struct ev_loop *ev, struct ev_timer *t)
{
	if (!t->armed)
		return;
	for (struct ev_timer **pp = &ev->timers; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	t->armed = false;
}

void ev_timer_arm(struct ev_loop *ev, struct ev_timer *t, uint64_t delay_ns)
{
	struct ev_timer **pp;

	ev_timer_cancel(ev, t);
	t->deadline_ns = clk(ev) + delay_ns;
	for (pp = &ev->timers; *pp && (*pp)->deadline_ns <= t->deadline_ns; pp = &(*pp)->next)
		;
	t->next = *pp;
	*pp = t;
	t->armed = true;
}

uint64_t ev_now(const struct ev_loop *ev)
{
	return ev->now;
}

void ev_set_clock(struct ev_loop *ev, uint64_t (*clock)(void *arg), void *arg)
{
	ev->clock = clock;
	ev->clock_arg = arg;
	ev->now = clk(ev);
}

uint64_t ev_boot_ns(const struct ev_loop *ev)
{
	return ev->clock ? ev->clock(ev->clock_arg) : now_boot_ns();
}

uint64_t ev_next_deadline(const struct ev_loop *ev)
{
	return ev->timers ? ev->timers->deadline_ns : UINT64_MAX;
}

void ev_set_busy_poll(struct ev_loop *ev, uint64_t ns)
{
	ev->spin_ns = ns;
}

void ev_stop(struct ev_loop *ev)
{
	ev->stop = true;
}

static void run_deferred(struct ev_loop *ev)
{
	/* Deferred work may defer more work; keep going until the list is empty. */
	while (ev->deferred) {
		struct ev_deferred *d = ev->deferred;
		ev->deferred = d->next;
		d->queued = false;
		d->fn(d);
	}
}

static void run_timers(struct ev_loop *ev)
{
	while (ev->timers && ev->timers->deadline_ns <= ev->now) {
		struct ev_timer *t = ev->timers;
		ev->timers = t->next;
		t->armed = false;
		t->fn(t);
	}
}

int ev_run_once(struct ev_loop *ev, uint64_t timeout_ns)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;
	unsigned head, n = 0;
	int r;

	run_deferred(ev);
	/* Busy polling: after a pass that had work, look for completions for a
	 * short while before sleeping. On virtual machines an idle vCPU halts and
	 * waking it costs tens of microseconds, which is most of the round trip
	 * of a queue-depth-1 client; polling keeps the core awake while requests
	 * flow and sleeps once they stop (at most spin_ns per burst). Timers
	 * bound the poll like they bound the sleep. */
	if (ev->spin_ns && ev->last_n && timeout_ns) {
		uint64_t t0 = now_ns(), spin = ev->spin_ns;
		if (ev->timers)
			spin = MIN(spin, ev->timers->deadline_ns > t0 ? ev->timers->deadline_ns - t0 : 0);
		io_uring_submit(&ev->ring);
		/* sched_yield: the kernel's io_uring workers (buffered writes) may
		 * want this core; polling must not starve what it waits for. */
		while (!io_uring_cq_ready(&ev->ring) && now_ns() - t0 < spin) {
			io_uring_get_events(&ev->ring);
			sched_yield();
		}
	}
	if (ev->timers && !ev->clock) { /* a virtual clock's owner steps it */
		uint64_t now = now_ns();
		uint64_t until = ev->timers->deadline_ns > now ? ev->timers->deadline_ns - now : 0;
		if (until < timeout_ns)
			timeout_ns = until;
	}
	ts.tv_sec = (long long)(timeout_ns / 1000000000ull);
	ts.tv_nsec = (long long)(timeout_ns % 1000000000ull);
	/* Without a deadline, wait plainly: a timed wait arms a kernel timer on
	 * every pass, which shows on the latency of queue-depth-1 clients. */
	if (timeout_ns == UINT64_MAX)
		r = io_uring_submit_and_wait(&ev->ring, 1);
	else
		r = io_uring_submit_and_wait_timeout(&ev->ring, &cqe, 1, &ts, NULL);
	if (r < 0 && r != -ETIME && r != -EINTR && r != -EAGAIN && r != -EBUSY)
		return r;
	ev->now = clk(ev);
	/* Callbacks may queue new SQEs but never reap CQEs, so walking the CQ
	 * ring here and advancing once at the end is safe. */
	io_uring_for_each_cqe(&ev->ring, head, cqe)
	{
		struct ev_op *op = io_uring_cqe_get_data(cqe);
		n++;
		if (op)
			op->cb(op, cqe->res, cqe->flags);
	}
	io_uring_cq_advance(&ev->ring, n);
	ev->last_n = n;
	run_timers(ev);
	return 0;
}

int ev_run(struct ev_loop *ev)
{
	ev->stop = false;
	while (!ev->stop) {
		int r = ev_run_once(ev, UINT64_MAX);
		if (r < 0)
			return r;
	}
	run_deferred(ev);
	io_uring_submit(&ev->ring);
	return 0;
}
