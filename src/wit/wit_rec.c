/* The witness's record: see wit_rec.h. */
#include "wit_rec.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/crc32c.h"
#include "../common/fsutil.h"

static void set_name(char dst[WIT_NAME_LEN], const char *src)
{
	size_t n = strnlen(src, WIT_NAME_LEN - 1);
	memset(dst, 0, WIT_NAME_LEN);
	memcpy(dst, src, n);
}

static bool holds_gen(const struct wit_vol_msg *m, uint64_t g)
{
	/* "empty" (a pair created empty, never written): nothing to hold; its
	 * primary leaves it for a generation of its own at once (gen_rotate) */
	if (m->gen == g || g <= TANDEM_MD_GEN_EMPTY)
		return true;
	for (unsigned i = 0; i < WIT_HISTORY; i++)
		if (g > TANDEM_MD_GEN_EMPTY && m->history[i] == g)
			return true;
	return false;
}

uint32_t wit_rec_report(struct wit_rec *r, const char *node, const struct wit_vol_msg *m,
			bool *changed)
{
	bool synced = (m->flags & WIT_F_SYNCED) != 0;

	*changed = false;
	if (m->flags & WIT_F_PRIMARY) {
		if (r->primary[0] && strcmp(r->primary, node))
			return WIT_R_DEPOSED; /* W1: another node holds the record */
		/* W1 (data, not names): the named node too must hold the data
		 * it was recorded with: a node whose disk was replaced or
		 * wiped, with the same name, does not. */
		if (r->primary[0] && !holds_gen(m, r->gen))
			return WIT_R_DEPOSED;
		/* W1: a free record that named a primary before takes only a
		 * node that holds what that primary released (W2); any other is a
		 * primary from before a failover that never stepped down. */
		if (!r->primary[0] && r->epoch > 0 && !holds_gen(m, r->gen))
			return WIT_R_DEPOSED;
		if (!r->primary[0]) {
			set_name(r->primary, node);
			r->epoch++;
			*changed = true;
		}
		if (r->gen != m->gen || r->synced != synced) {
			r->gen = m->gen;
			r->synced = synced;
			*changed = true;
		}
		return WIT_R_OK;
	}
	if ((m->flags & WIT_F_RELEASE) && !strcmp(r->primary, node)) {
		/* W2: an orderly demotion; synced stays what the primary
		 * last said, gen becomes the data it leaves (every write it
		 * acknowledged is in it: a demotion waits for the writes in
		 * flight). */
		memset(r->primary, 0, sizeof(r->primary));
		/* W5: a named node whose data was replaced since releases too
		 * (it cannot serve); what it leaves is not the recorded data,
		 * so the generation stays: only a node holding it, or a
		 * --force, is granted the record now (W3.1). */
		if (holds_gen(m, r->gen))
			r->gen = m->gen;
		r->epoch++;
		*changed = true;
	}
	return WIT_R_OK;
}

enum wit_claim_outcome wit_rec_claim(const struct wit_rec *r, const char *node,
				     const struct wit_vol_msg *m, bool primary_alive, bool in_grace,
				     uint32_t *reason)
{
	bool force = (m->flags & WIT_F_FORCE) != 0;

	*reason = WIT_NONE;
	if (r->primary[0] && !strcmp(r->primary, node)) {
		/* it is the recorded primary already, if it still holds the
		 * data it was recorded with (W3: data, not names) */
		if (force || holds_gen(m, r->gen))
			return WIT_GRANT;
		*reason = WIT_OLDER_DATA;
		return WIT_DENY;
	}
	if (!force) {
		if (!r->primary[0] && r->epoch == 0) {
			/* nothing known: never by itself (the state file may
			 * have been lost), by hand the operator's choice */
			if (!(m->flags & WIT_F_ADMIN)) {
				*reason = WIT_NO_RECORD;
				return WIT_DENY;
			}
		} else if (r->primary[0] && !r->synced) {
			/* the primary wrote alone: only it holds those writes.
			 * A released record's gen is the data the primary left
			 * (W2): whoever holds it holds every write. */
			*reason = WIT_NOT_SYNCED;
			return WIT_DENY;
		} else if (!holds_gen(m, r->gen)) {
			*reason = WIT_OLDER_DATA;
			return WIT_DENY;
		}
	}
	if (r->primary[0] && (primary_alive || in_grace)) {
		*reason = WIT_PRIMARY_ALIVE;
		return WIT_WAIT;
	}
	return WIT_GRANT;
}

void wit_rec_grant(struct wit_rec *r, const char *node, const struct wit_vol_msg *m)
{
	set_name(r->primary, node);
	r->gen = m->gen;
	r->synced = false;
	r->epoch++;
}

void wit_rec_verdict(const struct wit_rec *r, struct wit_verdict *v)
{
	set_name(v->volume, r->volume);
	set_name(v->primary, r->primary);
	v->gen = r->gen;
	v->epoch = r->epoch;
}

/* "3.0 s", "0.25 s": as the config says it, in seconds */
static void secs(char *buf, size_t len, uint64_t ms)
{
	if (ms % 100 == 0)
		snprintf(buf, len, "%llu.%llu s", (unsigned long long)(ms / 1000),
			 (unsigned long long)(ms / 100 % 10));
	else
		snprintf(buf, len, "%llu.%03llu s", (unsigned long long)(ms / 1000),
			 (unsigned long long)(ms % 1000));
}

int wit_hello_timeout_check(const char *cluster, const char *node, uint64_t node_ms,
			    uint64_t cluster_ms, char *why, size_t len)
{
	char n[32], c[32];

	if (node_ms == cluster_ms)
		return 0;
	secs(c, sizeof(c), cluster_ms);
	if (!node_ms) {
		snprintf(why, len,
			 "node %s does not say its witness-timeout (older than this witness? "
			 "upgrade it); this witness has %s for cluster %s",
			 node, c, cluster);
		return -EINVAL;
	}
	secs(n, sizeof(n), node_ms);
	snprintf(why, len,
		 "witness-timeout differs: node %s says %s, this witness has %s for cluster %s",
		 node, n, c, cluster);
	return -EINVAL;
}

int wit_store_load(const char *path, const char *cluster, struct wit_rec *recs, unsigned max,
		   unsigned *n)
{
	struct wit_state_hdr h;
	uint8_t *buf;
	size_t want;
	uint32_t crc;
	ssize_t got;
	int fd, rc = 0;

	*n = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	want = sizeof(h) + (size_t)WIT_STATE_MAX_RECS * sizeof(struct wit_state_rec) + 4;
	buf = malloc(want + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	got = read(fd, buf, want + 1);
	close(fd);
	if (got < 0) {
		rc = -errno;
		goto out;
	}
	rc = -EBADMSG;
	if ((size_t)got < sizeof(h) + 4 || (size_t)got > want)
		goto out;
	memcpy(&h, buf, sizeof(h));
	if (le64toh(h.magic) != WIT_STATE_MAGIC || le32toh(h.version) != WIT_STATE_VERSION ||
	    le32toh(h.nrec) > WIT_STATE_MAX_RECS ||
	    (size_t)got != sizeof(h) + le32toh(h.nrec) * sizeof(struct wit_state_rec) + 4 ||
	    strncmp(h.cluster, cluster, WIT_NAME_LEN))
		goto out;
	memcpy(&crc, buf + got - 4, 4);
	if (crc32c(0, buf, (size_t)got - 4) != le32toh(crc))
		goto out;
	for (uint32_t i = 0; i < le32toh(h.nrec) && *n < max; i++) {
		struct wit_state_rec s;
		struct wit_rec *r = &recs[*n];
		memcpy(&s, buf + sizeof(h) + i * sizeof(s), sizeof(s));
		if (!memchr(s.volume, 0, WIT_NAME_LEN) || !memchr(s.primary, 0, WIT_NAME_LEN) ||
		    !s.volume[0])
			goto out;
		memset(r, 0, sizeof(*r));
		set_name(r->volume, s.volume);
		set_name(r->primary, s.primary);
		r->gen = le64toh(s.gen);
		r->epoch = le64toh(s.epoch);
		r->synced = (le32toh(s.flags) & WIT_REC_F_SYNCED) != 0;
		(*n)++;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

int wit_store_save(const char *path, const char *cluster, const struct wit_rec *recs, unsigned n)
{
	char tmp[512];
	struct wit_state_hdr h;
	uint8_t *buf;
	size_t len;
	uint32_t crc;
	int fd, rc = 0;

	if (n > WIT_STATE_MAX_RECS || strlen(path) + 5 > sizeof(tmp))
		return -EINVAL;
	len = sizeof(h) + n * sizeof(struct wit_state_rec) + 4;
	buf = calloc(1, len);
	if (!buf)
		return -ENOMEM;
	memset(&h, 0, sizeof(h));
	h.magic = htole64(WIT_STATE_MAGIC);
	h.version = htole32(WIT_STATE_VERSION);
	h.nrec = htole32(n);
	set_name(h.cluster, cluster);
	memcpy(buf, &h, sizeof(h));
	for (unsigned i = 0; i < n; i++) {
		struct wit_state_rec s;
		memset(&s, 0, sizeof(s));
		set_name(s.volume, recs[i].volume);
		set_name(s.primary, recs[i].primary);
		s.gen = htole64(recs[i].gen);
		s.epoch = htole64(recs[i].epoch);
		s.flags = htole32(recs[i].synced ? WIT_REC_F_SYNCED : 0);
		memcpy(buf + sizeof(h) + i * sizeof(s), &s, sizeof(s));
	}
	crc = htole32(crc32c(0, buf, len - 4));
	memcpy(buf + len - 4, &crc, 4);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if (write(fd, buf, len) != (ssize_t)len || fsync(fd) < 0) {
		rc = errno ? -errno : -EIO;
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	/* durable before the witness answers from the new record */
	rc = rename_durable(tmp, path);
	if (rc)
		unlink(tmp);
out:
	free(buf);
	return rc;
}
