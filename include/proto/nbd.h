/* The NBD protocol (fixed newstyle handshake, transmission phase) as Tandem
 * speaks it. Wire structs and constants only.
 *
 * Byte order: every integer on the wire is big-endian (network order).
 * Values follow the NBD protocol document (doc/proto.md of the NBD project).
 */
#ifndef TANDEM_PROTO_NBD_H
#define TANDEM_PROTO_NBD_H

#include <stdint.h>

/* Handshake */
#define NBD_MAGIC 0x4e42444d41474943ull       /* "NBDMAGIC" */
#define NBD_IHAVEOPT 0x49484156454f5054ull    /* "IHAVEOPT" */
#define NBD_REP_MAGIC 0x0003e889045565a9ull

/* handshake flags (server) */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)
/* client flags */
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)

/* transmission flags */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_ROTATIONAL (1u << 4)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)
#define NBD_FLAG_SEND_RESIZE (1u << 9)
#define NBD_FLAG_SEND_CACHE (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO (1u << 11)

/* options */
enum nbd_opt {
	NBD_OPT_EXPORT_NAME = 1,
	NBD_OPT_ABORT = 2,
	NBD_OPT_LIST = 3,
	NBD_OPT_STARTTLS = 5,
	NBD_OPT_INFO = 6,
	NBD_OPT_GO = 7,
	NBD_OPT_STRUCTURED_REPLY = 8,
	NBD_OPT_LIST_META_CONTEXT = 9,
	NBD_OPT_SET_META_CONTEXT = 10,
	NBD_OPT_EXTENDED_HEADERS = 11,
};

/* option replies */
#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_META_CONTEXT 4u
#define NBD_REP_FLAG_ERROR (1u << 31)
#define NBD_REP_ERR_UNSUP (NBD_REP_FLAG_ERROR | 1u)
#define NBD_REP_ERR_POLICY (NBD_REP_FLAG_ERROR | 2u)
#define NBD_REP_ERR_INVALID (NBD_REP_FLAG_ERROR | 3u)
#define NBD_REP_ERR_PLATFORM (NBD_REP_FLAG_ERROR | 4u)
#define NBD_REP_ERR_TLS_REQD (NBD_REP_FLAG_ERROR | 5u)
#define NBD_REP_ERR_UNKNOWN (NBD_REP_FLAG_ERROR | 6u)
#define NBD_REP_ERR_SHUTDOWN (NBD_REP_FLAG_ERROR | 7u)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_FLAG_ERROR | 8u)
#define NBD_REP_ERR_TOO_BIG (NBD_REP_FLAG_ERROR | 9u)

/* NBD_REP_INFO types */
#define NBD_INFO_EXPORT 0u
#define NBD_INFO_NAME 1u
#define NBD_INFO_DESCRIPTION 2u
#define NBD_INFO_BLOCK_SIZE 3u

/* Client option header: magic, option, length; then length bytes of data. */
struct nbd_opt_hdr {
	uint64_t magic; /* NBD_IHAVEOPT */
	uint32_t option;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_opt_hdr) == 16, "nbd option header");

/* Server option reply header; then length bytes of data. */
struct nbd_opt_reply {
	uint64_t magic; /* NBD_REP_MAGIC */
	uint32_t option;
	uint32_t type;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_opt_reply) == 20, "nbd option reply");

/* Transmission */
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

enum nbd_cmd {
	NBD_CMD_READ = 0,
	NBD_CMD_WRITE = 1,
	NBD_CMD_DISC = 2,
	NBD_CMD_FLUSH = 3,
	NBD_CMD_TRIM = 4,
	NBD_CMD_CACHE = 5,
	NBD_CMD_WRITE_ZEROES = 6,
	NBD_CMD_BLOCK_STATUS = 7,
	NBD_CMD_RESIZE = 8,
};

/* command flags */
#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_DF (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)

struct nbd_request {
	uint32_t magic; /* NBD_REQUEST_MAGIC */
	uint16_t flags;
	uint16_t type;
	uint64_t cookie; /* opaque to the server, echoed back */
	uint64_t offset;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_request) == 28, "nbd request");

struct nbd_simple_reply {
	uint32_t magic; /* NBD_SIMPLE_REPLY_MAGIC */
	uint32_t error;
	uint64_t cookie;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_simple_reply) == 16, "nbd simple reply");

struct nbd_structured_reply {
	uint32_t magic; /* NBD_STRUCTURED_REPLY_MAGIC */
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint32_t length; /* of the payload that follows */
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_structured_reply) == 20, "nbd structured reply");

#define NBD_REPLY_FLAG_DONE (1u << 0)
#define NBD_REPLY_TYPE_NONE 0u
#define NBD_REPLY_TYPE_OFFSET_DATA 1u
#define NBD_REPLY_TYPE_OFFSET_HOLE 2u
#define NBD_REPLY_TYPE_BLOCK_STATUS 5u
#define NBD_REPLY_TYPE_ERROR (1u << 15 | 1u)
#define NBD_REPLY_TYPE_ERROR_OFFSET (1u << 15 | 2u)

/* base:allocation extent flags */
#define NBD_STATE_HOLE (1u << 0)
#define NBD_STATE_ZERO (1u << 1)

/* errors on the wire */
#define NBD_EPERM 1u
#define NBD_EIO 5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u
#define NBD_EOVERFLOW 75u
#define NBD_ENOTSUP 95u
#define NBD_ESHUTDOWN 108u

/* Limits Tandem advertises and enforces. */
#define NBD_MAX_PAYLOAD (32u * 1024 * 1024) /* largest READ/WRITE */
#define NBD_MAX_OPTION_LEN (64u * 1024)     /* option data beyond this closes */
#define NBD_MAX_STRING 4096u                 /* export and context names */
#define NBD_META_BASE_ALLOCATION "base:allocation"
#define NBD_META_CONTEXT_ID 1u

#endif
