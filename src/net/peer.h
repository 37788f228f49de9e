/* The life of a connection, one copy for every server on the loop (NBD,
 * iSCSI, control socket, replication): a listener's set of connections with
 * its admission limits and handshake deadline, the references that work in
 * flight holds, and the reap once the socket is closed and unreferenced.
 * Owns: the server's list and counts, each connection's references, reap and
 * handshake timer. Never: parses bytes, or frees the owner's object itself
 * (ops->release does, exactly once).
 *
 * Life of one connection (struct net_peer):
 *   open    -> closing  [owner: net_close / net_abort; net_srv_shutdown -> ops->kill]
 *   open|closing -> closed  [net_peer_closed, from the owner's on_closed]
 *   closed  -> reaped   [peer_reap: refs == 0, from a deferred]
 * Invariants:
 *   P1. ops->release runs once, from the loop (never inside a caller's
 *       frame), after on_closed and when no reference is left; the owner's
 *       object stays valid until then, whatever completes late.
 *   P2. A listener admits a connection only while it holds fewer than max
 *       connections and fewer than max_per_addr from that host; a front-end
 *       listener also only while descriptors are left for the control and
 *       replication listeners (net_refusal).
 *   P3. A connection whose handshake is not done (net_peer_hs_done) within
 *       the server's handshake timeout is killed (ops->kill).
 *   P4. After net_srv_shutdown the listener accepts nothing more and every
 *       connection was asked to close (ops->kill); net_srv_abort cuts them.
 */
#ifndef TANDEM_NET_PEER_H
#define TANDEM_NET_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/list.h"
#include "../ev/ev.h"
#include "net.h"

struct net_peer;
struct net_srv;

struct net_peer_ops {
	/* Closed and unreferenced (P1): free the owner's object. */
	void (*release)(struct net_peer *p);
	/* Orderly end asked by the server: shutdown (why NULL) or handshake
	 * timeout (P3). The owner answers what it must and calls net_close. */
	void (*kill)(struct net_peer *p, const char *why);
};

struct net_peer {
	struct net_conn net;
	struct net_srv *srv; /* NULL: dialed, or detached from its listener */
	const struct net_peer_ops *ops;
	unsigned refs;
	bool closed; /* on_closed ran: no net operation is in flight */
	char host[NET_HOST_MAX];
	struct ev_deferred reap;
	struct ev_timer hs_timer;
	struct list link; /* in srv->peers while srv is set */
};

struct net_srv {
	struct ev_loop *ev;
	struct net_listener lis;
	const char *name; /* for the log: "nbd", "iscsi", ... */
	unsigned max;     /* P2; 0: no limit */
	unsigned max_per_addr;
	uint64_t hs_timeout_ns; /* P3; 0: none */
	/* The control and replication listeners may use the descriptors that
	 * the front-ends leave free (NET_FD_RESERVE); front-ends may not. */
	bool may_use_reserve;
	/* A connection passed admission (P2): the owner allocates its object and
	 * calls net_peer_open, or closes fd. host is the client's address. */
	void (*on_accept)(struct net_srv *s, int fd, const char *host);
	struct list peers;
	unsigned npeers;
	uint64_t refused; /* connections refused at accept (P2) */
	bool shutting_down;
};

/* Starts a server on a TCP host:port or a unix socket path. The caller set
 * max, max_per_addr, hs_timeout_ns, name and on_accept first. 0 or -errno. */
int net_srv_listen(struct net_srv *s, struct ev_loop *ev, const char *addr);
int net_srv_listen_unix(struct net_srv *s, struct ev_loop *ev, const char *path);
/* P4: stop accepting, ask every connection to close. */
void net_srv_shutdown(struct net_srv *s);
/* P4: cut every connection now, dropping their output. */
void net_srv_abort(struct net_srv *s);

/* Starts a connection on fd, on srv's list (srv may be NULL for a dialed
 * one), with the handshake timer armed when srv has a timeout. On error fd
 * is closed, nothing is kept and the owner frees its object: -errno. */
int net_peer_open(struct net_peer *p, struct ev_loop *ev, struct net_srv *srv, int fd,
		  const char *host, size_t rxbuf, const struct net_conn_ops *cops,
		  const struct net_peer_ops *pops);
/* The handshake is done: P3 no longer applies (with TLS it covers the TLS
 * handshake too). */
void net_peer_hs_done(struct net_peer *p);
/* net_peer_open with TLS (net_conn_init_tls); tls NULL: plaintext. */
int net_peer_open_tls(struct net_peer *p, struct ev_loop *ev, struct net_srv *srv, int fd,
		      const char *host, size_t rxbuf, const struct net_conn_ops *cops,
		      const struct net_peer_ops *pops, struct net_tls_ctx *tls, bool client);
/* Leaves the server's list and counts (a replication connection bound to
 * its volume); the connection lives on under its owner. */
void net_peer_detach(struct net_peer *p);
static inline void net_peer_ref(struct net_peer *p)
{
	p->refs++;
}
/* Drops a reference; the last one of a closed connection schedules the reap. */
void net_peer_unref(struct net_peer *p);
/* The owner's on_closed calls this once (after its own cleanup). */
void net_peer_closed(struct net_peer *p);

#endif
