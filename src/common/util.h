/* Small helpers shared by every component: size parsing, address parsing,
 * monotonic time, aligned allocation. Pure functions; no state. */
#ifndef TANDEM_UTIL_H
#define TANDEM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define IS_ALIGNED(x, a) (((x) & ((uint64_t)(a)-1)) == 0)
#define ALIGN_UP(x, a) (((x) + ((uint64_t)(a)-1)) & ~((uint64_t)(a)-1))

/* "1G", "512M", "4096", "64K": powers of 1024. Returns 0 or -EINVAL / -ERANGE. */
int parse_size(const char *s, uint64_t *out);
/* "host:port" with a numeric IPv4 host, or "[v6]:port". Returns 0 or -EINVAL. */
int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len);
/* Formats a byte count as "1G", "512M" etc. when exact, else plain bytes. */
void format_size(uint64_t v, char *buf, size_t len);

uint64_t now_ns(void); /* CLOCK_MONOTONIC */
/* The value of one hex digit (either case), or -1. */
int hex_digit(char ch);
/* CLOCK_BOOTTIME: keeps running while the machine is suspended (leases) */
uint64_t now_boot_ns(void);

/* Text a peer sent, made fit for a log line or a terminal: the len bytes at
 * in are written to out (cap bytes, always NUL-terminated when cap > 0),
 * printable ASCII as is, every other byte and the backslash as \xNN, so a newline
 * or an escape sequence from the wire can neither forge a line nor reach a
 * terminal. What does not fit is cut at a whole character and the text ends
 * in "...". Returns out. */
char *log_escape(char *out, size_t cap, const void *in, size_t len);

/* Page-aligned buffer suitable for O_DIRECT; free with free(). From 1 MiB up
 * it takes whole 2 MiB huge pages where the kernel has them (util.c). */
void *alloc_aligned(size_t len);
/* Every byte of p[0..len) is zero (true for len 0). */
bool buf_is_zero(const void *p, size_t len);

#endif
