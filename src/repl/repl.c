/* The replication object of one volume: its life (repl_new, repl_start,
 * repl_shutdown, repl_free) and the generation identifiers it keeps in the
 * volume's superblock. repl.h has the states, transitions and invariants;
 * repl_int.h what the other files of src/repl share.
 * Never: does I/O of its own beyond the synchronous metadata writes. */
#include "repl_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"

const char *peer_name(const struct repl *r)
{
	return r->cfg->nodes[r->peer_ix].name;
}

bool overlap(uint64_t a, uint64_t al, uint64_t b, uint64_t bl)
{
	return a < b + bl && b < a + al;
}

struct md_sb *sb(struct repl *r)
{
	return &r->v->md->sb;
}

/* A primary writing without its peer starts a new data generation, so that
 * the peer's copy is recognised as older (gen_branch in repl_gen.h). */
void gen_branch(struct repl *r)
{
	/* D2, P3: a gone disk, or one being filled from the peer, takes no
	 * write the peer lacks: nothing branches */
	if (sb(r)->gen_bitmap != GEN_NONE || vol_disk_gone(r->v->disk) || r->pulling)
		return;
	sb(r)->gen_bitmap = sb(r)->gen_current;
	sb(r)->gen_current = md_new_gen();
	log_info("volume %s: writing without %s: new data generation %016llx (bitmap %016llx)",
		 r->v->name, peer_name(r), (unsigned long long)sb(r)->gen_current,
		 (unsigned long long)sb(r)->gen_bitmap);
	vol_md_write(r->v);
}

/* A pair created empty leaves the shared "empty" generation once its primary
 * is connected, so that a replaced empty disk is told apart later: both
 * sides move to a new generation (SET_GEN). */
void gen_rotate(struct repl *r, struct rconn *c)
{
	uint8_t b[64];
	uint64_t g;

	if (r->v->role != VOL_PRIMARY || sb(r)->gen_current != GEN_EMPTY)
		return;
	g = md_new_gen();
	gen_push_history(sb(r)->gen_history, sb(r)->gen_current);
	sb(r)->gen_current = g;
	if (vol_md_write(r->v))
		return; /* the disk is failed (V4): nothing to tell the peer */
	send_small(c, b, repl_enc_gen(b, REPL_SET_GEN, g, GEN_EMPTY));
}

/* The data area is a consistent image (whatever it may lack). */
bool disk_consistent(enum vol_disk d)
{
	return d == VOL_UPTODATE || d == VOL_OUTDATED || d == VOL_CONSISTENT;
}

static void vol_submit_hook(void *ctx, struct vol_io *io)
{
	repl_submit(ctx, io);
}

static void vol_meta_hook(void *ctx)
{
	repl_meta_changed(ctx);
}

static int vol_peer_role_hook(void *ctx)
{
	const struct repl *r = ctx;

	if (!r->have_peer || r->cstate != RC_CONNECTED)
		return -1;
	return r->peer.role == REPL_ROLE_PRIMARY ? VOL_PRIMARY : VOL_SECONDARY;
}

static int vol_switchover_hook(void *ctx, bool to_self, char *msg, size_t len)
{
	struct repl *r = ctx;

	return repl_switchover(r, r->cfg->nodes[to_self ? r->self : r->peer_ix].name, msg, len);
}

static bool vol_lease_hook(void *ctx)
{
	return lease_ok(ctx);
}

static bool vol_via_peer_hook(void *ctx)
{
	return repl_via_peer(ctx);
}

static bool vol_need_peer_hook(void *ctx)
{
	return repl_need_peer(ctx);
}

static bool vol_read_remote_hook(void *ctx, uint64_t off, uint64_t len)
{
	return repl_read_remote(ctx, off, len);
}

static int vol_read_hook(void *ctx, struct vol_io *io, void (*done)(struct vol_io *io, int res))
{
	return repl_read(ctx, io, done);
}

/* What the volume calls (vol.h): it never includes this component. */
static const struct vol_repl_ops repl_vol_ops = {
	.submit = vol_submit_hook,
	.meta_changed = vol_meta_hook,
	.peer_role = vol_peer_role_hook,
	.switchover = vol_switchover_hook,
	.lease_ok = vol_lease_hook,
	.via_peer = vol_via_peer_hook,
	.need_peer = vol_need_peer_hook,
	.read_remote = vol_read_remote_hook,
	.read = vol_read_hook,
};

/* A slow disk here may be detached (vol_slow_watch) only while the peer
 * can do without it: on a secondary whose primary peer is connected,
 * established and up to date (its marks bring the disk back after an
 * attach, F1); on a primary whose peer serves (D1: on-io-error = detach). */
static bool slow_may_detach(void *ctx)
{
	const struct repl *r = ctx;

	if (r->v->role == VOL_PRIMARY)
		return !r->cfg->io_error_pass_on && !r->pulling && peer_serves(r);
	return peer_ready(r) && r->have_peer && r->peer.role == REPL_ROLE_PRIMARY &&
	       r->peer.disk == VOL_UPTODATE;
}

int repl_new(struct ev_loop *ev, const struct cfg *cfg, unsigned vi, unsigned self, struct vol *v,
	     char *err, size_t errlen)
{
	const struct cfg_volume *cv = &cfg->volumes[vi];
	struct repl *r = calloc(1, sizeof(*r));
	const char *addr;
	struct md_sb *m = &v->md->sb;
	int rc;

	if (!r)
		return -ENOMEM;
	r->ev = ev;
	r->cfg = cfg;
	r->v = v;
	r->self = self;
	r->peer_ix = cv->nodes[0] == self ? cv->nodes[1] : cv->nodes[0];
	r->first_node = cv->nodes[0] == self;
	r->cv = cv;
	r->dialer = strcmp(cfg->nodes[self].name, cfg->nodes[r->peer_ix].name) < 0;
	snprintf(r->secret, sizeof(r->secret), "%s", cfg->secret);
	r->timeout_ns = (uint64_t)cfg->peer_timeout_ms * 1000000ull;
	lease_init(r);
	r->rs_cap = cv->resync_rate;
	r->rs_floor =
		cv->resync_rate ? MIN(cv->resync_min_rate, cv->resync_rate) : cv->resync_min_rate;
	r->async = cv->replication == CFG_REPL_ASYNC;
	r->ab_cap = cv->async_backlog;
	r->max_lag_ns = cv->async_max_lag_ms * 1000000ull;
	r->congestion_block = cv->congestion_block;
	r->ab_kick.fn = ab_kick_fn;
	list_init(&r->ab_arena.fifo);
	list_init(&r->ab_queue);
	list_init(&r->ab_sent);
	list_init(&r->ab_wait);
	list_init(&r->ab_fgdone);
	ab_reserve(r);
	r->dial.fd = -1;
	r->probe.fd = -1;
	r->retry.fn = dial;
	r->tick.fn = tick;
	r->rs_kick.fn = rs_kick_fn;
	r->drop_kick.fn = drop_kick_fn;
	r->ctl_timer.fn = ctl_tick;
	r->csum = cv->resync_checksum;
	r->pack_codec = cv->compression == CFG_COMPRESS_LZ4    ? REPL_HF_LZ4
			: cv->compression == CFG_COMPRESS_ZSTD ? REPL_HF_ZSTD
							       : 0;
	r->backoff_ms = RETRY_MIN_MS;
	bufpool_init(&r->pool, 64u << 20);
	list_init(&r->inflight);
	list_init(&r->waiting);
	list_init(&r->bound);
	list_init(&r->rs_inflight);
	list_init(&r->rs_runs);
	quorum_init(r, NULL);
	sw_init(r);
	r->auto_failover = !cv->failover_manual;
	addr = cfg->nodes[r->peer_ix].replication_advertise[0]
		       ? cfg->nodes[r->peer_ix].replication_advertise
		       : cfg->nodes[r->peer_ix].replication;
	if (parse_addr(addr, &r->dial_sa, &r->dial_salen)) {
		snprintf(err, errlen, "volume %s: bad replication address %s of node %s", v->name,
			 addr, cfg->nodes[r->peer_ix].name);
		free(r);
		return -EINVAL;
	}
	if (m->bm_granularity == 0) {
		/* Metadata made before replication: the volume ran on this node
		 * alone, so no peer knows its content. Give it a bitmap now, and
		 * a data generation of its own (never "created empty"), so that a
		 * new peer gets a full sync (R8). */
		if (m->gen_current <= GEN_EMPTY) {
			m->gen_current = md_new_gen();
			log_info("volume %s: was not replicated: its data is generation %016llx",
				 v->name, (unsigned long long)m->gen_current);
		}
		m->bm_offset = TANDEM_MD_BITMAP_OFFSET;
		m->bm_granularity = (uint32_t)cv->bitmap_granularity;
		m->bm_bytes = bm_bytes_on_disk(v->size, m->bm_granularity);
		if (vol_md_write(v)) {
			snprintf(err, errlen, "volume %s: writing metadata failed", v->name);
			free(r);
			return -EIO;
		}
	} else if (m->bm_granularity != cv->bitmap_granularity) {
		log_warn("volume %s: bitmap-granularity %llu configured, but the metadata has %u; "
			 "keeping %u",
			 v->name, (unsigned long long)cv->bitmap_granularity, m->bm_granularity,
			 m->bm_granularity);
	}
	rc = bm_open(ev, v->md->fd, TANDEM_MD_AL_OFFSET,
		     TANDEM_MD_META_OFFSET - TANDEM_MD_AL_OFFSET, m->bm_offset, v->size,
		     m->bm_granularity, !v->md->created, v->crashed, &r->bm);
	if (rc == -ENOSPC) {
		/* the activity log has 952 KiB: one bit per 64 regions */
		snprintf(err, errlen,
			 "volume %s: too large for bitmap-granularity %u: at most %llu bytes "
			 "(the activity log holds %llu regions); choose a larger granularity",
			 v->name, m->bm_granularity,
			 (unsigned long long)(TANDEM_MD_META_OFFSET - TANDEM_MD_AL_OFFSET) *
				 512ull * m->bm_granularity,
			 (unsigned long long)(TANDEM_MD_META_OFFSET - TANDEM_MD_AL_OFFSET) *
				 512ull);
		free(r);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "volume %s: change bitmap: %s", v->name, strerror(-rc));
		free(r);
		return rc;
	}
	bm_set_crash(r->bm, &v->md->crash);
	r->slots = calloc(NSLOTS, sizeof(*r->slots));
	r->busy = calloc(bm_words(r->bm), 8);
	r->drain_touched = calloc(bm_words(r->bm), 8);
	/* (always: a node decompresses what its peer sends, whatever its own
	 * setting; the codecs' contexts come on first use) */
	if (!r->slots || !r->busy || !r->drain_touched || pack_new(&r->pk)) {
		bm_free(r->bm);
		free(r->slots);
		free(r->busy);
		free(r->drain_touched);
		free(r);
		return -ENOMEM;
	}
	if (bm_oos_count(r->bm))
		log_info("volume %s: %llu regions marked in the change bitmap", v->name,
			 (unsigned long long)bm_oos_count(r->bm));
	r->last_clean_ns = ev_now(ev);
	v->repl = r;
	v->repl_ops = &repl_vol_ops;
	v->repl_ctx = r;
	vol_slow_watch(v, cfg->disk_slow_ms, cfg->disk_slow_s, slow_may_detach, r);
	v->port_peer = (uint16_t)(r->peer_ix + 1);
	return 0;
}

void repl_start(struct repl *r)
{
	cp_load(r);
	repl_set_cstate(r, RC_CONNECTING);
	ev_timer_arm(r->ev, &r->tick, 100000000ull);
	ev_timer_arm(r->ev, &r->retry, 0);
	quorum_start(r);
}

int repl_use_witness(struct repl *r, struct wit_client *wc)
{
	return quorum_init(r, wc);
}

void repl_use_tls(struct repl *r, struct net_tls_ctx *tls)
{
	r->tls = tls;
}

void repl_shutdown(struct repl *r)
{
	r->shutting_down = true;
	quorum_shutdown(r);
	sw_reset(r);
	ev_timer_cancel(r->ev, &r->retry);
	net_dial_cancel(&r->dial);
	net_dial_cancel(&r->probe);
	ev_timer_cancel(r->ev, &r->probe_again);
	{
		struct list *pos, *tmp;
		list_for_each_safe (pos, tmp, &r->bound)
			conn_abort(container_of(pos, struct rconn, link));
	}
	repl_set_cstate(r, RC_STANDALONE);
}

bool repl_idle(const struct repl *r)
{
	return !r->conn && !r->nbound && !r->dial.busy && !r->probe.busy &&
	       list_empty(&r->inflight) && list_empty(&r->waiting) && list_empty(&r->rs_inflight) &&
	       !r->rs_flushing && !r->cleaning && !bm_busy(r->bm);
}

void repl_free(struct repl *r)
{
	if (!r)
		return;
	ev_timer_cancel(r->ev, &r->tick);
	ev_timer_cancel(r->ev, &r->retry);
	ev_timer_cancel(r->ev, &r->ctl_timer);
	ev_undefer(r->ev, &r->rs_kick);
	ev_undefer(r->ev, &r->drop_kick);
	net_dial_close(&r->dial);
	net_dial_close(&r->probe);
	ev_timer_cancel(r->ev, &r->probe_again);
	/* The AL may only be emptied once the data it covers is durable; a
	 * bitmap that could not be written keeps the metadata unclean (V4). */
	if (r->v->bs->ops->sync(r->v->bs) < 0 || bm_sync(r->bm)) {
		log_err("volume %s: could not write the change bitmap", r->v->name);
		r->v->md_failed = true;
	}
	bm_free(r->bm);
	free(r->slots);
	free(r->busy);
	free(r->drain_touched);
	free(r->vfy_redo);
	while (!list_empty(&r->rs_runs)) {
		struct rsrun *run = container_of(r->rs_runs.next, struct rsrun, link);
		list_del(&run->link);
		free(run);
	}
	bufpool_drain(&r->pool);
	if (arena_empty(&r->ab_arena)) /* else entries outlive it: left mapped */
		arena_fini(&r->ab_arena);
	pack_free(r->pk);
	vol_slow_watch(r->v, 0, 0, NULL, NULL);
	r->v->repl = NULL;
	r->v->repl_ops = NULL;
	r->v->repl_ctx = NULL;
	free(r);
}
