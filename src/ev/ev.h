/* THE event loop: one io_uring per process carries socket I/O, disk I/O and
 * signal reads; timers are kept here and become the wait timeout.
 * Owns: the ring, the timer list, the deferred-work list.
 * Never: blocks in a callback, or calls a callback from inside ev_sqe() (a
 * submission never completes synchronously from the caller's point of view). */
#ifndef TANDEM_EV_H
#define TANDEM_EV_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

struct ev_loop;

/* One outstanding io_uring operation. Embed it in the owner and recover the
 * owner with container_of() in the callback. res is the CQE result (>= 0 or
 * -errno). An op must not be resubmitted before its callback ran (except
 * multishot ops, which stay armed while flags has IORING_CQE_F_MORE). */
struct ev_op {
	void (*cb)(struct ev_op *op, int res, uint32_t flags);
};

/* Work run once at the end of the current loop pass, before the loop sleeps:
 * this is where sockets flush the replies queued during the pass. */
struct ev_deferred {
	void (*fn)(struct ev_deferred *d);
	struct ev_deferred *next;
	bool queued;
};

/* A one-shot timer. Re-arming an armed timer moves it. */
struct ev_timer {
	void (*fn)(struct ev_timer *t);
	uint64_t deadline_ns;
	struct ev_timer *next;
	bool armed;
};

struct ev_loop *ev_new(unsigned entries);
void ev_free(struct ev_loop *ev); /* NULL is a no-op */

/* Returns an SQE whose user_data is op; never NULL (submits to make room). */
struct io_uring_sqe *ev_sqe(struct ev_loop *ev, struct ev_op *op);
void ev_defer(struct ev_loop *ev, struct ev_deferred *d);
/* Removes d from the deferred list if queued; call before freeing its owner. */
void ev_undefer(struct ev_loop *ev, struct ev_deferred *d);
void ev_timer_arm(struct ev_loop *ev, struct ev_timer *t, uint64_t delay_ns);
void ev_timer_cancel(struct ev_loop *ev, struct ev_timer *t);

/* Monotonic time sampled when the current pass began. */
uint64_t ev_now(const struct ev_loop *ev);

/* CLOCK_BOOTTIME read now (it runs on while the machine is suspended:
 * leases), or the test's clock (ev_set_clock). */
uint64_t ev_boot_ns(const struct ev_loop *ev);

/* Tests: the loop's time comes from clock(arg) instead of the monotonic
 * clock (a virtual clock that the test steps; timers then fire only when a
 * pass sees their deadline reached, and a pass never sleeps for a timer).
 * ev_next_deadline: the earliest armed timer's deadline, UINT64_MAX if none. */
void ev_set_clock(struct ev_loop *ev, uint64_t (*clock)(void *arg), void *arg);
uint64_t ev_next_deadline(const struct ev_loop *ev);

/* Poll up to ns for completions after a busy pass before sleeping; 0: never. */
void ev_set_busy_poll(struct ev_loop *ev, uint64_t ns);

int ev_run(struct ev_loop *ev); /* until ev_stop(); returns 0 or -errno */
void ev_stop(struct ev_loop *ev);
/* Runs one pass, waiting at most timeout_ns (0: poll). For tests. */
int ev_run_once(struct ev_loop *ev, uint64_t timeout_ns);

#endif
