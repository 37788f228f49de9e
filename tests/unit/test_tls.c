/* TLS under net_conn (src/net/tls.c): the PSK derivation against a value
 * computed independently (RFC 5869 by hand), and pairs of real connections
 * on one event loop over socketpairs: messages both ways, large ones into
 * net_rx_direct destinations (T1, T3), also across key updates; a byte
 * flipped between the ends ends the connection before anything after it
 * reaches the owner (T1); another cluster's key fails the handshake at both
 * ends; a plaintext peer gets the acceptor's refusal and a plaintext
 * acceptor sees a TLS hello; with certificates (made by the openssl tool),
 * one CA links and another is refused either way. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/common/util.h"
#include "../../src/ev/ev.h"
#include "../../src/net/net.h"
#include "../../src/net/tls.h"

/* ---- PSK ---- */

static void test_psk_derive(void **st)
{
	/* HKDF-SHA256(salt "tandem tls 1.3 psk v1", ikm "test-secret", info "it") */
	static const uint8_t want[NET_TLS_PSK_LEN] = { 0x14, 0xae, 0x85, 0xa1, 0x26, 0x3d, 0xb4,
						       0x3e, 0xb2, 0x0d, 0x9b, 0xb7, 0xa2, 0x84,
						       0x20, 0xc4, 0x9c, 0x65, 0x1e, 0xc0, 0x71,
						       0xed, 0x95, 0x90, 0x37, 0xe2, 0xe3, 0x96,
						       0x8b, 0x64, 0xfb, 0x70 };
	uint8_t k[NET_TLS_PSK_LEN], k2[NET_TLS_PSK_LEN];
	(void)st;

	assert_int_equal(net_tls_psk_derive("test-secret", "it", k), 0);
	assert_memory_equal(k, want, sizeof(k));
	assert_int_equal(net_tls_psk_derive("test-secret", "it2", k2), 0);
	assert_memory_not_equal(k, k2, sizeof(k));
	assert_int_equal(net_tls_psk_derive("test-secreT", "it", k2), 0);
	assert_memory_not_equal(k, k2, sizeof(k));
	assert_int_equal(net_tls_psk_derive("", "it", k2), -EINVAL);
	assert_int_equal(net_tls_psk_derive("s", "", k2), -EINVAL);
}

/* ---- a pair of connections ---- */

/* Messages: a 4-byte little-endian length, then the bytes; those of 4 KiB
 * and more are received with net_rx_direct. */
struct end {
	struct net_conn c;
	uint8_t *got;
	size_t got_len;
	uint8_t *direct;
	uint32_t want;
	bool have_len, closed;
	unsigned msgs;
};

static void got_append(struct end *e, const void *p, size_t n)
{
	e->got = realloc(e->got, e->got_len + n + 1);
	assert_non_null(e->got);
	memcpy(e->got + e->got_len, p, n);
	e->got_len += n;
}

static void direct_done(struct net_conn *c, int err)
{
	struct end *e = container_of(c, struct end, c);

	if (!err) {
		got_append(e, e->direct, e->want);
		e->msgs++;
	}
	free(e->direct);
	e->direct = NULL;
	e->have_len = false;
}

static void end_rx(struct net_conn *c)
{
	struct end *e = container_of(c, struct end, c);

	while (!c->closing && !e->direct) {
		if (!e->have_len) {
			if (net_rx_avail(c) < 4)
				return;
			memcpy(&e->want, net_rx_peek(c), 4);
			net_rx_consume(c, 4);
			e->have_len = true;
			if (e->want >= 4096) {
				e->direct = malloc(e->want);
				assert_non_null(e->direct);
				net_rx_direct(c, e->direct, e->want, direct_done);
				continue;
			}
		}
		if (net_rx_avail(c) < e->want)
			return;
		got_append(e, net_rx_peek(c), e->want);
		net_rx_consume(c, e->want);
		e->have_len = false;
		e->msgs++;
	}
}

static void end_closed(struct net_conn *c)
{
	struct end *e = container_of(c, struct end, c);

	e->closed = true;
	free(e->direct); /* closed in the middle of a direct receive */
	e->direct = NULL;
}

static const struct net_conn_ops end_ops = { .on_rx = end_rx, .on_closed = end_closed };

struct out {
	struct net_tx tx;
	uint32_t len;
	int *done_err; /* -1 until done */
};

static void out_done(struct net_tx *tx, int err)
{
	struct out *o = container_of(tx, struct out, tx);
	if (o->done_err)
		*o->done_err = err;
	free(o);
}

static void send_msg(struct end *e, const void *p, uint32_t len, int *done_err)
{
	struct out *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	o->len = len;
	o->done_err = done_err;
	if (done_err)
		*done_err = -1;
	o->tx.iov[0].iov_base = &o->len;
	o->tx.iov[0].iov_len = 4;
	o->tx.iov[1].iov_base = (void *)p;
	o->tx.iov[1].iov_len = len;
	o->tx.iovcnt = 2;
	o->tx.done = out_done;
	net_send(&e->c, &o->tx);
}

/* A relay between two socketpairs (client <-> r[0] | r[1] <-> server) that
 * can flip one byte of what it forwards towards the server. */
struct hop {
	uint8_t buf[65536];
	size_t off, len; /* read, not yet written on */
};
struct relay {
	int r[2];
	bool flip; /* the next chunk towards the server */
	struct hop hop[2];
};

static void relay_one(struct hop *h, int from, int to, bool *flip)
{
	ssize_t k;

	if (h->off == h->len) {
		k = read(from, h->buf, sizeof(h->buf));
		if (k <= 0)
			return;
		h->off = 0;
		h->len = (size_t)k;
		if (flip && *flip) {
			h->buf[k / 2] ^= 0x01;
			*flip = false;
		}
	}
	k = send(to, h->buf + h->off, h->len - h->off, MSG_NOSIGNAL);
	if (k > 0)
		h->off += (size_t)k; /* (else: the other end reads on the next pass) */
}

struct pair {
	struct ev_loop *ev;
	struct net_tls_ctx *xc, *xs;
	struct end cli, srv;
	struct relay *relay;
};

static void run(struct pair *p, bool (*until)(struct pair *p))
{
	for (int i = 0; i < 20000 && !until(p); i++) {
		if (p->relay) {
			struct relay *r = p->relay;
			relay_one(&r->hop[0], r->r[0], r->r[1], &r->flip);
			relay_one(&r->hop[1], r->r[1], r->r[0], NULL);
		}
		ev_run_once(p->ev, 1000000ull);
	}
}

static struct net_tls_ctx *ctx(const char *secret)
{
	struct net_tls_ctx *x = NULL;
	char err[256];

	assert_int_equal(net_tls_ctx_new(NULL, &x, err, sizeof(err)), 0);
	if (secret)
		assert_int_equal(net_tls_ctx_add_cluster(x, "it", secret), 0);
	return x;
}

/* tls_c / tls_s NULL: that end is plaintext. With relay, the bytes pass
 * through the test (nonblocking socketpair ends). */
static void pair_open(struct pair *p, struct net_tls_ctx *tls_c, struct net_tls_ctx *tls_s,
		      struct relay *relay)
{
	int a[2], b[2];

	memset(p, 0, sizeof(*p));
	p->ev = ev_new(64);
	assert_non_null(p->ev);
	p->xc = tls_c;
	p->xs = tls_s;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
	if (relay) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b), 0);
		relay->r[0] = a[1];
		relay->r[1] = b[0];
		fcntl(a[1], F_SETFL, O_NONBLOCK);
		fcntl(b[0], F_SETFL, O_NONBLOCK);
		p->relay = relay;
	} else {
		b[1] = a[1];
	}
	assert_int_equal(
		net_conn_init_tls(&p->cli.c, p->ev, a[0], 64 * 1024, &end_ops, tls_c, true), 0);
	assert_int_equal(
		net_conn_init_tls(&p->srv.c, p->ev, b[1], 64 * 1024, &end_ops, tls_s, false), 0);
}

static bool both_closed(struct pair *p)
{
	return p->cli.closed && p->srv.closed;
}

static void pair_close(struct pair *p)
{
	if (!p->cli.c.closing)
		net_abort(&p->cli.c);
	if (!p->srv.c.closing)
		net_abort(&p->srv.c);
	run(p, both_closed);
	assert_true(both_closed(p));
	net_conn_destroy(&p->cli.c);
	net_conn_destroy(&p->srv.c);
	if (p->relay) {
		close(p->relay->r[0]);
		close(p->relay->r[1]);
	}
	ev_free(p->ev);
	net_tls_ctx_free(p->xc);
	net_tls_ctx_free(p->xs);
	free(p->cli.got);
	free(p->srv.got);
}

static unsigned want_msgs; /* (one test at a time) */
static bool got_msgs(struct pair *p)
{
	return p->cli.msgs >= want_msgs && p->srv.msgs >= want_msgs;
}
static bool srv_closed(struct pair *p)
{
	return p->srv.closed;
}

static uint8_t *random_bytes(size_t n)
{
	uint8_t *b = malloc(n);
	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(rand() >> 7);
	return b;
}

static void test_roundtrip(void **st)
{
	struct pair p;
	size_t big = 3u << 20;
	uint8_t *x = random_bytes(big), *y = random_bytes(big);
	int e1, e2, e3, e4;
	(void)st;

	pair_open(&p, ctx("test-secret"), ctx("test-secret"), NULL);
	/* queued before the handshake: waits for it */
	send_msg(&p.cli, "hello", 5, &e1);
	send_msg(&p.cli, x, (uint32_t)big, &e2); /* records from the owner's buffer */
	send_msg(&p.srv, y + 7, 100, &e3);       /* a small one */
	send_msg(&p.srv, y, (uint32_t)big, &e4);
	want_msgs = 2;
	run(&p, got_msgs);
	assert_int_equal(p.srv.msgs, 2);
	assert_int_equal(p.cli.msgs, 2);
	assert_int_equal(p.srv.got_len, 5 + big);
	assert_memory_equal(p.srv.got, "hello", 5);
	assert_memory_equal(p.srv.got + 5, x, big);
	assert_int_equal(p.cli.got_len, 100 + big);
	assert_memory_equal(p.cli.got, y + 7, 100);
	assert_memory_equal(p.cli.got + 100, y, big);
	/* T3: each item completed, without error, once it was on the wire */
	assert_int_equal(e1, 0);
	assert_int_equal(e2, 0);
	assert_int_equal(e3, 0);
	assert_int_equal(e4, 0);
	assert_true(p.cli.c.bytes_out > big); /* the wire: ciphertext */
	assert_null(net_conn_error(&p.cli.c));
	assert_null(net_conn_error(&p.srv.c));
	pair_close(&p);
	free(x);
	free(y);
}

/* Keys change every 64 KiB of output (KeyUpdate both ways) while 3 MiB
 * cross in each direction: nothing is lost or altered. */
static void test_rekey(void **st)
{
	struct pair p;
	size_t big = 3u << 20;
	uint8_t *x = random_bytes(big), *y = random_bytes(big);
	struct net_tls_ctx *xc = ctx("test-secret"), *xs = ctx("test-secret");
	(void)st;

	net_tls_ctx_set_rekey(xc, 64 * 1024);
	net_tls_ctx_set_rekey(xs, 64 * 1024);
	pair_open(&p, xc, xs, NULL);
	send_msg(&p.cli, x, (uint32_t)big, NULL);
	send_msg(&p.srv, y, (uint32_t)big, NULL);
	send_msg(&p.cli, "tail", 4, NULL);
	send_msg(&p.srv, "tail", 4, NULL);
	want_msgs = 2;
	run(&p, got_msgs);
	assert_int_equal(p.srv.got_len, big + 4);
	assert_memory_equal(p.srv.got, x, big);
	assert_int_equal(p.cli.got_len, big + 4);
	assert_memory_equal(p.cli.got, y, big);
	assert_true(p.cli.c.tls->rekeys >= 10);
	assert_true(p.srv.c.tls->rekeys >= 10);
	assert_null(net_conn_error(&p.srv.c));
	pair_close(&p);
	free(x);
	free(y);
}

static void test_flipped_byte(void **st)
{
	struct pair p;
	struct relay r = { .flip = false };
	uint8_t *x = random_bytes(256 * 1024);
	(void)st;

	pair_open(&p, ctx("test-secret"), ctx("test-secret"), &r);
	send_msg(&p.cli, "first", 5, NULL);
	send_msg(&p.srv, "back", 4, NULL);
	want_msgs = 1;
	run(&p, got_msgs);
	assert_int_equal(p.srv.msgs, 1);
	/* one byte flipped in what the client sends next */
	r.flip = true;
	send_msg(&p.cli, x, 256 * 1024, NULL);
	send_msg(&p.cli, "after", 5, NULL);
	run(&p, srv_closed);
	assert_true(p.srv.closed);
	/* T1: nothing after the bad record reached the owner */
	assert_int_equal(p.srv.msgs, 1);
	assert_int_equal(p.srv.got_len, 5);
	assert_non_null(net_conn_error(&p.srv.c));
	assert_non_null(strstr(net_conn_error(&p.srv.c), "bad input"));
	pair_close(&p);
	free(x);
}

/* ---- against OpenSSL's own record layer ---- */

static uint8_t pattern(size_t i, unsigned seed)
{
	return (uint8_t)(i * 7u + seed + (i >> 11));
}

/* The child: a blocking OpenSSL client (net_tls_sync: SSL_read/SSL_write).
 * Reads the server's message (len, then len pattern bytes of seed 1),
 * answers with its own (seed 2), reads the server's last one. Exit 0 when
 * every byte was right. */
static int openssl_client(int fd, uint32_t srv_len, uint32_t cli_len)
{
	struct net_tls_ctx *x = NULL;
	struct net_tls_sync *s = NULL;
	char err[256];
	uint8_t *b = malloc(srv_len > cli_len ? srv_len : cli_len);
	uint32_t len;

	if (!b || net_tls_ctx_new(NULL, &x, err, sizeof(err)) ||
	    net_tls_ctx_add_cluster(x, "it", "test-secret") ||
	    net_tls_sync_connect(x, fd, &s, err, sizeof(err)))
		return 2;
	for (int round = 0; round < 2; round++) {
		size_t got = 0;
		uint32_t want = round ? 4 : srv_len;
		while (got < 4 + (size_t)want) {
			uint8_t tmp[65536];
			long n = net_tls_sync_read(s, tmp, sizeof(tmp));
			if (n <= 0)
				return 3;
			for (long i = 0; i < n; i++, got++) {
				if (got < 4)
					((uint8_t *)&len)[got] = tmp[i];
				else if (round == 0 && tmp[i] != pattern(got - 4, 1))
					return 4;
				else if (round == 1 && tmp[i] != "done"[got - 4])
					return 5;
			}
		}
		if (len != want)
			return 6;
		if (round == 0) {
			len = cli_len;
			for (size_t i = 0; i < cli_len; i++)
				b[i] = pattern(i, 2);
			if (net_tls_sync_write(s, &len, 4) != 4)
				return 7;
			for (size_t off = 0; off < cli_len;) {
				long n = net_tls_sync_write(s, b + off, cli_len - off);
				if (n <= 0)
					return 8;
				off += (size_t)n;
			}
		}
	}
	net_tls_sync_free(s);
	net_tls_ctx_free(x);
	free(b);
	return 0;
}

static bool srv_got_one(struct pair *p)
{
	return p->srv.msgs >= 1 || p->srv.closed;
}

/* Our records against OpenSSL's: a client on OpenSSL's own record layer
 * (the blocking one of tandemctl) and our server, with KeyUpdate both ways
 * every 64 KiB of the server's output, close_notify at the end. */
static void test_openssl_interop(void **st)
{
	const uint32_t srv_len = 700000, cli_len = 500000;
	struct pair p;
	uint8_t *x = malloc(srv_len);
	int sv[2], status = -1;
	pid_t pid;
	(void)st;

	assert_non_null(x);
	for (size_t i = 0; i < srv_len; i++)
		x[i] = pattern(i, 1);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(openssl_client(sv[1], srv_len, cli_len));
	}
	close(sv[1]);
	memset(&p, 0, sizeof(p));
	p.ev = ev_new(64);
	assert_non_null(p.ev);
	p.xs = ctx("test-secret");
	net_tls_ctx_set_rekey(p.xs, 64 * 1024);
	assert_int_equal(net_conn_init_tls(&p.srv.c, p.ev, sv[0], 64 * 1024, &end_ops, p.xs, false),
			 0);
	p.cli.closed = true; /* (no client end in this loop) */
	send_msg(&p.srv, x, srv_len, NULL);
	run(&p, srv_got_one);
	assert_int_equal(p.srv.msgs, 1);
	assert_int_equal(p.srv.got_len, cli_len);
	for (size_t i = 0; i < cli_len; i++)
		if (p.srv.got[i] != pattern(i, 2))
			fail_msg("byte %zu of the OpenSSL client's message is wrong", i);
	assert_true(p.srv.c.tls->rekeys >= 2);
	assert_true(p.srv.c.tls->rekeys_in >= 1); /* OpenSSL's answers */
	send_msg(&p.srv, "done", 4, NULL);
	net_close(&p.srv.c); /* close_notify after it */
	run(&p, srv_closed);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_null(net_conn_error(&p.srv.c));
	net_conn_destroy(&p.srv.c);
	ev_free(p.ev);
	net_tls_ctx_free(p.xs);
	free(p.srv.got);
	free(x);
}

static void test_wrong_key(void **st)
{
	struct pair p;
	(void)st;

	pair_open(&p, ctx("another-secret"), ctx("test-secret"), NULL);
	send_msg(&p.cli, "hello", 5, NULL);
	run(&p, both_closed);
	assert_true(both_closed(&p));
	assert_int_equal(p.srv.msgs, 0);
	assert_non_null(net_conn_error(&p.srv.c));
	assert_non_null(strstr(net_conn_error(&p.srv.c), "handshake"));
	assert_non_null(net_conn_error(&p.cli.c));
	pair_close(&p);
}

static bool cli_got(struct pair *p)
{
	return p->cli.got_len >= 6 || p->cli.closed;
}

static void test_plain_peer(void **st)
{
	static const uint8_t refusal[] = { 6, 0, 0, 0, 'n', 'o', ' ', 't', 'l', 's' };
	struct pair p;
	(void)st;

	/* a plaintext client, a TLS acceptor: the refusal, then the close */
	pair_open(&p, NULL, ctx("test-secret"), NULL);
	net_conn_tls_refusal(&p.srv.c, refusal, sizeof(refusal));
	send_msg(&p.cli, "TRPL hello", 10, NULL);
	run(&p, cli_got);
	assert_int_equal(p.cli.got_len, 6);
	assert_memory_equal(p.cli.got, "no tls", 6);
	assert_int_equal(p.srv.msgs, 0);
	assert_non_null(strstr(net_conn_error(&p.srv.c), "does not speak TLS"));
	pair_close(&p);

	/* a TLS client, a plaintext acceptor: it sees a TLS hello */
	pair_open(&p, ctx("test-secret"), NULL, NULL);
	for (int i = 0; i < 200 && net_rx_avail(&p.srv.c) < 3; i++) {
		p.srv.c.rx_paused = true; /* (keep the hello for the check) */
		ev_run_once(p.ev, 1000000ull);
	}
	assert_true(net_rx_looks_tls(&p.srv.c));
	net_abort(&p.srv.c);
	run(&p, both_closed);
	assert_non_null(net_conn_error(&p.cli.c));
	pair_close(&p);
}

/* ---- certificates (tls-cert, tls-key, tls-ca) ---- */

/* A CA and a node certificate signed by it, made with the openssl tool in
 * dir: PREFIX-ca.pem, PREFIX.pem, PREFIX.key. False when the tool is
 * missing (the test is then skipped). */
static bool make_certs(const char *dir, const char *prefix)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "(cd '%s' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
		 "-nodes -keyout %s-ca.key -out %s-ca.pem -days 2 -subj /CN=%s-ca && "
		 "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key "
		 "-out %s.csr -subj /CN=%s-node && openssl x509 -req -in %s.csr -CA %s-ca.pem "
		 "-CAkey %s-ca.key -CAcreateserial -out %s.pem -days 2) >/dev/null 2>&1",
		 dir, prefix, prefix, prefix, prefix, prefix, prefix, prefix, prefix, prefix,
		 prefix);
	return system(cmd) == 0;
}

static struct net_tls_ctx *cert_ctx(const char *dir, const char *node, const char *ca)
{
	char cert[512], key[512], cafile[512], err[256];
	struct net_tls_opts o = { .cert = cert, .key = key, .ca = cafile };
	struct net_tls_ctx *x = NULL;

	snprintf(cert, sizeof(cert), "%s/%s.pem", dir, node);
	snprintf(key, sizeof(key), "%s/%s.key", dir, node);
	snprintf(cafile, sizeof(cafile), "%s/%s-ca.pem", dir, ca);
	assert_int_equal(net_tls_ctx_new(&o, &x, err, sizeof(err)), 0);
	assert_true(net_tls_ctx_uses_certs(x));
	return x;
}

static void test_certificates(void **st)
{
	char *dir = unit_mkdtemp("tls");
	char err[256], missing[600];
	struct net_tls_opts o = { .cert = missing, .key = missing, .ca = missing };
	struct net_tls_ctx *x = NULL;
	struct pair p;
	(void)st;

	if (!make_certs(dir, "one") || !make_certs(dir, "two")) {
		unit_rmtree(dir);
		free(dir);
		skip();
	}
	/* both ends with certificates of one CA: the link comes up */
	pair_open(&p, cert_ctx(dir, "one", "one"), cert_ctx(dir, "one", "one"), NULL);
	send_msg(&p.cli, "hello", 5, NULL);
	send_msg(&p.srv, "back", 4, NULL);
	want_msgs = 1;
	run(&p, got_msgs);
	assert_int_equal(p.srv.msgs, 1);
	assert_int_equal(p.cli.msgs, 1);
	assert_string_equal(net_conn_tls_desc(&p.cli.c), "TLSv1.3 TLS_AES_128_GCM_SHA256");
	pair_close(&p);

	/* a dialer whose certificate another CA signed is refused */
	pair_open(&p, cert_ctx(dir, "two", "one"), cert_ctx(dir, "one", "one"), NULL);
	send_msg(&p.cli, "hello", 5, NULL);
	run(&p, both_closed);
	assert_true(both_closed(&p));
	assert_int_equal(p.srv.msgs, 0);
	assert_non_null(strstr(net_conn_error(&p.srv.c), "peer certificate"));
	pair_close(&p);

	/* an acceptor whose certificate another CA signed: the dialer refuses */
	pair_open(&p, cert_ctx(dir, "one", "one"), cert_ctx(dir, "two", "two"), NULL);
	send_msg(&p.cli, "hello", 5, NULL);
	run(&p, both_closed);
	assert_int_equal(p.srv.msgs, 0);
	assert_non_null(strstr(net_conn_error(&p.cli.c), "peer certificate"));
	pair_close(&p);

	/* a file that does not load: the key it belongs to is named */
	snprintf(missing, sizeof(missing), "%s/none.pem", dir);
	assert_int_equal(net_tls_ctx_new(&o, &x, err, sizeof(err)), -EINVAL);
	assert_null(x);
	assert_non_null(strstr(err, "tls-cert"));
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_psk_derive),   cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_rekey),        cmocka_unit_test(test_flipped_byte),
		cmocka_unit_test(test_wrong_key),    cmocka_unit_test(test_plain_peer),
		cmocka_unit_test(test_certificates), cmocka_unit_test(test_openssl_interop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
