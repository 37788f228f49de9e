/* Sockets on the event loop. Each connection has at most one recv and one
 * sendmsg in flight; output queued during a pass is gathered into one sendmsg
 * when the pass ends (the ev_deferred flush). A connection dies by shutdown():
 * that completes the pending recv, after which on_closed runs exactly once.
 * With TLS (tls.c) the recv fills the ciphertext buffer and the sendmsg
 * gathers ciphertext chunks; the plaintext queues and the owner's view are
 * the same, and a plaintext connection takes none of those paths. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "net_int.h"
#include "tls.h"

static void listener_arm(struct net_listener *l);

/* No descriptor for a new connection. The failing accept would complete at
 * once again and again (the connection stays pending): instead the spare
 * descriptor is given up for one accept, whose connection goes to the owner
 * (a control client still gets its answer; a front-end refuses it, see
 * net_fd_spare), and accepting pauses for NET_ACCEPT_PAUSE_NS. */
static void listener_out_of_fds(struct net_listener *l, int err)
{
	struct pollfd pfd = { .fd = l->fd, .events = POLLIN };

	if (l->emfile++ % 100 == 0)
		log_warn("accept: %s (%llu times): pausing this listener for %llu ms",
			 strerror(err), (unsigned long long)l->emfile,
			 NET_ACCEPT_PAUSE_NS / 1000000ull);
	if (l->spare_fd >= 0) {
		close(l->spare_fd);
		l->spare_fd = -1;
		if (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN)) {
			int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				l->on_accept(l, fd);
		}
	}
	l->paused = true;
	ev_timer_arm(l->ev, &l->pause, NET_ACCEPT_PAUSE_NS);
}

static void listener_resume(struct ev_timer *t)
{
	struct net_listener *l = container_of(t, struct net_listener, pause);

	if (l->closing)
		return;
	if (l->spare_fd < 0)
		l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	l->paused = false;
	listener_arm(l);
}

static void listener_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct net_listener *l = container_of(op, struct net_listener, op);

	if (res >= 0) {
		if (l->closing)
			close(res);
		else
			l->on_accept(l, res);
	} else if ((res == -EMFILE || res == -ENFILE) && !l->closing) {
		if (!(flags & IORING_CQE_F_MORE) && !l->paused)
			listener_out_of_fds(l, -res);
		return;
	} else if (res != -ECANCELED && res != -EINVAL && res != -EBADF) {
		log_warn("accept failed: %s", strerror(-res));
	}
	if (!(flags & IORING_CQE_F_MORE) && !l->closing && !l->paused)
		listener_arm(l);
}

bool net_fd_spare(int fd)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return true;
	return (rlim_t)fd + NET_FD_RESERVE < rl.rlim_cur;
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

static void listener_arm(struct net_listener *l)
{
	struct io_uring_sqe *sqe = ev_sqe(l->ev, &l->op);
	io_uring_prep_multishot_accept(sqe, l->fd, NULL, NULL, SOCK_CLOEXEC);
}

static int listen_fd(struct net_listener *l, struct ev_loop *ev, int fd,
		     void (*on_accept)(struct net_listener *, int))
{
	if (listen(fd, 128) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	l->fd = fd;
	l->ev = ev;
	l->op.cb = listener_cb;
	l->on_accept = on_accept;
	l->closing = false;
	l->paused = false;
	l->emfile = 0;
	memset(&l->pause, 0, sizeof(l->pause));
	l->pause.fn = listener_resume;
	l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	listener_arm(l);
	return 0;
}

int net_listen(struct net_listener *l, struct ev_loop *ev, const char *addr,
	       void (*on_accept)(struct net_listener *, int))
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, r;

	r = parse_addr(addr, &ss, &len);
	if (r)
		return r;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* A daemon killed a moment ago may still hold its listener: the kernel
	 * tears an io_uring down asynchronously, and the socket it references
	 * stays in LISTEN until then. Wait a bounded time rather than fail a
	 * restart; a live process holding the port still fails after 5 s. */
	for (int tries = 0;; tries++) {
		if (bind(fd, (struct sockaddr *)&ss, len) == 0)
			break;
		r = -errno;
		if (r != -EADDRINUSE || tries == 50) {
			close(fd);
			return r;
		}
		if (tries == 0)
			log_info("%s is busy; waiting up to 5 s for it to be released", addr);
		usleep(100000);
	}
	return listen_fd(l, ev, fd, on_accept);
}

int net_listen_unix(struct net_listener *l, struct ev_loop *ev, const char *path,
		    void (*on_accept)(struct net_listener *, int))
{
	struct sockaddr_un sun;
	struct stat st;
	int fd, r;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A stale socket file from a crashed daemon is removed; a live daemon
	 * answering on it means another instance runs; anything that is not a
	 * socket is never touched. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
		close(fd);
		return -EADDRINUSE;
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			close(fd);
			return -EEXIST;
		}
		unlink(path);
	}
	/* Created 0600 (its owner only), not world-usable for a moment between
	 * bind and chmod. (umask is per process; the daemons create files from
	 * the loop thread only.) */
	{
		mode_t old = umask(0177);
		r = bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ? -errno : 0;
		umask(old);
	}
	if (r < 0) {
		close(fd);
		return r;
	}
	return listen_fd(l, ev, fd, on_accept);
}

void net_listener_close(struct net_listener *l)
{
	if (l->fd < 0)
		return;
	l->closing = true;
	ev_timer_cancel(l->ev, &l->pause);
	if (l->spare_fd >= 0)
		close(l->spare_fd);
	l->spare_fd = -1;
	shutdown(l->fd, SHUT_RDWR);
	close(l->fd);
	l->fd = -1;
}

/* ---- connections ---- */

/* Background output joins the queue once the foreground output is out. */
void net_promote_bulk(struct net_conn *c)
{
	if (!c->bulk_head)
		return;
	*c->txq_tail = c->bulk_head;
	c->txq_tail = c->bulk_tail;
	c->bulk_head = NULL;
	c->bulk_tail = &c->bulk_head;
}

/* Output still to send. With TLS outside its OPEN state only ciphertext can
 * go out (handshake records, a refusal): plaintext waits or is dropped. */
static bool tx_pending(const struct net_conn *c)
{
	if (c->tls && c->tls->st != TLS_OPEN)
		return c->tls->ctq_head != NULL;
	return c->txq_head || c->bulk_head || (c->tls && c->tls->ctq_head);
}

static void conn_maybe_closed(struct net_conn *c)
{
	/* Closed once nothing is in flight and queued output is sent or unsendable. */
	if (c->closing && !c->rx_armed && !c->tx_armed && !c->closed &&
	    (!tx_pending(c) || c->eof)) {
		struct net_tx *tx;
		c->closed = true;
		ev_timer_cancel(c->ev, &c->close_timer);
		/* Output that can no longer be sent is released with an error. */
		if (c->tls)
			tls_drop_output(c);
		net_promote_bulk(c);
		while ((tx = c->txq_head)) {
			c->txq_head = tx->next;
			tx->done(tx, -ECONNRESET);
		}
		c->txq_tail = &c->txq_head;
		c->ops->on_closed(c);
	}
}

static void rx_arm(struct net_conn *c);

/* Hands everything buffered to the owner, which may pause, switch to a
 * direct receive, or close; stops when it consumes nothing (needs more). */
void net_rx_parse(struct net_conn *c)
{
	while (!c->closing && !c->direct_cb && !c->rx_paused && net_rx_avail(c) > 0) {
		size_t before = net_rx_avail(c);
		c->ops->on_rx(c);
		if (net_rx_avail(c) == before)
			break;
	}
}

void net_rx_ended(struct net_conn *c, int res)
{
	/* A FIN only ends the input: replies to what was received still go
	 * out. An error means the peer is gone. */
	if (res < 0)
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

static void rx_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct net_conn *c = container_of(op, struct net_conn, rx_op);
	(void)flags;

	c->rx_armed = false;
	if (c->closing) {
		conn_maybe_closed(c);
		return;
	}
	if (res <= 0) {
		if (res < 0 && res != -ECONNRESET)
			log_debug("recv: %s", strerror(-res));
		if (!c->tls || !tls_rx_end(c, res))
			net_rx_ended(c, res);
		return;
	}
	c->bytes_in += (uint64_t)res;
	if (c->tls) {
		tls_rx(c, res);
		return;
	}
	net_rx_got(c, (size_t)res);
	net_rx_parse(c);
	rx_arm(c);
}

void net_rx_got(struct net_conn *c, size_t n)
{
	if (c->direct_cb) {
		c->direct_done += n;
		if (c->direct_done == c->direct_len) {
			void (*cb)(struct net_conn *, int) = c->direct_cb;
			c->direct_cb = NULL;
			cb(c, 0);
		}
	} else {
		c->rx_end += n;
	}
}

void net_rx_make_room(struct net_conn *c)
{
	if (c->rx_start == c->rx_end) {
		c->rx_start = c->rx_end = 0;
	} else if (c->rx_cap - c->rx_end < c->rx_cap / 4) {
		memmove(c->rxbuf, c->rxbuf + c->rx_start, c->rx_end - c->rx_start);
		c->rx_end -= c->rx_start;
		c->rx_start = 0;
	}
}

static void rx_arm(struct net_conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->tls) {
		tls_pump(c);
		return;
	}
	if (c->rx_armed || c->closing || c->eof || c->rx_eof)
		return;
	if (c->direct_cb) {
		sqe = ev_sqe(c->ev, &c->rx_op);
		io_uring_prep_recv(sqe, c->fd, c->direct_buf + c->direct_done,
				   c->direct_len - c->direct_done, 0);
		c->rx_armed = true;
		return;
	}
	if (c->rx_paused)
		return;
	net_rx_make_room(c);
	if (c->rx_end == c->rx_cap)
		return; /* owner must consume first: a message larger than the buffer
			 * is a protocol error the owner detects */
	sqe = ev_sqe(c->ev, &c->rx_op);
	io_uring_prep_recv(sqe, c->fd, c->rxbuf + c->rx_end, c->rx_cap - c->rx_end, 0);
	c->rx_armed = true;
}

static void tx_flush(struct ev_deferred *d);

/* Completes the queued items covered by `sent` bytes, in order, and trims a
 * partially sent one. */
static void tx_advance(struct net_conn *c, size_t left)
{
	/* the queue on the wire: the owner's, or with TLS the ciphertext */
	struct net_tx **head = c->tls ? &c->tls->ctq_head : &c->txq_head;
	struct net_tx ***tail = c->tls ? &c->tls->ctq_tail : &c->txq_tail;
	size_t sent = left;

	c->bytes_out += left;
	while (*head) {
		struct net_tx *tx = *head;
		bool whole = true;
		for (int i = 0; i < tx->iovcnt; i++) {
			size_t n = MIN(left, tx->iov[i].iov_len);
			tx->iov[i].iov_base = (char *)tx->iov[i].iov_base + n;
			tx->iov[i].iov_len -= n;
			left -= n;
			if (tx->iov[i].iov_len)
				whole = false;
		}
		if (!whole)
			break;
		*head = tx->next;
		if (!*head)
			*tail = head;
		tx->done(tx, 0);
	}
	if (c->tls)
		tls_sent(c, sent);
}

static void tx_after(struct net_conn *c)
{
	if (c->closing && !tx_pending(c)) {
		shutdown(c->fd, SHUT_RDWR);
		conn_maybe_closed(c);
		return;
	}
	if (tx_pending(c))
		ev_defer(c->ev, &c->flush);
}

static void tx_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct net_conn *c = container_of(op, struct net_conn, tx_op);
	(void)flags;

	c->tx_armed = false;
	if (res < 0) {
		net_abort(c); /* the peer is gone */
		return;
	}
	tx_advance(c, (size_t)res);
	tx_after(c);
}

static unsigned tx_gather(struct net_conn *c)
{
	unsigned n = 0;

	for (struct net_tx *tx = c->tls ? c->tls->ctq_head : c->txq_head;
	     tx && n + NET_TX_IOV <= c->tx_iov_cap; tx = tx->next)
		for (int i = 0; i < tx->iovcnt; i++)
			if (tx->iov[i].iov_len)
				c->tx_iov[n++] = tx->iov[i];
	memset(&c->tx_msg, 0, sizeof(c->tx_msg));
	c->tx_msg.msg_iov = c->tx_iov;
	c->tx_msg.msg_iovlen = n;
	return n;
}

/* Runs once per loop pass. The socket usually has room, so the output is
 * written by a direct non-blocking sendmsg (no extra loop pass on the latency
 * path); only what does not fit goes to an io_uring sendmsg that waits. */
static void tx_flush(struct ev_deferred *d)
{
	struct net_conn *c = container_of(d, struct net_conn, flush);
	struct net_tx **head = c->tls ? &c->tls->ctq_head : &c->txq_head;
	struct io_uring_sqe *sqe;
	ssize_t k;

	if (c->closed)
		return;
	if (c->tls) {
		tls_seal(c);                  /* T2: a bounded part of the owner's output */
		ev_undefer(c->ev, &c->flush); /* (its records asked for this flush) */
	} else if (!c->txq_head)
		net_promote_bulk(c);
	if (c->tx_armed || !*head || c->closed)
		return;
	tx_gather(c);
	k = sendmsg(c->fd, &c->tx_msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		net_abort(c); /* the peer is gone */
		return;
	}
	if (k > 0) {
		tx_advance(c, (size_t)k);
		if (!*head || c->closed) {
			tx_after(c);
			return;
		}
		tx_gather(c);
	}
	sqe = ev_sqe(c->ev, &c->tx_op);
	io_uring_prep_sendmsg(sqe, c->fd, &c->tx_msg, MSG_NOSIGNAL);
	c->tx_armed = true;
}

static void close_timeout(struct ev_timer *t)
{
	struct net_conn *c = container_of(t, struct net_conn, close_timer);
	log_info("connection %d: peer does not read its replies; dropping them", c->fd);
	net_abort(c);
}

int net_conn_init(struct net_conn *c, struct ev_loop *ev, int fd, size_t rxbuf,
		  const struct net_conn_ops *ops)
{
	return net_conn_init_tls(c, ev, fd, rxbuf, ops, NULL, false);
}

int net_conn_init_tls(struct net_conn *c, struct ev_loop *ev, int fd, size_t rxbuf,
		      const struct net_conn_ops *ops, struct net_tls_ctx *tls, bool client)
{
	int one = 1;

	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->ev = ev;
	c->ops = ops;
	c->rx_op.cb = rx_cb;
	c->tx_op.cb = tx_cb;
	c->flush.fn = tx_flush;
	c->close_timer.fn = close_timeout;
	c->txq_tail = &c->txq_head;
	c->bulk_tail = &c->bulk_head;
	c->rx_cap = rxbuf;
	c->rxbuf = malloc(rxbuf);
	c->tx_iov_cap = 256;
	c->tx_iov = calloc(c->tx_iov_cap, sizeof(struct iovec));
	if (!c->rxbuf || !c->tx_iov) {
		free(c->rxbuf);
		free(c->tx_iov);
		c->rxbuf = NULL;
		c->tx_iov = NULL;
		return -ENOMEM;
	}
	if (tls && tls_conn_new(c, tls, client)) {
		free(c->rxbuf);
		free(c->tx_iov);
		c->rxbuf = NULL;
		c->tx_iov = NULL;
		return -ENOMEM;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rx_arm(c);
	return 0;
}

const char *net_conn_error(const struct net_conn *c)
{
	return c->tls && c->tls->st == TLS_FAILED ? c->tls->err : NULL;
}

const char *net_conn_tls_desc(const struct net_conn *c)
{
	return c->tls && c->tls->st == TLS_OPEN ? c->tls->desc : "";
}

bool net_rx_looks_tls(const struct net_conn *c)
{
	/* a handshake record (22) of TLS 1.x (legacy version 3.x) */
	return !c->tls && net_rx_avail(c) >= 3 && net_rx_peek(c)[0] == 22 && net_rx_peek(c)[1] == 3;
}

void net_conn_tls_refusal(struct net_conn *c, const void *buf, size_t len)
{
	if (!c->tls)
		return;
	c->tls->refuse_len = MIN(len, sizeof(c->tls->refuse));
	memcpy(c->tls->refuse, buf, c->tls->refuse_len);
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
	rx_arm(c);
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
	if (c->tls) {
		tls_pump(c); /* records may wait inside OpenSSL, recv armed or not */
		return;
	}
	if (c->closing || c->rx_armed || c->direct_cb)
		return;
	/* Bytes that arrived while paused are parsed first. */
	net_rx_parse(c);
	rx_arm(c);
}

void net_send(struct net_conn *c, struct net_tx *tx)
{
	if (c->closed) {
		tx->done(tx, -ECONNRESET);
		return;
	}
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
		return; /* not queued in the background (any more) */
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
	/* Queued output (an error reply, say) still goes out unless the peer is
	 * gone, within a grace period; with TLS, closed by a close_notify. */
	net_promote_bulk(c);
	if (c->tls && !c->eof)
		tls_closing(c);
	if (!tx_pending(c) || c->eof) {
		shutdown(c->fd, SHUT_RDWR);
	} else {
		shutdown(c->fd, SHUT_RD);
		ev_timer_arm(c->ev, &c->close_timer, NET_CLOSE_GRACE_NS);
	}
	conn_maybe_closed(c);
}

void net_abort(struct net_conn *c)
{
	c->eof = true;
	if (!c->closing) {
		net_close(c);
		return;
	}
	/* Fails the send in flight, if any, so that the close completes. */
	shutdown(c->fd, SHUT_RDWR);
	conn_maybe_closed(c);
}

void net_conn_destroy(struct net_conn *c)
{
	ev_undefer(c->ev, &c->flush);
	ev_timer_cancel(c->ev, &c->close_timer);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->rxbuf);
	free(c->tx_iov);
	c->rxbuf = NULL;
	c->tx_iov = NULL;
	if (c->tls)
		tls_conn_free(c);
}

/* ---- dialing ---- */

static void dial_complete(struct ev_op *op, int res, uint32_t flags)
{
	struct net_dial *d = container_of(op, struct net_dial, op);
	int fd = d->fd;
	(void)flags;

	d->busy = false;
	d->fd = -1;
	if (res < 0) {
		close(fd);
		d->done(d, res);
		return;
	}
	d->done(d, fd);
}

static void dial_cancelled(struct ev_op *op, int res, uint32_t flags)
{
	(void)op;
	(void)res;
	(void)flags;
}

int net_dial(struct net_dial *d, struct ev_loop *ev, const struct sockaddr *sa, socklen_t salen,
	     void (*done)(struct net_dial *d, int fd_or_err))
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	d->ev = ev;
	d->fd = fd;
	d->busy = true;
	d->done = done;
	d->op.cb = dial_complete;
	io_uring_prep_connect(ev_sqe(ev, &d->op), fd, sa, salen);
	return 0;
}

void net_dial_cancel(struct net_dial *d)
{
	if (!d->busy)
		return;
	d->cancel_op.cb = dial_cancelled;
	io_uring_prep_cancel(ev_sqe(d->ev, &d->cancel_op), &d->op, 0);
}

void net_dial_close(struct net_dial *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}
