/* The volume's contract: the settings that define its guarantees, which both
 * nodes must hold alike (docs/SPEC.md, guarantee 10).
 *
 * K1: in the handshake, after AUTH and before STATE, each side sends its
 *     CONTRACT (REPL_FEAT_CONTRACT); each compares the peer's with its own
 *     and refuses a difference in any field that changes a guarantee (the
 *     ERROR names both values), so neither reaches the verdict. A difference
 *     in the other fields is logged as a warning. A peer without the
 *     feature (an older version) is taken with a warning: it cannot say.
 * K2: once connected, the contract changes only through `tandemctl set` on
 *     a connected node: it applies the change and sends its new CONTRACT;
 *     the peer adopts the settable fields and answers with its own (flag
 *     ANSWER). When the last outstanding answer comes, the two must be
 *     equal, else the connection is failed and K1 decides again.
 * K3: two changes that cross (each side sent one the other had not answered
 *     when it came) fail the connection: neither can tell which came first,
 *     and K1 refuses the handshake if the two are left different.
 * Never: adopts a field that `set` cannot change (those come from the
 * configuration files only, and K1 already found them equal). */
#include "repl_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "../config/config.h"

static void put_node(char dst[REPL_NAME_LEN], const char *name)
{
	memset(dst, 0, REPL_NAME_LEN);
	memcpy(dst, name, strnlen(name, REPL_NAME_LEN - 1));
}

void contract_fill(const struct repl *r, struct repl_contract *k, uint8_t flags)
{
	const struct cfg *cfg = r->cfg;
	const struct cfg_volume *cv = r->cv;

	memset(k, 0, sizeof(*k));
	k->mode = r->async ? REPL_CT_ASYNC : REPL_CT_SYNC;
	k->on_congestion = r->congestion_block ? 1 : 0;
	k->failover = cv->failover_manual ? 1 : 0;
	k->on_disk_failure = cfg->disk_failure_handover ? 1 : 0;
	k->on_io_error = cfg->io_error_pass_on ? 1 : 0;
	k->flags = flags | (r->wc ? REPL_CT_WITNESS : 0);
	k->peer_timeout_ms = cfg->peer_timeout_ms;
	k->witness_timeout_ms = cfg->witness_timeout_ms;
	k->async_backlog = r->ab_cap;
	k->async_max_lag_ms = r->max_lag_ns / 1000000ull;
	k->bm_granularity = (uint32_t)cv->bitmap_granularity;
	put_node(k->first, cfg->nodes[cv->nodes[0]].name);
	put_node(k->second, cfg->nodes[cv->nodes[1]].name);
	k->resync_rate = cv->resync_rate;
	k->resync_min_rate = cv->resync_min_rate;
	k->quorum_timeout_ms = cfg->quorum_timeout_ms;
	k->compression = (uint8_t)cv->compression;
}

static const char *choice(unsigned v, const char *zero, const char *one)
{
	return v ? one : zero;
}

static void secs(char *b, size_t n, uint64_t ms)
{
	snprintf(b, n, "%g s", (double)ms / 1e3);
}

/* One difference: "KEY is X on ME, Y on PEER" appended to out. */
static void diff(char *out, size_t len, const char *key, const char *mine, const char *theirs,
		 const char *me, const char *peer)
{
	size_t k = strlen(out);

	if (k + 1 >= len)
		return;
	snprintf(out + k, len - k, "%s%s is %s on %s, %s on %s", k ? "; " : "", key, mine, me,
		 theirs, peer);
}

int contract_compare(const struct repl_contract *a, const struct repl_contract *b, const char *me,
		     const char *peer, char *why, size_t wlen, char *warn, size_t warnlen)
{
	char x[80], y[80];

	why[0] = '\0';
	warn[0] = '\0';
#define D(key, fmt_a, fmt_b) diff(why, wlen, key, fmt_a, fmt_b, me, peer)
	if (a->mode != b->mode)
		D("replication", choice(a->mode, "sync", "async"),
		  choice(b->mode, "sync", "async"));
	if (strcmp(a->first, b->first) || strcmp(a->second, b->second)) {
		snprintf(x, sizeof(x), "'%s %s'", a->first, a->second);
		snprintf(y, sizeof(y), "'%s %s'", b->first, b->second);
		D("nodes", x, y);
	}
	if (a->peer_timeout_ms != b->peer_timeout_ms) {
		secs(x, sizeof(x), a->peer_timeout_ms);
		secs(y, sizeof(y), b->peer_timeout_ms);
		D("peer-timeout", x, y);
	}
	if (a->async_backlog != b->async_backlog) {
		snprintf(x, sizeof(x), "%llu", (unsigned long long)a->async_backlog);
		snprintf(y, sizeof(y), "%llu", (unsigned long long)b->async_backlog);
		D("async-backlog", x, y);
	}
	if (a->async_max_lag_ms != b->async_max_lag_ms) {
		secs(x, sizeof(x), a->async_max_lag_ms);
		secs(y, sizeof(y), b->async_max_lag_ms);
		D("async-max-lag", x, y);
	}
	if (a->on_congestion != b->on_congestion)
		D("on-congestion", choice(a->on_congestion, "ahead", "block"),
		  choice(b->on_congestion, "ahead", "block"));
	if (a->failover != b->failover)
		D("failover", choice(a->failover, "auto", "manual"),
		  choice(b->failover, "auto", "manual"));
	if (a->on_disk_failure != b->on_disk_failure)
		D("on-disk-failure", choice(a->on_disk_failure, "serve", "handover"),
		  choice(b->on_disk_failure, "serve", "handover"));
	if (a->on_io_error != b->on_io_error)
		D("on-io-error", choice(a->on_io_error, "detach", "pass-on"),
		  choice(b->on_io_error, "detach", "pass-on"));
	if ((a->flags ^ b->flags) & REPL_CT_WITNESS)
		D("witness", choice(a->flags & REPL_CT_WITNESS, "unset", "set"),
		  choice(b->flags & REPL_CT_WITNESS, "unset", "set"));
	/* (the witness's timeout matters only with a witness: the lease, L1) */
	if ((a->flags & b->flags & REPL_CT_WITNESS) &&
	    a->witness_timeout_ms != b->witness_timeout_ms) {
		secs(x, sizeof(x), a->witness_timeout_ms);
		secs(y, sizeof(y), b->witness_timeout_ms);
		D("witness-timeout", x, y);
	}
	if (a->bm_granularity != b->bm_granularity) {
		snprintf(x, sizeof(x), "%u", a->bm_granularity);
		snprintf(y, sizeof(y), "%u", b->bm_granularity);
		D("bitmap-granularity", x, y);
	}
#undef D
#define W(key, fmt_a, fmt_b) diff(warn, warnlen, key, fmt_a, fmt_b, me, peer)
	if (a->resync_rate != b->resync_rate) {
		snprintf(x, sizeof(x), "%llu", (unsigned long long)a->resync_rate);
		snprintf(y, sizeof(y), "%llu", (unsigned long long)b->resync_rate);
		W("resync-rate", a->resync_rate ? x : "auto", b->resync_rate ? y : "auto");
	}
	if (a->resync_min_rate != b->resync_min_rate) {
		snprintf(x, sizeof(x), "%llu", (unsigned long long)a->resync_min_rate);
		snprintf(y, sizeof(y), "%llu", (unsigned long long)b->resync_min_rate);
		W("resync-min-rate", x, y);
	}
	if (a->quorum_timeout_ms != b->quorum_timeout_ms) {
		secs(x, sizeof(x), a->quorum_timeout_ms);
		secs(y, sizeof(y), b->quorum_timeout_ms);
		W("quorum-timeout", x, y);
	}
	if (a->compression != b->compression) {
		static const char *const codec[] = { "none", "lz4", "zstd" };
		W("compression", codec[a->compression % 3], codec[b->compression % 3]);
	}
#undef W
	return why[0] ? 1 : 0;
}

void contract_send(struct rconn *c, uint8_t flags)
{
	uint8_t b[REPL_ENC_MAX];
	struct repl_contract k;

	contract_fill(c->r, &k, flags);
	send_small(c, b, repl_enc_contract(b, &k));
}

/* Compares the peer's contract k with this node's; refuses or fails the
 * connection (refuse: the handshake's ERROR) on a difference that matters. */
static int check(struct rconn *c, const struct repl_contract *k, bool refuse)
{
	struct repl *r = c->r;
	struct repl_contract mine;
	char why[REPL_MAX_ERROR + 1], warn[256];

	contract_fill(r, &mine, 0);
	if (contract_compare(&mine, k, r->cfg->nodes[r->self].name, c->peer_node, why, sizeof(why),
			     warn, sizeof(warn))) {
		if (refuse)
			conn_refuse(c, "volume %s: %s", r->v->name, why);
		else
			conn_fail(c, "volume %s: %s", r->v->name, why);
		return -1;
	}
	if (warn[0] && refuse)
		log_warn("volume %s: settings differ (allowed, no guarantee depends on them): %s",
			 r->v->name, warn);
	return 0;
}

int msg_contract(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	const struct repl_contract *k = &m->u.contract;

	if (!(c->features & REPL_FEAT_CONTRACT)) {
		conn_fail(c, "%s sent CONTRACT without the feature", c->peer_node);
		return -1;
	}
	if (c->hs_stage != ST_RUN) { /* K1 */
		if (c->got_contract || (k->flags & REPL_CT_ANSWER)) {
			conn_fail(c, "%s sent a second contract in the handshake", c->peer_node);
			return -1;
		}
		c->got_contract = true;
		return check(c, k, true);
	}
	if (k->flags & REPL_CT_ANSWER) { /* K2: the answer to a change sent here */
		if (c->ct_out == 0) {
			conn_fail(c, "%s answered a contract change never sent", c->peer_node);
			return -1;
		}
		if (--c->ct_out)
			return 0; /* later changes are still to be answered */
		return check(c, k, false);
	}
	if (c->ct_out) { /* K3 */
		conn_fail(c,
			  "volume %s: settings changed on both nodes at once; connecting again "
			  "compares them",
			  r->v->name);
		return -1;
	}
	/* K2: the peer changed a setting with `tandemctl set`: adopt it */
	contract_adopt(r, k, c->peer_node);
	if (check(c, k, false))
		return -1;
	contract_send(c, REPL_CT_ANSWER);
	return 0;
}

/* K1: the peer's STATE came; it must have sent its contract first. */
int contract_hs_state(struct rconn *c)
{
	struct repl *r = c->r;

	if (c->got_contract)
		return 0;
	if (c->features & REPL_FEAT_CONTRACT) {
		conn_fail(c, "%s sent no contract before its state", c->peer_node);
		return -1;
	}
	log_warn("volume %s: %s does not send its settings (an older version): that both "
		 "nodes hold the same replication, timeouts and `nodes` is not checked",
		 r->v->name, c->peer_node);
	return 0;
}

/* K2: `tandemctl set` changed a contract setting here. */
int contract_changed(struct repl *r)
{
	struct rconn *c = r->conn;

	if (!c || !peer_connected(r) || !(c->features & REPL_FEAT_CONTRACT))
		return -ENOTCONN;
	c->ct_out++;
	contract_send(c, 0);
	return 0;
}
