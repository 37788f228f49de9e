/* The handshake of a connection: HELLO (who, which volume, which protocol),
 * AUTH (both sides know the cluster secret), both STATEs and bitmaps, then
 * the verdict (handshake_decide) on the generations: in sync, sync source
 * or sync target, or a refusal.
 * Never: lets an unauthenticated peer change the volume or what status says. */
#include "repl_int.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"

static int on_hello(struct rconn *c, const struct repl_hello *h);

/* I2: the first primary of a new pair; with a witness session through its
 * claim (granted only while the record never named a primary, or names this
 * node with no data written: W1/W3 check the generation). Without one the
 * pair is its own quorum; a witness that knows of data deposes it (W1). */
static void new_pair_promote(struct repl *r)
{
	char msg[160] = "";

	if (r->admin_down || r->shutting_down || r->v->disk != VOL_UPTODATE)
		return;
	log_info("volume %s: a new pair: this node becomes its first primary%s", r->v->name,
		 r->w_up ? " (asking the witness)" : "");
	if (r->wc && r->w_up) {
		r->w_claim_want = CLAIM_ADMIN;
		r->w_claim_force = false;
		r->w_claim_seq = 0;
		quorum_kick(r);
		return;
	}
	if (promote_now(r, msg, sizeof(msg)))
		log_err("volume %s: promotion failed: %s", r->v->name, msg);
}

static void fill_state(struct repl *r, struct repl_state *s)
{
	const struct md_sb *m = sb(r);

	memset(s, 0, sizeof(*s));
	s->size = r->v->size;
	s->gen_current = m->gen_current;
	s->gen_bitmap = m->gen_bitmap;
	for (unsigned i = 0; i < REPL_HISTORY; i++)
		s->gen_history[i] = m->gen_history[i];
	if (r->v->disk == VOL_UPTODATE)
		s->flags |= REPL_ST_UPTODATE;
	if (disk_consistent(r->v->disk))
		s->flags |= REPL_ST_CONSISTENT;
	if (r->v->disk == VOL_CONSISTENT)
		s->flags |= REPL_ST_UNVERIFIED;
	if (r->v->crashed_primary)
		s->flags |= REPL_ST_CRASHED_PRIMARY;
	s->role = r->v->role == VOL_PRIMARY ? REPL_ROLE_PRIMARY : REPL_ROLE_SECONDARY;
	if (r->v->role == VOL_PRIMARY && !lease_ok(r))
		s->flags |= REPL_ST_NO_LEASE;
	s->disk = (uint8_t)r->v->disk;
	s->bm_granularity = bm_granularity(r->bm);
	s->oos_bits = 0;
	for (uint64_t i = 0; i < bm_words(r->bm); i++)
		s->oos_bits += (uint64_t)__builtin_popcountll(bm_disk_word(r->bm, i));
}

void send_state(struct rconn *c)
{
	uint8_t b[REPL_ENC_MAX];
	struct repl_state s;

	fill_state(c->r, &s);
	c->sent_disk = s.disk;
	c->sent_marks = s.oos_bits != 0;
	send_small(c, b, repl_enc_state(b, &s));
}

/* Copies a name into a NUL-padded wire field (the field is zeroed first). */
static void put_name(void *dst, const char *name)
{
	memcpy(dst, name, strnlen(name, REPL_NAME_LEN - 1));
}

static void hmac_for(const struct repl *r, const struct rconn *c, bool from_dialer,
		     const char *sender, uint8_t out[REPL_MAC_LEN])
{
	static const char tag[] = "tandem-repl-auth-1";
	uint8_t msg[sizeof(tag) + 1 + 2 * REPL_NONCE_LEN + 4 * REPL_NAME_LEN];
	const uint8_t *nd = c->dialer ? c->nonce_me : c->nonce_peer;
	const uint8_t *na = c->dialer ? c->nonce_peer : c->nonce_me;
	size_t n = 0;
	unsigned len = 0;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, tag, sizeof(tag) - 1);
	n = sizeof(tag) - 1;
	msg[n++] = from_dialer ? 'D' : 'A';
	memcpy(msg + n, nd, REPL_NONCE_LEN);
	n += REPL_NONCE_LEN;
	memcpy(msg + n, na, REPL_NONCE_LEN);
	n += REPL_NONCE_LEN;
	put_name(msg + n, r->cfg->cluster);
	n += REPL_NAME_LEN;
	put_name(msg + n, r->v->name);
	n += REPL_NAME_LEN;
	put_name(msg + n, sender);
	n += REPL_NAME_LEN;
	HMAC(EVP_sha256(), r->secret, (int)strlen(r->secret), msg, n, out, &len);
}

void send_hello(struct rconn *c, const char *volume)
{
	uint8_t b[REPL_ENC_MAX];
	struct repl_hello h;
	const struct cfg *cfg = c->r ? c->r->cfg : c->srv->cfg;
	unsigned self = c->r ? c->r->self : c->srv->self;

	memset(&h, 0, sizeof(h));
	h.magic = REPL_HELLO_MAGIC;
	h.proto_min = REPL_PROTO_MIN;
	h.proto_max = REPL_PROTO_MAX;
	h.features = REPL_FEATURES_KNOWN;
	put_name(h.cluster, cfg->cluster);
	put_name(h.node, cfg->nodes[self].name);
	put_name(h.volume, volume);
	memcpy(h.nonce, c->nonce_me, sizeof(h.nonce));
	send_small(c, b, repl_enc_hello(b, &h));
}

static void send_auth(struct rconn *c)
{
	uint8_t b[REPL_ENC_MAX];
	struct repl_auth a;

	hmac_for(c->r, c, c->dialer, c->r->cfg->nodes[c->r->self].name, a.mac);
	send_small(c, b, repl_enc_auth(b, &a));
}

/* Sends the disk view of the change bitmap: every region that may differ. */
static void send_bitmap(struct rconn *c)
{
	struct bm *bm = c->r->bm;
	uint64_t nw = bm_words(bm), i = 0;
	uint8_t b[16];

	while (i < nw) {
		uint64_t start, n = 0;
		struct rmsg *m;
		while (i < nw && bm_disk_word(bm, i) == 0)
			i++;
		if (i == nw)
			break;
		start = i;
		while (i < nw && n < REPL_MAX_BITMAP_WORDS && bm_disk_word(bm, i) != 0) {
			i++;
			n++;
		}
		m = rmsg_new((uint32_t)(32 + n * 8));
		if (!m) {
			conn_fail(c, "out of memory");
			return;
		}
		m->len = (uint32_t)repl_enc_bitmap(m->buf, start, (uint32_t)n);
		for (uint64_t k = 0; k < n; k++) {
			repl_put_word(m->buf + m->len, bm_disk_word(bm, start + k));
			m->len += 8;
		}
		rmsg_send(c, m);
	}
	send_small(c, b, repl_enc_empty(b, REPL_BITMAP_END));
	c->sent_bm = true;
}

static void fill_view(const struct repl_state *s, bool primary, struct gen_view *g)
{
	g->current = s->gen_current;
	g->bitmap = s->gen_bitmap;
	for (int i = 0; i < GEN_HISTORY; i++)
		g->history[i] = s->gen_history[i];
	g->primary = primary;
	g->crashed_primary = s->flags & REPL_ST_CRASHED_PRIMARY;
	g->has_bits = s->oos_bits != 0;
	g->inconsistent = !(s->flags & REPL_ST_CONSISTENT);
	g->unverified = !g->inconsistent && (s->flags & REPL_ST_UNVERIFIED);
	g->outdated = !g->inconsistent && !g->unverified && !(s->flags & REPL_ST_UPTODATE);
}

/* What hs_decide decides on: both STATEs, as they were sent (this side's
 * with the peer's bitmap merged into its marks), and this node's facts. */
static void hs_input(struct rconn *c, struct hs_input *in)
{
	struct repl *r = c->r;
	struct repl_state me;

	memset(in, 0, sizeof(*in));
	fill_state(r, &me);
	/* The bitmap just merged is part of what this side knows to differ. */
	me.oos_bits += bm_oos_count(r->bm);
	fill_view(&me, r->v->role == VOL_PRIMARY, &in->me.gen);
	fill_view(&c->pst, c->pst.role == REPL_ROLE_PRIMARY, &in->peer.gen);
	in->me.size = r->v->size;
	in->peer.size = c->pst.size;
	in->me.bm_granularity = bm_granularity(r->bm);
	in->peer.bm_granularity = c->pst.bm_granularity;
	in->me.disk = r->v->disk;
	in->peer.disk = (enum vol_disk)c->pst.disk;
	in->me.lease = lease_ok(r);
	in->peer.lease = !(c->pst.flags & REPL_ST_NO_LEASE);
	in->volume = r->v->name;
	in->peer_node = c->peer_node;
	in->me_first = strcmp(r->cfg->nodes[r->self].name, c->peer_node) < 0;
	in->pulling = r->pulling;
	in->first_node = r->first_node;
	in->created = r->v->md->created;
	in->oos = bm_oos_count(r->bm);
}

/* Both STATEs and both bitmaps are known: decide what this connection is
 * (hs_decide, the table in repl_gen.c), then do it. */
static void handshake_decide(struct rconn *c)
{
	struct repl *r = c->r;
	struct hs_input in;
	struct hs_decision d;

	hs_input(c, &in);
	d = hs_decide(&in);
	switch (d.action) {
	case HS_REFUSE:
		if (d.split_brain)
			r->split_brain = true;
		conn_refuse(c, "%s", d.reason);
		return;
	case HS_YIELD: quorum_yield(r, c->peer_node, d.reason); return;
	case HS_PEER_STEPS_DOWN:
		log_info("volume %s: %s", r->v->name, d.reason);
		conn_abort(c);
		return;
	case HS_CONNECT: break;
	}
	r->split_brain = false;
	r->error[0] = '\0';
	r->backoff_ms = RETRY_MIN_MS;
	hs_set_stage(c, ST_RUN);
	r->peer_gone = false;
	r->peer_gone_claim = false;
	r->have_peer = true;
	r->peer = c->pst;
	r->features = c->features;
	repl_set_cstate(r, RC_CONNECTED);
	/* the peer may have changed roles while it was away (its claim, its
	 * release): what this node heard of the witness's record is stale */
	quorum_peer_role(r);
	meta_send(r, c);
	log_info("volume %s: connected to %s (generations %016llx / %016llx: %s%s)", r->v->name,
		 c->peer_node, (unsigned long long)in.me.gen.current,
		 (unsigned long long)in.peer.gen.current, gen_verdict_name(d.gen.verdict),
		 d.gen.full ? ", full sync" : "");
	r->rs_done_bytes = r->rs_sent_bytes = r->rs_zero_bytes = r->rs_same_bytes = 0;
	r->rate_t0 = ev_now(r->ev);
	r->rate_b0 = 0;
	r->rate_bps = 0;
	r->rs_cursor = 0;
	if (d.clear_marks)
		bm_clear_all_oos(r->bm);
	if (d.uptodate)
		vol_set_disk(r->v, VOL_UPTODATE);
	if (d.mark_all)
		bm_set_all(r->bm);
	if (d.flush)
		bm_flush(r->bm, NULL);
	if (d.reason[0])
		log_msg(d.note_warn ? LOG_LVL_WARN : LOG_LVL_INFO, "volume %s: %s", r->v->name,
			d.reason);
	switch (d.run) {
	case HS_ESTABLISHED:
		repl_set_rstate(r, RR_ESTABLISHED);
		if (d.rotate)
			gen_rotate(r, c);
		if (d.pull)
			pull_start(r, false);
		break;
	case HS_SYNC_SOURCE:
		r->rs_total = bm_oos_count(r->bm);
		r->rs_pct_shown = 0;
		repl_set_rstate(r, RR_SYNCSOURCE);
		r->peer.disk = VOL_INCONSISTENT;
		ev_defer(r->ev, &r->rs_kick);
		break;
	case HS_SYNC_TARGET:
		r->rs_total = bm_oos_count(r->bm);
		r->rs_pct_shown = 0;
		if (d.kept == HS_KEPT_TAKE)
			cp_take(r); /* CP1: this connection applied nothing yet */
		else if (d.kept == HS_KEPT_NONE)
			cp_none(r, "the image was not consistent when the resync began");
		vol_set_disk(r->v, VOL_INCONSISTENT);
		c->target_fails = 0;
		repl_set_rstate(r, RR_SYNCTARGET);
		break;
	}
	c->decided = r->rstate;
	/* Tell the peer the state this side is in now. */
	send_state(c);
	if (d.new_pair)
		new_pair_promote(r);
	if (r->v->role == VOL_PRIMARY)
		peer_ping(r, c, ++r->ping_cookie); /* L2: the lease from this peer */
}

int msg_hello(struct rconn *c, const struct repl_msg *m)
{
	return on_hello(c, &m->u.hello);
}

int msg_auth(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	uint8_t mac[REPL_MAC_LEN];

	hmac_for(r, c, !c->dialer, c->peer_node, mac);
	if (CRYPTO_memcmp(mac, m->u.auth.mac, REPL_MAC_LEN) != 0) {
		conn_refuse(c,
			    "authentication failed: node %s does not know the cluster "
			    "secret",
			    c->peer_node);
		return -1;
	}
	c->got_auth = true;
	if (r->admin_down || r->shutting_down) {
		conn_refuse(c, "volume %s is disconnected by its administrator", r->v->name);
		return -1;
	}
	hs_set_stage(c, ST_STATE);
	if (c->dialer)
		send_auth(c);
	/* The connection is authentic: it replaces an older one. */
	if (r->conn && r->conn != c) {
		struct rconn *old = r->conn;
		log_info("volume %s: new connection from %s replaces the old one", r->v->name,
			 c->peer_node);
		conn_abort(old);
	}
	r->conn = c;
	r->last_ping_ns = ev_now(r->ev);
	if (c->features & REPL_FEAT_CONTRACT)
		contract_send(c, 0); /* K1 */
	send_state(c);
	send_bitmap(c);
	return 0;
}

/* The peer's STATE in the handshake: what handshake_decide decides on. */
static int hs_state(struct rconn *c, const struct repl_msg *m)
{
	if (contract_hs_state(c))
		return -1;
	c->pst = m->u.state;
	hs_set_stage(c, ST_BITMAP);
	return 0;
}

/* A STATE once connected: the peer's role or disk changed. */
static int run_state(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	bool was_primary = r->peer.role == REPL_ROLE_PRIMARY;
	/* (a primary is never a sync target: inconsistent, it pulls: P3) */
	bool peer_target =
		m->u.state.disk == VOL_INCONSISTENT && m->u.state.role != REPL_ROLE_PRIMARY;

	/* The first STATE after the handshake shows what the peer decided:
	 * both sides must have come to the same answer (they decide on
	 * each other's earlier STATE, which a role change or a write in
	 * between can make stale). Otherwise: start over. */
	if (!c->checked_decision) {
		c->checked_decision = true;
		enum repl_rep_state mine = c->decided;
		if ((mine == RR_SYNCTARGET && peer_target) ||
		    (mine == RR_ESTABLISHED && peer_target) ||
		    (mine == RR_SYNCSOURCE && !peer_target)) {
			conn_fail(c,
				  "%s came to another verdict in the handshake; "
				  "starting over",
				  c->peer_node);
			return -1;
		}
		/* R14: the crash is settled once both sides hold to the same
		 * verdict (a target's inconsistent disk is recorded before its
		 * STATE): it no longer speaks for this copy's data */
		r->v->crashed_primary = false;
	}
	if (r->rstate == RR_ESTABLISHED && m->u.state.role == REPL_ROLE_PRIMARY &&
	    (r->peer.disk == VOL_INCONSISTENT || vol_disk_gone(r->peer.disk)) &&
	    m->u.state.disk == VOL_UPTODATE && r->v->disk == VOL_UPTODATE) {
		/* P4: the primary filled its disk from this copy, by the marks
		 * of both (the handshake merged them): none is left. (A short
		 * fill ends between two STATEs: the peer's disk may go from
		 * diskless to uptodate in one.) */
		bm_clear_all_oos(r->bm);
		bm_flush(r->bm, NULL);
	}
	if (vol_disk_gone(m->u.state.disk) && !vol_disk_gone(r->peer.disk) &&
	    r->v->role == VOL_PRIMARY && bm_oos_count(r->bm)) {
		/* F2: its disk is gone and lacks what is marked here (a write
		 * it failed may have been acknowledged before this STATE
		 * came): this copy is a new generation, or that old disk,
		 * attached again, would be taken for an equal one */
		gen_branch(r);
	}
	r->peer = m->u.state;
	if (r->rstate == RR_ESTABLISHED && r->v->disk == VOL_OUTDATED &&
	    r->peer.role == REPL_ROLE_PRIMARY && r->peer.disk == VOL_UPTODATE &&
	    r->peer.gen_current == sb(r)->gen_current && !r->peer.oos_bits &&
	    !bm_oos_count(r->bm)) {
		/* R13: in sync with a primary that holds the same generation
		 * (made primary, --force, over a copy equal to this one): this
		 * copy is as current as it, as a handshake would find (GEN_EQUAL) */
		log_info("volume %s: in sync with %s, primary with the same data: this copy is up "
			 "to date",
			 r->v->name, c->peer_node);
		vol_set_disk(r->v, VOL_UPTODATE);
	}
	if (vol_disk_gone(r->peer.disk) && (r->rstate == RR_SYNCSOURCE || !ab_empty(r))) {
		/* F1: its disk failed during the resync, or with the async
		 * stream holding writes for it: start over (the stream turns
		 * into marks as on any lost connection), and the handshake
		 * leaves the marks for an attach */
		conn_fail(c, "%s's disk failed during the %s", c->peer_node,
			  r->rstate == RR_SYNCSOURCE ? "resync" : "async stream");
		return -1;
	}
	if (was_primary != (r->peer.role == REPL_ROLE_PRIMARY)) {
		log_info("volume %s: %s is now %s", r->v->name, c->peer_node,
			 r->peer.role == REPL_ROLE_PRIMARY ? "primary" : "secondary");
		if (r->sw_sent == REPL_SW_PROMOTE && r->peer.role == REPL_ROLE_PRIMARY)
			r->sw_done_ns = ev_now(r->ev); /* the switchover asked here is done */
		quorum_peer_role(r);
	} else {
		quorum_kick(r); /* its disk state: the witness hears of it at once */
	}
	return 0;
}

/* STATE is accepted in two stages, with a different meaning in each. */
int msg_state(struct rconn *c, const struct repl_msg *m)
{
	return c->hs_stage == ST_STATE ? hs_state(c, m) : run_state(c, m);
}

int msg_bitmap(struct rconn *c, const struct repl_msg *m)
{
	struct repl *r = c->r;
	uint64_t w[REPL_MAX_BITMAP_WORDS];

	for (uint32_t i = 0; i < m->u.bitmap.words; i++)
		w[i] = repl_bitmap_word(m, i);
	if (m->u.bitmap.start + m->u.bitmap.words > bm_words(r->bm)) {
		conn_fail(c, "bitmap beyond the volume");
		return -1;
	}
	bm_merge_words(r->bm, m->u.bitmap.start, w, m->u.bitmap.words);
	return 0;
}

int msg_bitmap_end(struct rconn *c, const struct repl_msg *m)
{
	(void)m;
	c->got_bm_end = true;
	handshake_decide(c);
	return conn_usable(c) ? 0 : -1;
}

static bool proto_ok(struct rconn *c, const struct repl_hello *h)
{
	if (h->proto_max >= REPL_PROTO_MIN && h->proto_min <= REPL_PROTO_MAX)
		return true;
	conn_refuse(c, "protocol versions %u-%u not supported (this node: %u-%u)", h->proto_min,
		    h->proto_max, REPL_PROTO_MIN, REPL_PROTO_MAX);
	return false;
}

static int on_hello(struct rconn *c, const struct repl_hello *h)
{
	c->features = h->features & REPL_FEATURES_KNOWN;
	if (c->dialer) {
		struct repl *r = c->r;
		if (strcmp(h->cluster, r->cfg->cluster) || strcmp(h->node, peer_name(r)) ||
		    strcmp(h->volume, r->v->name)) {
			conn_refuse(c,
				    "the node at %s is %s of cluster %s, volume %s; expected %s of "
				    "cluster %s",
				    "the replication address", h->node, h->cluster, h->volume,
				    peer_name(r), r->cfg->cluster);
			return -1;
		}
		if (!proto_ok(c, h))
			return -1;
		memcpy(c->nonce_peer, h->nonce, REPL_NONCE_LEN);
		hs_set_stage(c, ST_AUTH);
		return 0;
	}
	/* accepting side: find the volume */
	{
		struct repl_server *s = c->srv;
		struct repl *r = NULL;
		snprintf(c->peer_node, sizeof(c->peer_node), "%s", h->node);
		if (strcmp(h->cluster, s->cfg->cluster)) {
			conn_refuse(c, "foreign cluster '%s' (this is cluster '%s')", h->cluster,
				    s->cfg->cluster);
			return -1;
		}
		for (unsigned i = 0; i < s->nvols; i++)
			if (s->vols[i]->repl && strcmp(s->vols[i]->name, h->volume) == 0)
				r = s->vols[i]->repl;
		if (!r) {
			conn_refuse(c, "no replicated volume '%s' on node %s", h->volume,
				    s->cfg->nodes[s->self].name);
			return -1;
		}
		if (strcmp(h->node, peer_name(r))) {
			conn_refuse(c, "node '%s' is not the peer of volume %s", h->node,
				    h->volume);
			return -1;
		}
		if (!proto_ok(c, h))
			return -1;
		if (r->admin_down || r->shutting_down) {
			conn_refuse(c, "volume %s is disconnected on %s by its administrator",
				    h->volume, s->cfg->nodes[s->self].name);
			return -1;
		}
		/* Bound to the volume now (but it replaces r->conn only once
		 * authenticated). */
		net_peer_hs_done(&c->peer);
		net_peer_detach(&c->peer);
		c->r = r;
		r->nbound++;
		c->order = ++r->conn_order;
		list_add(&r->bound, &c->link);
		memcpy(c->nonce_peer, h->nonce, REPL_NONCE_LEN);
		send_hello(c, r->v->name);
		send_auth(c);
		hs_set_stage(c, ST_AUTH);
		return 0;
	}
}
