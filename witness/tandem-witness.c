/* tandem-witness: the tie-breaker of stretched pairs; holds no data. Each -c
 * names one cluster's configuration (its [cluster] witness, secret,
 * witness-dir, witness-timeout); one witness serves them all on the one
 * address they name. --init CLUSTER marks a cluster new: its empty state
 * file is created if missing, then it is served like the others. One
 * witness per state file (a lock beside it); SIGHUP is ignored. Wiring
 * only: the protocol is src/wit. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <liburing.h>

#include "../src/common/fsutil.h"
#include "../src/common/log.h"
#include "../src/common/util.h"
#include "../src/config/config.h"
#include "../src/ev/ev.h"
#include "../src/wit/wit_server.h"

#define MAX_CLUSTERS 64

struct witness {
	struct ev_loop *ev;
	int sigfd;
	struct signalfd_siginfo si;
	struct ev_op sig_op;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: tandem-witness -c FILE [-c FILE ...] [--init CLUSTER ...] [-f]\n"
		   "  -c FILE         a cluster configuration (INI); repeat for more clusters\n"
		   "  --init CLUSTER  a new cluster: create its empty state file if there is\n"
		   "                  none (an existing one is left alone), then serve it;\n"
		   "                  without it a cluster with no state file is refused\n"
		   "  -f              stay in the foreground and log to stderr\n");
}

static void sig_arm(struct witness *w);

static void sig_cb(struct ev_op *op, int res, uint32_t flags)
{
	struct witness *w = container_of(op, struct witness, sig_op);
	(void)flags;
	/* HUP must not stop the witness (SPEC guarantee 10): its nodes would
	 * lose their quorum partner for nothing; there is nothing to reload. */
	if (res == (int)sizeof(w->si) && w->si.ssi_signo == SIGHUP) {
		log_info("SIGHUP ignored: reload is not supported in this version");
	} else if (res == (int)sizeof(w->si)) {
		log_info("signal %u: shutting down", w->si.ssi_signo);
		ev_stop(w->ev);
		return;
	}
	sig_arm(w);
}

static void sig_arm(struct witness *w)
{
	io_uring_prep_read(ev_sqe(w->ev, &w->sig_op), w->sigfd, &w->si, sizeof(w->si), 0);
}

/* One witness per state file (SPEC guarantee 10): a second one would answer
 * from a record the first goes on rewriting. Each served cluster's state
 * file gets a lock file beside it, witness-CLUSTER.lock, taken before the
 * state is read or written and held until exit (flock: daemon()'s child
 * keeps it). A cluster whose witness-dir does not exist and that is not
 * --init has no state to protect (it is refused). Returns 0 or 1 with the
 * message printed. */
static int lock_clusters(struct cfg **cfgs, const bool *init, unsigned ncfg, int *fds)
{
	for (unsigned i = 0; i < ncfg; i++)
		fds[i] = -1;
	for (unsigned i = 0; i < ncfg; i++) {
		char path[CFG_PATH_MAX + CFG_NAME_MAX + 32];
		pid_t holder;
		bool seen = false;
		int r;

		for (unsigned k = 0; k < i; k++)
			seen = seen || !strcmp(cfgs[k]->cluster, cfgs[i]->cluster);
		if (seen)
			continue; /* wit_server_new refuses the pair with a better message */
		if (init[i])
			(void)mkdir(cfgs[i]->witness_dir, 0700); /* as --init would */
		snprintf(path, sizeof(path), "%s/witness-%s.lock", cfgs[i]->witness_dir,
			 cfgs[i]->cluster);
		r = lockfile_take(path, &fds[i], &holder);
		if (r == -ENOENT)
			continue;
		if (r == -EWOULDBLOCK) {
			fprintf(stderr,
				"tandem-witness: cluster %s is already served by the witness "
				"with pid %ld (lock %s)\n",
				cfgs[i]->cluster, (long)holder, path);
			return 1;
		}
		if (r) {
			fprintf(stderr, "tandem-witness: cannot lock %s: %s\n", path, strerror(-r));
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct cfg *cfgs[MAX_CLUSTERS];
	const struct cfg *ccfgs[MAX_CLUSTERS];
	const char *inits[MAX_CLUSTERS];
	bool init[MAX_CLUSTERS] = { false };
	unsigned ncfg = 0, ninit = 0;
	static const struct option longopts[] = {
		{ "init", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int lockfds[MAX_CLUSTERS];
	struct wit_server *ws = NULL;
	struct witness w;
	char err[1024];
	sigset_t mask;
	int opt, fg = 0, rc = 1;

	memset(&w, 0, sizeof(w));
	while ((opt = getopt_long(argc, argv, "c:fh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (ncfg == MAX_CLUSTERS) {
				fprintf(stderr, "tandem-witness: at most %d clusters\n",
					MAX_CLUSTERS);
				return 2;
			}
			if (cfg_load(optarg, &cfgs[ncfg], err, sizeof(err))) {
				fprintf(stderr, "tandem-witness: %s\n", err);
				return 1;
			}
			if (!cfgs[ncfg]->witness[0]) {
				fprintf(stderr,
					"tandem-witness: %s: [cluster] has no 'witness' address\n",
					optarg);
				return 1;
			}
			ccfgs[ncfg] = cfgs[ncfg];
			ncfg++;
			break;
		case 'i':
			if (ninit == MAX_CLUSTERS) {
				fprintf(stderr, "tandem-witness: at most %d --init\n",
					MAX_CLUSTERS);
				return 2;
			}
			inits[ninit++] = optarg;
			break;
		case 'f': fg = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!ncfg || optind != argc) {
		usage(stderr);
		return 2;
	}
	for (unsigned k = 0; k < ninit; k++) {
		unsigned i = 0;

		while (i < ncfg && strcmp(cfgs[i]->cluster, inits[k]))
			i++;
		if (i == ncfg) {
			fprintf(stderr,
				"tandem-witness: --init %s: no -c file names that cluster\n",
				inits[k]);
			return 2;
		}
		init[i] = true;
	}
	/* before daemon(): the caller sees the refusal and the exit status */
	if (lock_clusters(cfgs, init, ncfg, lockfds)) {
		for (unsigned i = 0; i < ncfg; i++) {
			if (lockfds[i] >= 0)
				close(lockfds[i]);
			cfg_free(cfgs[i]);
		}
		return 1;
	}
	if (!fg && daemon(0, 0) < 0) {
		fprintf(stderr, "tandem-witness: cannot daemonize: %s\n", strerror(errno));
		return 1;
	}
	for (unsigned i = 0; i < ncfg; i++)
		if (lockfds[i] >= 0)
			(void)lockfile_stamp(lockfds[i]); /* daemon()'s child: its pid */
	log_init("tandem-witness", fg, LOG_LVL_INFO);
	for (unsigned i = 0; i < ncfg; i++)
		if (cfg_secret_exposed(cfgs[i], err, sizeof(err)))
			log_warn("SECURITY: %s", err);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	w.sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	w.ev = ev_new(256);
	if (!w.ev || w.sigfd < 0) {
		fprintf(stderr, "tandem-witness: cannot set up the event loop: %s\n",
			strerror(errno));
		goto out;
	}
	w.sig_op.cb = sig_cb;
	sig_arm(&w);
	err[0] = '\0';
	if (wit_server_new(w.ev, ccfgs, init, ncfg, &ws, err, sizeof(err))) {
		fprintf(stderr, "tandem-witness: %s\n", err);
		log_err("%s", err);
		goto out;
	}
	for (unsigned i = 0; i < ncfg; i++)
		log_info("witness for cluster %s (%u volume(s)), listening on %s, state in %s",
			 cfgs[i]->cluster, cfgs[i]->nvolumes, cfgs[i]->witness,
			 cfgs[i]->witness_dir);
	if (fg)
		fprintf(stderr, "tandem-witness: ready\n");
	rc = ev_run(w.ev) ? 1 : 0;
	wit_server_shutdown(ws);
	for (int i = 0; i < 20; i++)
		ev_run_once(w.ev, 10ull * 1000000ull);
out:
	wit_server_free(ws);
	ev_free(w.ev);
	if (w.sigfd >= 0)
		close(w.sigfd);
	for (unsigned i = 0; i < ncfg; i++)
		cfg_free(cfgs[i]);
	log_info("stopped");
	for (unsigned i = 0; i < ncfg; i++)
		if (lockfds[i] >= 0)
			close(lockfds[i]);
	return rc;
}
