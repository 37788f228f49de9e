/* Durable renames and single-instance lock files: the two file-system
 * operations whose failure modes (a rename lost to a power cut, two daemons
 * writing one file) the callers' metadata depends on. No state; every
 * function returns 0 or -errno. Never: removes a lock file (a stale file is
 * harmless; unlinking a held one would let a third process lock a new file). */
#ifndef TANDEM_FSUTIL_H
#define TANDEM_FSUTIL_H

#include <sys/types.h>

/* fsyncs the directory that holds path, so that an entry created, renamed or
 * removed there survives a power loss. */
int fsync_dir_of(const char *path);

/* rename(from, to), then fsync_dir_of(to) (and of from, when it lies in
 * another directory). Metadata that says the file at `to` is the new one may
 * be written only after this returned 0. On an error of rename() nothing
 * changed; on an error of the fsync the rename did happen but may not
 * survive a power loss. */
int rename_durable(const char *from, const char *to);

/* Takes an exclusive flock(2) on path (created 0644 if missing) without
 * waiting, and writes this process's pid into it as text. 0 with *fd open
 * (O_CLOEXEC; the lock lasts as long as the open file description, so a
 * child forked afterwards keeps it when the parent exits: call
 * lockfile_stamp() in the child). -EWOULDBLOCK when another process holds
 * it: *holder is then its pid as the file says (0 when it could not be
 * read). */
int lockfile_take(const char *path, int *fd, pid_t *holder);

/* Rewrites the pid in a lock file this process holds (after a fork). */
int lockfile_stamp(int fd);

#endif
