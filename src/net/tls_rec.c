/* TLS 1.3 record protection: see tls_rec.h (R1, R2). */
#include "tls_rec.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "../common/be.h"

/* HKDF-Expand-Label(secret, label, "", len) with SHA-256 (RFC 8446 7.1). */
static int expand_label(const uint8_t secret[TLS_REC_SECRET], const char *label, uint8_t *out,
			size_t len)
{
	uint8_t info[2 + 1 + 6 + 24 + 1];
	size_t ll = strlen(label), n = 0, got = len;
	EVP_PKEY_CTX *p;
	int ok;

	if (ll > 24)
		return -EINVAL;
	info[n++] = (uint8_t)(len >> 8);
	info[n++] = (uint8_t)len;
	info[n++] = (uint8_t)(6 + ll);
	memcpy(info + n, "tls13 ", 6);
	n += 6;
	memcpy(info + n, label, ll);
	n += ll;
	info[n++] = 0; /* empty context */
	p = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	if (!p)
		return -ENOMEM;
	ok = EVP_PKEY_derive_init(p) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_mode(p, EVP_PKEY_HKDEF_MODE_EXPAND_ONLY) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_md(p, EVP_sha256()) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_key(p, secret, TLS_REC_SECRET) > 0 &&
	     EVP_PKEY_CTX_add1_hkdf_info(p, info, (int)n) > 0 &&
	     EVP_PKEY_derive(p, out, &got) > 0 && got == len;
	EVP_PKEY_CTX_free(p);
	return ok ? 0 : -EIO;
}

/* Key and IV from d->secret; seq back to 0 (R2). */
static int rekey(struct tls_rec_dir *d)
{
	uint8_t key[32];
	int keylen = EVP_CIPHER_get_key_length(d->cipher), r;

	if (keylen <= 0 || keylen > (int)sizeof(key))
		return -EIO;
	r = expand_label(d->secret, "key", key, (size_t)keylen);
	if (!r)
		r = expand_label(d->secret, "iv", d->iv, sizeof(d->iv));
	if (!r && (EVP_CipherInit_ex(d->cx, d->cipher, NULL, NULL, NULL, d->enc) != 1 ||
		   EVP_CIPHER_CTX_ctrl(d->cx, EVP_CTRL_AEAD_SET_IVLEN, 12, NULL) != 1 ||
		   EVP_CipherInit_ex(d->cx, NULL, NULL, key, NULL, d->enc) != 1))
		r = -EIO;
	OPENSSL_cleanse(key, sizeof(key));
	d->seq = 0;
	return r;
}

int tls_rec_init(struct tls_rec_dir *d, unsigned suite, const uint8_t secret[TLS_REC_SECRET],
		 bool enc)
{
	int r;

	memset(d, 0, sizeof(*d));
	switch (suite) {
	case TLS_SUITE_AES_128_GCM_SHA256: d->cipher = EVP_aes_128_gcm(); break;
	case TLS_SUITE_CHACHA20_POLY1305_SHA256: d->cipher = EVP_chacha20_poly1305(); break;
	default: return -ENOTSUP;
	}
	d->cx = EVP_CIPHER_CTX_new();
	if (!d->cx)
		return -ENOMEM;
	d->enc = enc;
	memcpy(d->secret, secret, TLS_REC_SECRET);
	r = rekey(d);
	if (r)
		tls_rec_free(d);
	return r;
}

int tls_rec_update(struct tls_rec_dir *d)
{
	uint8_t next[TLS_REC_SECRET];
	int r = expand_label(d->secret, "traffic upd", next, sizeof(next));

	if (r)
		return r;
	memcpy(d->secret, next, sizeof(next));
	OPENSSL_cleanse(next, sizeof(next));
	return rekey(d);
}

void tls_rec_free(struct tls_rec_dir *d)
{
	EVP_CIPHER_CTX_free(d->cx);
	OPENSSL_cleanse(d, sizeof(*d));
}

static int start(struct tls_rec_dir *d)
{
	uint8_t nonce[12];

	if (d->seq == UINT64_MAX) /* R1 */
		return -EIO;
	memcpy(nonce, d->iv, sizeof(nonce));
	for (int i = 0; i < 8; i++)
		nonce[4 + i] ^= (uint8_t)(d->seq >> (56 - 8 * i));
	d->seq++;
	return EVP_CipherInit_ex(d->cx, NULL, NULL, NULL, nonce, d->enc) == 1 ? 0 : -EIO;
}

long tls_rec_seal(struct tls_rec_dir *d, uint8_t type, const void *pt, size_t len, uint8_t *out)
{
	size_t ctlen = len + 1 + TLS_REC_TAG;
	uint8_t *p = out + TLS_REC_HDR;
	int n;

	if (len > TLS_REC_PLAIN_MAX || start(d))
		return -EIO;
	out[0] = TLS_CT_APPDATA;
	out[1] = 3;
	out[2] = 3;
	put16(out + 3, (uint16_t)ctlen);
	if (EVP_EncryptUpdate(d->cx, NULL, &n, out, TLS_REC_HDR) != 1)
		return -EIO;
	if (len) {
		if (EVP_EncryptUpdate(d->cx, p, &n, pt, (int)len) != 1 || (size_t)n != len)
			return -EIO;
		p += n;
	}
	if (EVP_EncryptUpdate(d->cx, p, &n, &type, 1) != 1 || n != 1)
		return -EIO;
	p += 1;
	if (EVP_EncryptFinal_ex(d->cx, p, &n) != 1 || n != 0 ||
	    EVP_CIPHER_CTX_ctrl(d->cx, EVP_CTRL_AEAD_GET_TAG, TLS_REC_TAG, p) != 1)
		return -EIO;
	return (long)(TLS_REC_HDR + ctlen);
}

int tls_rec_header(const uint8_t *p, size_t n, size_t *len)
{
	size_t l;

	if (n < TLS_REC_HDR)
		return 0;
	l = get16(p + 3);
	if (p[0] != TLS_CT_APPDATA || p[1] != 3 || p[2] != 3 || l < 1 + TLS_REC_TAG ||
	    l > TLS_REC_CIPHER_MAX)
		return -EBADMSG;
	*len = l;
	return 1;
}

long tls_rec_inner(const uint8_t *p, size_t n, uint8_t *type)
{
	while (n && !p[n - 1])
		n--;
	if (!n)
		return -EBADMSG;
	*type = p[n - 1];
	return (long)(n - 1);
}

long tls_rec_open(struct tls_rec_dir *d, const uint8_t *hdr, const uint8_t *ct, size_t ctlen,
		  uint8_t *out, uint8_t *type)
{
	size_t len = ctlen - TLS_REC_TAG;
	uint8_t tag[TLS_REC_TAG];
	int n;

	if (ctlen < 1 + TLS_REC_TAG || ctlen > TLS_REC_CIPHER_MAX || start(d))
		return -EIO;
	memcpy(tag, ct + len, TLS_REC_TAG); /* (out may be ct) */
	if (EVP_DecryptUpdate(d->cx, NULL, &n, hdr, TLS_REC_HDR) != 1 ||
	    EVP_DecryptUpdate(d->cx, out, &n, ct, (int)len) != 1 || (size_t)n != len ||
	    EVP_CIPHER_CTX_ctrl(d->cx, EVP_CTRL_AEAD_SET_TAG, TLS_REC_TAG, tag) != 1)
		return -EIO;
	long k;

	if (EVP_DecryptFinal_ex(d->cx, out + len, &n) != 1)
		return -EBADMSG;
	k = tls_rec_inner(out, len, type);
	/* RFC 8446 5.4: more than 2^14 bytes of content is record_overflow */
	return k > (long)TLS_REC_PLAIN_MAX ? -EBADMSG : k;
}

int tls_rec_post_handshake(const uint8_t *p, size_t n, bool *request)
{
	if (n < 4 || (size_t)((p[1] << 16) | (p[2] << 8) | p[3]) != n - 4)
		return -EBADMSG; /* one whole message per record */
	switch (p[0]) {
	case 4: /* NewSessionTicket */ return 0;
	case 24: /* KeyUpdate */
		if (n != 5 || p[4] > 1)
			return -EBADMSG;
		*request = p[4] == 1;
		return 1;
	default: return -EBADMSG;
	}
}
