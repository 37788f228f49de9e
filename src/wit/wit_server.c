/* The witness server: see wit_server.h. One event loop; decisions are made
 * one at a time in the order messages arrive (W4). */
#include "wit_server.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/list.h"
#include "../common/log.h"
#include "../common/util.h"
#include "../net/peer.h"
#include "../net/tls.h"
#include "wit_codec.h"
#include "wit_rec.h"

#define TICK_NS (100ull * 1000000ull)
#define RX_BUF (16u * 1024u)

/* One cluster served. Its own witness-timeout (timeout_ns) rules its
 * sessions' silence, its claims' wait and its start grace: clusters with
 * other timeouts share nothing but the listener. */
struct wit_cluster {
	const struct cfg *cfg;
	char path[CFG_PATH_MAX + 2 * CFG_NAME_MAX];
	uint64_t timeout_ns;
	/* no state file and no --init: node sessions are refused (WS4) */
	bool refused;
	struct wit_rec recs[CFG_MAX_VOLUMES]; /* by cfg volume index */
	/* per cfg node: when a message of its session last arrived (0: none
	 * since this witness started). Kept after the session closes: a close
	 * seen here alone (a reset on the way) ends no lease (L2). */
	uint64_t node_rx_ns[CFG_MAX_NODES];
};

struct wit_pending {
	bool on;
	struct wit_vol_msg m;
	uint64_t t0;
};

enum ws_state { WS_HELLO = 0, WS_AUTH, WS_UP };

struct wsess {
	struct net_peer peer;
	struct wit_server *ws;
	struct wit_cluster *cl;
	int node;          /* cfg node index; -1 for an admin session */
	enum ws_state sst; /* sess_set_state only */
	uint8_t nonce_me[WIT_NONCE_LEN], nonce_peer[WIT_NONCE_LEN];
	char name[WIT_NAME_LEN];
	uint64_t last_rx_ns;
	bool have_hdr, dead;
	struct wit_msg m;
	struct wit_pending pend[CFG_MAX_VOLUMES];
	struct list link; /* ws->sessions */
};

struct wit_server {
	struct ev_loop *ev;
	struct wit_cluster *cls;
	unsigned ncl;
	struct net_srv srv;
	struct net_tls_ctx *tls; /* the clusters' tls = on */
	uint64_t start_ns;
	struct ev_timer tick;
	struct list sessions;
	bool shutting_down;
};

struct wout {
	struct net_tx tx;
	size_t len;
	uint8_t buf[];
};

static void evaluate(struct wit_server *ws);

/* The session state's one writer (wit_server.h lists the transitions; a
 * closed session is `dead`, not a state). */
static void sess_set_state(struct wsess *s, enum ws_state to)
{
	static const bool legal[WS_UP + 1][WS_UP + 1] = {
		[WS_HELLO] = { [WS_AUTH] = true },
		[WS_AUTH] = { [WS_UP] = true },
	};

	if (!legal[s->sst][to]) {
		log_err("witness: session of %s: illegal state change %d -> %d", s->name,
			(int)s->sst, (int)to);
		assert(!"illegal witness session transition");
		return;
	}
	s->sst = to;
}

static void wout_done(struct net_tx *tx, int err)
{
	(void)err;
	free(container_of(tx, struct wout, tx));
}

static void send_buf(struct wsess *s, const uint8_t *buf, size_t len)
{
	struct wout *o;

	if (s->dead || s->peer.net.closing)
		return;
	o = malloc(sizeof(*o) + len);
	if (!o) {
		s->dead = true;
		net_abort(&s->peer.net);
		return;
	}
	memcpy(o->buf, buf, len);
	o->len = len;
	o->tx.iov[0].iov_base = o->buf;
	o->tx.iov[0].iov_len = len;
	o->tx.iovcnt = 1;
	o->tx.done = wout_done;
	net_send(&s->peer.net, &o->tx);
}

/* Tells the client why and closes. */
static void refuse(struct wsess *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(struct wsess *s, const char *fmt, ...)
{
	char text[WIT_MAX_ERROR], logged[4 * WIT_MAX_ERROR], name[4 * WIT_NAME_LEN];
	uint8_t buf[sizeof(struct wit_hdr) + WIT_MAX_ERROR];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 1)
		n = 1;
	if ((size_t)n >= sizeof(text))
		n = (int)sizeof(text) - 1;
	/* The text may quote what the peer said of itself before it proved
	 * anything (its HELLO's names): escaped, as that name. */
	log_warn("witness: session from %s (%s%s): %s", s->peer.host,
		 s->name[0] ? log_escape(name, sizeof(name), s->name, strlen(s->name)) : "?",
		 s->sst == WS_UP ? "" : ", not authenticated",
		 log_escape(logged, sizeof(logged), text, (size_t)n));
	send_buf(s, buf, wit_enc_text(buf, WIT_ERROR, text, (size_t)n));
	s->dead = true;
	net_close(&s->peer.net);
}

/* ---- records ---- */

static int rec_index(const struct wit_cluster *cl, const char *volume)
{
	for (unsigned i = 0; i < cl->cfg->nvolumes; i++)
		if (!strcmp(cl->cfg->volumes[i].name, volume))
			return (int)i;
	return -1;
}

static int persist(struct wit_cluster *cl)
{
	int rc = wit_store_save(cl->path, cl->cfg->cluster, cl->recs, cl->cfg->nvolumes);
	if (rc)
		log_err("witness: cannot write %s: %s", cl->path, strerror(-rc));
	return rc;
}

/* A live session: up, and heard from within witness-timeout. */
static bool session_alive(const struct wit_server *ws, const struct wit_cluster *cl,
			  const char *node)
{
	struct list *pos, *tmp;
	uint64_t now = ev_now(ws->ev);

	list_for_each_safe (pos, tmp, (struct list *)&ws->sessions) {
		const struct wsess *s = container_of(pos, struct wsess, link);
		if (s->cl == cl && s->sst == WS_UP && !s->dead && s->node >= 0 &&
		    !strcmp(s->name, node) && now - s->last_rx_ns < cl->timeout_ns)
			return true;
	}
	return false;
}

/* W3.2 with L2: the node may still hold a lease from this witness. It has
 * a live session, or it had one whose last message came less than
 * witness-timeout ago: its lease, anchored at the sending of a PING this
 * witness received then, runs 3/4 of that at most. A closed session is no
 * proof: the close may have been seen here alone. gone: the claimant found
 * no daemon listening at the node's address (WIT_F_PEER_GONE); then a
 * session that is closed is dead at once. */
static bool node_alive(const struct wit_server *ws, const struct wit_cluster *cl, const char *node,
		       bool gone)
{
	uint64_t now = ev_now(ws->ev);
	int ix;

	if (session_alive(ws, cl, node))
		return true;
	if (gone)
		return false;
	ix = cfg_node_index(cl->cfg, node);
	return ix >= 0 && cl->node_rx_ns[ix] && now - cl->node_rx_ns[ix] < cl->timeout_ns;
}

static void answer(struct wsess *s, uint16_t type, const struct wit_rec *r, uint64_t seq,
		   uint32_t result, uint32_t reason)
{
	struct wit_verdict v;
	uint8_t buf[WIT_ENC_MAX];

	memset(&v, 0, sizeof(v));
	wit_rec_verdict(r, &v);
	v.seq = seq;
	v.result = result;
	v.reason = reason;
	send_buf(s, buf, wit_enc_verdict(buf, type, &v));
}

static void on_report(struct wsess *s, const struct wit_vol_msg *m)
{
	int i = rec_index(s->cl, m->volume);
	struct wit_rec *r, old;
	uint32_t res;
	bool changed;

	if (i < 0 || !cfg_volume_has_node(&s->cl->cfg->volumes[i], (unsigned)s->node)) {
		struct wit_rec none;
		memset(&none, 0, sizeof(none));
		snprintf(none.volume, sizeof(none.volume), "%s", m->volume);
		answer(s, WIT_REPORT_ACK, &none, m->seq, WIT_R_DEPOSED, WIT_NOT_MEMBER);
		return;
	}
	r = &s->cl->recs[i];
	old = *r;
	res = wit_rec_report(r, s->name, m, &changed);
	if (changed && !r->primary[0] && old.primary[0] && r->gen != m->gen)
		log_warn(
			"witness: %s/%s: %s releases the record without the data it names "
			"(it holds %016llx, not %016llx): generation kept, no node is primary (W5)",
			s->cl->cfg->cluster, r->volume, s->name, (unsigned long long)m->gen,
			(unsigned long long)r->gen);
	if (changed) {
		if (persist(s->cl)) {
			*r = old; /* WS2 */
			s->dead = true;
			net_abort(&s->peer.net);
			return;
		}
		log_info("witness: %s/%s: primary %s, generation %016llx, %s (reported by %s)",
			 s->cl->cfg->cluster, r->volume, r->primary[0] ? r->primary : "none",
			 (unsigned long long)r->gen, r->synced ? "peer in sync" : "writing alone",
			 s->name);
	}
	/* W1: deposed by another primary, or (no primary named) by the data
	 * the last one released */
	answer(s, WIT_REPORT_ACK, r, m->seq, res,
	       res == WIT_R_DEPOSED && (!r->primary[0] || !strcmp(r->primary, s->name))
		       ? WIT_OLDER_DATA
		       : WIT_NONE);
	if (res == WIT_R_DEPOSED)
		log_warn("witness: %s/%s: %s reports primary, but %s: deposed", s->cl->cfg->cluster,
			 r->volume, s->name,
			 !r->primary[0] ? "it lacks the data the last primary released"
			 : strcmp(r->primary, s->name)
				 ? "another node holds the record"
				 : "it lacks the generation it was recorded with");
}

/* Decides one pending claim: true when it was answered. */
static bool decide_claim(struct wsess *s, unsigned i)
{
	struct wit_server *ws = s->ws;
	struct wit_pending *p = &s->pend[i];
	struct wit_rec *r = &s->cl->recs[i], old = *r;
	uint64_t now = ev_now(ws->ev);
	bool alive = r->primary[0] && strcmp(r->primary, s->name) &&
		     node_alive(ws, s->cl, r->primary, (p->m.flags & WIT_F_PEER_GONE) != 0);
	uint64_t timeout = s->cl->timeout_ns;
	bool grace = now - ws->start_ns < timeout; /* W3.3 */
	uint32_t reason;
	enum wit_claim_outcome o = wit_rec_claim(r, s->name, &p->m, alive, grace, &reason);

	if (o == WIT_WAIT) {
		/* W3.2: the primary's own report would settle it; past
		 * witness-timeout the claim is denied (the claimant asks again). */
		if (now - p->t0 < timeout + (grace ? timeout : 0))
			return false;
		o = WIT_DENY;
	}
	p->on = false;
	if (o == WIT_DENY) {
		log_info("witness: %s/%s: claim of %s denied: %s", s->cl->cfg->cluster, r->volume,
			 s->name, wit_reason_name(reason));
		answer(s, WIT_CLAIM_REPLY, r, p->m.seq, WIT_R_DENIED, reason);
		return true;
	}
	if (strcmp(r->primary, s->name)) {
		wit_rec_grant(r, s->name, &p->m);
		if (persist(s->cl)) {
			*r = old; /* WS2 */
			s->dead = true;
			net_abort(&s->peer.net);
			return true;
		}
		log_info("witness: %s/%s: %s is primary now (epoch %llu, generation %016llx)%s",
			 s->cl->cfg->cluster, r->volume, s->name, (unsigned long long)r->epoch,
			 (unsigned long long)r->gen,
			 (p->m.flags & WIT_F_FORCE)       ? ", forced"
			 : (p->m.flags & WIT_F_PEER_GONE) ? ", the old primary's daemon is gone"
							  : "");
	}
	answer(s, WIT_CLAIM_REPLY, r, p->m.seq, WIT_R_OK, WIT_NONE);
	return true;
}

static void on_claim(struct wsess *s, const struct wit_vol_msg *m)
{
	int i = rec_index(s->cl, m->volume);

	if (i < 0 || !cfg_volume_has_node(&s->cl->cfg->volumes[i], (unsigned)s->node)) {
		struct wit_rec none;
		memset(&none, 0, sizeof(none));
		snprintf(none.volume, sizeof(none.volume), "%s", m->volume);
		answer(s, WIT_CLAIM_REPLY, &none, m->seq, WIT_R_DENIED, WIT_NOT_MEMBER);
		return;
	}
	s->pend[i].on = true;
	s->pend[i].m = *m;
	s->pend[i].t0 = ev_now(s->ws->ev);
	decide_claim(s, (unsigned)i);
}

/* Every pending claim of every session, again (WS3). */
static void evaluate(struct wit_server *ws)
{
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ws->sessions) {
		struct wsess *s = container_of(pos, struct wsess, link);
		if (s->sst != WS_UP || s->dead)
			continue;
		for (unsigned i = 0; i < CFG_MAX_VOLUMES; i++)
			if (s->pend[i].on)
				decide_claim(s, i);
	}
}

static void on_status(struct wsess *s)
{
	const struct cfg *c = s->cl->cfg;
	size_t cap = WIT_MAX_STATUS, n = 0;
	char *j = malloc(cap);
	uint8_t *buf;

	if (!j) {
		refuse(s, "out of memory");
		return;
	}
#define OUT(...)                                                                  \
	do {                                                                      \
		int k_ = snprintf(j + n, cap - n, __VA_ARGS__);                   \
		n += (k_ > 0 && (size_t)k_ < cap - n) ? (size_t)k_ : cap - n - 1; \
	} while (0)
	OUT("{\"cluster\":\"%s\",\"witness\":\"%s\",\"uptime_seconds\":%.1f,"
	    "\"witness_timeout\":%.3f,\"serving\":%s,",
	    c->cluster, c->witness, (double)(ev_now(s->ws->ev) - s->ws->start_ns) / 1e9,
	    (double)c->witness_timeout_ms / 1e3, s->cl->refused ? "false" : "true");
	if (s->cl->refused)
		OUT("\"refused\":\"no state file: the witness holds no record of this cluster "
		    "and refuses its nodes (a new cluster: start it once with --init %s)\",",
		    c->cluster);
	OUT("\"nodes\":[");
	for (unsigned i = 0; i < c->nnodes; i++)
		OUT("%s{\"node\":\"%s\",\"session\":%s}", i ? "," : "", c->nodes[i].name,
		    session_alive(s->ws, s->cl, c->nodes[i].name) ? "true" : "false");
	OUT("],\"volumes\":[");
	for (unsigned i = 0; !s->cl->refused && i < c->nvolumes; i++) {
		const struct wit_rec *r = &s->cl->recs[i];
		OUT("%s{\"name\":\"%s\",\"primary\":%s%s%s,\"generation\":\"%016llx\","
		    "\"synced\":%s,\"epoch\":%llu}",
		    i ? "," : "", r->volume, r->primary[0] ? "\"" : "",
		    r->primary[0] ? r->primary : "null", r->primary[0] ? "\"" : "",
		    (unsigned long long)r->gen, r->synced ? "true" : "false",
		    (unsigned long long)r->epoch);
	}
	OUT("]}\n");
#undef OUT
	buf = malloc(sizeof(struct wit_hdr) + n);
	if (buf) {
		send_buf(s, buf, wit_enc_text(buf, WIT_STATUS, j, n));
		free(buf);
	}
	free(j);
}

/* ---- the session handshake ---- */

static struct wit_cluster *cluster_by_name(struct wit_server *ws, const char *name)
{
	for (unsigned i = 0; i < ws->ncl; i++)
		if (!strcmp(ws->cls[i].cfg->cluster, name))
			return &ws->cls[i];
	return NULL;
}

static void on_hello(struct wsess *s, const struct wit_hello *h)
{
	uint8_t buf[WIT_ENC_MAX];

	snprintf(s->name, sizeof(s->name), "%s", h->name);
	if (WIT_PROTO < h->proto_min || WIT_PROTO > h->proto_max) {
		refuse(s, "no common protocol version (witness speaks %u)", WIT_PROTO);
		return;
	}
	s->cl = cluster_by_name(s->ws, h->cluster);
	if (!s->cl) {
		refuse(s, "this witness serves no cluster named %s", h->cluster);
		return;
	}
	if (h->flags & WIT_HELLO_F_ADMIN) {
		s->node = -1;
	} else {
		char why[WIT_MAX_ERROR];

		s->node = cfg_node_index(s->cl->cfg, h->name);
		if (s->node < 0) {
			refuse(s, "cluster %s has no node %s", h->cluster, h->name);
			return;
		}
		if (s->cl->refused) {
			refuse(s,
			       "this witness does not serve cluster %s: its state file is missing "
			       "(for a new cluster, tandem-witness --init %s creates it)",
			       h->cluster, h->cluster);
			return;
		}
		if (wit_hello_timeout_check(h->cluster, h->name, h->timeout_ms,
					    s->cl->cfg->witness_timeout_ms, why, sizeof(why))) {
			refuse(s, "%s", why);
			return;
		}
	}
	memcpy(s->nonce_peer, h->nonce, WIT_NONCE_LEN);
	sess_set_state(s, WS_AUTH);
	/* timeout 0: clients before timeout_ms refuse any other value */
	send_buf(s, buf, wit_enc_hello(buf, s->cl->cfg->cluster, "witness", s->nonce_me, 0, 0));
}

static void on_auth(struct wsess *s, const struct wit_auth *a)
{
	uint8_t mac[WIT_MAC_LEN], buf[WIT_ENC_MAX];
	struct list *pos, *tmp;
	int diff = 0;

	wit_mac(s->cl->cfg->secret, 'N', s->nonce_peer, s->nonce_me, s->cl->cfg->cluster, s->name,
		mac);
	for (unsigned i = 0; i < WIT_MAC_LEN; i++)
		diff |= mac[i] ^ a->mac[i];
	if (diff) {
		refuse(s, "authentication failed (is the cluster secret the same?)");
		return;
	}
	wit_mac(s->cl->cfg->secret, 'W', s->nonce_peer, s->nonce_me, s->cl->cfg->cluster, s->name,
		mac);
	send_buf(s, buf, wit_enc_auth(buf, mac));
	sess_set_state(s, WS_UP);
	net_peer_hs_done(&s->peer);
	if (s->node < 0)
		return;
	/* A newer session of a node replaces the older ones. */
	list_for_each_safe (pos, tmp, &s->ws->sessions) {
		struct wsess *o = container_of(pos, struct wsess, link);
		if (o != s && o->cl == s->cl && o->node == s->node && !o->dead) {
			o->dead = true;
			net_abort(&o->peer.net);
		}
	}
	log_info("witness: %s/%s: session up from %s", s->cl->cfg->cluster, s->name, s->peer.host);
}

static void handle(struct wsess *s, const uint8_t *body)
{
	struct wit_msg *m = &s->m;
	uint8_t buf[WIT_ENC_MAX];

	if (wit_decode_body(body, m)) {
		refuse(s, "bad message (type %u)", m->type);
		return;
	}
	if (m->type == WIT_ERROR) {
		char text[4 * WIT_MAX_ERROR];

		/* From a peer that proved nothing, its address and the length;
		 * the text (escaped: no forged lines) only when debugging. */
		log_escape(text, sizeof(text), m->var, m->var_len);
		if (s->sst == WS_UP) {
			log_warn("witness: %s/%s says: %s", s->cl->cfg->cluster, s->name, text);
		} else {
			log_warn("witness: session from %s (not authenticated) sent an ERROR of "
				 "%u bytes",
				 s->peer.host, m->var_len);
			log_debug("witness: session from %s: ERROR %s", s->peer.host, text);
		}
		s->dead = true;
		net_close(&s->peer.net);
		return;
	}
	switch (s->sst) {
	case WS_HELLO:
		if (m->type != WIT_HELLO)
			refuse(s, "expected HELLO");
		else
			on_hello(s, &m->u.hello);
		return;
	case WS_AUTH:
		if (m->type != WIT_AUTH)
			refuse(s, "expected AUTH");
		else
			on_auth(s, &m->u.auth);
		return;
	case WS_UP: break;
	}
	switch (m->type) {
	case WIT_PING: send_buf(s, buf, wit_enc_ping(buf, WIT_PONG, m->u.ping.cookie)); return;
	case WIT_REPORT:
		if (s->node < 0)
			break;
		on_report(s, &m->u.vol);
		evaluate(s->ws);
		return;
	case WIT_CLAIM:
		if (s->node < 0)
			break;
		on_claim(s, &m->u.vol);
		return;
	case WIT_STATUS_REQ: on_status(s); return;
	default: break;
	}
	refuse(s, "unexpected message (type %u)", m->type);
}

static void on_rx(struct net_conn *nc)
{
	struct wsess *s = container_of(nc, struct wsess, peer.net);

	s->last_rx_ns = ev_now(s->ws->ev);
	while (!s->dead && !nc->closing) {
		size_t avail = net_rx_avail(nc);
		uint8_t body[sizeof(struct wit_hello) + WIT_MAX_ERROR];

		if (!s->have_hdr) {
			if (avail < sizeof(struct wit_hdr))
				return;
			if (wit_decode_hdr(net_rx_peek(nc), &s->m)) {
				if (net_rx_looks_tls(nc))
					refuse(s, "the node speaks TLS: set tls = on in the "
						  "witness's configuration too (or tls = off on "
						  "the node)");
				else
					refuse(s, "bad message header (not a Tandem node?)");
				return;
			}
			/* clients never send STATUS; its length is the only one
			 * larger than the body buffer */
			if (s->m.len > sizeof(body)) {
				refuse(s, "message too long (type %u)", s->m.type);
				return;
			}
			net_rx_consume(nc, sizeof(struct wit_hdr));
			s->have_hdr = true;
			avail -= sizeof(struct wit_hdr);
		}
		if (avail < s->m.len)
			return;
		memcpy(body, net_rx_peek(nc), s->m.len);
		net_rx_consume(nc, s->m.len);
		s->have_hdr = false;
		handle(s, body);
		if (s->sst == WS_UP && s->node >= 0 && s->node < CFG_MAX_NODES)
			s->cl->node_rx_ns[s->node] = s->last_rx_ns;
	}
}

static void on_closed(struct net_conn *nc)
{
	struct wsess *s = container_of(nc, struct wsess, peer.net);
	struct wit_server *ws = s->ws;
	bool was_up = s->sst == WS_UP && s->node >= 0;

	s->dead = true;
	list_del(&s->link);
	if (was_up)
		log_info("witness: %s/%s: session closed", s->cl->cfg->cluster, s->name);
	net_peer_closed(&s->peer);
	if (was_up && !ws->shutting_down)
		evaluate(ws); /* WS3: the node is no longer alive */
}

static void sess_release(struct net_peer *p)
{
	struct wsess *s = container_of(p, struct wsess, peer);
	net_conn_destroy(&s->peer.net);
	free(s);
}

static void sess_kill(struct net_peer *p, const char *why)
{
	struct wsess *s = container_of(p, struct wsess, peer);
	if (why)
		log_warn("witness: session from %s: %s", p->host, why);
	s->dead = true;
	net_close(&p->net);
}

static const struct net_conn_ops sess_ops = { .on_rx = on_rx, .on_closed = on_closed };
static const struct net_peer_ops sess_pops = { .release = sess_release, .kill = sess_kill };

static void on_accept(struct net_srv *ns, int fd, const char *host)
{
	struct wit_server *ws = container_of(ns, struct wit_server, srv);
	struct wsess *s = calloc(1, sizeof(*s));

	if (!s || getrandom(s->nonce_me, WIT_NONCE_LEN, 0) != (ssize_t)WIT_NONCE_LEN) {
		free(s);
		close(fd);
		return;
	}
	s->ws = ws;
	s->node = -1;
	s->last_rx_ns = ev_now(ws->ev);
	list_init(&s->link);
	if (net_peer_open_tls(&s->peer, ws->ev, ns, fd, host, RX_BUF, &sess_ops, &sess_pops,
			      ws->tls, false)) {
		free(s);
		return;
	}
	if (ws->tls) {
		/* what a node with tls = off reads before this end closes */
		static const char no_tls[] = "this witness has tls = on: set tls = on on the "
					     "node too";
		uint8_t buf[sizeof(struct wit_hdr) + WIT_MAX_ERROR];
		net_conn_tls_refusal(&s->peer.net, buf,
				     wit_enc_text(buf, WIT_ERROR, no_tls, sizeof(no_tls) - 1));
	}
	list_add_tail(&ws->sessions, &s->link);
}

static void tick(struct ev_timer *t)
{
	struct wit_server *ws = container_of(t, struct wit_server, tick);
	uint64_t now = ev_now(ws->ev);
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ws->sessions) {
		struct wsess *s = container_of(pos, struct wsess, link);
		if (s->sst == WS_UP && !s->dead && now - s->last_rx_ns >= s->cl->timeout_ns) {
			log_warn("witness: %s/%s: silent for %.1f s: session dropped",
				 s->cl->cfg->cluster, s->name, (double)(now - s->last_rx_ns) / 1e9);
			s->dead = true;
			net_abort(&s->peer.net);
		}
	}
	evaluate(ws);
	ev_timer_arm(ws->ev, &ws->tick, TICK_NS);
}

/* A missing state file is not a new cluster: it may be a witness redeployed
 * without its directory, whose empty records would take the first primary
 * that reports (W1) however stale. Only --init (init) says the cluster is
 * new; without it the cluster is refused (WS4) and the nodes go on with
 * their peers. An existing file is never replaced, with or without --init. */
static int load_cluster(struct wit_cluster *cl, const struct cfg *c, bool init, char *err,
			size_t errlen)
{
	struct wit_rec loaded[WIT_STATE_MAX_RECS];
	unsigned n = 0;
	int rc;

	cl->cfg = c;
	cl->timeout_ns = (uint64_t)c->witness_timeout_ms * 1000000ull;
	snprintf(cl->path, sizeof(cl->path), "%s/witness-%s.state", c->witness_dir, c->cluster);
	for (unsigned i = 0; i < c->nvolumes; i++)
		snprintf(cl->recs[i].volume, sizeof(cl->recs[i].volume), "%s", c->volumes[i].name);
	rc = wit_store_load(cl->path, c->cluster, loaded, WIT_STATE_MAX_RECS, &n);
	if (rc == -ENOENT && !init) {
		cl->refused = true;
		log_warn("witness: cluster %s: no state file %s: not served, its nodes are "
			 "refused. A new cluster: start once with --init %s. A witness that lost "
			 "its directory: see docs/WITNESS.md before you do",
			 c->cluster, cl->path, c->cluster);
		return 0;
	}
	if (rc == -ENOENT) {
		if (mkdir(c->witness_dir, 0700) < 0 && errno != EEXIST) {
			int e = errno;
			snprintf(err, errlen, "%s: cannot create witness-dir %s: %s", c->path,
				 c->witness_dir, strerror(e));
			return -e;
		}
		if (persist(cl)) {
			snprintf(err, errlen, "cannot write %s", cl->path);
			return -EIO;
		}
		log_info("witness: cluster %s: --init: created %s, no record yet", c->cluster,
			 cl->path);
		return 0;
	}
	if (rc) {
		/* Never start from nothing over a state we cannot read: an empty
		 * record could vouch for a stale node. */
		snprintf(err, errlen,
			 "%s: unreadable state file (%s); move it away only if "
			 "every node is known to be up to date",
			 cl->path, strerror(-rc));
		return rc;
	}
	for (unsigned k = 0; k < n; k++) {
		int i = rec_index(cl, loaded[k].volume);
		if (i >= 0)
			cl->recs[i] = loaded[k];
	}
	if (init)
		log_info("witness: cluster %s: --init: %s exists, left as it is", c->cluster,
			 cl->path);
	return 0;
}

/* One listener speaks TLS or not: the clusters it serves agree on tls and
 * on the certificates; each cluster's key (PSK) is added. */
static int tls_setup(struct wit_server *ws, const struct cfg *const *cfgs, unsigned ncfg, char *err,
		     size_t errlen)
{
	const struct cfg *c0 = cfgs[0];
	struct net_tls_opts o = { .cert = c0->tls_cert, .key = c0->tls_key, .ca = c0->tls_ca };
	char why[256];
	int rc;

	for (unsigned i = 1; i < ncfg; i++)
		if (cfgs[i]->tls != c0->tls || strcmp(cfgs[i]->tls_cert, c0->tls_cert) ||
		    strcmp(cfgs[i]->tls_key, c0->tls_key) || strcmp(cfgs[i]->tls_ca, c0->tls_ca)) {
			snprintf(err, errlen,
				 "%s and %s differ in tls, tls-cert, tls-key or tls-ca: one "
				 "witness listener speaks TLS for all its clusters or for none",
				 c0->path, cfgs[i]->path);
			return -EINVAL;
		}
	if (!c0->tls)
		return 0;
	rc = net_tls_ctx_new(&o, &ws->tls, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "%s: [cluster] %s", c0->path, why);
		return rc;
	}
	for (unsigned i = 0; i < ncfg && !c0->tls_cert[0]; i++) {
		rc = net_tls_ctx_add_cluster(ws->tls, cfgs[i]->cluster, cfgs[i]->secret);
		if (rc) {
			snprintf(err, errlen, "%s: [cluster] tls: no key for cluster %s: %s",
				 cfgs[i]->path, cfgs[i]->cluster, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int wit_server_new(struct ev_loop *ev, const struct cfg *const *cfgs, const bool *init,
		   unsigned ncfg, struct wit_server **out, char *err, size_t errlen)
{
	struct wit_server *ws = calloc(1, sizeof(*ws));
	int rc;

	if (!ws)
		return -ENOMEM;
	ws->ev = ev;
	ws->cls = calloc(ncfg, sizeof(*ws->cls));
	if (!ws->cls) {
		free(ws);
		return -ENOMEM;
	}
	ws->ncl = ncfg;
	list_init(&ws->sessions);
	for (unsigned i = 0; i < ncfg; i++) {
		for (unsigned k = 0; k < i; k++)
			if (!strcmp(cfgs[k]->cluster, cfgs[i]->cluster)) {
				snprintf(err, errlen, "%s and %s both name cluster %s",
					 cfgs[k]->path, cfgs[i]->path, cfgs[i]->cluster);
				rc = -EINVAL;
				goto fail;
			}
		if (strcmp(cfgs[i]->witness, cfgs[0]->witness)) {
			snprintf(err, errlen, "%s names witness %s, %s names %s: one address only",
				 cfgs[0]->path, cfgs[0]->witness, cfgs[i]->path, cfgs[i]->witness);
			rc = -EINVAL;
			goto fail;
		}
		rc = load_cluster(&ws->cls[i], cfgs[i], init && init[i], err, errlen);
		if (rc)
			goto fail;
	}
	rc = tls_setup(ws, cfgs, ncfg, err, errlen);
	if (rc)
		goto fail;
	ws->srv.name = "witness";
	ws->srv.max = 1024;
	ws->srv.max_per_addr = 256;
	ws->srv.hs_timeout_ns = 10ull * 1000000000ull;
	ws->srv.may_use_reserve = true;
	ws->srv.on_accept = on_accept;
	rc = net_srv_listen(&ws->srv, ev, cfgs[0]->witness);
	if (rc) {
		snprintf(err, errlen, "cannot listen on %s: %s", cfgs[0]->witness, strerror(-rc));
		goto fail;
	}
	ws->start_ns = ev_now(ev);
	ws->tick.fn = tick;
	ev_timer_arm(ev, &ws->tick, TICK_NS);
	*out = ws;
	return 0;
fail:
	net_tls_ctx_free(ws->tls);
	free(ws->cls);
	free(ws);
	return rc;
}

void wit_server_shutdown(struct wit_server *ws)
{
	ws->shutting_down = true;
	ev_timer_cancel(ws->ev, &ws->tick);
	net_srv_shutdown(&ws->srv);
}

void wit_server_free(struct wit_server *ws)
{
	if (!ws)
		return;
	net_tls_ctx_free(ws->tls);
	free(ws->cls);
	free(ws);
}
