/* parse_size, parse_addr, format_size: the helpers every config value and
 * every status line goes through; rename_durable and the lock files (fsutil). */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include "../../src/common/fsutil.h"
#include "../../src/common/util.h"

static void test_parse_size_valid(void **state)
{
	static const struct {
		const char *in;
		uint64_t want;
	} ok[] = {
		{ "0", 0 },
		{ "1", 1 },
		{ "4096", 4096 },
		{ "1k", 1024 },
		{ "64K", 64 * 1024 },
		{ "512m", 512ull << 20 },
		{ "512M", 512ull << 20 },
		{ "1G", 1ull << 30 },
		{ "3g", 3ull << 30 },
		{ "2T", 2ull << 40 },
		{ "16777215T", 16777215ull << 40 }, /* the largest T that fits */
		{ "18446744073709551615", UINT64_MAX },
		{ "0007", 7 },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v = 0xdeadbeef;
		if (parse_size(ok[i].in, &v) != 0)
			print_message("parse_size(\"%s\")\n", ok[i].in);
		assert_int_equal(parse_size(ok[i].in, &v), 0);
		assert_int_equal(v, ok[i].want);
	}
}

static void test_parse_size_errors(void **state)
{
	static const struct {
		const char *in;
		int want;
	} bad[] = {
		{ "99999999999T", -ERANGE },
		{ "16777216T", -ERANGE },
		{ "17179869184G", -ERANGE },
		{ "18446744073709551616", -ERANGE },
		{ "99999999999999999999999K", -ERANGE },
		{ "", -EINVAL },
		{ "-1", -EINVAL },
		{ "-1G", -EINVAL },
		{ "+1", -EINVAL },
		{ " 1", -EINVAL },
		{ "1 ", -EINVAL },
		{ "G", -EINVAL },
		{ "1KB", -EINVAL },
		{ "1P", -EINVAL },
		{ "1.5G", -EINVAL },
		{ "0x10", -EINVAL },
		{ "abc", -EINVAL },
		{ "1GG", -EINVAL },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 0xdeadbeef;
		if (parse_size(bad[i].in, &v) != bad[i].want)
			print_message("parse_size(\"%s\")\n", bad[i].in);
		assert_int_equal(parse_size(bad[i].in, &v), bad[i].want);
		assert_int_equal(v, 0xdeadbeef); /* untouched on error */
	}
	assert_int_equal(parse_size(NULL, &(uint64_t){ 0 }), -EINVAL);
}

static void test_parse_addr_ipv4(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)&ss;
	(void)state;

	assert_int_equal(parse_addr("127.0.0.1:10809", &ss, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(a4->sin_family, AF_INET);
	assert_int_equal(ntohs(a4->sin_port), 10809);
	assert_int_equal(ntohl(a4->sin_addr.s_addr), 0x7f000001u);

	assert_int_equal(parse_addr("10.1.2.3:1", &ss, &len), 0);
	assert_int_equal(ntohs(a4->sin_port), 1);
	assert_int_equal(ntohl(a4->sin_addr.s_addr), 0x0a010203u);

	assert_int_equal(parse_addr("0.0.0.0:65535", &ss, &len), 0);
	assert_int_equal(ntohs(a4->sin_port), 65535);

	/* localhost is the one name accepted, as 127.0.0.1 */
	assert_int_equal(parse_addr("localhost:80", &ss, &len), 0);
	assert_int_equal(ntohl(a4->sin_addr.s_addr), 0x7f000001u);
}

static void test_parse_addr_ipv6(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&ss;
	struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;
	(void)state;

	assert_int_equal(parse_addr("[::1]:3260", &ss, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_int_equal(a6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(a6->sin6_port), 3260);
	assert_memory_equal(&a6->sin6_addr, &lo, sizeof(lo));

	assert_int_equal(parse_addr("[fe80::1:2]:7789", &ss, &len), 0);
	assert_int_equal(ntohs(a6->sin6_port), 7789);
	assert_int_equal(a6->sin6_addr.s6_addr[0], 0xfe);
	assert_int_equal(a6->sin6_addr.s6_addr[15], 2);
}

static void test_parse_addr_errors(void **state)
{
	static const char *const bad[] = {
		"127.0.0.1:0",      /* port 0 */
		"127.0.0.1:65536",  /* port too big */
		"127.0.0.1:",       /* port missing */
		"127.0.0.1",        /* no colon */
		"127.0.0.1:-1",
		"127.0.0.1:+80",
		"127.0.0.1: 80",
		"127.0.0.1:80x",
		"127.0.0.1:99999999999999999999",
		":80",              /* host missing */
		"256.0.0.1:80",
		"1.2.3:80",
		"example.com:80",   /* names are not resolved */
		"::1:80",           /* IPv6 without brackets */
		"[::1]",            /* no port */
		"[::1]80",
		"[]:80",
		"[::1:80",
		"[127.0.0.1]:80",   /* brackets are for IPv6 */
		"[::1]:0",
		"[::1]:65536",
		"",
		"0123456789012345678901234567890123456789012345678901234567890123456789:80",
	};
	struct sockaddr_storage ss;
	socklen_t len = 0;
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse_addr(bad[i], &ss, &len) != -EINVAL)
			print_message("parse_addr(\"%s\") accepted\n", bad[i]);
		assert_int_equal(parse_addr(bad[i], &ss, &len), -EINVAL);
	}
	assert_int_equal(parse_addr(NULL, &ss, &len), -EINVAL);
}

static void test_format_size(void **state)
{
	static const struct {
		uint64_t v;
		const char *want;
	} cases[] = {
		{ 0, "0" },
		{ 1, "1" },
		{ 1000, "1000" },
		{ 1024, "1K" },
		{ 1536, "1536" },
		{ 4096, "4K" },
		{ 1ull << 20, "1M" },
		{ 3ull << 20, "3M" },
		{ (1ull << 20) + 1024, "1025K" },
		{ 1ull << 30, "1G" },
		{ 1ull << 40, "1T" },
		{ 1ull << 50, "1024T" },
		{ UINT64_MAX, "18446744073709551615" },
	};
	char buf[32];
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		format_size(cases[i].v, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].want);
	}
	/* format then parse gives the value back */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v;
		format_size(cases[i].v, buf, sizeof(buf));
		assert_int_equal(parse_size(buf, &v), 0);
		assert_int_equal(v, cases[i].v);
	}
	/* truncation stays NUL-terminated */
	format_size(123456, buf, 4);
	assert_string_equal(buf, "123");
}

/* Text from the wire reaches a log line or a terminal only escaped: no
 * newline, no escape sequence, bounded, cut at a whole character. */
static void test_log_escape(void **state)
{
	static const struct {
		const char *in;
		size_t len, cap;
		const char *want;
	} cases[] = {
		{ "hello", 5, 64, "hello" },
		{ "a\nb", 3, 64, "a\\x0ab" },
		{ "\x1b[31mred", 8, 64, "\\x1b[31mred" },
		{ "a\\b", 3, 64, "a\\x5cb" }, /* the backslash too: unambiguous */
		{ "\x80\xff\x7f", 3, 64, "\\x80\\xff\\x7f" },
		{ "a\0b", 3, 64, "a\\x00b" },
		{ "witness-timeout differs", 23, 64, "witness-timeout differs" },
		{ "abcde", 5, 6, "abcde" },          /* fits exactly */
		{ "abcdefghij", 10, 8, "abcd..." },  /* cut: room kept for "..." */
		{ "ab\n\n\n", 5, 10, "ab\\x0a..." }, /* never half an escape */
		{ "abcdef", 6, 3, ".." },
		{ "abc", 3, 1, "" },
		{ "", 0, 4, "" },
	};
	char out[64];
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(out, 'Z', sizeof(out));
		assert_ptr_equal(log_escape(out, cases[i].cap, cases[i].in, cases[i].len), out);
		assert_string_equal(out, cases[i].want);
		assert_true(strlen(out) < cases[i].cap);
	}
	/* cap 0 writes nothing */
	out[0] = 'Z';
	log_escape(out, 0, "abc", 3);
	assert_int_equal(out[0], 'Z');
	/* every byte value: printable or escaped, never a control character */
	for (unsigned b = 0; b < 256; b++) {
		unsigned char c = (unsigned char)b;
		log_escape(out, sizeof(out), &c, 1);
		for (const char *p = out; *p; p++)
			assert_true(*p >= 0x20 && *p < 0x7f);
		assert_int_equal(strlen(out), (b >= 0x20 && b < 0x7f && b != '\\') ? 1 : 4);
	}
}

static void test_alloc_aligned(void **state)
{
	(void)state;
	for (size_t len = 0; len <= 8192; len += 4095) {
		void *p = alloc_aligned(len);
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 4096, 0);
		free(p);
	}
}

/* rename_durable: the file moves, and every failure is a -errno, not a
 * silent success the caller's metadata would then build on. */
static void test_rename_durable(void **state)
{
	char *d = unit_mkdtemp("rename");
	char a[512], b[512], missing[512];
	struct stat st;
	int fd;
	(void)state;

	snprintf(a, sizeof(a), "%s/a", d);
	snprintf(b, sizeof(b), "%s/b", d);
	snprintf(missing, sizeof(missing), "%s/no/such", d);
	fd = open(a, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	assert_int_equal(rename_durable(a, b), 0);
	assert_int_equal(stat(a, &st), -1);
	assert_int_equal(stat(b, &st), 0);
	assert_int_equal(st.st_size, 1);
	/* nothing to move, or nowhere to put it: the error, nothing moved */
	assert_int_equal(rename_durable(a, b), -ENOENT);
	assert_int_equal(rename_durable(b, missing), -ENOENT);
	assert_int_equal(stat(b, &st), 0);
	/* a directory that does not exist cannot be synced */
	assert_int_equal(fsync_dir_of(missing), -ENOENT);
	assert_int_equal(fsync_dir_of(b), 0);
	unit_rmtree(d);
	free(d);
}

/* lockfile_take: one holder at a time (flock conflicts between open file
 * descriptions, even in one process), which the loser learns by pid. */
static void test_lockfile(void **state)
{
	char *d = unit_mkdtemp("lock");
	char p[512], missing[512], buf[32];
	pid_t holder = -1;
	int fd1, fd2, fd3;
	ssize_t k;
	(void)state;

	snprintf(p, sizeof(p), "%s/x.lock", d);
	snprintf(missing, sizeof(missing), "%s/no/x.lock", d);
	assert_int_equal(lockfile_take(p, &fd1, &holder), 0);
	assert_true(fd1 >= 0);
	k = pread(fd1, buf, sizeof(buf) - 1, 0);
	assert_true(k > 0);
	buf[k] = '\0';
	assert_int_equal(strtol(buf, NULL, 10), getpid());
	assert_int_equal(lockfile_take(p, &fd2, &holder), -EWOULDBLOCK);
	assert_int_equal(fd2, -1);
	assert_int_equal(holder, getpid());
	assert_int_equal(lockfile_stamp(fd1), 0);
	close(fd1);
	/* released with its descriptor; the stale file is taken over */
	assert_int_equal(lockfile_take(p, &fd3, &holder), 0);
	close(fd3);
	assert_int_equal(lockfile_take(missing, &fd2, &holder), -ENOENT);
	assert_int_equal(fd2, -1);
	unit_rmtree(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_size_valid),  cmocka_unit_test(test_parse_size_errors),
		cmocka_unit_test(test_parse_addr_ipv4),   cmocka_unit_test(test_parse_addr_ipv6),
		cmocka_unit_test(test_parse_addr_errors), cmocka_unit_test(test_format_size),
		cmocka_unit_test(test_log_escape),        cmocka_unit_test(test_alloc_aligned),
		cmocka_unit_test(test_rename_durable),    cmocka_unit_test(test_lockfile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
