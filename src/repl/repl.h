/* Replication of one volume with its peer node: the connection, the sync
 * write path, the generation handshake, the change bitmap and resync.
 * Protocol: include/proto/repl.h, docs/PROTOCOL-REPL.md.
 *
 * States (SPEC.md): connection standalone|connecting|connected; replication
 * off|established|syncsource|synctarget; per connection, its handshake stage;
 * the verify. Each is written only by its set function in repl_state.c
 * (repl_set_cstate, repl_set_rstate, hs_set_stage, verify_set_state), whose
 * legal[][] table is these lines. Transitions:
 *   connection  standalone -> connecting    [repl_start, `connect`: repl_connect]
 *               connecting -> connected     [handshake verdict (equal, source,
 *                                            target): handshake_decide]
 *               connected  -> connecting    [peer lost (timeout, reset, protocol
 *                                            error): conn_lost]
 *               any        -> standalone    [`disconnect`: repl_disconnect,
 *                                            repl_shutdown, conn_lost]
 *   replication off -> established|syncsource|synctarget  [handshake verdict:
 *                                                          handshake_decide]
 *               established -> syncsource  [rs_start_live: verify found
 *                                           differences, or the peer failed a write]
 *               established -> synctarget  [msg_rs_start: RS_START]
 *               syncsource|synctarget -> established      [RS_DONE: rs_finish,
 *                                                          rs_done_flushed]
 *               any -> off                                [connection lost: conn_lost]
 *   handshake   (new connection) -> hello   [rconn_new]
 *    (stage)    hello -> auth               [on_hello: the peer names this volume]
 *               auth -> state               [msg_auth: the peer knows the secret]
 *               state -> bitmap             [hs_state: the peer's STATE]
 *               bitmap -> run               [handshake_decide: BITMAP_END, a verdict]
 *   verify      none|done|aborted -> running [`verify`: repl_verify]
 *               running -> done             [vfy_finish]
 *               running -> aborted          [rs_abort: the connection is gone]
 *   disk (this node) uptodate -> outdated     [a secondary loses its primary peer
 *                                              (with a witness: its claim is refused)]
 *                    consistent -> outdated   [the witness refuses its claim, or
 *                                              names another primary: repl_quorum.c]
 *                    outdated -> uptodate     [verdict equal]
 *                    (start) -> consistent    [opened up to date, not just created: R9]
 *                    consistent -> uptodate   [verdict equal or source; --force]
 *                    any but failed -> inconsistent [becoming sync target; `invalidate`]
 *                    failed -> inconsistent   [`attach` only (F1): a new store;
 *                                              the old one of a secondary goes on
 *                                              to consistent or outdated (F2)]
 *                    inconsistent -> uptodate [RS_DONE]
 *                    inconsistent -> outdated [RS_DONE from an outdated source: R13]
 *                    inconsistent -> consistent [`primary --force` restores the image
 *                                                kept before the resync: repl_cp.c]
 *   role  secondary -> primary  [`primary`: disk uptodate, or --force; peer not primary:
 *                                repl_promote]
 *         primary -> secondary  [`secondary`: once in-flight writes are done: repl_demote]
 *   (disk and role belong to the volume: vol_set_disk and vol_set_role write them)
 * Invariants:
 *   F1. A failed disk is latched: nothing makes it a sync target (the
 *       handshake leaves a pair with a failed disk established, RS_START
 *       onto it ends the connection) but `attach`, which opens a store and
 *       resyncs it fully. A peer whose disk failed gets no data (peer_ready
 *       is false): writes are marked for it as while it is away. A
 *       secondary's disk that stays too slow (disk-slow-ms for disk-slow-s,
 *       vol_slow_watch) fails the same way while its primary serves.
 *   F2. A secondary's old disk attached again keeps its data and generation
 *       (consistent, or outdated if it was when it failed): it held every write it acknowledged before it failed,
 *       and a primary that acknowledges a write without it starts a new
 *       generation first (fg_finish, peer_failed, fg_dispatch; and when
 *       the STATE that says its disk is gone finds marks for it here,
 *       run_state), so the next
 *       connect either copies it what changed or, when the primary is
 *       diskless and kept the generation, makes it the up-to-date copy.
 *   D4. A diskless primary counts a write as done on its peer only when the
 *       peer's copy is whole (up to date: peer_whole), never on a sync
 *       target: otherwise the write fails, and its old disk still holds
 *       every acknowledged write (P7).
 *   R1. A front-end write completes only after the local store and, when the
 *       peer is connected, the peer completed it; if the peer is lost first,
 *       its region is marked out of sync (durably) before it completes.
 *   R2. Every region written is durably marked in the change bitmap before
 *       the write is issued anywhere (bitmap.h B2).
 *   R3. Overlapping writes are issued to both nodes in the same order: a
 *       write waits while an earlier overlapping one is in flight.
 *   R4. A resync read that a foreground write overlaps is discarded, never
 *       sent; resync data already queued for the peer stays ahead of that
 *       write on the wire (its data was read before the write). The
 *       foreground write never waits for resync to read or compare; it waits
 *       only behind the resync data queued for its own blocks.
 *   R5. A secondary applies overlapping writes in arrival order and a FLUSH
 *       after every write received before it; every write an older
 *       connection still holds (applying or waiting its turn) is applied
 *       before an overlapping one of a newer connection.
 *   R6. Only a primary sends data; a node that receives data while primary
 *       drops the connection.
 *   R7. When a primary loses its peer, every region the peer may lack is
 *       marked out of sync: every extent of the activity log, or, after an
 *       orderly disconnect whose FLUSH the peer completed, exactly the
 *       regions written since that FLUSH was sent (and those in flight then);
 *       when any region is marked, the primary starts a new data generation
 *       at once (gen_branch), so its copy of them is the newer one.
 *   R8. A node's content is "created empty" (the shared first generation)
 *       only when its data area was created by Tandem together with the
 *       pair; a disk that held data, or a volume that ran unreplicated, has
 *       a generation of its own, so a new peer of it gets a full sync.
 *   R9. A disk is uptodate only while this run of the node knows it: after
 *       a start it is at most consistent until a connect decides (equal or
 *       source), so a node that missed its peer's writes is never promoted
 *       without --force; the tie-break of two secondaries ranks uptodate
 *       over consistent over outdated.
 *  R10. A write, resync piece or flush of the primary that fails on the
 *       secondary makes the secondary's disk inconsistent (persisted before
 *       it answers); the primary marks the regions (a failed flush: every
 *       extent of the activity log, not the volume) and copies them to it
 *       again at once (RS_START), or on the next connect.
 *  R11. A primary steps down only once its activity log is empty (a FLUSH
 *       on both nodes), or, when that flush fails, its extents are marked
 *       out of sync: nothing the peer acknowledged is left only in the
 *       peer's volatile cache when the peer becomes primary.
 *  R12. A peer is judged dead only by its silence while this node reads:
 *       time spent not reading the link (the apply limit) counts only while
 *       no apply completes either (then the local disk stalls).
 *  R13. A resync target ends as current as its source: up to date, or
 *       outdated when the source was (it may lack writes a primary
 *       acknowledged alone); an outdated pair needs `primary --force`.
 *  R14. "Crashed as primary" (the STATE flag that makes a copy the source
 *       of the marked regions when generations are equal, G12) speaks only
 *       of the data the crash left: it holds from the start until the first
 *       handshake whose verdict both sides confirmed, or a promotion. A node
 *       that crashed as primary long ago and was a secondary since never
 *       wins a later handshake by it.
 * Owns: the connection(s) of its volume, the change bitmap.
 * Never: serves front-end I/O by itself (the volume hands it writes through
 * its hook, struct vol_repl_ops, which repl_new fills in). */
#ifndef TANDEM_REPL_H
#define TANDEM_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../config/config.h"
#include "../ev/ev.h"

struct vol;
struct repl;
struct repl_server;

/* The period of a volume's tick (or a quarter of peer-timeout if shorter):
 * the rules on time (peer-timeout, the keepalive, the cleaner) are checked
 * on it. */
#define REPL_TICK_NS (100ull * 1000000ull)

enum repl_conn_state { RC_STANDALONE = 0, RC_CONNECTING, RC_CONNECTED };
/* RR_VERIFYING is shown (status, events) while a verify runs; internally the
 * state stays RR_ESTABLISHED. */
enum repl_rep_state { RR_OFF = 0, RR_ESTABLISHED, RR_SYNCSOURCE, RR_SYNCTARGET, RR_VERIFYING };
const char *repl_conn_name(enum repl_conn_state s);
const char *repl_rep_name(enum repl_rep_state s);

struct repl_status {
	const char *peer;
	enum repl_conn_state conn;
	enum repl_rep_state rep;
	int peer_disk;    /* enum vol_disk, or -1 unknown */
	int peer_role;    /* enum vol_role, or -1 unknown */
	uint64_t out_of_sync_bytes;
	double sync_percent;
	uint64_t resync_bytes_per_sec;
	uint64_t resync_window_bytes;  /* the controller's window; 0 when idle */
	uint64_t resync_request_bytes; /* ... and request size */
	uint64_t resync_sent_bytes, resync_zero_bytes, resync_same_bytes; /* this connection */
	const char *verify;            /* none|running|done|aborted */
	double verify_percent;
	uint64_t verify_mismatch_ranges, verify_mismatch_bytes;
	bool split_brain;
	const char *error; /* last refusal or failure, "" if none */
	uint64_t gen_current, gen_bitmap;
	int quorum;                  /* 1 yes, 0 no; -1 no witness configured */
	bool witness_session;        /* the witness session is up */
	const char *witness_primary; /* the primary the witness names, "" none/unknown */
	unsigned held_writes;        /* writes waiting for quorum */
	/* async (docs/ASYNC.md) */
	bool async, ahead, blocked;
	bool behind;                  /* sync target of a catch-up after the primary went ahead */
	uint64_t backlog_bytes;       /* streamed, not yet acknowledged by the peer */
	uint64_t backlog_reserved;    /* memory set aside for the backlog */
	uint64_t backlog_resident;    /* ... of it resident so far */
	uint64_t lag_bytes;           /* what the peer lacks: backlog and out-of-sync regions */
	double lag_seconds;           /* the peer holds every write acknowledged before then */
	uint64_t consistent_point_ns; /* CLOCK_REALTIME of that; 0 the peer holds none */
	double eta_seconds;           /* to catch up at the observed rate; -1 unknown */
	/* this node's kept consistent image during a resync (repl_cp.c) */
	bool cp_have;
	uint64_t cp_time_ns;
	const char *cp_note; /* why there is none, while that matters; "" otherwise */
	/* the link to the peer, since the daemon started */
	uint64_t link_wire_bytes; /* everything sent on the replication connections */
	uint64_t link_data_bytes; /* write and resync data sent as data */
	uint64_t link_zero_bytes; /* data sent as zero extents instead */
	uint64_t link_send_bytes_per_sec;
	double link_rtt_ms; /* the last keepalive's round trip; 0 none yet */
	uint64_t peer_silent_ns; /* since the peer was last heard, as peer-timeout
				  * sees it (moved at each tick); 0 not connected */
	/* compression: the codec sent with ("none" unless the peer takes it) */
	const char *link_compression;
	uint64_t link_compressed_in_bytes;    /* data that went out compressed ... */
	uint64_t link_compressed_out_bytes;   /* ... and the bytes sent for it */
	uint64_t link_compress_skipped_bytes; /* data tested, sent as is */
	double link_compress_cpu_ms;
	uint64_t link_decompressed_bytes; /* data received compressed */
	double link_decompress_cpu_ms;
	char link_tls[64];  /* "TLSv1.3 CIPHER" on a TLS connection, else "" */
};

/* Opens the change bitmap and prepares the volume's replication with the
 * other node of cfg->volumes[vi]; v->repl is set. */
int repl_new(struct ev_loop *ev, const struct cfg *cfg, unsigned vi, unsigned self,
	     struct vol *v, char *err, size_t errlen);
void repl_start(struct repl *r);
/* Before repl_start: quorum and failover through this node's witness
 * session (docs/WITNESS.md); without it the volume has no quorum rule. */
struct wit_client;
int repl_use_witness(struct repl *r, struct wit_client *wc);
/* Before repl_start: tls = on, the connections this node dials speak TLS
 * (net/tls.h); the caller keeps tls until after repl_free. */
struct net_tls_ctx;
void repl_use_tls(struct repl *r, struct net_tls_ctx *tls);
/* Shutting down: writes held for quorum fail (never acknowledged). */
void repl_release_held(struct repl *r);
/* Drops the connection; in-flight writes complete (peer part marked out of
 * sync). Call before the volume is closed. */
void repl_shutdown(struct repl *r);
bool repl_idle(const struct repl *r);
void repl_free(struct repl *r); /* persists the bitmap; NULL is a no-op */

/* Admin. Return 0 done, -EAGAIN not yet (ask again), or -errno with msg. */
int repl_promote(struct repl *r, bool force, char *msg, size_t len);
int repl_demote(struct repl *r, char *msg, size_t len);
int repl_connect(struct repl *r, char *msg, size_t len);
int repl_disconnect(struct repl *r, char *msg, size_t len);
int repl_invalidate(struct repl *r, char *msg, size_t len);
/* F1: a new store (path, or the old one reopened: NULL) for a failed disk.
 * On a secondary a new one is filled by a full resync from the peer, the
 * old one comes back as a restarted disk would (F2); on a diskless primary it is filled
 * from the peer (P1-P4) or, with no peer to fill it, taken back (P7). */
int repl_attach(struct repl *r, const char *path, char *msg, size_t len);
/* A planned switchover: makes node `to` (NULL: the one that is not primary
 * now) primary; the primary demotes first (R11), then the other promotes.
 * Polled like the others: -EAGAIN while under way. */
int repl_switchover(struct repl *r, const char *to, char *msg, size_t len);
/* Starts an online verify: this node reads, the peer compares digests;
 * differing ranges are reported and marked, then resynced from this node. */
int repl_verify(struct repl *r, char *msg, size_t len);
/* 1 in sync, 0 not yet, -errno never without an operator (msg says why). */
int repl_in_sync(const struct repl *r, char *msg, size_t len);
void repl_get_status(const struct repl *r, struct repl_status *st);
/* `set VOLUME KEY=VALUE` (replication, async-backlog, async-max-lag,
 * on-congestion): 0 or -EINVAL with msg; in effect at once, until restart. */
int repl_set(struct repl *r, const char *key, const char *val, char *msg, size_t len);

/* The node's replication listener: routes each connection to its volume. */
int repl_server_new(struct ev_loop *ev, const struct cfg *cfg, unsigned self,
		    struct vol **vols, unsigned nvols, struct repl_server **out);
/* Right after repl_server_new: accepted connections speak TLS. */
void repl_server_use_tls(struct repl_server *s, struct net_tls_ctx *tls);
void repl_server_shutdown(struct repl_server *s);
unsigned repl_server_conns(const struct repl_server *s);
void repl_server_free(struct repl_server *s);

#endif
