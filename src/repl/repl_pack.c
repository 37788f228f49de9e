/* Compressed payloads on the replication link: the codecs (repl_pack.h,
 * pure) and their use by the engine (repl_int.h): a WRITE or RS_DATA
 * payload goes compressed when this volume's `compression` names a codec,
 * the peer negotiated REPL_FEAT_COMPRESS, and the data shrinks by the
 * margin; the receiver decompresses whatever it gets, whatever its own
 * setting. The compressed bytes live in a buffer of the volume's pool until
 * the send is done (pack_sent from the request's net_tx callback).
 * Never: sends a compressed payload that is not smaller than the data, or
 * applies one that did not decompress to exactly its length. */
#include "repl_pack.h"

#include <errno.h>
#include <lz4.h>
#include <stdbool.h>
#include <stdlib.h>
#include <zstd.h>

#include "repl_int.h"

/* ---- the codecs (pure) ---- */

struct pack {
	void *lz4;                   /* LZ4_sizeofState() bytes: compression state */
	ZSTD_CCtx *zc;               /* compression, reused for every payload */
	ZSTD_DCtx *zd;               /* decompression, likewise */
	bool missed;                 /* the last payload did not compress */
	uint8_t sample[PACK_SAMPLE]; /* output of the cheap test */
};

int pack_new(struct pack **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void pack_free(struct pack *p)
{
	if (!p)
		return;
	free(p->lz4);
	ZSTD_freeCCtx(p->zc);
	ZSTD_freeDCtx(p->zd);
	free(p);
}

size_t pack_bound(size_t len)
{
	return len >= PACK_MIN_GAIN ? len - len / PACK_MIN_GAIN : 0;
}

const char *pack_codec_name(uint16_t codec)
{
	switch (codec) {
	case 0: return "none";
	case REPL_HF_LZ4: return "lz4";
	case REPL_HF_ZSTD: return "zstd";
	default: return "?";
	}
}

/* One compression into at most cap bytes: the length, 0 when it does not fit. */
static size_t squeeze(struct pack *p, uint16_t codec, const void *src, size_t len, void *dst,
		      size_t cap)
{
	if (codec == REPL_HF_LZ4) {
		if (!p->lz4 && !(p->lz4 = malloc((size_t)LZ4_sizeofState())))
			return 0;
		if (len > LZ4_MAX_INPUT_SIZE)
			return 0;
		/* 0 when the output would not fit: no output is ever larger */
		return (size_t)LZ4_compress_fast_extState(p->lz4, src, dst, (int)len, (int)cap, 1);
	}
	if (codec == REPL_HF_ZSTD) {
		size_t n;
		if (!p->zc && !(p->zc = ZSTD_createCCtx()))
			return 0;
		n = ZSTD_compressCCtx(p->zc, dst, cap, src, len, PACK_ZSTD_LEVEL);
		return ZSTD_isError(n) ? 0 : n;
	}
	return 0;
}

size_t pack_compress(struct pack *p, uint16_t codec, const void *src, size_t len, void *dst)
{
	size_t cap = pack_bound(len), n;
	bool fail;

	if (!cap)
		return 0;
	/* The cheap test, with LZ4 whatever the codec: it gives up fastest on
	 * data without repeats (already compressed or encrypted), and what zstd
	 * at level 1 shrinks, LZ4 shrinks too (docs/PERFORMANCE.md). A large
	 * payload costs the test of one sample. A small one with zstd is tested
	 * whole, but only after a payload that did not compress, so that a
	 * stream of data that compresses pays nothing for it. */
	if (len >= PACK_SAMPLE_FROM)
		fail = !squeeze(p, REPL_HF_LZ4, (const uint8_t *)src + len / 2 - PACK_SAMPLE / 2,
				PACK_SAMPLE, p->sample, pack_bound(PACK_SAMPLE));
	else if (codec == REPL_HF_ZSTD && p->missed)
		fail = !squeeze(p, REPL_HF_LZ4, src, len, dst, cap);
	else
		fail = false;
	n = fail ? 0 : squeeze(p, codec, src, len, dst, cap);
	p->missed = !n;
	return n;
}

int pack_decompress(struct pack *p, uint16_t codec, const void *src, size_t clen, void *dst,
		    size_t len)
{
	if (codec == REPL_HF_LZ4) {
		/* The block must end exactly at clen (LZ4_decompress_safe checks
		 * that) and fill dst exactly; it never writes beyond len. */
		if (clen > LZ4_MAX_INPUT_SIZE || len > LZ4_MAX_INPUT_SIZE)
			return -EBADMSG;
		return LZ4_decompress_safe(src, dst, (int)clen, (int)len) == (int)len ? 0
										      : -EBADMSG;
	}
	if (codec == REPL_HF_ZSTD) {
		size_t n;
		/* One frame, nothing after it, that says it holds len bytes:
		 * checked from its header before anything is decoded. */
		if (ZSTD_findFrameCompressedSize(src, clen) != clen ||
		    ZSTD_getFrameContentSize(src, clen) != (unsigned long long)len)
			return -EBADMSG;
		if (!p->zd && !(p->zd = ZSTD_createDCtx()))
			return -ENOMEM;
		n = ZSTD_decompressDCtx(p->zd, dst, len, src, clen);
		return !ZSTD_isError(n) && n == len ? 0 : -EBADMSG;
	}
	return -EBADMSG;
}

/* ---- on the link (repl_int.h) ---- */

void pack_try(struct repl *r, struct vol_rep *rep, const void *buf, uint32_t len)
{
	size_t room = pack_bound(len), n = 0;
	uint64_t t0;
	void *z = room ? bufpool_get(&r->pool, room) : NULL;

	if (z) {
		/* (the loop's clock would not do: this is the time spent inside;
		 * the calls run on the loop's thread) */
		t0 = now_ns();
		n = pack_compress(r->pk, r->pack_codec, buf, len, z);
		r->lk_pack_ns += now_ns() - t0;
	}
	if (!n) { /* sent as is, from the caller's buffer */
		if (z)
			bufpool_put(&r->pool, z, room);
		r->lk_pack_skip += len;
		return;
	}
	rep->zbuf = z;
	rep->zcap = (uint32_t)room;
	rep->tx.iov[1].iov_base = z;
	rep->tx.iov[1].iov_len = n;
	repl_enc_packed(rep->hdr, r->pack_codec, (uint32_t)n);
	r->lk_pack_in += len;
	r->lk_pack_out += n;
}

void pack_put(struct repl *r, struct vol_rep *rep)
{
	bufpool_put(&r->pool, rep->zbuf, rep->zcap);
	rep->zbuf = NULL;
}

int unpack_begin(struct rconn *c, struct rapply *a, const struct repl_msg *m)
{
	if (!(c->features & REPL_FEAT_COMPRESS)) {
		conn_fail(c, "compressed data from %s, which did not negotiate compression",
			  c->peer_node);
		return -1;
	}
	a->codec = m->hflags;
	a->zlen = m->data_len;
	a->zbuf = bufpool_get(&c->r->pool, a->zlen);
	if (!a->zbuf) {
		conn_fail(c, "out of memory");
		return -1;
	}
	return 1;
}

void unpack_drop(struct repl *r, struct rapply *a)
{
	if (a->zbuf)
		bufpool_put(&r->pool, a->zbuf, a->zlen);
	a->zbuf = NULL;
}

int unpack_end(struct rconn *c, struct rapply *a)
{
	struct repl *r = c->r;
	uint64_t t0 = now_ns();
	int e = pack_decompress(r->pk, a->codec, a->zbuf, a->zlen, a->io.buf, a->io.len);

	r->lk_unpack_ns += now_ns() - t0;
	unpack_drop(r, a);
	if (e == -ENOMEM) {
		conn_fail(c, "out of memory");
		return -1;
	}
	if (e) {
		conn_fail(c,
			  "%s payload of request %llu from %s does not decompress to its %llu "
			  "bytes",
			  pack_codec_name(a->codec), (unsigned long long)a->seq, c->peer_node,
			  (unsigned long long)a->io.len);
		return -1;
	}
	r->lk_unpack_out += a->io.len;
	return 0;
}
