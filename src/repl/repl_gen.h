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
#include "../vol/vol.h"

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
	int rule;  /* the row of the table below that decided (G1..G20) */
};

/* The table of gen_decide, first matching row wins (0 = GEN_NONE, "no
 * data"; 1 = GEN_EMPTY, "created empty"; "bits": has_bits of either side):
 *
 *   G1  both currents 0                           -> NO_DATA
 *   G2  my current 0                              -> TARGET, full
 *   G3  the peer's current 0                      -> SOURCE, full
 *   G4  peer.bitmap = my current and my bitmap =
 *       peer.current (bitmaps not 0)              -> SPLIT_BRAIN
 *   G5  peer.bitmap = my current (it branched
 *       from what I hold)                         -> TARGET, by the bitmap
 *   G6  my bitmap = peer.current                  -> SOURCE, by the bitmap
 *   G7  my current 1, the peer's not              -> TARGET, full
 *   G8  the peer's current 1, mine not            -> SOURCE, full
 *   G9  same current, exactly one inconsistent    -> the consistent side is
 *                                                    SOURCE; full without bits
 *   G10 same current, no bits                     -> EQUAL
 *   G11 same current, bits, one is primary        -> the primary is SOURCE
 *   G12 ... neither or both: one crashed primary  -> it is SOURCE
 *   G13 ... standing differs (uptodate >
 *       unverified > outdated)                    -> the higher is SOURCE
 *   G14 ... nothing tells them apart              -> the first name is SOURCE
 *   G15 same bitmap (not 0), currents differ      -> SPLIT_BRAIN
 *   G16 peer.current in my history, mine not in
 *       its                                       -> SOURCE, full
 *   G17 my current in its history, not the other
 *       way                                       -> TARGET, full
 *   G18 a generation (> 1) both have in bitmap or
 *       history                                   -> SPLIT_BRAIN
 *   G19 otherwise                                 -> UNRELATED
 *   G20 (over all rows) the SOURCE would be the
 *       inconsistent side                         -> NO_DATA
 *
 * A side that is inconsistent is never the source (G20): there is no
 * consistent copy to take. Mirror-symmetric: decide(a, b, x) is SOURCE
 * exactly when decide(b, a, !x) is TARGET. me_first breaks ties (the side
 * whose node name sorts first). */
struct gen_decision gen_decide(const struct gen_view *me, const struct gen_view *peer,
			       bool me_first);
const char *gen_verdict_name(enum gen_verdict v);

/* The handshake's decision: what a connection whose both STATEs and bitmaps
 * are known becomes. A pure function of what the two sides said (no I/O, no
 * clock, no logging): repl_hs.c builds the inputs, calls hs_decide, logs
 * and applies what it returns, as DRBD's drbd_sync_handshake applies the rule
 * of drbd_uuid_compare. */
struct hs_side {
	struct gen_view gen; /* its generations and flags, as its STATE says */
	uint64_t size;
	uint32_t bm_granularity;
	enum vol_disk disk;
	bool lease; /* holds its lease, or needs none (REPL_ST_NO_LEASE clear) */
};

struct hs_input {
	struct hs_side me, peer;
	const char *volume, *peer_node; /* for the texts only */
	bool me_first;                  /* this node's name sorts first */
	bool pulling;                   /* this primary fills its disk (repl_pull.c) */
	bool first_node;                /* this node is the first of `nodes` (I2) */
	bool created;                   /* this node's metadata was made by this open */
	uint64_t oos;                   /* regions marked here, the peer's bitmap merged */
};

enum hs_action {
	HS_REFUSE,          /* conn_refuse(reason) */
	HS_YIELD,           /* L6: this primary yields to the peer (quorum_yield, reason) */
	HS_PEER_STEPS_DOWN, /* L6: the peer yields; this side drops the connection */
	HS_CONNECT,         /* connected: run, with the changes below */
};

enum hs_run { HS_ESTABLISHED, HS_SYNC_SOURCE, HS_SYNC_TARGET };

/* The kept copy of a sync target (repl_cp.c) */
enum hs_kept {
	HS_KEPT_NO_SYNC, /* nothing is copied: nothing to keep */
	HS_KEPT_TAKE,    /* cp_take (CP1) */
	HS_KEPT_NONE,    /* cp_none: the image was not consistent */
};

#define HS_REASON_MAX 256

struct hs_decision {
	enum hs_action action;
	int rule;                /* the row of hs_decide's table (H1..H25) */
	struct gen_decision gen; /* gen_decide's (from H6 on; zero before) */
	bool split_brain;        /* HS_REFUSE: the volume is in split brain */
	/* HS_CONNECT, done in this order: */
	bool clear_marks; /* bm_clear_all_oos */
	bool uptodate;    /* this disk becomes uptodate */
	bool mark_all;    /* bm_set_all */
	bool flush;       /* bm_flush */
	bool note_warn;   /* reason, if any, is logged as a warning, else as info */
	enum hs_run run;
	bool rotate;       /* HS_ESTABLISHED: gen_rotate */
	bool pull;         /* HS_ESTABLISHED: pull_start */
	enum hs_kept kept; /* HS_SYNC_TARGET; then this disk becomes inconsistent */
	bool new_pair;     /* then: the first primary of a new pair (I2) */
	/* HS_REFUSE: why; HS_YIELD: why; otherwise a line to log, or "" */
	char reason[HS_REASON_MAX];
};

struct hs_decision hs_decide(const struct hs_input *in);

void gen_push_history(uint64_t history[GEN_HISTORY], uint64_t g);

#endif
