/* tandem-witness's server: sessions with the nodes of one or more clusters,
 * the records of their volumes (wit_rec.h) and the state files that persist
 * them (docs/WITNESS.md, rules W1-W4).
 *
 * Session states (per connection):
 *   hello -> auth   [the client's HELLO names a known cluster and node; a
 *                    node's also a served cluster and its timeout (WS4)]
 *   auth  -> up     [its AUTH proves the cluster secret]
 *   any   -> closed [bad message, failed proof, silence for witness-timeout,
 *                    a newer session of the same node]
 * Invariants:
 *   WS1. Nothing from a session touches a record before it is up.
 *   WS2. A record change is persisted (state file renamed and its directory
 *        synced) before any answer that depends on it is queued; when the
 *        write fails the change is undone and the session closed.
 *   WS3. A node is "alive" only while a session of it is up and heard from
 *        within its cluster's witness-timeout; claims re-evaluate on every
 *        change of that. Each cluster's timeout (silence, claim wait, start
 *        grace) is its own config's.
 *   WS4. A node session gets past HELLO only if its cluster has a state file
 *        (or was just given one by --init) and the node's witness-timeout is
 *        the cluster's (W0). A refused cluster has no record and no session.
 * Owns: the listener, the sessions, the records. Never: holds volume data. */
#ifndef TANDEM_WIT_SERVER_H
#define TANDEM_WIT_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "../config/config.h"
#include "../ev/ev.h"

struct wit_server;

/* cfgs: one per cluster, all naming the same witness address; each
 * cluster's state is loaded from its witness-dir. init (NULL: none): per
 * cluster, create an empty state file (and witness-dir) when there is none
 * (--init: a new cluster); a cluster without a state file and without init
 * is refused (WS4), one whose file is unreadable fails the start. */
int wit_server_new(struct ev_loop *ev, const struct cfg *const *cfgs, const bool *init,
		   unsigned ncfg, struct wit_server **out, char *err, size_t errlen);
void wit_server_shutdown(struct wit_server *ws);
void wit_server_free(struct wit_server *ws);

#endif
