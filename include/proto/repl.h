/* The replication protocol between two Tandem nodes (docs/PROTOCOL-REPL.md).
 *
 * One TCP connection per replicated volume. The node whose name sorts first
 * dials the other's `replication-advertise` (or `replication`) address; the
 * other accepts on its `replication` address and routes the connection to the
 * volume named in HELLO. A newer authenticated connection for a volume
 * replaces an older one.
 *
 * Every message is a 16-byte header followed by `len` bytes of body; for
 * WRITE and RS_DATA the body is a fixed part followed by the data. All
 * integers are little-endian. Reserved fields are zero when sent and are
 * checked to be zero when received (so they can be given meaning later under
 * a feature bit).
 *
 * Connection life:
 *   both:   HELLO             (identity, protocol range, nonce)
 *   both:   AUTH              (HMAC-SHA256 over the cluster secret, see below)
 *   both:   CONTRACT          (REPL_FEAT_CONTRACT: the settings that define the
 *                             volume's guarantees; a mismatch is refused)
 *   both:   STATE             (size, generation identifiers, role, disk)
 *   both:   BITMAP* BITMAP_END (each side's change bitmap; both OR them)
 *   then    data, acks, pings, state updates, resync traffic.
 * A side that refuses the peer sends ERROR (a short reason) and closes.
 *
 * AUTH: mac = HMAC-SHA256(secret, "tandem-repl-auth-1" || dir || nonce_dialer
 * || nonce_acceptor || cluster || volume || sender), names NUL-padded to
 * 64 bytes, dir = 'D' when the dialer sends, 'A' when the acceptor does: a mac
 * cannot be reflected back, and both fresh nonces make replays useless.
 */
#ifndef TANDEM_PROTO_REPL_H
#define TANDEM_PROTO_REPL_H

#include <stdint.h>

#define REPL_HDR_MAGIC 0x4c505254u /* "TRPL" read as LE u32 */
#define REPL_HELLO_MAGIC 0x31504552444e4154ull /* "TANDREP1" */
#define REPL_PROTO_MIN 1u
#define REPL_PROTO_MAX 1u
#define REPL_NAME_LEN 64u
#define REPL_NONCE_LEN 32u
#define REPL_MAC_LEN 32u
#define REPL_HISTORY 4u
#define REPL_MAX_DATA (32u << 20)     /* largest WRITE / RS_DATA payload (= NBD's) */
#define REPL_MAX_BITMAP_WORDS 4096u   /* u64 words in one BITMAP message */
#define REPL_MAX_ACKS 512u            /* entries in one ACK message */
#define REPL_MAX_ERROR 200u

/* features: both sides send the bits they know and use the AND */
#define REPL_FEAT_RESYNC2 (1ull << 0) /* RS_ZERO, CSUM, RS_START, ACK_DIFFERS */
#define REPL_FEAT_META (1ull << 1)    /* META */
#define REPL_FEAT_SWITCH (1ull << 2)  /* SWITCH */
#define REPL_FEAT_COMPRESS (1ull << 3) /* REPL_HF_LZ4, REPL_HF_ZSTD (below) */
#define REPL_FEAT_READ (1ull << 4)     /* READ, RDATA */
#define REPL_FEAT_CONTRACT (1ull << 5) /* CONTRACT */
#define REPL_FEATURES_KNOWN                                                           \
	(REPL_FEAT_RESYNC2 | REPL_FEAT_META | REPL_FEAT_SWITCH | REPL_FEAT_COMPRESS | \
	 REPL_FEAT_READ | REPL_FEAT_CONTRACT)
#define REPL_MAX_META 32736u          /* = TANDEM_MD_META_MAX */

enum repl_type {
	REPL_HELLO = 1,
	REPL_AUTH = 2,
	REPL_STATE = 3,
	REPL_BITMAP = 4,
	REPL_BITMAP_END = 5,
	REPL_ERROR = 6,
	REPL_WRITE = 10, /* data write, payload follows */
	REPL_TRIM = 11,  /* extent: contents unspecified (zero here) */
	REPL_ZERO = 12,  /* extent: contents zero */
	REPL_FLUSH = 13, /* barrier: every earlier write durable, then ack */
	REPL_ACK = 14,   /* batched completions of WRITE..FLUSH and RS_DATA */
	REPL_PING = 15,
	REPL_PONG = 16,
	REPL_RS_DATA = 20,  /* resync: source's data of a region, payload follows */
	REPL_RS_DONE = 21,  /* resync finished: the target adopts the source's generation */
	REPL_SET_GEN = 22,  /* the primary starts a new data generation (both adopt it) */
	REPL_RS_ZERO = 23,  /* resync: the region is all zero on the source (no payload) */
	REPL_CSUM = 24,     /* digest of a region: the receiver compares it with its own */
	REPL_RS_START = 25, /* a resync of the sender's marked regions starts (after verify) */
	REPL_META = 26,     /* primary -> secondary: the volume attributes image (SCSI
			     * persistent reservations), 0..REPL_MAX_META bytes, no fixed
			     * part; stored durably before the next message is read */
	REPL_SWITCH = 27,   /* a planned switchover (body as PING, cookie = the step):
			     * REPL_SW_DEMOTE asks the primary to step down for the
			     * sender, REPL_SW_PROMOTE tells the receiver to take over */
	REPL_READ = 28,     /* primary -> secondary (body struct repl_io, flags zero): a
			     * primary whose disk failed reads through its peer. The
			     * receiver reads after every earlier overlapping message
			     * (R5) and answers with RDATA, or an ACK with -errno */
	REPL_RDATA = 29,    /* secondary -> primary: the data of READ seq (struct
			     * repl_io as in the READ, then len bytes, never compressed) */
	REPL_CONTRACT = 30, /* struct repl_contract: after AUTH, before STATE (both
			     * sides); once connected, a change made by `tandemctl
			     * set` (the receiver adopts it and answers) */
	REPL_TYPE_MAX
};

/* RS_START's gen_bitmap: why the resync starts (0: differences found by
 * verify or a failed write). Receivers that do not know a value ignore it. */
#define REPL_RS_WHY_AHEAD 1u /* async: writes the stream did not carry (the target is behind) */

#define REPL_SW_DEMOTE 1u
#define REPL_SW_PROMOTE 2u

/* Header flags: only with REPL_FEAT_COMPRESS, only on WRITE and RS_DATA, at
 * most one of them; every other message has flags zero. The flag names the
 * codec of the payload: the body is the fixed part (struct repl_io, whose
 * len stays the length of the data) followed by the compressed bytes, so the
 * header's len is sizeof(struct repl_io) + the compressed length. The
 * compressed length is below io.len, and the payload decompresses to exactly
 * io.len bytes; a receiver ends the connection on anything else. Which
 * messages go compressed is the sender's choice, message by message. */
#define REPL_HF_LZ4 (1u << 0)  /* one LZ4 block (the format of LZ4_compress_default) */
#define REPL_HF_ZSTD (1u << 1) /* one Zstandard frame (RFC 8878) */
#define REPL_HF_CODECS (REPL_HF_LZ4 | REPL_HF_ZSTD)

struct repl_hdr {
	uint32_t magic;  /* REPL_HDR_MAGIC */
	uint16_t type;   /* enum repl_type */
	uint16_t flags;  /* REPL_HF_*, else zero */
	uint32_t len;    /* body bytes after this header */
	uint32_t reserved;
} __attribute__((packed));

struct repl_hello {
	uint64_t magic; /* REPL_HELLO_MAGIC */
	uint16_t proto_min, proto_max;
	uint32_t reserved0;
	uint64_t features;
	char cluster[REPL_NAME_LEN]; /* NUL padded */
	char node[REPL_NAME_LEN];    /* the sender */
	char volume[REPL_NAME_LEN];
	uint8_t nonce[REPL_NONCE_LEN];
	uint8_t reserved[32];
} __attribute__((packed));

struct repl_auth {
	uint8_t mac[REPL_MAC_LEN];
} __attribute__((packed));

/* STATE flags */
#define REPL_ST_UPTODATE (1u << 0)
#define REPL_ST_CONSISTENT (1u << 1)
#define REPL_ST_CRASHED_PRIMARY (1u << 2) /* was primary and did not shut down cleanly */
#define REPL_ST_UNVERIFIED \
	(1u << 3) /* consistent, not known up to date: started
					* without reaching its peer (disk "consistent") */
#define REPL_ST_NO_LEASE \
	(1u << 4) /* primary, but without its lease (docs/WITNESS.md L6):
				      * it yields to a primary peer that has one */
#define REPL_ST_KNOWN ((1u << 5) - 1)

enum repl_role { REPL_ROLE_SECONDARY = 0, REPL_ROLE_PRIMARY = 1 };

struct repl_state {
	uint64_t size;
	uint64_t gen_current, gen_bitmap;
	uint64_t gen_history[REPL_HISTORY];
	uint32_t flags;
	uint8_t role;  /* enum repl_role */
	uint8_t disk;  /* the sender's disk state (vol_disk numbering) */
	uint16_t reserved0;
	uint32_t bm_granularity;
	uint32_t reserved1;
	uint64_t oos_bits; /* bits set in the sender's bitmap */
} __attribute__((packed));

/* BITMAP: `words` u64 words starting at word index `start` follow. */
struct repl_bitmap {
	uint64_t start;
	uint32_t words;
	uint32_t reserved;
} __attribute__((packed));

#define REPL_F_FUA 1u
#define REPL_F_KNOWN REPL_F_FUA

/* WRITE and RS_DATA (payload of len bytes follows, or fewer when compressed:
 * REPL_HF_*); TRIM and ZERO (none). */
struct repl_io {
	uint64_t seq; /* per connection and direction, from 1, +1 per request */
	uint64_t off;
	uint32_t len;
	uint32_t flags; /* REPL_F_* */
} __attribute__((packed));

struct repl_flush {
	uint64_t seq;
} __attribute__((packed));

struct repl_ack_entry {
	uint64_t seq;
	int32_t res; /* 0, -errno (Linux numbering), or REPL_ACK_DIFFERS for a CSUM */
	uint32_t reserved;
} __attribute__((packed));

/* ACK result of a CSUM: the receiver's data differs (0: same). */
#define REPL_ACK_DIFFERS 1

/* CSUM: SHA-256 of the len bytes at off. flags zero. */
#define REPL_DIGEST_LEN 32u
struct repl_csum {
	struct repl_io io;
	uint8_t digest[REPL_DIGEST_LEN];
} __attribute__((packed));

/* ACK: count entries follow. */
struct repl_ack {
	uint32_t count;
	uint32_t reserved;
} __attribute__((packed));

struct repl_ping {
	uint64_t cookie;
} __attribute__((packed));

struct repl_gen {
	uint64_t gen_current;
	uint64_t gen_bitmap; /* RS_DONE: zero; SET_GEN: the generation it replaces */
} __attribute__((packed));

/* CONTRACT: the settings of the volume that define its guarantees, as the
 * sender has them now (its configuration file, or `tandemctl set` since).
 * The handshake refuses a peer whose contract differs in any field before
 * `resync_rate` (docs/SPEC.md, guarantee 10); the fields from there on are
 * compared only to warn. Enumerations are the values named below. */
#define REPL_CT_ANSWER 1u  /* flags: the answer to a CONTRACT received once connected */
#define REPL_CT_WITNESS 2u /* flags: the sender has a witness configured */
#define REPL_CT_KNOWN (REPL_CT_ANSWER | REPL_CT_WITNESS)
enum repl_ct_mode { REPL_CT_SYNC = 0, REPL_CT_ASYNC = 1 };
struct repl_contract {
	uint8_t mode;            /* enum repl_ct_mode */
	uint8_t on_congestion;   /* 0 ahead, 1 block */
	uint8_t failover;        /* 0 auto, 1 manual */
	uint8_t on_disk_failure; /* 0 serve, 1 handover */
	uint8_t on_io_error;     /* 0 detach, 1 pass-on */
	uint8_t flags;           /* REPL_CT_* */
	uint16_t reserved0;
	uint32_t peer_timeout_ms;
	uint32_t witness_timeout_ms;
	uint64_t async_backlog;    /* bytes */
	uint64_t async_max_lag_ms; /* 0: no bound */
	uint32_t bm_granularity;   /* the configured bitmap-granularity (bytes) */
	uint32_t reserved1;
	char first[REPL_NAME_LEN];  /* `nodes`: the first (the first primary), NUL padded */
	char second[REPL_NAME_LEN]; /* and the second */
	/* compared only to warn: */
	uint64_t resync_rate;     /* bytes/s; 0 auto */
	uint64_t resync_min_rate; /* bytes/s */
	uint32_t quorum_timeout_ms;
	uint8_t compression; /* 0 none, 1 lz4, 2 zstd (what the sender sends) */
	uint8_t reserved2[3];
	uint8_t reserved[32];
} __attribute__((packed));

/* ERROR: a message of len bytes (printable ASCII, <= REPL_MAX_ERROR) follows. */

_Static_assert(sizeof(struct repl_hdr) == 16, "header");
_Static_assert(sizeof(struct repl_hello) == 280, "hello");
_Static_assert(sizeof(struct repl_state) == 80, "state");
_Static_assert(sizeof(struct repl_io) == 24, "io");
_Static_assert(sizeof(struct repl_ack_entry) == 16, "ack entry");
_Static_assert(sizeof(struct repl_csum) == 56, "csum");
_Static_assert(sizeof(struct repl_contract) == 224, "contract");

#endif
