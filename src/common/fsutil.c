/* Durable renames and single-instance lock files (fsutil.h). Owns no state;
 * never blocks on a lock. */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static void dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, len, ".");
	else
		snprintf(dir, len, "%.*s", (int)(slash == path ? 1 : slash - path), path);
}

int fsync_dir_of(const char *path)
{
	char dir[4096];
	int fd, r = 0;

	dir_of(path, dir, sizeof(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

int rename_durable(const char *from, const char *to)
{
	char a[4096], b[4096];
	int r;

	if (rename(from, to) < 0)
		return -errno;
	/* The new name first: it is the one the caller's metadata points at. */
	r = fsync_dir_of(to);
	dir_of(from, a, sizeof(a));
	dir_of(to, b, sizeof(b));
	if (!r && strcmp(a, b))
		r = fsync_dir_of(from);
	return r;
}

static int write_pid(int fd, pid_t pid)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)pid);

	errno = 0;
	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n)
		return errno ? -errno : -EIO;
	return 0;
}

/* The holder writes its pid just after it locks: a reader that comes in
 * between sees an empty file, so it looks again for up to ~100 ms. */
static pid_t read_pid(int fd)
{
	struct timespec ts = { 0, 10 * 1000000 };

	for (int i = 0; i < 10; i++) {
		char buf[32];
		ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);
		char *end;
		long v;

		if (k > 0) {
			buf[k] = '\0';
			v = strtol(buf, &end, 10);
			if (end != buf && *end == '\n' && v > 0)
				return (pid_t)v;
		}
		nanosleep(&ts, NULL);
	}
	return 0;
}

int lockfile_take(const char *path, int *fd, pid_t *holder)
{
	int f, r;

	*fd = -1;
	*holder = 0;
	f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (f < 0)
		return -errno;
	if (flock(f, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
		if (r == -EWOULDBLOCK)
			*holder = read_pid(f);
		close(f);
		return r;
	}
	r = write_pid(f, getpid());
	if (r) {
		close(f);
		return r;
	}
	*fd = f;
	return 0;
}

int lockfile_stamp(int fd)
{
	return write_pid(fd, getpid());
}
