/* Shared by the cmocka unit tests: the includes cmocka needs, in the order it
 * needs them, and temp-directory helpers. Header-only (static inline) because
 * the Makefile links each tests/unit/test_*.c alone against libtandem.a.
 * Never: holds state between tests, or touches anything outside its temp dir. */
#ifndef TANDEM_TESTS_UNIT_H
#define TANDEM_TESTS_UNIT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh directory under $TMPDIR (or /tmp); free the result with
 * unit_rmtree() then free(). */
static inline char *unit_mkdtemp(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (!base || !*base)
		base = "/tmp";
	assert_true(asprintf(&path, "%s/tandem-%s-XXXXXX", base, tag) > 0);
	assert_non_null(mkdtemp(path));
	return path;
}

static inline int unit_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static inline void unit_rmtree(const char *path)
{
	if (path)
		nftw(path, unit_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* True when hay contains needle; prints both on failure so that a failing
 * message check says what the message actually was. */
static inline int unit_contains(const char *hay, const char *needle)
{
	if (strstr(hay, needle))
		return 1;
	print_message("expected \"%s\" in \"%s\"\n", needle, hay);
	return 0;
}

#endif
