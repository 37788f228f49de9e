/* Shared helpers; see util.h. */
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (*end) {
	case '\0': break;
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default: return -EINVAL;
	}
	if (*end != '\0')
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

void format_size(uint64_t v, char *buf, size_t len)
{
	static const char suf[] = "TGMK";
	for (int i = 0; i < 4; i++) {
		unsigned shift = (unsigned)(40 - 10 * i);
		if (v && (v & ((1ULL << shift) - 1)) == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", v >> shift, suf[i]);
			return;
		}
	}
	snprintf(buf, len, "%" PRIu64, v);
}

int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[64];
	const char *colon;
	char *end;
	unsigned long port;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	if (!s)
		return -EINVAL;
	if (*s == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return -EINVAL;
		hl = (size_t)(rb - s - 1);
		if (hl == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
		if (hl == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = '\0';
	}
	if (colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port == 0 || port > 65535)
		return -EINVAL;
	if (*s == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return -EINVAL;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
		if (strcmp(host, "localhost") == 0)
			memcpy(host, "127.0.0.1", sizeof("127.0.0.1"));
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return -EINVAL;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*len = sizeof(*a4);
	}
	return 0;
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t now_boot_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* need (the escaped length) says first whether all of it fits; when not,
 * every character leaves room for the "..." that ends the cut text. */
char *log_escape(char *out, size_t cap, const void *in, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = in;
	size_t n = 0, need = 0, i;

	if (!cap)
		return out;
	for (i = 0; i < len; i++)
		need += (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') ? 1 : 4;
	for (i = 0; i < len; i++) {
		bool plain = p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\';
		size_t w = plain ? 1 : 4;

		if (n + w + (need + 1 > cap ? 3 : 0) + 1 > cap)
			break;
		if (plain) {
			out[n++] = (char)p[i];
		} else {
			out[n++] = '\\';
			out[n++] = 'x';
			out[n++] = hex[p[i] >> 4];
			out[n++] = hex[p[i] & 15];
		}
	}
	if (i < len)
		for (unsigned k = 0; k < 3 && n + 1 < cap; k++)
			out[n++] = '.';
	out[n] = '\0';
	return out;
}

/* Buffers of 1 MiB and more are 2 MiB aligned, rounded up to 2 MiB and
 * offered transparent huge pages: a direct I/O of 1 MiB then is one physically
 * contiguous segment. In 4 KiB pages it is 256 segments, more than a
 * virtio-blk request takes (254 here), so the block layer split every 1 MiB
 * read or write in two and the device queue held twice the requests. */
void *alloc_aligned(size_t len)
{
	void *p = NULL;
	size_t huge = 2u << 20;
	if (len >= (1u << 20)) {
		size_t l = (len + huge - 1) & ~(huge - 1);
		if (posix_memalign(&p, huge, l))
			return NULL;
		madvise(p, l, MADV_HUGEPAGE);
		return p;
	}
	if (posix_memalign(&p, 4096, len ? len : 4096))
		return NULL;
	return p;
}

bool buf_is_zero(const void *p, size_t len)
{
	const uint8_t *b = p;
	return len == 0 || (b[0] == 0 && memcmp(b, b + 1, len - 1) == 0);
}

int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}
