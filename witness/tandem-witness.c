/* tandem-witness: the tie-breaker of a stretched pair. It holds no data.
 * This version validates the configuration and listens on the [cluster]
 * witness address; the quorum protocol arrives with replication. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../src/common/util.h"
#include "../src/config/config.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: tandem-witness -c FILE [-f]\n");
}

int main(int argc, char **argv)
{
	const char *cfgpath = NULL;
	struct cfg *cfg;
	char err[1024];
	struct sockaddr_storage ss;
	socklen_t len;
	int opt, fd, one = 1, fg = 0;

	while ((opt = getopt(argc, argv, "c:fh")) != -1) {
		switch (opt) {
		case 'c': cfgpath = optarg; break;
		case 'f': fg = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!cfgpath || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (cfg_load(cfgpath, &cfg, err, sizeof(err))) {
		fprintf(stderr, "tandem-witness: %s\n", err);
		return 1;
	}
	if (!cfg->witness[0]) {
		fprintf(stderr, "tandem-witness: %s: [cluster] has no 'witness' address\n", cfgpath);
		cfg_free(cfg);
		return 1;
	}
	if (parse_addr(cfg->witness, &ss, &len) < 0 ||
	    (fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		fprintf(stderr, "tandem-witness: bad witness address %s\n", cfg->witness);
		cfg_free(cfg);
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 16) < 0) {
		fprintf(stderr, "tandem-witness: cannot listen on %s: %s\n", cfg->witness,
			strerror(errno));
		cfg_free(cfg);
		return 1;
	}
	if (!fg && daemon(0, 0) < 0) {
		fprintf(stderr, "tandem-witness: cannot daemonize: %s\n", strerror(errno));
		return 1;
	}
	fprintf(stderr, "tandem-witness: cluster %s, listening on %s\n", cfg->cluster, cfg->witness);
	/* Until the quorum protocol exists, connections are accepted and closed. */
	for (;;) {
		int c = accept(fd, NULL, NULL);
		if (c >= 0)
			close(c);
		else if (errno != EINTR)
			break;
	}
	cfg_free(cfg);
	return 0;
}
