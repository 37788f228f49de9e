/* A volume replica on this node: the only I/O API the front-ends call.
 * Owns: the data store (src/bs), the metadata (src/md), role and disk state.
 * Never: speaks a front-end protocol; never blocks the loop on I/O.
 *
 * States (SPEC.md): role primary|secondary; disk uptodate|consistent|
 * inconsistent|outdated|diskless|failed. Transitions (the tables of set_role
 * and set_disk in vol.c, the one writers of v->role and v->disk):
 *   disk   (open) -> any            [vol_open: the state in the metadata]
 *          any but failed, diskless -> failed [vol_io_done: the store
 *                                    returned EIO; a metadata write failed (V4)]
 *          failed -> diskless       [vol_detach: a primary whose failed disk
 *                                    has no request left on it, serving
 *                                    through its peer (D1)]
 *          failed|diskless -> inconsistent [attach: a new store; V4 keeps a
 *                                    disk whose metadata failed failed]
 *   role   (open) -> primary        [vol_open: single-node volume]
 *   role   (open) -> secondary      [vol_open: a replicated volume, always]
 *   role   secondary -> primary     [vol_set_role from repl_promote]
 *          primary -> secondary     [vol_set_role from repl_demote]
 * (repl.h has the disk transitions of a replicated volume: uptodate|
 * consistent -> outdated, outdated|consistent -> uptodate, any -> inconsistent,
 * inconsistent -> uptodate|outdated|consistent; every change after vol_open goes through
 * vol_set_disk and vol_set_role.)
 * Invariants:
 *   V1. Only a primary accepts I/O, and only with a disk that is not
 *       gone or through a peer that holds every write (D1: via_peer);
 *       vol_submit fails everything else with -EROFS / -EIO.
 *   D1. Nothing goes to a gone disk (failed, diskless): vol_local fails it
 *       at once with -ENODEV (never -EIO: the store did not fail it). A primary whose disk is gone serves through its peer while
 *       the peer is up to date and connected: writes are complete when the
 *       peer acknowledged them, reads are the peer's (repl READ); a read
 *       that failed on the local store is read there again.
 *   D2. A write whose only copy is on a disk that is gone by the time it
 *       completes (written before the disk was detached, not taken by the
 *       peer) fails with -EIO: a primary whose disk is gone acknowledges
 *       nothing alone, so its witness record stays as it was when the
 *       peer went (synced: the peer may take over without --force).
 *   V2. Every request completes exactly once, from the event loop.
 *   V3. Range locks (COMPARE AND WRITE, ORWRITE): while a lock on [off, len)
 *       is granted, no other write, trim or zero of the volume that overlaps
 *       it is in flight; one submitted meanwhile waits (parked) until the
 *       lock is released. Locks are granted in request order among
 *       overlapping ones; a lock waits for overlapping writes in flight.
 *       A parked write waits only for locks granted or requested before it
 *       (tickets), so a stream of locks cannot starve it, nor it them.
 *   V5. (No stale read, L3) A request is served only while the primary
 *       holds its lease: one submitted without it waits (lease_wait) until
 *       the lease is back, or fails with -ESTALE after VOL_LEASE_WAIT_NS;
 *       a read whose data came back after the lease ran out is not
 *       answered with it but waits and is read again.
 *   V6. (No dirty read) A read that overlaps a write, trim or zero in
 *       flight (written locally perhaps, not yet acknowledged or failed:
 *       held for quorum or for the peer) waits for its outcome
 *       (read_wait), so a read never returns data that is later taken back.
 *   V4. A superblock write that fails fails the disk for good (vol_local
 *       refuses I/O to a failed disk). After any metadata write failed
 *       (superblock or change bitmap; a bitmap write that fails also fails
 *       the writes whose intent it carried) the metadata is never marked
 *       clean: the next start takes every activity-log extent as out of
 *       sync, as after a crash.
 */
#ifndef TANDEM_VOL_H
#define TANDEM_VOL_H

#include <stdbool.h>
#include <stdint.h>

#include "../bs/bs.h"
#include "../common/list.h"
#include "../config/config.h"
#include "../md/md.h"
#include "../net/net.h"
#include "../bm/bitmap.h"

struct repl;
struct vol_io;

/* The replication hook: src/repl fills it in (with its context) when it
 * attaches to a replicated volume, so that vol never calls into src/repl. */
struct vol_repl_ops {
	/* A write, trim, zero or flush of the replicated volume (vol_submit
	 * hands it over); the replication completes it with vol_complete. */
	void (*submit)(void *ctx, struct vol_io *io);
	/* The volume attributes changed on this primary (vol_meta_set). */
	void (*meta_changed)(void *ctx);
	/* The peer's role as last heard (enum vol_role), or -1 when the peer is
	 * not connected (ALUA: the other port group's state). */
	int (*peer_role)(void *ctx);
	/* A planned switchover that makes this node (to_self) or the peer
	 * primary (ALUA's SET TARGET PORT GROUPS): 0 done, -EAGAIN under way
	 * (ask again), -errno with msg saying why. */
	int (*switchover)(void *ctx, bool to_self, char *msg, size_t len);
	/* Whether this primary holds its lease now (docs/WITNESS.md L1-L6),
	 * on a fresh clock: true where no lease applies (no witness). */
	bool (*lease_ok)(void *ctx);
	/* D1: this primary's disk is gone and its peer holds every write:
	 * requests are served through the peer. */
	bool (*via_peer)(void *ctx);
	/* D1: requests need the peer here (the disk is gone, or being filled
	 * from the peer); then they are served only while via_peer. */
	bool (*need_peer)(void *ctx);
	/* D1: a read of [off, len) must be the peer's (the disk here is gone,
	 * or lacks part of the range yet). */
	bool (*read_remote)(void *ctx, uint64_t off, uint64_t len);
	/* D1: reads io from the peer; done(io, res) later, from the loop.
	 * 0 sent, or -errno (not sent, done is not called). */
	int (*read)(void *ctx, struct vol_io *io, void (*done)(struct vol_io *io, int res));
};

enum vol_role { VOL_SECONDARY = 0, VOL_PRIMARY };
/* VOL_CONSISTENT: a replicated disk that was up to date when its node last
 * ran, and has not reached its peer since this start (R9): it may lack
 * writes the peer acknowledged meanwhile, so it is not promoted without
 * --force (or, later, the witness) until a connect says it is up to date. */
enum vol_disk {
	VOL_UPTODATE = 0,
	VOL_INCONSISTENT,
	VOL_OUTDATED,
	VOL_DISKLESS,
	VOL_FAILED,
	VOL_CONSISTENT,
	VOL_DISK_MAX = VOL_CONSISTENT
};

/* The disk takes no I/O: failed, or detached after it failed (diskless). */
static inline bool vol_disk_gone(enum vol_disk d)
{
	return d == VOL_FAILED || d == VOL_DISKLESS;
}

const char *vol_role_name(enum vol_role r);
const char *vol_disk_name(enum vol_disk d);

struct vol_stats {
	uint64_t reads, writes, flushes, trims, zeroes;
	uint64_t read_bytes, write_bytes, errors;
};

/* A range lock (V3). The caller fills off, len, granted_cb; owns the memory
 * until vol_unlock. */
struct vol_lock {
	struct list link; /* in vol->locks, in request order */
	uint64_t off, len;
	uint64_t ticket;  /* request order among locks and parked writes */
	bool granted;
	void (*granted_cb)(struct vol_lock *lk); /* called once, maybe from vol_lock */
};

struct vol {
	char name[CFG_NAME_MAX];
	char data_path[CFG_PATH_MAX + CFG_NAME_MAX + 8]; /* the backing file; "" for ram: */
	uint64_t size;
	uint32_t min_block; /* alignment required of READ/WRITE offset and length */
	enum vol_role role;
	enum vol_disk disk;
	unsigned disk_fails; /* times the disk went failed (set_disk counts them) */
	struct bs *bs;
	struct md *md;
	struct ev_loop *ev;
	void *zero_buf; /* ZERO fallback source, vol->zero_len bytes of zeros */
	uint32_t zero_len;
	unsigned inflight;
	struct vol_stats stats;
	/* state-change events (`tandemctl events`): a JSON fragment per event */
	void (*event_fn)(void *ctx, const char *json);
	void *event_ctx;
	/* replication: NULL for a volume that lives on one node. repl is the
	 * object itself (for the control socket and the daemon; opaque here),
	 * repl_ops and repl_ctx the hook vol_submit and vol_meta_set call. */
	struct repl *repl;
	const struct vol_repl_ops *repl_ops;
	void *repl_ctx;
	bool demoting; /* role change to secondary pending: new I/O refused */
	/* ALUA: this node's and the peer's target port group (node index in
	 * the configuration + 1; port_peer 0 when the volume lives on one node) */
	uint16_t port_self, port_peer;
	/* volume attributes (the SCSI persistent reservations image, opaque
	 * here): kept in the metadata file, replicated by the primary */
	uint8_t *meta;
	uint32_t meta_len;
	uint64_t meta_version; /* +1 on every change, local or from the peer */
	struct list locks;    /* struct vol_lock: granted and waiting (V3) */
	struct list writes;   /* modifying vol_io in flight (write, trim, zero) */
	struct list parked;   /* vol_io waiting for a lock to go */
	struct list read_wait;  /* reads waiting for overlapping writes (V6) */
	struct list lease_wait; /* requests waiting for the lease (V5) */
	struct ev_timer lease_timer;
	uint64_t ticket;      /* last ticket handed to a lock or a parked write */
	bool crashed;         /* did not shut down cleanly last time */
	bool crashed_primary; /* ... and was primary then (until settled: repl.h R14) */
	bool md_failed;       /* a metadata write failed: the disk is failed, and the
			       * metadata is never marked clean (V4) */
	unsigned bios;        /* vol_local requests on the store, not yet finished */
	/* gray failure (vol_slow_watch): requests and slow ones in this second,
	 * seconds in a row that were slow, and who decides on a detach */
	struct {
		uint64_t limit_ns;
		unsigned need_s, n, nslow, secs;
		bool said;
		struct ev_timer timer;
		bool (*may_detach)(void *ctx);
		void *ctx;
	} slow;
	/* why the disk failed, for status and the event: the first error
	 * (vol_disk_error); err 0 while it has not failed on this run */
	struct {
		int err;        /* errno */
		char op[16];    /* read, write, flush, trim, zero, metadata */
		uint64_t at_ns; /* CLOCK_REALTIME */
	} disk_error;
};

/* Per-request replication state, used only by src/repl. */
struct vol_rep {
	struct list link;       /* in the replication in-flight / waiting lists */
	struct bm_waiter bmw;   /* write intent on the change bitmap */
	struct net_tx tx;       /* the message to the peer */
	uint8_t hdr[80];
	uint64_t t0;            /* submitted (ns): the resync controller's latency sample */
	uint64_t seq;           /* peer sequence number, 0 = not sent */
	uint16_t pending;       /* parts still to complete: local, peer ack, send */
	uint8_t kind;           /* src/repl's request kinds */
	bool peer_ok;           /* the peer acknowledged success */
	bool stale;             /* resync read overtaken by a foreground write */
	bool bg;                /* K_READ: a fill's own read (repl_pull.c), not a client's */
	uint8_t ab;             /* async: 0 not seen by the stream, 1 streamed, 2 marked */
	bool ab_acked;          /* async: the peer applied its stream entry */
	void *abe;              /* async: its stream entry, until the peer answers */
	struct list wlink;      /* async: waiting for room in the stream */
	int lres;               /* local result */
	void *zbuf;             /* the compressed payload being sent; NULL none */
	uint32_t zcap;          /* ... its size in the buffer pool */
};

/* A request from a front-end. The front-end fills type, flags, off, len, buf
 * (aligned as vol->min_block and 4096 for buffers) and cb, and owns the memory
 * until cb(res) with res 0 or -errno. */
struct vol_io {
	struct bs_io bio;
	enum bs_op type;
	uint32_t flags;
	uint64_t off, len;
	void *buf;
	struct vol *vol;
	uint64_t zero_done;
	void (*cb)(struct vol_io *io, int res);
	/* internal: who vol_local reports to */
	void (*local_done)(struct vol_io *io, int res);
	/* range locks (V3): the lock this write runs under (set by its owner),
	 * and the link in vol->writes or vol->parked */
	struct vol_lock *lock;
	struct list vlink;
	uint64_t ticket;
	bool tracked;
	uint64_t lease_t0; /* V5: when it began to wait for the lease; 0 not */
	uint64_t bio_t0;   /* vol_local: when it went to the store */
	bool from_peer;    /* D1: this read was sent to the peer */
	struct vol_rep rep;
};

/* Opens volume cfg->volumes[vi] as node ni: data store, metadata, role. */
/* A store or metadata error fails the disk: records why (the first error
 * only), then vol_set_disk(FAILED). err is a positive errno. */
void vol_disk_error(struct vol *v, int err, const char *op);
/* A new store for a failed disk (F1: the one way out of failed, with the
 * replication's attach): path, or the old one again when NULL. The disk
 * stays failed; the caller makes it inconsistent and resyncs it. 0, or
 * -errno with why in msg (not failed, metadata failed, I/O still on the old
 * store, the new one does not open). */
int vol_attach(struct vol *v, const char *path, char *msg, size_t len);
/* The disk at data_path (its file replaced under the store: a kept image
 * restored) is labelled again as the one the metadata describes (fresh: as a
 * new disk), seq above all before; the next metadata write records it.
 * 0 or -errno (logged; the next start then finds the disk older). */
int vol_relabel(struct vol *v, bool fresh);
/* Gray failure: once more than 1% of the store's requests in a second take
 * longer than limit_ms (or none completes while some are out), need_s
 * seconds in a row, the disk fails (ETIMEDOUT, "slow") if may_detach(ctx)
 * says a peer can serve; otherwise one warning. limit_ms 0: off. */
void vol_slow_watch(struct vol *v, unsigned limit_ms, unsigned need_s,
		    bool (*may_detach)(void *ctx), void *ctx);
/* Fault injection (`tandemctl inject`, fault-injection = on): after `after`
 * more operations of type op ("read", "write", "flush", "trim", "zero") the
 * store fails the next one with -err, and every later one unless once.
 * 0, or -errno with why in msg. */
int vol_inject(struct vol *v, const char *op, unsigned after, int err, bool once, char *msg,
	       size_t len);
/* Crash simulation (`tandemctl inject VOLUME crash`, src/bs/bs_crash.c): from
 * now the store plays a disk with a volatile cache, and at crash point number
 * after + 1 of kind (BS_CRASH_*: data writes, flushes, metadata writes, or
 * any) the node dies leaving what a power loss could have left, drawn from
 * seed. */
/* A slow disk (`tandemctl inject VOLUME slow --ms N`): every operation of
 * the store waits N ms from now; 0 ends it. */
int vol_inject_slow(struct vol *v, unsigned ms, char *msg, size_t len);
int vol_inject_crash(struct vol *v, int kind, unsigned after, uint64_t seed, char *msg, size_t len);
int vol_open(struct ev_loop *ev, const struct cfg *cfg, unsigned vi, unsigned ni, struct vol **out,
	     char *err, size_t errlen);
void vol_close(struct vol *v); /* NULL is a no-op; marks metadata clean */

void vol_submit(struct vol *v, struct vol_io *io);
/* For src/repl: runs io on the local store only, without the role check,
 * then calls done (from the loop). A store EIO marks the disk failed. */
void vol_local(struct vol *v, struct vol_io *io, void (*done)(struct vol_io *io, int res));
/* For src/repl: completes a front-end request that vol_submit handed over. */
void vol_complete(struct vol_io *io, int res);
/* Range locks (V3). vol_lock calls lk->granted_cb when no overlapping write
 * is in flight and no earlier overlapping lock remains (maybe at once). The
 * holder's own writes carry io->lock = lk. vol_unlock releases (granted or
 * still waiting) and lets parked writes go. */
void vol_lock(struct vol *v, struct vol_lock *lk);
void vol_unlock(struct vol *v, struct vol_lock *lk);
/* Volume attributes. vol_meta_set (primary): persists len bytes at buf
 * (synchronous) and sends them to the peer; vol_meta_store: persists only
 * (what the peer sent). Both 0 or -errno (-EFBIG: too long). */
int vol_meta_set(struct vol *v, const uint8_t *buf, size_t len);
int vol_meta_store(struct vol *v, const uint8_t *buf, size_t len);
/* Role change (src/repl: promote, demote), announced; the caller persists
 * the primary flag. The only writer of v->role after vol_open. */
void vol_set_role(struct vol *v, enum vol_role role);
/* Disk state change, persisted in the metadata flags (synchronous). The only
 * writer of v->disk after vol_open. */
void vol_set_disk(struct vol *v, enum vol_disk d);
/* Reports a state change to whoever listens (what: "role", "disk",
 * "connection", "replication", ...); extra is more JSON members or NULL. */
void vol_event(struct vol *v, const char *what, const char *from, const char *to,
	       const char *extra);
/* How long a request waits for a lost lease before it fails with -ESTALE
 * (a retryable error: NBD_ESHUTDOWN, SCSI NOT READY 04/0A). */
#define VOL_LEASE_WAIT_NS (1000ull * 1000000ull)
/* The primary holds its lease (true for a volume with no lease rule). */
bool vol_lease_ok(const struct vol *v);
/* D1: requests are served through the peer (this primary's disk is gone). */
bool vol_via_peer(const struct vol *v);
/* Requests can be served here now: the disk works, or the peer serves. */
bool vol_serving(const struct vol *v);
/* D1: a failed disk with no request left on it, on a primary served through
 * its peer, is detached: failed -> diskless. */
void vol_detach_check(struct vol *v);
/* The peer's role (enum vol_role) or -1: unknown, not connected, or not replicated. */
int vol_peer_role(const struct vol *v);
/* A planned switchover that makes this node (to_self) or the peer primary
 * (the primary demotes first): 0 done, -EAGAIN under way (call again),
 * -EOPNOTSUPP not replicated, -errno. */
int vol_switchover(struct vol *v, bool to_self, char *msg, size_t len);
/* Persists the superblock (synchronous; rare events only). Logs failures. */
int vol_md_write(struct vol *v);
/* Allocation map (synchronous, cheap). */
int vol_block_status(struct vol *v, uint64_t off, uint64_t len, struct bs_extent *ext, unsigned max,
		     unsigned *n);

#endif
