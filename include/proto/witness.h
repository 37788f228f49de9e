/* The witness protocol: a node's (or tandemctl's) session with
 * tandem-witness (docs/WITNESS.md has the rules).
 *
 * One TCP connection per node for all its volumes; the node dials. Every
 * message is a 12-byte header followed by `len` bytes of body. All integers
 * are little-endian; names are NUL-padded to WIT_NAME_LEN bytes and must hold
 * a NUL. Reserved fields are zero when sent and checked to be zero.
 *
 * Session:
 *   both:    HELLO  (cluster, sender name, protocol range, nonce; from a
 *            node also its witness-timeout, which must be the cluster's)
 *   both:    AUTH   (HMAC-SHA256 with the cluster secret, see below)
 *   node:    REPORT / CLAIM per volume, PING; witness: REPORT_ACK,
 *            CLAIM_REPLY, PONG. An admin client (tandemctl) sends STATUS_REQ
 *            and receives STATUS (JSON text).
 * A side that refuses the other sends ERROR (a short reason) and closes.
 *
 * AUTH: mac = HMAC-SHA256(secret, "tandem-witness-auth-1" || dir ||
 * nonce_node || nonce_witness || cluster || node), names NUL-padded to
 * WIT_NAME_LEN, dir = 'N' from the node, 'W' from the witness: neither proof
 * can be reflected or replayed.
 */
#ifndef TANDEM_PROTO_WITNESS_H
#define TANDEM_PROTO_WITNESS_H

#include <stdint.h>

#define WIT_HDR_MAGIC 0x54495754u             /* "TWIT" read as LE u32 */
#define WIT_HELLO_MAGIC 0x31544957444e4154ull /* "TANDWIT1" */
#define WIT_PROTO 1u
#define WIT_NAME_LEN 64u
#define WIT_NONCE_LEN 32u
#define WIT_MAC_LEN 32u
#define WIT_HISTORY 4u
#define WIT_MAX_ERROR 200u
#define WIT_MAX_STATUS (256u << 10)

enum wit_type {
	WIT_HELLO = 1,
	WIT_AUTH = 2,
	WIT_ERROR = 3,
	WIT_PING = 4,
	WIT_PONG = 5,
	WIT_REPORT = 6,      /* node: its role and data for a volume */
	WIT_REPORT_ACK = 7,  /* witness: recorded, or deposed */
	WIT_CLAIM = 8,       /* node: make me primary */
	WIT_CLAIM_REPLY = 9, /* witness: granted or denied */
	WIT_STATUS_REQ = 10, /* admin client */
	WIT_STATUS = 11,     /* JSON text */
	WIT_TYPE_MAX = WIT_STATUS,
};

struct wit_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t reserved;
	uint32_t len; /* body bytes */
} __attribute__((packed));
_Static_assert(sizeof(struct wit_hdr) == 12, "wit_hdr");

#define WIT_HELLO_F_ADMIN 1u /* a tandemctl session: STATUS_REQ only */
struct wit_hello {
	uint64_t magic;
	uint16_t proto_min, proto_max;
	uint32_t flags;
	char cluster[WIT_NAME_LEN];
	char name[WIT_NAME_LEN]; /* the node, "witness", or the admin's label */
	uint8_t nonce[WIT_NONCE_LEN];
	/* A node's witness-timeout in milliseconds: the witness refuses a node
	 * whose value is not its cluster's (the two sides would judge the
	 * session's silence differently), and 0 from a node (one older than
	 * this field, which sent it reserved as zero). 0 from an admin client
	 * (not checked) and from the witness (older clients refuse non-zero). */
	uint64_t timeout_ms;
} __attribute__((packed));
_Static_assert(sizeof(struct wit_hello) == 184, "wit_hello");

struct wit_auth {
	uint8_t mac[WIT_MAC_LEN];
} __attribute__((packed));
_Static_assert(sizeof(struct wit_auth) == 32, "wit_auth");

struct wit_ping {
	uint64_t cookie;
} __attribute__((packed));
_Static_assert(sizeof(struct wit_ping) == 8, "wit_ping");

/* REPORT and CLAIM */
#define WIT_F_PRIMARY 1u /* REPORT: the sender is primary */
#define WIT_F_SYNCED 2u  /* REPORT: its peer holds every write it acknowledged */
#define WIT_F_FORCE 4u   /* CLAIM: skip the data check (W3.1): `primary --force` */
#define WIT_F_RELEASE 8u /* REPORT, secondary: an orderly demotion (W2) */
/* CLAIM: asked by hand (`primary`, a switchover): a record that never named
 * a primary does not refuse it (W3.1) */
#define WIT_F_ADMIN 16u
/* CLAIM: the claimant's connection to its peer closed, and a connect to the
 * peer's replication address was refused: no daemon listens there, so the
 * peer serves nothing and holds no lease. Once the peer's own session is
 * closed too, the witness need not wait out that session's lease (L2). */
#define WIT_F_PEER_GONE 32u
#define WIT_F_KNOWN \
	(WIT_F_PRIMARY | WIT_F_SYNCED | WIT_F_FORCE | WIT_F_RELEASE | WIT_F_ADMIN | WIT_F_PEER_GONE)
struct wit_vol_msg {
	char volume[WIT_NAME_LEN];
	uint64_t seq; /* the sender's, echoed in the answer */
	uint64_t gen; /* current data generation */
	uint64_t history[WIT_HISTORY];
	uint32_t flags;
	uint32_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct wit_vol_msg) == 120, "wit_vol_msg");

/* REPORT_ACK and CLAIM_REPLY */
enum wit_result {
	WIT_R_OK = 0,      /* REPORT recorded; CLAIM granted */
	WIT_R_DEPOSED = 1, /* REPORT: the record names another primary */
	WIT_R_DENIED = 2,  /* CLAIM: see reason */
};
enum wit_reason {
	WIT_NONE = 0,
	WIT_NOT_SYNCED = 1,    /* the primary may have acknowledged writes alone */
	WIT_OLDER_DATA = 2,    /* the claimant's generation is not the vouched one */
	WIT_PRIMARY_ALIVE = 3, /* the primary still holds its session */
	WIT_NO_RECORD = 4,     /* no primary ever reported this volume */
	WIT_NOT_MEMBER = 5,    /* the volume or node is not in the witness's config */
	WIT_REASON_MAX = WIT_NOT_MEMBER,
};
struct wit_verdict {
	char volume[WIT_NAME_LEN];
	uint64_t seq;
	uint32_t result;            /* enum wit_result */
	uint32_t reason;            /* enum wit_reason */
	char primary[WIT_NAME_LEN]; /* the record's primary, "" none */
	uint64_t gen;               /* the record's generation */
	uint64_t epoch;             /* the record's epoch */
} __attribute__((packed));
_Static_assert(sizeof(struct wit_verdict) == 160, "wit_verdict");

/* The witness's state file (one per cluster): a header, then nrec records,
 * then a CRC32C of everything before it. Written to a temporary name,
 * fsynced, renamed over the old one, and the directory fsynced. */
#define WIT_STATE_MAGIC 0x5354415454495754ull /* "TWITTATS" */
#define WIT_STATE_VERSION 1u
#define WIT_STATE_MAX_RECS 64u
struct wit_state_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t nrec;
	char cluster[WIT_NAME_LEN];
} __attribute__((packed));
_Static_assert(sizeof(struct wit_state_hdr) == 80, "wit_state_hdr");

#define WIT_REC_F_SYNCED 1u
struct wit_state_rec {
	char volume[WIT_NAME_LEN];
	char primary[WIT_NAME_LEN];
	uint64_t gen;
	uint64_t epoch;
	uint32_t flags;
	uint32_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct wit_state_rec) == 152, "wit_state_rec");

#endif
