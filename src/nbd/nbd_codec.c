/* NBD codec (see nbd_codec.h). All multi-byte fields are big-endian. */
#include "nbd_codec.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include "../common/be.h"

void nbd_decode_request(const uint8_t in[sizeof(struct nbd_request)], struct nbd_req *r)
{
	r->magic = get32(in);
	r->flags = get16(in + 4);
	r->type = get16(in + 6);
	r->cookie = get64(in + 8);
	r->offset = get64(in + 16);
	r->length = get32(in + 24);
}

void nbd_encode_request(const struct nbd_req *r, uint8_t out[sizeof(struct nbd_request)])
{
	put32(out, r->magic);
	put16(out + 4, r->flags);
	put16(out + 6, r->type);
	put64(out + 8, r->cookie);
	put64(out + 16, r->offset);
	put32(out + 24, r->length);
}

static bool in_range(const struct nbd_req *r, const struct nbd_export_info *e)
{
	return r->offset <= e->size && r->length <= e->size - r->offset;
}

static bool aligned(const struct nbd_req *r, const struct nbd_export_info *e)
{
	uint64_t m = e->min_block ? e->min_block : 1;
	return r->offset % m == 0 && r->length % m == 0;
}

uint32_t nbd_validate_request(const struct nbd_req *r, const struct nbd_export_info *e)
{
	uint16_t allowed;

	switch (r->type) {
	case NBD_CMD_READ:
		allowed = NBD_CMD_FLAG_FUA | ((e->tflags & NBD_FLAG_SEND_DF) ? NBD_CMD_FLAG_DF : 0);
		break;
	case NBD_CMD_WRITE:
		allowed = NBD_CMD_FLAG_FUA;
		break;
	case NBD_CMD_TRIM:
		allowed = NBD_CMD_FLAG_FUA;
		break;
	case NBD_CMD_WRITE_ZEROES:
		allowed = NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE |
			  ((e->tflags & NBD_FLAG_SEND_FAST_ZERO) ? NBD_CMD_FLAG_FAST_ZERO : 0);
		break;
	case NBD_CMD_BLOCK_STATUS:
		allowed = NBD_CMD_FLAG_REQ_ONE;
		break;
	case NBD_CMD_FLUSH:
	case NBD_CMD_CACHE:
	case NBD_CMD_DISC:
		allowed = 0;
		break;
	default:
		return NBD_EINVAL;
	}
	/* The protocol asks a server that advertises FUA to accept the bit on
	 * every command (some clients set it everywhere); it is a no-op where
	 * it has no meaning. */
	if (e->tflags & NBD_FLAG_SEND_FUA)
		allowed |= NBD_CMD_FLAG_FUA;
	if (r->flags & ~allowed)
		return NBD_EINVAL;
	/* The DF flag only means something with structured replies. */
	if ((r->flags & NBD_CMD_FLAG_DF) && !e->structured)
		return NBD_EINVAL;

	/* Commands the export did not advertise are refused. */
	if ((r->type == NBD_CMD_FLUSH && !(e->tflags & NBD_FLAG_SEND_FLUSH)) ||
	    (r->type == NBD_CMD_TRIM && !(e->tflags & NBD_FLAG_SEND_TRIM)) ||
	    (r->type == NBD_CMD_WRITE_ZEROES && !(e->tflags & NBD_FLAG_SEND_WRITE_ZEROES)) ||
	    (r->type == NBD_CMD_CACHE && !(e->tflags & NBD_FLAG_SEND_CACHE)) ||
	    ((r->type == NBD_CMD_WRITE || r->type == NBD_CMD_TRIM ||
	      r->type == NBD_CMD_WRITE_ZEROES) && (e->tflags & NBD_FLAG_READ_ONLY)))
		return r->type == NBD_CMD_WRITE || r->type == NBD_CMD_TRIM ||
				       r->type == NBD_CMD_WRITE_ZEROES ?
			       ((e->tflags & NBD_FLAG_READ_ONLY) ? NBD_EPERM : NBD_EINVAL) :
			       NBD_EINVAL;

	switch (r->type) {
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		if (r->length == 0 || r->length > e->max_payload)
			return r->length ? NBD_EOVERFLOW : NBD_EINVAL;
		if (!in_range(r, e))
			return r->type == NBD_CMD_WRITE ? NBD_ENOSPC : NBD_EINVAL;
		if (!aligned(r, e))
			return NBD_EINVAL;
		return 0;
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		if (r->length == 0)
			return NBD_EINVAL;
		if (!in_range(r, e))
			return NBD_ENOSPC;
		if (!aligned(r, e))
			return NBD_EINVAL;
		return 0;
	case NBD_CMD_CACHE:
		if (!in_range(r, e))
			return NBD_EINVAL;
		return 0;
	case NBD_CMD_BLOCK_STATUS:
		if (!e->structured || !e->meta_allocation)
			return NBD_EINVAL;
		if (r->length == 0 || !in_range(r, e))
			return NBD_EINVAL;
		return 0;
	case NBD_CMD_FLUSH:
	case NBD_CMD_DISC:
		if (r->offset || r->length)
			return NBD_EINVAL;
		return 0;
	default:
		return NBD_EINVAL;
	}
}

uint32_t nbd_errno_to_wire(int err)
{
	switch (err) {
	case 0: return 0;
	case -EROFS:
	case -EPERM: return NBD_EPERM;
	case -ENOMEM: return NBD_ENOMEM;
	case -EINVAL: return NBD_EINVAL;
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG: return NBD_ENOSPC;
	case -EOVERFLOW: return NBD_EOVERFLOW;
	case -ENOTSUP: return NBD_ENOTSUP;
	case -ESHUTDOWN:
	case -ESTALE: return NBD_ESHUTDOWN; /* no lease here: ask the primary */
	default: return NBD_EIO;
	}
}

size_t nbd_encode_simple_reply(uint8_t *out, uint32_t error, uint64_t cookie)
{
	put32(out, NBD_SIMPLE_REPLY_MAGIC);
	put32(out + 4, error);
	put64(out + 8, cookie);
	return sizeof(struct nbd_simple_reply);
}

size_t nbd_encode_structured_hdr(uint8_t *out, uint16_t flags, uint16_t type, uint64_t cookie,
				 uint32_t length)
{
	put32(out, NBD_STRUCTURED_REPLY_MAGIC);
	put16(out + 4, flags);
	put16(out + 6, type);
	put64(out + 8, cookie);
	put32(out + 16, length);
	return sizeof(struct nbd_structured_reply);
}

size_t nbd_encode_opt_reply(uint8_t *out, uint32_t option, uint32_t type, uint32_t length)
{
	put64(out, NBD_REP_MAGIC);
	put32(out + 8, option);
	put32(out + 12, type);
	put32(out + 16, length);
	return sizeof(struct nbd_opt_reply);
}

/* Reads a u32-length-prefixed string at *pos; checks it fits and has no NUL. */
static int take_string(const uint8_t *data, uint32_t len, uint32_t *pos, char *out, size_t cap)
{
	uint32_t n;

	if (len - *pos < 4)
		return -EINVAL;
	n = get32(data + *pos);
	*pos += 4;
	if (n > len - *pos || n > NBD_MAX_STRING || n >= cap)
		return -EINVAL;
	if (memchr(data + *pos, '\0', n))
		return -EINVAL;
	memcpy(out, data + *pos, n);
	out[n] = '\0';
	*pos += n;
	return 0;
}

int nbd_parse_go(const uint8_t *data, uint32_t len, struct nbd_go *go)
{
	uint32_t pos = 0;

	memset(go, 0, sizeof(*go));
	if (take_string(data, len, &pos, go->name, sizeof(go->name)))
		return -EINVAL;
	if (len - pos < 2)
		return -EINVAL;
	go->nreqs = get16(data + pos);
	pos += 2;
	if ((uint32_t)go->nreqs * 2 != len - pos)
		return -EINVAL;
	for (uint16_t i = 0; i < go->nreqs; i++) {
		uint16_t t = get16(data + pos + 2u * i);
		if (t == NBD_INFO_NAME)
			go->want_name = true;
		else if (t == NBD_INFO_DESCRIPTION)
			go->want_description = true;
		else if (t == NBD_INFO_BLOCK_SIZE)
			go->want_block_size = true;
		/* unknown info types are ignored, as the protocol asks */
	}
	return 0;
}

int nbd_parse_meta(const uint8_t *data, uint32_t len, struct nbd_meta *m)
{
	uint32_t pos = 0;
	char q[NBD_MAX_STRING + 1];

	memset(m, 0, sizeof(*m));
	if (take_string(data, len, &pos, m->name, sizeof(m->name)))
		return -EINVAL;
	if (len - pos < 4)
		return -EINVAL;
	m->nqueries = get32(data + pos);
	pos += 4;
	for (uint32_t i = 0; i < m->nqueries; i++) {
		if (take_string(data, len, &pos, q, sizeof(q)))
			return -EINVAL;
		if (strcmp(q, NBD_META_BASE_ALLOCATION) == 0)
			m->base_allocation = true;
		else if (strcmp(q, "base:") == 0)
			m->base_any = true;
	}
	if (pos != len)
		return -EINVAL;
	return 0;
}
