/* src/net replaced for the engine unit tests (net_stub.h). It defines every
 * external symbol of net.o, so the archive's net.o is never linked in; the
 * queueing rules are net.c's (foreground output before background output,
 * net_bulk_pin, flushing once per loop pass, close after the output is out,
 * on_closed from the loop), the bytes only go to memory.
 * Never: touches a socket, or calls an engine callback from inside the net
 * function the engine called (except where net.c does too: net_rx_direct
 * with the data already buffered). */
#include "net_stub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../../../src/common/util.h"
#include "../../../src/net/tls.h"

/* The net.h functions carry no context but the connection or listener, so
 * the records live in this file, one set per test process; stub_reset
 * empties it between tests. */
#define MAX_LISTENERS 16
#define MAX_DIALS 64
static struct {
	struct stub_conn **conns;
	unsigned n, cap;
	struct {
		struct net_listener *l;
		char addr[256]; /* host:port, or a unix path */
		bool open;
	} ls[MAX_LISTENERS];
	unsigned nls;
	struct {
		int fd;
		char addr[64];
	} dials[MAX_DIALS]; /* dialed, their connection not made yet */
	unsigned ndials;
	char refused[MAX_DIALS][64]; /* stub_refuse */
	unsigned nrefused;
	bool accepting;
	unsigned send_fault; /* the send (of any connection) that breaks it; 0 none */
	int send_err;
	bool send_fault_fired;
	void (*tamper)(struct stub_conn *to, uint8_t *buf, size_t len);
} S;

/* The stub's own allocations stand for no code under test: an allocation
 * fault plan (alloc_fault.h, linked into some binaries only) skips them. */
void alloc_fault_pause(bool on) __attribute__((weak));

static void pause_faults(bool on)
{
	if (alloc_fault_pause)
		alloc_fault_pause(on);
}

static void grow(uint8_t **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 4096;

	if (need <= *cap)
		return;
	while (n < need)
		n *= 2;
	pause_faults(true);
	*buf = realloc(*buf, n);
	pause_faults(false);
	if (!*buf)
		abort();
	*cap = n;
}

static void append(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (!n)
		return;
	grow(buf, cap, *len + n);
	memcpy(*buf + *len, p, n);
	*len += n;
}

struct stub_conn *stub_find(const struct net_conn *c)
{
	for (unsigned i = 0; i < S.n; i++)
		if (S.conns[i]->c == c)
			return S.conns[i];
	return NULL;
}

unsigned stub_nconns(void)
{
	return S.n;
}

struct stub_conn *stub_conn_at(unsigned i)
{
	return i < S.n ? S.conns[i] : NULL;
}

void stub_reset(void)
{
	for (unsigned i = 0; i < S.n; i++) {
		free(S.conns[i]->out);
		free(S.conns[i]->in);
		free(S.conns[i]);
	}
	free(S.conns);
	memset(&S, 0, sizeof(S));
}

void stub_forget_closed(void)
{
	unsigned k = 0;

	for (unsigned i = 0; i < S.n; i++) {
		struct stub_conn *s = S.conns[i];
		if (s->c) {
			S.conns[k++] = s;
			continue;
		}
		for (unsigned j = 0; j < S.n; j++)
			if (S.conns[j]->peer == s)
				S.conns[j]->peer = NULL;
		free(s->out);
		free(s->in);
		free(s);
	}
	S.n = k;
}

/* ---- listeners ---- */

static int listen_common(struct net_listener *l, struct ev_loop *ev, const char *addr,
			 void (*on_accept)(struct net_listener *, int))
{
	if (S.nls == MAX_LISTENERS || strlen(addr) >= sizeof(S.ls[0].addr))
		return -ENOSPC;
	memset(l, 0, sizeof(*l));
	l->fd = -1; /* net_listener_close of a real one would close it */
	l->spare_fd = -1;
	l->ev = ev;
	l->on_accept = on_accept;
	S.ls[S.nls].l = l;
	snprintf(S.ls[S.nls].addr, sizeof(S.ls[0].addr), "%s", addr);
	S.ls[S.nls].open = true;
	S.nls++;
	return 0;
}

int net_listen(struct net_listener *l, struct ev_loop *ev, const char *addr,
	       void (*on_accept)(struct net_listener *, int))
{
	return listen_common(l, ev, addr, on_accept);
}

int net_listen_unix(struct net_listener *l, struct ev_loop *ev, const char *path,
		    void (*on_accept)(struct net_listener *, int))
{
	return listen_common(l, ev, path, on_accept);
}

void net_listener_close(struct net_listener *l)
{
	for (unsigned i = 0; i < S.nls; i++)
		if (S.ls[i].l == l)
			S.ls[i].open = false;
	l->closing = true;
}

static int find_listener(const char *addr)
{
	for (unsigned i = S.nls; i-- > 0;)
		if (S.ls[i].open && strcmp(S.ls[i].addr, addr) == 0)
			return (int)i;
	return -1;
}

bool stub_listening(const char *addr)
{
	return find_listener(addr) >= 0;
}

int stub_accept(const char *addr, int fd)
{
	int i = find_listener(addr);
	struct net_listener *l;

	if (i < 0)
		return -ENOENT;
	l = S.ls[i].l;
	S.accepting = true;
	l->on_accept(l, fd);
	S.accepting = false;
	return 0;
}

/* A dial completes from the loop (a NOP on the ring, as the connect's CQE
 * would) with an eventfd as its socket: the engine only ever hands it to
 * net_conn_init and close. The test wires the connection it makes. */
static void dial_complete(struct ev_op *op, int res, uint32_t flags)
{
	struct net_dial *d = container_of(op, struct net_dial, op);
	int fd = d->fd;
	(void)res;
	(void)flags;

	d->busy = false;
	d->fd = -1;
	d->done(d, fd);
}

static bool refused(const char *addr)
{
	for (unsigned i = 0; i < S.nrefused; i++)
		if (strcmp(S.refused[i], addr) == 0)
			return true;
	return false;
}

void stub_refuse(const char *addr, bool on)
{
	for (unsigned i = 0; i < S.nrefused; i++)
		if (strcmp(S.refused[i], addr) == 0) {
			if (!on)
				memcpy(S.refused[i], S.refused[--S.nrefused], sizeof(S.refused[0]));
			return;
		}
	if (on && S.nrefused < MAX_DIALS)
		snprintf(S.refused[S.nrefused++], sizeof(S.refused[0]), "%s", addr);
}

/* Drops the dial address recorded for fd, if any; its text into addr (64). */
static void forget_dial_to(int fd, char *addr)
{
	for (unsigned i = 0; i < S.ndials; i++) {
		if (S.dials[i].fd != fd)
			continue;
		if (addr)
			snprintf(addr, 64, "%s", S.dials[i].addr);
		S.dials[i] = S.dials[--S.ndials];
		return;
	}
}

static void forget_dial(int fd)
{
	forget_dial_to(fd, NULL);
}

int net_dial(struct net_dial *d, struct ev_loop *ev, const struct sockaddr *sa, socklen_t salen,
	     void (*done)(struct net_dial *d, int fd_or_err))
{
	int fd = eventfd(0, EFD_CLOEXEC);
	(void)salen;

	if (fd < 0)
		return -errno;
	/* the address goes to the connection made on this fd (net_conn_init);
	 * an entry left by an fd closed without a connection is stale */
	forget_dial(fd);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		char ip[INET_ADDRSTRLEN], addr[64];
		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(addr, sizeof(addr), "%s:%u", ip, ntohs(in->sin_port));
		if (find_listener(addr) < 0 || refused(addr)) {
			/* nothing listens there (or the test cut it): the
			 * connect is refused, from the loop as its CQE would be */
			close(fd);
			fd = -ECONNREFUSED;
		} else if (S.ndials < MAX_DIALS) {
			S.dials[S.ndials].fd = fd;
			snprintf(S.dials[S.ndials].addr, sizeof(S.dials[0].addr), "%s", addr);
			S.ndials++;
		}
	}
	d->ev = ev;
	d->fd = fd;
	d->busy = true;
	d->done = done;
	d->op.cb = dial_complete;
	io_uring_prep_nop(ev_sqe(ev, &d->op));
	return 0;
}

void net_dial_cancel(struct net_dial *d)
{
	(void)d; /* the NOP completes on the next pass anyway */
}

void net_dial_close(struct net_dial *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

bool net_fd_spare(int fd)
{
	(void)fd;
	return true;
}

const char *net_refusal(int fd, unsigned nconns, unsigned max, unsigned same, unsigned max_same)
{
	if (!net_fd_spare(fd))
		return "file descriptors are running out";
	if (nconns >= max)
		return "max-connections reached";
	if (same >= max_same)
		return "max-connections-per-address reached";
	return NULL;
}

void net_peer_host(int fd, char out[NET_HOST_MAX])
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	out[0] = 0;
	if (getpeername(fd, (struct sockaddr *)&ss, &sl))
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, NET_HOST_MAX);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, NET_HOST_MAX);
}

/* ---- connections ---- */

static void promote_bulk(struct net_conn *c)
{
	if (!c->bulk_head)
		return;
	*c->txq_tail = c->bulk_head;
	c->txq_tail = c->bulk_tail;
	c->bulk_head = NULL;
	c->bulk_tail = &c->bulk_head;
}

static bool alive(const struct stub_conn *s)
{
	return s && s->c && !s->c->closed;
}

/* The socket is shut down: the peer reads EOF after what it got, and the
 * close completes from the loop (net.c: the recv in flight ends first). */
static void shut(struct stub_conn *s)
{
	if (!s->shut) {
		s->shut = true;
		if (alive(s->peer) && s->peer->in_end == 0) {
			s->peer->in_end = 1;
			ev_defer(s->peer->ev, &s->peer->deliver);
		}
	}
	ev_defer(s->ev, &s->finish);
}

static void finish_fn(struct ev_deferred *d)
{
	struct stub_conn *s = container_of(d, struct stub_conn, finish);
	struct net_conn *c = s->c;
	struct net_tx *tx;

	if (!c || c->closed || !c->closing)
		return;
	if ((c->txq_head || c->bulk_head) && !c->eof)
		return; /* output still going out (plugged): stub_plug(false) ends it */
	c->closed = true;
	promote_bulk(c);
	while ((tx = c->txq_head)) {
		c->txq_head = tx->next;
		tx->done(tx, -ECONNRESET);
	}
	c->txq_tail = &c->txq_head;
	s->closed_seen = true;
	c->ops->on_closed(c);
}

void stub_set_tamper(void (*fn)(struct stub_conn *to, uint8_t *buf, size_t len))
{
	S.tamper = fn;
}

static void wire_out(struct stub_conn *s, struct net_tx *tx)
{
	size_t at = s->peer ? s->peer->in_len : 0;

	for (int i = 0; i < tx->iovcnt; i++) {
		size_t n = tx->iov[i].iov_len;
		append(&s->out, &s->out_len, &s->out_cap, tx->iov[i].iov_base, n);
		if (alive(s->peer) && s->peer->in_end == 0)
			append(&s->peer->in, &s->peer->in_len, &s->peer->in_cap,
			       tx->iov[i].iov_base, n);
		s->c->bytes_out += n;
		tx->iov[i].iov_base = (char *)tx->iov[i].iov_base + n;
		tx->iov[i].iov_len = 0;
	}
	s->ntx++;
	if (S.tamper && alive(s->peer) && s->peer->in_len > at)
		S.tamper(s->peer, s->peer->in + at, s->peer->in_len - at);
	if (alive(s->peer))
		ev_defer(s->peer->ev, &s->peer->deliver);
}

/* net.c's tx_flush: the foreground queue goes first; the background queue
 * joins it only once it is empty. */
static void flush_fn(struct ev_deferred *d)
{
	struct net_conn *c = container_of(d, struct net_conn, flush);
	struct stub_conn *s = stub_find(c);

	if (!s || c->closed)
		return;
	if (s->broken) {
		net_abort(c); /* the peer is gone */
		return;
	}
	for (;;) {
		struct net_tx *tx;
		if (!c->txq_head)
			promote_bulk(c);
		if (!c->txq_head || s->plugged || c->closed)
			break;
		tx = c->txq_head;
		c->txq_head = tx->next;
		if (!c->txq_head)
			c->txq_tail = &c->txq_head;
		wire_out(s, tx);
		tx->done(tx, 0);
	}
	if (c->closing && !c->txq_head && !c->bulk_head)
		shut(s);
}

/* net.c's rx_parse. */
static void rx_parse(struct net_conn *c)
{
	while (!c->closing && !c->direct_cb && !c->rx_paused && net_rx_avail(c) > 0) {
		size_t before = net_rx_avail(c);
		c->ops->on_rx(c);
		if (net_rx_avail(c) == before)
			break;
	}
}

/* net.c's rx_cb for a recv that returned 0 (err 0: FIN) or an error. */
static void rx_end(struct net_conn *c, int err)
{
	if (err)
		c->eof = true;
	c->rx_eof = true;
	if (c->direct_cb) {
		void (*cb)(struct net_conn *, int) = c->direct_cb;
		c->direct_cb = NULL;
		cb(c, -ECONNRESET);
	}
	if (c->ops->on_eof && !c->eof && !c->closing)
		c->ops->on_eof(c);
	else
		net_close(c);
}

/* What recvs would do: fill the direct buffer or the receive buffer from
 * `in`, and hand it to the owner, until it stops taking. */
static void deliver_fn(struct ev_deferred *d)
{
	struct stub_conn *s = container_of(d, struct stub_conn, deliver);
	struct net_conn *c = s->c;

	if (!c || c->closed || c->rx_eof)
		return;
	if (c->closing) { /* reading stopped: what arrives is dropped */
		s->in_off = s->in_len;
		return;
	}
	if (s->in_end < 0) { /* a reset: also when paused (the next send fails) */
		s->in_off = s->in_len;
		rx_end(c, s->in_end);
		return;
	}
	if (s->rx_hold)
		return;
	while (!c->closing && s->in_off < s->in_len) {
		size_t avail = s->in_len - s->in_off, n;
		if (c->direct_cb) {
			n = MIN(avail, c->direct_len - c->direct_done);
			memcpy(c->direct_buf + c->direct_done, s->in + s->in_off, n);
			c->direct_done += n;
			s->in_off += n;
			c->bytes_in += n;
			if (c->direct_done == c->direct_len) {
				void (*cb)(struct net_conn *, int) = c->direct_cb;
				c->direct_cb = NULL;
				cb(c, 0);
			}
		} else {
			if (c->rx_paused)
				break;
			if (c->rx_start == c->rx_end) {
				c->rx_start = c->rx_end = 0;
			} else if (c->rx_cap - c->rx_end < c->rx_cap / 4) {
				memmove(c->rxbuf, c->rxbuf + c->rx_start, c->rx_end - c->rx_start);
				c->rx_end -= c->rx_start;
				c->rx_start = 0;
			}
			if (c->rx_end == c->rx_cap)
				break; /* the owner must consume first */
			n = MIN(avail, c->rx_cap - c->rx_end);
			memcpy(c->rxbuf + c->rx_end, s->in + s->in_off, n);
			c->rx_end += n;
			s->in_off += n;
			c->bytes_in += n;
		}
		rx_parse(c);
	}
	if (s->in_off == s->in_len)
		s->in_off = s->in_len = 0;
	if (s->in_end > 0 && !s->in_len && !c->closing &&
	    (c->direct_cb || (!c->rx_paused && c->rx_end < c->rx_cap)))
		rx_end(c, 0);
}

int net_conn_init(struct net_conn *c, struct ev_loop *ev, int fd, size_t rxbuf,
		  const struct net_conn_ops *ops)
{
	struct stub_conn *s;

	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->ev = ev;
	c->ops = ops;
	c->flush.fn = flush_fn;
	c->txq_tail = &c->txq_head;
	c->bulk_tail = &c->bulk_head;
	c->rx_cap = rxbuf;
	pause_faults(true);
	c->rxbuf = malloc(rxbuf);
	s = calloc(1, sizeof(*s));
	if (S.n == S.cap) {
		S.cap = S.cap ? 2 * S.cap : 16;
		S.conns = realloc(S.conns, S.cap * sizeof(*S.conns));
	}
	pause_faults(false);
	if (!c->rxbuf || !s || !S.conns)
		abort();
	s->c = c;
	s->fd = fd;
	s->ev = ev;
	s->accepted = S.accepting;
	if (S.accepting) /* a test's fd: any record of it is stale */
		forget_dial(fd);
	else
		forget_dial_to(fd, s->dial_addr);
	s->deliver.fn = deliver_fn;
	s->finish.fn = finish_fn;
	S.conns[S.n++] = s;
	return 0;
}

/* The engines' connections are plaintext here: TLS is net's (test_tls.c). */
int net_conn_init_tls(struct net_conn *c, struct ev_loop *ev, int fd, size_t rxbuf,
		      const struct net_conn_ops *ops, struct net_tls_ctx *tls, bool client)
{
	(void)tls;
	(void)client;
	return net_conn_init(c, ev, fd, rxbuf, ops);
}

/* The witness server asks for a TLS context only with tls = on, which the
 * engine tests never set. */
int net_tls_ctx_new(const struct net_tls_opts *o, struct net_tls_ctx **out, char *err,
		    size_t errlen)
{
	(void)o;
	*out = NULL;
	snprintf(err, errlen, "no TLS in the engine tests");
	return -ENOTSUP;
}

int net_tls_ctx_add_cluster(struct net_tls_ctx *x, const char *cluster, const char *secret)
{
	(void)x;
	(void)cluster;
	(void)secret;
	return -ENOTSUP;
}

void net_tls_ctx_free(struct net_tls_ctx *x)
{
	(void)x;
}

const char *net_conn_error(const struct net_conn *c)
{
	(void)c;
	return NULL;
}

const char *net_conn_tls_desc(const struct net_conn *c)
{
	(void)c;
	return "";
}

bool net_rx_looks_tls(const struct net_conn *c)
{
	return net_rx_avail(c) >= 3 && net_rx_peek(c)[0] == 22 && net_rx_peek(c)[1] == 3;
}

void net_conn_tls_refusal(struct net_conn *c, const void *buf, size_t len)
{
	(void)c;
	(void)buf;
	(void)len;
}

void net_rx_consume(struct net_conn *c, size_t n)
{
	c->rx_start += n;
}

void net_rx_direct(struct net_conn *c, void *buf, size_t len,
		   void (*cb)(struct net_conn *c, int err))
{
	size_t have = MIN(net_rx_avail(c), len);

	memcpy(buf, net_rx_peek(c), have);
	c->rx_start += have;
	if (have == len) {
		cb(c, 0);
		return;
	}
	c->direct_buf = buf;
	c->direct_len = len;
	c->direct_done = have;
	c->direct_cb = cb;
	ev_defer(c->ev, &stub_find(c)->deliver);
}

void net_rx_pause(struct net_conn *c)
{
	c->rx_paused = true;
}

void net_rx_resume(struct net_conn *c)
{
	if (!c->rx_paused)
		return;
	c->rx_paused = false;
	if (c->closing || c->direct_cb)
		return;
	rx_parse(c);
	ev_defer(c->ev, &stub_find(c)->deliver);
}

static void send_fault(struct net_conn *c)
{
	struct stub_conn *s;

	if (!S.send_fault || --S.send_fault)
		return;
	S.send_fault_fired = true;
	s = stub_find(c);
	if (s && !s->broken)
		stub_break(s, S.send_err); /* delivered from the loop, as a failed send */
}

void stub_fail_send(unsigned nth, int err)
{
	S.send_fault = nth;
	S.send_err = err;
	S.send_fault_fired = false;
}

bool stub_send_fault_fired(void)
{
	return S.send_fault_fired;
}

void net_send(struct net_conn *c, struct net_tx *tx)
{
	if (c->closed) {
		tx->done(tx, -ECONNRESET);
		return;
	}
	send_fault(c);
	tx->next = NULL;
	*c->txq_tail = tx;
	c->txq_tail = &tx->next;
	ev_defer(c->ev, &c->flush);
}

void net_send_bulk(struct net_conn *c, struct net_tx *tx)
{
	if (c->closed) {
		tx->done(tx, -ECONNRESET);
		return;
	}
	send_fault(c);
	tx->next = NULL;
	*c->bulk_tail = tx;
	c->bulk_tail = &tx->next;
	ev_defer(c->ev, &c->flush);
}

void net_bulk_pin(struct net_conn *c, struct net_tx *tx)
{
	struct net_tx **pp = &c->bulk_head;

	while (*pp && *pp != tx)
		pp = &(*pp)->next;
	if (!*pp)
		return;
	*c->txq_tail = c->bulk_head;
	c->txq_tail = &tx->next;
	c->bulk_head = tx->next;
	tx->next = NULL;
	if (!c->bulk_head)
		c->bulk_tail = &c->bulk_head;
	ev_defer(c->ev, &c->flush);
}

void net_close(struct net_conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	promote_bulk(c);
	if (!c->txq_head || c->eof)
		shut(stub_find(c));
	else
		ev_defer(c->ev, &c->flush); /* shut once it is out */
}

void net_abort(struct net_conn *c)
{
	c->eof = true;
	if (!c->closing) {
		net_close(c);
		return;
	}
	shut(stub_find(c));
}

void net_conn_destroy(struct net_conn *c)
{
	struct stub_conn *s = stub_find(c);

	ev_undefer(c->ev, &c->flush);
	if (s) {
		ev_undefer(c->ev, &s->deliver);
		ev_undefer(c->ev, &s->finish);
		s->c = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->rxbuf);
	c->rxbuf = NULL;
}

/* ---- the test's side ---- */

void stub_wire(struct stub_conn *a, struct stub_conn *b)
{
	a->peer = b;
	b->peer = a;
	append(&b->in, &b->in_len, &b->in_cap, a->out, a->out_len);
	append(&a->in, &a->in_len, &a->in_cap, b->out, b->out_len);
	if (a->shut && !b->in_end)
		b->in_end = 1;
	if (b->shut && !a->in_end)
		a->in_end = 1;
	ev_defer(a->ev, &a->deliver);
	ev_defer(b->ev, &b->deliver);
}

void stub_push(struct stub_conn *s, const void *buf, size_t len)
{
	append(&s->in, &s->in_len, &s->in_cap, buf, len);
	if (alive(s))
		ev_defer(s->ev, &s->deliver);
}

void stub_fin(struct stub_conn *s)
{
	if (!s->in_end)
		s->in_end = 1;
	if (alive(s))
		ev_defer(s->ev, &s->deliver);
}

void stub_plug(struct stub_conn *s, bool on)
{
	s->plugged = on;
	if (!on && alive(s))
		ev_defer(s->ev, &s->c->flush);
}

void stub_hold_rx(struct stub_conn *s, bool on)
{
	s->rx_hold = on;
	if (!on && alive(s))
		ev_defer(s->ev, &s->deliver);
}

static void break_one(struct stub_conn *s, int err)
{
	if (!s)
		return;
	s->broken = true;
	s->peer = NULL;
	s->in_off = s->in_len = 0;
	s->in_end = err;
	if (alive(s))
		ev_defer(s->ev, &s->deliver);
}

void stub_break(struct stub_conn *s, int err)
{
	struct stub_conn *p = s->peer;

	break_one(s, err);
	break_one(p, err);
}

unsigned stub_queued(const struct stub_conn *s, bool bulk)
{
	unsigned n = 0;

	if (!s->c)
		return 0;
	for (const struct net_tx *tx = bulk ? s->c->bulk_head : s->c->txq_head; tx; tx = tx->next)
		n++;
	return n;
}
