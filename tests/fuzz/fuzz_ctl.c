/* libFuzzer harness for the control protocol. The first byte selects:
 *   even: the rest is a request line for ctl_parse_line; accepted lines give
 *         1..CTL_MAX_ARGS non-empty words of printable non-space bytes that
 *         lie inside the buffer, in order;
 *   odd:  the rest supplies node, cluster and volume names for
 *         ctl_status_json, whose output must stay NUL-terminated inside its
 *         buffer, hold no control bytes, and have balanced quotes. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/ctl/ctl.h"

#include "fuzz.h"

static void line(const uint8_t *p, size_t n)
{
	char buf[CTL_MAX_LINE];
	char *argv[CTL_MAX_ARGS];
	int argc;

	if (n >= sizeof(buf))
		n = sizeof(buf) - 1;
	memcpy(buf, p, n);
	buf[n] = '\0';
	argc = ctl_parse_line(buf, argv);
	if (argc < 0) {
		CHECK(argc == -EINVAL);
		return;
	}
	CHECK(argc >= 1 && argc <= CTL_MAX_ARGS);
	for (int i = 0; i < argc; i++) {
		size_t len = strlen(argv[i]);
		CHECK(argv[i] >= buf && argv[i] + len < buf + sizeof(buf));
		CHECK(len > 0);
		if (i)
			CHECK(argv[i] > argv[i - 1]);
		for (size_t k = 0; k < len; k++)
			CHECK(argv[i][k] > 0x20 && argv[i][k] < 0x7f);
	}
}

static void status(const uint8_t *p, size_t n)
{
	static struct vol v[3];
	struct vol *vols[3] = { &v[0], &v[1], &v[2] };
	char node[CFG_NAME_MAX], cluster[CFG_NAME_MAX], out[2048];
	char *fields[5] = { node, cluster, v[0].name, v[1].name, v[2].name };
	struct ctl_info info = { .node = node, .cluster = cluster, .vols = vols, .nvols = 3 };
	size_t cap, len, quotes = 0;

	memset(v, 0, sizeof(v));
	/* names are NUL-separated pieces of the input */
	for (unsigned f = 0; f < 5; f++) {
		size_t k = 0;
		while (n && *p && k < CFG_NAME_MAX - 1) {
			fields[f][k++] = (char)*p++;
			n--;
		}
		fields[f][k] = '\0';
		if (n) {
			p++;
			n--;
		}
	}
	for (unsigned i = 0; i < 3; i++) {
		v[i].size = (uint64_t)i << 40;
		v[i].role = (enum vol_role)(i & 1);
		v[i].disk = (enum vol_disk)(i % 5);
	}
	cap = n ? 1 + *p % sizeof(out) : sizeof(out);
	len = ctl_status_json(&info, NULL, out, cap);
	CHECK(len <= cap);
	CHECK(strlen(out) < cap);
	for (const char *s = out; *s; s++) {
		CHECK((unsigned char)*s >= 0x20 || *s == '\n');
		quotes += *s == '"';
	}
	if (cap == sizeof(out))
		CHECK(quotes % 2 == 0 && out[strlen(out) - 1] == '\n');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		status(data + 1, size - 1);
	else
		line(data + 1, size - 1);
	return 0;
}
