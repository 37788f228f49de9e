/* NBD front-end: fixed newstyle handshake and transmission over src/net,
 * I/O through src/vol. Many connections, many requests in flight on each,
 * completed out of order.
 * Owns: its listener and connections. Never: touches a store directly. */
#ifndef TANDEM_NBD_SERVER_H
#define TANDEM_NBD_SERVER_H

#include "../ev/ev.h"
#include "../vol/vol.h"

struct nbd_server;

/* Serves vols (borrowed; they outlive the server) on addr, with cfg's
 * connection limits (max-connections, max-connections-per-address,
 * handshake-timeout; cfg is borrowed too). */
int nbd_server_new(struct ev_loop *ev, const char *addr, const struct cfg *cfg,
		   struct vol **vols, unsigned nvols, struct nbd_server **out);
/* Stops accepting and closes every connection; in-flight requests finish. */
void nbd_server_shutdown(struct nbd_server *s);
/* After shutdown: drops the output of connections whose clients do not read. */
void nbd_server_abort(struct nbd_server *s);
/* Connections not yet fully released (0 once shutdown has completed). */
unsigned nbd_server_conns(const struct nbd_server *s);
void nbd_server_free(struct nbd_server *s); /* NULL is a no-op; after conns() == 0 */

#endif
