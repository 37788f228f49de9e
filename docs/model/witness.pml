/*
 * The witness protocol of Tandem (docs/WITNESS.md): roles, disk states and
 * data generations of two nodes A and B, the witness W and its record, the
 * peer link and client writes, under crashes, partitions and message loss.
 *
 * Checked with spin by tests/model/run.sh. docs/model/README.md says what is
 * modelled, what is left out and why, and maps every C state and rule to
 * its counterpart here.
 *
 * Properties:
 *   P1. Never two nodes that may acknowledge writes at the same time. A node
 *       may acknowledge (ACCEPTING) when it is primary and either its peer
 *       link is established (the peer acknowledges) or N1 holds (alone_ok).
 *   P2. A primary that may acknowledge writes holds every write that was
 *       ever acknowledged, by anyone.
 *   P3. A node is promoted only if it holds every acknowledged write.
 *   P4. Every acknowledged write is on the disk of some node (not promised
 *       after a wiped disk: N1 acknowledged it on one disk, then that disk
 *       was lost, two faults).
 *   R.  A read returns the latest acknowledged version or a later one, and
 *       never a version older than one an earlier read returned (so never
 *       the data of a write that is then failed and lost). A read is one
 *       step at a primary that holds its lease (L4).
 *   P2, P3, P4 and R are not promised once an operator used `primary
 *   --force` (forced); P1 always is. P1, P2 and P4 are checked in every
 *   state (Monitor), P3 at every promotion (promote_now), R at every read.
 *   LIVENESS (the ltl claim `live`, spin -a -f): once the links stay whole,
 *   some node is primary from some point on (fairness and bounds: README).
 *   Also asserted, as checks of the C design: only legal disk transitions
 *   (vol.c set_disk), R6 (a primary never receives data), the handshake
 *   verdict "equal" and the activity log cleaner only between identical
 *   copies, a REPORT_ACK with SYNCED only for a REPORT sent with it.
 *
 * Seeded bugs (each must make spin report a violation):
 *   MUT_NO_SYNCED_CHECK       W3.1 skipped: a claim granted without synced/gen
 *   MUT_ACK_BEFORE_REPORT     N1: writes acknowledged alone as soon as the
 *                             REPORT without SYNCED is sent
 *   MUT_NO_LIVE_SESSION_CHECK W3.2 skipped: a grant while the recorded
 *                             primary's session lives
 *   MUT_NO_GRACE              W3.3 skipped: no grace after a witness restart
 *   MUT_NO_PERSIST            the record does not survive a witness restart
 *   MUT_W1_ANY                W1: a free record taken by any primary's report
 *   MUT_W2_KEEP_GEN           W2: a release keeps the gen last reported
 *   MUT_ADMIN_FORCE           every claim by hand carries FORCE
 *   MUT_ADMIN_LATCH           a grant of a claim by hand kept for the
 *                             command's next call (tandemctl's poll)
 *   MUT_READ_NO_LEASE         L4: a read checks the role only, not the lease
 *   MUT_GRANT_BY_NAME         I2 skipped: the named node's claim granted and
 *                             its primary REPORT accepted whatever it holds
 *   MUT_DIRTY_READ            L4: a read does not wait for a pending write
 *   MUT_LEASE_RECV_ANCHOR     L1: a renewal anchored at its receipt (an
 *                             answer sent before the lease ran out renews)
 *   MUT_WIT_CLOSE_AT_ONCE     L2 as first stated: a session that closed is
 *                             dead at once (W3.2 does not wait for the lease)
 *   MUT_PEER_CLOSE_AT_ONCE    L3 as first stated: a secondary claims at once
 *                             when its connection closed (no wait for the
 *                             primary's peer lease)
 *   MUT_HS_BOTH_STEP_DOWN     L6 as first stated: every primary without a
 *                             lease steps down at a handshake with a primary
 *   MUT_DROP_WITHDRAWN_GRANT  C5 skipped (C before issue 22): a grant that
 *                             arrives for a withdrawn claim is dropped
 *   MUT_RS_DONE_UPTODATE      R13 skipped (C before it): a resync target ends
 *                             up to date even when its source was outdated
 *   MUT_RELEASE_WITHDRAWN     C5 as first stated: a grant that cannot promote
 *                             releases the record (liveness)
 *   MUT_ALONE_STALE_GEN       N1 as before: a write in a generation branched
 *                             since the acknowledged report is acknowledged
 *                             alone (the record's gen lags the data)
 *   MUT_FORCE_BEFORE_GRANT    N8a skipped (C before it): `primary --force`
 *                             stops the resync and declares the disk up to
 *                             date before it asks the witness; a refused
 *                             claim leaves the node changed
 * C had W1_ANY, ADMIN_FORCE and ADMIN_LATCH until the model found them
 * (README, "Findings"); W2_KEEP_GEN shows why W2 records the gen released
 * (W5: unless the releaser lacks the recorded gen, N13).
 * WIT_CLOSE_AT_ONCE, PEER_CLOSE_AT_ONCE, HS_BOTH_STEP_DOWN,
 * RELEASE_WITHDRAWN and ALONE_STALE_GEN are the rules of issue 22 as first
 * written, before the model found their holes (README, "Findings").
 *
 * The operator: `primary [--force]` and `secondary` (or the halves of a
 * `switchover`) at any time, as C takes them; a `primary` polled by
 * tandemctl is one call here (a grant promotes at once, admin_granted).
 *   CHECK_N6          asserts that a node giving up a failover because the
 *                     record names no primary (quorum_peer_lost) is right
 *                     (availability, not safety; holds at the bounds)
 * Other switches: MSG_LOSS (a message lost while its session stays up),
 * PROBE=1..9 (a state that must be reachable, at the end of this file), and
 * the bounds and kinds below.
 */

/* Bounds: client writes, faults (crashes, partitions, lost messages),
 * operator commands. */
#ifndef MAXW
#define MAXW 2
#endif
#ifndef MAXF
#define MAXF 2
#endif
#ifndef MAXOPS
#define MAXOPS 1
#endif
/* Kinds of faults and commands, all on by default; a check may leave some
 * out (NO_NODE_CRASH, NO_WITNESS_CRASH, NO_CUT_AB, NO_CUT_W, NO_ISOLATE,
 * NO_WIPE, NO_WDROP, NO_OP_PRIMARY, NO_OP_FORCE, NO_OP_DEMOTE, NO_READS), or
 * let only node n write
 * (WRITER=n) or take commands (OPERATOR=n). That only removes behaviours: a
 * violation found so is one of the whole model. */
#ifdef NO_NODE_CRASH
#define NODE_CRASH false
#else
#define NODE_CRASH true
#endif
#ifdef NO_WITNESS_CRASH
#define WITNESS_CRASH false
#else
#define WITNESS_CRASH true
#endif
#ifdef NO_CUT_AB
#define CUT_AB false
#else
#define CUT_AB true
#endif
#ifdef NO_CUT_W
#define CUT_W false
#else
#define CUT_W true
#endif
#ifdef NO_ISOLATE
#define ISOLATE false
#else
#define ISOLATE true
#endif
#ifdef NO_WIPE
#define WIPE false
#else
#define WIPE true
#endif
#ifdef NO_WDROP
#define WDROP false
#else
#define WDROP true
#endif
#ifdef NO_READS
#define READS false
#else
#define READS true
#endif
#ifdef NO_OP_PRIMARY
#define OP_PRIMARY false
#else
#define OP_PRIMARY true
#endif
#ifdef NO_OP_FORCE
#define OP_FORCE false
#else
#define OP_FORCE true
#endif
#ifdef NO_OP_DEMOTE
#define OP_DEMOTE false
#else
#define OP_DEMOTE true
#endif
/* OPERATOR: the one node the operator's commands go to (default: either) */
#ifdef OPERATOR
#define MAY_OP(n) ((n) == OPERATOR)
#else
#define MAY_OP(n) true
#endif
/* WRITER: the one node that takes client writes (default: either) */
#ifdef WRITER
#define MAY_WRITE(n) ((n) == WRITER)
#else
#define MAY_WRITE(n) true
#endif

/* ---- names ---- */
#define A 0
#define B 1
#define NONE 2 /* no node: the record's primary is "" */
#define OTHER(n) (1 - (n))

/* src/vol/vol.h: enum vol_role, enum vol_disk (same values) */
#define VOL_SECONDARY 0
#define VOL_PRIMARY 1
#define VOL_UPTODATE 0
#define VOL_INCONSISTENT 1
#define VOL_OUTDATED 2
#define VOL_CONSISTENT 5

/* src/repl/repl.h: enum repl_rep_state */
#define RR_OFF 0
#define RR_ESTABLISHED 1
#define RR_SYNCSOURCE 2
#define RR_SYNCTARGET 3

/* src/repl/repl_gen.h */
#define GEN_NONE 0
#define GEN_EMPTY 1

/* include/proto/witness.h */
#define WIT_PING 4
#define WIT_PONG 5
#define WIT_REPORT 6
#define WIT_REPORT_ACK 7
#define WIT_CLAIM 8
#define WIT_CLAIM_REPLY 9
#define WIT_F_PRIMARY 1
#define WIT_F_SYNCED 2
#define WIT_F_FORCE 4
#define WIT_F_RELEASE 8
#define WIT_F_ADMIN 16
#define WIT_R_OK 0
#define WIT_R_DEPOSED 1
#define WIT_R_DENIED 2
#define WIT_NONE 0
#define WIT_NOT_SYNCED 1
#define WIT_OLDER_DATA 2
#define WIT_PRIMARY_ALIVE 3
#define WIT_NO_RECORD 4

/* src/wit/wit_rec.h: enum wit_claim_outcome */
#define WIT_GRANT 0
#define WIT_DENY 1
#define WIT_WAIT 2

/* src/repl/repl_int.h: enum claim_why */
#define CLAIM_NONE 0
#define CLAIM_AUTO 1
#define CLAIM_ADMIN 2

/* the peer link messages that matter here (include/proto/repl.h) */
#define REPL_WRITE 1
#define REPL_ACK 2
#define REPL_RS_DONE 3

/* handshake verdicts (repl_gen.h enum gen_verdict), seen from A; the
 * refusals (split brain, unrelated, no data, both primary, a primary as
 * target) are one */
#define HS_EQUAL 0
#define HS_SOURCE 1
#define HS_TARGET 2
#define HS_REFUSE 3

/* ---- channels (FIFO, like the TCP connections they stand for) ---- */
/* A message's tag stands for what C tells by comparing its seq: bits set on
 * everything still on its way (in a channel, or a claim pending at the
 * witness) when the node moves its marks (mark_w):
 *   TAG_STALE      sent before the last refresh or release: its answer does
 *                  not say what the record is now (Q5, r->w_heard_min_seq)
 *   TAG_OLD_CLAIM  a claim older than the claim in flight, or its reply
 *                  (Q4, r->w_claim_seq) */
#define TAG_STALE 1
#define TAG_OLD_CLAIM 2
/*   TAG_OLD_LEASE  sent before the node's witness lease last ran out, or
 *                  answered before the witness dropped the session: its
 *                  answer renews no lease (L1: a renewal is anchored at the
 *                  request's sending, and that anchor is past) */
#define TAG_OLD_LEASE 4
/*   TAG_OLD_GEN    a REPORT sent before the node's last gen_branch (or its
 *                  answer): it does not vouch for the generation written
 *                  now (N1 as the model found it must be: README) */
#define TAG_OLD_GEN 8
/* node n -> witness: type, flags, tag (what C tells by its seq: TAG_*), gen,
 * history[0..3] (make_msg: a non-primary's history[3] is its bitmap
 * generation, if it has one) */
#define TWCAP 2
#define FWCAP 2
#define PCCAP 2
chan tw[2] = [TWCAP] of { byte, byte, byte, byte, byte, byte, byte, byte };
/* witness -> node n: type, result, reason, the record's primary, the flags
 * of the message it answers (w_rep_ring by seq in C), its tag, and the
 * record's gen (struct wit_verdict gen, N13) */
chan fw[2] = [FWCAP] of { byte, byte, byte, byte, byte, byte, byte };
/* to node n over the peer link: type, a write or a data set, a generation */
chan pc[2] = [PCCAP] of { byte, byte, byte };

/* ---- the nodes (index A, B) ---- */
/* persisted: superblock (struct md_sb), change bitmap, activity log, data */
byte gcur[2];   /* gen_current */
byte gbm[2];    /* gen_bitmap */
byte gh0[2];    /* gen_history[0..3] */
byte gh1[2];
byte gh2[2];
byte gh3[2];
bool bits[2];   /* the change bitmap has regions marked out of sync */
bool al[2];     /* the activity log has extents: written since the last clean */
bool mdprim[2]; /* TANDEM_MD_F_PRIMARY */
byte data[2];   /* the writes the data area holds: bit k = client write k */
byte disk[2];   /* vol->disk; vol.c persists it as F_UPTODATE / F_CONSISTENT */
/* volatile: lost by a crash */
byte role[2];         /* vol->role */
bool crashed_prim[2]; /* vol->crashed_primary */
byte rstate[2];       /* r->rstate */
byte peer_disk[2];    /* r->peer.disk: the peer's disk as last heard */
byte pendp[2];        /* writes sent to the peer whose ACK is not back */
byte held[2];         /* r->held: writes waiting for the witness (N1) */
/* repl_quorum.c */
bool w_up[2];         /* r->w_up: this node's view of its witness session */
bool rep_valid[2];    /* r->w_rep_valid */
byte rep_flags[2];    /* r->w_rep_flags */
byte rep_gen[2];      /* r->w_rep_gen */
byte nsync[2];        /* REPORTs with SYNCED sent whose answer is not back */
bool alone[2];        /* r->w_alone_seq > r->w_synced_seq */
byte w_primary[2];    /* r->w_primary */
byte w_rgen[2];       /* r->w_rec_gen: the record's gen as last heard (N13);
                       * 0 while w_heard is false */
bool w_heard[2];      /* r->w_heard */
byte claim_want[2];   /* r->w_claim_want */
bool claim_out[2];    /* r->w_claim_seq != 0 */
byte claim_result[2]; /* r->w_claim_result: 0 none, 2 refused (-errno) */
bool claim_force[2];  /* r->w_claim_force: the admin claim is `primary --force`'s */
bool w_release[2];    /* r->w_release */
bool fdecl[2];        /* (a check of N8a) --force changed this node, not yet
                       * promoted: set by force_prepare, cleared by promote_now */
/* the lease (L1): held while its deadline is ahead; an explicit step lets it
 * run out (time is not modelled). Only a primary holds one. */
bool lw[2];           /* renewed by the witness: an ok REPORT_ACK of a primary
                       * report, a grant, a PONG on such a session */
bool lp[2];           /* renewed by the peer: an answer on a connection on
                       * which the peer's last STATE said secondary */
bool wackp[2];        /* this session: the witness acknowledged this node as
                       * the record's primary (PONGs renew) */

/* ---- the links ---- */
bool pl;      /* the peer connection is up at both ends (ST_RUN, RC_CONNECTED) */
bool cutAB;   /* the A-B link is partitioned */
bool cutW[2]; /* node n's link to the witness is partitioned */

/* ---- the witness ---- */
/* the record (struct wit_rec); WS2: persisted before any answer that depends
 * on it, so these variables are also the state file */
byte rp = NONE; /* primary */
byte rgen;      /* gen */
bool rsync;     /* synced */
byte repoch;    /* epoch (counts to 3 and stays: only epoch == 0 is ever read) */
bool grace;     /* W3.3: started less than witness-timeout ago */
bool ws[3];     /* the witness's view: node n's session is up and alive; ws[NONE] false */
/* struct wit_pending: one claim per session */
bool pend_on[2];
byte pend_flags[2];
byte pend_gen[2];
byte pend_h0[2];
byte pend_h1[2];
byte pend_h2[2];
byte pend_h3[2];
byte pend_tag[2];

/* ---- for the properties ---- */
byte nw;       /* client writes issued (the next one is bit nw) */
byte acked;    /* the writes ever acknowledged to a client */
bool forced;   /* an operator used `primary --force` */
byte ngen = 2; /* md_new_gen: the last generation handed out */
byte faults;   /* faults so far */
byte ops;      /* operator commands so far */
byte rtop;     /* the newest version a read returned (R) */
byte wiped;    /* bit n: node n restarted with empty metadata (P4 not promised) */

/* ---- derived conditions ---- */
/* alone_ok (repl_quorum.c): N1 */
#define ALONE_OK(n) (w_up[n] && alone[n])
/* may acknowledge writes: by its peer, or alone (N1) */
#define ACCEPTING(n) (role[n] == VOL_PRIMARY && (pl || ALONE_OK(n)))
#define HOLDS_ALL(n) ((data[n] & acked) == acked)
/* the lease: from the witness or from the peer */
#define LEASE(n) (lw[n] || lp[n])
/* the version of the (one) block a data set holds: the newest write in it
 * (writes are numbered in the order they are issued; a node applies them in
 * that order, and a resync copies the whole set) */
#define TOP(d) (((d) & 4) -> 3 : (((d) & 2) -> 2 : (((d) & 1) -> 1 : 0)))
/* L3 (as the model found it must be): a node sends no claim and takes no
 * grant while its peer may still hold a peer lease from it: it waits a
 * lease after its last answer to the peer, whether the connection timed out
 * or closed */
#ifdef MUT_PEER_CLOSE_AT_ONCE
#define PEER_LEASE_GONE(n) true
#else
#define PEER_LEASE_GONE(n) (!lp[OTHER(n)])
#endif
/* C5: a grant that arrives for a claim no longer in flight promotes the
 * node only if it may: secondary, its disk up to date or consistent, not a
 * sync target, its peer not primary (and L3: its peer holds no lease) */
#define MAY_PROMOTE(n) (role[n] == VOL_SECONDARY && \
	(disk[n] == VOL_UPTODATE || disk[n] == VOL_CONSISTENT) && rstate[n] != RR_SYNCTARGET && \
	!(pl && role[OTHER(n)] == VOL_PRIMARY) && PEER_LEASE_GONE(n))
/* named_self (repl_quorum.c): the record, as last heard, names this node */
#define NAMED_SELF(n) (w_heard[n] && w_primary[n] == (n))
/* holds_rec_gen (repl_quorum.c): the node holds the record's gen as last
 * heard, as the witness judges it (holds_gen) on what make_msg sends */
#define HOLDS_REC_GEN(n) (w_rgen[n] <= GEN_EMPTY || gcur[n] == w_rgen[n] || gh0[n] == w_rgen[n] || \
	gh1[n] == w_rgen[n] || gh2[n] == w_rgen[n] || MSG_H3(n) == w_rgen[n])
/* release_unheld (repl_quorum.c), N13: named, a secondary, without the
 * recorded gen, its peer connected and the connection established (the
 * resync that could bring that gen is over): it releases the record */
#define UNHELD(n) (w_up[n] && NAMED_SELF(n) && !w_release[n] && role[n] == VOL_SECONDARY && pl && \
	rstate[n] == RR_ESTABLISHED && !HOLDS_REC_GEN(n))
/* may_claim (repl_quorum.c): failover auto, secondary, disk up to date or
 * consistent, not a sync target; no peer connected, or (N7) the record
 * names it and its connected peer is a secondary in sync with it */
#define MAY_CLAIM(n) (role[n] == VOL_SECONDARY && \
	(!pl || (NAMED_SELF(n) && role[OTHER(n)] != VOL_PRIMARY && rstate[n] == RR_ESTABLISHED)) && \
	(disk[n] == VOL_UPTODATE || disk[n] == VOL_CONSISTENT) && rstate[n] != RR_SYNCTARGET)
/* want_flags (repl_quorum.c), N2: SYNCED only while connected, established
 * and both up to date */
#define SYNCED_OK(n) (pl && rstate[n] == RR_ESTABLISHED && peer_disk[n] == VOL_UPTODATE && \
	disk[n] == VOL_UPTODATE)
#define WANT_FLAGS(n) (role[n] == VOL_PRIMARY -> \
	(SYNCED_OK(n) -> (WIT_F_PRIMARY | WIT_F_SYNCED) : WIT_F_PRIMARY) : \
	(w_release[n] -> WIT_F_RELEASE : 0))
/* send_report: sent only when the flags or the generation changed */
#define REPORT_NEEDED(n) (w_up[n] && !(rep_valid[n] && rep_flags[n] == WANT_FLAGS(n) && \
	rep_gen[n] == gcur[n]))
/* the rest of quorum_kick: a claim started, dropped or sent. N7: a
 * starting node that the record does not name first waits peer-timeout
 * (now - q_start_ns >= timeout_ns); waiting is timing only, and the model
 * lets a node claim at any time after, so the wait is left out (a node may
 * claim at once: every behaviour of C is still one of the model's). */
#define CLAIM_START(n) (claim_want[n] == CLAIM_NONE && MAY_CLAIM(n) && w_heard[n] && \
	w_primary[n] != NONE)
#define CLAIM_NEEDED(n) (w_up[n] && !REPORT_NEEDED(n) && (CLAIM_START(n) || \
	(claim_want[n] == CLAIM_AUTO && !MAY_CLAIM(n)) || \
	(claim_want[n] != CLAIM_NONE && !claim_out[n] && PEER_LEASE_GONE(n))))
/* make_msg: a node counts its bitmap generation as its data too. I2 needs
 * it for a primary as well (C today sends it for a non-primary only): a
 * primary that lost its peer reports a new generation whose parent is the
 * one recorded, and W1 checks that it holds the recorded one (README) */
#ifdef I2_NO_PRIMARY_BITMAP
#define MSG_H3(n) ((gbm[n] > GEN_EMPTY && role[n] != VOL_PRIMARY) -> gbm[n] : gh3[n])
#else
#define MSG_H3(n) (gbm[n] > GEN_EMPTY -> gbm[n] : gh3[n])
#endif
/* in_history (repl_gen.c) */
#define INHIST(n, g) ((g) > GEN_EMPTY && (gh0[n] == (g) || gh1[n] == (g) || gh2[n] == (g) || \
	gh3[n] == (g)))
/* standing (repl_gen.c): outdated 0, unverified 1, up to date 2 */
#define STANDING(n) (disk[n] == VOL_OUTDATED -> 0 : (disk[n] == VOL_CONSISTENT -> 1 : 2))
/* holds_gen (wit_rec.c) on the pending claim of node n */
#define PEND_HOLDS(n, g) (pend_gen[n] == (g) || ((g) > GEN_EMPTY && \
	(pend_h0[n] == (g) || pend_h1[n] == (g) || pend_h2[n] == (g) || pend_h3[n] == (g))))
/* holds_gen (wit_rec.c) on the message being handled (wit_handle) */
#define MSG_HOLDS(g) (mg == (g) || ((g) > GEN_EMPTY && \
	(mh0 == (g) || mh1 == (g) || mh2 == (g) || mh3 == (g))))
/* a node that still believes in a session the witness has closed */
#define STALE(n) (w_up[n] && !ws[n])
/* peer branched from me / I branched from the peer (repl_gen.c decide) */
#define FROM(x, y) (gbm[x] != GEN_NONE && gbm[x] == gcur[y])

#ifdef MUT_NO_LIVE_SESSION_CHECK
#define PRIMARY_ALIVE(n) false
#elif defined(MUT_WIT_CLOSE_AT_ONCE)
/* L2 as first stated: a closed session is dead at once */
#define PRIMARY_ALIVE(n) (rp != NONE && rp != (n) && ws[rp])
#else
/* decide_claim, node_alive (wit_server.c): the recorded primary, another
 * node, holds a live session; L2: or its session ended (silence, or a close)
 * less than a lease after the witness last heard from it, so that its
 * witness lease may still run (lw: the witness waits it out) */
#define PRIMARY_ALIVE(n) (rp != NONE && rp != (n) && (ws[rp] || lw[rp]))
#endif
#ifdef MUT_NO_GRACE
#define IN_GRACE false
#else
#define IN_GRACE grace
#endif

/* ================= node helpers ================= */

/* vol.c set_disk: the one writer of v->disk, with its legal[][] table */
inline set_disk(n, to)
{
	if
	:: disk[n] == to -> skip
	:: else ->
		assert((disk[n] == VOL_UPTODATE && (to == VOL_OUTDATED || to == VOL_INCONSISTENT)) ||
		       (disk[n] == VOL_OUTDATED && (to == VOL_UPTODATE || to == VOL_INCONSISTENT)) ||
		       (disk[n] == VOL_CONSISTENT && (to == VOL_UPTODATE || to == VOL_OUTDATED ||
						     to == VOL_INCONSISTENT)) ||
		       (disk[n] == VOL_INCONSISTENT && (to == VOL_UPTODATE || to == VOL_OUTDATED)));
		disk[n] = to
	fi
}

/* repl.c gen_branch: a primary that writes without its peer (R7) */
inline gen_branch(n)
{
	if
	:: gbm[n] == GEN_NONE ->
		gbm[n] = gcur[n];
		ngen++;
		assert(ngen < 16);
		gcur[n] = ngen;
#ifndef MUT_ALONE_STALE_GEN
		/* N1: the witness must record the new generation before a write
		 * in it is acknowledged alone (else a wiped node that is given
		 * the old generation by a full sync holds "the recorded gen") */
		alone[n] = false;
		mark_w(n, TAG_OLD_GEN, false)
#else
		skip
#endif
	:: else -> skip
	fi
}

/* repl_gen.c gen_push_history: four entries, the oldest pushed out */
inline push_hist(n, g)
{
	if
	:: g <= GEN_EMPTY || gh0[n] == g -> skip
	:: else ->
		gh3[n] = gh2[n];
		gh2[n] = gh1[n];
		gh1[n] = gh0[n];
		gh0[n] = g
	fi
}

/* r->w_claim_seq = 0: a reply to the claim in flight is not acted on (Q4) */
inline drop_claim(n)
{
	claim_out[n] = false
}

/* on_session (repl_quorum.c), the node's side of a session that ends or
 * begins. Q1: an acknowledgement counts only on the session that gave it. */
inline session_reset_node(n)
{
	rep_valid[n] = false;
	rep_flags[n] = 0;
	rep_gen[n] = 0;
	w_heard[n] = false;
	w_primary[n] = NONE;
	w_rgen[n] = 0;
	alone[n] = false;
	claim_out[n] = false;
	nsync[n] = 0;
	wackp[n] = false
}

inline flush_w(n)
{
	do
	:: tw[n]?_, _, _, _, _, _, _, _
	:: empty(tw[n]) -> break
	od;
	do
	:: fw[n]?_, _, _, _, _, _, _
	:: empty(fw[n]) -> break
	od
}

/* the witness's side of a closed session (wit_server.c on_closed): its
 * pending claim goes with it; the others are decided again (evaluate) by
 * the witness's own steps */
inline session_lost_wit(n)
{
	ws[n] = false;
	pend_on[n] = false;
	pend_flags[n] = 0;
	pend_gen[n] = 0;
	pend_h0[n] = 0;
	pend_h1[n] = 0;
	pend_h2[n] = 0;
	pend_h3[n] = 0;
	pend_tag[n] = 0;
	flush_w(n)
}

/* the witness's end of node n's session ends while the node's end stays up:
 * it heard nothing from n for witness-timeout (the n -> W direction is
 * broken or slow), or the connection closed at the witness's end only. What
 * n sent since is never read; what the witness sent before still arrives,
 * and is answered before the session's end: by L1 its anchor is older than
 * the witness's last receipt from n, so it renews no lease (TAG_OLD_LEASE,
 * set after the definition of mark_w below) */
inline wdrop_flush(n)
{
	ws[n] = false;
	pend_on[n] = false;
	pend_flags[n] = 0;
	pend_gen[n] = 0;
	pend_h0[n] = 0;
	pend_h1[n] = 0;
	pend_h2[n] = 0;
	pend_h3[n] = 0;
	pend_tag[n] = 0;
	do
	:: tw[n]?_, _, _, _, _, _, _, _
	:: empty(tw[n]) -> break
	od
}

/* scratch for mark_w, always within one atomic step: not state */
hidden byte t0, t1, t2, t3, t4, t5, t6, t7, tk;

/* Everything of node n's session on its way gets tag bit b: every message
 * (claims_only false), or only the claims and their replies. The channels
 * are rotated once, so their order stays. */
inline mark_w(n, b, claims_only)
{
	tk = len(tw[n]);
	do
	:: tk > 0 ->
		tw[n]?t0, t1, t2, t3, t4, t5, t6, t7;
		if
		:: !(claims_only) || t0 == WIT_CLAIM -> t2 = t2 | (b)
		:: else -> skip
		fi;
		tw[n]!t0, t1, t2, t3, t4, t5, t6, t7;
		tk--
	:: else -> break
	od;
	tk = len(fw[n]);
	do
	:: tk > 0 ->
		fw[n]?t0, t1, t2, t3, t4, t5, t6;
		if
		:: !(claims_only) || t0 == WIT_CLAIM_REPLY -> t5 = t5 | (b)
		:: else -> skip
		fi;
		fw[n]!t0, t1, t2, t3, t4, t5, t6;
		tk--
	:: else -> break
	od;
	if
	:: pend_on[n] -> pend_tag[n] = pend_tag[n] | (b)
	:: else -> skip
	fi;
	t0 = 0; t1 = 0; t2 = 0; t3 = 0; t4 = 0; t5 = 0; t6 = 0; t7 = 0; tk = 0
}

/* send_report (repl_quorum.c); taken only when REPORT_NEEDED */
inline send_report(n, f)
{
	f = WANT_FLAGS(n);
	printf("%c: REPORT flags %d gen %d (delivered %d)\n", 'A' + n, f, gcur[n], ws[n]);
	/* Q2, N2: from here on N1 needs a newer acknowledged report without SYNCED */
	if
	:: f & WIT_F_SYNCED -> nsync[n]++; alone[n] = false
	:: else -> skip
	fi;
	/* Q5: a release empties the record (W2); until its answer, what was
	 * heard (this node named) must not make it claim again */
	if
	:: f & WIT_F_RELEASE ->
		w_heard[n] = false;
		w_primary[n] = NONE;
		w_rgen[n] = 0;
		mark_w(n, TAG_STALE, false)
	:: else -> skip
	fi;
#ifdef MUT_ACK_BEFORE_REPORT
	/* the seeded bug: N1 counts a report without SYNCED once it is sent */
	if
	:: (f & WIT_F_PRIMARY) && !(f & WIT_F_SYNCED) -> alone[n] = true
	:: else -> skip
	fi;
#endif
	if
	:: ws[n] -> tw[n]!WIT_REPORT, f, 0, gcur[n], gh0[n], gh1[n], gh2[n], MSG_H3(n)
	:: else -> skip /* into a session the witness closed: lost */
	fi;
	rep_valid[n] = true;
	rep_flags[n] = f;
	rep_gen[n] = gcur[n];
	if
	:: f & WIT_F_RELEASE -> w_release[n] = false
	:: else -> skip
	fi;
	f = 0
}

/* the claim half of quorum_kick, and send_claim (repl_quorum.c) */
inline kick_claim(n, f)
{
	if
	:: CLAIM_START(n) -> claim_want[n] = CLAIM_AUTO
	:: else -> skip
	fi;
	if
	:: claim_want[n] == CLAIM_AUTO && !MAY_CLAIM(n) ->
		claim_want[n] = CLAIM_NONE; /* Q4: a peer came, or the disk changed */
		drop_claim(n)
	:: else -> skip
	fi;
	if
	:: claim_want[n] != CLAIM_NONE && !claim_out[n] && PEER_LEASE_GONE(n) ->
#ifdef MUT_ADMIN_FORCE
		/* the seeded bug: every claim by hand skips the data check */
		f = (claim_want[n] == CLAIM_ADMIN -> (WIT_F_ADMIN | WIT_F_FORCE) : 0);
#else
		f = (claim_want[n] != CLAIM_ADMIN -> 0 :
		     (claim_force[n] -> (WIT_F_ADMIN | WIT_F_FORCE) : WIT_F_ADMIN));
#endif
		claim_out[n] = true;
		/* a new seq: older claims and their replies no longer match */
		mark_w(n, TAG_OLD_CLAIM, true);
		printf("%c: CLAIM flags %d gen %d history %d %d %d %d (delivered %d)\n", 'A' + n, f,
		       gcur[n], gh0[n], gh1[n], gh2[n], MSG_H3(n), ws[n]);
		if
		:: ws[n] -> tw[n]!WIT_CLAIM, f, 0, gcur[n], gh0[n], gh1[n], gh2[n], MSG_H3(n)
		:: else -> skip
		fi;
		f = 0
	:: else -> skip
	fi
}

/* release_unheld (repl_quorum.c), N13: taken only when UNHELD; the
 * REPORT with RELEASE follows (W2, W5: the witness keeps its gen) */
inline release_unheld(n)
{
	printf("%c: named without the recorded gen %d: releases the record\n", 'A' + n, w_rgen[n]);
#if defined(PROBE) && PROBE == 9
	assert(false); /* probe 9: a named node without the recorded gen releases (N13) */
#endif
	w_release[n] = true
}

/* quorum_kick (repl_quorum.c), called at once after the events that call
 * it in C; the tick (the Node's own steps) does the same later otherwise */
inline quorum_kick(n, f)
{
	if
	:: UNHELD(n) -> release_unheld(n)
	:: else -> skip
	fi;
	if
	:: REPORT_NEEDED(n) && (len(tw[n]) < TWCAP) -> send_report(n, f)
	:: else -> skip
	fi;
	if
	:: CLAIM_NEEDED(n) && (len(tw[n]) < TWCAP) -> kick_claim(n, f)
	:: else -> skip
	fi
}

/* quorum_peer_role (repl_quorum.c), called by repl_hs.c run_state when the
 * peer's STATE shows another role. N6: what this node knew of the record is
 * stale; a new report fetches it. */
inline quorum_peer_role(n)
{
	w_heard[n] = false;
	w_primary[n] = NONE; /* (not read while w_heard is false) */
	w_rgen[n] = 0;
	mark_w(n, TAG_STALE, false); /* Q5: an answer still on its way is as stale */
	rep_valid[n] = false;
	rep_flags[n] = 0;
	rep_gen[n] = 0;
	quorum_kick(n, f)
}

/* conn_lost (repl_conn.c) on node n; pwp: its peer was primary */
inline conn_lost(n, pwp)
{
	/* R7: a primary marks the activity log out of sync, then starts a new
	 * generation if anything is marked */
	if
	:: role[n] == VOL_PRIMARY ->
		bits[n] = (bits[n] || al[n]);
		if
		:: bits[n] -> gen_branch(n)
		:: else -> skip
		fi
	:: else -> skip
	fi;
	/* fail_pending: every write still waiting for the peer is marked and
	 * is a write of a new generation (on any role), then fg_finish ->
	 * quorum_hold (Q1): completed only under N1 */
	if
	:: pendp[n] != 0 ->
		gen_branch(n);
		bits[n] = true;
		if
		:: role[n] == VOL_PRIMARY && ALONE_OK(n) ->
			acked = acked | pendp[n];
			printf("%c: writes %d acknowledged alone\n", 'A' + n, pendp[n])
		:: role[n] == VOL_PRIMARY && !ALONE_OK(n) -> held[n] = held[n] | pendp[n]
		:: role[n] != VOL_PRIMARY -> skip /* held until quorum-timeout: EIO */
		fi
	:: else -> skip
	fi;
	pendp[n] = 0;
	rstate[n] = RR_OFF;
	peer_disk[n] = VOL_INCONSISTENT;
	/* a secondary that lost its primary: quorum_peer_lost (N6), else outdated */
	if
	:: role[n] != VOL_PRIMARY && (pwp) && disk[n] == VOL_UPTODATE ->
		if
		:: !MAY_CLAIM(n) || (w_heard[n] && w_primary[n] == NONE) ->
#ifdef CHECK_N6
			assert(!MAY_CLAIM(n) || rp == NONE);
#endif
			set_disk(n, VOL_OUTDATED)
		:: else ->
			claim_want[n] = CLAIM_AUTO;
			drop_claim(n);
			quorum_kick(n, f)
		fi
	:: else -> skip
	fi
}

inline flush_pc()
{
	do
	:: pc[A]?_, _, _
	:: empty(pc[A]) -> break
	od;
	do
	:: pc[B]?_, _, _
	:: empty(pc[B]) -> break
	od
}

/* the peer connection ends at both ends (a partition, conn_abort) */
inline link_lost()
{
	printf("A-B: connection lost\n");
	pl = false;
	flush_pc();
	conn_lost(A, role[B] == VOL_PRIMARY);
	conn_lost(B, role[A] == VOL_PRIMARY)
}

/* step_down (repl_quorum.c). Q3: held writes fail with EIO. */
inline step_down(n)
{
	printf("%c: steps down\n", 'A' + n);
	held[n] = 0;
	if
	:: role[n] == VOL_PRIMARY ->
		mdprim[n] = false;
		role[n] = VOL_SECONDARY;
		lw[n] = false; /* L5: a secondary holds no lease */
		lp[n] = false;
		if
		:: pl -> quorum_peer_role(OTHER(n)) /* send_state */
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* give_up_branch (repl_quorum.c), N5: back to the bitmap generation; the
 * bits stay, so the next connect makes this node the sync target */
inline give_up_branch(n)
{
	if
	:: gbm[n] > GEN_EMPTY ->
		gcur[n] = gbm[n];
		gbm[n] = GEN_NONE;
		if
		:: disk[n] == VOL_UPTODATE || disk[n] == VOL_CONSISTENT -> set_disk(n, VOL_OUTDATED)
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* deposed (repl_quorum.c), N5 */
inline deposed(n)
{
	printf("%c: deposed\n", 'A' + n);
	step_down(n);
	give_up_branch(n);
	if
	:: disk[n] == VOL_UPTODATE || disk[n] == VOL_CONSISTENT -> set_disk(n, VOL_OUTDATED)
	:: else -> skip
	fi;
	if
	:: pl -> link_lost() /* conn_abort: a new handshake with the new facts */
	:: else -> skip
	fi
}

/* promote_now (repl_admin.c): the common end of every promotion */
inline promote_now(n)
{
	printf("%c: promoted (data %d, acknowledged %d)\n", 'A' + n, data[n], acked);
	assert(forced || HOLDS_ALL(n)); /* P3 */
	if
	:: disk[n] == VOL_CONSISTENT || disk[n] == VOL_OUTDATED -> set_disk(n, VOL_UPTODATE)
	:: else -> skip
	fi;
	mdprim[n] = true;
	role[n] = VOL_PRIMARY;
	crashed_prim[n] = false; /* R14 */
	w_release[n] = false;
	fdecl[n] = false;
	if
	:: pl -> quorum_peer_role(OTHER(n)) /* send_state */
	:: else -> skip
	fi;
	quorum_kick(n, f)
}

/* ================= witness helpers ================= */

/* wit_rec_claim (wit_rec.c): W3 on the pending claim of node n */
inline claim_outcome(n, outc, reason)
{
	outc = WIT_GRANT;
	reason = WIT_NONE;
	if
#ifndef MUT_GRANT_BY_NAME
	:: rp == n && ((pend_flags[n] & WIT_F_FORCE) || PEND_HOLDS(n, rgen)) ->
		skip /* the record names it, and (I2) it holds the recorded gen */
	:: rp == n && !(pend_flags[n] & WIT_F_FORCE) && !PEND_HOLDS(n, rgen) ->
		outc = WIT_DENY; reason = WIT_OLDER_DATA /* I2: a wiped named node */
#else
	:: rp == n -> skip /* the record names it already */
#endif
	:: rp != n ->
		if
		:: !(pend_flags[n] & WIT_F_FORCE) ->
			if
			:: rp == NONE && repoch == 0 ->
				/* nothing known: by hand only */
				if
				:: !(pend_flags[n] & WIT_F_ADMIN) -> outc = WIT_DENY; reason = WIT_NO_RECORD
				:: else -> skip
				fi
			:: else ->
#ifndef MUT_NO_SYNCED_CHECK
				/* W3.1; a released record's gen is the data its
				 * primary left (W2) */
				if
				:: rp != NONE && !rsync -> outc = WIT_DENY; reason = WIT_NOT_SYNCED
				:: (rp == NONE || rsync) && !PEND_HOLDS(n, rgen) ->
					outc = WIT_DENY; reason = WIT_OLDER_DATA
				:: else -> skip
				fi
#else
				skip
#endif
			fi
		:: else -> skip
		fi;
		/* W3.2, W3.3 */
		if
		:: outc == WIT_GRANT && rp != NONE && (PRIMARY_ALIVE(n) || IN_GRACE) ->
			outc = WIT_WAIT; reason = WIT_PRIMARY_ALIVE
		:: else -> skip
		fi
	fi
}

/* decide_claim (wit_server.c): a grant (wit_rec_grant) or a denial */
inline answer_claim(n, outc, reason)
{
	if
	:: outc == WIT_GRANT ->
		if
		:: rp != n ->
			rp = n;
			rgen = pend_gen[n];
			rsync = false; /* WR1: the new primary writes alone at once */
			if
			:: repoch < 3 -> repoch++ /* WR2 */
			:: else -> skip
			fi
		:: else -> skip
		fi;
		printf("W: grants the claim of %c; record %d gen %d\n", 'A' + n, rp, rgen);
		fw[n]!WIT_CLAIM_REPLY, WIT_R_OK, WIT_NONE, rp, pend_flags[n], pend_tag[n], rgen
	:: else ->
		printf("W: denies the claim of %c: %d\n", 'A' + n, reason);
		fw[n]!WIT_CLAIM_REPLY, WIT_R_DENIED, reason, rp, pend_flags[n], pend_tag[n], rgen
	fi;
	pend_on[n] = false;
	pend_flags[n] = 0;
	pend_gen[n] = 0;
	pend_h0[n] = 0;
	pend_h1[n] = 0;
	pend_h2[n] = 0;
	pend_h3[n] = 0;
	pend_tag[n] = 0
}

/* one message of node n (wit_server.c handle -> on_report / on_claim) */
inline wit_handle(n)
{
	if
	:: mt == WIT_REPORT ->
		/* wit_rec_report: W1, W2 */
		res = WIT_R_OK;
		reason = WIT_NONE;
		if
		:: (mf & WIT_F_PRIMARY) && rp != NONE && rp != n ->
			res = WIT_R_DEPOSED /* W1: another node holds the record */
#ifndef MUT_GRANT_BY_NAME
		:: (mf & WIT_F_PRIMARY) && rp == n && !MSG_HOLDS(rgen) ->
			res = WIT_R_DEPOSED; /* I2: the named node lacks the recorded data */
			reason = WIT_OLDER_DATA
#endif
#ifndef MUT_W1_ANY
		:: (mf & WIT_F_PRIMARY) && rp == NONE && repoch > 0 && !MSG_HOLDS(rgen) ->
			/* W1: a free record takes only a node that holds what the
			 * last primary released */
			res = WIT_R_DEPOSED;
			reason = WIT_OLDER_DATA
#ifndef MUT_GRANT_BY_NAME
		:: (mf & WIT_F_PRIMARY) && ((rp == NONE && (repoch == 0 || MSG_HOLDS(rgen))) ||
		                            (rp == n && MSG_HOLDS(rgen))) ->
#else
		:: (mf & WIT_F_PRIMARY) && ((rp == NONE && (repoch == 0 || MSG_HOLDS(rgen))) || rp == n) ->
#endif
#else
		:: (mf & WIT_F_PRIMARY) && (rp == NONE || (rp == n && MSG_HOLDS(rgen))) ->
#endif
			if
			:: rp == NONE ->
				rp = n;
				if
				:: repoch < 3 -> repoch++
				:: else -> skip
				fi
			:: else -> skip
			fi;
			rgen = mg;
			rsync = ((mf & WIT_F_SYNCED) != 0)
		:: !(mf & WIT_F_PRIMARY) && (mf & WIT_F_RELEASE) && rp == n ->
			rp = NONE; /* W2: synced stays, gen is the data it leaves */
#ifndef MUT_W2_KEEP_GEN
			/* W5: only if it holds the recorded gen; a named node
			 * without the recorded data (N13) leaves data that is not
			 * the recorded one: gen and synced stay */
			if
			:: MSG_HOLDS(rgen) -> rgen = mg
			:: else -> skip
			fi;
#endif
			if
			:: repoch < 3 -> repoch++
			:: else -> skip
			fi
		:: else -> skip
		fi;
		printf("W: REPORT of %c: result %d; record %d gen %d synced %d\n", 'A' + n, res, rp,
		       rgen, rsync);
		fw[n]!WIT_REPORT_ACK, res, reason, rp, mf, mtag, rgen
	:: mt == WIT_PING ->
		fw[n]!WIT_PONG, WIT_R_OK, WIT_NONE, NONE, 0, mtag, 0
	:: mt == WIT_CLAIM ->
		/* on_claim: pending (in place of an earlier one, never answered
		 * then), and decided at once */
		pend_on[n] = true;
		pend_flags[n] = mf;
		pend_gen[n] = mg;
		pend_h0[n] = mh0;
		pend_h1[n] = mh1;
		pend_h2[n] = mh2;
		pend_h3[n] = mh3;
		pend_tag[n] = mtag;
		claim_outcome(n, outc, reason);
		if
		:: outc != WIT_WAIT -> answer_claim(n, outc, reason)
		:: else -> skip
		fi
	fi;
	mt = 0; mf = 0; mtag = 0; mg = 0; mh0 = 0; mh1 = 0; mh2 = 0; mh3 = 0; res = 0; outc = 0;
	reason = 0
}

/* evaluate (WS3): a pending claim decided again, after a report, a closed
 * session or on a tick. W3.2: a waiting claim is denied after witness-timeout. */
inline wit_decide(n)
{
	claim_outcome(n, outc, reason);
	if
	:: outc != WIT_WAIT -> answer_claim(n, outc, reason)
	:: outc == WIT_WAIT -> answer_claim(n, WIT_DENY, reason) /* witness-timeout */
	fi; /* (waiting on is not taking this step) */
	outc = 0; reason = 0
}

/* ================= the handshake (repl_hs.c handshake_decide) ================= */

/* L6: a primary without a lease that meets a primary peer steps down and
 * gives up its branch, like a deposed one (its connection is the new one) */
inline hs_yield(n)
{
	printf("%c: meets a primary peer without a lease: steps down\n", 'A' + n);
	step_down(n);
	give_up_branch(n);
	if
	:: disk[n] == VOL_UPTODATE || disk[n] == VOL_CONSISTENT -> set_disk(n, VOL_OUTDATED)
	:: else -> skip
	fi
}

inline handshake(hv, hb, isrc)
{
	/* both ends of the last connection have closed: the peer leases it
	 * gave are dropped (L1) */
	lp[A] = false;
	lp[B] = false;
	if
	:: role[A] == VOL_PRIMARY && role[B] == VOL_PRIMARY ->
#ifdef MUT_HS_BOTH_STEP_DOWN
		/* L6 as first stated: every primary without a lease yields */
		hb = !lw[A];
		isrc = !lw[B];
		if
		:: hb -> hs_yield(A)
		:: else -> skip
		fi;
		if
		:: isrc -> hs_yield(B)
		:: else -> skip
		fi;
#else
		/* L6: a primary without a lease yields to a primary holding one
		 * (the witness acknowledged that one as the record's primary);
		 * two without a lease refuse (split brain) until N4 or the
		 * witness settles it: either may hold writes the other lacks */
		if
		:: !lw[A] && lw[B] -> hs_yield(A)
		:: !lw[B] && lw[A] -> hs_yield(B)
		:: else -> skip
		fi;
#endif
		hb = false;
		isrc = false
	:: else -> skip
	fi;
	/* gen_decide (repl_gen.c) from A's side; me_first: "A" sorts first.
	 * Both sides merged the bitmaps: has_bits is either's bits. */
	hb = (bits[A] || bits[B]);
	if
	:: gcur[A] == GEN_NONE && gcur[B] == GEN_NONE -> hv = HS_REFUSE
	:: gcur[A] == GEN_NONE && gcur[B] != GEN_NONE -> hv = HS_TARGET
	:: gcur[A] != GEN_NONE && gcur[B] == GEN_NONE -> hv = HS_SOURCE
	:: gcur[A] != GEN_NONE && gcur[B] != GEN_NONE ->
		if
		:: FROM(B, A) && FROM(A, B) -> hv = HS_REFUSE /* split brain */
		:: FROM(B, A) && !FROM(A, B) -> hv = HS_TARGET
		:: !FROM(B, A) && FROM(A, B) -> hv = HS_SOURCE
		:: !FROM(B, A) && !FROM(A, B) ->
			if
			:: gcur[A] == GEN_EMPTY && gcur[B] != GEN_EMPTY -> hv = HS_TARGET
			:: gcur[B] == GEN_EMPTY && gcur[A] != GEN_EMPTY -> hv = HS_SOURCE
			:: gcur[A] == gcur[B] ->
				if
				:: (disk[A] == VOL_INCONSISTENT) != (disk[B] == VOL_INCONSISTENT) ->
					hv = (disk[A] == VOL_INCONSISTENT -> HS_TARGET : HS_SOURCE)
				:: (disk[A] == VOL_INCONSISTENT) == (disk[B] == VOL_INCONSISTENT) && !hb ->
					hv = HS_EQUAL
				:: (disk[A] == VOL_INCONSISTENT) == (disk[B] == VOL_INCONSISTENT) && hb ->
					/* regions in flight when a node stopped */
					if
					:: role[A] != role[B] -> isrc = (role[A] == VOL_PRIMARY)
					:: role[A] == role[B] && crashed_prim[A] != crashed_prim[B] ->
						isrc = crashed_prim[A]
					:: role[A] == role[B] && crashed_prim[A] == crashed_prim[B] &&
					   STANDING(A) != STANDING(B) ->
						isrc = (STANDING(A) > STANDING(B))
					:: role[A] == role[B] && crashed_prim[A] == crashed_prim[B] &&
					   STANDING(A) == STANDING(B) ->
						isrc = true
					fi;
					hv = (isrc -> HS_SOURCE : HS_TARGET)
				fi
			:: gcur[A] != gcur[B] && !(gcur[A] == GEN_EMPTY || gcur[B] == GEN_EMPTY) ->
				if
				:: gbm[A] != GEN_NONE && gbm[A] == gbm[B] -> hv = HS_REFUSE /* split brain */
				:: !(gbm[A] != GEN_NONE && gbm[A] == gbm[B]) ->
					if
					:: INHIST(A, gcur[B]) && !INHIST(B, gcur[A]) -> hv = HS_SOURCE
					:: INHIST(B, gcur[A]) && !INHIST(A, gcur[B]) -> hv = HS_TARGET
					:: else -> hv = HS_REFUSE /* split brain or unrelated */
					fi
				fi
			fi
		fi
	fi;
	/* an inconsistent copy is never the source (GEN_NO_DATA) */
	if
	:: hv == HS_SOURCE && disk[A] == VOL_INCONSISTENT -> hv = HS_REFUSE
	:: hv == HS_TARGET && disk[B] == VOL_INCONSISTENT -> hv = HS_REFUSE
	:: else -> skip
	fi;
	/* both primary; a primary would become sync target */
	if
	:: role[A] == VOL_PRIMARY && role[B] == VOL_PRIMARY -> hv = HS_REFUSE
	:: else -> skip
	fi;
	if
	:: hv == HS_TARGET && role[A] == VOL_PRIMARY -> hv = HS_REFUSE
	:: hv == HS_SOURCE && role[B] == VOL_PRIMARY -> hv = HS_REFUSE
	:: else -> skip
	fi;
	if
	:: hv == HS_REFUSE -> skip /* conn_refuse; the dialer tries again later */
	:: hv != HS_REFUSE ->
		printf("A-B: connected, verdict %d (0 equal, 1 A source, 2 A target)\n", hv);
		pl = true;
		bits[A] = hb;
		bits[B] = hb;
		/* R14: the crash is settled once both hold to the verdict */
		crashed_prim[A] = false;
		crashed_prim[B] = false;
		if
		:: hv == HS_EQUAL ->
			/* generations and bitmaps say the copies are the same */
			assert(data[A] == data[B]);
			bits[A] = false;
			bits[B] = false;
			if
			:: disk[A] == VOL_OUTDATED || disk[A] == VOL_CONSISTENT -> set_disk(A, VOL_UPTODATE)
			:: else -> skip
			fi;
			if
			:: disk[B] == VOL_OUTDATED || disk[B] == VOL_CONSISTENT -> set_disk(B, VOL_UPTODATE)
			:: else -> skip
			fi;
			rstate[A] = RR_ESTABLISHED;
			rstate[B] = RR_ESTABLISHED
		:: hv == HS_SOURCE ->
			if
			:: disk[A] == VOL_CONSISTENT -> set_disk(A, VOL_UPTODATE)
			:: else -> skip
			fi;
			rstate[A] = RR_SYNCSOURCE;
			set_disk(B, VOL_INCONSISTENT);
			rstate[B] = RR_SYNCTARGET
		:: hv == HS_TARGET ->
			if
			:: disk[B] == VOL_CONSISTENT -> set_disk(B, VOL_UPTODATE)
			:: else -> skip
			fi;
			rstate[B] = RR_SYNCSOURCE;
			set_disk(A, VOL_INCONSISTENT);
			rstate[A] = RR_SYNCTARGET
		fi;
		/* both send STATE after the verdict */
		peer_disk[A] = disk[B];
		peer_disk[B] = disk[A];
		/* the peer may have changed roles while it was away */
		quorum_peer_role(A);
		quorum_peer_role(B)
	fi;
	hv = 0; hb = false; isrc = false
}

/* promote_forced_prepare (repl_admin.c): what --force changes before the
 * role: the resync stopped (the kept consistent image restored: the data a
 * target holds here until its resync ends), the disk declared up to date.
 * N8a: only after the witness granted the claim (admin_granted). fdecl
 * marks it done until the promotion (a check of N8a, not state of C) */
inline force_prepare(n)
{
	if
	:: disk[n] != VOL_UPTODATE || rstate[n] == RR_SYNCTARGET ->
		if
		:: rstate[n] == RR_SYNCTARGET && pl -> link_lost()
		:: else -> skip
		fi;
		set_disk(n, VOL_UPTODATE);
		fdecl[n] = true
	:: else -> skip
	fi
}

/* repl_promote (repl_admin.c), one call of the polled admin command, as
 * `tandemctl primary [--force]` (frc) makes it; tandemctl polls it until it
 * is not -EAGAIN, or gives up (then it is run again or not at all). A poll
 * changes nothing the model tracks but what a call does here (a grant
 * promotes in on_verdict, admin_granted), so each call is one command. */
inline repl_promote(n, f, frc)
{
	if
	:: role[n] == VOL_PRIMARY -> skip /* 0 */
	:: role[n] != VOL_PRIMARY && pl && role[OTHER(n)] == VOL_PRIMARY ->
		skip /* -EBUSY: the peer is primary */
	:: role[n] != VOL_PRIMARY && !(pl && role[OTHER(n)] == VOL_PRIMARY) &&
	   (disk[n] != VOL_UPTODATE || rstate[n] == RR_SYNCTARGET) && !(frc) ->
		skip /* -EPERM: use --force */
	:: role[n] != VOL_PRIMARY && !(pl && role[OTHER(n)] == VOL_PRIMARY) &&
	   ((frc) || (disk[n] == VOL_UPTODATE && rstate[n] != RR_SYNCTARGET)) ->
#ifdef MUT_FORCE_BEFORE_GRANT
		/* the seeded bug (C before N8a): --force changes the node
		 * before it asks the witness */
		if
		:: frc -> force_prepare(n)
		:: else -> skip
		fi;
#endif
		/* N8: through the witness; N8a: nothing changes before the grant */
		if
		:: claim_result[n] == 2 -> claim_result[n] = 0 /* the refusal, told now */
		:: claim_result[n] != 2 && (claim_want[n] != CLAIM_ADMIN || claim_force[n] != (frc)) ->
			claim_want[n] = CLAIM_ADMIN;
			claim_force[n] = (frc);
			drop_claim(n);
			quorum_kick(n, f)
		:: claim_result[n] != 2 && claim_want[n] == CLAIM_ADMIN && claim_force[n] == (frc) ->
			skip /* -EAGAIN: waiting for the witness */
		fi
	fi
}

/* admin_granted, admin_finish (repl_quorum.c): repl_promote's checks again,
 * what --force changes (N8a: only now), then the promotion, at the grant
 * itself. A forced grant that cannot be served releases the record (W2). */
#ifdef MUT_FORCE_BEFORE_GRANT
#define GRANT_FORCE(n) false /* (done before the claim) */
#else
#define GRANT_FORCE(n) claim_force[n]
#endif
inline admin_granted(n, f)
{
	if
	:: role[n] == VOL_PRIMARY -> skip
	:: role[n] != VOL_PRIMARY && ((pl && role[OTHER(n)] == VOL_PRIMARY) ||
	   (!GRANT_FORCE(n) && (disk[n] != VOL_UPTODATE || rstate[n] == RR_SYNCTARGET)) ||
	   !PEER_LEASE_GONE(n)) ->
		claim_result[n] = 2;
		if
		:: GRANT_FORCE(n) ->
			printf("%c: a forced grant not served: releases the record\n", 'A' + n);
			w_release[n] = true;
			quorum_kick(n, f)
		:: else -> skip
		fi
	:: role[n] != VOL_PRIMARY && !(pl && role[OTHER(n)] == VOL_PRIMARY) &&
	   (GRANT_FORCE(n) || (disk[n] == VOL_UPTODATE && rstate[n] != RR_SYNCTARGET)) &&
	   PEER_LEASE_GONE(n) ->
		if
		:: GRANT_FORCE(n) -> force_prepare(n)
		:: else -> skip
		fi;
		promote_now(n)
	fi
}

/* L1: a witness answer that renews the lease (an ok REPORT_ACK of a primary
 * report, a grant, a PONG on a session where the witness acknowledged this
 * node as primary), unless its request was sent before the lease last ran
 * out or the witness dropped the session after answering (TAG_OLD_LEASE) */
inline renew_w(n, tag)
{
	if
#ifdef MUT_LEASE_RECV_ANCHOR
	:: role[n] == VOL_PRIMARY -> lw[n] = true /* the seeded bug: anchored at receipt */
#else
	:: role[n] == VOL_PRIMARY && !((tag) & TAG_OLD_LEASE) -> lw[n] = true
#endif
	:: else -> skip
	fi
}

/* C5: a grant this node does not act on as the answer to its claim (the
 * claim was withdrawn, or it may no longer claim): it promotes if it may;
 * else (as the model found it must be) it keeps the grant: releasing the
 * record (C5 as first stated) loses liveness (README, "Findings") */
inline withdrawn_grant(n, f, tag)
{
	if
	:: role[n] == VOL_PRIMARY -> skip
#ifndef MUT_DROP_WITHDRAWN_GRANT
	:: role[n] != VOL_PRIMARY && MAY_PROMOTE(n) ->
		printf("%c: a grant of a withdrawn claim: promoted\n", 'A' + n);
		promote_now(n);
		wackp[n] = true;
		renew_w(n, tag)
	:: role[n] != VOL_PRIMARY && !MAY_PROMOTE(n) ->
#else
	:: role[n] != VOL_PRIMARY ->
#endif
#ifdef MUT_RELEASE_WITHDRAWN
		/* C5 as first stated: the record released. Its REPORT races
		 * the peer's (a primary): if the peer's is first, it is deposed
		 * (the record names this node), then the record is free and
		 * no one takes over by itself (liveness) */
		printf("%c: a grant of a withdrawn claim: releases the record\n", 'A' + n);
		w_release[n] = true;
		quorum_kick(n, f)
#else
		/* the record keeps naming this node: a primary peer is deposed
		 * at its next REPORT, and this node, named, takes over (N7) */
		skip
#endif
	fi
}

/* ================= node A, node B ================= */

proctype Node(byte n)
{
	byte o = OTHER(n);
	byte mt, mres, mreason, mprim, mflags, mtag, mrgen; /* a verdict */
	byte pt, parg, pgen;                 /* a peer message */
	byte f, k;
	bool pwp;

end_node:
	do
	/* ---- the witness session (wit_client.c) ---- */
	:: d_step {
		/* dial, HELLO, AUTH: the session is up at both ends */
		!w_up[n] && !cutW[n] ->
		assert(!ws[n]);
		printf("%c: witness session up\n", 'A' + n);
		w_up[n] = true;
		ws[n] = true;
		session_reset_node(n); /* on_session(true) */
		quorum_kick(n, f)
	}
	:: d_step {
		/* the witness closed it (it restarted): the node sees the
		 * socket close, or hears nothing for witness-timeout */
		STALE(n) ->
		printf("%c: notices the witness session is gone\n", 'A' + n);
		w_up[n] = false;
		session_reset_node(n); /* on_session(false) */
		do /* what was still on its way on that socket is gone with it */
		:: fw[n]?_, _, _, _, _, _, _
		:: empty(fw[n]) -> break
		od;
		skip
	}

	/* ---- the lease (L1) ---- */
	/* PING: wit_client.c pings every witness-timeout/4; one that renews is
	 * sent here once the lease ran out (a renewal of a lease still held
	 * changes nothing the model tracks), one at a time */
	:: d_step {
		role[n] == VOL_PRIMARY && w_up[n] && ws[n] && wackp[n] && !lw[n] && (len(tw[n]) < TWCAP) &&
		!(tw[n]??[WIT_PING, _, _, _, _, _, _, _]) && !(fw[n]??[WIT_PONG, _, _, _, _, _, _]) ->
		/* (into a session the witness closed it would change nothing) */
		tw[n]!WIT_PING, 0, 0, 0, 0, 0, 0, 0
	}
	/* the peer's answer on a connection whose peer's last STATE said
	 * secondary (its PING answer, a write's ACK): the same, atomic (no
	 * answer of the peer is in flight once the connection is lost) */
	:: d_step { role[n] == VOL_PRIMARY && pl && role[o] == VOL_SECONDARY && !lp[n] -> lp[n] = true }
	/* the lease runs out (LEASE after the anchor of its last renewal): an
	 * answer to a request sent before renews nothing. Not while both its
	 * sources are live (its witness session at both ends and its peer
	 * connected): the peer lease still holds, and every later event whose
	 * guard reads it (a drop of the session, a lost link) can be ordered
	 * first, so those runs are covered with the expiry taken after */
	:: d_step { lw[n] && !(pl && ws[n]) -> printf("%c: witness lease runs out\n", 'A' + n);
		lw[n] = false; mark_w(n, TAG_OLD_LEASE, false) }
	/* (while connected, the peer renews it continuously) */
	:: d_step { lp[n] && !pl -> printf("%c: peer lease runs out\n", 'A' + n); lp[n] = false }

	/* ---- a read on a primary (vol.c), L4: one step, at the moment it
	 * takes its data ---- */
	:: d_step {
		READS && role[n] == VOL_PRIMARY &&
#ifndef MUT_READ_NO_LEASE
		LEASE(n) &&
#endif
#ifndef MUT_DIRTY_READ
		held[n] == 0 && pendp[n] == 0 && /* a pending write is waited for */
#endif
		(TOP(data[n]) != rtop || TOP(data[n]) < TOP(acked)) ->
		printf("%c: read returns version %d (acknowledged %d, read before %d)\n", 'A' + n,
		       TOP(data[n]), TOP(acked), rtop);
		assert(forced || (TOP(data[n]) >= TOP(acked) && TOP(data[n]) >= rtop)); /* R */
		rtop = TOP(data[n])
	}

	/* ---- quorum_kick (repl_quorum.c), on every event and tick ---- */
	:: d_step { REPORT_NEEDED(n) && (len(tw[n]) < TWCAP) -> send_report(n, f) }
	:: d_step { UNHELD(n) -> quorum_kick(n, f) }
	:: d_step { CLAIM_NEEDED(n) && (len(tw[n]) < TWCAP) -> kick_claim(n, f) }

	/* ---- on_verdict (repl_quorum.c) ---- */
	:: atomic {
		fw[n]?mt, mres, mreason, mprim, mflags, mtag, mrgen ->
		printf("%c: gets %d (7 REPORT_ACK, 9 CLAIM_REPLY) result %d reason %d primary %d\n",
		       'A' + n, mt, mres, mreason, mprim);
		/* Q5: only an answer to a message sent since the last refresh or
		 * release says what the record is now */
		if
		:: mt != WIT_PONG && !(mtag & TAG_STALE) ->
			w_primary[n] = mprim;
			w_rgen[n] = mrgen;
			w_heard[n] = true
		:: else -> skip
		fi;
		if
		:: mt == WIT_PONG ->
			if
			:: wackp[n] -> renew_w(n, mtag) /* L1 */
			:: else -> skip
			fi
		:: mt == WIT_REPORT_ACK ->
			/* the answer to the oldest REPORT in flight (FIFO): N1 counts
			 * it if no REPORT with SYNCED was sent after it */
			if
			:: mflags & WIT_F_SYNCED -> assert(nsync[n] > 0); nsync[n]--
			:: else -> skip
			fi;
			if
			:: mres == WIT_R_DEPOSED ->
				if
				:: role[n] == VOL_PRIMARY && (mprim != NONE || mreason == WIT_OLDER_DATA) ->
					deposed(n) /* N5, W1 */
				:: role[n] == VOL_PRIMARY && mprim == NONE && mreason != WIT_OLDER_DATA ->
					step_down(n)
				:: else -> skip
				fi
			:: mres != WIT_R_DEPOSED ->
				/* a node that stepped down (N4) learns who took over */
				if
				:: role[n] == VOL_SECONDARY && mprim != NONE && mprim != n && !pl ->
					give_up_branch(n)
				:: else -> skip
				fi;
				/* N1 */
				if
				:: (mflags & WIT_F_PRIMARY) && !(mflags & WIT_F_SYNCED) && nsync[n] == 0 &&
				   !(mtag & TAG_OLD_GEN) ->
					alone[n] = true
				:: else -> skip
				fi;
				/* L1: the witness acknowledged this node as the record's
				 * primary on this session */
				if
				:: (mflags & WIT_F_PRIMARY) && role[n] == VOL_PRIMARY ->
					wackp[n] = true;
					renew_w(n, mtag)
				:: else -> skip
				fi;
				if
				:: role[n] == VOL_PRIMARY && ALONE_OK(n) && held[n] != 0 ->
					acked = acked | held[n]; /* the held writes complete */
					printf("%c: held writes %d acknowledged\n", 'A' + n, held[n]);
					held[n] = 0
				:: else -> skip
				fi;
				quorum_kick(n, f)
			fi
		:: mt == WIT_CLAIM_REPLY && !(claim_out[n] && !(mtag & TAG_OLD_CLAIM)) ->
			/* Q4: not the claim in flight. C5: a grant of a claim
			 * withdrawn here (none in flight now) */
			if
			:: mres == WIT_R_OK && !claim_out[n] -> withdrawn_grant(n, f, mtag)
			:: else -> skip
			fi
		:: mt == WIT_CLAIM_REPLY && claim_out[n] && !(mtag & TAG_OLD_CLAIM) ->
			claim_out[n] = false;
			if
			:: mres == WIT_R_OK && claim_want[n] == CLAIM_ADMIN ->
				claim_want[n] = CLAIM_NONE;
#ifndef MUT_ADMIN_LATCH
				admin_granted(n, f);
				if
				:: role[n] == VOL_PRIMARY -> wackp[n] = true; renew_w(n, mtag)
				:: else -> skip
				fi
#else
				/* the seeded bug: the grant is kept for the command's
				 * next call, which may come much later */
				claim_result[n] = 1
#endif
			:: mres == WIT_R_OK && claim_want[n] != CLAIM_ADMIN ->
				claim_want[n] = CLAIM_NONE;
				if
				:: MAY_CLAIM(n) && PEER_LEASE_GONE(n) -> /* N6, N7 */
					promote_now(n);
					wackp[n] = true;
					renew_w(n, mtag)
				:: else -> withdrawn_grant(n, f, mtag) /* Q4, C5 */
				fi
			:: mres != WIT_R_OK && claim_want[n] == CLAIM_ADMIN ->
				/* N8a: a refused claim found the node as it was */
				assert(!fdecl[n]);
				claim_want[n] = CLAIM_NONE;
				claim_result[n] = 2
			:: mres != WIT_R_OK && claim_want[n] != CLAIM_ADMIN ->
				claim_want[n] = CLAIM_NONE;
				/* N6: a node known to lack writes never claims again by itself */
				if
				:: (mreason == WIT_NOT_SYNCED || mreason == WIT_OLDER_DATA) &&
				   (disk[n] == VOL_UPTODATE || disk[n] == VOL_CONSISTENT) && mprim != n ->
					set_disk(n, VOL_OUTDATED)
				:: else -> skip
				fi
			fi
		fi;
		mt = 0; mres = 0; mreason = 0; mprim = 0; mflags = 0; mtag = 0; mrgen = 0
	}

	/* ---- a client write on a primary (repl_write.c fg_go, fg_finish) ---- */
	:: d_step {
		MAY_WRITE(n) && role[n] == VOL_PRIMARY && LEASE(n) && nw < MAXW &&
		(!pl || (len(pc[o]) < PCCAP)) -> /* L5: only with a lease */
		k = 1 << nw;
		printf("%c: client write %d (to the peer %d)\n", 'A' + n, k, pl);
		nw++;
		data[n] = data[n] | k;
		al[n] = true;
		if
		:: pl ->
			pc[o]!REPL_WRITE, k, 0;
			pendp[n] = pendp[n] | k
		:: else ->
			gen_branch(n); /* the first write without the peer */
			bits[n] = true;
			/* quorum_hold (Q1): N1, or the write waits */
			if
			:: ALONE_OK(n) -> acked = acked | k; printf("%c: acknowledged alone\n", 'A' + n)
			:: else -> held[n] = held[n] | k
			fi
		fi;
		k = 0
	}

	/* ---- the peer link: data, acknowledgements, end of resync ---- */
	:: d_step {
		pc[n]?[REPL_WRITE, _, _] && (len(pc[o]) < PCCAP) ->
		pc[n]?pt, parg, pgen;
		assert(role[n] != VOL_PRIMARY); /* R6 */
		data[n] = data[n] | parg;
		al[n] = true;
		pc[o]!REPL_ACK, parg, 0;
		pt = 0; parg = 0; pgen = 0
	}
	:: d_step {
		pc[n]?[REPL_ACK, _, _] ->
		pc[n]?pt, parg, pgen;
		assert(role[n] == VOL_PRIMARY);
		pendp[n] = pendp[n] & (~parg);
		acked = acked | parg; /* the peer has it: the write completes */
		printf("%c: write %d acknowledged by the peer\n", 'A' + n, parg);
		pt = 0; parg = 0; pgen = 0
	}
	:: d_step {
		/* rs_done_flushed (repl_sync.c): the target adopts the source's generation */
		pc[n]?[REPL_RS_DONE, _, _] ->
		pc[n]?pt, parg, pgen;
		assert(rstate[n] == RR_SYNCTARGET);
		printf("%c: resync done, gen %d data %d\n", 'A' + n, pgen, parg);
		if
		:: pgen != gcur[n] -> push_hist(n, gcur[n])
		:: else -> skip
		fi;
		gcur[n] = pgen;
		gbm[n] = GEN_NONE;
		bits[n] = false;
		data[n] = parg; /* every region copied from the source */
		/* R13: as current as the source (outdated if it was) */
#ifdef MUT_RS_DONE_UPTODATE
		set_disk(n, VOL_UPTODATE);
#else
		if
		:: peer_disk[n] == VOL_OUTDATED -> set_disk(n, VOL_OUTDATED)
		:: else -> set_disk(n, VOL_UPTODATE)
		fi;
#endif
		rstate[n] = RR_ESTABLISHED;
		pt = 0; parg = 0; pgen = 0
	}
	:: d_step {
		/* rs_finish (repl_sync.c): the source copied every marked region */
		rstate[n] == RR_SYNCSOURCE && pl && (len(pc[o]) < PCCAP) ->
		push_hist(n, gbm[n]);
		gbm[n] = GEN_NONE;
		bits[n] = false;
		rstate[n] = RR_ESTABLISHED;
		peer_disk[n] = (disk[n] == VOL_OUTDATED -> VOL_OUTDATED : VOL_UPTODATE); /* R13 */
		pc[o]!REPL_RS_DONE, data[n], gcur[n]
	}

	/* ---- quorum_tick (repl_quorum.c) ---- */
	:: d_step {
		/* N4: quorum-timeout without the peer and without the witness */
		role[n] == VOL_PRIMARY && !pl && !w_up[n] -> printf("%c: no quorum\n", 'A' + n);
		step_down(n)
	}

	/* ---- the operator (repl_admin.c), N8 ---- */
	:: d_step {
		/* `tandemctl primary` (and the second half of `switchover`) */
		OP_PRIMARY && MAY_OP(n) && ops < MAXOPS && role[n] == VOL_SECONDARY ->
		ops++;
		printf("%c: operator: primary\n", 'A' + n);
		repl_promote(n, f, false)
	}
	:: d_step {
		/* `tandemctl primary --force` */
		OP_FORCE && MAY_OP(n) && ops < MAXOPS && role[n] == VOL_SECONDARY ->
		ops++;
		printf("%c: operator: primary --force\n", 'A' + n);
		forced = true;
		repl_promote(n, f, true)
	}
#ifdef MUT_ADMIN_LATCH
	/* tandemctl's later call of the same command, on the grant kept */
	:: d_step {
		claim_result[n] == 1 && role[n] == VOL_SECONDARY ->
		printf("%c: tandemctl polls: promoted on the grant kept\n", 'A' + n);
		claim_result[n] = 0;
		promote_now(n)
	}
#endif
	:: d_step {
		/* `tandemctl secondary` or the first half of `switchover`:
		 * repl_demote, once no write is in flight and, with the peer
		 * connected, R11: both nodes flushed */
		OP_DEMOTE && MAY_OP(n) && ops < MAXOPS && role[n] == VOL_PRIMARY && held[n] == 0 &&
		pendp[n] == 0 && (!pl || (len(pc[n]) == 0 && len(pc[o]) == 0)) ->
		ops++;
		printf("%c: operator: secondary\n", 'A' + n);
		if
		:: pl && rstate[n] == RR_ESTABLISHED && rstate[o] == RR_ESTABLISHED ->
			assert(data[n] == data[o]);
			al[n] = false;
			al[o] = false
		:: else -> skip
		fi;
		mdprim[n] = false;
		role[n] = VOL_SECONDARY;
		lw[n] = false; /* L5: a secondary holds no lease */
		lp[n] = false;
		w_release[n] = true; /* W2: an orderly demotion */
		if
		:: pl -> quorum_peer_role(o) /* send_state */
		:: else -> skip
		fi;
		quorum_kick(n, f)
	}

	/* ---- this node crashes and starts again; I1: or starts with empty
	 * metadata (its data directory wiped: a new disk, a new host with the
	 * same name) ---- */
	:: atomic {
		NODE_CRASH && faults < MAXF ->
		faults++;
		if
		:: pwp = false
		:: WIPE -> pwp = true
		fi;
		k = pwp; /* wipe */
		printf("%c: crash and restart (wiped %d)\n", 'A' + n, k);
		/* the peer sees the connection close, and drops the peer lease it
		 * held; this node's leases go with its process */
		lw[n] = false;
		lp[n] = false;
		if
		:: pl ->
			lp[o] = false;
			pl = false;
			flush_pc();
			pwp = (role[n] == VOL_PRIMARY);
			conn_lost(o, pwp);
			pwp = false
		:: else -> skip
		fi;
		/* the witness sees the socket close at once */
		session_lost_wit(n);
		w_up[n] = false;
		session_reset_node(n);
		/* vol_open: every node starts secondary (N7); the disk as the
		 * metadata says, up to date only as consistent (R9) */
		crashed_prim[n] = mdprim[n];
		mdprim[n] = false;
		role[n] = VOL_SECONDARY;
		if
		:: disk[n] == VOL_UPTODATE -> disk[n] = VOL_CONSISTENT
		:: else -> skip
		fi;
		bits[n] = (bits[n] || al[n]); /* bm_open(crashed): the activity log is out of sync */
		rstate[n] = RR_OFF;
		peer_disk[n] = VOL_INCONSISTENT;
		pendp[n] = 0;
		held[n] = 0; /* never acknowledged */
		claim_want[n] = CLAIM_NONE;
		claim_result[n] = 0;
		claim_force[n] = false; /* (tandemctl gets an error) */
		w_release[n] = false;
		if
		:: k ->
			/* I1: empty metadata: secondary, inconsistent, gen EMPTY,
			 * no history, no bitmap, no data */
			wiped = wiped | (1 << n);
			gcur[n] = GEN_EMPTY;
			gbm[n] = GEN_NONE;
			gh0[n] = 0;
			gh1[n] = 0;
			gh2[n] = 0;
			gh3[n] = 0;
			bits[n] = false;
			al[n] = false;
			crashed_prim[n] = false;
			data[n] = 0;
			disk[n] = VOL_INCONSISTENT
		:: else -> skip
		fi;
		k = 0
	}
	od
}

/* ================= the witness ================= */

proctype Witness()
{
	byte mt, mf, mtag, mg, mh0, mh1, mh2, mh3, res, outc, reason;

end_witness:
	do
	/* W4: one message at a time, in the order they arrive */
	:: d_step { (len(tw[A]) > 0) && (len(fw[A]) < FWCAP) ->
		tw[A]?mt, mf, mtag, mg, mh0, mh1, mh2, mh3; wit_handle(A) }
	:: d_step { (len(tw[B]) > 0) && (len(fw[B]) < FWCAP) ->
		tw[B]?mt, mf, mtag, mg, mh0, mh1, mh2, mh3; wit_handle(B) }
	/* evaluate: a pending claim decided again */
	:: d_step { pend_on[A] && (len(fw[A]) < FWCAP) -> wit_decide(A) }
	:: d_step { pend_on[B] && (len(fw[B]) < FWCAP) -> wit_decide(B) }
	/* W3.3: the grace ends witness-timeout after the start; by then no
	 * node still believes in a session from before the restart (it would
	 * have heard nothing for witness-timeout), and every lease renewed on
	 * one has run out (anchored before the restart) */
	:: d_step { grace && !STALE(A) && !STALE(B) && !(lw[A] && !ws[A]) && !(lw[B] && !ws[B]) ->
		grace = false; printf("W: grace over\n") }
	/* the witness's end of a session ends, the node's stays up (wdrop_flush) */
	:: d_step { WDROP && faults < MAXF && ws[A] -> faults++; printf("W: drops A's session\n");
		wdrop_flush(A); mark_w(A, TAG_OLD_LEASE, false) }
	:: d_step { WDROP && faults < MAXF && ws[B] -> faults++; printf("W: drops B's session\n");
		wdrop_flush(B); mark_w(B, TAG_OLD_LEASE, false) }
	/* the witness crashes and starts again: the record is what the state
	 * file holds; every session is gone (the nodes notice: STALE) */
	:: d_step {
		WITNESS_CRASH && faults < MAXF ->
		faults++;
		printf("W: crash and restart\n");
		session_lost_wit(A);
		session_lost_wit(B);
		grace = true;
#ifdef MUT_NO_PERSIST
		rp = NONE;
		rgen = 0;
		rsync = false;
		repoch = 0;
#endif
		skip
	}
	od
}

/* ================= the network ================= */

proctype Env()
{
	byte hv, f;
	bool hb, isrc;

end_env:
	do
	/* the dialer connects: HELLO, AUTH, STATE, BITMAP, the verdict */
	:: d_step { !pl && !cutAB -> handshake(hv, hb, isrc) }
	/* the activity log's cleaner: a flush on both nodes, then the extents go */
	:: d_step {
		pl && rstate[A] == RR_ESTABLISHED && rstate[B] == RR_ESTABLISHED && (al[A] || al[B]) &&
		pendp[A] == 0 && pendp[B] == 0 && len(pc[A]) == 0 && len(pc[B]) == 0 ->
		assert(data[A] == data[B]);
		al[A] = false;
		al[B] = false
	}
	/* the A-B link is cut: both ends lose the connection */
	:: d_step { CUT_AB && faults < MAXF && !cutAB -> faults++; cutAB = true; printf("cut A-B\n");
		if
		:: pl -> link_lost()
		:: else -> skip
		fi }
	/* a node's link to the witness is cut: both ends see the session die */
	:: d_step { CUT_W && faults < MAXF && !cutW[A] -> faults++; cutW[A] = true; printf("cut A-W\n");
		session_lost_wit(A); w_up[A] = false; session_reset_node(A) }
	:: d_step { CUT_W && faults < MAXF && !cutW[B] -> faults++; cutW[B] = true; printf("cut B-W\n");
		session_lost_wit(B); w_up[B] = false; session_reset_node(B) }
	/* a node is cut off from both */
	:: d_step { ISOLATE && faults < MAXF && !cutAB && !cutW[A] -> faults++; cutAB = true; cutW[A] = true;
		printf("A cut off\n");
		if
		:: pl -> link_lost()
		:: else -> skip
		fi;
		session_lost_wit(A); w_up[A] = false; session_reset_node(A) }
	:: d_step { ISOLATE && faults < MAXF && !cutAB && !cutW[B] -> faults++; cutAB = true; cutW[B] = true;
		printf("B cut off\n");
		if
		:: pl -> link_lost()
		:: else -> skip
		fi;
		session_lost_wit(B); w_up[B] = false; session_reset_node(B) }
	/* the partitions heal */
	:: d_step { cutAB -> cutAB = false; printf("A-B heals\n") }
	:: d_step { cutW[A] -> cutW[A] = false; printf("A-W heals\n") }
	:: d_step { cutW[B] -> cutW[B] = false; printf("B-W heals\n") }
#ifdef MSG_LOSS
	/* a message lost while its link stays up (more than TCP does: there a
	 * loss ends the connection, which the cuts above model) */
	:: d_step { faults < MAXF && (len(tw[A]) > 0) -> faults++; tw[A]?_, _, _, _, _, _, _, _;
		printf("lost: a message A -> W\n") }
	:: d_step { faults < MAXF && (len(tw[B]) > 0) -> faults++; tw[B]?_, _, _, _, _, _, _, _;
		printf("lost: a message B -> W\n") }
	:: d_step { faults < MAXF && (len(fw[A]) > 0) -> faults++; fw[A]?_, _, _, _, _, _, _;
		printf("lost: a message W -> A\n") }
	:: d_step { faults < MAXF && (len(fw[B]) > 0) -> faults++; fw[B]?_, _, _, _, _, _, _;
		printf("lost: a message W -> B\n") }
	:: d_step { faults < MAXF && (len(pc[A]) > 0) -> faults++; pc[A]?_, _, _;
		printf("lost: a message B -> A\n") }
	:: d_step { faults < MAXF && (len(pc[B]) > 0) -> faults++; pc[B]?_, _, _;
		printf("lost: a message A -> B\n") }
#endif
	od
}

/* ================= the properties ================= */

#define P1 (!(ACCEPTING(A) && ACCEPTING(B)))
#define P2 (forced || ((!ACCEPTING(A) || HOLDS_ALL(A)) && (!ACCEPTING(B) || HOLDS_ALL(B))))
#define P4 (forced || wiped != 0 || (acked & ~(data[A] | data[B])) == 0)

proctype Monitor()
{
end_monitor:
	d_step { !(P1 && P2 && P4) -> assert(P1 && P2 && P4) }
}

#ifdef LIVENESS
/* Liveness: once no link is cut any more (faults are bounded, so crashes
 * end too), some node is primary from some point on. Checked with weak
 * fairness (spin -a -f): a process that can always move eventually moves. */
#define STABLE (!cutAB && !cutW[A] && !cutW[B])
#define SOME_PRIMARY (role[A] == VOL_PRIMARY || role[B] == VOL_PRIMARY)
ltl live { (<>[] STABLE) -> (<>[] SOME_PRIMARY) }
/* time goes on when every other process is blocked: a state where no one
 * can move is a run that stays there (pan's stutter extension is not taken
 * under -f), a process of its own so that it starves no other step */
bool tick;
proctype Clock()
{
end_clock:
	do
	:: tick = !tick
	od
}
#endif

#ifdef PROBE
/* Reachability: spin reports a "violation" when the state can be reached,
 * which shows that the properties above are not met vacuously. */
#if PROBE == 1
/* A acknowledges writes alone (N1) */
#define PROBE_STATE (acked != 0 && !pl && role[A] == VOL_PRIMARY && ALONE_OK(A))
#elif PROBE == 2
/* B took over after acknowledged writes, and acknowledges writes itself */
#define PROBE_STATE (acked != 0 && role[B] == VOL_PRIMARY && ACCEPTING(B))
#elif PROBE == 3
/* a claim of B waits while the record names A (W3.2) */
#define PROBE_STATE (pend_on[B] && rp == A)
#elif PROBE == 4
/* A is the sync target of a new primary B */
#define PROBE_STATE (rstate[A] == RR_SYNCTARGET && role[B] == VOL_PRIMARY)
#elif PROBE == 5
/* A acknowledges alone on a session the restarted witness no longer has */
#define PROBE_STATE (STALE(A) && ALONE_OK(A) && role[A] == VOL_PRIMARY)
#elif PROBE == 6
/* B took over and a read there returns the write it acknowledged */
#define PROBE_STATE (role[B] == VOL_PRIMARY && LEASE(B) && acked != 0 && rtop == TOP(acked) && \
	rtop == TOP(data[B]))
#elif PROBE == 7
/* B wants to claim and waits for A's peer lease to run out (L3) */
#define PROBE_STATE (!pl && claim_want[B] != CLAIM_NONE && !claim_out[B] && lp[A] && \
	role[A] == VOL_PRIMARY)
#elif PROBE == 8
/* A, wiped, is primary again after a full sync from B (I1) */
#define PROBE_STATE ((wiped & 1) && role[A] == VOL_PRIMARY && HOLDS_ALL(A))
#elif PROBE == 9
/* a wiped named node releases the record (N13): asserted in release_unheld */
#define PROBE_STATE false
#else
#define PROBE_STATE false
#endif
proctype Probe()
{
end_probe:
	atomic { PROBE_STATE -> assert(false) }
}
#endif

/* ================= the start ================= */

init {
	atomic {
		/* A is primary, connected and in sync with B at generation 2; the
		 * witness's record says so; the sessions are still to be dialled */
		gcur[A] = 2;
		gcur[B] = 2;
		role[A] = VOL_PRIMARY;
		mdprim[A] = true;
		disk[A] = VOL_UPTODATE;
		disk[B] = VOL_UPTODATE;
		pl = true;
		rstate[A] = RR_ESTABLISHED;
		rstate[B] = RR_ESTABLISHED;
		peer_disk[A] = VOL_UPTODATE;
		peer_disk[B] = VOL_UPTODATE;
		w_primary[A] = NONE;
		w_primary[B] = NONE;
		rp = A;
		rgen = 2;
		rsync = true;
		repoch = 1;
		lp[A] = true; /* B's last STATE said secondary */
#ifndef COLD_START
		/* both sessions up, each node's last REPORT answered */
		w_up[A] = true;
		w_up[B] = true;
		ws[A] = true;
		ws[B] = true;
		rep_valid[A] = true;
		rep_flags[A] = WIT_F_PRIMARY | WIT_F_SYNCED;
		rep_gen[A] = 2;
		rep_valid[B] = true;
		rep_flags[B] = 0;
		rep_gen[B] = 2;
		w_heard[A] = true;
		w_heard[B] = true;
		w_primary[A] = A;
		w_primary[B] = A;
		w_rgen[A] = 2;
		w_rgen[B] = 2;
		wackp[A] = true;
		lw[A] = true;
#endif
		run Monitor();
#ifdef LIVENESS
		run Clock();
#endif
#ifdef PROBE
		run Probe();
#endif
		run Witness();
		run Env();
		run Node(A);
		run Node(B)
	}
}
