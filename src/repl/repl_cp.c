/* The consistent point a secondary keeps while it is a resync target
 * (docs/ASYNC.md). A resync copies regions out of write order, so the
 * target's image is a mix of old and new until it ends. Before the first
 * resync write lands on an image that is consistent, the image is copied
 * by reflink (FICLONE: the copy shares every block, so it costs metadata
 * only) to DATA.consistent, with DATA.consistent.info recording when. The
 * copy goes once the node is up to date again. `primary --force` on a node
 * still being resynced starts from the copy instead of the mix.
 *
 * Invariants:
 *   CP1. The copy is taken only of an image that is consistent, with no
 *        write of this connection in flight (the caller pauses reading
 *        until the applies before RS_START are done).
 *   CP2. The info file is written (fsynced, renamed) after the copy is
 *        durable; a copy without it is ignored and removed.
 *   CP3. A node whose disk is consistent holds no copy (tick removes it).
 * Never: reads or writes the data through the copy while it is kept. */
#include "repl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/log.h"

static uint64_t real_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cp_paths(const struct repl *r, char *copy, size_t clen, char *info, size_t ilen)
{
	snprintf(copy, clen, "%s.consistent", r->v->data_path);
	snprintf(info, ilen, "%s.consistent.info", r->v->data_path);
}

static void cp_note(struct repl *r, const char *fmt, const char *detail)
{
	snprintf(r->cp_why, sizeof(r->cp_why), fmt, detail);
}

/* CP2: "TIME_NS GENERATION\n", durable before it is renamed in place, and
 * the rename durable before the caller counts on the copy (the directory
 * fsync also makes the copy's own new entry, in the same directory, last). */
static int info_write(const char *path, uint64_t t, uint64_t gen)
{
	char tmp[CFG_PATH_MAX + 64], buf[64];
	int fd, n, r = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	n = snprintf(buf, sizeof(buf), "%llu %016llx\n", (unsigned long long)t,
		     (unsigned long long)gen);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n || fsync(fd) < 0)
		r = errno ? -errno : -EIO;
	close(fd);
	if (!r)
		r = rename_durable(tmp, path);
	if (r)
		unlink(tmp);
	return r;
}

void cp_take(struct repl *r)
{
	char copy[CFG_PATH_MAX + 64], info[CFG_PATH_MAX + 64], extra[CFG_PATH_MAX + 160];
	uint64_t t = real_now();
	int e;

	cp_paths(r, copy, sizeof(copy), info, sizeof(info));
	unlink(info); /* an older copy is of an older state */
	r->cp_have = false;
	e = bs_clone_to(r->v->bs, copy);
	if (!e)
		e = info_write(info, t, sb(r)->gen_current);
	if (e) {
		unlink(info); /* renamed, perhaps, but not durably */
		unlink(copy);
		cp_note(r,
			"no consistent point until the resync ends: the backing store keeps no "
			"copy "
			"(%s)",
			e == -EOPNOTSUPP || e == -EXDEV || e == -EINVAL || e == -ENOTTY
				? "its filesystem has no reflinks"
				: strerror(-e));
		log_warn("volume %s: %s", r->v->name, r->cp_why);
		return;
	}
	r->cp_have = true;
	r->cp_time_ns = t;
	r->cp_why[0] = 0;
	log_info("volume %s: kept the consistent image as %s for the length of the resync",
		 r->v->name, copy);
	snprintf(extra, sizeof(extra), "\"path\":\"%s\"", copy);
	vol_event(r->v, "consistent-point", "none", "kept", extra);
}

/* Before a resync whose target image is not consistent: nothing to keep. */
void cp_none(struct repl *r, const char *why)
{
	if (r->cp_have)
		return; /* the copy of an earlier resync is still the last consistent state */
	cp_note(r, "no consistent point until the resync ends: %s", why);
}

void cp_drop(struct repl *r)
{
	char copy[CFG_PATH_MAX + 64], info[CFG_PATH_MAX + 64];

	cp_paths(r, copy, sizeof(copy), info, sizeof(info));
	r->cp_why[0] = 0;
	if (!r->cp_have)
		return;
	unlink(info);
	unlink(copy);
	r->cp_have = false;
	log_info("volume %s: the resync ended: the kept consistent image is removed", r->v->name);
	vol_event(r->v, "consistent-point", "kept", "none", NULL);
}

/* At start: a copy with its info survives a restart (CP2); CP3. */
void cp_load(struct repl *r)
{
	char copy[CFG_PATH_MAX + 64], info[CFG_PATH_MAX + 64], buf[64] = "";
	unsigned long long t = 0;
	FILE *f;

	if (!r->v->data_path[0])
		return;
	cp_paths(r, copy, sizeof(copy), info, sizeof(info));
	f = fopen(info, "re");
	if (f) {
		if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%llu", &t) != 1)
			t = 0;
		fclose(f);
	}
	if (!t || access(copy, R_OK) || disk_consistent(r->v->disk)) {
		unlink(info);
		unlink(copy);
		return;
	}
	r->cp_have = true;
	r->cp_time_ns = t;
	log_info("volume %s: a consistent image from before the unfinished resync is kept as %s",
		 r->v->name, copy);
}

/* CP3, from tick. */
void cp_tick(struct repl *r)
{
	if (r->cp_have && disk_consistent(r->v->disk) && r->rstate != RR_SYNCTARGET)
		cp_drop(r);
	if (!r->cp_have && r->cp_why[0] && r->rstate != RR_SYNCTARGET)
		r->cp_why[0] = 0;
}

/* Before a forced promotion changes anything (or asks the witness): the
 * kept copy is still there to be restored. 0, or -errno with msg. */
int cp_check(const struct repl *r, char *msg, size_t len)
{
	char copy[CFG_PATH_MAX + 64], info[CFG_PATH_MAX + 64];
	int e;

	cp_paths(r, copy, sizeof(copy), info, sizeof(info));
	if (access(copy, R_OK | W_OK) == 0)
		return 0;
	e = errno;
	snprintf(msg, len, "the kept consistent image %s cannot be restored: %s", copy,
		 strerror(e));
	return -e;
}

/* primary --force on a disk being resynced: the kept copy becomes the
 * data. Its regions that the resync had already brought are older again,
 * and what the peer may hold differs anywhere: every region is marked, so
 * whichever way the next handshake goes, it copies everything. 0, or
 * -errno with msg; -ENOENT: no copy kept. */
int cp_restore(struct repl *r, char *msg, size_t len)
{
	char copy[CFG_PATH_MAX + 64], info[CFG_PATH_MAX + 64];
	int e;

	if (!r->cp_have)
		return -ENOENT;
	if (r->v->inflight || r->conn) {
		snprintf(msg, len, "the kept consistent image cannot be restored while %s",
			 r->conn ? "the peer is connected" : "requests are in flight");
		return -EBUSY;
	}
	cp_paths(r, copy, sizeof(copy), info, sizeof(info));
	e = bs_replace_from(r->v->bs, copy);
	if (e && access(copy, F_OK) < 0 && errno == ENOENT) {
		/* Swapped in but not durably: the data may be either image, so
		 * every region is marked and the disk is not called consistent. */
		unlink(info);
		r->cp_have = false;
		bm_set_all(r->bm);
		bm_flush(r->bm, NULL);
	}
	if (e) {
		snprintf(msg, len, "restoring the kept consistent image %s: %s", copy,
			 strerror(-e));
		return e;
	}
	unlink(info);
	r->cp_have = false;
	/* guarantee 8: the copy carries the label of when it was taken, older
	 * than the metadata; it is this disk's data now */
	vol_relabel(r->v, false);
	bm_set_all(r->bm);
	bm_flush(r->bm, NULL);
	vol_set_disk(r->v, VOL_CONSISTENT);
	log_warn("volume %s: the consistent image kept before the resync (%s) is the data now; "
		 "the unfinished resync's writes are gone",
		 r->v->name, copy);
	vol_event(r->v, "consistent-point", "kept", "restored", NULL);
	return 0;
}
