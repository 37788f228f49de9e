/* tandem-witness's server: sessions with the nodes of one or more clusters,
 * the records of their volumes (wit_rec.h) and the state files that persist
 * them (docs/WITNESS.md, rules W1-W4).
 *
 * Session states (per connection):
 *   hello -> auth   [the client's HELLO names a known cluster and node]
 *   auth  -> up     [its AUTH proves the cluster secret]
 *   any   -> closed [bad message, failed proof, silence for witness-timeout,
 *                    a newer session of the same node]
 * Invariants:
 *   WS1. Nothing from a session touches a record before it is up.
 *   WS2. A record change is persisted (state file renamed and its directory
 *        synced) before any answer that depends on it is queued; when the
 *        write fails the change is undone and the session closed.
 *   WS3. A node is "alive" only while a session of it is up and heard from
 *        within witness-timeout; claims re-evaluate on every change of that.
 * Owns: the listener, the sessions, the records. Never: holds volume data. */
#ifndef TANDEM_WIT_SERVER_H
#define TANDEM_WIT_SERVER_H

#include <stddef.h>

#include "../config/config.h"
#include "../ev/ev.h"

struct wit_server;

/* cfgs: one per cluster, all naming the same witness address; each
 * cluster's state is loaded from its witness-dir (created if missing). */
int wit_server_new(struct ev_loop *ev, const struct cfg *const *cfgs, unsigned ncfg,
		   struct wit_server **out, char *err, size_t errlen);
void wit_server_shutdown(struct wit_server *ws);
void wit_server_free(struct wit_server *ws);

#endif
