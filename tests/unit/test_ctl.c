/* Control protocol: the request-line splitter and the status renderers.
 * status --json is checked with a small strict JSON parser (below) rather than
 * by string comparison, so that the test holds the SPEC's field names and the
 * syntax, and not the exact spacing. */
#include "unit.h"

#include <ctype.h>
#include <errno.h>

#include "../../src/ctl/ctl.h"

/* ---- ctl_parse_line ---- */

static int parse(const char *line, char *buf, size_t cap, char *argv[CTL_MAX_ARGS])
{
	snprintf(buf, cap, "%s", line);
	return ctl_parse_line(buf, argv);
}

static void test_parse_words(void **state)
{
	char buf[CTL_MAX_LINE], *argv[CTL_MAX_ARGS];
	(void)state;

	assert_int_equal(parse("ping", buf, sizeof(buf), argv), 1);
	assert_string_equal(argv[0], "ping");

	assert_int_equal(parse("status vol0 --json", buf, sizeof(buf), argv), 3);
	assert_string_equal(argv[0], "status");
	assert_string_equal(argv[1], "vol0");
	assert_string_equal(argv[2], "--json");
	/* argv points into buf */
	assert_true(argv[0] == buf && argv[1] == buf + 7);

	assert_int_equal(parse("   wait-sync    vol0   --timeout  5   ", buf, sizeof(buf), argv), 4);
	assert_string_equal(argv[0], "wait-sync");
	assert_string_equal(argv[1], "vol0");
	assert_string_equal(argv[2], "--timeout");
	assert_string_equal(argv[3], "5");

	/* every printable byte is a word character except space */
	assert_int_equal(parse("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", buf, sizeof(buf), argv), 1);
	assert_int_equal(strlen(argv[0]), 32);
}

static void test_parse_empty(void **state)
{
	char buf[CTL_MAX_LINE], *argv[CTL_MAX_ARGS];
	(void)state;

	assert_int_equal(parse("", buf, sizeof(buf), argv), -EINVAL);
	assert_int_equal(parse(" ", buf, sizeof(buf), argv), -EINVAL);
	assert_int_equal(parse("        ", buf, sizeof(buf), argv), -EINVAL);
}

static void test_parse_control_chars(void **state)
{
	static const char *const bad[] = {
		"status\tvol0", "status\n", "status\r", "\x01", "ping\x7f", "ping\x1b[2J",
		"st\x80tus",    "\xff",     "vol\xc3\xa9", "a \x1f b",
	};
	char buf[CTL_MAX_LINE], *argv[CTL_MAX_ARGS];
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = parse(bad[i], buf, sizeof(buf), argv);
		if (r != -EINVAL)
			print_message("bad line %zu accepted\n", i);
		assert_int_equal(r, -EINVAL);
	}
}

static void test_parse_max_words(void **state)
{
	char line[CTL_MAX_LINE], buf[CTL_MAX_LINE], *argv[CTL_MAX_ARGS + 1];
	size_t n = 0;
	(void)state;

	/* a sentinel after the array: a 17th word must not be stored */
	argv[CTL_MAX_ARGS] = (char *)"sentinel";
	for (int w = 0; w < CTL_MAX_ARGS; w++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%sw%d", w ? " " : "", w);
	assert_int_equal(parse(line, buf, sizeof(buf), argv), CTL_MAX_ARGS);
	assert_string_equal(argv[0], "w0");
	assert_string_equal(argv[CTL_MAX_ARGS - 1], "w15");

	/* trailing spaces do not make a 17th word */
	snprintf(line + n, sizeof(line) - n, "    ");
	assert_int_equal(parse(line, buf, sizeof(buf), argv), CTL_MAX_ARGS);

	snprintf(line + n, sizeof(line) - n, " w16");
	assert_int_equal(parse(line, buf, sizeof(buf), argv), -EINVAL);
	assert_string_equal(argv[CTL_MAX_ARGS], "sentinel");

	/* many more words */
	n = 0;
	for (int w = 0; w < 200; w++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "x ");
	assert_int_equal(parse(line, buf, sizeof(buf), argv), -EINVAL);
	assert_string_equal(argv[CTL_MAX_ARGS], "sentinel");
}

/* ---- a strict little JSON checker ---- */

struct js {
	const char *p;
	int depth;
};

static void js_ws(struct js *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
		j->p++;
}

static int js_value(struct js *j);

static int js_string(struct js *j)
{
	if (*j->p != '"')
		return 0;
	j->p++;
	while (*j->p && *j->p != '"') {
		if ((unsigned char)*j->p < 0x20)
			return 0;
		if (*j->p == '\\') {
			j->p++;
			if (*j->p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)j->p[i]))
						return 0;
				j->p += 4;
			} else if (!strchr("\"\\/bfnrt", *j->p) || !*j->p) {
				return 0;
			}
		}
		j->p++;
	}
	if (*j->p != '"')
		return 0;
	j->p++;
	return 1;
}

static int js_number(struct js *j)
{
	const char *s = j->p;
	if (*j->p == '-')
		j->p++;
	if (*j->p == '0')
		j->p++;
	else if (*j->p >= '1' && *j->p <= '9')
		while (isdigit((unsigned char)*j->p))
			j->p++;
	else
		return 0;
	if (*j->p == '.') {
		j->p++;
		if (!isdigit((unsigned char)*j->p))
			return 0;
		while (isdigit((unsigned char)*j->p))
			j->p++;
	}
	if (*j->p == 'e' || *j->p == 'E') {
		j->p++;
		if (*j->p == '+' || *j->p == '-')
			j->p++;
		if (!isdigit((unsigned char)*j->p))
			return 0;
		while (isdigit((unsigned char)*j->p))
			j->p++;
	}
	return j->p > s;
}

static int js_seq(struct js *j, char close, int object)
{
	j->p++;
	js_ws(j);
	if (*j->p == close) {
		j->p++;
		return 1;
	}
	for (;;) {
		if (object) {
			if (!js_string(j))
				return 0;
			js_ws(j);
			if (*j->p++ != ':')
				return 0;
		}
		if (!js_value(j))
			return 0;
		js_ws(j);
		if (*j->p == ',') {
			j->p++;
			js_ws(j);
			continue;
		}
		if (*j->p != close)
			return 0;
		j->p++;
		return 1;
	}
}

static int js_value(struct js *j)
{
	int ok;

	js_ws(j);
	if (++j->depth > 32)
		return 0;
	switch (*j->p) {
	case '{': ok = js_seq(j, '}', 1); break;
	case '[': ok = js_seq(j, ']', 0); break;
	case '"': ok = js_string(j); break;
	case 't': ok = strncmp(j->p, "true", 4) == 0 && (j->p += 4); break;
	case 'f': ok = strncmp(j->p, "false", 5) == 0 && (j->p += 5); break;
	case 'n': ok = strncmp(j->p, "null", 4) == 0 && (j->p += 4); break;
	default: ok = js_number(j); break;
	}
	j->depth--;
	return ok;
}

/* One JSON document, optionally followed by whitespace (the newline). */
static int json_valid(const char *s)
{
	struct js j = { .p = s, .depth = 0 };
	if (!js_value(&j))
		return 0;
	js_ws(&j);
	return *j.p == '\0';
}

static void test_json_checker_rejects(void **state)
{
	(void)state;
	/* the checker itself must be able to fail */
	assert_true(json_valid("{\"a\":[1,2.5,-3e2,true,false,null,\"x\\\"y\"],\"b\":{}}\n"));
	assert_false(json_valid("{\"a\":1,}"));
	assert_false(json_valid("{\"a\" 1}"));
	assert_false(json_valid("{\"a\":01}"));
	assert_false(json_valid("{\"a\":\"x\"y\"}"));
	assert_false(json_valid("[1 2]"));
	assert_false(json_valid("{\"a\":1}}"));
	assert_false(json_valid("{\"a\":tru}"));
	assert_false(json_valid("{\"a\":\"\x01\"}"));
	assert_false(json_valid(""));
}

/* ---- ctl_status_json ---- */

static struct vol *fake_vol(const char *name, uint64_t size, enum vol_role role,
			    enum vol_disk disk)
{
	struct vol *v = calloc(1, sizeof(*v));
	assert_non_null(v);
	snprintf(v->name, sizeof(v->name), "%s", name);
	v->size = size;
	v->role = role;
	v->disk = disk;
	return v;
}

struct two {
	struct vol *v[2];
	struct ctl_info info;
};

static int setup_two(void **state)
{
	struct two *t = calloc(1, sizeof(*t));
	assert_non_null(t);
	t->v[0] = fake_vol("vol0", 1ull << 30, VOL_PRIMARY, VOL_UPTODATE);
	t->v[1] = fake_vol("db-2", 3ull << 40, VOL_SECONDARY, VOL_INCONSISTENT);
	t->info = (struct ctl_info){ .node = "a", .cluster = "lab", .vols = t->v, .nvols = 2 };
	*state = t;
	return 0;
}

static int teardown_two(void **state)
{
	struct two *t = *state;
	free(t->v[0]);
	free(t->v[1]);
	free(t);
	return 0;
}

static void test_status_json_fields(void **state)
{
	struct two *t = *state;
	char out[4096];
	size_t n;

	n = ctl_status_json(&t->info, NULL, out, sizeof(out));
	assert_int_equal(n, strlen(out));
	assert_true(json_valid(out));
	assert_int_equal(out[n - 1], '\n');
	/* SPEC.md field names and values */
	assert_true(unit_contains(out, "\"node\":\"a\""));
	assert_true(unit_contains(out, "\"cluster\":\"lab\""));
	assert_true(unit_contains(out, "\"volumes\":["));
	assert_true(unit_contains(out, "{\"name\":\"vol0\",\"size\":1073741824,"));
	assert_true(unit_contains(out, "\"role\":\"primary\",\"disk\":\"uptodate\""));
	assert_true(unit_contains(out, "\"name\":\"db-2\",\"size\":3298534883328,"));
	assert_true(unit_contains(out, "\"role\":\"secondary\",\"disk\":\"inconsistent\""));
	assert_true(unit_contains(out, "\"quorum\":"));
	assert_true(unit_contains(out, "\"peers\":["));
	/* vol0 comes before db-2, as configured */
	assert_true(strstr(out, "vol0") < strstr(out, "db-2"));
}

static void test_status_json_only(void **state)
{
	struct two *t = *state;
	char out[4096];

	ctl_status_json(&t->info, "db-2", out, sizeof(out));
	assert_true(json_valid(out));
	assert_null(strstr(out, "vol0"));
	assert_true(unit_contains(out, "\"name\":\"db-2\""));

	ctl_status_json(&t->info, "nope", out, sizeof(out));
	assert_true(json_valid(out));
	assert_true(unit_contains(out, "\"volumes\":[]"));

	t->info.nvols = 0;
	ctl_status_json(&t->info, NULL, out, sizeof(out));
	assert_true(json_valid(out));
	assert_true(unit_contains(out, "\"volumes\":[]"));
}

static void test_status_json_every_state(void **state)
{
	struct two *t = *state;
	char out[4096];
	static const char *const disks[] = { "uptodate", "inconsistent", "outdated", "diskless",
					     "failed" };
	(void)state;

	for (int d = VOL_UPTODATE; d <= VOL_FAILED; d++) {
		char want[64];
		t->v[0]->disk = (enum vol_disk)d;
		ctl_status_json(&t->info, "vol0", out, sizeof(out));
		assert_true(json_valid(out));
		snprintf(want, sizeof(want), "\"disk\":\"%s\"", disks[d]);
		assert_true(unit_contains(out, want));
	}
}

/* Names that need escaping never break the document. */
static void test_status_json_hostile_names(void **state)
{
	struct two *t = *state;
	char out[4096];

	t->info.node = "a\"b\\c\n";
	t->info.cluster = "\"}],";
	snprintf(t->v[0]->name, sizeof(t->v[0]->name), "v\"0\\\x01");
	ctl_status_json(&t->info, NULL, out, sizeof(out));
	if (!json_valid(out))
		print_message("invalid: %s", out);
	assert_true(json_valid(out));
}

/* Valid names are up to 63 characters (config.c valid_name); status must show
 * them whole, or `status --json` and `status VOLUME` disagree with the config. */
static void test_status_json_longest_name(void **state)
{
	struct two *t = *state;
	char out[4096], want[CFG_NAME_MAX + 16];

	memset(t->v[0]->name, 'n', CFG_NAME_MAX - 1);
	t->v[0]->name[CFG_NAME_MAX - 1] = '\0';
	memset(t->v[1]->name, 'm', CFG_NAME_MAX - 1);
	t->v[1]->name[CFG_NAME_MAX - 1] = '\0';
	t->info.node = t->v[1]->name;
	ctl_status_json(&t->info, NULL, out, sizeof(out));
	assert_true(json_valid(out));
	snprintf(want, sizeof(want), "\"name\":\"%s\"", t->v[0]->name);
	assert_true(unit_contains(out, want));
	snprintf(want, sizeof(want), "\"node\":\"%s\"", t->v[1]->name);
	assert_true(unit_contains(out, want));
}

/* A small buffer truncates: never writes past cap, always NUL-terminates,
 * and what it wrote is a prefix of the full document. */
static void test_status_json_truncation(void **state)
{
	struct two *t = *state;
	char full[4096];
	size_t n = ctl_status_json(&t->info, NULL, full, sizeof(full));

	for (size_t cap = 1; cap <= n + 1; cap++) {
		char *out = malloc(cap); /* exact size: ASan sees any overrun */
		assert_non_null(out);
		size_t k = ctl_status_json(&t->info, NULL, out, cap);
		assert_true(k <= cap);
		assert_int_equal(strlen(out), cap - 1 < n ? cap - 1 : n);
		assert_memory_equal(out, full, strlen(out));
		free(out);
	}
}

static void test_status_text(void **state)
{
	struct two *t = *state;
	char out[4096];
	size_t n;

	n = ctl_status_text(&t->info, NULL, out, sizeof(out));
	assert_int_equal(n, strlen(out));
	assert_true(unit_contains(out, "node a, cluster lab\n"));
	assert_true(unit_contains(out, "vol0"));
	assert_true(unit_contains(out, "1G"));
	assert_true(unit_contains(out, "3T"));
	assert_true(unit_contains(out, "primary"));
	assert_true(unit_contains(out, "inconsistent"));
	n = ctl_status_text(&t->info, "vol0", out, sizeof(out));
	assert_null(strstr(out, "db-2"));
	for (size_t cap = 1; cap < 200; cap++) {
		char *o = malloc(cap);
		assert_non_null(o);
		assert_true(ctl_status_text(&t->info, NULL, o, cap) <= cap);
		assert_true(strlen(o) < cap);
		free(o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_words),
		cmocka_unit_test(test_parse_empty),
		cmocka_unit_test(test_parse_control_chars),
		cmocka_unit_test(test_parse_max_words),
		cmocka_unit_test(test_json_checker_rejects),
		cmocka_unit_test_setup_teardown(test_status_json_fields, setup_two, teardown_two),
		cmocka_unit_test_setup_teardown(test_status_json_only, setup_two, teardown_two),
		cmocka_unit_test_setup_teardown(test_status_json_every_state, setup_two,
						teardown_two),
		cmocka_unit_test_setup_teardown(test_status_json_hostile_names, setup_two,
						teardown_two),
		cmocka_unit_test_setup_teardown(test_status_json_longest_name, setup_two,
						teardown_two),
		cmocka_unit_test_setup_teardown(test_status_json_truncation, setup_two,
						teardown_two),
		cmocka_unit_test_setup_teardown(test_status_text, setup_two, teardown_two),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
