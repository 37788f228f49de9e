/* Running a decoded SCSI command (lu_decode gave SCSI_IO) against the
 * logical unit's volume: plain reads and writes, flushes, UNMAP extents,
 * WRITE SAME patterns, the read / compare / write flows of VERIFY with data,
 * COMPARE AND WRITE and ORWRITE (under a range lock of the volume),
 * PERSISTENT RESERVE OUT (stored, then a flush) and EXTENDED COPY. Owns the
 * command's I/O and its second buffer. Never sees a PDU or a connection: the
 * transport fills a struct lu_cmd, calls exec_start once the data-out is in,
 * and gets the answer back through struct lu_cmd_ops.
 *
 * Calling sequence (transport side):
 *   cmd->ops, cmd->n, cmd->cdb, cmd->req (lu_decode's SCSI_IO outcome),
 *   cmd->buf / buf_len (room for max(data_out_len, data_in_len): the data-out
 *   in, a READ's data-in out), cmd->got (data-out bytes in buf);
 *   exec_start(cmd): exactly one ops->status or ops->data_in answers it (maybe
 *   before exec_start returns); a reference taken with ops->get is dropped
 *   with ops->put once exec holds no pointer into cmd. exec_busy(cmd) is true
 *   while I/O of cmd is at the volume.
 *   Aborted (ops->aborted true): an I/O in flight finishes; no further step
 *   changes the medium (COMPARE AND WRITE, ORWRITE: nothing is written after
 *   the read; WRITE SAME patterns and EXTENDED COPY stop after the chunk in
 *   flight); the answer is still given, for the transport to drop.
 *   exec_fini(cmd) when the transport frees cmd: releases what exec holds.
 *   SET TARGET PORT GROUPS runs a planned switchover (vol_switchover), polled
 *   every STPG_POLL_MS until done, refused, or STPG_MAX_S: then SET TARGET
 *   PORT GROUPS COMMAND FAILED (HARDWARE ERROR 67/0A).
 * lu_cmd_answer(cmd) sends the answer held in cmd->req (DONE). */
#ifndef TANDEM_SCSI_EXEC_H
#define TANDEM_SCSI_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ev/ev.h"
#include "../vol/vol.h"
#include "lu.h"
#include "scsi.h"
#include "xcopy.h"

#define LU_CDB_LEN 16u

struct lu_cmd;

struct lu_cmd_ops {
	/* The command ends with status (sense_len bytes of sense) after xfer bytes
	 * of its data transfer (the transport reports the residual against its
	 * expected length). */
	void (*status)(struct lu_cmd *cmd, uint8_t status, const uint8_t *sense, uint32_t sense_len,
		       uint32_t xfer);
	/* The command ends GOOD with len bytes of data-in at data; in_buf: data
	 * points into cmd->buf (block data), which the transport keeps until it
	 * has sent it. */
	void (*data_in)(struct lu_cmd *cmd, const uint8_t *data, uint32_t len, bool in_buf);
	/* True once the transport aborted the command. */
	bool (*aborted)(const struct lu_cmd *cmd);
	/* n more bytes of buffers held for cmd (the transport's memory cap). */
	void (*charge)(struct lu_cmd *cmd, size_t n);
	/* References: cmd stays while exec holds one. */
	void (*get)(struct lu_cmd *cmd);
	void (*put)(struct lu_cmd *cmd);
};

/* One command at the logical unit, embedded in the transport's task. */
struct lu_cmd {
	/* filled by the transport */
	const struct lu_cmd_ops *ops;
	struct lu_nexus *n;
	uint8_t cdb[LU_CDB_LEN];
	struct scsi_req req;
	uint8_t *buf; /* the transport's; see above */
	uint32_t buf_len;
	uint32_t got; /* write data received (in order) */
	/* exec's own */
	struct vol_io io;
	bool busy;               /* I/O of this command at the volume */
	struct scsi_extent *ext; /* UNMAP: extents still to run */
	int next_ext, n_ext;
	/* compare / merge commands (VERIFY BYTCHK, COMPARE AND WRITE, ORWRITE) and
	 * WRITE SAME patterns: a second buffer and the range lock */
	uint8_t *cmp;
	uint32_t cmp_len;
	struct vol_lock lock;
	bool locked;
	uint64_t pat_done; /* WRITE SAME pattern: bytes of the extent written */
	/* EXTENDED COPY: the segments, the one running, bytes of it done */
	struct xcopy_seg *xsegs;
	int xseg, nxseg;
	uint64_t xdone;
	/* SET TARGET PORT GROUPS: the switchover polled until it is done */
	struct ev_timer stpg;
	uint64_t stpg_t0;
	bool stpg_to_self;
};

void exec_start(struct lu_cmd *cmd);
bool exec_busy(const struct lu_cmd *cmd);
void exec_fini(struct lu_cmd *cmd);
void lu_cmd_answer(struct lu_cmd *cmd);

#endif
