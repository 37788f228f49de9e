/* iSCSI front-end (RFC 7143) over src/net, SCSI commands through the logical
 * unit of src/scsi (lu.h, exec.h), I/O through src/vol: one target per
 * volume, IQN iqn.2026-11.org.tandem:<cluster>.<volume>, LUN 0; SendTargets
 * discovery. Files: iscsi_server.c (connections, output, receive parser,
 * NOP, logout, the server), iscsi_login.c (login, CHAP, text), iscsi_task.c
 * (SCSI tasks, data transfer, status, task management), iscsi_conn.h (their
 * private header).
 *
 * Connection states LOGIN -> FULL -> LOGOUT -> DEAD (transitions at the top
 * of iscsi_server.c); task states at the top of iscsi_task.c.
 * Invariants:
 *   I1. Nothing but Login is accepted before FULL (data before login drops
 *       the connection); a PDU's lengths are checked before anything is
 *       read into a buffer of that size.
 *   I2. Every SCSI task gets exactly one final status (Data-In with S, or
 *       SCSI Response), unless it was aborted by task management.
 *   I3. StatSN advances by one for every PDU that carries status.
 * Owns: its listener, connections and tasks. Never: touches a store directly,
 * keeps logical unit state (unit attentions, reservations: src/scsi/lu.h). */
#ifndef TANDEM_ISCSI_SERVER_H
#define TANDEM_ISCSI_SERVER_H

#include "../config/config.h"
#include "../ev/ev.h"
#include "../vol/vol.h"

struct iscsi_server;

#define ISCSI_IQN_PREFIX "iqn.2026-11.org.tandem:"

/* Serves vols (borrowed) on addr; cfg (borrowed) gives the cluster name and
 * the CHAP settings (cluster level for discovery, per volume for targets). */
int iscsi_server_new(struct ev_loop *ev, const char *addr, const struct cfg *cfg,
		     struct vol **vols, unsigned nvols, struct iscsi_server **out);
void iscsi_server_shutdown(struct iscsi_server *s);
void iscsi_server_abort(struct iscsi_server *s);
unsigned iscsi_server_conns(const struct iscsi_server *s);
void iscsi_server_free(struct iscsi_server *s);

#endif
