/* Generation identifiers: the decision table of repl_gen.h. */
#include "repl_gen.h"

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
	}
	return d;
}

static struct gen_decision decide(const struct gen_view *me, const struct gen_view *peer,
				  bool me_first)
{
	struct gen_decision d = { GEN_UNRELATED, false };

	bool peer_from_me, me_from_peer;

	if (me->current == GEN_NONE && peer->current == GEN_NONE) {
		d.verdict = GEN_NO_DATA;
		return d;
	}
	if (me->current == GEN_NONE) {
		d.verdict = GEN_TARGET;
		d.full = true;
		return d;
	}
	if (peer->current == GEN_NONE) {
		d.verdict = GEN_SOURCE;
		d.full = true;
		return d;
	}
	/* One side branched from what the other holds (also from "empty"). */
	peer_from_me = peer->bitmap != GEN_NONE && peer->bitmap == me->current;
	me_from_peer = me->bitmap != GEN_NONE && me->bitmap == peer->current;
	if (peer_from_me && me_from_peer) {
		d.verdict = GEN_SPLIT_BRAIN; /* each claims to descend from the other */
		return d;
	}
	if (peer_from_me) {
		d.verdict = GEN_TARGET;
		return d;
	}
	if (me_from_peer) {
		d.verdict = GEN_SOURCE;
		return d;
	}
	if (me->current == GEN_EMPTY && peer->current != GEN_EMPTY) {
		d.verdict = GEN_TARGET;
		d.full = true;
		return d;
	}
	if (peer->current == GEN_EMPTY && me->current != GEN_EMPTY) {
		d.verdict = GEN_SOURCE;
		d.full = true;
		return d;
	}
	if (me->current == peer->current) {
		bool i_src;
		if (me->inconsistent != peer->inconsistent) {
			/* An interrupted sync: the consistent side's data, by the
			 * bitmaps if there are any, else all of it. */
			d.verdict = me->inconsistent ? GEN_TARGET : GEN_SOURCE;
			d.full = !me->has_bits && !peer->has_bits;
			return d;
		}
		if (!me->has_bits && !peer->has_bits) {
			d.verdict = GEN_EQUAL;
			return d;
		}
		/* Same generation, but writes were in flight when one side
		 * stopped: copy those regions from the side that was writing. */
		if (me->primary != peer->primary)
			i_src = me->primary;
		else if (me->crashed_primary != peer->crashed_primary)
			i_src = me->crashed_primary;
		else if (standing(me) != standing(peer))
			i_src = standing(me) > standing(peer);
		else
			i_src = me_first;
		d.verdict = i_src ? GEN_SOURCE : GEN_TARGET;
		return d;
	}
	if (me->bitmap != GEN_NONE && me->bitmap == peer->bitmap) {
		d.verdict = GEN_SPLIT_BRAIN;
		return d;
	}
	if (in_history(me, peer->current) && !in_history(peer, me->current)) {
		d.verdict = GEN_SOURCE;
		d.full = true;
		return d;
	}
	if (in_history(peer, me->current) && !in_history(me, peer->current)) {
		d.verdict = GEN_TARGET;
		d.full = true;
		return d;
	}
	d.verdict = common_ancestor(me, peer) ? GEN_SPLIT_BRAIN : GEN_UNRELATED;
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
