/* Generation identifiers: the decision table of repl_gen.h, and the
 * handshake's decision built on it. */
#include "repl_gen.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool in_history(const struct gen_view *v, uint64_t g)
{
	if (g <= GEN_EMPTY)
		return false;
	for (int i = 0; i < GEN_HISTORY; i++)
		if (v->history[i] == g)
			return true;
	return false;
}

/* A generation both sides share in their past (bitmap or history). */
static bool common_ancestor(const struct gen_view *a, const struct gen_view *b)
{
	uint64_t ga[GEN_HISTORY + 1];
	ga[0] = a->bitmap;
	for (int i = 0; i < GEN_HISTORY; i++)
		ga[i + 1] = a->history[i];
	for (int i = 0; i <= GEN_HISTORY; i++) {
		if (ga[i] <= GEN_EMPTY)
			continue;
		if (ga[i] == b->bitmap || in_history(b, ga[i]))
			return true;
	}
	return false;
}

static struct gen_decision decide(const struct gen_view *me, const struct gen_view *peer,
				  bool me_first);

/* How much a consistent side is known to hold: up to date (kept up with its
 * primary), unverified (restarted since: whatever it held then), outdated
 * (known to have lost its primary). Persisted "up to date" flags of a node
 * that restarted are never read as more than unverified. */
static int standing(const struct gen_view *v)
{
	return v->outdated ? 0 : v->unverified ? 1 : 2;
}

struct gen_decision gen_decide(const struct gen_view *me, const struct gen_view *peer,
			       bool me_first)
{
	struct gen_decision d = decide(me, peer, me_first);

	if ((d.verdict == GEN_SOURCE && me->inconsistent) ||
	    (d.verdict == GEN_TARGET && peer->inconsistent)) {
		d.verdict = GEN_NO_DATA;
		d.full = false;
		d.rule = 20;
	}
	return d;
}

static struct gen_decision decide(const struct gen_view *me, const struct gen_view *peer,
				  bool me_first)
{
	struct gen_decision d = { GEN_UNRELATED, false, 0 };

	bool peer_from_me, me_from_peer;

	if (me->current == GEN_NONE && peer->current == GEN_NONE) {
		d.verdict = GEN_NO_DATA;
		d.rule = 1;
		return d;
	}
	if (me->current == GEN_NONE) {
		d.verdict = GEN_TARGET;
		d.full = true;
		d.rule = 2;
		return d;
	}
	if (peer->current == GEN_NONE) {
		d.verdict = GEN_SOURCE;
		d.full = true;
		d.rule = 3;
		return d;
	}
	/* One side branched from what the other holds (also from "empty"). */
	peer_from_me = peer->bitmap != GEN_NONE && peer->bitmap == me->current;
	me_from_peer = me->bitmap != GEN_NONE && me->bitmap == peer->current;
	if (peer_from_me && me_from_peer) {
		d.verdict = GEN_SPLIT_BRAIN; /* each claims to descend from the other */
		d.rule = 4;
		return d;
	}
	if (peer_from_me) {
		d.verdict = GEN_TARGET;
		d.rule = 5;
		return d;
	}
	if (me_from_peer) {
		d.verdict = GEN_SOURCE;
		d.rule = 6;
		return d;
	}
	if (me->current == GEN_EMPTY && peer->current != GEN_EMPTY) {
		d.verdict = GEN_TARGET;
		d.full = true;
		d.rule = 7;
		return d;
	}
	if (peer->current == GEN_EMPTY && me->current != GEN_EMPTY) {
		d.verdict = GEN_SOURCE;
		d.full = true;
		d.rule = 8;
		return d;
	}
	if (me->current == peer->current) {
		bool i_src;
		if (me->inconsistent != peer->inconsistent) {
			/* An interrupted sync: the consistent side's data, by the
			 * bitmaps if there are any, else all of it. */
			d.verdict = me->inconsistent ? GEN_TARGET : GEN_SOURCE;
			d.full = !me->has_bits && !peer->has_bits;
			d.rule = 9;
			return d;
		}
		if (!me->has_bits && !peer->has_bits) {
			d.verdict = GEN_EQUAL;
			d.rule = 10;
			return d;
		}
		/* Same generation, but writes were in flight when one side
		 * stopped: copy those regions from the side that was writing. */
		if (me->primary != peer->primary) {
			i_src = me->primary;
			d.rule = 11;
		} else if (me->crashed_primary != peer->crashed_primary) {
			i_src = me->crashed_primary;
			d.rule = 12;
		} else if (standing(me) != standing(peer)) {
			i_src = standing(me) > standing(peer);
			d.rule = 13;
		} else {
			i_src = me_first;
			d.rule = 14;
		}
		d.verdict = i_src ? GEN_SOURCE : GEN_TARGET;
		return d;
	}
	if (me->bitmap != GEN_NONE && me->bitmap == peer->bitmap) {
		d.verdict = GEN_SPLIT_BRAIN;
		d.rule = 15;
		return d;
	}
	if (in_history(me, peer->current) && !in_history(peer, me->current)) {
		d.verdict = GEN_SOURCE;
		d.full = true;
		d.rule = 16;
		return d;
	}
	if (in_history(peer, me->current) && !in_history(me, peer->current)) {
		d.verdict = GEN_TARGET;
		d.full = true;
		d.rule = 17;
		return d;
	}
	d.verdict = common_ancestor(me, peer) ? GEN_SPLIT_BRAIN : GEN_UNRELATED;
	d.rule = d.verdict == GEN_SPLIT_BRAIN ? 18 : 19;
	return d;
}

/* A disk that takes I/O and holds a consistent image or is being filled:
 * what a primary must not lose to a resync. */
static bool disk_usable(enum vol_disk d)
{
	return !vol_disk_gone(d) && d != VOL_INCONSISTENT;
}

static struct hs_decision refuse(struct hs_decision d, int rule, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static struct hs_decision refuse(struct hs_decision d, int rule, const char *fmt, ...)
{
	va_list ap;

	d.action = HS_REFUSE;
	d.rule = rule;
	va_start(ap, fmt);
	vsnprintf(d.reason, sizeof(d.reason), fmt, ap);
	va_end(ap);
	return d;
}

/* The handshake's table, first matching row wins; H11..H24 say what the
 * connection runs as, the rows marked "+" only add to it. "Usable disk":
 * not gone (failed, diskless) and not inconsistent (being filled).
 *
 *   H1  sizes differ                                  -> REFUSE
 *   H2  bitmap granularities differ                   -> REFUSE
 *   H3  both primary, this one without its lease, the
 *       peer with one (L6)                            -> YIELD (as if deposed)
 *   H4  both primary, this one with its lease, the
 *       peer without (L6)                             -> PEER_STEPS_DOWN
 *   H5  both primary otherwise                        -> REFUSE, split brain
 *   H6  gen_decide: SPLIT_BRAIN (G4, G15, G18)        -> REFUSE, split brain
 *   H7  gen_decide: UNRELATED (G19)                   -> REFUSE
 *   H8  gen_decide: NO_DATA (G1, G20)                 -> REFUSE
 *   H9  TARGET, and this primary has a usable disk    -> REFUSE (demote first)
 *   H10 SOURCE, and the peer is a primary with a
 *       usable disk                                   -> REFUSE (demote it)
 *   H11 EQUAL                                         -> ESTABLISHED, gen_rotate
 *   H12  + EQUAL: the marks are cleared, unless a disk
 *         is gone on either side, this primary pulls,
 *         or the peer is a primary being filled      (they say what it lacks)
 *   H13  + EQUAL: an outdated or unverified disk      -> uptodate
 *   H14  + EQUAL: both created empty, this disk
 *         inconsistent (I2: the same zeros)          -> uptodate
 *   H15 SOURCE, this disk gone (D2)                   -> ESTABLISHED, warning
 *   H16  + SOURCE: an unverified disk                 -> uptodate
 *   H17  + SOURCE: an outdated disk, the peer a primary
 *         with the same current whose disk is gone or
 *         being filled (D2, P3: it wrote nothing)    -> uptodate
 *   H18 SOURCE, the peer a primary whose disk is not
 *       gone (P3: it pulls)                           -> ESTABLISHED
 *   H19 SOURCE, the peer's disk gone (F1)             -> ESTABLISHED, warning
 *   H20 SOURCE otherwise                              -> SYNC_SOURCE
 *   H21 TARGET, the peer's disk gone (D2)             -> ESTABLISHED, warning
 *   H22 TARGET, this a primary whose disk is not gone
 *       (P3)                                          -> ESTABLISHED, pull
 *                                                        unless one runs
 *   H23 TARGET, this disk gone (F1)                   -> ESTABLISHED, warning
 *   H24 TARGET otherwise                              -> SYNC_TARGET, this disk
 *                                                        inconsistent; kept
 *                                                        copy: none if nothing
 *                                                        is marked, taken if
 *                                                        consistent (CP1), else
 *                                                        cp_none
 *   H25  + a new pair (I2): this is the first node, neither is primary, the
 *         peer holds no data written (current 0 or 1) and this one neither,
 *         or only what was on its disk when its metadata was made (SOURCE)
 *                                                     -> new_pair_promote
 *   (SOURCE and TARGET, except H15: a full decision marks everything; the
 *   bitmap is flushed.)
 *
 * H15 and H21 cannot be reached from real STATEs: a gone disk is never
 * consistent (REPL_ST_CONSISTENT), so G20 made that verdict NO_DATA. */
struct hs_decision hs_decide(const struct hs_input *in)
{
	const struct hs_side *me = &in->me, *peer = &in->peer;
	struct hs_decision d;

	memset(&d, 0, sizeof(d));
	if (peer->size != me->size)
		return refuse(d, 1, "volume sizes differ: %llu here, %llu on %s",
			      (unsigned long long)me->size, (unsigned long long)peer->size,
			      in->peer_node);
	if (peer->bm_granularity != me->bm_granularity)
		return refuse(d, 2, "bitmap granularities differ: %u here, %u on %s",
			      me->bm_granularity, peer->bm_granularity, in->peer_node);
	if (me->gen.primary && peer->gen.primary) {
		/* L6: a primary without its lease meets one that has it (made
		 * primary by the witness while this one was cut off or paused):
		 * it yields, as if deposed, and no split brain is declared. */
		if (!me->lease && peer->lease) {
			d.action = HS_YIELD;
			d.rule = 3;
			snprintf(d.reason, sizeof(d.reason),
				 "%s is primary and this node has no lease", in->peer_node);
			return d;
		}
		if (me->lease && !peer->lease) {
			d.action = HS_PEER_STEPS_DOWN;
			d.rule = 4;
			snprintf(d.reason, sizeof(d.reason),
				 "%s is primary without a lease; it steps down", in->peer_node);
			return d;
		}
		d.split_brain = true;
		return refuse(d, 5, "split brain: both nodes are primary");
	}
	d.gen = gen_decide(&me->gen, &peer->gen, in->me_first);
	switch (d.gen.verdict) {
	case GEN_SPLIT_BRAIN:
		d.split_brain = true;
		return refuse(
			d, 6,
			"split brain: both nodes wrote independently since generation "
			"%016llx; run `tandemctl invalidate %s` on the node whose changes are "
			"to be discarded",
			(unsigned long long)(me->gen.bitmap ? me->gen.bitmap : me->gen.history[0]),
			in->volume);
	case GEN_UNRELATED:
		return refuse(d, 7,
			      "unrelated data: generations %016llx here and %016llx on %s share no "
			      "history",
			      (unsigned long long)me->gen.current,
			      (unsigned long long)peer->gen.current, in->peer_node);
	case GEN_NO_DATA:
		return refuse(d, 8,
			      "no consistent copy to resync from (the node with the newer data is "
			      "inconsistent or neither has data)");
	case GEN_TARGET:
		/* P3: a primary whose disk is gone or being filled takes
		 * nothing from a resync; it reads through the peer and pulls */
		if (me->gen.primary && disk_usable(me->disk))
			return refuse(
				d, 9,
				"this primary would become sync target of %s; demote it first",
				in->peer_node);
		break;
	case GEN_SOURCE:
		if (peer->gen.primary && disk_usable(peer->disk))
			return refuse(d, 10, "primary %s would become sync target; demote it first",
				      in->peer_node);
		break;
	case GEN_EQUAL: break;
	}
	d.action = HS_CONNECT;
	d.run = HS_ESTABLISHED;
	switch (d.gen.verdict) {
	case GEN_EQUAL:
		d.rule = 11;
		/* (marks of a disk that is gone or being filled stay: they
		 * say what it lacks) */
		d.clear_marks = !vol_disk_gone(me->disk) && !vol_disk_gone(peer->disk) &&
				!in->pulling &&
				!(peer->gen.primary && peer->disk == VOL_INCONSISTENT);
		d.uptodate = me->disk == VOL_OUTDATED || me->disk == VOL_CONSISTENT ||
			     (me->gen.current == GEN_EMPTY && peer->gen.current == GEN_EMPTY &&
			      me->disk == VOL_INCONSISTENT);
		d.rotate = true;
		break;
	case GEN_SOURCE:
		if (vol_disk_gone(me->disk)) {
			d.rule = 15;
			d.note_warn = true;
			snprintf(
				d.reason, sizeof(d.reason),
				"this copy is newer than %s's, but its disk is %s: no resync; what "
				"only it held is lost",
				in->peer_node, vol_disk_name(me->disk));
			break;
		}
		/* The peer's copy is older than this one: nothing newer
		 * exists. D2, P3: a primary that kept the generation (its disk
		 * is gone or being filled: it wrote nothing alone) left this
		 * copy with everything; outdated only said it might not. */
		d.uptodate = me->disk == VOL_CONSISTENT ||
			     (me->disk == VOL_OUTDATED && peer->gen.primary &&
			      me->gen.current == peer->gen.current &&
			      (vol_disk_gone(peer->disk) || peer->disk == VOL_INCONSISTENT));
		d.mark_all = d.gen.full;
		d.flush = true;
		if (peer->gen.primary && !vol_disk_gone(peer->disk)) {
			d.rule = 18;
			snprintf(d.reason, sizeof(d.reason), "%s fills its disk from this copy",
				 in->peer_node);
		} else if (vol_disk_gone(peer->disk)) {
			d.rule = 19;
			d.note_warn = true;
			snprintf(d.reason, sizeof(d.reason),
				 "%s's disk is failed: nothing is copied to it until `tandemctl "
				 "attach` there",
				 in->peer_node);
		} else {
			d.rule = 20;
			d.run = HS_SYNC_SOURCE;
		}
		break;
	case GEN_TARGET:
		d.mark_all = d.gen.full;
		d.flush = true;
		if (vol_disk_gone(peer->disk)) {
			d.rule = 21;
			d.note_warn = true;
			snprintf(d.reason, sizeof(d.reason),
				 "%s's copy is newer, but its disk is %s: no resync", in->peer_node,
				 vol_disk_name(peer->disk));
		} else if (me->gen.primary && !vol_disk_gone(me->disk)) {
			d.rule = 22;
			d.pull = !in->pulling;
		} else if (vol_disk_gone(me->disk)) {
			d.rule = 23;
			d.note_warn = true;
			snprintf(d.reason, sizeof(d.reason),
				 "the disk is failed: no resync from %s onto it until `tandemctl "
				 "attach`",
				 in->peer_node);
		} else {
			d.rule = 24;
			d.run = HS_SYNC_TARGET;
			/* after mark_all, everything of a volume (never empty) is marked */
			if (!d.gen.full && !in->oos)
				d.kept = HS_KEPT_NO_SYNC;
			else if (!me->gen.inconsistent) /* REPL_ST_CONSISTENT */
				d.kept = HS_KEPT_TAKE;
			else
				d.kept = HS_KEPT_NONE;
		}
		break;
	default: break;
	}
	d.new_pair = in->first_node && !me->gen.primary && !peer->gen.primary &&
		     peer->gen.current <= GEN_EMPTY &&
		     (me->gen.current == GEN_EMPTY || (in->created && d.gen.verdict == GEN_SOURCE));
	return d;
}

const char *gen_verdict_name(enum gen_verdict v)
{
	switch (v) {
	case GEN_EQUAL: return "equal";
	case GEN_SOURCE: return "source";
	case GEN_TARGET: return "target";
	case GEN_SPLIT_BRAIN: return "split-brain";
	case GEN_UNRELATED: return "unrelated";
	case GEN_NO_DATA: return "no-data";
	}
	return "?";
}

void gen_push_history(uint64_t history[GEN_HISTORY], uint64_t g)
{
	if (g <= GEN_EMPTY || history[0] == g)
		return;
	for (int i = GEN_HISTORY - 1; i > 0; i--)
		history[i] = history[i - 1];
	history[0] = g;
}
