/* INI parsing (libinih) and validation of the cluster configuration.
 * Every error is one line: "FILE:LINE: [section] key: what is wrong". Unknown
 * sections and keys, duplicates, bad sizes and addresses, and references to
 * undefined nodes are all errors: nothing is silently ignored. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <linux/fs.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../include/proto/ondisk.h"
#include "../common/util.h"

enum sect { S_NONE, S_CLUSTER, S_NODE, S_VOLUME };

struct addr_use {
	struct sockaddr_storage ss;
	socklen_t len;
	char where[CFG_NAME_MAX + 32];
	int line;
};

struct pending_ref { /* resolved once every node is known */
	unsigned vol;
	char node[CFG_NAME_MAX];
	char disk[CFG_PATH_MAX]; /* "" for a nodes= entry */
	int line;
	char key[CFG_NAME_MAX + 8];
};

struct parse {
	struct cfg *cfg;
	const char *name;
	const char *text;
	int line;
	int cluster_line;
	int per_addr_line; /* of max-connections-per-address, checked at the end */
	int tls_line, tls_cert_line; /* of tls and tls-cert (or tls-key, tls-ca) */
	char *err;
	size_t errlen;
	int failed;
	/* current section */
	char section[160];
	enum sect kind;
	int idx;
	uint64_t seen; /* bitmask of keys seen in the current section */
	int have_cluster;
	struct addr_use addrs[CFG_MAX_NODES * 4 + 1];
	unsigned naddrs;
	struct pending_ref refs[CFG_MAX_VOLUMES * CFG_MAX_NODES * 2];
	unsigned nrefs;
	char sections_seen[CFG_MAX_NODES + CFG_MAX_VOLUMES + 1][160];
	unsigned nsections;
};

static void fail(struct parse *p, int line, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void fail(struct parse *p, int line, const char *key, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (p->failed)
		return;
	p->failed = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0 && key)
		snprintf(p->err, p->errlen, "%s:%d: [%s] %s: %s", p->name, line, p->section, key, msg);
	else if (line > 0)
		snprintf(p->err, p->errlen, "%s:%d: %s", p->name, line, msg);
	else
		snprintf(p->err, p->errlen, "%s: %s", p->name, msg);
}

static int valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > CFG_NAME_LEN)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return 0;
	return 1;
}

static int begin_section(struct parse *p, const char *section);

/* Feeds inih one line per call, so that p->line is the line being handled, and
 * does the part of parsing where inih would be silent or lossy: section
 * headers (inih only reports a section with its first key and truncates long
 * names), lines that are neither header nor "key = value", over-long lines and
 * keys. Leading blanks are dropped, so no line is a continuation line. A
 * syntax error stops parsing right there (returning NULL ends inih's loop). */
static char *reader(char *buf, int num, void *stream)
{
	struct parse *p = stream;
	const char *nl, *s;
	size_t len;

	if (!*p->text || p->failed)
		return NULL;
	nl = strchr(p->text, '\n');
	len = nl ? (size_t)(nl - p->text) + 1 : strlen(p->text);
	s = p->text;
	p->text += len;
	p->line++;
	while (len && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	if (len > (size_t)num - 1 || len > CFG_LINE_MAX) {
		fail(p, p->line, NULL, "line longer than %d characters", CFG_LINE_MAX);
		return NULL;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (buf[0] == '[') {
		char name[CFG_LINE_MAX + 1];
		const char *rb = strchr(buf, ']');
		const char *a = buf + 1, *b;
		size_t n;
		if (!rb) {
			fail(p, p->line, NULL, "syntax error: section header without ']'");
			return NULL;
		}
		for (const char *t = rb + 1; *t && *t != ';' && *t != '#'; t++) {
			if (!isspace((unsigned char)*t)) {
				fail(p, p->line, NULL, "syntax error: text after the section header");
				return NULL;
			}
		}
		while (a < rb && isspace((unsigned char)*a))
			a++;
		b = rb;
		while (b > a && isspace((unsigned char)b[-1]))
			b--;
		n = (size_t)(b - a);
		memcpy(name, a, n);
		name[n] = '\0';
		if (begin_section(p, name))
			return NULL;
	} else if (buf[0] && buf[0] != ';' && buf[0] != '#' && buf[0] != '\n' && buf[0] != '\r') {
		const char *eq = strchr(buf, '=');
		const char *colon = strchr(buf, ':');
		if (!eq || (colon && colon < eq)) {
			fail(p, p->line, NULL, "syntax error: expected [section] or key = value");
			return NULL;
		}
		if ((size_t)(eq - buf) > CFG_KEY_MAX) {
			fail(p, p->line, NULL, "key longer than %d characters", CFG_KEY_MAX);
			return NULL;
		}
	}
	return buf;
}

static int set_str(struct parse *p, const char *key, const char *val, char *dst, size_t len)
{
	if (strlen(val) >= len) {
		fail(p, p->line, key, "value longer than %zu characters", len - 1);
		return -1;
	}
	memcpy(dst, val, strlen(val) + 1);
	return 0;
}

static int set_addr(struct parse *p, const char *key, const char *val, char *dst)
{
	struct addr_use *u;

	if (set_str(p, key, val, dst, CFG_ADDR_MAX))
		return -1;
	if (p->naddrs >= ARRAY_SIZE(p->addrs)) {
		fail(p, p->line, key, "too many addresses");
		return -1;
	}
	u = &p->addrs[p->naddrs];
	if (parse_addr(val, &u->ss, &u->len)) {
		fail(p, p->line, key, "'%s' is not an address of the form host:port", val);
		return -1;
	}
	for (unsigned i = 0; i < p->naddrs; i++) {
		if (p->addrs[i].len == u->len && memcmp(&p->addrs[i].ss, &u->ss, u->len) == 0) {
			fail(p, p->line, key, "address %s is already used by %s (line %d)", val,
			     p->addrs[i].where, p->addrs[i].line);
			return -1;
		}
	}
	snprintf(u->where, sizeof(u->where), "[%s] %s", p->section, key);
	u->line = p->line;
	p->naddrs++;
	return 0;
}

static int set_size(struct parse *p, const char *key, const char *val, uint64_t *dst)
{
	int r = parse_size(val, dst);
	if (r == -ERANGE) {
		fail(p, p->line, key, "'%s' is too large", val);
		return -1;
	}
	if (r) {
		fail(p, p->line, key, "'%s' is not a size (a number with an optional K, M, G or T suffix)",
		     val);
		return -1;
	}
	return 0;
}

static int add_ref(struct parse *p, const char *key, const char *node, const char *disk)
{
	struct pending_ref *r;

	if (p->nrefs >= ARRAY_SIZE(p->refs)) {
		fail(p, p->line, key, "too many node references");
		return -1;
	}
	r = &p->refs[p->nrefs++];
	r->vol = (unsigned)p->idx;
	snprintf(r->node, sizeof(r->node), "%s", node);
	snprintf(r->disk, sizeof(r->disk), "%s", disk ? disk : "");
	snprintf(r->key, sizeof(r->key), "%s", key);
	r->line = p->line;
	return 0;
}

/* Key tables: a bit per key detects duplicates within a section. */
static const char *const cluster_keys[] = { "name",
					    "secret",
					    "witness",
					    "peer-timeout",
					    "auth",
					    "chap-user",
					    "chap-secret",
					    "chap-mutual-user",
					    "chap-mutual-secret",
					    "max-connections",
					    "max-connections-per-address",
					    "handshake-timeout",
					    "witness-timeout",
					    "quorum-timeout",
					    "disk-slow-ms",
					    "disk-slow-s",
					    "on-io-error",
					    "on-disk-failure",
					    "resync-link-rate",
					    "witness-dir",
					    "compression",
					    "tls",
					    "tls-cert",
					    "tls-key",
					    "tls-ca",
					    NULL };
static const char *const node_keys[] = {
	"replication", "iscsi",     "nbd",          "control",         "data-dir",
	"metrics",     "busy-poll", "control-mode", "fault-injection", "replication-advertise",
	"witness",     NULL
};
static const char *const volume_keys[] = { "size",
					   "nodes",
					   "replication",
					   "async-backlog",
					   "async-max-lag",
					   "on-congestion",
					   "resync-rate",
					   "resync-min-rate",
					   "cache",
					   "bitmap-granularity",
					   "resync-checksum",
					   "auth",
					   "chap-user",
					   "chap-secret",
					   "chap-mutual-user",
					   "chap-mutual-secret",
					   "failover",
					   "compression",
					   NULL };

static int key_index(const char *const *keys, const char *key)
{
	for (int i = 0; keys[i]; i++)
		if (strcmp(keys[i], key) == 0)
			return i;
	return -1;
}

static int begin_section(struct parse *p, const char *section)
{
	char kind[32], name[CFG_NAME_MAX + 64], extra[8];
	int n;

	snprintf(p->section, sizeof(p->section), "%s", section);
	p->seen = 0;
	for (unsigned i = 0; i < p->nsections; i++) {
		if (strcmp(p->sections_seen[i], section) == 0) {
			fail(p, p->line, NULL, "section [%s] appears twice", section);
			return -1;
		}
	}
	if (p->nsections < ARRAY_SIZE(p->sections_seen))
		snprintf(p->sections_seen[p->nsections++], sizeof(p->sections_seen[0]), "%s", section);

	n = sscanf(section, "%31s %127s %7s", kind, name, extra);
	if (n == 1 && strcmp(kind, "cluster") == 0) {
		p->kind = S_CLUSTER;
		p->have_cluster = 1;
		p->cluster_line = p->line;
		return 0;
	}
	if (n == 2 && strcmp(kind, "node") == 0) {
		struct cfg_node *nd;
		if (!valid_name(name)) {
			fail(p, p->line, NULL, "[%s]: node name must be 1-32 of A-Z a-z 0-9 - _ .", section);
			return -1;
		}
		if (p->cfg->nnodes >= CFG_MAX_NODES) {
			fail(p, p->line, NULL, "[%s]: more than %d nodes", section, CFG_MAX_NODES);
			return -1;
		}
		p->kind = S_NODE;
		p->idx = (int)p->cfg->nnodes++;
		nd = &p->cfg->nodes[p->idx];
		snprintf(nd->name, sizeof(nd->name), "%s", name);
		nd->busy_poll_us = CFG_BUSY_POLL_DEFAULT;
		nd->control_mode = 0600;
		nd->line = p->line;
		return 0;
	}
	if (n == 2 && strcmp(kind, "volume") == 0) {
		struct cfg_volume *v;
		if (!valid_name(name)) {
			fail(p, p->line, NULL, "[%s]: volume name must be 1-32 of A-Z a-z 0-9 - _ .",
			     section);
			return -1;
		}
		if (p->cfg->nvolumes >= CFG_MAX_VOLUMES) {
			fail(p, p->line, NULL, "[%s]: more than %d volumes", section, CFG_MAX_VOLUMES);
			return -1;
		}
		p->kind = S_VOLUME;
		p->idx = (int)p->cfg->nvolumes++;
		v = &p->cfg->volumes[p->idx];
		snprintf(v->name, sizeof(v->name), "%s", name);
		v->line = p->line;
		v->replication = CFG_REPL_SYNC;
		v->async_backlog = 64ull << 20;
		v->resync_min_rate = 256ull << 10;
		v->bitmap_granularity = CFG_BITMAP_GRANULARITY_DEFAULT;
		return 0;
	}
	fail(p, p->line, NULL, "unknown section [%s] (expected [cluster], [node NAME] or [volume NAME])",
	     section);
	return -1;
}

/* A key of two values, a or b (named in that order when val is neither): *out
 * is whether val is yes (one of the two). */
static int set_choice(struct parse *p, const char *key, const char *val, const char *a,
		      const char *b, const char *yes, bool *out)
{
	if (strcmp(val, a) && strcmp(val, b)) {
		fail(p, p->line, key, "'%s' is not %s or %s", val, a, b);
		return -1;
	}
	*out = !strcmp(val, yes);
	return 0;
}

/* compression = none | lz4 | zstd ([cluster] and [volume]) */
static int set_compression(struct parse *p, const char *key, const char *val,
			   enum cfg_compress *dst)
{
	if (strcmp(val, "none") == 0)
		*dst = CFG_COMPRESS_NONE;
	else if (strcmp(val, "lz4") == 0)
		*dst = CFG_COMPRESS_LZ4;
	else if (strcmp(val, "zstd") == 0)
		*dst = CFG_COMPRESS_ZSTD;
	else {
		fail(p, p->line, key, "'%s' is not one of none, lz4, zstd", val);
		return -1;
	}
	return 0;
}

/* auth, chap-*: 1 when key is one of them (handled, or failed), 0 if not. */
static int handle_auth(struct parse *p, struct cfg_auth *a, const char *key, const char *val,
		       int *rc)
{
	char *dst = NULL;

	*rc = 0;
	if (strcmp(key, "auth") == 0) {
		a->set = true;
		if (strcmp(val, "chap") == 0) {
			a->chap = true;
		} else if (strcmp(val, "none") == 0) {
			a->chap = false;
		} else {
			fail(p, p->line, key, "'%s' is neither none nor chap", val);
			*rc = -1;
		}
		return 1;
	}
	if (strcmp(key, "chap-user") == 0)
		dst = a->user;
	else if (strcmp(key, "chap-secret") == 0)
		dst = a->secret;
	else if (strcmp(key, "chap-mutual-user") == 0)
		dst = a->muser;
	else if (strcmp(key, "chap-mutual-secret") == 0)
		dst = a->msecret;
	else
		return 0;
	a->set = true;
	if (!*val || strlen(val) >= CFG_CHAP_MAX) {
		fail(p, p->line, key, "must be 1 to %d characters", CFG_CHAP_MAX - 1);
		*rc = -1;
		return 1;
	}
	/* RFC 7143 12.1.3: CHAP secrets of at least 12 bytes are recommended;
	 * fewer is allowed but weak. */
	snprintf(dst, CFG_CHAP_MAX, "%s", val);
	return 1;
}

static int handle_cluster(struct parse *p, const char *key, const char *val)
{
	int rc;

	if (handle_auth(p, &p->cfg->auth, key, val, &rc))
		return rc;
	struct cfg *c = p->cfg;

	if (strcmp(key, "name") == 0) {
		if (!valid_name(val)) {
			fail(p, p->line, key, "'%s' is not a valid name (1-32 of A-Z a-z 0-9 - _ .)", val);
			return -1;
		}
		return set_str(p, key, val, c->cluster, sizeof(c->cluster));
	}
	if (strcmp(key, "secret") == 0) {
		if (!*val) {
			fail(p, p->line, key, "empty secret");
			return -1;
		}
		return set_str(p, key, val, c->secret, sizeof(c->secret));
	}
	if (strcmp(key, "peer-timeout") == 0) {
		char *end;
		double sec;
		errno = 0;
		sec = strtod(val, &end);
		if (val[0] < '0' || val[0] > '9' || errno || *end || !(sec >= 0.2 && sec <= 300)) {
			fail(p, p->line, key, "'%s' is not a number of seconds from 0.2 to 300", val);
			return -1;
		}
		c->peer_timeout_ms = (unsigned)(sec * 1000 + 0.5);
		return 0;
	}
	if (strcmp(key, "witness-timeout") == 0 || strcmp(key, "quorum-timeout") == 0) {
		bool wt = key[0] == 'w';
		double lo = wt ? 0.2 : 1, hi = wt ? 300 : 3600;
		char *end;
		double sec;
		errno = 0;
		sec = strtod(val, &end);
		if (val[0] < '0' || val[0] > '9' || errno || *end || !(sec >= lo && sec <= hi)) {
			fail(p, p->line, key, "'%s' is not a number of seconds from %g to %g", val,
			     lo, hi);
			return -1;
		}
		if (wt)
			c->witness_timeout_ms = (unsigned)(sec * 1000 + 0.5);
		else
			c->quorum_timeout_ms = (unsigned)(sec * 1000 + 0.5);
		return 0;
	}
	if (strcmp(key, "disk-slow-ms") == 0 || strcmp(key, "disk-slow-s") == 0) {
		bool ms = key[10] == 'm';
		unsigned long lo = ms ? 0 : 1, hi = ms ? 600000 : 3600, v;
		char *end;
		errno = 0;
		v = strtoul(val, &end, 10);
		if (val[0] < '0' || val[0] > '9' || errno || *end || v < lo || v > hi) {
			fail(p, p->line, key, "'%s' is not a number from %lu to %lu", val, lo, hi);
			return -1;
		}
		if (ms)
			c->disk_slow_ms = (unsigned)v;
		else
			c->disk_slow_s = (unsigned)v;
		return 0;
	}
	if (strcmp(key, "on-io-error") == 0)
		return set_choice(p, key, val, "detach", "pass-on", "pass-on",
				  &c->io_error_pass_on);
	if (strcmp(key, "on-disk-failure") == 0)
		return set_choice(p, key, val, "serve", "handover", "handover",
				  &c->disk_failure_handover);
	if (strcmp(key, "resync-link-rate") == 0) {
		if (strcmp(val, "none") == 0) {
			c->resync_link_rate = 0;
			return 0;
		}
		if (set_size(p, key, val, &c->resync_link_rate))
			return -1;
		if (c->resync_link_rate < 4096) {
			fail(p, p->line, key,
			     "resync-link-rate must be 'none' or at least 4K (bytes/s)");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "compression") == 0)
		return set_compression(p, key, val, &c->compression);
	if (strcmp(key, "tls") == 0) {
		p->tls_line = p->line;
		return set_choice(p, key, val, "on", "off", "on", &c->tls);
	}
	if (!strcmp(key, "tls-cert") || !strcmp(key, "tls-key") || !strcmp(key, "tls-ca")) {
		char *dst = key[4] == 'c' && key[5] == 'e' ? c->tls_cert
			    : key[4] == 'k'                ? c->tls_key
							   : c->tls_ca;
		if (val[0] != '/') {
			fail(p, p->line, key, "'%s' is not an absolute path", val);
			return -1;
		}
		if (!p->tls_cert_line)
			p->tls_cert_line = p->line;
		return set_str(p, key, val, dst, CFG_PATH_MAX);
	}
	if (strcmp(key, "witness-dir") == 0) {
		if (val[0] != '/') {
			fail(p, p->line, key, "'%s' is not an absolute path", val);
			return -1;
		}
		return set_str(p, key, val, c->witness_dir, sizeof(c->witness_dir));
	}
	if (strcmp(key, "handshake-timeout") == 0) {
		char *end;
		double sec;
		errno = 0;
		sec = strtod(val, &end);
		if (val[0] < '0' || val[0] > '9' || errno || *end || !(sec >= 0.1 && sec <= 3600)) {
			fail(p, p->line, key, "'%s' is not a number of seconds from 0.1 to 3600", val);
			return -1;
		}
		c->handshake_timeout_ms = (unsigned)(sec * 1000 + 0.5);
		return 0;
	}
	if (strcmp(key, "max-connections") == 0 || strcmp(key, "max-connections-per-address") == 0) {
		char *end;
		unsigned long n;
		errno = 0;
		n = strtoul(val, &end, 10);
		if (val[0] < '0' || val[0] > '9' || errno || *end || n < 1 || n > CFG_MAX_CONNS_LIMIT) {
			fail(p, p->line, key, "'%s' is not a number of connections from 1 to %d", val,
			     CFG_MAX_CONNS_LIMIT);
			return -1;
		}
		if (strlen(key) > strlen("max-connections")) {
			c->max_conns_per_addr = (unsigned)n;
			p->per_addr_line = p->line;
		} else {
			c->max_conns = (unsigned)n;
		}
		return 0;
	}
	return set_addr(p, key, val, c->witness);
}

static int handle_node(struct parse *p, const char *key, const char *val)
{
	struct cfg_node *n = &p->cfg->nodes[p->idx];

	if (strcmp(key, "replication") == 0)
		return set_addr(p, key, val, n->replication);
	if (strcmp(key, "replication-advertise") == 0)
		return set_addr(p, key, val, n->replication_advertise);
	if (strcmp(key, "witness") == 0)
		return set_addr(p, key, val, n->witness);
	if (strcmp(key, "iscsi") == 0)
		return set_addr(p, key, val, n->iscsi);
	if (strcmp(key, "nbd") == 0)
		return set_addr(p, key, val, n->nbd);
	if (strcmp(key, "metrics") == 0)
		return set_addr(p, key, val, n->metrics);
	if (strcmp(key, "control-mode") == 0) {
		/* who may use the control socket: its owner (root), or also its
		 * group, or everyone (then anyone can demote or invalidate) */
		if (strcmp(val, "0600") && strcmp(val, "600") && strcmp(val, "0660") &&
		    strcmp(val, "660") && strcmp(val, "0666") && strcmp(val, "666")) {
			fail(p, p->line, key, "'%s' is not 0600, 0660 or 0666", val);
			return -1;
		}
		n->control_mode = (unsigned)strtoul(val, NULL, 8);
		return 0;
	}
	if (strcmp(key, "fault-injection") == 0) {
		/* `tandemctl inject`: makes the disk fail on purpose (tests) */
		return set_choice(p, key, val, "on", "off", "on", &n->fault_injection);
	}
	if (strcmp(key, "busy-poll") == 0) {
		char *end;
		unsigned long us;
		errno = 0;
		us = strtoul(val, &end, 10);
		if (val[0] < '0' || val[0] > '9' || errno || *end || us > CFG_BUSY_POLL_MAX) {
			fail(p, p->line, key, "'%s' is not a number of microseconds from 0 to %d", val,
			     CFG_BUSY_POLL_MAX);
			return -1;
		}
		n->busy_poll_us = (unsigned)us;
		return 0;
	}
	if (strcmp(key, "control") == 0 || strcmp(key, "data-dir") == 0) {
		char *dst = key[0] == 'c' ? n->control : n->data_dir;
		*(key[0] == 'c' ? &n->control_line : &n->data_dir_line) = p->line;
		if (!*val) {
			fail(p, p->line, key, "empty path");
			return -1;
		}
		if (set_str(p, key, val, dst, CFG_PATH_MAX))
			return -1;
		for (unsigned i = 0; i < p->cfg->nnodes; i++) {
			const struct cfg_node *o = &p->cfg->nodes[i];
			if ((int)i != p->idx && (strcmp(o->control, val) == 0 ||
						 strcmp(o->data_dir, val) == 0)) {
				fail(p, p->line, key, "path %s is already used by node %s", val, o->name);
				return -1;
			}
		}
		if (strcmp(n->control, n->data_dir) == 0) {
			fail(p, p->line, key, "control and data-dir must differ");
			return -1;
		}
		return 0;
	}
	return -1;
}

static int handle_volume(struct parse *p, const char *key, const char *val)
{
	struct cfg_volume *v = &p->cfg->volumes[p->idx];
	int rc;

	if (handle_auth(p, &v->auth, key, val, &rc))
		return rc;
	if (strcmp(key, "size") == 0) {
		if (set_size(p, key, val, &v->size))
			return -1;
		if (v->size == 0 || v->size % 4096) {
			fail(p, p->line, key, "size must be a non-zero multiple of 4K");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "nodes") == 0) {
		char buf[CFG_PATH_MAX], *save = NULL, *tok;
		if (set_str(p, key, val, buf, sizeof(buf)))
			return -1;
		for (tok = strtok_r(buf, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save))
			if (add_ref(p, key, tok, NULL))
				return -1;
		return 0;
	}
	if (strcmp(key, "replication") == 0) {
		if (strcmp(val, "sync") == 0)
			v->replication = CFG_REPL_SYNC;
		else if (strcmp(val, "async") == 0)
			v->replication = CFG_REPL_ASYNC;
		else {
			fail(p, p->line, key, "'%s' is neither sync nor async", val);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "async-backlog") == 0) {
		if (set_size(p, key, val, &v->async_backlog))
			return -1;
		if (v->async_backlog < (1u << 20)) {
			fail(p, p->line, key, "async-backlog must be at least 1M");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "async-max-lag") == 0) {
		char *end;
		double d;
		errno = 0;
		d = strtod(val, &end);
		if (errno || end == val || *end || !(d >= 0 && d <= 86400)) {
			fail(p, p->line, key, "'%s' is not a number of seconds from 0 to 86400",
			     val);
			return -1;
		}
		v->async_max_lag_ms = (uint64_t)(d * 1000 + 0.5);
		if (d > 0 && v->async_max_lag_ms < 100) {
			fail(p, p->line, key, "async-max-lag must be 0 (no bound) or at least 0.1");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "on-congestion") == 0) {
		if (strcmp(val, "ahead") == 0)
			v->congestion_block = false;
		else if (strcmp(val, "block") == 0)
			v->congestion_block = true;
		else {
			fail(p, p->line, key, "'%s' is neither ahead nor block", val);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "cache") == 0) {
		if (strcmp(val, "none") == 0)
			v->cache = CFG_CACHE_NONE;
		else if (strcmp(val, "writeback") == 0)
			v->cache = CFG_CACHE_WRITEBACK;
		else {
			fail(p, p->line, key, "'%s' is neither none nor writeback", val);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "bitmap-granularity") == 0) {
		if (set_size(p, key, val, &v->bitmap_granularity))
			return -1;
		if (v->bitmap_granularity < 4096 || v->bitmap_granularity > (64u << 20) ||
		    (v->bitmap_granularity & (v->bitmap_granularity - 1))) {
			fail(p, p->line, key, "bitmap-granularity must be a power of two from 4K to 64M");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "failover") == 0) {
		if (strcmp(val, "auto") == 0)
			v->failover_manual = false;
		else if (strcmp(val, "manual") == 0)
			v->failover_manual = true;
		else {
			fail(p, p->line, key, "'%s' is neither auto nor manual", val);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "compression") == 0) {
		v->compression_set = true;
		return set_compression(p, key, val, &v->compression);
	}
	if (strcmp(key, "resync-checksum") == 0) {
		if (strcmp(val, "yes") == 0)
			v->resync_checksum = true;
		else if (strcmp(val, "no") == 0)
			v->resync_checksum = false;
		else {
			fail(p, p->line, key, "'%s' is neither yes nor no", val);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "resync-min-rate") == 0) {
		if (strcmp(val, "0") == 0 || strcmp(val, "none") == 0) {
			v->resync_min_rate = 0;
			return 0;
		}
		if (set_size(p, key, val, &v->resync_min_rate))
			return -1;
		if (v->resync_min_rate < 4096) {
			fail(p, p->line, key, "resync-min-rate must be 0 or at least 4K (bytes/s)");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "resync-rate") == 0) {
		if (strcmp(val, "auto") == 0) {
			v->resync_rate = 0;
			return 0;
		}
		if (set_size(p, key, val, &v->resync_rate))
			return -1;
		if (v->resync_rate < 4096) {
			fail(p, p->line, key, "resync-rate must be 'auto' or at least 4K (bytes/s)");
			return -1;
		}
		return 0;
	}
	return -1;
}

static int handler(void *user, const char *section, const char *key, const char *val)
{
	struct parse *p = user;
	const char *const *keys;
	int k;

	(void)section; /* the reader tracks sections itself, see there */
	if (p->failed)
		return 1;
	if (p->kind == S_NONE) {
		fail(p, p->line, key, "key outside any section");
		return 0;
	}
	if (p->kind == S_VOLUME && strncmp(key, "disk.", 5) == 0) {
		for (unsigned i = 0; i < p->nrefs; i++) {
			if (p->refs[i].vol == (unsigned)p->idx && strcmp(p->refs[i].key, key) == 0) {
				fail(p, p->line, key, "key given twice (first on line %d)",
				     p->refs[i].line);
				return 0;
			}
		}
		return add_ref(p, key, key + 5, val) == 0;
	}
	keys = p->kind == S_CLUSTER ? cluster_keys : p->kind == S_NODE ? node_keys : volume_keys;
	k = key_index(keys, key);
	if (k < 0) {
		fail(p, p->line, key, "unknown key");
		return 0;
	}
	if (p->seen & (1ull << k)) {
		fail(p, p->line, key, "key given twice");
		return 0;
	}
	p->seen |= 1ull << k;
	if (p->kind == S_CLUSTER)
		return handle_cluster(p, key, val) == 0;
	if (p->kind == S_NODE)
		return handle_node(p, key, val) == 0;
	return handle_volume(p, key, val) == 0;
}

/* CHAP needs a user and a secret; mutual CHAP both of its own, different
 * from the initiator's secret (RFC 7143 12.1.3). */
static int check_auth(struct parse *p, const struct cfg_auth *a, int line, const char *where)
{
	if (!a->chap)
		return 0;
	if (!a->user[0] || !a->secret[0]) {
		fail(p, line, NULL, "%s: auth = chap needs chap-user and chap-secret", where);
		return -1;
	}
	if (!a->muser[0] != !a->msecret[0]) {
		fail(p, line, NULL, "%s: mutual CHAP needs both chap-mutual-user and "
				    "chap-mutual-secret", where);
		return -1;
	}
	if (a->msecret[0] && strcmp(a->secret, a->msecret) == 0) {
		fail(p, line, NULL, "%s: chap-mutual-secret must differ from chap-secret", where);
		return -1;
	}
	return 0;
}

static int resolve(struct parse *p)
{
	struct cfg *c = p->cfg;

	if (!p->have_cluster) {
		fail(p, 0, NULL, "missing section [cluster]");
		return -1;
	}
	if (!*c->cluster) {
		fail(p, p->cluster_line, NULL, "[cluster] has no 'name'");
		return -1;
	}
	if (c->max_conns_per_addr > c->max_conns) {
		snprintf(p->section, sizeof(p->section), "cluster");
		fail(p, p->per_addr_line ? p->per_addr_line : p->cluster_line,
		     "max-connections-per-address", "%u is more than max-connections (%u)",
		     c->max_conns_per_addr, c->max_conns);
		return -1;
	}
	if (c->nnodes == 0) {
		fail(p, 0, NULL, "no [node NAME] section");
		return -1;
	}
	for (unsigned i = 0; i < c->nnodes; i++) {
		struct cfg_node *n = &c->nodes[i];
		snprintf(p->section, sizeof(p->section), "node %s", n->name);
		if (!*n->control) {
			fail(p, n->line, NULL, "[node %s] has no 'control' key", n->name);
			return -1;
		}
		if (!*n->data_dir) {
			fail(p, n->line, NULL, "[node %s] has no 'data-dir' key", n->name);
			return -1;
		}
		if (c->nnodes > 1 && !*n->replication) {
			fail(p, n->line, NULL, "[node %s] has no 'replication' address", n->name);
			return -1;
		}
	}
	if (c->nnodes > 1 && !*c->secret) {
		fail(p, p->cluster_line, NULL,
		     "[cluster] needs a 'secret' when there is more than one node");
		return -1;
	}
	if (p->tls_cert_line) {
		snprintf(p->section, sizeof(p->section), "cluster");
		if (!c->tls) {
			fail(p, p->tls_cert_line, NULL,
			     "tls-cert, tls-key and tls-ca need tls = on in [cluster]");
			return -1;
		}
		if (!*c->tls_cert || !*c->tls_key || !*c->tls_ca) {
			fail(p, p->tls_cert_line,
			     !*c->tls_cert  ? "tls-cert"
			     : !*c->tls_key ? "tls-key"
					    : "tls-ca",
			     "missing: tls-cert, tls-key and tls-ca go together");
			return -1;
		}
	}
	if (c->tls && !*c->tls_cert && !*c->secret) {
		snprintf(p->section, sizeof(p->section), "cluster");
		fail(p, p->tls_line, "tls",
		     "tls = on without tls-cert needs a 'secret' (the TLS key is derived from it)");
		return -1;
	}
	for (unsigned i = 0; i < p->nrefs; i++) {
		struct pending_ref *r = &p->refs[i];
		struct cfg_volume *v = &c->volumes[r->vol];
		int n = cfg_node_index(c, r->node);
		snprintf(p->section, sizeof(p->section), "volume %s", v->name);
		if (n < 0) {
			fail(p, r->line, r->key, "no node named '%s'", r->node);
			return -1;
		}
		if (r->key[0] == 'n') { /* nodes = ... */
			if (cfg_volume_has_node(v, (unsigned)n)) {
				fail(p, r->line, r->key, "node '%s' listed twice", r->node);
				return -1;
			}
			if (v->nnodes >= 2) {
				fail(p, r->line, r->key, "a volume lives on at most 2 nodes");
				return -1;
			}
			v->nodes[v->nnodes++] = (unsigned)n;
		} else {
			if (!*r->disk) {
				fail(p, r->line, r->key, "empty path");
				return -1;
			}
			snprintf(v->disk[n], sizeof(v->disk[n]), "%s", r->disk);
			v->disk_line[n] = r->line;
		}
	}
	/* Two volumes on one node must never share a backing file or device
	 * (explicit disk.N against each other and against the data-dir files). */
	for (unsigned i = 0; i < c->nvolumes; i++) {
		struct cfg_volume *v = &c->volumes[i];
		for (unsigned n = 0; n < c->nnodes; n++) {
			char mine[CFG_PATH_MAX + CFG_NAME_MAX + 8];
			if (!v->disk[n][0] || strcmp(v->disk[n], "ram:") == 0)
				continue;
			snprintf(mine, sizeof(mine), "%s", v->disk[n]);
			for (unsigned j = 0; j < c->nvolumes; j++) {
				const struct cfg_volume *o = &c->volumes[j];
				char theirs[CFG_PATH_MAX + CFG_NAME_MAX + 8];
				if (j == i || !cfg_volume_has_node(o, n))
					continue;
				if (o->disk[n][0])
					snprintf(theirs, sizeof(theirs), "%s", o->disk[n]);
				else
					snprintf(theirs, sizeof(theirs), "%s/%s.img",
						 c->nodes[n].data_dir, o->name);
				if (strcmp(mine, theirs) == 0) {
					char key[CFG_NAME_MAX + 8];
					snprintf(key, sizeof(key), "disk.%s", c->nodes[n].name);
					snprintf(p->section, sizeof(p->section), "volume %s", v->name);
					fail(p, v->disk_line[n], key,
					     "%s is also the disk of volume %s on node %s", mine,
					     o->name, c->nodes[n].name);
					return -1;
				}
			}
		}
	}
	for (unsigned i = 0; i < c->nvolumes; i++) {
		struct cfg_volume *v = &c->volumes[i];
		snprintf(p->section, sizeof(p->section), "volume %s", v->name);
		if (!v->size) {
			fail(p, v->line, NULL, "[volume %s] has no 'size'", v->name);
			return -1;
		}
		if (!v->nnodes) {
			fail(p, v->line, NULL, "[volume %s] has no 'nodes'", v->name);
			return -1;
		}
		for (unsigned n = 0; n < c->nnodes; n++) {
			if (v->disk[n][0] && !cfg_volume_has_node(v, n)) {
				for (unsigned k = 0; k < p->nrefs; k++)
					if (p->refs[k].vol == i && p->refs[k].disk[0] &&
					    strcmp(p->refs[k].node, c->nodes[n].name) == 0)
						fail(p, p->refs[k].line, p->refs[k].key,
						     "node '%s' is not in this volume's nodes",
						     c->nodes[n].name);
				return -1;
			}
		}
		if (!v->compression_set)
			v->compression = c->compression;
		if (v->auth.set) {
			char where[CFG_NAME_MAX + 16];
			snprintf(where, sizeof(where), "[volume %s]", v->name);
			if (check_auth(p, &v->auth, v->line, where))
				return -1;
		} else {
			v->auth = c->auth;
			v->auth.set = false;
		}
	}
	snprintf(p->section, sizeof(p->section), "cluster");
	if (check_auth(p, &c->auth, p->cluster_line, "[cluster]"))
		return -1;
	return 0;
}

int cfg_parse_string(const char *text, const char *name, struct cfg **out, char *err,
		     size_t errlen)
{
	struct parse *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return -ENOMEM;
	p->cfg = calloc(1, sizeof(*p->cfg));
	if (!p->cfg) {
		free(p);
		return -ENOMEM;
	}
	p->name = name;
	p->text = text;
	p->err = err;
	p->errlen = errlen;
	snprintf(p->cfg->path, sizeof(p->cfg->path), "%s", name);
	p->cfg->peer_timeout_ms = CFG_PEER_TIMEOUT_DEFAULT_MS;
	p->cfg->max_conns = CFG_MAX_CONNS_DEFAULT;
	p->cfg->max_conns_per_addr = CFG_MAX_CONNS_PER_ADDR_DEFAULT;
	p->cfg->handshake_timeout_ms = CFG_HANDSHAKE_TIMEOUT_DEFAULT_MS;
	p->cfg->witness_timeout_ms = CFG_WITNESS_TIMEOUT_DEFAULT_MS;
	p->cfg->quorum_timeout_ms = CFG_QUORUM_TIMEOUT_DEFAULT_MS;
	p->cfg->disk_slow_ms = CFG_DISK_SLOW_MS_DEFAULT;
	p->cfg->disk_slow_s = CFG_DISK_SLOW_S_DEFAULT;
	snprintf(p->cfg->witness_dir, sizeof(p->cfg->witness_dir), "%s", CFG_WITNESS_DIR_DEFAULT);
	r = ini_parse_stream(reader, p, handler, p);
	if (!p->failed && r > 0)
		fail(p, r, NULL, "syntax error (expected [section] or key = value)");
	if (!p->failed && r < 0)
		fail(p, 0, NULL, "cannot parse");
	if (!p->failed)
		resolve(p);
	if (p->failed) {
		free(p->cfg);
		free(p);
		return -EINVAL;
	}
	*out = p->cfg;
	free(p);
	return 0;
}

int cfg_load(const char *path, struct cfg **out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *text = NULL;
	size_t cap = 0, len = 0;
	int r;

	if (!f) {
		r = -errno;
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return r;
	}
	for (;;) {
		size_t n;
		if (cap - len < 4096) {
			char *t;
			if (cap > (1u << 20)) {
				snprintf(err, errlen, "%s: file larger than 1 MiB", path);
				free(text);
				fclose(f);
				return -EFBIG;
			}
			cap = cap ? cap * 2 : 8192;
			t = realloc(text, cap);
			if (!t) {
				free(text);
				fclose(f);
				return -ENOMEM;
			}
			text = t;
		}
		n = fread(text + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	r = ferror(f) ? -EIO : 0;
	fclose(f);
	if (r) {
		snprintf(err, errlen, "%s: read error", path);
		free(text);
		return r;
	}
	text[len] = '\0';
	if (strlen(text) != len) {
		snprintf(err, errlen, "%s: file contains a NUL byte", path);
		free(text);
		return -EINVAL;
	}
	r = cfg_parse_string(text, path, out, err, errlen);
	free(text);
	return r;
}

static bool auth_has_secret(const struct cfg_auth *a)
{
	return a->secret[0] || a->msecret[0];
}

bool cfg_secret_exposed(const struct cfg *cfg, char *msg, size_t len)
{
	struct stat st;
	bool secret = cfg->secret[0] || auth_has_secret(&cfg->auth);

	for (unsigned i = 0; i < cfg->nvolumes && !secret; i++)
		secret = auth_has_secret(&cfg->volumes[i].auth);
	if (!secret || !cfg->path[0] || stat(cfg->path, &st) < 0 || !(st.st_mode & S_IROTH))
		return false;
	snprintf(msg, len,
		 "%s holds a secret and every user on this machine can read it (mode %04o): "
		 "chmod o-r %s (600, or 640 with a group of its own)",
		 cfg->path, (unsigned)(st.st_mode & 07777), cfg->path);
	return true;
}

void cfg_free(struct cfg *cfg)
{
	free(cfg);
}

int cfg_node_index(const struct cfg *cfg, const char *name)
{
	for (unsigned i = 0; i < cfg->nnodes; i++)
		if (strcmp(cfg->nodes[i].name, name) == 0)
			return (int)i;
	return -1;
}

int cfg_volume_has_node(const struct cfg_volume *v, unsigned n)
{
	for (unsigned i = 0; i < v->nnodes; i++)
		if (v->nodes[i] == n)
			return 1;
	return 0;
}

static int mkdir_p(const char *path)
{
	char buf[CFG_PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *s = buf + 1; *s; s++) {
		if (*s == '/') {
			*s = '\0';
			if (mkdir(buf, 0755) < 0 && errno != EEXIST)
				return -errno;
			*s = '/';
		}
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int cfg_check_local(const struct cfg *cfg, unsigned n, char *err, size_t errlen)
{
	const struct cfg_node *nd = &cfg->nodes[n];
	char dir[CFG_PATH_MAX], *slash;
	struct stat st;
	int r;

	r = mkdir_p(nd->data_dir);
	if (r == 0 && access(nd->data_dir, R_OK | W_OK | X_OK) < 0)
		r = -errno;
	if (r) {
		snprintf(err, errlen, "%s:%d: [node %s] data-dir: cannot use %s: %s", cfg->path,
			 nd->data_dir_line, nd->name, nd->data_dir, strerror(-r));
		return r;
	}
	snprintf(dir, sizeof(dir), "%s", nd->control);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		r = mkdir_p(dir);
		if (r == 0 && access(dir, W_OK | X_OK) < 0)
			r = -errno;
		if (r) {
			snprintf(err, errlen, "%s:%d: [node %s] control: cannot use directory %s: %s",
				 cfg->path, nd->control_line, nd->name, dir, strerror(-r));
			return r;
		}
	}
	for (unsigned i = 0; i < cfg->nvolumes; i++) {
		const struct cfg_volume *v = &cfg->volumes[i];
		const char *d = v->disk[n];
		if (!cfg_volume_has_node(v, n) || !d[0] || strcmp(d, "ram:") == 0)
			continue;
		if (access(d, R_OK | W_OK) < 0 && errno != ENOENT) {
			snprintf(err, errlen, "%s:%d: [volume %s] disk.%s: cannot use %s: %s",
				 cfg->path, v->disk_line[n], v->name, nd->name, d, strerror(errno));
			return -errno;
		}
		if (stat(d, &st) == 0 && S_ISBLK(st.st_mode)) {
			/* guarantee 8: the disk carries its label after the data */
			uint64_t have = 0, need = v->size + TANDEM_LABEL_AREA;
			int fd = open(d, O_RDONLY | O_CLOEXEC);
			if (fd >= 0 && ioctl(fd, BLKGETSIZE64, &have) == 0 && have < need) {
				snprintf(err, errlen,
					 "%s:%d: [volume %s] disk.%s %s: %llu bytes, needs %llu "
					 "(size + 4 KiB label)",
					 cfg->path, v->disk_line[n], v->name, nd->name, d,
					 (unsigned long long)have, (unsigned long long)need);
				close(fd);
				return -ENOSPC;
			}
			if (fd >= 0)
				close(fd);
		}
		if (access(d, F_OK) < 0) {
			/* A missing file is created in its directory; that must exist. */
			snprintf(dir, sizeof(dir), "%s", d);
			slash = strrchr(dir, '/');
			if (slash)
				*slash = '\0';
			if (access(slash ? (dir[0] ? dir : "/") : ".", W_OK | X_OK) < 0) {
				snprintf(err, errlen, "%s:%d: [volume %s] disk.%s: cannot create %s: %s",
					 cfg->path, v->disk_line[n], v->name, nd->name, d,
					 strerror(errno));
				return -errno;
			}
		}
	}
	return 0;
}
