/* tandemd: one storage node. Reads the cluster config, takes the node's lock
 * (one daemon per data-dir), opens this node's volumes, starts the front-ends
 * and the control socket on one event loop, stops cleanly on SIGINT/SIGTERM
 * and ignores SIGHUP. Wiring only: no protocol or I/O logic. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/util.h"
#include "../config/config.h"
#include "../ctl/ctl.h"
#include "../ev/ev.h"
#include "../nbd/nbd_server.h"
#include "../iscsi/iscsi_server.h"
#include "../net/tls.h"
#include "../repl/repl.h"
#include "../vol/vol.h"
#include "../wit/wit_client.h"

struct node {
	struct cfg *cfg;
	unsigned self;
	struct ev_loop *ev;
	struct vol *vols[CFG_MAX_VOLUMES];
	unsigned nvols;
	struct nbd_server *nbd;
	struct iscsi_server *iscsi;
	struct ctl_server *ctl;
	struct repl_server *repl;
	struct wit_client *wit;
	struct net_tls_ctx *tls; /* tls = on: the replication and witness links */
	/* <data-dir>/tandemd.lock, held (flock) while this process runs */
	int lockfd;
	int sigfd;
	struct signalfd_siginfo si;
	struct ev_op sig_op;
	int ready_fd; /* write end of the pipe to the waiting parent, or -1 */
#ifdef TANDEM_COVERAGE
	struct ev_timer cov_timer;
#endif
};

#ifdef TANDEM_COVERAGE
/* Coverage builds (make coverage) only: the counters are written out every
 * second, so that a node a test kills (SIGKILL, which runs no exit
 * handler) still leaves what it ran. */
extern void __gcov_dump(void);
extern void __gcov_reset(void);

static void cov_tick(struct ev_timer *t)
{
	struct node *n = container_of(t, struct node, cov_timer);

	__gcov_dump();
	__gcov_reset();
	ev_timer_arm(n->ev, t, 1000000000ull);
}
#endif

static void usage(FILE *f)
{
	fprintf(f, "usage: tandemd -c FILE -n NODE [-f] [-v]\n"
		   "  -c FILE  cluster configuration (INI)\n"
		   "  -n NODE  which [node NAME] section this daemon is\n"
		   "  -f       stay in the foreground and log to stderr\n"
		   "  -v       debug logging\n");
}

static void sig_arm(struct node *n);

static void sig_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct node *n = container_of(op, struct node, sig_op);
	(void)flags;
	/* A packaging tool's or a terminal's HUP must not stop a node
	 * uncleanly (SPEC guarantee 10): there is nothing to reload. */
	if (res == (int)sizeof(n->si) && n->si.ssi_signo == SIGHUP) {
		log_info("SIGHUP ignored: reload is not supported in this version");
	} else if (res == (int)sizeof(n->si)) {
		log_info("signal %u: shutting down", n->si.ssi_signo);
		ev_stop(n->ev);
		return;
	}
	sig_arm(n);
}

static void sig_arm(struct node *n)
{
	io_uring_prep_read(ev_sqe(n->ev, &n->sig_op), n->sigfd, &n->si, sizeof(n->si), 0);
}

static int start(struct node *n, char *err, size_t errlen)
{
	const struct cfg_node *me = &n->cfg->nodes[n->self];
	struct ctl_info ci;
	unsigned nrepl = 0;
	int r;

	if (n->cfg->tls) {
		struct net_tls_opts o = { .cert = n->cfg->tls_cert,
					  .key = n->cfg->tls_key,
					  .ca = n->cfg->tls_ca };
		char why[256];
		r = net_tls_ctx_new(&o, &n->tls, why, sizeof(why));
		if (!r && !o.cert[0])
			r = net_tls_ctx_add_cluster(n->tls, n->cfg->cluster, n->cfg->secret);
		if (r) {
			snprintf(err, errlen, "%s: [cluster] %s", n->cfg->path,
				 n->tls ? strerror(-r) : why);
			return r;
		}
	}
	for (unsigned i = 0; i < n->cfg->nvolumes; i++) {
		const struct cfg_volume *cv = &n->cfg->volumes[i];
		if (!cfg_volume_has_node(cv, n->self))
			continue;
		r = vol_open(n->ev, n->cfg, i, n->self, &n->vols[n->nvols], err, errlen);
		if (r)
			return r;
		n->nvols++;
		if (cv->nnodes > 1) {
			r = repl_new(n->ev, n->cfg, i, n->self, n->vols[n->nvols - 1], err, errlen);
			if (r)
				return r;
			repl_use_tls(n->vols[n->nvols - 1]->repl, n->tls);
			nrepl++;
		}
	}
	if (nrepl) {
		r = repl_server_new(n->ev, n->cfg, n->self, n->vols, n->nvols, &n->repl);
		if (r) {
			snprintf(err, errlen, "%s: [node %s] replication: cannot listen on %s: %s",
				 n->cfg->path, me->name, me->replication, strerror(-r));
			return r;
		}
		repl_server_use_tls(n->repl, n->tls);
		log_info("replication on %s%s", me->replication,
			 !n->tls                          ? ""
			 : net_tls_ctx_uses_certs(n->tls) ? " (TLS 1.3, certificates)"
							  : " (TLS 1.3, cluster key)");
		if (n->cfg->witness[0]) {
			r = wit_client_new(n->ev, n->cfg, n->self, &n->wit);
			if (r) {
				snprintf(err, errlen, "%s: bad witness address %s", n->cfg->path,
					 n->cfg->witness);
				return r;
			}
			wit_client_use_tls(n->wit, n->tls);
			for (unsigned i = 0; i < n->nvols; i++)
				if (n->vols[i]->repl) {
					r = repl_use_witness(n->vols[i]->repl, n->wit);
					if (r) {
						snprintf(err, errlen, "witness: %s", strerror(-r));
						return r;
					}
				}
			wit_client_start(n->wit);
			log_info("witness %s", n->cfg->witness);
		}
		for (unsigned i = 0; i < n->nvols; i++)
			if (n->vols[i]->repl)
				repl_start(n->vols[i]->repl);
	}
	if (me->nbd[0]) {
		r = nbd_server_new(n->ev, me->nbd, n->cfg, n->vols, n->nvols, &n->nbd);
		if (r) {
			snprintf(err, errlen, "%s: [node %s] nbd: cannot listen on %s: %s",
				 n->cfg->path, me->name, me->nbd, strerror(-r));
			return r;
		}
		log_info("NBD on %s", me->nbd);
	}
	if (me->iscsi[0]) {
		r = iscsi_server_new(n->ev, me->iscsi, n->cfg, n->vols, n->nvols,
				     &n->iscsi);
		if (r) {
			snprintf(err, errlen, "%s: [node %s] iscsi: cannot listen on %s: %s",
				 n->cfg->path, me->name, me->iscsi, strerror(-r));
			return r;
		}
		log_info("iSCSI on %s", me->iscsi);
	}
	if (me->metrics[0])
		log_warn("[node %s] metrics = %s: the metrics endpoint is not in this version; "
			 "not listening", me->name, me->metrics);
	ci.node = me->name;
	ci.cluster = n->cfg->cluster;
	ci.vols = n->vols;
	ci.nvols = n->nvols;
	ci.faults = me->fault_injection;
	r = ctl_server_new(n->ev, me->control, &ci, &n->ctl);
	if (r) {
		snprintf(err, errlen, "%s: [node %s] control: cannot listen on %s: %s",
			 n->cfg->path, me->name, me->control,
			 r == -EADDRINUSE ? "another tandemd answers there" : strerror(-r));
		return r;
	}
	/* created 0600 (net_listen_unix); wider only when configured */
	if (me->control_mode != 0600 && chmod(me->control, me->control_mode) < 0)
		log_warn("[node %s] control-mode %04o: chmod %s: %s", me->name, me->control_mode,
			 me->control, strerror(errno));
	return 0;
}

static void stop(struct node *n)
{
	uint64_t deadline = now_ns() + 10ull * 1000000000ull;
	bool tls_unused;

	if (n->nbd)
		nbd_server_shutdown(n->nbd);
	if (n->iscsi)
		iscsi_server_shutdown(n->iscsi);
	if (n->ctl)
		ctl_server_shutdown(n->ctl);
	uint64_t grace = now_ns() + 2ull * 1000000000ull;

	/* In-flight requests complete and their replies go out first; clients
	 * that do not read them get 2 s before their connections are cut. */
	while (((n->nbd && nbd_server_conns(n->nbd)) || (n->ctl && ctl_server_conns(n->ctl)) ||
		(n->iscsi && iscsi_server_conns(n->iscsi))) &&
	       now_ns() < deadline) {
		if (grace && now_ns() > grace) {
			if (n->nbd)
				nbd_server_abort(n->nbd);
			if (n->iscsi)
				iscsi_server_abort(n->iscsi);
			grace = 0;
		}
		ev_run_once(n->ev, 100ull * 1000000ull);
	}
	/* Writes held for quorum were never acknowledged: they fail now. */
	for (unsigned i = 0; i < n->nvols; i++)
		if (n->vols[i]->repl)
			repl_release_held(n->vols[i]->repl);
	for (unsigned i = 0; i < n->nvols; i++)
		while (n->vols[i]->inflight && now_ns() < deadline)
			ev_run_once(n->ev, 100ull * 1000000ull);
	/* Then the peers: connections close, the change bitmaps settle. */
	if (n->repl)
		repl_server_shutdown(n->repl);
	wit_client_shutdown(n->wit);
	for (unsigned i = 0; i < n->nvols; i++)
		if (n->vols[i]->repl)
			repl_shutdown(n->vols[i]->repl);
	for (unsigned i = 0; i < n->nvols; i++)
		while (n->vols[i]->repl && !repl_idle(n->vols[i]->repl) && now_ns() < deadline)
			ev_run_once(n->ev, 100ull * 1000000ull);
	while (n->repl && repl_server_conns(n->repl) && now_ns() < deadline)
		ev_run_once(n->ev, 100ull * 1000000ull);
	while (!wit_client_idle(n->wit) && now_ns() < deadline)
		ev_run_once(n->ev, 10ull * 1000000ull);
	/* Closed connections are freed at the end of a pass. */
	ev_run_once(n->ev, 0);
	for (unsigned i = 0; i < n->nvols; i++) {
		repl_free(n->vols[i]->repl);
		vol_close(n->vols[i]);
	}
	/* (the connections' SSL objects use it until they are freed) */
	tls_unused = (!n->repl || repl_server_conns(n->repl) == 0) && wit_client_idle(n->wit);
	if (n->repl && repl_server_conns(n->repl) == 0)
		repl_server_free(n->repl);
	if (n->nbd && nbd_server_conns(n->nbd) == 0)
		nbd_server_free(n->nbd);
	if (n->iscsi && iscsi_server_conns(n->iscsi) == 0)
		iscsi_server_free(n->iscsi);
	if (n->ctl && ctl_server_conns(n->ctl) == 0)
		ctl_server_free(n->ctl);
	if (wit_client_idle(n->wit))
		wit_client_free(n->wit);
	if (tls_unused)
		net_tls_ctx_free(n->tls);
}

/* Without -f: fork, and let the parent exit only once the child is serving (0)
 * or has failed (1, with the message on stderr), so scripts see real status. */
static int daemonize(int *ready_fd)
{
	int p[2];
	pid_t pid;
	char buf[1024];
	ssize_t k;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		k = read(p[0], buf, sizeof(buf) - 1);
		if (k > 0 && buf[0] == '+')
			_exit(0);
		if (k > 1) {
			buf[k] = '\0';
			fprintf(stderr, "tandemd: %s\n", buf + 1);
		}
		_exit(1);
	}
	close(p[0]);
	setsid();
	/* Detach from the caller's terminal and pipes (so `$(tandemd ...)`
	 * returns); errors go to syslog from here on. */
	{
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
			if (nul > 2)
				close(nul);
		}
	}
	*ready_fd = p[1];
	return 0;
}

static void report(int fd, int ok, const char *msg)
{
	char buf[1024];
	int n;
	if (fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%c%s", ok ? '+' : '-', msg ? msg : "");
	if (write(fd, buf, (size_t)MIN(n, (int)sizeof(buf) - 1)) < 0) {
		/* the parent is gone; nothing to tell */
	}
	close(fd);
}

/* One daemon per node (SPEC guarantee 10): a second one would rewrite the
 * metadata of the running one (clearing its CLEAN flag is what makes a later
 * crash of the running daemon look clean) before failing on its ports. So
 * the lock is taken before anything of the node's is opened for writing, by
 * the process that goes on running (after daemonize), and held until exit.
 * Metadata always lives in data-dir, so one lock there covers every volume. */
static int lock_node(struct node *n, const char *name, char *err, size_t errlen)
{
	char path[CFG_PATH_MAX + 32];
	pid_t holder;
	int r;

	snprintf(path, sizeof(path), "%s/tandemd.lock", n->cfg->nodes[n->self].data_dir);
	r = lockfile_take(path, &n->lockfd, &holder);
	if (r == -EWOULDBLOCK && holder)
		snprintf(err, errlen, "node %s is already running (pid %ld, lock %s)", name,
			 (long)holder, path);
	else if (r == -EWOULDBLOCK)
		snprintf(err, errlen, "node %s is already running (lock %s)", name, path);
	else if (r)
		snprintf(err, errlen, "cannot lock %s: %s", path, strerror(-r));
	return r;
}

int main(int argc, char **argv)
{
	struct node n;
	const char *cfgpath = NULL, *name = NULL;
	int fg = 0, verbose = 0, opt, r, idx;
	char err[1024];
	sigset_t mask;

	memset(&n, 0, sizeof(n));
	n.ready_fd = -1;
	n.sigfd = -1;
	n.lockfd = -1;
	while ((opt = getopt(argc, argv, "c:n:fvh")) != -1) {
		switch (opt) {
		case 'c': cfgpath = optarg; break;
		case 'n': name = optarg; break;
		case 'f': fg = 1; break;
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!cfgpath || !name || optind != argc) {
		usage(stderr);
		return 2;
	}
	r = cfg_load(cfgpath, &n.cfg, err, sizeof(err));
	if (r) {
		fprintf(stderr, "tandemd: %s\n", err);
		return 1;
	}
	idx = cfg_node_index(n.cfg, name);
	if (idx < 0) {
		fprintf(stderr, "tandemd: %s: no [node %s] section\n", cfgpath, name);
		cfg_free(n.cfg);
		return 1;
	}
	n.self = (unsigned)idx;
	if (cfg_check_local(n.cfg, n.self, err, sizeof(err))) {
		fprintf(stderr, "tandemd: %s\n", err);
		cfg_free(n.cfg);
		return 1;
	}
	if (!fg && daemonize(&n.ready_fd) < 0) {
		fprintf(stderr, "tandemd: cannot daemonize: %s\n", strerror(errno));
		return 1;
	}
	log_init("tandemd", fg, verbose ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	if (lock_node(&n, name, err, sizeof(err))) {
		if (fg)
			fprintf(stderr, "tandemd: %s\n", err);
		else
			log_err("%s", err);
		report(n.ready_fd, 0, err);
		cfg_free(n.cfg);
		return 1;
	}
	if (cfg_secret_exposed(n.cfg, err, sizeof(err)))
		log_warn("SECURITY: %s", err);

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	n.sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	n.ev = ev_new(1024);
	if (!n.ev || n.sigfd < 0) {
		snprintf(err, sizeof(err), "cannot set up the event loop: %s", strerror(errno));
		r = -EIO;
		goto out;
	}
	ev_set_busy_poll(n.ev, (uint64_t)n.cfg->nodes[n.self].busy_poll_us * 1000);
	n.sig_op.cb = sig_cb;
	sig_arm(&n);
	err[0] = '\0';
	r = start(&n, err, sizeof(err));
	if (r)
		goto out;
	log_info("node %s of cluster %s ready: %u volume(s)", name, n.cfg->cluster, n.nvols);
	report(n.ready_fd, 1, NULL);
	n.ready_fd = -1;
#ifdef TANDEM_COVERAGE
	n.cov_timer.fn = cov_tick;
	ev_timer_arm(n.ev, &n.cov_timer, 1000000000ull);
#endif
	r = ev_run(n.ev);
	if (r)
		log_err("event loop failed: %s", strerror(-r));
out:
	if (r && err[0]) {
		if (fg)
			fprintf(stderr, "tandemd: %s\n", err);
		else
			log_err("%s", err);
	}
	report(n.ready_fd, 0, err);
	stop(&n);
	if (n.sigfd >= 0)
		close(n.sigfd);
	ev_free(n.ev);
	cfg_free(n.cfg);
	log_info("stopped");
	close(n.lockfd); /* last: the volumes are closed and marked clean */
	return r ? 1 : 0;
}
