/* The SCSI logical unit of one volume, apart from any transport (SAM-5 4.6,
 * SPC-4 5.13, 5.14). Owns: its reservations (the src/scsi/pr.h state, loaded
 * from and saved to the volume's attributes, which the volume persists and
 * replicates), the I_T nexuses attached to it with their unit attentions and
 * EXTENDED COPY result, the decoding of a command for a nexus (unit
 * attention, reservation conflict, scsi_exec, the PR IN and COPY RESULTS
 * answers), and the task-set rules of task management: whose tasks an abort
 * or a reset reaches and who is told. Never sees a PDU, a sequence number or
 * a connection; never aborts a task itself (it asks the transport through
 * struct lu_nexus_ops). Running a decoded command against the volume is
 * src/scsi/exec.h.
 *
 * Calling sequence (transport side):
 *   lu_init(lu, vol, target name, max transfer, pool)   once per volume
 *   lu_nexus_attach(lu, n, name, tport, ops)   the I_T nexus exists (login done)
 *   every command: lu_decode(n, lun, cdb, len, edtl, &req); DONE: answer it;
 *                  SCSI_IO: receive its data-out, then exec_start() (exec.h)
 *   ABORT TASK SET      lu_abort_task_set(n)
 *   CLEAR TASK SET      lu_clear_task_set(n)
 *   LUN / target reset  lu_reset(n, lun_reset)
 *   nexus gone          lu_nexus_lost(n)   (logout, connection lost)
 * A nexus that never attached (n->lu NULL: a discovery session) is ignored by
 * every lu_* call. */
#ifndef TANDEM_SCSI_LU_H
#define TANDEM_SCSI_LU_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/bufpool.h"
#include "../common/list.h"
#include "../vol/vol.h"
#include "pr.h"
#include "scsi.h"
#include "xcopy.h"

#define LU_TARGET_NAME_MAX 256u /* the transport's target name, NUL included */

/* What a logical unit keeps across commands and sessions. One per volume. */
struct lu {
	struct vol *vol;
	struct bufpool *pool; /* buffers of the compare / pattern / copy steps; borrowed */
	struct scsi_lu desc;  /* what scsi_exec sees; ready is refreshed per command */
	char serial[40];
	char target_name[LU_TARGET_NAME_MAX];
	struct pr_state pr;
	uint64_t pr_version; /* vol->meta_version that pr was decoded from */
	bool pr_loaded;
	struct list nexuses; /* struct lu_nexus: every attached I_T nexus */
};

/* ALUA (SPC-4 5.15): the volume's two nodes are two target port groups of
 * one target port each, ids from vol->port_self / port_peer. This node's
 * group is active/optimized while it is a primary that may serve I/O, else
 * standby; the peer's is active/optimized or standby by the role it last
 * reported, unavailable while it is not connected. lu_decode refreshes the
 * states before each command; a change of either gives every nexus
 * ASYMMETRIC ACCESS STATE CHANGED (2A/06). */

struct lu_nexus;

/* What the logical unit asks of the transport that owns a nexus. */
struct lu_nexus_ops {
	/* Aborts every task of n silently (TAS=0: no status for any of them; a
	 * task whose I/O is already submitted finishes that I/O unanswered).
	 * Returns whether n had any task before (aborted ones included). */
	bool (*abort_tasks)(struct lu_nexus *n);
};

/* One I_T nexus, embedded in the transport's session. Zeroed until attached. */
struct lu_nexus {
	struct lu *lu; /* NULL until lu_nexus_attach; stays set after lu_nexus_lost */
	const struct lu_nexus_ops *ops;
	struct pr_nexus id;     /* the initiator port name, for reservations */
	struct xcopy_status xs; /* the last EXTENDED COPY of this I_T nexus */
	/* unit attentions pending for this I_T nexus, oldest first, as
	 * ASC << 8 | ASCQ */
	uint16_t ua[4];
	unsigned nua;
	struct list link; /* in lu->nexuses while attached */
};

/* Fills lu for v (borrowed, as is pool); target_name goes into VPD 0x83,
 * max_xfer (bytes) into the block limits. No session survives a restart, so
 * a primary's SPC-2 reservation is dropped here. */
void lu_init(struct lu *lu, struct vol *v, const char *target_name, uint32_t max_xfer,
	     struct bufpool *pool);

/* The I_T nexus named name ("<iqn>,i,0x<isid>" for iSCSI; refused rather
 * than cut by the transport when too long) on relative target port tport
 * reaches lu from now on, never before: a login that fails must not touch
 * the LU's state. */
void lu_nexus_attach(struct lu *lu, struct lu_nexus *n, const char *name, uint16_t tport,
		     const struct lu_nexus_ops *ops);

/* The nexus is gone: its SPC-2 reservation goes, it gets no more unit
 * attentions and no aborts. */
void lu_nexus_lost(struct lu_nexus *n);

/* Decodes cdb[0..cdb_len) for LUN lun from n into *q: a pending unit
 * attention instead (INQUIRY and REPORT LUNS run; REQUEST SENSE returns it
 * as its data), RESERVATION CONFLICT, or scsi_exec() and the answer of the
 * stateful commands that need no data-out (PR IN, RECEIVE COPY RESULTS).
 * edtl, the expected data transfer length, only refuses a data-out command
 * whose length it cannot carry (INVALID FIELD IN CDB). */
void lu_decode(struct lu_nexus *n, uint64_t lun, const uint8_t *cdb, uint32_t cdb_len,
	       uint32_t edtl, struct scsi_req *q);

/* The logical unit's reservations as the volume attributes hold them now
 * (they change under us when the peer primary sends new ones). */
struct pr_state *lu_pr(struct lu *lu);

/* PERSISTENT RESERVE OUT, RESERVE, RELEASE from n with len bytes of
 * parameter list: 1 when the state changed, was stored (and sent to the
 * peer) and the other nexuses were told; 0 when q holds the answer; -errno
 * when the change could not be stored (it did not happen). */
int lu_pr_out(struct lu_nexus *n, const uint8_t *cdb, const uint8_t *param, uint32_t len,
	      struct scsi_req *q);

/* Task management (SAM-5 7). ABORT TASK SET: n's tasks only. CLEAR TASK SET
 * (TST=0: one task set) and the resets: the tasks of every nexus of the LU;
 * CLEAR TASK SET tells the other nexuses that lost a task (COMMANDS CLEARED
 * BY ANOTHER INITIATOR), a reset clears the SPC-2 reservation and gives every
 * nexus its unit attention (lun_reset: BUS DEVICE RESET FUNCTION OCCURRED,
 * else POWER ON, RESET, OR BUS DEVICE RESET OCCURRED). */
void lu_abort_task_set(struct lu_nexus *n);
void lu_clear_task_set(struct lu_nexus *n);
void lu_reset(struct lu_nexus *n, bool lun_reset);

/* MODE SELECT from n set SWP to on: kept for the logical unit (on this node,
 * until the daemon restarts); a change gives the other nexuses MODE
 * PARAMETERS CHANGED (2A/01). */
void lu_set_swp(struct lu_nexus *n, bool on);

#endif
