/* Generation identifiers (DRBD's idea): which replica has the newer data.
 * Pure functions, unit-tested.
 *
 * Each replica persists: current (the data generation it holds), bitmap (the
 * generation it held when it started writing without its peer, or 0) and a
 * short history of older generations. Value 0 means "no data" (a new disk of
 * unknown content, or one thrown away by `invalidate`); value 1 means "created
 * empty, never written" and is never part of the ancestry.
 *
 * Transitions:
 *   primary without peer (promotion or peer loss), bitmap == 0:
 *       bitmap = current, current = new            (gen_branch)
 *   first write of a pair created empty, connected:
 *       history += current, current = new, on both (gen_rotate, SET_GEN)
 *   resync done:  source: history += bitmap, bitmap = 0
 *                 target: history += current, current = source's, bitmap = 0
 *   invalidate:   current = 0, bitmap = 0
 */
#ifndef TANDEM_REPL_GEN_H
#define TANDEM_REPL_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "../../include/proto/ondisk.h"

#define GEN_NONE TANDEM_MD_GEN_NONE
#define GEN_EMPTY TANDEM_MD_GEN_EMPTY
#define GEN_HISTORY 4

struct gen_view {
	uint64_t current, bitmap, history[GEN_HISTORY];
	bool primary;         /* primary now */
	bool crashed_primary; /* was primary when it last stopped without a clean shutdown */
	bool has_bits;        /* its change bitmap has bits set */
	bool outdated;        /* consistent, but it lost its primary: may lack writes */
	bool unverified;      /* consistent, started without reaching its peer: not
			       * known to be up to date, nor known to be outdated */
	bool inconsistent;    /* its data is not a consistent image (an interrupted
			       * sync target, a failed disk): never a source */
};

enum gen_verdict {
	GEN_EQUAL,       /* same data, nothing to copy */
	GEN_SOURCE,      /* this side has the newer data: resync to the peer */
	GEN_TARGET,      /* the peer has the newer data */
	GEN_SPLIT_BRAIN, /* both wrote independently since a common generation */
	GEN_UNRELATED,   /* no common history */
	GEN_NO_DATA,     /* neither side has data */
};

struct gen_decision {
	enum gen_verdict verdict;
	bool full; /* SOURCE/TARGET: copy everything, the bitmap does not cover it */
};

/* A side that is inconsistent is never the source: where it would be, the
 * verdict is GEN_NO_DATA (no consistent copy to take). Mirror-symmetric: decide(a, b, x) is SOURCE exactly when decide(b, a, !x)
 * is TARGET. me_first breaks ties (the side whose node name sorts first). */
struct gen_decision gen_decide(const struct gen_view *me, const struct gen_view *peer,
			       bool me_first);
const char *gen_verdict_name(enum gen_verdict v);

void gen_push_history(uint64_t history[GEN_HISTORY], uint64_t g);

#endif
