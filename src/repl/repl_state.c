/* The state machines of replication, one writer each: the connection
 * state, the replication state, a connection's handshake stage and the
 * verify state. Each set function checks its transition against the table
 * written from repl.h. Never: acts on a transition beyond logging and
 * announcing it; the callers do the work. */
#include "repl_int.h"

#include <assert.h>

#include "../common/log.h"

const char *repl_conn_name(enum repl_conn_state s)
{
	static const char *const n[] = { "standalone", "connecting", "connected" };
	return (unsigned)s < ARRAY_SIZE(n) ? n[s] : "?";
}

const char *repl_rep_name(enum repl_rep_state s)
{
	static const char *const n[] = { "off", "established", "syncsource", "synctarget",
					 "verifying" };
	return (unsigned)s < ARRAY_SIZE(n) ? n[s] : "?";
}

/* An illegal transition is a bug of this node: it stops a debug build at
 * once; a release build (NDEBUG) logs it and leaves the state as it was. */
#define REFUSE(what, ...)                               \
	do {                                            \
		log_err(__VA_ARGS__);                   \
		assert(!"illegal " what " transition"); \
	} while (0)

/* repl.h: replication off|established|syncsource|synctarget (RR_VERIFYING is
 * only ever shown, never stored). */
void repl_set_rstate(struct repl *r, enum repl_rep_state s)
{
	static const bool legal[RR_VERIFYING + 1][RR_VERIFYING + 1] = {
		[RR_OFF] = { [RR_ESTABLISHED] = true,
			     [RR_SYNCSOURCE] = true,
			     [RR_SYNCTARGET] = true },
		[RR_ESTABLISHED] = { [RR_OFF] = true,
				     [RR_SYNCSOURCE] = true,
				     [RR_SYNCTARGET] = true },
		[RR_SYNCSOURCE] = { [RR_OFF] = true, [RR_ESTABLISHED] = true },
		[RR_SYNCTARGET] = { [RR_OFF] = true, [RR_ESTABLISHED] = true },
	};

	if (r->rstate == s)
		return;
	if ((unsigned)s > RR_VERIFYING || !legal[r->rstate][s]) {
		REFUSE("replication", "volume %s: replication with %s: illegal transition %s -> %s",
		       r->v->name, peer_name(r), repl_rep_name(r->rstate), repl_rep_name(s));
		return;
	}
	log_info("volume %s: replication with %s: %s -> %s", r->v->name, peer_name(r),
		 repl_rep_name(r->rstate), repl_rep_name(s));
	vol_event(r->v, "replication", repl_rep_name(r->rstate), repl_rep_name(s), NULL);
	r->rstate = s;
	quorum_kick(r); /* N2: the witness hears of it at once, not at the next tick */
}

/* repl.h: connection standalone|connecting|connected. */
void repl_set_cstate(struct repl *r, enum repl_conn_state s)
{
	static const bool legal[RC_CONNECTED + 1][RC_CONNECTED + 1] = {
		[RC_STANDALONE] = { [RC_CONNECTING] = true },
		[RC_CONNECTING] = { [RC_CONNECTED] = true, [RC_STANDALONE] = true },
		[RC_CONNECTED] = { [RC_CONNECTING] = true, [RC_STANDALONE] = true },
	};

	if (r->cstate == s)
		return;
	if ((unsigned)s > RC_CONNECTED || !legal[r->cstate][s]) {
		REFUSE("connection", "volume %s: connection to %s: illegal transition %s -> %s",
		       r->v->name, peer_name(r), repl_conn_name(r->cstate), repl_conn_name(s));
		return;
	}
	log_info("volume %s: connection to %s: %s -> %s", r->v->name, peer_name(r),
		 repl_conn_name(r->cstate), repl_conn_name(s));
	vol_event(r->v, "connection", repl_conn_name(r->cstate), repl_conn_name(s), NULL);
	r->cstate = s;
}

static const char *hs_stage_name(enum hs_stage s)
{
	static const char *const n[] = { "hello", "auth", "state", "bitmap", "run" };
	return (unsigned)s < ARRAY_SIZE(n) ? n[s] : "?";
}

/* repl.h: a connection's handshake, hello -> auth -> state -> bitmap -> run;
 * it starts at hello (rconn_new) and never goes back. */
void hs_set_stage(struct rconn *c, enum hs_stage s)
{
	static const bool legal[ST_RUN + 1][ST_RUN + 1] = {
		[ST_HELLO] = { [ST_AUTH] = true },
		[ST_AUTH] = { [ST_STATE] = true },
		[ST_STATE] = { [ST_BITMAP] = true },
		[ST_BITMAP] = { [ST_RUN] = true },
	};

	if (c->hs_stage == s)
		return;
	if ((unsigned)s > ST_RUN || !legal[c->hs_stage][s]) {
		REFUSE("handshake", "replication with %s: illegal handshake transition %s -> %s",
		       c->peer_node, hs_stage_name(c->hs_stage), hs_stage_name(s));
		return;
	}
	c->hs_stage = s;
}

static const char *vfy_name(enum vfy_state s)
{
	static const char *const n[] = { "none", "running", "done", "aborted" };
	return (unsigned)s < ARRAY_SIZE(n) ? n[s] : "?";
}

/* repl.h: verify none|done|aborted -> running -> done|aborted. The callers
 * announce it (their events carry what the verify found). */
void verify_set_state(struct repl *r, enum vfy_state s)
{
	static const bool legal[VFY_ABORTED + 1][VFY_ABORTED + 1] = {
		[VFY_NONE] = { [VFY_RUNNING] = true },
		[VFY_RUNNING] = { [VFY_DONE] = true, [VFY_ABORTED] = true },
		[VFY_DONE] = { [VFY_RUNNING] = true },
		[VFY_ABORTED] = { [VFY_RUNNING] = true },
	};

	if (r->vfy_state == s)
		return;
	if ((unsigned)s > VFY_ABORTED || !legal[r->vfy_state][s]) {
		REFUSE("verify", "volume %s: illegal verify transition %s -> %s", r->v->name,
		       vfy_name(r->vfy_state), vfy_name(s));
		return;
	}
	r->vfy_state = s;
}
