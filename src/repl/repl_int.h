/* The private header of src/repl: the structures every part of the
 * replication engine shares, and the functions each file offers the others
 * (grouped by the file that defines them). repl.h has the states,
 * transitions and invariants; include/proto/repl.h the wire format.
 * Never included outside src/repl. */
#ifndef TANDEM_REPL_INT_H
#define TANDEM_REPL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../bm/bitmap.h"
#include "../common/arena.h"
#include "../common/bufpool.h"
#include "../common/list.h"
#include "../common/util.h"
#include "../net/peer.h"
#include "../vol/vol.h"
#include "../wit/wit_client.h"
#include "repl.h"
#include "repl_codec.h"
#include "repl_gen.h"
#include "repl_pack.h"
#include "rsctl.h"

#define RX_BUF (64u * 1024u)
#define NSLOTS 65536u               /* peer requests awaiting an ack, by seq */
#define RS_MAX_RUN (1u << 20)       /* most bytes of consecutive marked regions in one run */
#define RS_MIN_PIECE (4u << 10)     /* smallest resync request (the controller's floor) */
#define RS_MAX_PIECE (1u << 20)     /* largest resync request */
#define VFY_CHUNK (256u << 10)      /* verify compares digests of this much (or a region) */
#define VFY_MAX_INFLIGHT (8u << 20) /* verify reads in flight at most */
#define APPLY_MAX_BYTES (64u << 20) /* secondary: stop reading beyond this */
#define RETRY_MIN_MS 200u
#define RETRY_MAX_MS 2000u
#define CLEAN_EVERY_NS (2ull * 1000000000ull)
#define DRAIN_MAX_NS (2ull * 1000000000ull) /* an orderly disconnect waits this long at most */

enum kind { K_FG = 1, K_RS, K_APPLY, K_CLEAN, K_ASYNC, K_READ };
enum { AB_NONE = 0, AB_STREAMED, AB_MARKED }; /* vol_rep.ab */

enum hs_stage { ST_HELLO = 0, ST_AUTH, ST_STATE, ST_BITMAP, ST_RUN };

struct rmsg {
	struct net_tx tx;
	struct rconn *c;
	uint32_t len, cap;
	uint8_t buf[];
};

struct rapply {
	struct vol_io io;
	struct rconn *c;
	uint64_t seq;
	uint16_t type;
	uint8_t digest[REPL_DIGEST_LEN]; /* CSUM: the sender's */
	/* a compressed payload (unpack_begin): received into zbuf, then
	 * decompressed into io.buf */
	void *zbuf;
	uint32_t zlen;
	uint16_t codec; /* REPL_HF_* */
	struct list link;
};

/* Consecutive out-of-sync regions being copied, in pieces. Once every piece
 * is done, the bits of its regions are cleared, except those spoiled: a piece
 * there failed, went stale or was skipped, or a foreground write there
 * failed on a node. */
#define RUN_BITS (RS_MAX_RUN / 4096u)
struct rsrun {
	uint64_t off, len, next;         /* bytes; next: first byte not yet issued */
	unsigned pending;                /* pieces in flight */
	uint64_t spoiled[RUN_BITS / 64]; /* by region of the run */
	struct list link;                /* repl.rs_runs */
};

/* A resync piece (run != NULL) or a verify request (run == NULL).
 * Phases: READ (local read) -> CSUM (digest sent, verdict awaited) and/or
 * DATA (RS_DATA or RS_ZERO sent, ack awaited). */
enum rq_phase { RQ_READ = 0, RQ_CSUM, RQ_DATA };

struct rsreq {
	struct vol_io io;
	struct repl *r;
	struct rsrun *run;
	uint8_t phase;
	bool zero; /* all zero at the source: RS_ZERO, no payload */
	int ares;  /* the peer's answer */
	uint64_t sent_ns, acked_ns;
	uint8_t digest[REPL_DIGEST_LEN];
	struct list link; /* repl.rs_inflight */
};

enum vfy_state { VFY_NONE = 0, VFY_RUNNING, VFY_DONE, VFY_ABORTED };

struct rconn {
	struct net_peer peer;    /* socket and life; each queued apply holds a reference */
	struct repl *r;          /* bound volume; NULL until HELLO on the accepting side */
	struct repl_server *srv; /* accepting side */
	bool dialer;
	uint64_t features;      /* both sides know these */
	enum hs_stage hs_stage; /* hs_set_stage only */
	bool got_auth, sent_bm, got_bm_end, aborted, checked_decision;
	bool got_contract;           /* the peer's CONTRACT came in the handshake (K1) */
	unsigned ct_out;             /* contract changes sent, not yet answered (K2) */
	enum repl_rep_state decided; /* what this side's handshake decided */
	uint8_t sent_disk;           /* the disk state in the last STATE sent */
	bool sent_marks;             /* the last STATE sent carried marks (oos_bits) */
	unsigned target_fails;       /* applies that failed while sync target (R10) */
	uint8_t nonce_me[REPL_NONCE_LEN], nonce_peer[REPL_NONCE_LEN];
	char peer_node[REPL_NAME_LEN];
	struct repl_state pst;
	struct repl_msg m;
	bool have_hdr;
	/* apply side */
	struct list applying, apply_wait;
	unsigned napply;
	uint64_t apply_bytes;
	struct rapply *rx_cur;
	struct vol_io *rd_cur; /* primary: the read whose RDATA payload is coming in */
	/* batched acks, sent at the end of the loop pass */
	struct rmsg *ack;
	uint32_t nack;
	struct ev_deferred ack_flush;
	uint64_t last_rx_bytes, last_rx_ns;
	uint64_t napplied, last_napplied; /* applies completed (R12) */
	uint64_t born_ns; /* a handshake must be done within the peer timeout of this */
	uint64_t order;   /* bound to its volume after every connection of a smaller one */
	bool cp_pending;  /* RS_START: reading waits until the applies before it are done (CP1) */
	struct list link; /* in the server's list, then in repl.bound */
};

struct repl {
	struct ev_loop *ev;
	const struct cfg *cfg;
	struct vol *v;
	unsigned self, peer_ix;
	bool dialer;
	bool first_node; /* this node is the volume's first in `nodes` */
	const struct cfg_volume *cv;
	char secret[CFG_NAME_MAX * 2];
	uint64_t timeout_ns;
	struct bm *bm;
	enum repl_conn_state cstate; /* repl_set_cstate only */
	enum repl_rep_state rstate;  /* repl_set_rstate only */
	bool admin_down, shutting_down;
	struct rconn *conn;
	/* dialing */
	struct net_dial dial;    /* dial.busy: a connect is in progress */
	struct net_tls_ctx *tls; /* tls = on: the dialed connection's TLS */
	struct ev_timer retry;
	unsigned backoff_ms;
	struct sockaddr_storage dial_sa;
	socklen_t dial_salen;
	/* after a lost connection (L3, repl_lease.c): when the peer was last
	 * heard from, and whether a connect to its address was refused since */
	uint64_t peer_rx_ns;
	bool peer_gone;
	bool peer_gone_claim;  /* the next claim says so (WIT_F_PEER_GONE), once */
	struct net_dial probe; /* that connect; probe_t0: when it began */
	uint64_t probe_t0;
	struct ev_timer probe_again; /* the next try (a dying daemon may accept) */
	unsigned probe_tries;
	/* what the peer said last */
	bool have_peer;
	struct repl_state peer;
	char error[200];
	bool split_brain;
	/* write path */
	uint64_t next_seq;
	struct vol_io **slots;
	struct list inflight, waiting;
	/* resync (and verify: the same pump, window and requests) */
	struct list rs_inflight; /* rsreq */
	struct list rs_runs;     /* rsrun */
	struct rsrun *rs_run;    /* pieces are being taken from this one */
	unsigned rs_flushing;    /* RS_DONE flushes in flight */
	uint64_t rs_bytes, rs_cursor, rs_total, rs_done_bytes;
	double rs_pct_shown; /* sync_percent never goes backwards within a resync */
	uint64_t rs_sent_bytes, rs_zero_bytes, rs_same_bytes; /* this connection */
	struct rsctl ctl;
	struct ev_timer ctl_timer;
	bool ctl_armed, csum;
	uint64_t features; /* negotiated with the peer of this connection */
	/* verify */
	enum vfy_state vfy_state; /* verify_set_state only */
	uint64_t vfy_cursor, vfy_done, vfy_ranges, vfy_bytes, vfy_t0, vfy_t1;
	uint64_t *vfy_redo; /* offsets to compare again */
	unsigned vfy_nredo, vfy_redo_cap;
	uint64_t rate_t0, rate_b0, rate_bps;
	uint64_t rs_cap;  /* resync-rate: bytes/s, 0 = auto */
	double rs_tokens; /* token bucket for rs_cap */
	uint64_t rs_tokens_ns;
	uint64_t rs_hold_ns; /* no resync requests before this (the peer failed one) */
	uint64_t rs_floor;   /* resync-min-rate: bytes/s the resync keeps under load */
	double rs_floor_tokens;
	uint64_t rs_floor_ns;
	struct repl_linkcap *link; /* resync-link-rate, shared with the volumes to this peer */
	struct ev_deferred rs_kick, drop_kick;
	/* keepalive and cleaner */
	struct ev_timer tick;
	uint64_t last_ping_ns, last_clean_ns, last_progress_ns, ping_cookie;
	uint64_t tick_ns; /* when tick() last ran: a late one means a stall here */
	uint64_t *busy;
	bool cleaning, clean_failed, demote_flushing;
	unsigned clean_parts;
	struct vol_io clean_local, clean_peer;
	struct bm_waiter clean_w;
	/* orderly disconnect (repl_disconnect on an in-sync primary): a FLUSH to
	 * the peer first; what was written since it started is all that the peer
	 * may lack once the connection is gone (R7) */
	bool draining, drain_clean;
	uint64_t drain_t0;
	uint64_t *drain_touched; /* regions written since the drain began */
	struct vol_io drain_flush;
	unsigned nbound;     /* connections bound to this volume, alive or draining */
	uint64_t conn_order; /* the last rconn.order given */
	struct list bound;   /* ... all of them (rconn.link) */
	struct bufpool pool; /* data buffers of resync and applied requests */
	/* demotion: the peer has heard of it once its pong for this cookie is back */
	uint64_t demote_cookie;
	/* witness and quorum (repl_quorum.c, docs/WITNESS.md) */
	struct wit_client *wc; /* NULL: no witness configured */
	bool w_up;             /* the session is up */
	bool auto_failover;    /* failover = auto */
	uint64_t w_seq;        /* last seq sent (REPORT and CLAIM) */
	bool w_rep_valid;      /* w_rep_* were sent on this session */
	uint32_t w_rep_flags;
	uint64_t w_rep_gen;
	uint64_t w_rep_ring[16]; /* seq << 8 | flags of recent REPORTs, by seq */
	uint64_t w_synced_seq;   /* the last REPORT sent with SYNCED (N2) */
	uint64_t w_synced_acked; /* ... once the witness acknowledged it */
	bool w_gone_synced;      /* the last report was SYNCED (D2: a primary whose
				  * disk is gone keeps it while its peer is away) */
	uint64_t w_alone_seq;    /* the newest REPORT acked on this session as primary, !SYNCED */
	uint64_t w_alone_gen;    /* ... the generation it carried (Q8) */
	uint64_t w_rep_gens[16]; /* the generation of recent REPORTs, by seq */
	bool w_release;          /* the next secondary REPORT is an orderly demotion (W2) */
	uint8_t w_claim_want;    /* enum claim_why: a CLAIM is wanted */
	uint64_t w_claim_seq;    /* the CLAIM awaiting its reply; 0 none */
	uint64_t w_claim_ns;     /* when the last CLAIM was sent */
	bool w_claim_force;      /* the admin claim is `primary --force`'s */
	int w_claim_result;      /* an admin claim: 0 none yet, -errno failed */
	char w_claim_msg[160];
	bool admin_grant;   /* N8a: an admin claim granted, not yet promoted (admin_finish) */
	uint64_t w_rec_gen; /* the record's generation as last heard (N13) */
	char w_primary[WIT_NAME_LEN]; /* the record's primary as last heard */
	bool w_heard;                 /* ... heard at all on this session */
	uint64_t w_heard_min_seq;     /* ... from answers to this seq or later (Q5) */
	bool quorum;                  /* shown in status */
	uint64_t q_start_ns;          /* quorum_start: claims of a starting node wait a while */
	uint64_t noquorum_ns;         /* a primary without quorum since; 0 it has it */
	struct list held;             /* writes waiting for quorum (N1) */
	unsigned nheld;
	struct ev_timer q_timer;
	/* planned switchover (repl_switchover, msg_switch) */
	uint8_t sw_step;      /* asked by the peer: REPL_SW_DEMOTE | REPL_SW_PROMOTE; 0 none */
	uint8_t sw_sent;      /* what this node asked of the peer; 0 nothing */
	uint8_t sw_target;    /* a switchover without a node named: 1 this node, 2 the peer */
	bool handing_over;    /* H1: on-disk-failure = handover under way */
	bool handover_owed;   /* H2: stepped down for it; the peer has not taken over */
	uint64_t handover_t0; /* ... since */
	uint64_t handover_retry_ns; /* ... not tried again before this */
	uint64_t sw_t0;             /* ... decided then (a later command decides again) */
	uint64_t sw_done_ns;        /* when the peer took over as this node asked (the
				link may drop right after: tandemctl still hears of it) */
	struct ev_timer sw_timer;   /* polls the asked step */
	/* the lease (repl_lease.c, docs/WITNESS.md L1-L6); times CLOCK_BOOTTIME */
	uint64_t lease_dur_ns;
	uint64_t lease_peer_end;         /* from the peer's PONGs (L2) */
	uint64_t ping_ck[8], ping_at[8]; /* PINGs sent to the peer, by cookie */
	bool w_named;                    /* the witness named this node on this session */
	bool lease_shown;                /* the lease as last announced (event, log) */
	/* the asynchronous stream (repl_async.c) */
	bool async;              /* replication = async */
	bool congestion_block;   /* on-congestion = block */
	uint64_t ab_cap;         /* async-backlog */
	uint64_t max_lag_ns;     /* async-max-lag; 0 none */
	bool ab_ahead;           /* writes are marked, not streamed */
	bool behind;             /* secondary: the resync running is a catch-up after ahead */
	bool ab_blocked;         /* writes wait for room */
	bool ab_lag_warned;      /* the lag event said "warning" last */
	struct arena ab_arena;   /* where entries live (heap when it is full) */
	struct list ab_queue;    /* entries not yet handed to the connection */
	struct list ab_sent;     /* ... handed to it, ack awaited */
	struct list ab_wait;     /* front-end writes waiting (vol_rep.wlink) */
	struct list ab_fgdone;   /* A11: writes whose entry answered, to complete (wlink) */
	uint64_t ab_bytes;       /* data in both lists: the backlog */
	uint64_t ab_net_bytes;   /* handed to the connection, not yet written */
	uint64_t ab_share_bytes; /* stream sent since the last resync request (A5) */
	uint64_t ab_behind_ns;   /* the peer lacks writes not streamed since; 0 it does not */
	uint64_t ab_sn;          /* the next entry's stream number (A7) */
	uint64_t rs_need_sn;     /* A8: entries below this number were made before a resync
				    read: RS_DONE waits until the peer has applied them */
	bool rs_start_wait;      /* A9: RS_START waits for the entries queued before it */
	uint64_t ab_acked_bytes, ab_drain_acc, ab_drain_t0;
	double ab_drain_bps;
	struct ev_deferred ab_kick;
	/* a disk attached to this primary, brought up to date by reading
	 * from the peer (repl_pull.c, P1-P4) */
	bool pulling, pull_flushing, pull_paused;
	bool peer_only;           /* since the disk failed (or a fill began), some write's only copy
			  went to the peer: the old disk alone is not complete */
	unsigned peer_only_fails; /* ... the v->disk_fails it was set under (P7) */
	bool pull_resync;         /* P6: stopped by a demotion; a resync is to fill the disk */
	unsigned pull_fg_reads;   /* client reads through the peer in flight (the controller's) */
	int pull_err;             /* a piece failed in this pass */
	unsigned pull_inflight;
	uint64_t pull_cursor; /* the next bitmap chunk to look at */
	uint64_t pull_bytes, pull_total;
	struct vol_io pull_flush;
	/* the consistent image kept during a resync (repl_cp.c, CP1-CP3) */
	bool cp_have;
	uint64_t cp_time_ns; /* CLOCK_REALTIME when it was taken */
	char cp_why[200];    /* why none is kept, while a resync runs */
	/* link statistics (status "link"), since the daemon started */
	uint64_t lk_data_bytes; /* WRITE and RS_DATA payload sent as data */
	uint64_t lk_zero_bytes; /* sent as extents: zero writes, ZERO, TRIM, RS_ZERO */
	uint64_t lk_wire_prev;  /* bytes on the wire of connections gone */
	uint64_t lk_rtt_ns;     /* the last PING's round trip; 0 none yet */
	uint64_t lk_rate_bps, lk_rate_t0, lk_rate_b0; /* wire send rate, per second */
	/* compression (repl_pack.c): the codec this volume sends with
	 * (REPL_HF_*, 0 none), the codecs' contexts, and what they did */
	uint16_t pack_codec;
	struct pack *pk;
	uint64_t lk_pack_in, lk_pack_out;  /* data compressed, and what was sent for it */
	uint64_t lk_pack_skip;             /* data tested and sent as is */
	uint64_t lk_pack_ns, lk_unpack_ns; /* time spent compressing, decompressing */
	uint64_t lk_unpack_out;            /* data decompressed (received compressed) */
};

/* The resync budget of all volumes between this node and one peer
 * (resync-link-rate): a token bucket they all draw from. */
struct repl_linkcap {
	uint64_t cap; /* bytes/s; 0 none */
	double tokens;
	uint64_t t_ns;
};

struct repl_server {
	struct ev_loop *ev;
	const struct cfg *cfg;
	unsigned self;
	/* connections not yet bound to a volume; one that says no HELLO within
	 * the peer timeout is dropped (the handshake timer of net_srv) */
	struct net_srv srv;
	struct vol *vols[CFG_MAX_VOLUMES];
	unsigned nvols;
	struct repl_linkcap links[CFG_MAX_NODES]; /* by peer node */
	struct net_tls_ctx *tls;                  /* tls = on: every accepted connection's TLS */
};

/* Message handlers (msg_*, named in the message table in repl_conn.c):
 * each returns 0 (go on reading), 1 (a payload follows: receive it directly
 * into c->rx_cur) or -1 (the connection ends: stop reading). */

/* repl.c: object life, generations and persistent state */
const char *peer_name(const struct repl *r);
bool overlap(uint64_t a, uint64_t al, uint64_t b, uint64_t bl);
struct md_sb *sb(struct repl *r);
void gen_branch(struct repl *r);
void gen_rotate(struct repl *r, struct rconn *c);
bool disk_consistent(enum vol_disk d);

/* repl_quorum.c: the witness session, quorum, claims and failover */
enum claim_why { CLAIM_NONE = 0, CLAIM_AUTO, CLAIM_ADMIN };
int quorum_init(struct repl *r, struct wit_client *wc);
void quorum_start(struct repl *r);
void quorum_shutdown(struct repl *r);
/* fg_finish: true when io must wait for quorum (N1); it is completed later. */
bool quorum_hold(struct repl *r, struct vol_io *io);
/* conn_lost on a secondary whose primary went: true when a claim is made
 * instead of marking the disk outdated (N6). */
bool quorum_peer_lost(struct repl *r);
void quorum_kick(struct repl *r);
bool quorum_release_again(struct repl *r);
void quorum_peer_role(struct repl *r);
/* Steps down for good reason (deposed, or L6: a primary peer with a lease):
 * held writes fail, the branch written alone is given up (N5), the disk is
 * outdated and the connection starts over. */
void quorum_yield(struct repl *r, const char *primary, const char *why);
/* Whether a secondary may be promoted by hand (repl_promote, admin_granted):
 * 0, or -errno and why in msg. */
int promote_check(const struct repl *r, bool force, char *msg, size_t len);
/* The common end of a promotion (admin, claim granted): 0 or -errno. */
int promote_now(struct repl *r, char *msg, size_t len);
int promote_forced_prepare(struct repl *r, char *msg, size_t len);
/* repl_quorum.c: finishes an admin claim the witness granted (N8a) */
int admin_finish(struct repl *r, char *msg, size_t len);

/* repl_lease.c: the lease of a primary (docs/WITNESS.md L1-L6) */
void lease_init(struct repl *r);
/* Sends a PING to the peer; its PONG renews the lease from now (L2). */
void peer_ping(struct repl *r, struct rconn *c, uint64_t cookie);
void lease_pong(struct repl *r, struct rconn *c, uint64_t cookie);
/* The peer connection is usable and past its handshake. */
bool peer_connected(const struct repl *r);
bool lease_ok(const struct repl *r);
/* Called by quorum_tick: announces a lease lost or back. */
void lease_tick(struct repl *r);
bool peer_lease_gone(const struct repl *r);
void peer_probe(struct repl *r);

/* repl_admin.c: the peer's part of a planned switchover */
int msg_switch(struct rconn *c, const struct repl_msg *m);
void sw_init(struct repl *r);
void sw_reset(struct repl *r);

/* repl_state.c: the state machines: one writer each */
void repl_set_rstate(struct repl *r, enum repl_rep_state s);
void repl_set_cstate(struct repl *r, enum repl_conn_state s);
void hs_set_stage(struct rconn *c, enum hs_stage s);
void verify_set_state(struct repl *r, enum vfy_state s);

/* Bytes this volume's replication put on the wire so far. */
uint64_t lk_wire_bytes(const struct repl *r);

/* repl_conn.c: connection life: messages out, receiving, peer loss, dialing,
 * keepalive, the listener */
struct rmsg *rmsg_new(uint32_t cap);
bool conn_usable(const struct rconn *c);
void rmsg_send(struct rconn *c, struct rmsg *m);
void send_small(struct rconn *c, const uint8_t *buf, size_t len);
void conn_abort(struct rconn *c);
void dial_cb(struct net_dial *d, int fd);
void dial(struct ev_timer *t);
void schedule_dial(struct repl *r);
void tick(struct ev_timer *t);
void handover_tick(struct repl *r);
void conn_fail(struct rconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Refuses the peer: tells it why (ERROR), then closes once that is sent. */
void conn_refuse(struct rconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* repl_hs.c: the handshake: HELLO, AUTH, STATE, BITMAP and the verdict */
void send_state(struct rconn *c);
void send_hello(struct rconn *c, const char *volume);
int msg_hello(struct rconn *c, const struct repl_msg *m);
int msg_auth(struct rconn *c, const struct repl_msg *m);
int msg_state(struct rconn *c, const struct repl_msg *m);
int msg_bitmap(struct rconn *c, const struct repl_msg *m);
int msg_bitmap_end(struct rconn *c, const struct repl_msg *m);

/* repl_write.c: the primary's write path and the lazy bitmap cleaner */
void meta_send(struct repl *r, struct rconn *c);
/* The volume attributes changed on this primary: sends them to the peer when
 * connected (after every write sent before; a later FLUSH's ack means the
 * peer stored them). Sent again whenever a connection is established. */
void repl_meta_changed(struct repl *r);
bool peer_ready(const struct repl *r);
bool slot_take(struct repl *r, struct vol_io *io);
void fg_put(struct repl *r, struct vol_io *io);
void drop_kick_fn(struct ev_deferred *d);
/* A write, trim, zero or flush of the volume (vol_submit, through the hook). */
void repl_submit(struct repl *r, struct vol_io *io);
/* The rest of fg_go once the stream had its say: the peer part (unless
 * streamed or marked there), then the local write. */
void fg_dispatch(struct repl *r, struct vol_io *io);
void peer_failed(struct repl *r, const struct vol_io *io, int res);
int msg_ack(struct rconn *c, const struct repl_msg *m);
bool peer_flush(struct repl *r, struct vol_io *io, void (*done)(struct vol_io *, int));
void clean_start(struct repl *r);

/* repl_read.c: reads through the peer (vol.h D1; D1, D3 there) */
bool peer_serves(const struct repl *r);
bool peer_whole(const struct repl *r);
bool repl_need_peer(const struct repl *r); /* the disk here is gone, or being pulled */
bool repl_via_peer(const struct repl *r);
int repl_read(struct repl *r, struct vol_io *io, void (*done)(struct vol_io *io, int res));
/* The same for a fill's own read (not a client's: the controller tells them apart). */
int repl_read_bg(struct repl *r, struct vol_io *io, void (*done)(struct vol_io *io, int res));
void rd_acked(struct repl *r, struct vol_io *io, int res);
void rd_lost(struct repl *r, struct vol_io *io);
void rdata_rx_done(struct net_conn *nc, int err);
int msg_rdata(struct rconn *c, const struct repl_msg *m);

/* repl_pull.c: a disk attached to a primary, filled from the peer (P1-P4) */
bool repl_read_remote(const struct repl *r, uint64_t off, uint64_t len);
int pull_start(struct repl *r, bool all);
void pull_tick(struct repl *r);     /* (repl tick: a paused fill goes on) */
void pull_kick_ctl(struct repl *r); /* (the controller's tick) */
/* P6: a demotion ends the fill: 0 once none runs, -EAGAIN while pieces are out. */
int pull_stop(struct repl *r);

/* repl_contract.c: the settings both nodes share (K1-K3) */
void contract_fill(const struct repl *r, struct repl_contract *k, uint8_t flags);
/* 1 when a and b differ in a field that changes a guarantee (why says each,
 * "KEY is A on ME, B on PEER"; warn the others), else 0. */
int contract_compare(const struct repl_contract *a, const struct repl_contract *b, const char *me,
		     const char *peer, char *why, size_t wlen, char *warn, size_t warnlen);
void contract_send(struct rconn *c, uint8_t flags);
int msg_contract(struct rconn *c, const struct repl_msg *m);
int contract_hs_state(struct rconn *c);
int contract_changed(struct repl *r);
/* repl_async.c: the peer's `set` (K2), adopted here */
void contract_adopt(struct repl *r, const struct repl_contract *k, const char *peer);

/* repl_async.c: the asynchronous stream (A1-A6) */
bool ab_empty(const struct repl *r);
void ab_reserve(struct repl *r);
uint64_t ab_lag_ns(const struct repl *r);
/* fg_go's part: true when io goes on (fg_dispatch), false when it waits. */
bool ab_submit(struct repl *r, struct vol_io *io, bool queued_already);
void ab_kick_fn(struct ev_deferred *d);
void ab_acked(struct repl *r, struct vol_io *io, int res);
void ab_lost(struct repl *r, struct vol_io *io);
void ab_conn_lost(struct repl *r);
void ab_mark_busy(struct repl *r, uint64_t *busy);
void ab_caught_up(struct repl *r);
bool ab_push(struct repl *r, uint64_t off, uint64_t len);
bool ab_wait_peer(struct repl *r, struct vol_io *io);
void ab_forget(struct vol_io *io);
bool ab_settled(const struct repl *r, uint64_t sn);
void ab_tick(struct repl *r);
void ab_status(const struct repl *r, struct repl_status *st);

/* repl_cp.c: the consistent image kept during a resync */
void cp_take(struct repl *r);
void cp_none(struct repl *r, const char *why);
void cp_drop(struct repl *r);
void cp_load(struct repl *r);
void cp_tick(struct repl *r);
int cp_restore(struct repl *r, char *msg, size_t len);
int cp_check(const struct repl *r, char *msg, size_t len);

/* repl_apply.c: the secondary's apply path and its batched acks */
void ack_flush_fn(struct ev_deferred *d);
void apply_cp_ready(struct rconn *c);
void data_rx_done(struct net_conn *nc, int err);
int msg_data(struct rconn *c, const struct repl_msg *m);
int msg_meta(struct rconn *c, const struct repl_msg *m);
int msg_set_gen(struct rconn *c, const struct repl_msg *m);

/* repl_pack.c: compressed payloads (REPL_FEAT_COMPRESS). The sender's side
 * is two inline calls, so that a volume without compression pays one
 * branch per message and nothing else. */
void pack_try(struct repl *r, struct vol_rep *rep, const void *buf, uint32_t len);
void pack_put(struct repl *r, struct vol_rep *rep);
/* The payload of the WRITE or RS_DATA whose header is in rep->hdr: buf as
 * is, or compressed when this volume compresses, the peer takes it and the
 * data shrinks enough (then the header says so, and rep->zbuf holds the
 * compressed bytes until pack_sent). */
static inline void pack_payload(struct repl *r, struct vol_rep *rep, void *buf, uint64_t len)
{
	rep->tx.iov[1].iov_base = buf;
	rep->tx.iov[1].iov_len = len;
	rep->tx.iovcnt = 2;
	if (r->pack_codec && (r->features & REPL_FEAT_COMPRESS))
		pack_try(r, rep, buf, (uint32_t)len);
}
/* From the net_tx done callback of rep's message: the compressed copy goes. */
static inline void pack_sent(struct repl *r, struct vol_rep *rep)
{
	if (rep->zbuf)
		pack_put(r, rep);
}
/* msg_data, for a compressed payload: where it is received (a->zbuf);
 * 1 (receive it), or -1 when the connection failed (no feature, no memory). */
int unpack_begin(struct rconn *c, struct rapply *a, const struct repl_msg *m);
/* The payload is in: decompressed into a->io.buf, a->zbuf released. 0, or
 * -1 when it was not what its message said (the connection failed). */
int unpack_end(struct rconn *c, struct rapply *a);
void unpack_drop(struct repl *r, struct rapply *a); /* releases a->zbuf, if any */

/* repl_sync.c: resync and verify, source and target */
void digest_of(const void *buf, size_t len, uint8_t out[REPL_DIGEST_LEN]);
void ctl_tick(struct ev_timer *t);
void oos_mark(struct repl *r, uint64_t off, uint64_t len);
void al_mark(struct repl *r);
void rs_put(struct repl *r, struct rsreq *q);
void rs_acked(struct repl *r, struct rsreq *q, int res);
void rs_start_live(struct repl *r);
void rs_kick_fn(struct ev_deferred *d);
void ctl_arm(struct repl *r); /* the resync controller (rsctl.h) runs */
int msg_rs_done(struct rconn *c, const struct repl_msg *m);
int msg_rs_start(struct rconn *c, const struct repl_msg *m);
void rs_abort(struct repl *r);
void vfy_stop(struct repl *r, const char *why);

#endif
