/* tandemctl: the admin CLI. Sends one command line to a node's control
 * socket (include/proto/ctl.h) and prints the answer. Thin by design: all
 * logic lives in tandemd; this never reaches into volumes or stores. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../include/proto/ctl.h"
#include "../src/common/util.h"
#include "../src/config/config.h"
#include "../src/net/tls.h"
#include "../src/wit/wit_codec.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: tandemctl (-c FILE -n NODE | -s SOCKET) COMMAND [ARGS]\n"
		   "commands:\n"
		   "  ping                          return 0 once the node answers\n"
		   "  status [VOLUME] [--json]      volume states\n"
		   "  wait-sync VOLUME [--timeout SEC]\n"
		   "  primary VOLUME [--force] | secondary VOLUME [--timeout SEC]\n"
		   "  connect VOLUME | disconnect VOLUME | verify VOLUME | invalidate VOLUME\n"
		   "  attach VOLUME [--disk PATH] [--timeout SEC]\n"
		   "                                a new (or the repaired) disk for a failed one\n"
		   "  switchover VOLUME [NODE]       planned: the primary demotes, NODE (or the\n"
		   "                                other node) promotes; waits for both\n"
		   "  set VOLUME KEY=VALUE...       replication=sync|async, async-backlog=SIZE,\n"
		   "                                async-max-lag=SEC, on-congestion=ahead|block\n"
		   "                                (both nodes, at once, until restarted;\n"
		   "                                refused while the peer is not connected)\n"
		   "  events\n"
		   "  witness-status                (-c FILE only) what the cluster's witness "
		   "holds\n");
}

/* The witness link: the socket, in TLS when the cluster has tls = on. */
struct wlink {
	int fd;
	struct net_tls_sync *tls;
};

static ssize_t wl_read(struct wlink *l, void *buf, size_t len)
{
	if (l->tls) {
		long k = net_tls_sync_read(l->tls, buf, len);
		if (k < 0)
			errno = (int)-k;
		return k < 0 ? -1 : k;
	}
	return read(l->fd, buf, len);
}

static bool wl_write(struct wlink *l, const void *buf, size_t len)
{
	if (l->tls)
		return net_tls_sync_write(l->tls, buf, len) == (long)len;
	return write(l->fd, buf, len) == (ssize_t)len;
}

/* Reads one whole witness message (header and body, body <= cap). */
static int wit_read(struct wlink *l, struct wit_msg *m, uint8_t *body, size_t cap)
{
	uint8_t h[sizeof(struct wit_hdr)];
	size_t got = 0;
	struct pollfd p = { .fd = l->fd, .events = POLLIN };

	for (size_t want = sizeof(h), phase = 0; phase < 2; phase++) {
		uint8_t *dst = phase ? body : h;
		got = 0;
		while (got < want) {
			ssize_t k;
			if (!(l->tls && net_tls_sync_pending(l->tls)) && poll(&p, 1, 5000) != 1)
				return -ETIMEDOUT;
			k = wl_read(l, dst + got, want - got);
			if (k <= 0)
				return k ? -errno : -ECONNRESET;
			got += (size_t)k;
		}
		if (phase == 0) {
			if (wit_decode_hdr(h, m) || m->len > cap)
				return -EBADMSG;
			want = m->len;
			if (!want)
				break;
		}
	}
	return wit_decode_body(body, m) ? -EBADMSG : 0;
}

/* witness-status: an admin session (HELLO with the admin flag, both proofs
 * of the cluster secret), one STATUS_REQ, the JSON printed. */
static int witness_status(const char *cfgpath)
{
	struct cfg *cfg;
	char err[1024];
	struct sockaddr_storage ss;
	socklen_t sl;
	uint8_t buf[WIT_ENC_MAX], nonce[WIT_NONCE_LEN], mac[WIT_MAC_LEN];
	static uint8_t body[WIT_MAX_STATUS];
	char text[4 * WIT_MAX_ERROR + 1];
	struct wit_msg m;
	struct net_tls_ctx *tls = NULL;
	struct wlink wl = { .fd = -1 };
	int fd = -1, rc = 1, k;
	FILE *ur;

	memset(&m, 0, sizeof(m));
	if (cfg_load(cfgpath, &cfg, err, sizeof(err))) {
		fprintf(stderr, "tandemctl: %s\n", err);
		return 1;
	}
	if (!cfg->witness[0]) {
		fprintf(stderr, "tandemctl: %s: [cluster] has no witness\n", cfgpath);
		goto out;
	}
	ur = fopen("/dev/urandom", "rb");
	if (!ur || fread(nonce, 1, sizeof(nonce), ur) != sizeof(nonce)) {
		if (ur)
			fclose(ur);
		fprintf(stderr, "tandemctl: no random numbers\n");
		goto out;
	}
	fclose(ur);
	if (parse_addr(cfg->witness, &ss, &sl) < 0 ||
	    (fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		fprintf(stderr, "tandemctl: cannot reach the witness at %s: %s\n", cfg->witness,
			strerror(errno));
		goto out;
	}
	wl.fd = fd;
	if (cfg->tls) {
		/* the witness speaks TLS to every client of a tls = on cluster */
		struct net_tls_opts o = { .cert = cfg->tls_cert,
					  .key = cfg->tls_key,
					  .ca = cfg->tls_ca };
		struct timeval tv = { .tv_sec = 5 };
		int r;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		r = net_tls_ctx_new(&o, &tls, err, sizeof(err));
		if (!r && !cfg->tls_cert[0]) {
			r = net_tls_ctx_add_cluster(tls, cfg->cluster, cfg->secret);
			if (r)
				snprintf(err, sizeof(err), "TLS key: %s", strerror(-r));
		}
		if (!r)
			r = net_tls_sync_connect(tls, fd, &wl.tls, err, sizeof(err));
		if (r) {
			fprintf(stderr, "tandemctl: witness at %s: %s\n", cfg->witness, err);
			goto out;
		}
	}
	k = (int)wit_enc_hello(buf, cfg->cluster, "tandemctl", nonce, WIT_HELLO_F_ADMIN, 0);
	if (!wl_write(&wl, buf, (size_t)k) || wit_read(&wl, &m, body, sizeof(body)) ||
	    m.type != WIT_HELLO)
		goto proto;
	wit_mac(cfg->secret, 'N', nonce, m.u.hello.nonce, cfg->cluster, "tandemctl", mac);
	{
		uint8_t wnonce[WIT_NONCE_LEN];
		memcpy(wnonce, m.u.hello.nonce, WIT_NONCE_LEN);
		k = (int)wit_enc_auth(buf, mac);
		if (!wl_write(&wl, buf, (size_t)k) || wit_read(&wl, &m, body, sizeof(body)))
			goto proto;
		if (m.type == WIT_AUTH) {
			wit_mac(cfg->secret, 'W', nonce, wnonce, cfg->cluster, "tandemctl", mac);
			if (memcmp(mac, m.u.auth.mac, WIT_MAC_LEN)) {
				fprintf(stderr,
					"tandemctl: the witness at %s failed to prove the "
					"cluster secret\n",
					cfg->witness);
				goto out;
			}
		}
	}
	if (m.type == WIT_ERROR)
		goto proto;
	k = (int)wit_enc_empty(buf, WIT_STATUS_REQ);
	if (!wl_write(&wl, buf, (size_t)k) || wit_read(&wl, &m, body, sizeof(body)) ||
	    m.type != WIT_STATUS)
		goto proto;
	fwrite(m.var, 1, m.var_len, stdout);
	rc = 0;
	goto out;
proto:
	/* the text may come before the witness proved the secret: escaped */
	if (m.type == WIT_ERROR)
		fprintf(stderr, "tandemctl: the witness refused: %s\n",
			log_escape(text, sizeof(text), m.var, m.var_len));
	else
		fprintf(stderr, "tandemctl: the witness at %s answered out of step\n",
			cfg->witness);
out:
	net_tls_sync_free(wl.tls);
	net_tls_ctx_free(tls);
	if (fd >= 0)
		close(fd);
	cfg_free(cfg);
	return rc;
}

/* One request, one reply. Returns 0 ok, 1 error reply, 3 "wait" reply (not yet),
 * -errno when unreachable. */
static int call(const char *path, const char *line, int quiet)
{
	struct sockaddr_un sun;
	char buf[65536];
	size_t len = 0;
	ssize_t k;
	int fd, status = -EPROTO;
	char *nl;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line)) {
		close(fd);
		return -EIO;
	}
	/* Read the status line, then stream the rest to stdout. */
	while ((k = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
		len += (size_t)k;
		buf[len] = '\0';
		nl = strchr(buf, '\n');
		if (nl || len == sizeof(buf) - 1)
			break;
	}
	buf[len] = '\0';
	nl = strchr(buf, '\n');
	if (!nl) {
		close(fd);
		return -EPROTO;
	}
	*nl = '\0';
	if (strcmp(buf, CTL_REPLY_OK) == 0) {
		status = 0;
	} else if (strncmp(buf, CTL_REPLY_ERROR " ", strlen(CTL_REPLY_ERROR) + 1) == 0) {
		/* (even when quiet: a polled command's refusal is said once,
		 * by the call that got it; asking again would repeat the
		 * command, e.g. send `primary --force` to the witness anew) */
		fprintf(stderr, "tandemctl: %s\n", buf + strlen(CTL_REPLY_ERROR) + 1);
		status = 1;
	} else if (strncmp(buf, CTL_REPLY_WAIT " ", strlen(CTL_REPLY_WAIT) + 1) == 0) {
		if (!quiet)
			fprintf(stderr, "tandemctl: %s\n", buf + strlen(CTL_REPLY_WAIT) + 1);
		status = 3;
	}
	if (!quiet)
		fwrite(nl + 1, 1, len - (size_t)(nl + 1 - buf), stdout);
	fflush(stdout);
	/* Streamed as it comes (`events` lines must not wait in a buffer). */
	while ((k = read(fd, buf, sizeof(buf))) > 0)
		if (!quiet) {
			fwrite(buf, 1, (size_t)k, stdout);
			fflush(stdout);
		}
	close(fd);
	return status;
}

int main(int argc, char **argv)
{
	const char *cfgpath = NULL, *node = NULL, *sock = NULL;
	char path[CFG_PATH_MAX], line[CTL_MAX_LINE];
	size_t len = 0;
	int opt, r;
	double timeout = -1;
	bool waits;

	while ((opt = getopt(argc, argv, "+c:n:s:h")) != -1) {
		switch (opt) {
		case 'c': cfgpath = optarg; break;
		case 'n': node = optarg; break;
		case 's': sock = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc && strcmp(argv[optind], "witness-status") == 0 && cfgpath &&
	    optind + 1 == argc)
		return witness_status(cfgpath);
	if (optind >= argc || (!sock && (!cfgpath || !node))) {
		usage(stderr);
		return 2;
	}
	if (!sock) {
		struct cfg *cfg;
		char err[1024];
		int i;
		if (cfg_load(cfgpath, &cfg, err, sizeof(err))) {
			fprintf(stderr, "tandemctl: %s\n", err);
			return 1;
		}
		i = cfg_node_index(cfg, node);
		if (i < 0) {
			fprintf(stderr, "tandemctl: %s: no [node %s] section\n", cfgpath, node);
			cfg_free(cfg);
			return 1;
		}
		snprintf(path, sizeof(path), "%s", cfg->nodes[i].control);
		cfg_free(cfg);
		sock = path;
	}
	/* Commands that wait (wait-sync; secondary, until in-flight writes are
	 * done and the peer has heard of it; attach, until the failed disk's
	 * requests ended) are polled from here, so that the daemon never holds
	 * a connection open on a client's behalf. */
	waits = strcmp(argv[optind], "wait-sync") == 0 || strcmp(argv[optind], "secondary") == 0 ||
		strcmp(argv[optind], "disconnect") == 0 || strcmp(argv[optind], "primary") == 0 ||
		strcmp(argv[optind], "switchover") == 0 || strcmp(argv[optind], "attach") == 0;
	/* a promotion waits for the witness; a switchover for both steps */
	if (strcmp(argv[optind], "secondary") == 0 || strcmp(argv[optind], "primary") == 0 ||
	    strcmp(argv[optind], "switchover") == 0)
		timeout = 30;
	/* disconnect: the daemon's own limit on the peer's flush is 2 s;
	 * attach: requests still running on the failed disk */
	if (strcmp(argv[optind], "disconnect") == 0 || strcmp(argv[optind], "attach") == 0)
		timeout = 10;
	for (int i = optind; i < argc; i++) {
		if (strcmp(argv[i], "--timeout") == 0 && waits) {
			char *end;
			if (i + 1 >= argc || (timeout = strtod(argv[i + 1], &end)) < 0 || *end) {
				fprintf(stderr, "tandemctl: --timeout needs a number of seconds\n");
				return 2;
			}
			i++;
			continue;
		}
		int k = snprintf(line + len, sizeof(line) - len, "%s%s", len ? " " : "", argv[i]);
		if (k < 0 || (size_t)k >= sizeof(line) - len - 1 || strchr(argv[i], '\n')) {
			fprintf(stderr, "tandemctl: command too long\n");
			return 2;
		}
		len += (size_t)k;
	}
	line[len++] = '\n';
	line[len] = '\0';

	if (strcmp(argv[optind], "wait-sync") == 0 && argc - optind < 2) {
		usage(stderr);
		return 2;
	}
	if (waits) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			r = call(sock, line, 1);
			if (r == 0)
				return 0;
			clock_gettime(CLOCK_MONOTONIC, &t);
			/* Retry only "not yet" and a node that is (re)starting. */
			if (r == 1)
				return 1;
			if (r < 0 && r != -ECONNREFUSED && r != -ENOENT)
				break;
			if (timeout >= 0 &&
			    (double)(t.tv_sec - t0.tv_sec) +
					    (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >=
				    timeout) {
				if (r > 0)
					call(sock, line, 0);
				fprintf(stderr, "tandemctl: timed out\n");
				return 1;
			}
			usleep(20000);
		}
	} else {
		r = call(sock, line, 0);
	}
	if (r < 0) {
		fprintf(stderr,
			"tandemctl: cannot reach the node at %s: %s (is tandemd running?)\n", sock,
			strerror(-r));
		return 1;
	}
	return r ? 1 : 0;
}
