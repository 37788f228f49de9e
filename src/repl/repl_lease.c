/* The lease of a primary (docs/WITNESS.md, rules L1-L6): a primary serves
 * reads and writes only while an answer from its peer or from the witness
 * says that no other node can have been made primary. Each answer renews
 * the lease from the moment its request was SENT, for lease_dur_ns, on
 * CLOCK_BOOTTIME (it keeps running while the machine is suspended).
 *
 * Sources (L2):
 *   peer:    a PONG on the connection in use, past its handshake, from a
 *            peer whose last STATE said secondary. That peer claims only
 *            once peer-timeout passed since this node's last message
 *            (peer_lease_gone), however the connection ended: a close may
 *            be seen at one end only (a reset on the way). The PING it
 *            answered was received, so sent, before then. Sooner only when
 *            a connect to this node's address is refused: no daemon
 *            listens, so none serves (peer_probe).
 *   witness: a PONG on the session on which the witness named this node
 *            primary (w_named). The witness grants the volume to another
 *            node only once this node's session was silent for
 *            witness-timeout (W3.2), after the PING it answered.
 * L1: lease_dur_ns = 3/4 of the shorter of peer-timeout and witness-timeout:
 * the other side waits at least 4/3 of the lease after the anchor, which
 * covers clock rates differing by up to 14 %.
 * Invariants:
 *   LE1. lease_ok() reads the clock itself (never the loop's pass time): a
 *        node resumed after a pause sees its lease gone before it serves.
 *   LE2. Without a witness configured no lease applies (no automatic
 *        failover: an operator decides who is primary).
 *   LE3. An anchor counts only on the connection or session it came from.
 *   LE4. A secondary sends no claim (and promotes on no grant) while its
 *        lost peer may still hold a lease from it: peer-timeout after the
 *        peer's last message, unless a connect to it was refused since. */
#include "repl_int.h"

#include <errno.h>
#include <unistd.h>

#include "../common/log.h"

static void probe_done(struct net_dial *d, int fd);

void lease_init(struct repl *r)
{
	uint64_t t = MIN((uint64_t)r->cfg->peer_timeout_ms, (uint64_t)r->cfg->witness_timeout_ms);

	r->lease_dur_ns = t * 1000000ull / 4 * 3;
}

bool peer_connected(const struct repl *r)
{
	return r->conn && r->conn->hs_stage == ST_RUN && conn_usable(r->conn);
}

void peer_ping(struct repl *r, struct rconn *c, uint64_t cookie)
{
	uint8_t b[32];

	r->ping_ck[cookie % 8] = cookie;
	r->ping_at[cookie % 8] = ev_boot_ns(r->ev);
	send_small(c, b, repl_enc_ping(b, REPL_PING, cookie));
}

/* The peer answered a PING: the lease runs from when that was sent, if
 * the peer is a secondary on the connection in use (L2, LE3). */
void lease_pong(struct repl *r, struct rconn *c, uint64_t cookie)
{
	unsigned k = (unsigned)(cookie % 8);

	if (c != r->conn || !peer_connected(r) || !r->have_peer ||
	    r->peer.role == REPL_ROLE_PRIMARY || r->ping_ck[k] != cookie)
		return;
	if (r->ping_at[k] + r->lease_dur_ns > r->lease_peer_end)
		r->lease_peer_end = r->ping_at[k] + r->lease_dur_ns;
}

bool lease_ok(const struct repl *r)
{
	uint64_t now, a;

	if (!r->wc)
		return true; /* LE2 */
	now = ev_boot_ns(r->ev); /* LE1 */
	if (peer_connected(r) && r->have_peer && r->peer.role != REPL_ROLE_PRIMARY &&
	    now < r->lease_peer_end)
		return true;
	a = wit_client_anchor(r->wc);
	return r->w_up && r->w_named && a && now < a + r->lease_dur_ns;
}

bool peer_lease_gone(const struct repl *r)
{
	return peer_connected(r) || r->peer_gone || !r->peer_rx_ns ||
	       ev_now(r->ev) - r->peer_rx_ns >= r->timeout_ns;
}

/* A daemon that is being killed may still accept for a moment: the kernel
 * tears its listener down after the sockets of its connections (io_uring
 * holds both until the ring goes). A connect that succeeds is tried again a
 * few times before it counts as "a daemon listens". */
#define PROBE_TRIES 4
#define PROBE_GAP_NS (100ull * 1000000ull)

static void probe_start(struct repl *r)
{
	int rc;

	r->probe_t0 = ev_now(r->ev);
	r->probe_tries++;
	rc = net_dial(&r->probe, r->ev, (struct sockaddr *)&r->dial_sa, r->dial_salen, probe_done);
	if (rc == -ECONNREFUSED)
		probe_done(&r->probe, rc);
}

static void probe_again(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, probe_again);

	if (!r->conn && !r->shutting_down && !r->probe.busy)
		probe_start(r);
}

static void probe_done(struct net_dial *d, int fd)
{
	struct repl *r = container_of(d, struct repl, probe);

	if (fd >= 0) {
		close(fd); /* a daemon listens: the peer alive, or dying */
		if (r->probe_tries < PROBE_TRIES && !r->conn && !r->shutting_down)
			ev_timer_arm(r->ev, &r->probe_again, PROBE_GAP_NS);
		return;
	}
	if (fd != -ECONNREFUSED || r->conn || r->shutting_down)
		return; /* no answer, or a new connection: says nothing */
	r->peer_gone = true;
	r->peer_gone_claim = true;
	log_info("volume %s: %s refuses connections: its daemon is gone", r->v->name, peer_name(r));
	quorum_kick(r);
}

/* LE4: dials the peer's replication address. Only a refusal counts; a
 * connect that succeeds PROBE_TRIES times (a daemon listens: the peer,
 * restarted or never gone) or that hangs (a cut link) leaves the wait of
 * peer-timeout. */
void peer_probe(struct repl *r)
{
	r->peer_gone = false;
	r->peer_gone_claim = false;
	if (r->probe.busy || r->shutting_down || !r->wc)
		return;
	ev_timer_cancel(r->ev, &r->probe_again);
	r->probe_again.fn = probe_again;
	r->probe_tries = 0;
	probe_start(r);
}

void lease_tick(struct repl *r)
{
	bool held = r->v->role == VOL_PRIMARY && lease_ok(r);

	if (r->v->role != VOL_PRIMARY) {
		r->lease_shown = false;
		return;
	}
	if (held == r->lease_shown)
		return;
	r->lease_shown = held;
	vol_event(r->v, "lease", held ? "false" : "true", held ? "true" : "false", NULL);
	if (held)
		log_info("volume %s: lease held: serving", r->v->name);
	else
		log_warn("volume %s: lease lost (no answer from %s or the witness within %.1f s): "
			 "not serving until it is back",
			 r->v->name, peer_name(r), (double)r->lease_dur_ns / 1e9);
}
