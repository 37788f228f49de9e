/* A node's witness session: see wit_client.h. */
#include "wit_client.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../net/peer.h"
#include "wit_codec.h"

#define RETRY_MIN_MS 100u
#define RETRY_MAX_MS 1000u
#define MAX_VOLS CFG_MAX_VOLUMES

enum wc_stage { WC_HELLO = 0, WC_AUTH, WC_UP };

struct wconn {
	struct net_peer peer;
	struct wit_client *wc;   /* NULL once the client let go of it */
	struct wit_client *home; /* always: counts its connections (wit_client_idle) */
	enum wc_stage cst;     /* conn_set_stage only */
	uint8_t nonce_me[WIT_NONCE_LEN], nonce_peer[WIT_NONCE_LEN];
	bool have_hdr, dead;
	struct wit_msg m;
};

struct wvol {
	char name[WIT_NAME_LEN];
	const struct wit_vol_ops *ops;
	void *ctx;
};

struct wit_client {
	struct ev_loop *ev;
	const struct cfg *cfg;
	const char *self;
	const char *addr; /* what this node dials */
	struct sockaddr_storage sa;
	socklen_t salen;
	bool have_addr, shutting_down, up;
	struct net_dial dial;
	struct net_tls_ctx *tls; /* tls = on */
	struct ev_timer retry, tick;
	unsigned backoff_ms;
	uint64_t timeout_ns, last_rx_ns, cookie;
	/* Lease anchors (docs/WITNESS.md L2): when each PING was sent (clock
	 * CLOCK_BOOTTIME), by cookie; the newest anchor answered by a PONG on
	 * this session (0 none). */
	uint64_t ping_ck[8], ping_at[8];
	uint64_t anchor;
	struct wconn *c;
	unsigned nconns; /* connections not yet released */
	struct wvol vols[MAX_VOLS];
	unsigned nvols;
	char last_error[WIT_MAX_ERROR + 1];
};

struct wcout {
	struct net_tx tx;
	uint8_t buf[WIT_ENC_MAX];
};

static void schedule_dial(struct wit_client *wc);
static void send_ping(struct wit_client *wc);

/* The session stage's one writer (wit_client.h lists the transitions; a
 * gone session is `dead`). */
static void conn_set_stage(struct wconn *c, enum wc_stage to)
{
	static const bool legal[WC_UP + 1][WC_UP + 1] = {
		[WC_HELLO] = { [WC_AUTH] = true },
		[WC_AUTH] = { [WC_UP] = true },
	};

	if (!legal[c->cst][to]) {
		log_err("witness session: illegal stage change %d -> %d", (int)c->cst, (int)to);
		assert(!"illegal witness session transition");
		return;
	}
	c->cst = to;
}

static void wcout_done(struct net_tx *tx, int err)
{
	(void)err;
	free(container_of(tx, struct wcout, tx));
}

static bool send_raw(struct wconn *c, const uint8_t *buf, size_t len)
{
	struct wcout *o;

	if (c->dead || c->peer.net.closing || len > WIT_ENC_MAX)
		return false;
	o = malloc(sizeof(*o));
	if (!o)
		return false;
	memcpy(o->buf, buf, len);
	o->tx.iov[0].iov_base = o->buf;
	o->tx.iov[0].iov_len = len;
	o->tx.iovcnt = 1;
	o->tx.done = wcout_done;
	net_send(&c->peer.net, &o->tx);
	return true;
}

/* The session is gone (WC1): volumes hear it, a new dial follows. */
static void session_lost(struct wit_client *wc, const char *why)
{
	struct wconn *c = wc->c;

	if (!c)
		return;
	wc->c = NULL;
	c->wc = NULL;
	wc->anchor = 0; /* L2: an answer counts only on the session that gave it */
	if (!c->dead) {
		c->dead = true;
		net_abort(&c->peer.net);
	}
	if (wc->up) {
		wc->up = false;
		log_warn("witness %s: session lost: %s", wc->addr, why);
		for (unsigned i = 0; i < wc->nvols; i++)
			wc->vols[i].ops->session(wc->vols[i].ctx, false);
	} else {
		log_debug("witness %s: %s", wc->addr, why);
	}
	schedule_dial(wc);
}

static void handle(struct wconn *c, const uint8_t *body)
{
	struct wit_client *wc = c->wc;
	struct wit_msg *m = &c->m;
	uint8_t buf[WIT_ENC_MAX], mac[WIT_MAC_LEN];
	int diff = 0;

	if (wit_decode_body(body, m)) {
		session_lost(wc, "bad message from the witness");
		return;
	}
	if (m->type == WIT_ERROR) {
		char why[WIT_MAX_ERROR + 40];
		/* sent before the witness proved anything: never raw into a log */
		log_escape(wc->last_error, sizeof(wc->last_error), m->var, m->var_len);
		snprintf(why, sizeof(why), "the witness refused: %s", wc->last_error);
		log_warn("witness %s: %s", wc->addr, why);
		session_lost(wc, why);
		return;
	}
	switch (c->cst) {
	case WC_HELLO:
		if (m->type != WIT_HELLO || strcmp(m->u.hello.cluster, wc->cfg->cluster)) {
			session_lost(wc, "the witness answered out of step");
			return;
		}
		memcpy(c->nonce_peer, m->u.hello.nonce, WIT_NONCE_LEN);
		wit_mac(wc->cfg->secret, 'N', c->nonce_me, c->nonce_peer, wc->cfg->cluster,
			wc->self, mac);
		send_raw(c, buf, wit_enc_auth(buf, mac));
		conn_set_stage(c, WC_AUTH);
		return;
	case WC_AUTH:
		if (m->type != WIT_AUTH) {
			session_lost(wc, "the witness answered out of step");
			return;
		}
		wit_mac(wc->cfg->secret, 'W', c->nonce_me, c->nonce_peer, wc->cfg->cluster,
			wc->self, mac);
		for (unsigned i = 0; i < WIT_MAC_LEN; i++)
			diff |= mac[i] ^ m->u.auth.mac[i];
		if (diff) {
			log_err("witness %s: its proof of the cluster secret is wrong: not a "
				"witness of this cluster",
				wc->addr);
			session_lost(wc, "the witness failed authentication");
			return;
		}
		conn_set_stage(c, WC_UP);
		wc->up = true;
		wc->backoff_ms = RETRY_MIN_MS;
		wc->last_error[0] = 0;
		log_info("witness %s: session up", wc->addr);
		send_ping(wc); /* a lease anchor at once (L2) */
		for (unsigned i = 0; i < wc->nvols; i++)
			wc->vols[i].ops->session(wc->vols[i].ctx, true);
		return;
	case WC_UP: break;
	}
	switch (m->type) {
	case WIT_PONG: {
		unsigned k = (unsigned)(m->u.ping.cookie % 8);
		if (wc->ping_ck[k] == m->u.ping.cookie && wc->ping_at[k] > wc->anchor)
			wc->anchor = wc->ping_at[k];
		return;
	}
	case WIT_REPORT_ACK:
	case WIT_CLAIM_REPLY:
		for (unsigned i = 0; i < wc->nvols; i++)
			if (!strcmp(wc->vols[i].name, m->u.verd.volume)) {
				wc->vols[i].ops->verdict(wc->vols[i].ctx, m->type, &m->u.verd);
				return;
			}
		return;
	default: session_lost(wc, "unexpected message from the witness");
	}
}

static void on_rx(struct net_conn *nc)
{
	struct wconn *c = container_of(nc, struct wconn, peer.net);

	while (c->wc && !c->dead && !nc->closing) {
		size_t avail = net_rx_avail(nc);
		uint8_t body[sizeof(struct wit_hello) + WIT_MAX_ERROR];

		c->wc->last_rx_ns = ev_now(c->wc->ev);
		if (!c->have_hdr) {
			if (avail < sizeof(struct wit_hdr))
				return;
			if (wit_decode_hdr(net_rx_peek(nc), &c->m) || c->m.len > sizeof(body)) {
				session_lost(c->wc, "bad message header from the witness");
				return;
			}
			net_rx_consume(nc, sizeof(struct wit_hdr));
			c->have_hdr = true;
			avail -= sizeof(struct wit_hdr);
		}
		if (avail < c->m.len)
			return;
		memcpy(body, net_rx_peek(nc), c->m.len);
		net_rx_consume(nc, c->m.len);
		c->have_hdr = false;
		handle(c, body);
	}
}

static void on_closed(struct net_conn *nc)
{
	struct wconn *c = container_of(nc, struct wconn, peer.net);

	c->dead = true;
	if (c->wc) {
		const char *tls_err = net_conn_error(nc);
		if (tls_err) /* (net logged it, without saying it was the witness) */
			log_warn("witness %s: %s", c->wc->addr, tls_err);
		session_lost(c->wc, tls_err ? tls_err : "connection closed");
	}
	net_peer_closed(&c->peer);
}

static void wconn_release(struct net_peer *p)
{
	struct wconn *c = container_of(p, struct wconn, peer);
	c->home->nconns--;
	net_conn_destroy(&c->peer.net);
	free(c);
}

static void wconn_kill(struct net_peer *p, const char *why)
{
	(void)why;
	net_abort(&p->net);
}

static const struct net_conn_ops wconn_ops = { .on_rx = on_rx, .on_closed = on_closed };
static const struct net_peer_ops wconn_pops = { .release = wconn_release, .kill = wconn_kill };

static void dial_cb(struct net_dial *d, int fd)
{
	struct wit_client *wc = container_of(d, struct wit_client, dial);
	struct wconn *c;
	uint8_t buf[WIT_ENC_MAX];

	if (fd < 0 || wc->shutting_down || wc->c) {
		if (fd >= 0)
			close(fd);
		schedule_dial(wc);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || getrandom(c->nonce_me, WIT_NONCE_LEN, 0) != (ssize_t)WIT_NONCE_LEN) {
		free(c);
		close(fd);
		schedule_dial(wc);
		return;
	}
	if (net_peer_open_tls(&c->peer, wc->ev, NULL, fd, NULL, 16u * 1024u, &wconn_ops,
			      &wconn_pops, wc->tls, true)) {
		free(c);
		schedule_dial(wc);
		return;
	}
	c->wc = wc;
	c->home = wc;
	wc->nconns++;
	wc->c = c;
	wc->last_rx_ns = ev_now(wc->ev);
	send_raw(c, buf,
		 wit_enc_hello(buf, wc->cfg->cluster, wc->self, c->nonce_me, 0,
			       wc->cfg->witness_timeout_ms));
}

static void dial(struct ev_timer *t)
{
	struct wit_client *wc = container_of(t, struct wit_client, retry);

	if (wc->dial.busy || wc->c || wc->shutting_down)
		return;
	if (net_dial(&wc->dial, wc->ev, (struct sockaddr *)&wc->sa, wc->salen, dial_cb))
		schedule_dial(wc);
}

static void schedule_dial(struct wit_client *wc)
{
	if (wc->shutting_down || wc->dial.busy || wc->c)
		return;
	ev_timer_arm(wc->ev, &wc->retry, (uint64_t)wc->backoff_ms * 1000000ull);
	wc->backoff_ms = MIN(wc->backoff_ms * 2, RETRY_MAX_MS);
}

static void send_ping(struct wit_client *wc)
{
	uint8_t buf[WIT_ENC_MAX];
	uint64_t ck = ++wc->cookie;

	wc->ping_ck[ck % 8] = ck;
	wc->ping_at[ck % 8] = ev_boot_ns(wc->ev); /* L2: anchored when sent */
	send_raw(wc->c, buf, wit_enc_ping(buf, WIT_PING, ck));
}

static void tick(struct ev_timer *t)
{
	struct wit_client *wc = container_of(t, struct wit_client, tick);
	uint64_t now = ev_now(wc->ev);

	if (wc->shutting_down)
		return;
	if (wc->c) {
		if (now - wc->last_rx_ns >= wc->timeout_ns)
			session_lost(wc, "the witness is silent");
		else if (wc->c->cst == WC_UP)
			send_ping(wc);
	}
	ev_timer_arm(wc->ev, &wc->tick, wc->timeout_ns / 4);
}

int wit_client_new(struct ev_loop *ev, const struct cfg *cfg, unsigned self,
		   struct wit_client **out)
{
	struct wit_client *wc = calloc(1, sizeof(*wc));

	if (!wc)
		return -ENOMEM;
	wc->ev = ev;
	wc->cfg = cfg;
	wc->self = cfg->nodes[self].name;
	wc->addr = cfg->nodes[self].witness[0] ? cfg->nodes[self].witness : cfg->witness;
	if (parse_addr(wc->addr, &wc->sa, &wc->salen) < 0) {
		free(wc);
		return -EINVAL;
	}
	wc->timeout_ns = (uint64_t)cfg->witness_timeout_ms * 1000000ull;
	wc->backoff_ms = RETRY_MIN_MS;
	wc->dial.fd = -1;
	wc->retry.fn = dial;
	wc->tick.fn = tick;
	*out = wc;
	return 0;
}

int wit_client_attach(struct wit_client *wc, const char *volume, const struct wit_vol_ops *ops,
		      void *ctx)
{
	if (wc->nvols == MAX_VOLS)
		return -ENOSPC;
	snprintf(wc->vols[wc->nvols].name, WIT_NAME_LEN, "%s", volume);
	wc->vols[wc->nvols].ops = ops;
	wc->vols[wc->nvols].ctx = ctx;
	return (int)wc->nvols++;
}

void wit_client_use_tls(struct wit_client *wc, struct net_tls_ctx *tls)
{
	wc->tls = tls;
}

void wit_client_start(struct wit_client *wc)
{
	ev_timer_arm(wc->ev, &wc->retry, 0);
	ev_timer_arm(wc->ev, &wc->tick, wc->timeout_ns / 4);
}

bool wit_client_up(const struct wit_client *wc)
{
	return wc && wc->up;
}

uint64_t wit_client_anchor(const struct wit_client *wc)
{
	return wc && wc->up ? wc->anchor : 0;
}

void wit_client_ping(struct wit_client *wc)
{
	if (wc && wc->up && wc->c)
		send_ping(wc);
}

bool wit_client_send(struct wit_client *wc, uint16_t type, const struct wit_vol_msg *m)
{
	uint8_t buf[WIT_ENC_MAX];

	if (!wc->up || !wc->c)
		return false;
	return send_raw(wc->c, buf, wit_enc_vol(buf, type, m));
}

void wit_client_shutdown(struct wit_client *wc)
{
	if (!wc)
		return;
	wc->shutting_down = true;
	ev_timer_cancel(wc->ev, &wc->retry);
	ev_timer_cancel(wc->ev, &wc->tick);
	if (wc->dial.busy)
		net_dial_cancel(&wc->dial);
	if (wc->c) {
		struct wconn *c = wc->c;
		wc->c = NULL;
		c->wc = NULL;
		c->dead = true;
		net_abort(&c->peer.net);
	}
	wc->up = false;
}

bool wit_client_idle(const struct wit_client *wc)
{
	return !wc || (wc->nconns == 0 && !wc->dial.busy);
}

void wit_client_free(struct wit_client *wc)
{
	if (!wc)
		return;
	if (wc->dial.busy)
		net_dial_close(&wc->dial);
	free(wc);
}
