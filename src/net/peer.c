/* Connection life shared by every server: admission, references, reap.
 * The rules are in peer.h (P1-P4). */
#include "peer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

static const char *refusal(struct net_srv *s, int fd, const char *host)
{
	struct list *pos, *tmp;
	unsigned same = 0;

	list_for_each_safe (pos, tmp, &s->peers)
		if (strcmp(container_of(pos, struct net_peer, link)->host, host) == 0)
			same++;
	if (s->may_use_reserve) {
		if (s->max && s->npeers >= s->max)
			return "max-connections reached";
		if (s->max_per_addr && same >= s->max_per_addr)
			return "max-connections-per-address reached";
		return NULL;
	}
	return net_refusal(fd, s->npeers, s->max ? s->max : UINT_MAX, same,
			   s->max_per_addr ? s->max_per_addr : UINT_MAX);
}

static void srv_accept(struct net_listener *l, int fd)
{
	struct net_srv *s = container_of(l, struct net_srv, lis);
	char host[NET_HOST_MAX];
	const char *why;

	if (s->shutting_down) {
		close(fd);
		return;
	}
	net_peer_host(fd, host);
	if ((why = refusal(s, fd, host))) {
		/* One line per hundred: a flood must not flood the log too. */
		if (s->refused++ % 100 == 0)
			log_warn("%s: refusing a connection from %s: %s (%llu refused so far)",
				 s->name, host[0] ? host : "?", why,
				 (unsigned long long)s->refused);
		close(fd);
		return;
	}
	s->on_accept(s, fd, host);
}

static void srv_init(struct net_srv *s, struct ev_loop *ev)
{
	s->ev = ev;
	list_init(&s->peers);
	s->npeers = 0;
	s->refused = 0;
	s->shutting_down = false;
}

int net_srv_listen(struct net_srv *s, struct ev_loop *ev, const char *addr)
{
	srv_init(s, ev);
	return net_listen(&s->lis, ev, addr, srv_accept);
}

int net_srv_listen_unix(struct net_srv *s, struct ev_loop *ev, const char *path)
{
	srv_init(s, ev);
	return net_listen_unix(&s->lis, ev, path, srv_accept);
}

void net_srv_shutdown(struct net_srv *s)
{
	struct list *pos, *tmp;

	s->shutting_down = true;
	net_listener_close(&s->lis);
	list_for_each_safe (pos, tmp, &s->peers) {
		struct net_peer *p = container_of(pos, struct net_peer, link);
		p->ops->kill(p, NULL);
	}
}

void net_srv_abort(struct net_srv *s)
{
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, &s->peers)
		net_abort(&container_of(pos, struct net_peer, link)->net);
}

static void peer_reap(struct ev_deferred *d)
{
	struct net_peer *p = container_of(d, struct net_peer, reap);

	if (!p->closed || p->refs)
		return;
	ev_timer_cancel(p->net.ev, &p->hs_timer);
	net_peer_detach(p);
	net_conn_destroy(&p->net);
	p->ops->release(p);
}

static void hs_expired(struct ev_timer *t)
{
	struct net_peer *p = container_of(t, struct net_peer, hs_timer);

	if (!p->closed)
		p->ops->kill(p, "handshake not finished within handshake-timeout");
}

int net_peer_open(struct net_peer *p, struct ev_loop *ev, struct net_srv *srv, int fd,
		  const char *host, size_t rxbuf, const struct net_conn_ops *cops,
		  const struct net_peer_ops *pops)
{
	return net_peer_open_tls(p, ev, srv, fd, host, rxbuf, cops, pops, NULL, false);
}

int net_peer_open_tls(struct net_peer *p, struct ev_loop *ev, struct net_srv *srv, int fd,
		      const char *host, size_t rxbuf, const struct net_conn_ops *cops,
		      const struct net_peer_ops *pops, struct net_tls_ctx *tls, bool client)
{
	int r;

	p->ops = pops;
	p->refs = 0;
	p->closed = false;
	p->srv = NULL;
	p->reap.fn = peer_reap;
	p->hs_timer.fn = hs_expired;
	list_init(&p->link);
	snprintf(p->host, sizeof(p->host), "%s", host ? host : "");
	r = net_conn_init_tls(&p->net, ev, fd, rxbuf, cops, tls, client);
	if (r) {
		close(fd);
		return r;
	}
	if (srv) {
		p->srv = srv;
		list_add(&srv->peers, &p->link);
		srv->npeers++;
		if (srv->hs_timeout_ns)
			ev_timer_arm(ev, &p->hs_timer, srv->hs_timeout_ns);
	}
	return 0;
}

void net_peer_hs_done(struct net_peer *p)
{
	ev_timer_cancel(p->net.ev, &p->hs_timer);
}

void net_peer_detach(struct net_peer *p)
{
	if (!p->srv)
		return;
	list_del(&p->link);
	list_init(&p->link);
	p->srv->npeers--;
	p->srv = NULL;
}

void net_peer_unref(struct net_peer *p)
{
	p->refs--;
	if (p->closed && p->refs == 0)
		ev_defer(p->net.ev, &p->reap);
}

void net_peer_closed(struct net_peer *p)
{
	p->closed = true;
	if (p->refs == 0)
		ev_defer(p->net.ev, &p->reap);
}
