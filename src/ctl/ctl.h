/* Control socket: parses admin command lines and answers them from the
 * volumes' state. Owns: its listener and connections.
 * Never: changes volume state except through vol's API. */
#ifndef TANDEM_CTL_H
#define TANDEM_CTL_H

#include <stddef.h>

#include "../../include/proto/ctl.h"
#include "../ev/ev.h"
#include "../vol/vol.h"

/* Pure: splits a request line (without its newline) into words. Returns the
 * word count, or -EINVAL for an empty line, non-printable bytes, or more than
 * CTL_MAX_ARGS words. argv points into buf, which is modified. */
int ctl_parse_line(char *buf, char *argv[CTL_MAX_ARGS]);

struct ctl_server;
struct ctl_info {
	const char *node;
	const char *cluster;
	struct vol **vols;
	unsigned nvols;
	bool faults; /* fault-injection = on: `inject` is allowed */
};

int ctl_server_new(struct ev_loop *ev, const char *path, const struct ctl_info *info,
		   struct ctl_server **out);
void ctl_server_shutdown(struct ctl_server *s);
unsigned ctl_server_conns(const struct ctl_server *s);
void ctl_server_free(struct ctl_server *s); /* NULL is a no-op */

/* Renders status; exposed for tests. Returns bytes written (truncated at cap). */
size_t ctl_status_json(const struct ctl_info *info, const char *only, char *out, size_t cap);
size_t ctl_status_text(const struct ctl_info *info, const char *only, char *out, size_t cap);

#endif
