/* The witness's record of one volume and the decisions it makes on it
 * (docs/WITNESS.md, rules W1-W3), plus the state file that persists the
 * records of one cluster. Pure functions but for the file; unit-tested.
 *
 * Record transitions:
 *   primary none|X -> X      [wit_rec_report: X reports primary (W1); from none
 *                             only if the record never named one or X holds gen]
 *   primary X -> none        [wit_rec_report: X reports an orderly demotion (W2);
 *                             gen becomes the generation X reports]
 *   primary any -> Y         [wit_rec_grant: a claim of Y granted (W3)]
 * Invariants:
 *   WR1. `synced` is true only as the last report of the recorded primary
 *        said; a grant sets it false (the new primary writes alone at once).
 *   WR2. epoch grows by one each time `primary` changes, never otherwise.
 *   WR3. A claim is granted without `force` only when the claimant holds
 *        the recorded generation (current or in its history) and `synced`
 *        or the record names no primary (released, W2); a record that never
 *        named a primary grants only a claim by hand (ADMIN).
 * Never: opens sockets; decides liveness (the server passes it in). */
#ifndef TANDEM_WIT_REC_H
#define TANDEM_WIT_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../include/proto/ondisk.h"
#include "../../include/proto/witness.h"

struct wit_rec {
	char volume[WIT_NAME_LEN];
	char primary[WIT_NAME_LEN]; /* "" none */
	uint64_t gen;
	uint64_t epoch;
	bool synced;
};

enum wit_claim_outcome { WIT_GRANT = 0, WIT_DENY, WIT_WAIT };

/* W1, W2. Returns WIT_R_OK or WIT_R_DEPOSED; *changed when the record must
 * be persisted before the answer. */
uint32_t wit_rec_report(struct wit_rec *r, const char *node, const struct wit_vol_msg *m,
			bool *changed);
/* W3: primary_alive = the recorded primary (another node) holds a live
 * session; in_grace = the witness started less than witness-timeout ago.
 * *reason is set on WIT_DENY (and on WIT_WAIT, the reason a timeout gives). */
enum wit_claim_outcome wit_rec_claim(const struct wit_rec *r, const char *node,
				     const struct wit_vol_msg *m, bool primary_alive, bool in_grace,
				     uint32_t *reason);
/* A grant (WR1, WR2). */
void wit_rec_grant(struct wit_rec *r, const char *node, const struct wit_vol_msg *m);
/* The answer fields from the record. */
void wit_rec_verdict(const struct wit_rec *r, struct wit_verdict *v);

/* W0, at a node's HELLO: its witness-timeout (node_ms, from the HELLO) is
 * the cluster's (cluster_ms, from the witness's config): 0, or -EINVAL with
 * the refusal to send in why. 0 from a node is refused too: a node older
 * than the field, whose silence timer nobody can check. Admin sessions are
 * not checked (the caller does not ask). */
int wit_hello_timeout_check(const char *cluster, const char *node, uint64_t node_ms,
			    uint64_t cluster_ms, char *why, size_t len);

/* The state file: 0, or -errno (-EBADMSG: not a valid state file of this
 * cluster; -ENOENT: none yet). load fills at most max records. */
int wit_store_load(const char *path, const char *cluster, struct wit_rec *recs, unsigned max,
		   unsigned *n);
int wit_store_save(const char *path, const char *cluster, const struct wit_rec *recs, unsigned n);

#endif
