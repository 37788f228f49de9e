/* Sockets on the event loop: listeners with multishot accept, and connections
 * with a resumable receive side and a batched, gather-writing send side.
 * Owns: the socket fd and the receive buffer of a connection.
 * Never: interprets bytes (the protocol owner parses), or frees the owner. */
#ifndef TANDEM_NET_H
#define TANDEM_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "../ev/ev.h"

/* Out of file descriptors (EMFILE, ENFILE), a listener stops accepting for
 * NET_ACCEPT_PAUSE_NS instead of spinning on the failing accept; one pending
 * connection is first accepted with its spare descriptor and handed to the
 * owner, so a control client still gets through. */
#define NET_ACCEPT_PAUSE_NS (100ull * 1000000ull)
struct net_listener {
	int fd;
	int spare_fd; /* /dev/null held for the EMFILE case; -1 while used */
	struct ev_loop *ev;
	struct ev_op op;
	struct ev_timer pause;
	void (*on_accept)(struct net_listener *l, int fd);
	bool closing, paused;
	uint64_t emfile; /* accepts that found no descriptor */
};

/* Binds and listens on addr (host:port); starts accepting. Returns 0 or -errno. */
int net_listen(struct net_listener *l, struct ev_loop *ev, const char *addr,
	       void (*on_accept)(struct net_listener *, int));
int net_listen_unix(struct net_listener *l, struct ev_loop *ev, const char *path,
		    void (*on_accept)(struct net_listener *, int));
void net_listener_close(struct net_listener *l);

/* Descriptors a front-end leaves free for the control and replication
 * listeners and the volumes: net_fd_spare() is false when fd (just
 * accepted: the lowest free number, so about the count in use) is within
 * NET_FD_RESERVE of RLIMIT_NOFILE. The caller then closes it. */
#define NET_FD_RESERVE 64
bool net_fd_spare(int fd);
/* Why a front-end refuses a new connection fd, or NULL: descriptors running
 * short (net_fd_spare), nconns already at max (max-connections), or same
 * connections from its host already at max_same (max-connections-per-address). */
const char *net_refusal(int fd, unsigned nconns, unsigned max, unsigned same, unsigned max_same);
/* The peer's host (address without port) of a connected socket, for
 * per-address limits; "" when unknown. */
#define NET_HOST_MAX 64
void net_peer_host(int fd, char out[NET_HOST_MAX]);

/* A piece of output: up to NET_TX_IOV buffers sent in order. Embed it in the
 * object that owns the buffers; done() runs once the last byte left, or with
 * an error when the connection died first. The buffers must stay valid until
 * then. */
#define NET_TX_IOV 3
struct net_tx {
	struct net_tx *next;
	struct iovec iov[NET_TX_IOV];
	int iovcnt;
	void (*done)(struct net_tx *tx, int err);
	uint64_t wire_end; /* net's own (TLS): where its ciphertext ends */
};

/* An outgoing TCP connection on the loop. done runs once, from a completion,
 * with the connected socket (the caller owns it) or -errno; never inside
 * net_dial itself. */
struct net_dial {
	struct ev_loop *ev;
	struct ev_op op, cancel_op;
	int fd;    /* the socket while connecting, else -1 */
	bool busy; /* started, done not yet run */
	void (*done)(struct net_dial *d, int fd_or_err);
};
/* 0 when started (done follows), or -errno (done never runs). */
int net_dial(struct net_dial *d, struct ev_loop *ev, const struct sockaddr *sa, socklen_t salen,
	     void (*done)(struct net_dial *d, int fd_or_err));
/* Ends a connect in progress early; done still runs (with -ECANCELED, or
 * with the socket if it was already connected). */
void net_dial_cancel(struct net_dial *d);
/* Before the owner goes: closes a socket still connecting. Only when done
 * can no longer run (the loop is being torn down). */
void net_dial_close(struct net_dial *d);

struct net_conn;
struct net_tls;
struct net_tls_ctx;
struct net_conn_ops {
	/* New bytes in the receive buffer: consume them with net_rx_peek/consume,
	 * or hand a destination with net_rx_direct. */
	void (*on_rx)(struct net_conn *c);
	/* The connection is closed and no net operation is in flight any more. */
	void (*on_closed)(struct net_conn *c);
	/* Optional: the peer closed its sending side (FIN). Reading has stopped;
	 * output still goes out. The owner calls net_close() once it has
	 * answered what it received. Without it, net_close() is called at once
	 * (queued output is still flushed). */
	void (*on_eof)(struct net_conn *c);
};

struct net_conn {
	int fd;
	struct ev_loop *ev;
	const struct net_conn_ops *ops;
	struct ev_op rx_op, tx_op;
	struct ev_deferred flush;
	struct ev_timer close_timer; /* bounds how long a close waits for output */
	uint8_t *rxbuf;
	size_t rx_cap, rx_start, rx_end;
	/* direct receive into a caller buffer (large payloads) */
	uint8_t *direct_buf;
	size_t direct_len, direct_done;
	void (*direct_cb)(struct net_conn *c, int err);
	struct net_tx *txq_head, **txq_tail;
	struct net_tx *bulk_head, **bulk_tail; /* net_send_bulk: after txq */
	struct net_tx *tx_inflight_head; /* items covered by the sendmsg in flight */
	struct msghdr tx_msg;
	struct iovec *tx_iov;
	unsigned tx_iov_cap;
	/* eof: the peer is gone, output cannot be sent; rx_eof: only its FIN */
	bool rx_armed, tx_armed, rx_paused, closing, closed, eof, rx_eof;
	uint64_t bytes_in, bytes_out; /* on the wire: ciphertext with TLS */
	struct net_tls *tls;          /* NULL: plaintext (tls.h) */
};

int net_conn_init(struct net_conn *c, struct ev_loop *ev, int fd, size_t rxbuf,
		  const struct net_conn_ops *ops);
/* The same with TLS 1.3 over the socket when tls is not NULL (tls.h): the
 * dialer is the client. The owner sees plaintext only, after the TLS
 * handshake; output queued before it waits. */
int net_conn_init_tls(struct net_conn *c, struct ev_loop *ev, int fd, size_t rxbuf,
		      const struct net_conn_ops *ops, struct net_tls_ctx *tls, bool client);
/* Why the connection ended when the TLS layer ended it (a bad record, an
 * alert, a peer without TLS), else NULL. Valid until net_conn_destroy. */
const char *net_conn_error(const struct net_conn *c);
/* "TLSv1.3 TLS_AES_128_GCM_SHA256" once the TLS handshake is done; "" for
 * plaintext or before. For status. */
const char *net_conn_tls_desc(const struct net_conn *c);
/* A plaintext connection whose buffered input starts with a TLS record
 * header: the peer speaks TLS. For the owner's "bad header" message. */
bool net_rx_looks_tls(const struct net_conn *c);
/* A TLS acceptor: what it sends (as it is, unencrypted) to a peer that
 * turns out to speak plaintext, before it closes: the owner's protocol
 * error saying so. Copied; at most 256 bytes. */
void net_conn_tls_refusal(struct net_conn *c, const void *buf, size_t len);
/* Bytes buffered and not yet consumed. */
static inline size_t net_rx_avail(const struct net_conn *c)
{
	return c->rx_end - c->rx_start;
}
static inline const uint8_t *net_rx_peek(const struct net_conn *c)
{
	return c->rxbuf + c->rx_start;
}
void net_rx_consume(struct net_conn *c, size_t n);
/* Receive exactly len bytes into buf (buffered bytes first), then call cb. */
void net_rx_direct(struct net_conn *c, void *buf, size_t len,
		   void (*cb)(struct net_conn *c, int err));
/* Stop / restart reading from the socket (backpressure). */
void net_rx_pause(struct net_conn *c);
void net_rx_resume(struct net_conn *c);
/* Queue output; it is written before the loop next sleeps. */
void net_send(struct net_conn *c, struct net_tx *tx);
/* Queue background output (resync): it goes to the socket only when no
 * net_send output is waiting, so later foreground output overtakes it. */
void net_send_bulk(struct net_conn *c, struct net_tx *tx);
/* If tx still waits in the background queue: it and the background output
 * queued before it join the foreground queue now, so that output queued
 * after this call no longer overtakes them. */
void net_bulk_pin(struct net_conn *c, struct net_tx *tx);
/* Send then close: the queued output is flushed first (for at most
 * NET_CLOSE_GRACE_NS; a peer that does not read is then cut off). */
#define NET_CLOSE_GRACE_NS (10ull * 1000000000ull)
void net_close(struct net_conn *c);
/* Close now, dropping queued output. */
void net_abort(struct net_conn *c);
/* Releases buffers; only after on_closed. */
void net_conn_destroy(struct net_conn *c);

#endif
