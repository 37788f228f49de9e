/* TLS 1.3 in user space under net_conn: see tls.h for the keys, the states
 * and the invariants T1-T4.
 *
 * Handshake. OpenSSL runs it over one BIO of ours: its read side takes
 * ciphertext from `cin`, which the connection's io_uring recv fills; its
 * write side appends what OpenSSL produces to the tail ciphertext chunk, a
 * net_tx on the ciphertext queue that net.c gathers into its sendmsg.
 * OpenSSL reads record by record (no read-ahead), so when the handshake
 * ends every byte after it is still in `cin`. Its keylog callback hands us
 * the two application traffic secrets.
 *
 * Data path, once OPEN (tls_rec.c). Owner output of NET_TLS_SMALL bytes and
 * more is sealed straight from the owner's buffer into the tail chunk, in
 * records of up to 16 KiB; shorter pieces are gathered in `stage` first, so
 * a header and a small message share one record. Input is opened record by
 * record from `cin` straight into the owner's net_rx_direct destination or
 * receive buffer when the record fits there, else into `pt`, from which the
 * owner takes it. Besides application data only alerts (close_notify ends
 * the input, any other the connection) and KeyUpdate are accepted.
 *
 * Errors. A record that fails its check, an alert, a handshake that fails,
 * bytes that are no TLS record at all, or the end of the input inside the
 * handshake: tls_fail logs one line, keeps the reason (net_conn_error) and
 * aborts the connection before anything more is handed over (T1). */
#include "tls.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "../common/log.h"
#include "../common/util.h"
#include "net_int.h"

#define TLS_CHUNKS_KEPT 8            /* idle ciphertext chunks a connection keeps */
/* a record is cut short to fill a chunk's tail only if this much fits */
#define TLS_REC_TAIL_MIN 4096u
#define TLS_WRITE_MAX (64u * 1024u) /* sealed at once straight from the owner (T2) */

struct tls_psk {
	char identity[NET_TLS_IDENT_MAX];
	uint8_t key[NET_TLS_PSK_LEN];
};

struct net_tls_ctx {
	SSL_CTX *ctx;
	BIO_METHOD *meth;
	bool certs;
	uint64_t rekey_bytes;
	unsigned npsk;
	struct tls_psk psk[NET_TLS_MAX_PSK];
};

struct tls_chunk {
	struct net_tx tx;
	struct net_conn *c;
	struct tls_chunk *next_free;
	size_t fill;
	uint8_t data[NET_TLS_CHUNK];
};

/* TLS_AES_128_GCM_SHA256: the cipher the PSK sessions name (its hash,
 * SHA-256, is the one every suite offered here uses). */
static const unsigned char aes128gcm_id[2] = { 0x13, 0x01 };

/* ---- keys ---- */

int net_tls_psk_derive(const char *secret, const char *cluster, uint8_t key[NET_TLS_PSK_LEN])
{
	EVP_PKEY_CTX *p;
	size_t len = NET_TLS_PSK_LEN;
	int ok;

	if (!secret || !*secret || !cluster || !*cluster)
		return -EINVAL;
	p = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	if (!p)
		return -ENOMEM;
	ok = EVP_PKEY_derive_init(p) > 0 && EVP_PKEY_CTX_set_hkdf_md(p, EVP_sha256()) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_salt(p, (const unsigned char *)NET_TLS_PSK_LABEL,
					 (int)strlen(NET_TLS_PSK_LABEL)) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_key(p, (const unsigned char *)secret, (int)strlen(secret)) >
		     0 &&
	     EVP_PKEY_CTX_add1_hkdf_info(p, (const unsigned char *)cluster, (int)strlen(cluster)) >
		     0 &&
	     EVP_PKEY_derive(p, key, &len) > 0 && len == NET_TLS_PSK_LEN;
	EVP_PKEY_CTX_free(p);
	return ok ? 0 : -EIO;
}

static SSL_SESSION *psk_session(SSL *ssl, const struct tls_psk *k)
{
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes128gcm_id);
	SSL_SESSION *s;

	if (!cipher)
		return NULL;
	s = SSL_SESSION_new();
	if (!s)
		return NULL;
	if (!SSL_SESSION_set1_master_key(s, k->key, NET_TLS_PSK_LEN) ||
	    !SSL_SESSION_set_cipher(s, cipher) ||
	    !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
		SSL_SESSION_free(s);
		return NULL;
	}
	return s;
}

/* The dialer offers its cluster's PSK. */
static int psk_use(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		   SSL_SESSION **sess)
{
	struct net_tls_ctx *x = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes128gcm_id);

	*sess = NULL;
	*id = NULL;
	*idlen = 0;
	if (!x->npsk || !cipher)
		return 1;
	/* after a HelloRetryRequest: only a PSK of the chosen hash */
	if (md && md != SSL_CIPHER_get_handshake_digest(cipher))
		return 1;
	*sess = psk_session(ssl, &x->psk[0]);
	if (!*sess)
		return 0;
	*id = (const unsigned char *)x->psk[0].identity;
	*idlen = strlen(x->psk[0].identity);
	return 1;
}

/* The acceptor takes the PSK the dialer names, if it knows it; else the
 * handshake fails (no certificate to fall back on). */
static int psk_find(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	struct net_tls_ctx *x = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	struct net_conn *c = SSL_get_app_data(ssl);

	*sess = NULL;
	for (unsigned i = 0; i < x->npsk; i++)
		if (strlen(x->psk[i].identity) == idlen && !memcmp(x->psk[i].identity, id, idlen)) {
			*sess = psk_session(ssl, &x->psk[i]);
			return *sess ? 1 : 0;
		}
	if (c && c->tls)
		log_escape(c->tls->err, sizeof(c->tls->err), (const char *)id,
			   MIN(idlen, (size_t)NET_TLS_IDENT_MAX));
	return 1;
}

/* The application traffic secrets, as OpenSSL logs them: "LABEL <client
 * random, hex> <secret, hex>". Lines of the blocking client (no connection)
 * and every other label are ignored. */
static void keylog(const SSL *ssl, const char *line)
{
	struct net_conn *c = SSL_get_app_data(ssl);
	static const char *const labels[2] = { "CLIENT_TRAFFIC_SECRET_0 ",
					       "SERVER_TRAFFIC_SECRET_0 " };
	const char *h;

	if (!c || !c->tls)
		return;
	for (int i = 0; i < 2; i++) {
		size_t ll = strlen(labels[i]);
		if (strncmp(line, labels[i], ll))
			continue;
		h = strchr(line + ll, ' ');
		if (!h || strlen(h + 1) != 2 * TLS_REC_SECRET)
			return;
		h++;
		for (int k = 0; k < TLS_REC_SECRET; k++) {
			int hi = hex_digit(h[2 * k]), lo = hex_digit(h[2 * k + 1]);
			if (hi < 0 || lo < 0)
				return;
			c->tls->sec[i][k] = (uint8_t)(hi << 4 | lo);
		}
		c->tls->have_sec |= (uint8_t)(1u << i);
	}
}

/* ---- our BIO: ciphertext in from cin, out to the chunk queue ---- */

static struct tls_chunk *chunk_get(struct net_conn *c);

static int bio_write(BIO *b, const char *buf, int len)
{
	struct net_conn *c = BIO_get_data(b);
	struct net_tls *t = c->tls;
	size_t left = (size_t)len;

	BIO_clear_retry_flags(b);
	while (left) {
		struct tls_chunk *ch = t->wtail;
		size_t n;
		if (!ch || ch->fill == NET_TLS_CHUNK) {
			ch = chunk_get(c);
			if (!ch)
				return -1;
			ch->tx.next = NULL;
			*t->ctq_tail = &ch->tx;
			t->ctq_tail = &ch->tx.next;
			t->wtail = ch;
		}
		n = MIN(left, NET_TLS_CHUNK - ch->fill);
		memcpy(ch->data + ch->fill, buf, n);
		ch->fill += n;
		ch->tx.iov[0].iov_len += n; /* (its base moves as tx_advance sends) */
		buf += n;
		left -= n;
	}
	t->wire_total += (uint64_t)len;
	ev_defer(c->ev, &c->flush);
	return len;
}

static int bio_read(BIO *b, char *buf, int len)
{
	struct net_conn *c = BIO_get_data(b);
	struct net_tls *t = c->tls;
	size_t n = MIN((size_t)len, t->cin_end - t->cin_start);

	BIO_clear_retry_flags(b);
	if (!n) {
		BIO_set_retry_read(b);
		return -1;
	}
	memcpy(buf, t->cin + t->cin_start, n);
	t->cin_start += n;
	if (t->cin_start == t->cin_end)
		t->cin_start = t->cin_end = 0;
	return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct net_conn *c = BIO_get_data(b);
	(void)num;
	(void)ptr;

	switch (cmd) {
	case BIO_CTRL_FLUSH: return 1;
	case BIO_CTRL_PENDING: return c ? (long)(c->tls->cin_end - c->tls->cin_start) : 0;
	default: return 0;
	}
}

static int bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static int bio_destroy(BIO *b)
{
	(void)b;
	return 1;
}

/* ---- context ---- */

static void ssl_reason(char *out, size_t len)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	snprintf(out, len, "%s", r ? r : "unknown error");
	ERR_clear_error();
}

int net_tls_ctx_new(const struct net_tls_opts *o, struct net_tls_ctx **out, char *err,
		    size_t errlen)
{
	struct net_tls_ctx *x = calloc(1, sizeof(*x));
	char why[160];

	if (!x)
		return -ENOMEM;
	x->ctx = SSL_CTX_new(TLS_method());
	x->meth = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tandem-net");
	if (!x->ctx || !x->meth || !BIO_meth_set_write(x->meth, bio_write) ||
	    !BIO_meth_set_read(x->meth, bio_read) || !BIO_meth_set_ctrl(x->meth, bio_ctrl) ||
	    !BIO_meth_set_create(x->meth, bio_create) ||
	    !BIO_meth_set_destroy(x->meth, bio_destroy))
		goto ssl_fail;
	SSL_CTX_set_app_data(x->ctx, x);
	x->rekey_bytes = NET_TLS_REKEY_BYTES;
	if (!SSL_CTX_set_min_proto_version(x->ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(x->ctx, TLS1_3_VERSION) ||
	    /* AES-GCM first (AES-NI), then ChaCha20; the acceptor's order rules */
	    !SSL_CTX_set_ciphersuites(x->ctx,
				      "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"))
		goto ssl_fail;
	SSL_CTX_set_options(x->ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET |
					    SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_session_cache_mode(x->ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(x->ctx, 0);
	/* no read-ahead: the handshake must leave what follows it in cin */
	SSL_CTX_set_read_ahead(x->ctx, 0);
	SSL_CTX_set_keylog_callback(x->ctx, keylog);
	if (o && o->cert && *o->cert) {
		if (SSL_CTX_use_certificate_chain_file(x->ctx, o->cert) != 1) {
			ssl_reason(why, sizeof(why));
			snprintf(err, errlen, "tls-cert %s: %s", o->cert, why);
			goto fail;
		}
		if (SSL_CTX_use_PrivateKey_file(x->ctx, o->key, SSL_FILETYPE_PEM) != 1 ||
		    SSL_CTX_check_private_key(x->ctx) != 1) {
			ssl_reason(why, sizeof(why));
			snprintf(err, errlen, "tls-key %s: %s", o->key, why);
			goto fail;
		}
		if (SSL_CTX_load_verify_locations(x->ctx, o->ca, NULL) != 1) {
			ssl_reason(why, sizeof(why));
			snprintf(err, errlen, "tls-ca %s: %s", o->ca, why);
			goto fail;
		}
		/* both ends show a certificate and check the other's */
		SSL_CTX_set_verify(x->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		x->certs = true;
	} else {
		SSL_CTX_set_psk_use_session_callback(x->ctx, psk_use);
		SSL_CTX_set_psk_find_session_callback(x->ctx, psk_find);
	}
	*out = x;
	return 0;
ssl_fail:
	ssl_reason(why, sizeof(why));
	snprintf(err, errlen, "TLS setup: %s", why);
fail:
	net_tls_ctx_free(x);
	return -EINVAL;
}

int net_tls_ctx_add_cluster(struct net_tls_ctx *x, const char *cluster, const char *secret)
{
	struct tls_psk *k;
	int r;

	if (x->npsk == NET_TLS_MAX_PSK)
		return -ENOSPC;
	k = &x->psk[x->npsk];
	if (strlen(cluster) + sizeof("tandem/") > sizeof(k->identity))
		return -ENAMETOOLONG;
	snprintf(k->identity, sizeof(k->identity), "tandem/%s", cluster);
	r = net_tls_psk_derive(secret, cluster, k->key);
	if (r)
		return r;
	x->npsk++;
	return 0;
}

void net_tls_ctx_set_rekey(struct net_tls_ctx *x, uint64_t bytes)
{
	x->rekey_bytes = bytes;
}

bool net_tls_ctx_uses_certs(const struct net_tls_ctx *x)
{
	return x && x->certs;
}

void net_tls_ctx_free(struct net_tls_ctx *x)
{
	if (!x)
		return;
	SSL_CTX_free(x->ctx);
	BIO_meth_free(x->meth);
	OPENSSL_cleanse(x->psk, sizeof(x->psk));
	free(x);
}

/* ---- blocking client (command-line tools) ---- */

int net_tls_sync_connect(struct net_tls_ctx *x, int fd, struct net_tls_sync **out, char *err,
			 size_t errlen)
{
	SSL *ssl = SSL_new(x->ctx);
	char why[160];
	int r;

	if (!ssl || !SSL_set_fd(ssl, fd)) {
		SSL_free(ssl);
		ssl_reason(why, sizeof(why));
		snprintf(err, errlen, "TLS setup: %s", why);
		return -ENOMEM;
	}
	SSL_set_connect_state(ssl);
	r = SSL_connect(ssl);
	if (r != 1) {
		int e = SSL_get_error(ssl, r);
		ssl_reason(why, sizeof(why));
		snprintf(err, errlen, "TLS handshake failed: %s",
			 e == SSL_ERROR_SYSCALL && !strcmp(why, "unknown error")
				 ? "the peer closed the connection (tls = off there?)"
				 : why);
		SSL_free(ssl);
		return -EPROTO;
	}
	*out = (struct net_tls_sync *)ssl;
	return 0;
}

long net_tls_sync_read(struct net_tls_sync *s, void *buf, size_t len)
{
	SSL *ssl = (SSL *)s;
	int n = SSL_read(ssl, buf, (int)MIN(len, (size_t)INT32_MAX));

	if (n > 0)
		return n;
	n = SSL_get_error(ssl, n);
	ERR_clear_error();
	return n == SSL_ERROR_ZERO_RETURN ? 0 : -EPROTO;
}

long net_tls_sync_write(struct net_tls_sync *s, const void *buf, size_t len)
{
	int n = SSL_write((SSL *)s, buf, (int)MIN(len, (size_t)INT32_MAX));

	ERR_clear_error();
	return n > 0 ? n : -EPROTO;
}

bool net_tls_sync_pending(const struct net_tls_sync *s)
{
	return SSL_pending((const SSL *)s) > 0;
}

void net_tls_sync_free(struct net_tls_sync *s)
{
	SSL_free((SSL *)s);
}

/* ---- connection ---- */

/* The state's one writer (tls.h lists the transitions). */
static void tls_set_state(struct net_tls *t, enum tls_state to)
{
	static const bool legal[TLS_FAILED + 1][TLS_FAILED + 1] = {
		[TLS_HANDSHAKE] = { [TLS_OPEN] = true, [TLS_FAILED] = true },
		[TLS_OPEN] = { [TLS_FAILED] = true },
	};

	if (!legal[t->st][to]) {
		log_err("TLS: illegal state change %d -> %d", (int)t->st, (int)to);
		assert(!"illegal TLS state transition");
		return;
	}
	t->st = to;
}

static void chunk_done(struct net_tx *tx, int err)
{
	struct tls_chunk *ch = container_of(tx, struct tls_chunk, tx);
	struct net_tls *t = ch->c->tls;
	(void)err;

	if (t->wtail == ch)
		t->wtail = NULL;
	if (t->nfree < TLS_CHUNKS_KEPT) {
		ch->next_free = t->free_chunks;
		t->free_chunks = ch;
		t->nfree++;
	} else {
		free(ch);
	}
}

static struct tls_chunk *chunk_get(struct net_conn *c)
{
	struct net_tls *t = c->tls;
	struct tls_chunk *ch = t->free_chunks;

	if (ch) {
		t->free_chunks = ch->next_free;
		t->nfree--;
	} else {
		ch = malloc(sizeof(*ch));
		if (!ch)
			return NULL;
	}
	ch->c = c;
	ch->fill = 0;
	ch->tx.iov[0].iov_base = ch->data;
	ch->tx.iov[0].iov_len = 0;
	ch->tx.iovcnt = 1;
	ch->tx.done = chunk_done;
	return ch;
}

int tls_conn_new(struct net_conn *c, struct net_tls_ctx *x, bool client)
{
	struct net_tls *t = calloc(1, sizeof(*t));
	SSL *ssl = NULL;
	BIO *bio = NULL;

	if (!t)
		return -ENOMEM;
	t->x = x;
	t->client = client;
	t->ctq_tail = &t->ctq_head;
	t->sealed_tail = &t->sealed_head;
	t->cin = malloc(NET_TLS_CIN);
	t->stage = malloc(NET_TLS_STAGE);
	t->pt = malloc(TLS_REC_CIPHER_MAX);
	if (t->cin && t->stage && t->pt)
		ssl = SSL_new(x->ctx);
	if (ssl)
		bio = BIO_new(x->meth);
	if (!bio) {
		SSL_free(ssl);
		free(t->cin);
		free(t->stage);
		free(t->pt);
		free(t);
		ERR_clear_error();
		return -ENOMEM;
	}
	BIO_set_data(bio, c);
	SSL_set_bio(ssl, bio, bio); /* one reference, for both directions */
	SSL_set_app_data(ssl, c);
	if (client)
		SSL_set_connect_state(ssl);
	else
		SSL_set_accept_state(ssl);
	t->ssl = ssl;
	t->bio = bio;
	c->tls = t;
	return 0;
}

void tls_conn_free(struct net_conn *c)
{
	struct net_tls *t = c->tls;
	struct tls_chunk *ch;

	if (!t)
		return;
	tls_drop_output(c);
	SSL_free(t->ssl);
	while ((ch = t->free_chunks)) {
		t->free_chunks = ch->next_free;
		free(ch);
	}
	OPENSSL_cleanse(t->stage, NET_TLS_STAGE);
	free(t->stage);
	free(t->cin);
	if (t->rec) {
		tls_rec_free(&t->rd);
		tls_rec_free(&t->wr);
	}
	OPENSSL_cleanse(t->sec, sizeof(t->sec));
	OPENSSL_cleanse(t->pt, TLS_REC_CIPHER_MAX);
	free(t->pt);
	free(t);
	c->tls = NULL;
}

/* The one way into FAILED (T1): log, keep the reason, cut the connection. */
__attribute__((format(printf, 2, 3))) static void tls_fail(struct net_conn *c, const char *fmt, ...)
{
	struct net_tls *t = c->tls;
	char host[NET_HOST_MAX];
	bool was_open = t->st == TLS_OPEN;
	va_list ap;

	if (t->st == TLS_FAILED)
		return;
	tls_set_state(t, TLS_FAILED);
	va_start(ap, fmt);
	vsnprintf(t->err, sizeof(t->err), fmt, ap);
	va_end(ap);
	ERR_clear_error();
	net_peer_host(c->fd, host);
	log_warn("TLS with %s: %s: connection dropped", host[0] ? host : "?", t->err);
	/* In the handshake the alert OpenSSL queued goes out (the peer then
	 * says why too); after it, nothing more does. */
	if (was_open)
		net_abort(c);
	else
		net_close(c);
}

/* Why the last OpenSSL call failed, in words an operator can act on. */
static void fail_ssl(struct net_conn *c, int ret, const char *what)
{
	struct net_tls *t = c->tls;
	SSL *ssl = t->ssl;
	char reason[160], ident[NET_TLS_IDENT_MAX + 1];
	long v;

	int e = SSL_get_error(ssl, ret); /* (before the error queue is read) */

	snprintf(ident, sizeof(ident), "%s", t->err); /* psk_find's unknown name */
	ssl_reason(reason, sizeof(reason));
	if (e == SSL_ERROR_SYSCALL && !strcmp(reason, "unknown error"))
		snprintf(reason, sizeof(reason), "internal error");
	if (t->st == TLS_OPEN) {
		tls_fail(c, "%s: %s", what, reason);
		return;
	}
	v = SSL_get_verify_result(ssl);
	if (t->x->certs && v != X509_V_OK)
		tls_fail(c, "TLS handshake failed: peer certificate: %s",
			 X509_verify_cert_error_string(v));
	else if (ident[0])
		tls_fail(c,
			 "TLS handshake failed: the peer offers the key of \"%s\", not of this "
			 "cluster",
			 ident);
	else if (!t->x->certs)
		tls_fail(c,
			 "TLS handshake failed (%s): authentication with the cluster key "
			 "failed: the same secret and cluster name, and tls = on, on both ends?",
			 reason);
	else
		tls_fail(c, "TLS handshake failed: %s", reason);
}

static void plain_peer(struct net_conn *c)
{
	struct net_tls *t = c->tls;
	char host[NET_HOST_MAX];

	tls_set_state(t, TLS_FAILED);
	snprintf(t->err, sizeof(t->err),
		 "the peer does not speak TLS: set tls = on there too (or tls = off here)");
	net_peer_host(c->fd, host);
	log_warn("TLS with %s: %s: connection dropped", host[0] ? host : "?", t->err);
	if (t->client || !t->refuse_len) {
		net_abort(c);
		return;
	}
	/* An acceptor answers in the peer's terms (its owner's error message,
	 * unencrypted), so that the plaintext end says why too. */
	t->wtail = NULL;
	t->cin_start = t->cin_end = 0;
	{
		struct tls_chunk *ch = chunk_get(c);
		if (!ch) {
			net_abort(c);
			return;
		}
		memcpy(ch->data, t->refuse, t->refuse_len);
		ch->fill = t->refuse_len;
		ch->tx.iov[0].iov_len = t->refuse_len;
		ch->tx.next = NULL;
		*t->ctq_tail = &ch->tx;
		t->ctq_tail = &ch->tx.next;
	}
	ev_defer(c->ev, &c->flush);
	net_close(c);
}

/* ---- the record layer, once OPEN ---- */

/* Switches from OpenSSL's records to ours when the handshake is done: both
 * secrets logged, a suite we know, nothing left inside OpenSSL. */
static int rec_start(struct net_conn *c)
{
	struct net_tls *t = c->tls;
	SSL *ssl = t->ssl;
	const SSL_CIPHER *ci = SSL_get_current_cipher(ssl);
	unsigned suite = ci ? (unsigned)(SSL_CIPHER_get_id(ci) & 0xffff) : 0;
	int mine = t->client ? 0 : 1, r;

	if (t->have_sec != 3 || SSL_has_pending(ssl))
		return -EPROTO;
	r = tls_rec_init(&t->wr, suite, t->sec[mine], true);
	if (r)
		return r;
	r = tls_rec_init(&t->rd, suite, t->sec[1 - mine], false);
	if (r) {
		tls_rec_free(&t->wr);
		return r;
	}
	OPENSSL_cleanse(t->sec, sizeof(t->sec));
	t->rec = true;
	/* OpenSSL is done: it would keep the first secrets (and the master
	 * secret) for the connection's life, past every KeyUpdate (R2) */
	SSL_free(ssl);
	t->ssl = NULL;
	t->bio = NULL; /* (freed with it) */
	return 0;
}

/* Room for at least `min` bytes at the end of the ciphertext queue. */
static uint8_t *chunk_room(struct net_conn *c, size_t min, size_t *room)
{
	struct net_tls *t = c->tls;
	struct tls_chunk *ch = t->wtail;

	if (!ch || NET_TLS_CHUNK - ch->fill < min) {
		ch = chunk_get(c);
		if (!ch)
			return NULL;
		ch->tx.next = NULL;
		*t->ctq_tail = &ch->tx;
		t->ctq_tail = &ch->tx.next;
		t->wtail = ch;
	}
	*room = NET_TLS_CHUNK - ch->fill;
	return ch->data + ch->fill;
}

static void chunk_commit(struct net_conn *c, size_t n)
{
	struct net_tls *t = c->tls;

	t->wtail->fill += n;
	t->wtail->tx.iov[0].iov_len += n; /* (its base moves as tx_advance sends) */
	t->wire_total += n;
	ev_defer(c->ev, &c->flush);
}

/* Seals len bytes of `type` into records at the end of the ciphertext
 * queue. 0, or -1 once the connection failed. */
static int rec_write(struct net_conn *c, uint8_t type, const uint8_t *buf, size_t len)
{
	struct net_tls *t = c->tls;

	do {
		size_t n = MIN(len, (size_t)TLS_REC_PLAIN_MAX), room;
		size_t want = MIN(n, (size_t)TLS_REC_TAIL_MIN) + TLS_REC_OVERHEAD;
		uint8_t *out = chunk_room(c, want, &room);
		long k;
		if (!out) {
			tls_fail(c, "sending: out of memory");
			return -1;
		}
		n = MIN(n, room - TLS_REC_OVERHEAD);
		k = tls_rec_seal(&t->wr, type, buf, n, out);
		if (k < 0) {
			tls_fail(c, "sending: sealing a record failed");
			return -1;
		}
		chunk_commit(c, (size_t)k);
		buf += n;
		len -= n;
	} while (len);
	return 0;
}

/* KeyUpdate out (RFC 8446 4.6.3), then new keys for what follows. */
static int rec_key_update(struct net_conn *c, bool request)
{
	struct net_tls *t = c->tls;
	const uint8_t msg[5] = { 24, 0, 0, 1, request ? 1 : 0 };

	if (rec_write(c, TLS_CT_HANDSHAKE, msg, sizeof(msg)))
		return -1;
	if (tls_rec_update(&t->wr)) {
		tls_fail(c, "key update failed");
		return -1;
	}
	return 0;
}

/* The owner took n bytes opened into its destination. */
static void rec_deliver(struct net_conn *c, size_t n)
{
	bool direct = c->direct_cb != NULL;

	net_rx_got(c, n);
	if (!direct)
		net_rx_parse(c);
}

/* pump_once in OPEN: 1 progress, 0 blocked, -1 the connection ends. */
static int rec_pump(struct net_conn *c)
{
	struct net_tls *t = c->tls;
	uint8_t *dst, *out, type, *hdr;
	size_t room, have, len;
	long n;
	int r;

	if (c->direct_cb) {
		dst = c->direct_buf + c->direct_done;
		room = c->direct_len - c->direct_done;
	} else if (!c->rx_paused) {
		net_rx_make_room(c);
		dst = c->rxbuf + c->rx_end;
		room = c->rx_cap - c->rx_end;
	} else {
		return 0;
	}
	if (!room)
		return 0; /* the owner must consume first */
	if (t->pt_start < t->pt_end) {
		n = (long)MIN(room, t->pt_end - t->pt_start);
		memcpy(dst, t->pt + t->pt_start, (size_t)n);
		t->pt_start += (size_t)n;
		rec_deliver(c, (size_t)n);
		return 1;
	}
	hdr = t->cin + t->cin_start;
	have = t->cin_end - t->cin_start;
	r = tls_rec_header(hdr, have, &len);
	if (r < 0) {
		tls_fail(c, "bad input: not a TLS 1.3 application record");
		return -1;
	}
	if (!r || have < TLS_REC_HDR + len) {
		/* a whole record must fit between cin_start and the end */
		if (t->cin_start && NET_TLS_CIN - t->cin_start < TLS_REC_HDR + TLS_REC_CIPHER_MAX) {
			memmove(t->cin, hdr, have);
			t->cin_start = 0;
			t->cin_end = have;
		}
		t->want_read = true;
		return 0;
	}
	/* straight into the owner's buffer when the whole record fits there */
	out = room >= len - TLS_REC_TAG ? dst : t->pt;
	n = tls_rec_open(&t->rd, hdr, hdr + TLS_REC_HDR, len, out, &type);
	t->cin_start += TLS_REC_HDR + len;
	if (t->cin_start == t->cin_end)
		t->cin_start = t->cin_end = 0;
	if (n < 0) {
		tls_fail(c, "bad input: %s",
			 n == -EBADMSG ? "decryption failed or bad record mac" : "internal error");
		return -1;
	}
	switch (type) {
	case TLS_CT_APPDATA:
		if (out == dst) {
			if (n)
				rec_deliver(c, (size_t)n);
		} else {
			t->pt_start = 0;
			t->pt_end = (size_t)n;
		}
		return 1;
	case TLS_CT_ALERT:
		if (n == 2 && out[1] == 0) { /* close_notify: the peer's FIN */
			net_rx_ended(c, 0);
			return -1;
		}
		tls_fail(c, "the peer sent the TLS alert \"%s\"",
			 n == 2 ? SSL_alert_desc_string_long(out[1]) : "(malformed)");
		return -1;
	case TLS_CT_HANDSHAKE: {
		bool request = false;
		r = tls_rec_post_handshake(out, (size_t)n, &request);
		if (r < 0) {
			tls_fail(c, "bad input: unexpected handshake message");
			return -1;
		}
		if (r == 1) {
			if (tls_rec_update(&t->rd)) {
				tls_fail(c, "key update failed");
				return -1;
			}
			t->rekeys_in++;
			if (request && !t->ku_reply) {
				/* one answer however many requests, before our next
				 * record (tls_seal) */
				t->ku_reply = true;
				ev_defer(c->ev, &c->flush);
			}
		}
		return 1;
	}
	default: tls_fail(c, "bad input: record of content type %u", type); return -1;
	}
}

/* One step of the receive side: 1 progress, 0 blocked (needs ciphertext,
 * or the owner must consume), -1 the connection ends. */
static int pump_once(struct net_conn *c)
{
	struct net_tls *t = c->tls;
	SSL *ssl = t->ssl;
	int n;

	if (c->closing || t->st == TLS_FAILED)
		return -1;
	if (t->st == TLS_HANDSHAKE) {
		n = SSL_do_handshake(ssl);
		if (n == 1) {
			char host[NET_HOST_MAX];
			tls_set_state(t, TLS_OPEN);
			t->err[0] = 0;
			t->rekey_at = t->wire_total + t->x->rekey_bytes;
			snprintf(t->desc, sizeof(t->desc), "%s %s", SSL_get_version(ssl),
				 SSL_get_cipher_name(ssl));
			net_peer_host(c->fd, host);
			log_info("TLS with %s: %s, %s, %s", host[0] ? host : "?",
				 SSL_get_version(ssl), SSL_get_cipher_name(ssl),
				 t->x->certs ? "certificates" : "cluster key (PSK)");
			if (rec_start(c)) {
				tls_fail(c, "TLS handshake: cannot take over the records "
					    "(secrets not logged, or another cipher suite)");
				return -1;
			}
			ev_defer(c->ev, &c->flush); /* what the owner queued meanwhile */
			return 1;
		}
		if (SSL_get_error(ssl, n) == SSL_ERROR_WANT_READ) {
			t->want_read = true;
			return 0;
		}
		fail_ssl(c, n, "handshake");
		return -1;
	}
	return rec_pump(c);
}

void tls_pump(struct net_conn *c)
{
	struct net_tls *t = c->tls;
	struct io_uring_sqe *sqe;

	/* net_rx_direct or net_rx_resume from an owner called inside the loop
	 * below: the loop goes on instead of recursing. */
	if (t->pumping) {
		t->repump = true;
		return;
	}
	t->pumping = true;
	for (;;) {
		int k;
		t->repump = false;
		k = pump_once(c);
		if (k < 0 || (k == 0 && !t->repump))
			break;
	}
	t->pumping = false;
	if (!t->want_read || t->st == TLS_FAILED || c->rx_armed || c->closing || c->eof ||
	    c->rx_eof || t->cin_end == NET_TLS_CIN)
		return;
	sqe = ev_sqe(c->ev, &c->rx_op);
	io_uring_prep_recv(sqe, c->fd, t->cin + t->cin_end, NET_TLS_CIN - t->cin_end, 0);
	c->rx_armed = true;
}

void tls_rx(struct net_conn *c, int res)
{
	struct net_tls *t = c->tls;

	if (t->st == TLS_FAILED)
		return;
	/* The first byte of a peer's TLS output is a handshake record (22) or
	 * an alert (21); anything else is a peer without TLS. */
	if (t->cin_total == 0 && t->cin[t->cin_end] != 22 && t->cin[t->cin_end] != 21) {
		t->cin_end += (size_t)res;
		plain_peer(c);
		return;
	}
	t->cin_end += (size_t)res;
	t->cin_total += (uint64_t)res;
	t->want_read = false;
	tls_pump(c);
}

bool tls_rx_end(struct net_conn *c, int res)
{
	struct net_tls *t = c->tls;

	if (t->st != TLS_HANDSHAKE)
		return false;
	/* An acceptor's peer that closes without a byte (a probe, a port
	 * check) is no TLS matter, as with plaintext. */
	if (t->cin_total == 0 && !t->client)
		return false;
	if (t->cin_total == 0)
		tls_fail(c,
			 "the peer %s before the TLS handshake (tls = off there? it "
			 "may say why)",
			 res == 0 ? "closed the connection" : "reset the connection");
	else
		tls_fail(c,
			 "the peer %s during the TLS handshake (another cluster secret or name "
			 "there?)",
			 res == 0 ? "closed the connection" : "reset the connection");
	return true;
}

/* Seals the stage into one record; items gathered there now know where
 * their ciphertext ends (T3). */
static bool stage_flush(struct net_conn *c)
{
	struct net_tls *t = c->tls;

	if (t->stage_len) {
		size_t n = t->stage_len;
		t->stage_len = 0;
		if (rec_write(c, TLS_CT_APPDATA, t->stage, n))
			return false;
	}
	for (struct net_tx *tx = t->unassigned; tx; tx = tx->next)
		tx->wire_end = t->wire_total;
	t->unassigned = NULL;
	return true;
}

static void tls_notify(struct net_conn *c)
{
	struct net_tls *t = c->tls;

	if (t->notified)
		return;
	t->notified = true;
	/* close_notify (warning); the peer's is not awaited */
	(void)rec_write(c, TLS_CT_ALERT, (const uint8_t[]){ 1, 0 }, 2);
}

void tls_seal(struct net_conn *c)
{
	struct net_tls *t = c->tls;

	if (t->st != TLS_OPEN)
		return;
	if (t->ku_reply && !t->notified) {
		t->ku_reply = false;
		if (rec_key_update(c, false))
			return;
	}
	if (t->wire_total >= t->rekey_at && !t->notified) {
		/* new keys both ways; the KeyUpdate goes out before the next
		 * record, the peer answers with its own */
		if (rec_key_update(c, true))
			return;
		t->rekeys++;
		t->rekey_at = t->wire_total + t->x->rekey_bytes;
	}
	while (t->wire_total - t->wire_sent < NET_TLS_SEAL_AHEAD) {
		struct net_tx *tx = c->txq_head;
		bool whole = true;
		if (!tx) {
			net_promote_bulk(c);
			tx = c->txq_head;
			if (!tx)
				break;
		}
		for (int i = 0; i < tx->iovcnt && whole; i++) {
			struct iovec *v = &tx->iov[i];
			while (v->iov_len) {
				size_t k = v->iov_len;
				if (k < NET_TLS_SMALL) {
					if (t->stage_len + k > NET_TLS_STAGE && !stage_flush(c))
						return;
					memcpy(t->stage + t->stage_len, v->iov_base, k);
					t->stage_len += k;
				} else {
					if (!stage_flush(c))
						return;
					k = MIN(k, (size_t)TLS_WRITE_MAX);
					if (rec_write(c, TLS_CT_APPDATA, v->iov_base, k))
						return;
				}
				v->iov_base = (char *)v->iov_base + k;
				v->iov_len -= k;
				if (t->wire_total - t->wire_sent >= NET_TLS_SEAL_AHEAD &&
				    v->iov_len) {
					whole = false; /* the rest in a later pass (T2) */
					break;
				}
			}
		}
		if (!whole)
			break;
		/* all of tx is sealed or staged: it waits for its ciphertext */
		c->txq_head = tx->next;
		if (!c->txq_head)
			c->txq_tail = &c->txq_head;
		tx->next = NULL;
		tx->wire_end = UINT64_MAX;
		*t->sealed_tail = tx;
		t->sealed_tail = &tx->next;
		if (!t->unassigned)
			t->unassigned = tx;
		if (!t->stage_len) {
			tx->wire_end = t->wire_total;
			t->unassigned = NULL;
		}
	}
	if (!stage_flush(c))
		return;
	if (c->closing && !c->txq_head && !c->bulk_head)
		tls_notify(c);
	tls_sent(c, 0); /* (an empty item is out as soon as it is sealed) */
}

void tls_sent(struct net_conn *c, size_t n)
{
	struct net_tls *t = c->tls;
	struct net_tx *tx;

	t->wire_sent += n;
	while ((tx = t->sealed_head) && tx->wire_end <= t->wire_sent) {
		t->sealed_head = tx->next;
		if (!t->sealed_head)
			t->sealed_tail = &t->sealed_head;
		tx->done(tx, 0);
	}
}

void tls_closing(struct net_conn *c)
{
	struct net_tls *t = c->tls;

	if (t->st != TLS_OPEN) {
		/* in the handshake nothing of the owner's can go out; once
		 * FAILED only what is queued (an alert, a refusal) does */
		if (t->st == TLS_HANDSHAKE)
			c->eof = true;
		return;
	}
	if (!c->txq_head && !c->bulk_head)
		tls_notify(c);
}

void tls_drop_output(struct net_conn *c)
{
	struct net_tls *t = c->tls;
	struct net_tx *tx;

	while ((tx = t->ctq_head)) {
		t->ctq_head = tx->next;
		tx->done(tx, -ECONNRESET);
	}
	t->ctq_tail = &t->ctq_head;
	t->wtail = NULL;
	while ((tx = t->sealed_head)) {
		t->sealed_head = tx->next;
		tx->done(tx, -ECONNRESET);
	}
	t->sealed_tail = &t->sealed_head;
	t->unassigned = NULL;
}
