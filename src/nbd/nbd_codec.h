/* NBD codec: pure functions that decode, validate and encode NBD messages.
 * Never touches sockets or volumes, so it is unit-tested and fuzzed alone.
 * Every field from the peer is checked here before the server acts on it. */
#ifndef TANDEM_NBD_CODEC_H
#define TANDEM_NBD_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../include/proto/nbd.h"

/* Host-order view of a transmission request. */
struct nbd_req {
	uint32_t magic;
	uint16_t flags, type;
	uint64_t cookie, offset;
	uint32_t length;
};

/* What the export allows; the validator's context. */
struct nbd_export_info {
	uint64_t size;
	uint32_t min_block;   /* READ/WRITE/TRIM/ZERO alignment; 1 = any */
	uint32_t max_payload; /* largest READ/WRITE */
	uint16_t tflags;      /* transmission flags advertised */
	bool structured;      /* structured replies negotiated */
	bool meta_allocation; /* base:allocation selected */
};

void nbd_decode_request(const uint8_t in[sizeof(struct nbd_request)], struct nbd_req *r);
void nbd_encode_request(const struct nbd_req *r, uint8_t out[sizeof(struct nbd_request)]);

/* 0 when the request may run, else the NBD error to reply (NBD_EINVAL...).
 * Bad magic is not judged here: it loses framing and closes the connection. */
uint32_t nbd_validate_request(const struct nbd_req *r, const struct nbd_export_info *e);

/* Maps an internal -errno to the NBD error sent on the wire; the only place. */
uint32_t nbd_errno_to_wire(int err);

size_t nbd_encode_simple_reply(uint8_t *out, uint32_t error, uint64_t cookie);
size_t nbd_encode_structured_hdr(uint8_t *out, uint16_t flags, uint16_t type, uint64_t cookie,
				 uint32_t length);
size_t nbd_encode_opt_reply(uint8_t *out, uint32_t option, uint32_t type, uint32_t length);

/* NBD_OPT_INFO / NBD_OPT_GO data: name and the list of requested info types. */
struct nbd_go {
	char name[NBD_MAX_STRING + 1];
	uint16_t nreqs;
	bool want_name, want_description, want_block_size;
};
int nbd_parse_go(const uint8_t *data, uint32_t len, struct nbd_go *go); /* 0 / -EINVAL */

/* NBD_OPT_LIST_META_CONTEXT / SET_META_CONTEXT data. */
struct nbd_meta {
	char name[NBD_MAX_STRING + 1];
	uint32_t nqueries;
	bool base_allocation; /* "base:allocation" asked for */
	bool base_any;        /* "base:" (list only) */
};
int nbd_parse_meta(const uint8_t *data, uint32_t len, struct nbd_meta *m); /* 0 / -EINVAL */

#endif
