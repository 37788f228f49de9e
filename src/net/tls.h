/* TLS 1.3 as an optional layer of net_conn, in user space: OpenSSL runs the
 * handshake over our own BIO, then the records are ours (tls_rec.h, with
 * the traffic secrets OpenSSL negotiated, as kernel TLS takes them).
 * Ciphertext goes in and out through the connection's io_uring recv and
 * gathered sendmsg, the owner reads and writes plaintext through the usual
 * net_rx_* / net_send calls.
 * Owns: the SSL_CTX (net_tls_ctx), each connection's SSL object, its
 * ciphertext buffers and the plaintext items sealed but not yet on the wire.
 * Never: parses the owner's protocol, or lets a byte received after a TLS
 * error reach the owner (the connection is aborted at the first one).
 *
 * Keys: with certificates configured (cert, key, ca) each end presents its
 * certificate and verifies the peer's against ca; otherwise both ends use a
 * TLS 1.3 external PSK per cluster, NET_TLS_PSK_LEN bytes of
 * HKDF-SHA256(salt = NET_TLS_PSK_LABEL, ikm = cluster secret, info = cluster
 * name), identity "tandem/" + cluster name (net_tls_psk_derive). The PSK
 * handshake still runs (EC)DHE, so traffic keys are fresh per connection.
 *
 * Connection state (struct net_tls.st, written by tls_set_state only):
 *   HANDSHAKE -> OPEN        [pump_once: SSL_do_handshake done]
 *   HANDSHAKE|OPEN -> FAILED [tls_fail: any TLS error, EOF inside the
 *                             handshake; plain_peer: bytes that are no TLS]
 * Invariants:
 *   T1. Plaintext reaches the owner only in OPEN, and never after FAILED:
 *       tls_fail aborts the connection before anything more is parsed.
 *   T2. Owner output is sealed only in OPEN, in queue order, and only while
 *       less than NET_TLS_SEAL_AHEAD ciphertext bytes wait for the socket
 *       (one sealing of at most 64 KiB may pass it), so foreground output
 *       still overtakes the background queue.
 *   T3. A plaintext net_tx completes (done) once the last ciphertext byte
 *       that carries it left, or with an error when the connection died.
 *   T4. Ciphertext leaves in the order it was produced (by OpenSSL in the
 *       handshake, by tls_rec after it): one queue.
 *   T5. Once OPEN, every record is ours (tls_rec.h R1, R2): OpenSSL has
 *       consumed no byte after the handshake (no read-ahead; checked with
 *       SSL_has_pending when switching) and writes none.
 */
#ifndef TANDEM_NET_TLS_H
#define TANDEM_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"
#include "tls_rec.h"

#define NET_TLS_PSK_LEN 32
#define NET_TLS_PSK_LABEL "tandem tls 1.3 psk v1"
#define NET_TLS_IDENT_MAX 80 /* "tandem/" + a cluster name */
#define NET_TLS_MAX_PSK 64   /* clusters one witness serves */

/* Ciphertext is written into chunks of this size that are queued as net_tx
 * items; a record may span two chunks (the sendmsg gathers them). */
#define NET_TLS_CHUNK (64u * 1024u)
#define NET_TLS_SEAL_AHEAD (128u * 1024u) /* T2 */
/* Pieces of owner output shorter than this are gathered into one record
 * (headers, small messages); longer ones are sealed straight from the
 * owner's buffer into records of up to 16 KiB. */
#define NET_TLS_SMALL (8u * 1024u)
#define NET_TLS_STAGE (16u * 1024u)
#define NET_TLS_CIN (256u * 1024u) /* ciphertext received, not yet decrypted */
/* Both directions take new keys (KeyUpdate) after this much output: far
 * below what AES-GCM may carry under one key (RFC 8446 5.5: 2^24.5 full
 * records, about 390 GB), which one replication connection can reach. */
#define NET_TLS_REKEY_BYTES (64ull << 30)

struct net_tls_opts {
	/* all three, or none: PSKs only */
	const char *cert, *key, *ca;
};

struct net_tls_ctx;

/* HKDF-SHA256 as above. 0 or -EINVAL (empty secret or cluster). */
int net_tls_psk_derive(const char *secret, const char *cluster, uint8_t key[NET_TLS_PSK_LEN]);
/* A context for both ends (dialer and acceptor). 0, or -errno with a
 * one-line reason in err (a certificate file that does not load...). */
int net_tls_ctx_new(const struct net_tls_opts *o, struct net_tls_ctx **out, char *err,
		    size_t errlen);
/* The PSK of one cluster. A dialer offers the first one added; an acceptor
 * takes whichever the peer names. 0 or -errno. */
int net_tls_ctx_add_cluster(struct net_tls_ctx *x, const char *cluster, const char *secret);
bool net_tls_ctx_uses_certs(const struct net_tls_ctx *x);
/* Tests: rekey after this many bytes instead of NET_TLS_REKEY_BYTES. */
void net_tls_ctx_set_rekey(struct net_tls_ctx *x, uint64_t bytes);
void net_tls_ctx_free(struct net_tls_ctx *x); /* NULL: no-op */

/* A blocking TLS client on a connected blocking socket, for command-line
 * tools (tandemctl witness-status), off the event loop. connect: 0, or
 * -errno with a one-line reason in err. read / write: bytes, or -errno
 * (0: the peer closed). pending: decrypted bytes wait (no poll needed). */
struct net_tls_sync;
int net_tls_sync_connect(struct net_tls_ctx *x, int fd, struct net_tls_sync **out, char *err,
			 size_t errlen);
long net_tls_sync_read(struct net_tls_sync *s, void *buf, size_t len);
long net_tls_sync_write(struct net_tls_sync *s, const void *buf, size_t len);
bool net_tls_sync_pending(const struct net_tls_sync *s);
void net_tls_sync_free(struct net_tls_sync *s); /* NULL: no-op; the fd stays open */

/* Per connection. Used by net.c only (net.h is the owners' interface). */
enum tls_state { TLS_HANDSHAKE = 0, TLS_OPEN, TLS_FAILED };
struct tls_chunk;
struct net_tls {
	struct net_tls_ctx *x;
	void *ssl; /* SSL * */
	void *bio; /* BIO *, ours (tls.c) */
	bool client;
	enum tls_state st;    /* tls_set_state only */
	bool pumping, repump; /* tls_pump is on the stack; run it once more */
	bool want_read;       /* OpenSSL needs ciphertext: the recv is armed */
	bool notified;        /* close_notify queued */
	bool ku_reply;        /* the peer asked for new keys: ours go out first */
	/* ciphertext received (cin) and produced (the chunk queue) */
	uint8_t *cin;
	size_t cin_start, cin_end;
	uint64_t cin_total;
	struct net_tx *ctq_head, **ctq_tail;
	struct tls_chunk *wtail, *free_chunks;
	unsigned nfree;
	uint64_t wire_total, wire_sent; /* ciphertext bytes produced / sent */
	uint64_t rekey_at;              /* wire_total that asks for new keys */
	uint64_t rekeys;                /* KeyUpdates sent of our own accord */
	uint64_t rekeys_in;             /* KeyUpdates received */
	/* owner items sealed, waiting for their ciphertext to leave (T3);
	 * from `unassigned` on, their end is not known yet (in the stage) */
	struct net_tx *sealed_head, **sealed_tail, *unassigned;
	uint8_t *stage;
	size_t stage_len;
	/* Once OPEN, records are protected here (tls_rec.h), not by OpenSSL's
	 * record layer: the traffic secrets the handshake logs (sec, wiped
	 * once keyed), both directions, and plaintext opened but not yet
	 * taken by the owner (pt). */
	bool rec;
	uint8_t have_sec; /* bit 0 client's, bit 1 server's */
	uint8_t sec[2][TLS_REC_SECRET];
	struct tls_rec_dir rd, wr;
	uint8_t *pt;
	size_t pt_start, pt_end;
	/* what a plaintext peer gets before the close (an acceptor's owner
	 * sets it: its protocol's error message) */
	uint8_t refuse[256];
	size_t refuse_len;
	char desc[64]; /* version and cipher, once OPEN */
	char err[200];
};

int tls_conn_new(struct net_conn *c, struct net_tls_ctx *x, bool client);
void tls_conn_free(struct net_conn *c);
/* The receive side: arm the recv, decrypt, hand over (replaces rx_arm). */
void tls_pump(struct net_conn *c);
/* res > 0 ciphertext bytes arrived in the armed recv. */
void tls_rx(struct net_conn *c, int res);
/* The recv ended the input (res <= 0); true when the TLS layer took it. */
bool tls_rx_end(struct net_conn *c, int res);
/* Before a flush: seal owner output (T2), close_notify when closing. */
void tls_seal(struct net_conn *c);
/* After tx_advance: complete sealed items now on the wire (T3). */
void tls_sent(struct net_conn *c, size_t n);
/* net_close: what can still be sent. */
void tls_closing(struct net_conn *c);
/* conn closed: release sealed items and ciphertext. */
void tls_drop_output(struct net_conn *c);

#endif
