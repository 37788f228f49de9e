/* Quorum and automatic failover with the witness (docs/WITNESS.md, rules
 * N1-N8): what this node reports to the witness, which writes wait for it,
 * the claims of a secondary, stepping down and being deposed.
 *
 * States (per volume, shown as `quorum` in status):
 *   quorum true -> false  [quorum_tick: a primary has neither a connected peer
 *                          nor a live witness session]
 *   quorum false -> true  [quorum_tick: either is back]
 *   role primary -> secondary [step_down: quorum-timeout without quorum (N4);
 *                              deposed: the witness names another primary (N5)]
 *   role secondary -> primary [claim granted: on_verdict -> promote_now (N6, N7)]
 * Invariants:
 *   Q1. (N1) A write the peer did not acknowledge completes successfully
 *       only while alone_ok(): the witness acknowledged, on the live
 *       session, a REPORT of this node as primary without SYNCED that is
 *       newer than the last REPORT sent with SYNCED.
 *   Q2. (N2) SYNCED is sent only while the peer is connected, established
 *       and up to date; w_synced_seq is set as it is sent, before the
 *       witness can act on it.
 *   Q3. A held write completes with -EIO once it waited quorum-timeout, or
 *       when the node steps down or is deposed: never successfully unless Q1.
 *   Q4. A claim's reply is acted on only if it answers the claim in flight
 *       (its seq) and the node may still claim (may_claim): a secondary
 *       without a connected peer, or one the record names whose connected
 *       peer is a secondary in sync with it.
 *   Q5. What is known of the record (w_heard, w_primary) comes only from an
 *       answer to a message sent after the peer's role was last seen to
 *       change, and not before the answer to this node's last release
 *       (w_heard_min_seq).
 *   Q6. A grant that answers no claim in flight (withdrawn meanwhile) is not
 *       dropped: the node promotes itself, or keeps knowing that the record
 *       names it and claims again as the named node once it may (N7)
 *       (granted_late). It never releases it: that was not live.
 *   Q8. A write completes alone (Q1) only under an acknowledged report of the
 *       generation the node writes now (w_alone_gen).
 *   Q7. w_named (the witness's lease source, repl_lease.c L2) is true only
 *       after an `ok` answer on this session naming this node, and is
 *       cleared by a new session, a release, or any answer naming another.
 *   Q9. (N8a) An admin claim changes nothing on the node before its grant:
 *       what --force changes (promote_forced_prepare) runs in admin_finish,
 *       from the grant on; a forced grant that cannot be served is released.
 *   Q10. (N13) A secondary named without the recorded generation, in sync
 *       with its connected peer, releases the record (release_unheld).
 * Never: promotes a node whose disk is inconsistent or failed; acts on the
 * witness's word without its proof (wit_client checks it). */
#include "repl_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "../wit/wit_codec.h"

#define QTICK_NS (50ull * 1000000ull)
#define CLAIM_RETRY_NS (1000ull * 1000000ull)

static bool alone_ok(const struct repl *r)
{
	/* ... and of the generation this node writes now: after a branch
	 * (gen_branch) the witness must know the new one first, or a node
	 * that took over with the old one would be granted without these
	 * writes */
	return r->w_up && r->w_alone_seq > r->w_synced_seq &&
	       r->w_alone_gen == sb((struct repl *)r)->gen_current;
}

static void release_held(struct repl *r, int res)
{
	while (!list_empty(&r->held)) {
		struct vol_io *io = container_of(r->held.next, struct vol_io, rep.link);
		list_del(&io->rep.link);
		r->nheld--;
		vol_complete(io, res ? res : io->rep.lres);
	}
}

bool quorum_hold(struct repl *r, struct vol_io *io)
{
	/* a streamed async write counts as the peer's (guarantee 2) */
	if (!r->wc || io->rep.peer_ok || io->rep.ab == AB_STREAMED || io->rep.lres)
		return false;
	if (r->v->role == VOL_PRIMARY && alone_ok(r))
		return false;
	io->rep.t0 = ev_now(r->ev);
	list_add_tail(&r->held, &io->rep.link);
	if (r->nheld++ == 0)
		log_info("volume %s: writes wait for the witness (no peer to acknowledge them)",
			 r->v->name);
	return true;
}

static void make_msg(const struct repl *r, struct wit_vol_msg *m, uint32_t flags)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->volume, sizeof(m->volume), "%s", r->v->name);
	m->gen = sb((struct repl *)r)->gen_current;
	for (unsigned i = 0; i < WIT_HISTORY && i < TANDEM_MD_HISTORY; i++)
		m->history[i] = sb((struct repl *)r)->gen_history[i];
	/* the generation this node branched from is part of its data too (a
	 * primary that lost its peer reports its new generation; the record
	 * still has the one it branched from: W1 checks it) */
	if (sb((struct repl *)r)->gen_bitmap > GEN_EMPTY && WIT_HISTORY > 0)
		m->history[WIT_HISTORY - 1] = sb((struct repl *)r)->gen_bitmap;
	m->flags = flags;
}

static uint32_t want_flags(struct repl *r)
{
	const struct vol *v = r->v;

	if (v->role == VOL_PRIMARY) {
		uint32_t f = WIT_F_PRIMARY;
		/* A failed disk here takes nothing from the peer: in sync mode
		 * every write this primary acknowledged, the peer acknowledged
		 * first, and a failed disk takes no new write; so the peer may
		 * still take over without --force (async: within its loss
		 * window, as with a disk that works). */
		if (peer_connected(r) && r->rstate == RR_ESTABLISHED && r->have_peer &&
		    r->peer.disk == VOL_UPTODATE &&
		    (v->disk == VOL_UPTODATE || vol_disk_gone(v->disk) || r->pulling))
			f |= WIT_F_SYNCED;
		/* D2: nor does it acknowledge anything once the peer is gone:
		 * the peer holds every acknowledged write as long as it did
		 * when it went, so the record says what it said then */
		else if (vol_disk_gone(v->disk) && r->w_gone_synced)
			f |= WIT_F_SYNCED;
		r->w_gone_synced = (f & WIT_F_SYNCED) != 0;
		return f;
	}
	r->w_gone_synced = false;
	return r->w_release ? WIT_F_RELEASE : 0;
}

static void send_report(struct repl *r)
{
	struct wit_vol_msg m;
	uint32_t f = want_flags(r);

	make_msg(r, &m, f);
	if (r->w_rep_valid && f == r->w_rep_flags && m.gen == r->w_rep_gen)
		return;
	m.seq = ++r->w_seq;
	/* Q2: from here on, a write the peer did not acknowledge needs a newer
	 * acknowledged report without SYNCED. */
	if (f & WIT_F_SYNCED)
		r->w_synced_seq = m.seq;
	/* A release empties the record (W2): until its answer, what was heard
	 * (this node named primary) must not make it claim again (Q5). */
	if (f & WIT_F_RELEASE) {
		r->w_heard = false;
		r->w_heard_min_seq = m.seq;
		r->w_named = false; /* L2: the record may go to the peer at once */
	}
	if (!wit_client_send(r->wc, WIT_REPORT, &m))
		return;
	r->w_rep_ring[m.seq % 16] = m.seq << 8 | f;
	r->w_rep_gens[m.seq % 16] = m.gen;
	r->w_rep_valid = true;
	r->w_rep_flags = f;
	r->w_rep_gen = m.gen;
	if (f & WIT_F_RELEASE)
		r->w_release = false;
}

static void send_claim(struct repl *r)
{
	struct wit_vol_msg m;

	/* only `primary --force` skips the witness's data check (W3.1) */
	make_msg(r, &m,
		 (r->w_claim_want != CLAIM_ADMIN ? 0
		  : r->w_claim_force             ? WIT_F_ADMIN | WIT_F_FORCE
						 : WIT_F_ADMIN) |
			 (r->peer_gone_claim && !peer_connected(r) ? WIT_F_PEER_GONE : 0));
	m.seq = ++r->w_seq;
	if (!wit_client_send(r->wc, WIT_CLAIM, &m))
		return;
	/* The refusal speaks for that moment: a claim sent later (this one
	 * denied, the peer restarted and made primary again since) waits out
	 * the witness's view of the peer like any other. */
	r->peer_gone_claim = false;
	r->w_claim_seq = m.seq;
	r->w_claim_ns = ev_now(r->ev);
	log_info("volume %s: asking the witness to make this node primary%s", r->v->name,
		 r->w_claim_want == CLAIM_ADMIN ? " (by hand)" : "");
}

/* The witness's record, as last heard, names this node primary. */
static bool named_self(const struct repl *r)
{
	return r->w_heard && !strcmp(r->w_primary, r->cfg->nodes[r->self].name);
}

/* A secondary that may take over by itself (N6, N7): failover auto, its
 * disk not known to be behind, and no peer connected; or the record names
 * it (a primary that restarted, or stepped down for want of quorum) and
 * its peer is a secondary in sync with it: no one else may be granted the
 * volume, and without this claim the two would stay secondaries. */
static bool may_claim(const struct repl *r)
{
	bool peer_ok = !peer_connected(r) ||
		       (named_self(r) && r->have_peer && r->peer.role != REPL_ROLE_PRIMARY &&
			r->rstate == RR_ESTABLISHED);

	return r->auto_failover && r->v->role == VOL_SECONDARY && peer_ok &&
	       (r->v->disk == VOL_UPTODATE || r->v->disk == VOL_CONSISTENT) &&
	       r->rstate != RR_SYNCTARGET && !r->admin_down && !r->shutting_down;
}

/* Whether this node holds the record's generation as last heard, as the
 * witness judges it (wit_rec.c holds_gen) on what make_msg sends. */
static bool holds_rec_gen(const struct repl *r)
{
	struct wit_vol_msg m;

	if (r->w_rec_gen <= GEN_EMPTY)
		return true;
	make_msg(r, &m, 0);
	if (m.gen == r->w_rec_gen)
		return true;
	for (unsigned i = 0; i < WIT_HISTORY; i++)
		if (m.history[i] == r->w_rec_gen)
			return true;
	return false;
}

/* N13: the record names this node, a secondary, with a generation it does
 * not hold (its disk was emptied or replaced since), and its peer is
 * connected and in sync with it, so the resync that could bring that
 * generation is over and neither node holds it. This node cannot take the
 * volume (W3: named, but without the data), and while its session lives
 * no other node may be granted it (W3.2): it releases the record (W2; the
 * witness keeps the recorded generation, which this node does not hold),
 * so that an operator's `primary --force` on the peer can be granted. */
static void release_unheld(struct repl *r)
{
	char extra[120];

	if (!named_self(r) || r->w_release || r->admin_grant || r->v->role != VOL_SECONDARY ||
	    !peer_connected(r) || r->rstate != RR_ESTABLISHED || holds_rec_gen(r))
		return;
	log_warn("volume %s: the witness names this node primary with generation %016llx, "
		 "which it does not hold (its data was replaced since, now %016llx, as %s's): "
		 "releasing the record so that another node can be made primary",
		 r->v->name, (unsigned long long)r->w_rec_gen,
		 (unsigned long long)sb(r)->gen_current, peer_name(r));
	snprintf(extra, sizeof(extra), "\"reason\":\"record generation %016llx not held\"",
		 (unsigned long long)r->w_rec_gen);
	vol_event(r->v, "witness-release", "named", "released", extra);
	r->w_release = true;
}

void quorum_kick(struct repl *r)
{
	uint64_t now;

	if (!r->wc || !r->w_up || r->shutting_down)
		return;
	release_unheld(r);
	send_report(r);
	now = ev_now(r->ev);
	/* Only while the record names a primary (another node that may be
	 * gone, or this one: N7); after an orderly demotion it names none, and
	 * no one takes over by itself. */
	if (r->w_claim_want == CLAIM_NONE && may_claim(r) && r->w_heard && r->w_primary[0] &&
	    now - r->w_claim_ns >= CLAIM_RETRY_NS &&
	    (!strcmp(r->w_primary, r->cfg->nodes[r->self].name) ||
	     now - r->q_start_ns >= r->timeout_ns)) /* a starting node tries its peer first */
		r->w_claim_want = CLAIM_AUTO;
	if (r->w_claim_want == CLAIM_AUTO && !may_claim(r)) {
		r->w_claim_want = CLAIM_NONE; /* Q4: a peer came, or the disk changed */
		r->w_claim_seq = 0;
	}
	if (r->w_claim_want && !r->w_claim_seq && peer_lease_gone(r)) /* LE4 */
		send_claim(r);
}

/* H2 (repl_admin.c): a secondary that stepped down for a handover and
 * hears the record still naming it (the release went with a session that
 * dropped) releases it again (W2); true when it does. */
bool quorum_release_again(struct repl *r)
{
	if (!r->wc || !r->w_up || r->w_release || r->v->role != VOL_SECONDARY || !named_self(r))
		return false;
	r->w_release = true;
	quorum_kick(r);
	return true;
}

bool quorum_peer_lost(struct repl *r)
{
	if (!r->wc || !may_claim(r) || (r->w_heard && !r->w_primary[0]))
		return false;
	r->w_claim_want = CLAIM_AUTO;
	r->w_claim_seq = 0;
	r->w_claim_ns = 0;
	quorum_kick(r);
	return true;
}

/* The peer's role changed (its STATE): the witness's record changed with it
 * (the peer's claim, or its release), so what this node last heard of the
 * record is stale. A new report fetches it; until the answer, a lost peer is
 * claimed for (the witness decides, W3), rather than given up on the stale
 * word that nobody is primary. */
void quorum_peer_role(struct repl *r)
{
	if (!r->wc)
		return;
	r->w_heard = false;
	/* an answer to an earlier message, still on its way, is as stale */
	r->w_heard_min_seq = r->w_seq + 1;
	r->w_rep_valid = false;
	quorum_kick(r);
}

/* Steps down without the peer: held writes fail, the role goes; no flush
 * can reach the peer, and conn_lost marked what it may lack (R7). */
static void step_down(struct repl *r, const char *why)
{
	struct vol *v = r->v;

	release_held(r, -EIO);
	if (v->role != VOL_PRIMARY)
		return;
	log_warn("volume %s: stepping down to secondary: %s", v->name, why);
	v->md->sb.flags &= ~TANDEM_MD_F_PRIMARY;
	vol_md_write(v);
	vol_set_role(v, VOL_SECONDARY);
	v->demoting = false;
	{
		char extra[200];
		snprintf(extra, sizeof(extra), "\"reason\":\"%s\"", why);
		vol_event(v, "stepped-down", "primary", "secondary", extra);
	}
	if (r->conn && r->conn->hs_stage == ST_RUN)
		send_state(r->conn);
}

/* N5: another node holds the record, granted by the witness: it holds
 * every acknowledged write (W3.1), and what this node wrote alone since its
 * last common generation was never acknowledged (Q1). That branch is given
 * up: the bits stay marked, and the next connect makes this node the sync
 * target, so those regions are copied back from the new primary. */
static void give_up_branch(struct repl *r, const char *primary)
{
	struct md_sb *m = sb(r);

	if (m->gen_bitmap <= GEN_EMPTY)
		return;
	log_warn("volume %s: giving up generation %016llx (written without the peer, never "
		 "acknowledged: %s%s); back to %016llx",
		 r->v->name, (unsigned long long)m->gen_current,
		 primary[0] ? primary : "the witness holds newer data",
		 primary[0] ? " is primary" : "", (unsigned long long)m->gen_bitmap);
	m->gen_current = m->gen_bitmap;
	m->gen_bitmap = GEN_NONE;
	vol_md_write(r->v);
	if (r->v->disk == VOL_UPTODATE || r->v->disk == VOL_CONSISTENT)
		vol_set_disk(r->v, VOL_OUTDATED);
}

void quorum_yield(struct repl *r, const char *primary, const char *why)
{
	step_down(r, why);
	give_up_branch(r, primary);
	if (r->v->disk == VOL_UPTODATE || r->v->disk == VOL_CONSISTENT)
		vol_set_disk(r->v, VOL_OUTDATED);
	if (r->conn)
		conn_abort(r->conn); /* a new handshake with the new facts */
}

static void deposed(struct repl *r, const char *primary)
{
	char why[160];

	if (!strcmp(primary, r->cfg->nodes[r->self].name)) {
		/* named, but without the data it was named with (W1) */
		snprintf(why, sizeof(why), "the witness holds a newer generation than this node's");
		primary = "";
	} else if (primary[0])
		snprintf(why, sizeof(why), "the witness names %s primary", primary);
	else
		snprintf(why, sizeof(why),
			 "the witness holds newer data, released by the last "
			 "primary (W1)");
	quorum_yield(r, primary, why);
}

static void on_session(void *ctx, bool up)
{
	struct repl *r = ctx;

	r->w_up = up;
	r->w_rep_valid = false;
	r->w_heard = false;
	r->w_named = false; /* LE3 */
	/* Q1: an acknowledgement counts only on the session that gave it. */
	r->w_alone_seq = 0;
	r->w_claim_seq = 0;
	if (up)
		quorum_kick(r);
}

static void admin_granted(struct repl *r);

/* Q6: the witness granted a claim this node no longer makes (its peer came
 * back, or its disk changed, while the claim waited at the witness). The
 * record names this node now, and nobody else is granted while it holds
 * its session: it promotes itself if it still may (its data is up to date,
 * it is no sync target, its peer is no primary); otherwise it keeps the
 * record and claims as the named node once it may (N7). */
static void granted_late(struct repl *r, uint64_t epoch)
{
	struct vol *v = r->v;
	char msg[200] = "";
	bool ok = (v->disk == VOL_UPTODATE || v->disk == VOL_CONSISTENT) &&
		  r->rstate != RR_SYNCTARGET && !r->admin_down && !r->shutting_down &&
		  peer_lease_gone(r) && /* LE4 */
		  !(peer_connected(r) && r->have_peer && r->peer.role == REPL_ROLE_PRIMARY);

	if (ok) {
		log_info("volume %s: the witness granted a claim withdrawn here (epoch %llu): "
			 "promoting this node",
			 v->name, (unsigned long long)epoch);
		if (!promote_now(r, msg, sizeof(msg))) {
			vol_event(v, "failover", "secondary", "primary", "\"by\":\"witness\"");
			return;
		}
		log_err("volume %s: promotion failed: %s", v->name, msg);
	}
	/* Kept, not given back: a release here, while the old primary still
	 * runs, can leave a record that names no one after that primary is
	 * deposed (the model's liveness check found it). The old primary's next
	 * report deposes it; then this node, named, claims (N7) once it may. */
	log_info("volume %s: the witness granted a claim withdrawn here (epoch %llu): this "
		 "node takes the volume once it may (N7)",
		 v->name, (unsigned long long)epoch);
	snprintf(r->w_primary, sizeof(r->w_primary), "%s", r->cfg->nodes[r->self].name);
	r->w_heard = true;
}

static void on_verdict(void *ctx, uint16_t type, const struct wit_verdict *v)
{
	struct repl *r = ctx;
	const char *self = r->cfg->nodes[r->self].name;

	if (v->seq >= r->w_heard_min_seq) {
		snprintf(r->w_primary, sizeof(r->w_primary), "%s", v->primary);
		r->w_rec_gen = v->gen;
		r->w_heard = true;
	}
	/* L2: the witness answers on this session with the record naming this
	 * node: no other node is granted while this session lives */
	if (v->seq <= r->w_seq && v->seq >= r->w_heard_min_seq)
		r->w_named = v->result == WIT_R_OK && !strcmp(v->primary, self);
	if (type == WIT_REPORT_ACK) {
		uint64_t e = r->w_rep_ring[v->seq % 16];
		uint32_t f = (e >> 8) == v->seq ? (uint32_t)(e & 0xff) : 0;
		if (v->seq > r->w_seq)
			return;
		if (v->result == WIT_R_DEPOSED) {
			if (r->v->role == VOL_PRIMARY &&
			    (v->primary[0] || v->reason == WIT_OLDER_DATA))
				deposed(r, v->primary); /* N5; "" after a release (W1) */
			else if (r->v->role == VOL_PRIMARY)
				step_down(r, "the witness does not know this node for this volume");
			return;
		}
		/* A node that stepped down (N4) learns here who took over. */
		if (r->v->role == VOL_SECONDARY && v->primary[0] && strcmp(v->primary, self) &&
		    !peer_connected(r))
			give_up_branch(r, v->primary);
		if ((f & WIT_F_PRIMARY) && !(f & WIT_F_SYNCED) && v->seq > r->w_alone_seq) {
			r->w_alone_seq = v->seq;
			r->w_alone_gen = r->w_rep_gens[v->seq % 16];
		}
		if ((f & WIT_F_SYNCED) && v->seq == r->w_synced_seq)
			r->w_synced_acked = v->seq; /* wait-sync waits for this (N2) */
		if (r->v->role == VOL_PRIMARY && alone_ok(r) && r->nheld) {
			if (vol_disk_gone(r->v->disk)) {
				release_held(r, -EIO); /* D2 */
			} else {
				log_info("volume %s: the witness knows this node writes alone: "
					 "%u held write(s) complete",
					 r->v->name, r->nheld);
				release_held(r, 0);
			}
		}
		quorum_kick(r);
		return;
	}
	/* CLAIM_REPLY */
	if (!r->w_claim_seq || v->seq != r->w_claim_seq) {
		/* Q4: not the claim in flight. A grant of one withdrawn here
		 * (its peer came back meanwhile) still made the record name
		 * this node: it serves, or it gives the record back (Q6). */
		if (v->result == WIT_R_OK && !strcmp(v->primary, self) &&
		    r->v->role == VOL_SECONDARY && v->seq <= r->w_seq)
			granted_late(r, v->epoch);
		return;
	}
	r->w_claim_seq = 0;
	if (v->result == WIT_R_OK) {
		enum claim_why why = r->w_claim_want;
		char msg[200] = "";
		r->w_claim_want = CLAIM_NONE;
		if (why == CLAIM_ADMIN) {
			/* Promoted here, not at tandemctl's next poll: that may
			 * never come (it gave up), and a grant kept for later
			 * would promote on a record that moved on since. */
			admin_granted(r);
			return;
		}
		if (!may_claim(r) || !peer_lease_gone(r)) {
			granted_late(r, v->epoch); /* Q4, Q6, LE4 */
			return;
		}
		log_info("volume %s: the witness agrees (epoch %llu): promoting this node",
			 r->v->name, (unsigned long long)v->epoch);
		if (promote_now(r, msg, sizeof(msg)))
			log_err("volume %s: promotion failed: %s", r->v->name, msg);
		else
			vol_event(r->v, "failover", "secondary", "primary", "\"by\":\"witness\"");
		return;
	}
	if (r->w_claim_want == CLAIM_ADMIN) {
		r->w_claim_want = CLAIM_NONE;
		r->w_claim_result = v->reason == WIT_PRIMARY_ALIVE ? -EBUSY : -EPERM;
		snprintf(r->w_claim_msg, sizeof(r->w_claim_msg), "the witness refused: %s%s%s",
			 wit_reason_name(v->reason), v->primary[0] ? "; primary: " : "",
			 v->primary[0] ? v->primary : "");
		return;
	}
	r->w_claim_want = CLAIM_NONE;
	log_info("volume %s: the witness refused the takeover: %s", r->v->name,
		 wit_reason_name(v->reason));
	/* A node known to lack writes never claims again by itself (N6). */
	if ((v->reason == WIT_NOT_SYNCED || v->reason == WIT_OLDER_DATA) &&
	    (r->v->disk == VOL_UPTODATE || r->v->disk == VOL_CONSISTENT) &&
	    strcmp(v->primary, self))
		vol_set_disk(r->v, VOL_OUTDATED);
}

/* The witness granted an admin claim (N8a): from here on the record names
 * this node, and only now does a forced promotion change anything
 * (promote_forced_prepare): a refused claim left the node as it was. */
static void admin_granted(struct repl *r)
{
	char msg[200] = "";

	if (r->v->role == VOL_PRIMARY || r->shutting_down)
		return;
	r->admin_grant = true;
	r->w_claim_result = 0;
	admin_finish(r, msg, sizeof(msg));
}

/* repl_promote's checks again (they held when the claim was sent), what
 * --force changes, then the promotion: from the grant, from each tick and
 * from the polled command, until it is done or has failed. The command sees
 * the role, or the error in w_claim_result. A forced grant that cannot be
 * served (the kept image cannot be restored, the disk failed meanwhile)
 * is released (W2): the record names this node with its generation and
 * synced = false, so while its session lives no other node could be
 * granted the volume without --force (N13), and it must not serve a
 * torn image either. */
int admin_finish(struct repl *r, char *msg, size_t len)
{
	struct vol *v = r->v;
	bool force = r->w_claim_force;
	int rc;

	if (!r->admin_grant)
		return v->role == VOL_PRIMARY ? 0 : -EAGAIN;
	if (v->role == VOL_PRIMARY) {
		r->admin_grant = false;
		return 0;
	}
	rc = r->shutting_down ? -ESHUTDOWN : promote_check(r, force, msg, len);
	if (rc == -ESHUTDOWN)
		snprintf(msg, len, "volume %s: this node is shutting down", v->name);
	if (!rc && force)
		rc = promote_forced_prepare(r, msg, len);
	if (rc == -EAGAIN)
		return rc;
	if (!rc)
		rc = promote_now(r, msg, len);
	r->admin_grant = false;
	if (!rc) {
		log_info("volume %s: the witness agrees: promoted by hand", v->name);
		return 0;
	}
	r->w_claim_result = rc;
	snprintf(r->w_claim_msg, sizeof(r->w_claim_msg), "%s", msg);
	log_warn("volume %s: the witness agreed, but not promoted: %s", v->name, msg);
	if (force && v->role == VOL_SECONDARY && !r->shutting_down) {
		log_warn("volume %s: releasing the witness record granted to this node: it "
			 "cannot serve",
			 v->name);
		r->w_release = true;
		quorum_kick(r);
	}
	return rc;
}

static const struct wit_vol_ops quorum_wit_ops = { .session = on_session, .verdict = on_verdict };

static void quorum_tick(struct ev_timer *t)
{
	struct repl *r = container_of(t, struct repl, q_timer);
	uint64_t now = ev_now(r->ev);
	uint64_t qt = (uint64_t)r->cfg->quorum_timeout_ms * 1000000ull;
	bool q = peer_connected(r) || r->w_up;

	if (r->shutting_down)
		return;
	if (r->admin_grant) { /* N8a: a forced grant waiting for the resync to stop */
		char msg[200] = "";
		admin_finish(r, msg, sizeof(msg));
	}
	if (q != r->quorum) {
		r->quorum = q;
		vol_event(r->v, "quorum", q ? "false" : "true", q ? "true" : "false", NULL);
		if (!q)
			log_warn("volume %s: no quorum: neither %s nor the witness is reachable",
				 r->v->name, peer_name(r));
		else
			log_info("volume %s: quorum again", r->v->name);
	}
	if (r->v->role == VOL_PRIMARY && !q) {
		if (!r->noquorum_ns)
			r->noquorum_ns = now;
		else if (now - r->noquorum_ns >= qt)
			step_down(r, "no quorum for quorum-timeout");
	} else {
		r->noquorum_ns = 0;
	}
	/* D2: a held write's only copy is on this disk; once it is gone
	 * (detached) the write fails rather than wait to be acknowledged */
	if (r->nheld && vol_disk_gone(r->v->disk))
		release_held(r, -EIO);
	/* Q3: a write held for quorum-timeout fails. */
	while (!list_empty(&r->held)) {
		struct vol_io *io = container_of(r->held.next, struct vol_io, rep.link);
		if (now - io->rep.t0 < qt)
			break;
		list_del(&io->rep.link);
		r->nheld--;
		vol_complete(io, -EIO);
	}
	quorum_kick(r);
	lease_tick(r);
	ev_timer_arm(r->ev, &r->q_timer, QTICK_NS);
}

int quorum_init(struct repl *r, struct wit_client *wc)
{
	int h;

	list_init(&r->held);
	r->quorum = true;
	r->q_timer.fn = quorum_tick;
	if (!wc)
		return 0;
	h = wit_client_attach(wc, r->v->name, &quorum_wit_ops, r);
	if (h < 0)
		return h;
	r->wc = wc;
	return 0;
}

void quorum_start(struct repl *r)
{
	r->q_start_ns = ev_now(r->ev);
	if (r->wc)
		ev_timer_arm(r->ev, &r->q_timer, QTICK_NS);
}

void quorum_shutdown(struct repl *r)
{
	ev_timer_cancel(r->ev, &r->q_timer);
	release_held(r, -EIO);
}

void repl_release_held(struct repl *r)
{
	release_held(r, -EIO);
}
