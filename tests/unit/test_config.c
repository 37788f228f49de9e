/* The cluster configuration (SPEC.md "Configuration"): what valid files store,
 * and that every kind of bad input is one line naming the file, the line and
 * the key. Expected line numbers are found by searching the test text for the
 * offending line (line_of), so the tests say which line is meant rather than
 * counting by hand. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/config/config.h"

#define FILE_NAME "t.ini"

/* The SPEC example, with node b written out. */
static const char spec_example[] =
	"[cluster]\n"
	"name    = lab\n"
	"secret  = change-me          ; authenticates nodes and witness to each other\n"
	"witness = 127.0.0.1:7790     ; optional\n"
	"\n"
	"[node a]\n"
	"replication = 127.0.0.1:7789 ; node-to-node traffic\n"
	"iscsi       = 127.0.0.1:3260\n"
	"nbd         = 127.0.0.1:10809\n"
	"control     = /tmp/tandem/a.sock\n"
	"data-dir    = /tmp/tandem/a  ; backing files and metadata live here\n"
	"metrics     = 127.0.0.1:9101 ; optional, Prometheus text format on GET /metrics\n"
	"\n"
	"[node b]\n"
	"; same keys\n"
	"replication = 127.0.0.1:7889\n"
	"iscsi       = 127.0.0.1:3261\n"
	"nbd         = 127.0.0.1:10810\n"
	"control     = /tmp/tandem/b.sock\n"
	"data-dir    = /tmp/tandem/b\n"
	"metrics     = 127.0.0.1:9102\n"
	"\n"
	"[volume vol0]\n"
	"size         = 1G            ; K, M, G, T suffixes (powers of 1024)\n"
	"nodes        = a b           ; the first is primary when the volume is first created\n"
	"replication  = sync          ; sync | async\n"
	"async-backlog = 64M          ; async only\n"
	"resync-rate  = auto          ; auto or a cap such as 50M (bytes/s)\n"
	"disk.a       = /dev/sdb      ; optional per-node backing file or block device\n"
	"\n"
	"[volume db]\n"
	"size = 2T\n"
	"nodes = b,a\n"
	"replication = async\n"
	"async-backlog = 1M\n"
	"resync-rate = 50M\n"
	"cache = writeback\n"
	"disk.b = ram:\n"
	"disk.a = /srv/db.img\n"
	"\n"
	"[volume small]\n"
	"size = 4096K\n"
	"nodes = b\n"
	"cache = none\n"
	"resync-rate = 4k\n";

/* Cluster and two nodes, for the error tests to append to. */
#define HEAD                                                                              \
	"[cluster]\n"                                                                     \
	"name = lab\n"                                                                    \
	"secret = s3cret\n"                                                               \
	"[node a]\n"                                                                      \
	"replication = 127.0.0.1:7789\n"                                                  \
	"nbd = 127.0.0.1:10809\n"                                                         \
	"control = /tmp/t/a.sock\n"                                                       \
	"data-dir = /tmp/t/a\n"                                                           \
	"[node b]\n"                                                                      \
	"replication = 127.0.0.1:7889\n"                                                  \
	"nbd = 127.0.0.1:10810\n"                                                         \
	"control = /tmp/t/b.sock\n"                                                       \
	"data-dir = /tmp/t/b\n"

#define VOL "[volume v]\nsize = 1G\nnodes = a b\n"

/* 1-based number of the first line of text containing needle. */
static int line_of(const char *text, const char *needle)
{
	const char *hit = strstr(text, needle);
	int line = 1;

	assert_non_null(hit);
	for (const char *p = text; p < hit; p++)
		line += *p == '\n';
	return line;
}

static struct cfg *parse_ok(const char *text)
{
	struct cfg *c = NULL;
	char err[512] = "";
	int r = cfg_parse_string(text, FILE_NAME, &c, err, sizeof(err));

	if (r)
		print_message("unexpected error: %s\n", err);
	assert_int_equal(r, 0);
	assert_non_null(c);
	return c;
}

/* Parses text expecting -EINVAL and a one-line message that names the file,
 * `line` (0: no line is expected) and contains each of the words. */
static void expect_error(const char *text, int line, const char *w1, const char *w2)
{
	struct cfg *c = NULL;
	char err[512] = "", where[64];
	int r = cfg_parse_string(text, FILE_NAME, &c, err, sizeof(err));

	if (r == 0) {
		cfg_free(c);
		fail_msg("accepted; expected an error at %s:%d", FILE_NAME, line);
	}
	assert_int_equal(r, -EINVAL);
	assert_null(c);
	assert_null(strchr(err, '\n'));
	if (line > 0)
		snprintf(where, sizeof(where), "%s:%d: ", FILE_NAME, line);
	else
		snprintf(where, sizeof(where), "%s: ", FILE_NAME);
	assert_true(unit_contains(err, where));
	assert_true(strncmp(err, where, strlen(where)) == 0);
	if (w1)
		assert_true(unit_contains(err, w1));
	if (w2)
		assert_true(unit_contains(err, w2));
}

/* ---- valid files ---- */

static void test_spec_example(void **state)
{
	struct cfg *c = parse_ok(spec_example);
	(void)state;

	assert_string_equal(c->path, FILE_NAME);
	assert_string_equal(c->cluster, "lab");
	assert_string_equal(c->secret, "change-me"); /* inline comment stripped */
	assert_string_equal(c->witness, "127.0.0.1:7790");

	assert_int_equal(c->nnodes, 2);
	const struct cfg_node *a = &c->nodes[0], *b = &c->nodes[1];
	assert_string_equal(a->name, "a");
	assert_string_equal(a->replication, "127.0.0.1:7789");
	assert_string_equal(a->iscsi, "127.0.0.1:3260");
	assert_string_equal(a->nbd, "127.0.0.1:10809");
	assert_string_equal(a->control, "/tmp/tandem/a.sock");
	assert_string_equal(a->data_dir, "/tmp/tandem/a");
	assert_string_equal(a->metrics, "127.0.0.1:9101");
	assert_string_equal(b->name, "b");
	assert_string_equal(b->nbd, "127.0.0.1:10810");
	assert_string_equal(b->data_dir, "/tmp/tandem/b");
	assert_int_equal(cfg_node_index(c, "a"), 0);
	assert_int_equal(cfg_node_index(c, "b"), 1);
	assert_int_equal(cfg_node_index(c, "c"), -1);

	assert_int_equal(c->nvolumes, 3);
	const struct cfg_volume *v = &c->volumes[0];
	assert_string_equal(v->name, "vol0");
	assert_int_equal(v->size, 1ull << 30);
	assert_int_equal(v->nnodes, 2);
	assert_int_equal(v->nodes[0], 0); /* order kept: a is the first primary */
	assert_int_equal(v->nodes[1], 1);
	assert_int_equal(v->replication, CFG_REPL_SYNC);
	assert_int_equal(v->async_backlog, 64ull << 20);
	assert_int_equal(v->resync_rate, 0); /* auto */
	assert_int_equal(v->cache, CFG_CACHE_NONE);
	assert_string_equal(v->disk[0], "/dev/sdb");
	assert_string_equal(v->disk[1], "");
	assert_true(cfg_volume_has_node(v, 0));
	assert_true(cfg_volume_has_node(v, 1));

	v = &c->volumes[1];
	assert_string_equal(v->name, "db");
	assert_int_equal(v->size, 2ull << 40);
	assert_int_equal(v->nnodes, 2);
	assert_int_equal(v->nodes[0], 1); /* "b,a": b first */
	assert_int_equal(v->nodes[1], 0);
	assert_int_equal(v->replication, CFG_REPL_ASYNC);
	assert_int_equal(v->async_backlog, 1ull << 20);
	assert_int_equal(v->resync_rate, 50ull << 20);
	assert_int_equal(v->cache, CFG_CACHE_WRITEBACK);
	assert_string_equal(v->disk[0], "/srv/db.img");
	assert_string_equal(v->disk[1], "ram:");

	v = &c->volumes[2];
	assert_string_equal(v->name, "small");
	assert_int_equal(v->size, 4ull << 20);
	assert_int_equal(v->nnodes, 1);
	assert_int_equal(v->nodes[0], 1);
	assert_false(cfg_volume_has_node(v, 0));
	assert_int_equal(v->cache, CFG_CACHE_NONE);
	assert_int_equal(v->resync_rate, 4096);
	assert_int_equal(v->replication, CFG_REPL_SYNC);     /* default */
	assert_int_equal(v->async_backlog, 64ull << 20);     /* default */
	cfg_free(c);
	cfg_free(NULL);
}

static void test_one_node(void **state)
{
	static const char text[] = "[cluster]\n"
				   "name = solo\n"
				   "[node x]\n"
				   "nbd = 127.0.0.1:10809\n"
				   "control = /run/tandem/x.sock\n"
				   "data-dir = /var/lib/tandem\n"
				   "[volume v]\n"
				   "size = 512M\n"
				   "nodes = x\n";
	struct cfg *c = parse_ok(text);
	(void)state;

	assert_string_equal(c->cluster, "solo");
	assert_string_equal(c->secret, ""); /* one node needs no secret */
	assert_string_equal(c->witness, "");
	assert_int_equal(c->nnodes, 1);
	assert_string_equal(c->nodes[0].replication, "");
	assert_int_equal(c->nvolumes, 1);
	assert_int_equal(c->volumes[0].size, 512ull << 20);
	assert_int_equal(c->volumes[0].nnodes, 1);
	cfg_free(c);

	/* a node with no volume at all is fine too */
	c = parse_ok("[cluster]\nname = n\n[node a]\ncontrol = /c\ndata-dir = /d\n");
	assert_int_equal(c->nvolumes, 0);
	cfg_free(c);
}

/* tls, tls-cert, tls-key, tls-ca in [cluster]. */
#define NODES_AB                                                            \
	"[node a]\nreplication = 127.0.0.1:7789\ncontrol = /tmp/t/a.sock\n" \
	"data-dir = /tmp/t/a\n[node b]\nreplication = 127.0.0.1:7889\n"     \
	"control = /tmp/t/b.sock\ndata-dir = /tmp/t/b\n" VOL
/* control-mode, and the warning about a secret every user can read. */
static void test_control_mode_and_exposure(void **state)
{
	static const char wide[] =
		"[cluster]\nname = lab\nsecret = s3cret\n"
		"[node a]\nreplication = 127.0.0.1:7789\ncontrol = /tmp/t/a.sock\n"
		"control-mode = 0660\ndata-dir = /tmp/t/a\n[node b]\n"
		"replication = 127.0.0.1:7889\ncontrol = /tmp/t/b.sock\n"
		"data-dir = /tmp/t/b\n" VOL;
	static const char bad[] =
		"[cluster]\nname = lab\nsecret = s3cret\n"
		"[node a]\nreplication = 127.0.0.1:7789\ncontrol = /tmp/t/a.sock\n"
		"control-mode = 0777\ndata-dir = /tmp/t/a\n[node b]\n"
		"replication = 127.0.0.1:7889\ncontrol = /tmp/t/b.sock\n"
		"data-dir = /tmp/t/b\n" VOL;
	char path[] = "/tmp/tandem-cfg-XXXXXX", msg[512];
	struct cfg *c;
	FILE *f;
	int fd;
	(void)state;

	c = parse_ok(wide);
	assert_int_equal(c->nodes[0].control_mode, 0660);
	assert_int_equal(c->nodes[1].control_mode, 0600); /* the default */
	cfg_free(c);
	expect_error(bad, line_of(bad, "control-mode"), "control-mode", "0600, 0660 or 0666");

	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(wide, f);
	fclose(f);
	assert_int_equal(cfg_load(path, &c, msg, sizeof(msg)), 0);
	assert_int_equal(chmod(path, 0644), 0);
	assert_true(cfg_secret_exposed(c, msg, sizeof(msg)));
	assert_non_null(strstr(msg, "mode 0644"));
	assert_int_equal(chmod(path, 0640), 0); /* a group of its own: fine */
	assert_false(cfg_secret_exposed(c, msg, sizeof(msg)));
	assert_int_equal(chmod(path, 0600), 0);
	assert_false(cfg_secret_exposed(c, msg, sizeof(msg)));
	cfg_free(c);
	unlink(path);
}

/* disk-slow-ms, disk-slow-s in [cluster]: defaults, values, bounds. */
static void test_disk_slow(void **state)
{
	static const char set[] = "[cluster]\nname = lab\nsecret = s3cret\ndisk-slow-ms = 200\n"
				  "disk-slow-s = 3\n" NODES_AB;
	static const char off[] =
		"[cluster]\nname = lab\nsecret = s3cret\ndisk-slow-ms = 0\n" NODES_AB;
	static const char bad[] =
		"[cluster]\nname = lab\nsecret = s3cret\ndisk-slow-s = 0\n" NODES_AB;
	struct cfg *c;
	(void)state;

	c = parse_ok(HEAD VOL);
	assert_int_equal(c->disk_slow_ms, CFG_DISK_SLOW_MS_DEFAULT);
	assert_int_equal(c->disk_slow_s, CFG_DISK_SLOW_S_DEFAULT);
	cfg_free(c);
	c = parse_ok(set);
	assert_int_equal(c->disk_slow_ms, 200);
	assert_int_equal(c->disk_slow_s, 3);
	cfg_free(c);
	c = parse_ok(off);
	assert_int_equal(c->disk_slow_ms, 0);
	cfg_free(c);
	expect_error(bad, line_of(bad, "disk-slow-s"), "disk-slow-s", "from 1 to 3600");
}

/* on-io-error and on-disk-failure in [cluster]: defaults, values, errors. */
static void test_disk_failure_keys(void **state)
{
	static const char set[] = "[cluster]\nname = lab\nsecret = s3cret\non-io-error = pass-on\n"
				  "on-disk-failure = handover\n" NODES_AB;
	static const char bad[] =
		"[cluster]\nname = lab\nsecret = s3cret\non-disk-failure = maybe\n" NODES_AB;
	static const char bad_io[] =
		"[cluster]\nname = lab\nsecret = s3cret\non-io-error = retry\n" NODES_AB;
	struct cfg *c;
	(void)state;

	c = parse_ok(HEAD VOL);
	assert_false(c->io_error_pass_on);
	assert_false(c->disk_failure_handover);
	cfg_free(c);
	c = parse_ok(set);
	assert_true(c->io_error_pass_on);
	assert_true(c->disk_failure_handover);
	cfg_free(c);
	expect_error(bad, line_of(bad, "on-disk-failure"), "on-disk-failure",
		     "not serve or handover");
	expect_error(bad_io, line_of(bad_io, "on-io-error"), "on-io-error",
		     "not detach or pass-on");
}

static void test_tls_keys(void **state)
{
	static const char on[] = "[cluster]\nname = lab\nsecret = s3cret\ntls = on\n" NODES_AB;
	static const char certs[] = "[cluster]\nname = lab\nsecret = s3cret\ntls = on\n"
				    "tls-cert = /etc/t/n.pem\ntls-key = /etc/t/n.key\n"
				    "tls-ca = /etc/t/ca.pem\n" NODES_AB;
	static const char bad[] = "[cluster]\nname = lab\nsecret = s3cret\ntls = yes\n" NODES_AB;
	static const char rel[] = "[cluster]\nname = lab\nsecret = s3cret\ntls = on\n"
				  "tls-cert = n.pem\n" NODES_AB;
	static const char off[] = "[cluster]\nname = lab\nsecret = s3cret\n"
				  "tls-cert = /etc/t/n.pem\ntls-key = /etc/t/n.key\n"
				  "tls-ca = /etc/t/ca.pem\n" NODES_AB;
	static const char alone[] = "[cluster]\nname = lab\nsecret = s3cret\ntls = on\n"
				    "tls-cert = /etc/t/n.pem\n" NODES_AB;
	static const char nosecret[] = "[cluster]\nname = solo\ntls = on\n[node x]\n"
				       "control = /c\ndata-dir = /d\n";
	struct cfg *c;
	(void)state;

	c = parse_ok(HEAD VOL);
	assert_false(c->tls); /* off by default */
	cfg_free(c);
	c = parse_ok(on);
	assert_true(c->tls);
	assert_string_equal(c->tls_cert, "");
	cfg_free(c);
	c = parse_ok(certs);
	assert_true(c->tls);
	assert_string_equal(c->tls_cert, "/etc/t/n.pem");
	assert_string_equal(c->tls_key, "/etc/t/n.key");
	assert_string_equal(c->tls_ca, "/etc/t/ca.pem");
	cfg_free(c);
	expect_error(bad, line_of(bad, "tls = yes"), "tls", "on or off");
	expect_error(rel, line_of(rel, "tls-cert"), "tls-cert", "absolute");
	expect_error(off, line_of(off, "tls-cert"), "tls = on", NULL);
	expect_error(alone, line_of(alone, "tls-cert"), "tls-key", "together");
	expect_error(nosecret, line_of(nosecret, "tls = on"), "tls", "secret");
}

static void test_sizes(void **state)
{
	static const struct {
		const char *val;
		uint64_t want;
	} sizes[] = { { "4096", 4096 }, { "4K", 4096 },	  { "8k", 8192 },
		      { "1M", 1ull << 20 }, { "3G", 3ull << 30 }, { "1T", 1ull << 40 },
		      { "16777215T", 16777215ull << 40 } };
	char text[1024];
	(void)state;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(text, sizeof(text), HEAD "[volume v]\nsize = %s\nnodes = a\n", sizes[i].val);
		struct cfg *c = parse_ok(text);
		assert_int_equal(c->volumes[0].size, sizes[i].want);
		cfg_free(c);
	}
}

/* Comments: full-line ; and #, inline " ; ..." after a value. */
static void test_comments(void **state)
{
	static const char text[] = "; leading comment\n"
				   "# hash comment\n"
				   "[cluster]   ; the cluster\n"
				   "name = lab ; inline\n"
				   "secret = a;b ; a ';' with no space before it is part of the value\n"
				   "[node a]\n"
				   "control = /c ; x\n"
				   "data-dir = /d\n"
				   "\n"
				   "   \n"
				   "[volume v]\n"
				   "size = 1G ; one gig\n"
				   "nodes = a ; only a\n";
	struct cfg *c = parse_ok(text);
	(void)state;

	assert_string_equal(c->cluster, "lab");
	assert_string_equal(c->secret, "a;b");
	assert_string_equal(c->nodes[0].control, "/c");
	assert_int_equal(c->volumes[0].size, 1ull << 30);
	cfg_free(c);
}

/* ---- one test per error class ---- */

static void test_err_unknown_key(void **state)
{
	static const char t1[] = HEAD "colour = blue\n" VOL;
	static const char t2[] = HEAD VOL "sise = 1G\n";
	static const char t3[] = "[cluster]\nname = lab\nnodes = a\n[node a]\ncontrol = /c\ndata-dir = /d\n";
	(void)state;

	expect_error(t1, line_of(t1, "colour"), "[node b]", "colour");
	expect_error(t2, line_of(t2, "sise"), "[volume v]", "sise");
	expect_error(t3, line_of(t3, "nodes"), "[cluster]", "nodes");
}

static void test_err_unknown_section(void **state)
{
	static const char t[] = HEAD "\n[volumes v]\n; a comment\nsize = 1G\n";
	(void)state;

	/* The section is wrong, so the header line is the one to point at. */
	expect_error(t, line_of(t, "[volumes v]"), "volumes v", NULL);
}

/* An unknown section with no keys is still an unknown section, not nothing. */
static void test_err_unknown_empty_section(void **state)
{
	static const char t[] = HEAD VOL "[bogus]\n";
	(void)state;

	expect_error(t, line_of(t, "[bogus]"), "bogus", NULL);
}

static void test_err_duplicate_key(void **state)
{
	static const char t1[] = HEAD VOL "size = 2G\n";
	static const char t2[] = HEAD "nbd = 127.0.0.1:1\n" VOL;
	static const char t3[] = "[cluster]\nname = a\nname = b\n[node a]\ncontrol = /c\ndata-dir = /d\n";
	(void)state;

	expect_error(t1, line_of(t1, "size = 2G"), "size", "twice");
	expect_error(t2, line_of(t2, "nbd = 127.0.0.1:1\n"), "nbd", "twice");
	expect_error(t3, line_of(t3, "name = b"), "name", "twice");
}

/* disk.NODE is a key like any other: given twice it is an error, not "the
 * last one wins". */
static void test_err_duplicate_disk_key(void **state)
{
	static const char t[] = HEAD VOL "disk.a = /srv/one\ndisk.a = /srv/two\n";
	(void)state;

	expect_error(t, line_of(t, "/srv/two"), "disk.a", NULL);
}

static void test_err_duplicate_section(void **state)
{
	static const char t1[] = HEAD VOL "[volume w]\nsize = 1G\nnodes = a\n"
				      "[volume v]\nreplication = async\n";
	static const char t2[] = HEAD VOL "[node a]\nmetrics = 127.0.0.1:9100\n";
	(void)state;

	expect_error(t1, line_of(t1, "[volume v]\nrepl"), "volume v", "twice");
	expect_error(t2, line_of(t2, "[node a]\nmetrics"), "node a", "twice");
}

/* A section repeated right after itself is still repeated: its keys must not
 * silently merge into the first. */
static void test_err_duplicate_adjacent_section(void **state)
{
	static const char t[] = HEAD VOL "[volume v]\nreplication = async\n";
	(void)state;

	expect_error(t, line_of(t, "[volume v]\nrepl"), "volume v", "twice");
}

static void test_err_bad_size(void **state)
{
	static const char *const bad[] = { "1X", "lots", "-1G", "1.5G", "", "1 G", "0x1000" };
	char t[1024];
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(t, sizeof(t), HEAD "[volume v]\nnodes = a\nsize = %s\n", bad[i]);
		expect_error(t, line_of(t, "size ="), "[volume v] size", "not a size");
	}
	snprintf(t, sizeof(t), HEAD "[volume v]\nnodes = a\nsize = 99999999999T\n");
	expect_error(t, line_of(t, "size ="), "size", "too large");
	snprintf(t, sizeof(t), HEAD VOL "async-backlog = 12Q\n");
	expect_error(t, line_of(t, "async-backlog"), "async-backlog", NULL);
	snprintf(t, sizeof(t), HEAD VOL "async-backlog = 512K\n");
	expect_error(t, line_of(t, "async-backlog"), "async-backlog", "1M");
	snprintf(t, sizeof(t), HEAD VOL "resync-rate = fast\n");
	expect_error(t, line_of(t, "resync-rate"), "resync-rate", NULL);
	snprintf(t, sizeof(t), HEAD VOL "resync-rate = 100\n");
	expect_error(t, line_of(t, "resync-rate"), "resync-rate", NULL);
}

static void test_err_size_not_4k(void **state)
{
	static const char *const bad[] = { "1000", "4097", "6K", "0", "1" };
	char t[1024];
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(t, sizeof(t), HEAD "[volume v]\nnodes = a\nsize = %s\n", bad[i]);
		expect_error(t, line_of(t, "size ="), "size", "4K");
	}
}

static void test_err_bad_enum(void **state)
{
	static const char t1[] = HEAD VOL "replication = semi\n";
	static const char t2[] = HEAD VOL "cache = writethrough\n";
	(void)state;

	expect_error(t1, line_of(t1, "semi"), "replication", "semi");
	expect_error(t2, line_of(t2, "writethrough"), "cache", "writethrough");
}

/* compression: none by default; [cluster] sets every volume's default, a
 * volume's own key wins (either order of the sections); bad values and
 * duplicates are one-line errors naming file, line and key. */
static void test_compression(void **state)
{
	static const char t0[] = HEAD VOL;
#define NODES strstr(HEAD, "[node a]")
	char t1[1024], e2[1024];
	static const char e1[] = HEAD VOL "compression = gzip\n";
	static const char e3[] = HEAD VOL "compression = lz4\ncompression = zstd\n";
	static const char e4[] = HEAD VOL "compression =\n";
	struct cfg *c;
	(void)state;

	snprintf(t1, sizeof(t1),
		 "[volume w]\nsize = 1G\nnodes = a\ncompression = none\n"
		 "[cluster]\nname = lab\nsecret = s3cret\ncompression = zstd\n%s" VOL
		 "[volume x]\nsize = 1G\nnodes = b\ncompression = lz4\n",
		 NODES);
	snprintf(e2, sizeof(e2), "[cluster]\nname = lab\ncompression = LZ4\nsecret = s3cret\n%s",
		 NODES);
	c = parse_ok(t0);
	assert_int_equal(c->compression, CFG_COMPRESS_NONE);
	assert_int_equal(c->volumes[0].compression, CFG_COMPRESS_NONE);
	cfg_free(c);
	c = parse_ok(t1);
	assert_int_equal(c->compression, CFG_COMPRESS_ZSTD);
	assert_string_equal(c->volumes[0].name, "w");
	assert_int_equal(c->volumes[0].compression, CFG_COMPRESS_NONE);
	assert_int_equal(c->volumes[1].compression, CFG_COMPRESS_ZSTD);
	assert_int_equal(c->volumes[2].compression, CFG_COMPRESS_LZ4);
	cfg_free(c);
	expect_error(e1, line_of(e1, "gzip"), "[volume v] compression", "gzip");
	expect_error(e2, line_of(e2, "LZ4"), "[cluster] compression", "none, lz4, zstd");
	expect_error(e3, line_of(e3, "zstd"), "compression", "twice");
	expect_error(e4, line_of(e4, "compression ="), "compression", "''");
#undef NODES
}

static void test_err_missing_cluster(void **state)
{
	static const char t[] = "[node a]\ncontrol = /c\ndata-dir = /d\n";
	(void)state;

	expect_error(t, 0, "[cluster]", NULL);
	expect_error("", 0, "[cluster]", NULL);
	expect_error("; only a comment\n", 0, "[cluster]", NULL);
}

static void test_err_missing_cluster_name(void **state)
{
	static const char t[] = "[cluster]\nsecret = x\n[node a]\ncontrol = /c\ndata-dir = /d\n";
	struct cfg *c = NULL;
	char err[512];
	(void)state;

	assert_int_equal(cfg_parse_string(t, FILE_NAME, &c, err, sizeof(err)), -EINVAL);
	assert_true(unit_contains(err, FILE_NAME));
	assert_true(unit_contains(err, "[cluster]"));
	assert_true(unit_contains(err, "'name'"));
}

/* A key that is missing is reported at the header of the section that lacks
 * it, like [volume v] has no 'size' is: SPEC asks for file, line and key. */
static void test_err_missing_cluster_key_line(void **state)
{
	static const char t1[] = "; the cluster\n[cluster]\nsecret = x\n"
				 "[node a]\ncontrol = /c\ndata-dir = /d\n";
	static const char t2[] = "\n[cluster]\nname = lab\n"
				 "[node a]\nreplication = 127.0.0.1:1\ncontrol = /c\ndata-dir = /d\n"
				 "[node b]\nreplication = 127.0.0.1:2\ncontrol = /c2\ndata-dir = /d2\n";
	(void)state;

	expect_error(t1, line_of(t1, "[cluster]"), "name", NULL);
	expect_error(t2, line_of(t2, "[cluster]"), "secret", NULL);
}

static void test_err_volume_missing_keys(void **state)
{
	static const char t1[] = HEAD "\n[volume v]\n; no size here\nnodes = a\n";
	static const char t2[] = HEAD "[volume v]\n\nsize = 1G\n";
	static const char t3[] = HEAD "[volume v]\nsize = 1G\nnodes =\n";
	(void)state;

	expect_error(t1, line_of(t1, "[volume v]"), "[volume v]", "'size'");
	expect_error(t2, line_of(t2, "[volume v]"), "[volume v]", "'nodes'");
	expect_error(t3, line_of(t3, "[volume v]"), "[volume v]", "'nodes'");
}

/* A volume section with no keys at all is a volume with no size, not nothing. */
static void test_err_volume_empty_section(void **state)
{
	static const char t[] = HEAD VOL "[volume w]\n";
	(void)state;

	expect_error(t, line_of(t, "[volume w]"), "[volume w]", "'size'");
}

static void test_err_node_missing_keys(void **state)
{
	static const char t1[] = "[cluster]\nname = x\n[node a]\ncontrol = /c\n";
	static const char t2[] = "[cluster]\nname = x\n[node a]\ndata-dir = /d\n";
	static const char t3[] = "[cluster]\nname = x\nsecret = s\n[node a]\ncontrol = /c\ndata-dir = /d\n"
				 "[node b]\ncontrol = /c2\ndata-dir = /d2\nreplication = 127.0.0.1:1\n";
	static const char t4[] = "[cluster]\nname = x\n";
	(void)state;

	expect_error(t1, line_of(t1, "[node a]"), "[node a]", "data-dir");
	expect_error(t2, line_of(t2, "[node a]"), "[node a]", "control");
	expect_error(t3, line_of(t3, "[node a]"), "[node a]", "replication");
	expect_error(t4, 0, "node", NULL);
}

static void test_err_undefined_node(void **state)
{
	static const char t1[] = HEAD "[volume v]\nsize = 1G\nnodes = a zed\n";
	static const char t2[] = HEAD VOL "disk.zed = /srv/x\n";
	static const char t3[] = HEAD "[volume v]\nsize = 1G\nnodes = a a\n";
	(void)state;

	expect_error(t1, line_of(t1, "nodes = a zed"), "[volume v] nodes", "zed");
	expect_error(t2, line_of(t2, "disk.zed"), "[volume v] disk.zed", "zed");
	expect_error(t3, line_of(t3, "nodes = a a"), "nodes", "twice");
}

static void test_err_disk_for_node_not_in_volume(void **state)
{
	static const char t[] = HEAD "[volume v]\nsize = 1G\nnodes = a\ndisk.b = /srv/b.img\n";
	static const char t2[] = HEAD "[volume v]\nsize = 1G\nnodes = a\ndisk.a =\n";
	(void)state;

	expect_error(t, line_of(t, "disk.b"), "[volume v] disk.b", "'b'");
	expect_error(t2, line_of(t2, "disk.a"), "disk.a", "empty");
}

static void test_err_duplicate_address(void **state)
{
	/* same host:port on two nodes, spelled differently */
	static const char t1[] = HEAD "iscsi = 127.0.0.1:3260\n"
				      "[node c]\nreplication = 127.0.0.1:7989\n"
				      "nbd = localhost:3260\ncontrol = /c3\ndata-dir = /d3\n";
	/* and within one node */
	static const char t2[] = "[cluster]\nname = x\n[node a]\nnbd = 127.0.0.1:5000\n"
				 "metrics = 127.0.0.1:5000\ncontrol = /c\ndata-dir = /d\n";
	/* witness against a node */
	static const char t3[] = "[cluster]\nname = x\nwitness = [::1]:7790\n[node a]\n"
				 "replication = [::1]:7790\ncontrol = /c\ndata-dir = /d\n";
	char earlier[64];
	(void)state;

	snprintf(earlier, sizeof(earlier), "line %d", line_of(t1, "iscsi = 127.0.0.1:3260"));
	expect_error(t1, line_of(t1, "nbd = localhost"), "[node c] nbd", earlier);
	snprintf(earlier, sizeof(earlier), "line %d", line_of(t2, "nbd = 127"));
	expect_error(t2, line_of(t2, "metrics ="), "metrics", earlier);
	snprintf(earlier, sizeof(earlier), "line %d", line_of(t3, "witness ="));
	expect_error(t3, line_of(t3, "replication ="), "replication", earlier);
}

static void test_err_duplicate_path(void **state)
{
	static const char t[] = HEAD "[node c]\ncontrol = /tmp/t/a.sock\ndata-dir = /d3\n";
	static const char t2[] = "[cluster]\nname = x\n[node a]\ncontrol = /same\ndata-dir = /same\n";
	(void)state;

	expect_error(t, line_of(t, "control = /tmp/t/a.sock\ndata-dir = /d3"), "control",
		     "node a");
	expect_error(t2, line_of(t2, "data-dir = /same"), "data-dir", NULL);
}

static void test_err_malformed_address(void **state)
{
	static const char *const bad[] = { "127.0.0.1",	     "127.0.0.1:0",    "127.0.0.1:65536",
					   "host.example:80", "::1:80",	       "[::1]",
					   "1.2.3.4:http",    "" };
	char t[1024];
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(t, sizeof(t), HEAD "iscsi = %s\n" VOL, bad[i]);
		expect_error(t, line_of(t, "iscsi ="), "[node b] iscsi", "host:port");
	}
}

static void test_err_too_many_nodes_in_volume(void **state)
{
	static const char t[] = HEAD "[node c]\nreplication = 127.0.0.1:7989\ncontrol = /c3\n"
				     "data-dir = /d3\n[volume v]\nsize = 1G\nnodes = a b c\n";
	(void)state;

	expect_error(t, line_of(t, "nodes = a b c"), "nodes", "2 nodes");
}

static void test_err_missing_secret(void **state)
{
	static const char t[] = "[cluster]\nname = lab\n"
				"[node a]\nreplication = 127.0.0.1:1\ncontrol = /c\ndata-dir = /d\n"
				"[node b]\nreplication = 127.0.0.1:2\ncontrol = /c2\ndata-dir = /d2\n";
	struct cfg *c = NULL;
	char err[512];
	(void)state;

	assert_int_equal(cfg_parse_string(t, FILE_NAME, &c, err, sizeof(err)), -EINVAL);
	assert_true(unit_contains(err, FILE_NAME));
	assert_true(unit_contains(err, "'secret'"));
	assert_null(c);
}

static void test_err_syntax(void **state)
{
	static const char t1[] = HEAD "this line is neither\n" VOL;
	static const char t2[] = HEAD "[volume v\nsize = 1G\n";
	static const char t3[] = "[cluster]\nname = x\n[node a]\ncontrol = /c\ndata-dir = /d\n= value\n";
	(void)state;

	expect_error(t1, line_of(t1, "this line"), "syntax", NULL);
	expect_error(t2, line_of(t2, "[volume v\n"), "syntax", NULL);
	expect_error(t3, line_of(t3, "= value"), NULL, NULL);
}

static void test_err_key_outside_section(void **state)
{
	static const char t[] = "name = lab\n[cluster]\nname = lab\n";
	(void)state;

	expect_error(t, 1, "name", "outside");
}

static void test_err_long_line(void **state)
{
	char t[2048], path[1000];
	(void)state;

	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	snprintf(t, sizeof(t), "[cluster]\nname = x\n[node a]\ncontrol = /%s\ndata-dir = /d\n",
		 path);
	expect_error(t, 4, NULL, NULL);
}

/* busy-poll: microseconds, 50 by default, 0 turns polling off. */
static void test_busy_poll(void **state)
{
	struct cfg *c;
	(void)state;

	c = parse_ok(HEAD VOL);
	assert_int_equal(c->nodes[0].busy_poll_us, 50);
	cfg_free(c);
	c = parse_ok("[cluster]\nname = x\n[node a]\ncontrol = /tmp/t/a.sock\n"
		     "data-dir = /tmp/t/a\nbusy-poll = 0\n");
	assert_int_equal(c->nodes[0].busy_poll_us, 0);
	cfg_free(c);
	expect_error("[cluster]\nname = x\n[node a]\ncontrol = /tmp/t/a.sock\n"
		     "data-dir = /tmp/t/a\nbusy-poll = 20000\n",
		     6, "busy-poll", "microseconds");
	expect_error("[cluster]\nname = x\n[node a]\ncontrol = /tmp/t/a.sock\n"
		     "busy-poll = 5us\ndata-dir = /tmp/t/a\n",
		     5, "busy-poll", "microseconds");
}

/* Front-end connection limits in [cluster]: defaults, values, validation
 * (a number in range; per-address no more than per listener, wherever the
 * keys appear). */
#define LIM_HEAD "[cluster]\nname = x\n"
#define LIM_NODE "[node a]\ncontrol = /tmp/t/a.sock\ndata-dir = /tmp/t/a\n"
static void test_conn_limits(void **state)
{
	struct cfg *c;
	(void)state;

	c = parse_ok(HEAD VOL);
	assert_int_equal(c->max_conns, 256);
	assert_int_equal(c->max_conns_per_addr, 64);
	assert_int_equal(c->handshake_timeout_ms, 10000);
	cfg_free(c);
	c = parse_ok(LIM_HEAD "max-connections-per-address = 2\nmax-connections = 3\n"
		     "handshake-timeout = 2.5\n" LIM_NODE);
	assert_int_equal(c->max_conns, 3);
	assert_int_equal(c->max_conns_per_addr, 2);
	assert_int_equal(c->handshake_timeout_ms, 2500);
	cfg_free(c);
	expect_error(LIM_HEAD "max-connections = 0\n" LIM_NODE, 3, "max-connections",
		     "number of connections");
	expect_error(LIM_HEAD "max-connections = 70000\n" LIM_NODE, 3, "max-connections",
		     "number of connections");
	expect_error(LIM_HEAD "max-connections = 12x\n" LIM_NODE, 3, "max-connections",
		     "number of connections");
	expect_error(LIM_HEAD "max-connections-per-address = -1\n" LIM_NODE, 3,
		     "max-connections-per-address", "number of connections");
	/* 64 per address by default: more than a max-connections of 10 */
	expect_error(LIM_HEAD "max-connections = 10\n" LIM_NODE, 1,
		     "max-connections-per-address", "more than max-connections");
	expect_error(LIM_HEAD "max-connections-per-address = 20\nmax-connections = 10\n" LIM_NODE,
		     3, "max-connections-per-address", "more than max-connections");
	expect_error(LIM_HEAD "handshake-timeout = 0\n" LIM_NODE, 3, "handshake-timeout",
		     "seconds");
	expect_error(LIM_HEAD "handshake-timeout = 10s\n" LIM_NODE, 3, "handshake-timeout",
		     "seconds");
	expect_error(LIM_HEAD "handshake-timeout = 4000\n" LIM_NODE, 3, "handshake-timeout",
		     "seconds");
}

/* The witness keys (docs/WITNESS.md): defaults, values, validation. */
static void test_witness_keys(void **state)
{
	struct cfg *c;
	(void)state;

	c = parse_ok(HEAD VOL);
	assert_int_equal(c->witness_timeout_ms, 2000);
	assert_int_equal(c->quorum_timeout_ms, 30000);
	assert_string_equal(c->witness_dir, "/var/lib/tandem");
	assert_false(c->volumes[0].failover_manual);
	cfg_free(c);
	c = parse_ok(LIM_HEAD "witness = 127.0.0.1:7790\nwitness-timeout = 0.5\n"
			      "quorum-timeout = 12\nwitness-dir = /srv/w\n"
			      "[node a]\ncontrol = /tmp/t/a.sock\ndata-dir = /tmp/t/a\n"
			      "witness = 127.0.0.1:7800\n"
			      "[volume v]\nsize = 1M\nnodes = a\nfailover = manual\n");
	assert_int_equal(c->witness_timeout_ms, 500);
	assert_int_equal(c->quorum_timeout_ms, 12000);
	assert_string_equal(c->witness_dir, "/srv/w");
	assert_string_equal(c->nodes[0].witness, "127.0.0.1:7800");
	assert_true(c->volumes[0].failover_manual);
	cfg_free(c);
	expect_error(LIM_HEAD "witness-timeout = 0.1\n" LIM_NODE, 3, "witness-timeout", "seconds");
	expect_error(LIM_HEAD "quorum-timeout = 5000\n" LIM_NODE, 3, "quorum-timeout", "seconds");
	expect_error(LIM_HEAD "quorum-timeout = soon\n" LIM_NODE, 3, "quorum-timeout", "seconds");
	expect_error(LIM_HEAD "witness-dir = rel/dir\n" LIM_NODE, 3, "witness-dir", "absolute");
	expect_error(LIM_HEAD LIM_NODE "witness = nowhere\n", 6, "witness", NULL);
	expect_error(LIM_HEAD LIM_NODE "[volume v]\nsize = 1M\nnodes = a\nfailover = sometimes\n", 9,
		     "failover", "auto nor manual");
}

static void test_err_bad_names(void **state)
{
	char t[1024];
	static const char *const bad[] = { "a b!", "a/b", "ä" };
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(t, sizeof(t), HEAD "[volume %s]\nsize = 1G\nnodes = a\n", bad[i]);
		expect_error(t, line_of(t, "[volume"), bad[i], NULL);
	}
	snprintf(t, sizeof(t), "[cluster]\nname = bad/name\n[node a]\ncontrol = /c\ndata-dir = /d\n");
	expect_error(t, 2, "name", "bad/name");
}

/* Names of up to 63 characters are valid (valid_name). They must be stored
 * whole, or be refused; never cut short (the INI library truncates section
 * headers to 49 characters). */
static void test_long_section_names(void **state)
{
	char vname[CFG_NAME_MAX], nname[CFG_NAME_MAX], t[2048];
	struct cfg *c = NULL;
	char err[512] = "";
	(void)state;

	memset(vname, 'v', sizeof(vname) - 1);
	vname[sizeof(vname) - 1] = '\0';
	memset(nname, 'n', sizeof(nname) - 1);
	nname[sizeof(nname) - 1] = '\0';
	snprintf(t, sizeof(t),
		 "[cluster]\nname = x\n[node %s]\ncontrol = /c\ndata-dir = /d\n"
		 "[volume %s]\nsize = 1G\nnodes = %s\n",
		 nname, vname, nname);
	int r = cfg_parse_string(t, FILE_NAME, &c, err, sizeof(err));
	if (r == 0) {
		print_message("node '%s'\nvolume '%s'\n", c->nodes[0].name, c->volumes[0].name);
		assert_string_equal(c->nodes[0].name, nname);
		assert_string_equal(c->volumes[0].name, vname);
		cfg_free(c);
	} else {
		print_message("refused: %s\n", err);
		assert_true(unit_contains(err, FILE_NAME ":3:"));
	}
}

/* ---- cfg_check_local ---- */

static void test_check_local(void **state)
{
	char *dir = unit_mkdtemp("cfg");
	char t[2048], err[512] = "", p[700];
	struct cfg *c;
	struct stat st;
	(void)state;

	snprintf(t, sizeof(t),
		 "[cluster]\nname = x\n[node a]\ncontrol = %s/run/sub/a.sock\n"
		 "data-dir = %s/data/a\n[volume v]\nsize = 1G\nnodes = a\n"
		 "disk.a = %s/data/v.img\n",
		 dir, dir, dir);
	c = parse_ok(t);
	assert_int_equal(cfg_check_local(c, 0, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/data/a", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	snprintf(p, sizeof(p), "%s/run/sub", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* again: everything exists now */
	assert_int_equal(cfg_check_local(c, 0, err, sizeof(err)), 0);
	cfg_free(c);

	/* data-dir under a regular file */
	snprintf(p, sizeof(p), "%s/plain", dir);
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	fclose(fp);
	snprintf(t, sizeof(t),
		 "[cluster]\nname = x\n[node a]\ncontrol = %s/a.sock\ndata-dir = %s/plain/a\n", dir,
		 dir);
	c = parse_ok(t);
	assert_int_equal(cfg_check_local(c, 0, err, sizeof(err)), -ENOTDIR);
	assert_true(unit_contains(err, FILE_NAME ":5: [node a] data-dir"));
	assert_true(unit_contains(err, "plain/a"));
	cfg_free(c);

	/* control socket directory under a regular file */
	snprintf(t, sizeof(t),
		 "[cluster]\nname = x\n[node a]\ncontrol = %s/plain/x/a.sock\ndata-dir = %s/d\n",
		 dir, dir);
	c = parse_ok(t);
	assert_int_equal(cfg_check_local(c, 0, err, sizeof(err)), -ENOTDIR);
	assert_true(unit_contains(err, FILE_NAME ":4: [node a] control"));
	cfg_free(c);

	/* disk.a in a directory that does not exist */
	snprintf(t, sizeof(t),
		 "[cluster]\nname = x\n[node a]\ncontrol = %s/a.sock\ndata-dir = %s/d\n"
		 "[volume v]\nsize = 1G\nnodes = a\ndisk.a = %s/nowhere/v.img\n",
		 dir, dir, dir);
	c = parse_ok(t);
	assert_int_equal(cfg_check_local(c, 0, err, sizeof(err)), -ENOENT);
	assert_true(unit_contains(err, FILE_NAME ":9: [volume v] disk.a"));
	cfg_free(c);

	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_example),
		cmocka_unit_test(test_one_node),
		cmocka_unit_test(test_busy_poll),
		cmocka_unit_test(test_conn_limits),
		cmocka_unit_test(test_witness_keys),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_comments),
		cmocka_unit_test(test_err_unknown_key),
		cmocka_unit_test(test_err_unknown_section),
		cmocka_unit_test(test_err_unknown_empty_section),
		cmocka_unit_test(test_err_duplicate_key),
		cmocka_unit_test(test_err_duplicate_disk_key),
		cmocka_unit_test(test_err_duplicate_section),
		cmocka_unit_test(test_err_duplicate_adjacent_section),
		cmocka_unit_test(test_err_bad_size),
		cmocka_unit_test(test_err_size_not_4k),
		cmocka_unit_test(test_err_bad_enum),
		cmocka_unit_test(test_compression),
		cmocka_unit_test(test_err_missing_cluster),
		cmocka_unit_test(test_err_missing_cluster_name),
		cmocka_unit_test(test_err_missing_cluster_key_line),
		cmocka_unit_test(test_err_volume_missing_keys),
		cmocka_unit_test(test_err_volume_empty_section),
		cmocka_unit_test(test_err_node_missing_keys),
		cmocka_unit_test(test_err_undefined_node),
		cmocka_unit_test(test_err_disk_for_node_not_in_volume),
		cmocka_unit_test(test_err_duplicate_address),
		cmocka_unit_test(test_err_duplicate_path),
		cmocka_unit_test(test_err_malformed_address),
		cmocka_unit_test(test_err_too_many_nodes_in_volume),
		cmocka_unit_test(test_err_missing_secret),
		cmocka_unit_test(test_err_syntax),
		cmocka_unit_test(test_err_key_outside_section),
		cmocka_unit_test(test_err_long_line),
		cmocka_unit_test(test_err_bad_names),
		cmocka_unit_test(test_long_section_names),
		cmocka_unit_test(test_check_local),
		cmocka_unit_test(test_tls_keys),
		cmocka_unit_test(test_control_mode_and_exposure),
		cmocka_unit_test(test_disk_slow),
		cmocka_unit_test(test_disk_failure_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
