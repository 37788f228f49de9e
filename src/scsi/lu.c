/* The logical unit of one volume: see lu.h. Owns the unit attentions of its
 * nexuses, its reservations (load, save, notify) and the reach of task
 * management across nexuses. Never does medium I/O (exec.c does), never
 * answers a transport. */
#include "lu.h"

#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"

/* ---- unit attentions (SAM-5 5.14, SPC-4 5.14) ---- */

#define UA_RESET 0x2903        /* BUS DEVICE RESET FUNCTION OCCURRED (LUN reset) */
#define UA_TARGET_RESET 0x2900 /* POWER ON, RESET, OR BUS DEVICE RESET OCCURRED */
#define UA_CLEARED 0x2f00      /* COMMANDS CLEARED BY ANOTHER INITIATOR */

static void ua_add(struct lu_nexus *n, uint16_t asc)
{
	for (unsigned i = 0; i < n->nua; i++)
		if (n->ua[i] == asc)
			return;
	if (n->nua < ARRAY_SIZE(n->ua))
		n->ua[n->nua++] = asc;
}

/* To every nexus of the logical unit. */
static void ua_broadcast(struct lu *lu, uint16_t asc)
{
	struct list *pos, *tmp;
	list_for_each_safe (pos, tmp, &lu->nexuses)
		ua_add(container_of(pos, struct lu_nexus, link), asc);
}

/* Reports the oldest pending unit attention instead of running the command
 * (INQUIRY and REPORT LUNS run; REQUEST SENSE returns it as its data).
 * True when q was completed that way. */
static bool ua_report(struct lu_nexus *n, const uint8_t *cdb, struct scsi_req *q)
{
	uint16_t asc;

	if (!n->nua || cdb[0] == SCSI_INQUIRY || cdb[0] == SCSI_REPORT_LUNS)
		return false;
	asc = n->ua[0];
	memmove(n->ua, n->ua + 1, (n->nua - 1) * sizeof(n->ua[0]));
	n->nua--;
	scsi_check(q, SCSI_KEY_UNIT_ATTENTION, asc);
	if (cdb[0] == SCSI_REQUEST_SENSE) {
		memcpy(q->data, q->sense, q->sense_len);
		scsi_data_in(q, q->sense_len, cdb[4]);
	}
	return true;
}

/* ---- task sets (SAM-5 7.3, 7.6, 7.7) ---- */

/* Every task of every nexus of the LU aborted (CLEAR TASK SET with TST=0 and
 * the resets reach every I_T nexus; TAS=0, so silently). The other nexuses
 * that lost a task are told asc (0: nobody). */
static void tasks_abort_lu(struct lu_nexus *n, uint16_t asc)
{
	struct list *pos, *tmp;
	list_for_each_safe (pos, tmp, &n->lu->nexuses) {
		struct lu_nexus *o = container_of(pos, struct lu_nexus, link);
		if (o->ops->abort_tasks(o) && asc && o != n)
			ua_add(o, asc);
	}
}

void lu_abort_task_set(struct lu_nexus *n)
{
	if (n->lu) /* this I_T nexus's tasks only */
		n->ops->abort_tasks(n);
}

void lu_clear_task_set(struct lu_nexus *n)
{
	if (n->lu) /* TST=0: one task set, every nexus's tasks */
		tasks_abort_lu(n, UA_CLEARED);
}

/* ---- reservations (src/scsi/pr.h) ---- */

struct pr_state *lu_pr(struct lu *lu)
{
	struct vol *v = lu->vol;

	if (lu->pr_loaded && lu->pr_version == v->meta_version)
		return &lu->pr;
	if (!v->meta_len || pr_decode(&lu->pr, v->meta, v->meta_len)) {
		if (v->meta_len)
			log_warn("volume %s: stored reservations unreadable: starting without",
				 v->name);
		pr_init(&lu->pr);
	}
	lu->pr_version = v->meta_version;
	lu->pr_loaded = true;
	return &lu->pr;
}

/* Persists (and replicates) lu->pr: 0 or -errno. */
static int lu_pr_save(struct lu *lu)
{
	uint8_t buf[PR_IMAGE_MAX];
	int n = pr_encode(&lu->pr, buf, sizeof(buf)), r;

	if (n < 0)
		return n;
	r = vol_meta_set(lu->vol, buf, (size_t)n);
	if (!r)
		lu->pr_version = lu->vol->meta_version;
	else
		lu->pr_loaded = false; /* back to what is stored: the change did not happen */
	return r;
}

/* After a transport event (nexus loss, reset) that may change the state. */
static void lu_pr_event(struct lu_nexus *n, bool reset)
{
	struct lu *lu = n->lu;
	struct pr_state *s;

	if (lu->vol->role != VOL_PRIMARY)
		return;
	s = lu_pr(lu);
	if ((reset ? pr_reset(s) : pr_nexus_lost(s, &n->id)) && lu_pr_save(lu))
		log_warn("volume %s: reservations not saved", lu->vol->name);
}

/* The other nexuses of the LU after a PROUT by n changed *before: the unit
 * attentions pr_ua() names, and for PREEMPT AND ABORT the preempted nexuses'
 * tasks aborted (TAS=0: silently; a task whose I/O is already submitted
 * finishes that I/O unanswered). */
static void pr_out_notify(struct lu_nexus *n, const struct pr_state *before, const uint8_t *cdb)
{
	const struct pr_state *after = lu_pr(n->lu);
	bool abort = (cdb[1] & 0x1f) == PR_OUT_PREEMPT_AND_ABORT;
	struct list *pos, *tmp;

	list_for_each_safe (pos, tmp, &n->lu->nexuses) {
		struct lu_nexus *o = container_of(pos, struct lu_nexus, link);
		uint16_t asc;

		if (o == n)
			continue;
		asc = pr_ua(before, after, cdb, &n->id, &o->id);
		if (!asc)
			continue;
		ua_add(o, asc);
		if (abort && asc == PR_UA_REG_PREEMPTED)
			o->ops->abort_tasks(o);
	}
}

int lu_pr_out(struct lu_nexus *n, const uint8_t *cdb, const uint8_t *param, uint32_t len,
	      struct scsi_req *q)
{
	struct pr_state *before = malloc(sizeof(*before));
	int r;

	if (!before)
		return -ENOMEM;
	*before = *lu_pr(n->lu);
	if (pr_out(lu_pr(n->lu), &n->id, cdb, param, len, q) <= 0) {
		free(before);
		return 0;
	}
	r = lu_pr_save(n->lu);
	if (!r)
		pr_out_notify(n, before, cdb);
	free(before);
	return r ? r : 1;
}

void lu_reset(struct lu_nexus *n, bool lun_reset)
{
	if (!n->lu)
		return;
	tasks_abort_lu(n, 0);
	lu_pr_event(n, true);
	ua_broadcast(n->lu, lun_reset ? UA_RESET : UA_TARGET_RESET);
}

/* ---- the logical unit and its nexuses ---- */

static void lu_refresh(struct lu *lu);

void lu_init(struct lu *lu, struct vol *v, const char *target_name, uint32_t max_xfer,
	     struct bufpool *pool)
{
	uint8_t u[SHA256_DIGEST_LENGTH];

	memset(lu, 0, sizeof(*lu));
	/* NAA 6 (IEEE Registered Extended): the company id is left zero, the
	 * vendor-specific part is taken from the SHA-256 of the target name,
	 * which names the volume in its cluster: the same device on every node,
	 * which is what lets multipath see one device through both targets */
	SHA256((const unsigned char *)target_name, strlen(target_name), u);
	lu->desc.naa[0] = 0x60;
	memcpy(lu->desc.naa + 1, u, 15);
	snprintf(lu->serial, sizeof(lu->serial),
		 "%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x", u[0], u[1],
		 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
		 u[15]);
	lu->vol = v;
	lu->pool = pool;
	list_init(&lu->nexuses);
	lu->desc.size = v->size;
	lu->desc.block = 512;
	/* LBPPB 1: libiscsi 1.19's GetLBAStatus.UnmapSingle expects a descriptor
	 * that starts past the requested LBA when LBPPB > 1 (against SBC-3) */
	lu->desc.phys_block = 512;
	snprintf(lu->target_name, sizeof(lu->target_name), "%s", target_name);
	lu->desc.vendor = "TANDEM";
	lu->desc.product = v->name;
	lu->desc.serial = lu->serial;
	lu->desc.target_name = lu->target_name;
	lu->desc.thin = true;
	lu->desc.write_cache = true;
	lu->desc.max_xfer_blocks = max_xfer / 512;
	lu->desc.ntpg = v->port_peer ? 2 : 1;
	lu->desc.tpg[0].id = lu->desc.tpg[0].port = v->port_self;
	lu->desc.tpg[1].id = lu->desc.tpg[1].port = v->port_peer;
	lu_refresh(lu); /* the states a first session finds: no unit attention */
	/* no session survives a restart: neither does an SPC-2 reservation */
	if (v->role == VOL_PRIMARY && pr_reset(lu_pr(lu)) && lu_pr_save(lu))
		log_warn("volume %s: reservations not saved", v->name);
}

/* Readiness and the port groups' states as the volume has them now; a
 * changed state is told to every nexus attached (2A/06). */
static void lu_refresh(struct lu *lu)
{
	struct vol *v = lu->vol;
	struct scsi_lu *d = &lu->desc;
	uint8_t before[2] = { d->tpg[0].access, d->tpg[1].access };

	bool lease = vol_lease_ok(v);

	d->ready = v->role == VOL_PRIMARY && !v->demoting && vol_serving(v) && lease;
	/* a primary without its lease is in transition: to serving again, or
	 * to standby once it steps down (L5) */
	d->tpg[0].access = d->ready                           ? SCSI_ALUA_OPTIMIZED
			   : v->role == VOL_PRIMARY && !lease ? SCSI_ALUA_TRANSITIONING
							      : SCSI_ALUA_STANDBY;
	if (d->ntpg > 1) {
		int peer = vol_peer_role(v);
		/* unreachable: unavailable to a primary (it is in charge); a
		 * secondary, which cannot tell a dead primary from a cut link,
		 * says nothing of it */
		d->tpg[1].access = peer == VOL_PRIMARY ? SCSI_ALUA_OPTIMIZED
				   : peer >= 0         ? SCSI_ALUA_STANDBY
				   : d->ready          ? SCSI_ALUA_UNAVAILABLE
						       : SCSI_ALUA_UNKNOWN;
	}
	if (before[0] != d->tpg[0].access || (d->ntpg > 1 && before[1] != d->tpg[1].access))
		ua_broadcast(lu, SCSI_ASC_ALUA_CHANGED);
}

void lu_set_swp(struct lu_nexus *n, bool on)
{
	struct list *pos, *tmp;

	if (!n->lu || n->lu->desc.swp == on)
		return;
	n->lu->desc.swp = on;
	log_info("volume %s: software write protect %s", n->lu->vol->name, on ? "on" : "off");
	list_for_each_safe (pos, tmp, &n->lu->nexuses) {
		struct lu_nexus *o = container_of(pos, struct lu_nexus, link);
		if (o != n)
			ua_add(o, SCSI_ASC_MODE_CHANGED);
	}
}

void lu_nexus_attach(struct lu *lu, struct lu_nexus *n, const char *name, uint16_t tport,
		     const struct lu_nexus_ops *ops)
{
	n->lu = lu;
	n->ops = ops;
	snprintf(n->id.initiator, sizeof(n->id.initiator), "%s", name);
	n->id.tport = tport;
	lu_refresh(lu); /* a change before this nexus existed is not news to it */
	list_add(&lu->nexuses, &n->link);
}

void lu_nexus_lost(struct lu_nexus *n)
{
	if (!n->lu)
		return;
	lu_pr_event(n, false); /* the I_T nexus is gone */
	list_del(&n->link);
}

void lu_decode(struct lu_nexus *n, uint64_t lun, const uint8_t *cdb, uint32_t cdb_len,
	       uint32_t edtl, struct scsi_req *q)
{
	struct lu *lu = n->lu;

	lu_refresh(lu);
	/* LUN 0 only: the first level addressing of LUN 0 is all zero */
	/* The expected length only shapes the data transfer here (residuals,
	 * and a write of no more than what came), so the command layer sees
	 * none. */
	if (lun != 0) {
		scsi_exec(NULL, cdb, cdb_len, UINT32_MAX, q);
	} else if (!ua_report(n, cdb, q)) {
		if (lu->desc.ready && pr_conflict(lu_pr(lu), &n->id, cdb))
			scsi_done(q, SCSI_RESERVATION_CONFLICT);
		else
			scsi_exec(&lu->desc, cdb, cdb_len, UINT32_MAX, q);
		if (q->kind == SCSI_IO && q->xop == SCSI_XOP_PR_IN) {
			pr_in(lu_pr(lu), cdb, q);
		} else if (q->kind == SCSI_IO && q->xop == SCSI_XOP_COPY_RESULTS) {
			xcopy_results(&lu->desc, cdb, &n->xs, q);
			/* a finished copy's status is reported once (SPC-4 6.18.3) */
			if (q->status == SCSI_GOOD && (cdb[1] & 0x1f) == XCOPY_RCR_COPY_STATUS &&
			    n->xs.done)
				n->xs.valid = false;
		}
	}
	if (q->status == SCSI_GOOD && ((q->exact_out && edtl != q->data_out_len) ||
				       (q->xop != SCSI_XOP_NONE && edtl < q->data_out_len)))
		scsi_check(q, SCSI_KEY_ILLEGAL_REQUEST, SCSI_ASC_INVALID_FIELD_CDB);
}
