/* The admin commands of a replicated volume (tandemctl through src/ctl):
 * promote, demote, connect, disconnect, verify, invalidate, and the status.
 * Each returns 0 done, -EAGAIN not yet (the caller asks again) or -errno
 * with a message. Never: waits; a step that needs the peer is polled. */
#include "repl_int.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"

/* A handshake is deciding on the state this node sent: role changes wait. */
static bool handshaking(const struct repl *r)
{
	struct list *pos, *tmp;
	list_for_each_safe (pos, tmp, (struct list *)&r->bound) {
		const struct rconn *c = container_of(pos, struct rconn, link);
		if (conn_usable(c) && c->got_auth && c->hs_stage != ST_RUN)
			return true;
	}
	return false;
}

/* Whether a secondary may be promoted by hand: 0, or -errno and why. With
 * force, a disk not up to date is no reason (the caller declares it so). */
int promote_check(const struct repl *r, bool force, char *msg, size_t len)
{
	const struct vol *v = r->v;

	if (r->have_peer && r->peer.role == REPL_ROLE_PRIMARY) {
		snprintf(msg, len, "%s is primary for %s; make it secondary first", peer_name(r),
			 v->name);
		return -EBUSY;
	}
	if (v->disk == VOL_FAILED || v->disk == VOL_DISKLESS) {
		snprintf(msg, len, "volume %s: disk is %s", v->name, vol_disk_name(v->disk));
		return -EIO;
	}
	if (!force && (v->disk != VOL_UPTODATE || r->rstate == RR_SYNCTARGET)) {
		snprintf(msg, len,
			 "volume %s: disk is %s here; use --force to promote it anyway "
			 "(its data may be older than %s's)",
			 v->name, vol_disk_name(v->disk), peer_name(r));
		return -EPERM;
	}
	return 0;
}

/* What a forced promotion changes before the role: the resync stopped, the
 * kept consistent image restored (repl_cp.c), the disk declared up to date.
 * Irreversible, so with a witness it runs only after the grant (N8a):
 * a refused claim leaves the node as it was. 0 done, -EAGAIN not yet (the
 * resync's connection or writes are still going), -errno with msg. */
int promote_forced_prepare(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;
	int rc;

	if (v->disk == VOL_INCONSISTENT && r->cp_have) {
		/* a resync was under way: start from the image kept before it,
		 * once the resync's writes are done */
		if (r->conn)
			conn_abort(r->conn);
		if (r->conn || v->inflight) {
			snprintf(msg, len,
				 "stopping the resync to restore the kept consistent image");
			return -EAGAIN;
		}
		rc = cp_restore(r, msg, len);
		if (rc)
			return rc;
	}
	if (v->disk != VOL_UPTODATE || r->rstate == RR_SYNCTARGET) {
		log_warn("volume %s: promoted with --force while the disk is %s", v->name,
			 vol_disk_name(v->disk));
		if (r->rstate == RR_SYNCTARGET && r->conn)
			conn_abort(r->conn);
		vol_set_disk(v, VOL_UPTODATE);
	}
	return 0;
}

int repl_promote(struct repl *r, bool force, char *msg, size_t len)
{
	struct vol *v = r->v;
	int rc;

	if (v->role == VOL_PRIMARY) {
		v->demoting = false;
		return 0;
	}
	if (r->admin_grant) { /* granted; finishing in admin_finish (N8a) */
		rc = admin_finish(r, msg, len);
		if (rc && rc != -EAGAIN)
			r->w_claim_result = 0; /* told here */
		return rc;
	}
	if (handshaking(r))
		return -EAGAIN;
	rc = promote_check(r, force, msg, len);
	if (rc)
		return rc;
	/* Whatever can fail is checked before anything changes: the kept
	 * image that a forced promotion would restore is still there. */
	if (force && v->disk == VOL_INCONSISTENT && r->cp_have) {
		rc = cp_check(r, msg, len);
		if (rc)
			return rc;
	}
	if (r->wc) {
		/* N8: through the witness, so that never two primaries write.
		 * N8a: nothing changes here before the grant: a grant promotes
		 * in on_verdict (admin_granted, which also does what --force
		 * changes), a denial leaves the node as it was. */
		if (r->w_claim_result < 0) {
			rc = r->w_claim_result;
			r->w_claim_result = 0;
			snprintf(msg, len, "volume %s: %s", v->name, r->w_claim_msg);
			return rc;
		}
		if (r->w_claim_want != CLAIM_ADMIN || r->w_claim_force != force) {
			r->w_claim_want = CLAIM_ADMIN;
			r->w_claim_force = force;
			r->w_claim_seq = 0;
			quorum_kick(r);
		}
		snprintf(msg, len, "%s",
			 r->w_up ? "waiting for the witness" : "no session with the witness");
		return -EAGAIN;
	}
	/* no witness, no one to ask: the same order, checks first */
	if (force) {
		rc = promote_forced_prepare(r, msg, len);
		if (rc)
			return rc;
	}
	return promote_now(r, msg, len);
}

int promote_now(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;

	if (v->disk == VOL_CONSISTENT || v->disk == VOL_OUTDATED) {
		/* the witness vouched for this node's generation (W3.1) */
		vol_set_disk(v, VOL_UPTODATE);
	}
	v->md->sb.flags |= TANDEM_MD_F_PRIMARY;
	if (vol_md_write(v)) { /* the disk is failed (V4) */
		v->md->sb.flags &= ~TANDEM_MD_F_PRIMARY;
		snprintf(msg, len, "volume %s: writing metadata failed; the disk is failed",
			 v->name);
		return -EIO;
	}
	vol_set_role(v, VOL_PRIMARY);
	v->demoting = false;
	v->crashed_primary = false; /* R14: a primary again, not the one that crashed */
	r->w_release = false;
	if (peer_ready(r))
		gen_rotate(r, r->conn);
	else
		gen_branch(r); /* now, not at the first write: the report that follows
				* carries the generation it writes (N12), one witness
				* round trip less before that write completes */
	if (r->conn && r->conn->hs_stage == ST_RUN) {
		send_state(r->conn);
		peer_ping(r, r->conn, ++r->ping_cookie); /* L2: a lease one round trip on */
	}
	wit_client_ping(r->wc);
	quorum_kick(r);
	return 0;
}

/* R11: before a primary steps down, every write the peer acknowledged is
 * made durable there and here: the cleaner's FLUSH on both nodes, pass after
 * pass, until the activity log is empty. The peer, once primary, then never
 * holds an acknowledged write of ours only in a volatile cache with nothing
 * recording it. A flush that fails marks the extents out of sync instead
 * (and the peer marked itself inconsistent, R10). */
static bool demote_flushed(struct repl *r)
{
	if (!r->conn || r->conn->hs_stage != ST_RUN || !peer_ready(r)) {
		r->demote_flushing = false;
		return true; /* no peer: conn_lost marked what it may lack (R7) */
	}
	if (bm_al_empty(r->bm)) {
		log_info("volume %s: written data is durable on both nodes", r->v->name);
		r->demote_flushing = false;
		return true;
	}
	if (vol_disk_gone(r->v->disk)) {
		/* nothing here to flush (the cleaner leaves a gone disk alone):
		 * its extents are marked, as after a failed flush */
		al_mark(r);
		r->demote_flushing = false;
		return true;
	}
	if (r->cleaning)
		return false;
	if (r->clean_failed) {
		r->clean_failed = false;
		/* A flush the peer failed (it is inconsistent now, R10), one that
		 * failed here, or a bitmap that cannot be written: the extents
		 * are marked instead. A pass that got no FLUSH out (the request
		 * window was full) is simply tried again. */
		if (r->peer.disk == VOL_INCONSISTENT || r->clean_local.rep.lres ||
		    vol_disk_gone(r->v->disk) || r->v->md_failed) {
			log_warn("volume %s: flushing before the role change failed; the activity "
				 "log's extents are out of sync",
				 r->v->name);
			al_mark(r);
			r->demote_flushing = false;
			return true;
		}
	}
	if (!r->demote_flushing)
		log_info("volume %s: flushing both nodes before the role change", r->v->name);
	r->demote_flushing = true;
	clean_start(r);
	return false;
}

int repl_demote(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;
	(void)msg;
	(void)len;

	if (v->role == VOL_SECONDARY)
		return r->demote_cookie && r->conn ? -EAGAIN : 0;
	if (handshaking(r))
		return -EAGAIN;
	v->demoting = true;
	/* P6: a fill stops first (its pieces in flight end) */
	if (pull_stop(r) || v->inflight || !demote_flushed(r))
		return -EAGAIN;
	v->md->sb.flags &= ~TANDEM_MD_F_PRIMARY;
	vol_md_write(v);
	vol_set_role(v, VOL_SECONDARY);
	v->demoting = false;
	r->w_release = true; /* W2: an orderly demotion */
	quorum_kick(r);
	if (r->conn && r->conn->hs_stage == ST_RUN) {
		send_state(r->conn);
		/* Answered once the peer has read the new state (the pong follows it). */
		r->demote_cookie = ++r->ping_cookie;
		peer_ping(r, r->conn, r->demote_cookie);
		return -EAGAIN;
	}
	return 0;
}

int repl_connect(struct repl *r, char *msg, size_t len)
{
	(void)msg;
	(void)len;
	r->admin_down = false;
	r->split_brain = false;
	if (r->cstate == RC_STANDALONE)
		repl_set_cstate(r, RC_CONNECTING);
	r->backoff_ms = RETRY_MIN_MS;
	ev_timer_cancel(r->ev, &r->retry);
	schedule_dial(r);
	return 0;
}

/* The drain's FLUSH is back (or failed, or the connection went first). */
static void drain_done(struct vol_io *io, int res)
{
	struct repl *r = io->vol->repl;
	(void)res;

	r->draining = false;
	if (!r->conn || !r->admin_down)
		return; /* lost meanwhile (conn_lost marked the whole AL), or connect came */
	r->drain_clean = io->rep.lres == 0;
	conn_abort(r->conn);
	r->drain_clean = false;
}

/* Starts an orderly disconnect: true when a drain FLUSH went to the peer and
 * drain_done will cut the connection. Only an in-sync primary drains: a
 * resync or verify in flight, or a secondary, is cut at once as before. */
static bool drain_start(struct repl *r)
{
	struct list *pos, *tmp;

	if (r->draining)
		return true;
	if (!r->conn || r->conn->hs_stage != ST_RUN || !peer_ready(r) ||
	    r->v->role != VOL_PRIMARY || r->rstate != RR_ESTABLISHED || r->vfy_state == VFY_RUNNING)
		return false;
	/* Writes in flight now may reach the peer after the FLUSH. */
	memset(r->drain_touched, 0, bm_words(r->bm) * 8);
	list_for_each_safe (pos, tmp, &r->inflight) {
		struct vol_io *o = container_of(pos, struct vol_io, rep.link);
		bm_mark_range(r->drain_touched, r->bm, o->off, o->len);
	}
	if (!peer_flush(r, &r->drain_flush, drain_done))
		return false;
	r->draining = true;
	r->drain_t0 = ev_now(r->ev);
	return true;
}

int repl_disconnect(struct repl *r, char *msg, size_t len)
{
	r->admin_down = true;
	ev_timer_cancel(r->ev, &r->retry);
	/* Polled (tandemctl waits) until drain_done has cut the connection. */
	if (drain_start(r)) {
		snprintf(msg, len, "the peer's flush before the disconnect");
		return -EAGAIN;
	}
	if (r->conn)
		conn_abort(r->conn);
	repl_set_cstate(r, RC_STANDALONE);
	return 0;
}

int repl_verify(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;

	if (r->cstate != RC_CONNECTED || !peer_ready(r)) {
		snprintf(msg, len, "volume %s is not connected to %s", v->name, peer_name(r));
		return -ENOTCONN;
	}
	if (r->rstate != RR_ESTABLISHED) {
		snprintf(msg, len, "volume %s is resyncing (%s); verify once it is in sync",
			 v->name, repl_rep_name(r->rstate));
		return -EBUSY;
	}
	if (r->vfy_state == VFY_RUNNING) {
		snprintf(msg, len, "a verify of volume %s is already running", v->name);
		return -EALREADY;
	}
	if (v->role != VOL_PRIMARY && r->peer.role == REPL_ROLE_PRIMARY) {
		snprintf(msg, len, "%s is primary for volume %s: run verify there", peer_name(r),
			 v->name);
		return -EINVAL;
	}
	if (!(r->features & REPL_FEAT_RESYNC2)) {
		snprintf(msg, len, "%s does not support verify", peer_name(r));
		return -EOPNOTSUPP;
	}
	verify_set_state(r, VFY_RUNNING);
	r->vfy_cursor = r->vfy_done = r->vfy_ranges = r->vfy_bytes = 0;
	r->vfy_nredo = 0;
	r->vfy_t0 = ev_now(r->ev);
	r->vfy_t1 = 0;
	log_info("volume %s: verify against %s started", v->name, peer_name(r));
	vol_event(v, "replication", "established", "verifying", NULL);
	ev_defer(r->ev, &r->rs_kick);
	return 0;
}

static int replace_all(struct repl *r, char *msg, size_t len);
static int keep_old(struct repl *r, char *msg, size_t len);

/* The disk here changed under the connection: the next handshake decides
 * again what goes where (at once, not after the retry backoff). */
static int reconnect_now(struct repl *r)
{
	r->split_brain = false;
	r->error[0] = '\0';
	if (r->conn)
		conn_abort(r->conn);
	r->backoff_ms = RETRY_MIN_MS;
	if (!r->admin_down) {
		ev_timer_cancel(r->ev, &r->retry);
		schedule_dial(r);
	}
	return 0;
}

int repl_invalidate(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;

	if (v->role == VOL_PRIMARY) {
		snprintf(msg, len, "volume %s is primary here; make it secondary first", v->name);
		return -EBUSY;
	}
	if (vol_disk_gone(v->disk)) { /* F1: latched; attach brings a disk back */
		snprintf(msg, len,
			 "volume %s: the disk is failed: `tandemctl attach %s [--disk PATH]` "
			 "brings one back",
			 v->name, v->name);
		return -EIO;
	}
	log_warn("volume %s: invalidated: local data will be replaced by %s's", v->name,
		 peer_name(r));
	return replace_all(r, msg, len);
}

int repl_attach(struct repl *r, const char *path, char *msg, size_t len)
{
	struct vol *v = r->v;
	int e;

	if (v->role == VOL_PRIMARY) {
		/* P1-P4: it keeps serving, and fills the disk from the peer */
		if (vol_disk_gone(v->disk) && !peer_serves(r) && !path && v->data_path[0] &&
		    !(r->peer_only && r->peer_only_fails == v->disk_fails) && !r->pulling) {
			/* P7: no peer to fill from, but no write went only to
			 * the peer since the disk failed: the old disk holds
			 * every acknowledged write (those that failed on it
			 * failed to the client). It serves again; what was in
			 * flight when it failed is marked for the peer. */
			e = vol_attach(v, NULL, msg, len);
			if (e)
				return e;
			bm_al_to_oos(r->bm);
			bm_flush(r->bm, NULL);
			vol_set_disk(v, VOL_INCONSISTENT);
			vol_set_disk(v, VOL_UPTODATE);
			log_warn("volume %s: the old disk is back and up to date: no write went "
				 "only "
				 "to %s since it failed",
				 v->name, peer_name(r));
			return 0;
		}
		if (vol_disk_gone(v->disk) && !peer_serves(r)) {
			snprintf(msg, len,
				 "volume %s: no up-to-date peer to fill a disk from (%s is %s)",
				 v->name, peer_name(r),
				 r->have_peer ? vol_disk_name(r->peer.disk) : "not connected");
			return -EAGAIN;
		}
		e = vol_attach(v, path, msg, len);
		if (e)
			return e;
		/* the old disk again: what changed; a new one (or memory): all */
		return pull_start(r, path != NULL || !v->data_path[0]);
	}
	e = vol_attach(v, path, msg, len);
	if (e)
		return e;
	if (!path && v->data_path[0])
		return keep_old(r, msg, len);
	log_warn("volume %s: the attached disk gets all of %s's data", v->name, peer_name(r));
	return replace_all(r, msg, len);
}

/* F2: a secondary's old disk, back: it holds what it held when it failed
 * (the metadata flags kept what it was then). What it lacks since is
 * marked on the primary, and every write the primary acknowledged without
 * it started a new generation there: the next connect gives it what
 * changed, or, when the primary is diskless and kept the generation, makes
 * it the up-to-date copy the primary serves through. It comes back as a
 * restarted disk would (R9: consistent, or outdated if it was), never as
 * more; an inconsistent one, or one that writes went past (PEER_ONLY: a
 * diskless primary before a restart or handover), takes everything. */
static int keep_old(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;
	uint32_t f = sb(r)->flags;

	if ((f & TANDEM_MD_F_PEER_ONLY) || !(f & TANDEM_MD_F_CONSISTENT)) {
		/* it lacks writes that went only to the peer (it was a
		 * diskless primary), or it was no consistent image when it
		 * failed (a sync target): it takes everything */
		log_warn("volume %s: the old disk %s: it gets all of %s's data", v->name,
			 (f & TANDEM_MD_F_PEER_ONLY) ? "lacks writes that went only to the peer"
						     : "was not consistent when it failed",
			 peer_name(r));
		return replace_all(r, msg, len);
	}
	bm_al_to_oos(r->bm);
	bm_flush(r->bm, NULL);
	vol_set_disk(v, VOL_INCONSISTENT);
	/* what it was when it failed, as at a start (R9): up to date then
	 * is consistent now; the next connect decides */
	vol_set_disk(v, (f & TANDEM_MD_F_UPTODATE) ? VOL_CONSISTENT : VOL_OUTDATED);
	if (vol_md_write(v)) {
		snprintf(msg, len, "volume %s: writing metadata failed; the disk is failed",
			 v->name);
		return -EIO;
	}
	log_warn("volume %s: the old disk is back, %s: the next connect to %s decides what it "
		 "gets",
		 v->name, vol_disk_name(v->disk), peer_name(r));
	return reconnect_now(r);
}

/* This node's data is to be replaced by the peer's (a full resync). */
static int replace_all(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;

	sb(r)->gen_current = GEN_NONE;
	sb(r)->gen_bitmap = GEN_NONE;
	if (vol_md_write(v)) {
		snprintf(msg, len, "volume %s: writing metadata failed; the disk is failed",
			 v->name);
		return -EIO;
	}
	vol_set_disk(v, VOL_INCONSISTENT);
	return reconnect_now(r);
}

int repl_in_sync(const struct repl *r, char *msg, size_t len)
{
	const struct vol *v = r->v;

	if (v->disk == VOL_FAILED || v->disk == VOL_DISKLESS) {
		snprintf(msg, len, "volume %s is %s", v->name, vol_disk_name(v->disk));
		return -EIO;
	}
	if (r->split_brain) {
		snprintf(msg, len, "volume %s: split brain with %s", v->name, peer_name(r));
		return -EPERM;
	}
	if (!ab_empty(r)) {
		snprintf(msg, len,
			 "volume %s: %llu bytes of the async stream not yet acknowledged by %s",
			 v->name, (unsigned long long)r->ab_bytes, peer_name(r));
		return 0;
	}
	if (r->rstate == RR_ESTABLISHED && v->disk == VOL_UPTODATE && bm_oos_count(r->bm) == 0) {
		/* A primary's peer can take over only once the witness knows it
		 * is in sync (N2): until then a lost primary leaves no primary. */
		if (r->wc && r->w_up && v->role == VOL_PRIMARY &&
		    (!(r->w_rep_flags & WIT_F_SYNCED) || r->w_synced_acked != r->w_synced_seq)) {
			snprintf(msg, len, "volume %s: in sync; the witness does not know it yet",
				 v->name);
			return 0;
		}
		return 1;
	}
	snprintf(msg, len, "volume %s: %s, %s, disk %s", v->name, repl_conn_name(r->cstate),
		 repl_rep_name(r->rstate), vol_disk_name(v->disk));
	return 0;
}

void repl_get_status(const struct repl *r, struct repl_status *st)
{
	uint64_t gran = bm_granularity(r->bm);
	uint64_t oos = bm_oos_count(r->bm) * gran;

	memset(st, 0, sizeof(*st));
	st->peer = peer_name(r);
	st->conn = r->cstate;
	st->rep = r->rstate == RR_ESTABLISHED && r->vfy_state == VFY_RUNNING ? RR_VERIFYING
									     : r->rstate;
	st->behind = r->rstate == RR_SYNCTARGET && r->behind;
	st->peer_disk = r->have_peer ? r->peer.disk : -1;
	st->peer_role = r->have_peer ? (r->peer.role == REPL_ROLE_PRIMARY) : -1;
	st->out_of_sync_bytes = MIN(oos, r->v->size);
	if (r->pulling) /* the primary fills its disk from the peer (P1-P4) */
		st->rep = RR_SYNCTARGET;
	if (r->pulling)
		st->sync_percent =
			r->pull_total ? MAX(0.0, 100.0 * (1.0 - (double)st->out_of_sync_bytes /
									(double)MIN(r->pull_total,
										    r->v->size)))
				      : 100.0;
	else if (r->rstate == RR_SYNCSOURCE || r->rstate == RR_SYNCTARGET)
		st->sync_percent =
			r->rs_total
				? 100.0 * (1.0 - (double)bm_oos_count(r->bm) / (double)r->rs_total)
				: 100.0;
	else
		st->sync_percent =
			oos ? 100.0 * (1.0 - (double)st->out_of_sync_bytes / (double)r->v->size)
			    : 100.0;
	if (r->rstate == RR_SYNCSOURCE || r->rstate == RR_SYNCTARGET) {
		/* regions marked during the resync (async ahead) join it: the
		 * figure holds still until the copy overtakes them */
		struct repl *m = (struct repl *)r;
		if (st->sync_percent < m->rs_pct_shown)
			st->sync_percent = m->rs_pct_shown;
		else
			m->rs_pct_shown = st->sync_percent;
	}
	st->resync_bytes_per_sec = r->rate_bps;
	st->resync_window_bytes = r->ctl_armed ? r->ctl.window : 0;
	st->resync_request_bytes = r->ctl_armed ? r->ctl.piece : 0;
	st->resync_sent_bytes = r->rs_sent_bytes;
	st->resync_zero_bytes = r->rs_zero_bytes;
	st->resync_same_bytes = r->rs_same_bytes;
	st->verify = r->vfy_state == VFY_RUNNING   ? "running"
		     : r->vfy_state == VFY_DONE    ? "done"
		     : r->vfy_state == VFY_ABORTED ? "aborted"
						   : "none";
	st->verify_percent = r->vfy_state == VFY_NONE ? 0
			     : r->vfy_state == VFY_DONE
				     ? 100.0
				     : 100.0 * (double)r->vfy_done / (double)r->v->size;
	st->verify_mismatch_ranges = r->vfy_ranges;
	st->verify_mismatch_bytes = r->vfy_bytes;
	st->split_brain = r->split_brain;
	st->error = r->error;
	st->gen_current = r->v->md->sb.gen_current;
	st->gen_bitmap = r->v->md->sb.gen_bitmap;
	st->quorum = r->wc ? r->quorum : -1;
	st->witness_session = r->w_up;
	st->witness_primary = r->w_heard ? r->w_primary : "";
	st->held_writes = r->nheld;
	ab_status(r, st);
	st->cp_have = r->cp_have;
	st->cp_time_ns = r->cp_time_ns;
	st->cp_note = r->cp_why;
	st->link_wire_bytes = lk_wire_bytes(r);
	st->link_data_bytes = r->lk_data_bytes;
	st->link_zero_bytes = r->lk_zero_bytes;
	st->link_send_bytes_per_sec = r->lk_rate_bps;
	st->link_rtt_ms = (double)r->lk_rtt_ns / 1e6;
	if (r->conn && !r->conn->aborted && r->conn->last_rx_ns)
		st->peer_silent_ns = ev_now(r->ev) - r->conn->last_rx_ns;
	st->link_compression =
		pack_codec_name(r->features & REPL_FEAT_COMPRESS ? r->pack_codec : 0);
	st->link_compressed_in_bytes = r->lk_pack_in;
	st->link_compressed_out_bytes = r->lk_pack_out;
	st->link_compress_skipped_bytes = r->lk_pack_skip;
	st->link_compress_cpu_ms = (double)r->lk_pack_ns / 1e6;
	st->link_decompressed_bytes = r->lk_unpack_out;
	st->link_decompress_cpu_ms = (double)r->lk_unpack_ns / 1e6;
	snprintf(st->link_tls, sizeof(st->link_tls), "%s",
		 r->conn ? net_conn_tls_desc(&r->conn->peer.net) : "");
}

/* ---- planned switchover ----
 * The node that is to become primary (the target) and the primary may be
 * either end of the command: the primary demotes first (R11: both nodes
 * flushed, the peer has heard of it; with a witness its record is released,
 * W2), then the target promotes (with a witness: its claim, granted at once
 * since the record names no primary). A step the peer must take is asked
 * with SWITCH and polled there by sw_timer; the command here is polled by
 * tandemctl (-EAGAIN) until the peer's STATE shows the outcome. */

#define SW_POLL_NS (5ull * 1000000ull)
#define SW_MAX_NS (30ull * 1000000000ull)

static void sw_poll(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, sw_timer);
	char msg[256] = "";
	int rc;

	if (!r->sw_step || r->shutting_down)
		return;
	rc = r->sw_step == REPL_SW_DEMOTE ? repl_demote(r, msg, sizeof(msg))
					  : repl_promote(r, false, msg, sizeof(msg));
	if (rc == -EAGAIN) {
		ev_timer_arm(r->ev, &r->sw_timer, SW_POLL_NS);
		return;
	}
	if (rc)
		log_warn("volume %s: switchover asked by %s: %s", r->v->name, peer_name(r), msg);
	else
		log_info("volume %s: switchover asked by %s: %s", r->v->name, peer_name(r),
			 r->sw_step == REPL_SW_DEMOTE ? "now secondary" : "now primary");
	r->sw_step = 0;
}

void sw_init(struct repl *r)
{
	r->sw_timer.fn = sw_poll;
}

void sw_reset(struct repl *r)
{
	r->sw_step = 0;
	r->sw_sent = 0;
	ev_timer_cancel(r->ev, &r->sw_timer);
}

int msg_switch(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;

	log_info("volume %s: %s asks for a switchover: %s", r->v->name, c->peer_node,
		 m->u.ping.cookie == REPL_SW_DEMOTE ? "this node steps down"
						    : "this node takes over");
	r->sw_step = (uint8_t)m->u.ping.cookie;
	ev_timer_arm(r->ev, &r->sw_timer, 0);
	return 0;
}

/* H1: with on-disk-failure = handover, a primary whose disk is gone hands
 * the role to its peer as soon as the peer can serve (connected,
 * established, up to date), through the switchover a user would ask for
 * (polled each tick, as tandemctl polls it, until the peer is primary).
 * Until then, and if the switchover is refused before this node stepped
 * down, it serves through the peer (D1) and tries again 5 s later.
 * H2: once it has stepped down, the handover is owed until the peer is
 * primary: if the peer could not take over (its claim refused, the peer
 * lost), neither node is primary, and this node asks again, 5 s apart,
 * whenever the peer is back, up to date and still secondary. The witness
 * record names no primary after the step down (W2), so the peer's claim
 * is granted; no one else may take over meanwhile. This node made
 * primary again, or a restart, ends what is owed; an attached disk does
 * not (the record names no primary after the step down, so without the
 * peer taking over no node would be).
 * The release is sent once (W2); if the session it went on dropped before
 * the witness had it, the record still names this node, which cannot take
 * the volume back without a disk, and the peer's claim waits on this
 * node's live session: no primary ever. So while the handover is owed, a
 * record heard naming this node is released again, with the same data
 * (this secondary has written nothing since it stepped down, and an
 * attached disk was filled to the same data; were any other node granted
 * since, the record would not name this one). */
static bool handover_owed(struct repl *r)
{
	if (r->handover_owed &&
	    (r->v->role != VOL_SECONDARY || (r->have_peer && r->peer.role == REPL_ROLE_PRIMARY)))
		r->handover_owed = false;
	if (r->handover_owed && quorum_release_again(r))
		log_warn("volume %s: the witness still names this node primary: this node "
			 "releases the record again (its release was lost)",
			 r->v->name);
	return r->handover_owed && peer_ready(r) && r->rstate == RR_ESTABLISHED && peer_whole(r) &&
	       r->have_peer;
}

void handover_tick(struct repl *r)
{
	char msg[256];
	uint64_t now = ev_now(r->ev);
	bool owed;
	int rc;

	if (!r->cfg->disk_failure_handover || r->shutting_down)
		return;
	if (!r->handing_over) {
		owed = handover_owed(r);
		if ((!owed && (r->v->role != VOL_PRIMARY || !vol_disk_gone(r->v->disk) ||
			       !peer_serves(r))) ||
		    now < r->handover_retry_ns)
			return;
		if (owed)
			log_warn("volume %s: this node stepped down for a handover and no node "
				 "is primary: asking %s again to take over (the disk is %s)",
				 r->v->name, peer_name(r), vol_disk_name(r->v->disk));
		else
			log_warn("volume %s: the disk is %s: handing the primary role to %s "
				 "(on-disk-failure = handover)",
				 r->v->name, vol_disk_name(r->v->disk), peer_name(r));
		snprintf(msg, sizeof(msg), "\"peer\":\"%s\",\"disk\":\"%s\"", peer_name(r),
			 vol_disk_name(r->v->disk));
		vol_event(r->v, "handover", NULL, NULL, msg);
		r->handing_over = true;
		r->handover_t0 = now;
	}
	rc = repl_switchover(r, peer_name(r), msg, sizeof(msg));
	if (rc == -EAGAIN && now - r->handover_t0 < SW_MAX_NS)
		return;
	r->handing_over = false;
	if (rc == 0) {
		r->handover_owed = false;
		log_info("volume %s: handed over to %s", r->v->name, peer_name(r));
		return;
	}
	r->handover_owed = r->v->role == VOL_SECONDARY;
	log_warn("volume %s: the handover to %s did not happen: %s%s", r->v->name, peer_name(r),
		 rc == -EAGAIN ? "timed out" : msg,
		 r->handover_owed ? "; this node has stepped down: no node is primary until "
				    "the peer takes over"
				  : "");
	r->handover_retry_ns = now + 5000000000ull;
}

static int sw_ask(struct repl *r, uint8_t step)
{
	uint8_t b[32];

	if (r->sw_sent == step)
		return -EAGAIN;
	if (!(r->conn->features & REPL_FEAT_SWITCH))
		return -EOPNOTSUPP;
	r->sw_sent = step;
	send_small(r->conn, b, repl_enc_ping(b, REPL_SWITCH, step));
	return -EAGAIN;
}

int repl_switchover(struct repl *r, const char *to, char *msg, size_t len)
{
	struct vol *v = r->v;
	const char *self = r->cfg->nodes[r->self].name;
	bool to_self;
	int rc;

	if (r->shutting_down) { /* a stopping node neither hands over nor takes over */
		snprintf(msg, len, "volume %s: this node is shutting down", v->name);
		return -ESHUTDOWN;
	}
	if (to && strcmp(to, self) && strcmp(to, peer_name(r))) {
		snprintf(msg, len, "volume %s lives on %s and %s, not on %s", v->name, self,
			 peer_name(r), to);
		return -EINVAL;
	}
	/* Without a node named, the target is decided once, by the first call
	 * (tandemctl polls: the roles change under the later ones). */
	if (to) {
		to_self = !strcmp(to, self);
	} else {
		if (!r->sw_target || ev_now(r->ev) - r->sw_t0 > SW_MAX_NS) {
			r->sw_target = v->role != VOL_PRIMARY ? 1 : 2;
			r->sw_t0 = ev_now(r->ev);
		}
		to_self = r->sw_target == 1;
	}
	if (to_self && v->role == VOL_PRIMARY &&
	    !(r->have_peer && r->peer.role == REPL_ROLE_PRIMARY)) {
		r->sw_sent = 0;
		r->sw_target = 0;
		return 0; /* done (or nothing to do) */
	}
	if (!to_self && v->role == VOL_SECONDARY &&
	    ((r->have_peer && r->peer.role == REPL_ROLE_PRIMARY && peer_ready(r)) ||
	     (r->sw_done_ns && ev_now(r->ev) - r->sw_done_ns < SW_MAX_NS))) {
		/* done; also when the link dropped right after the peer took
		 * over (a disk left inconsistent by a stopped fill reconnects
		 * at once to be resynced, P6) */
		r->sw_sent = 0;
		r->sw_target = 0;
		r->sw_done_ns = 0;
		return 0;
	}
	if (!peer_ready(r) || r->rstate != RR_ESTABLISHED) {
		snprintf(msg, len,
			 "volume %s: %s is not connected and in sync; a switchover needs both",
			 v->name, peer_name(r));
		r->sw_target = 0;
		return -ENOTCONN;
	}
	if (to_self) {
		if (r->peer.role == REPL_ROLE_PRIMARY) {
			rc = sw_ask(r, REPL_SW_DEMOTE);
			snprintf(msg, len, "%s is stepping down", peer_name(r));
			return rc;
		}
		rc = repl_promote(r, false, msg, len);
		if (rc != -EAGAIN) {
			r->sw_sent = 0;
			r->sw_target = 0;
		}
		return rc;
	}
	if (v->role == VOL_PRIMARY) {
		rc = repl_demote(r, msg, len);
		if (rc) {
			if (rc != -EAGAIN)
				r->sw_target = 0;
			return rc;
		}
	}
	rc = sw_ask(r, REPL_SW_PROMOTE);
	snprintf(msg, len, "%s is taking over", peer_name(r));
	return rc;
}
