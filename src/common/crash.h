/* A crash point: a place where a simulated power loss may strike (tests only;
 * `tandemctl inject VOLUME crash`, src/bs/bs_crash.c). The metadata writers
 * (src/md, src/bm) call it before each write of theirs; when the point is the
 * chosen one, it leaves what a real crash could have left of that write (a
 * torn subset of its sectors), of the unflushed data writes, and kills the
 * process. A hook may also fail the write instead (the fault loops of the
 * unit tests): it then returns -errno, which the writer takes as the
 * write's result. Otherwise it returns 0 and the write goes on as usual. */
#ifndef TANDEM_CRASH_H
#define TANDEM_CRASH_H

#include <stddef.h>
#include <stdint.h>

struct crash_hook {
	int (*point)(struct crash_hook *h, const char *what, int fd, const void *buf, size_t len,
		     uint64_t off);
};

/* h may be NULL (no crash simulation): 0. */
static inline int crash_point(struct crash_hook *h, const char *what, int fd, const void *buf,
			      size_t len, uint64_t off)
{
	return h ? h->point(h, what, fd, buf, len, off) : 0;
}

#endif
