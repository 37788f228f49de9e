/*
 * iscsi-load: an asynchronous iSCSI load generator on libiscsi, for bench/iscsi.sh.
 * fio has no libiscsi engine on Debian 12, iscsi-perf only reads and qemu-img bench
 * only strides sequentially; this keeps QD commands in flight on one session (random
 * block-aligned or sequential offsets), times every one of them and prints one JSON
 * line. It owns nothing but its session: no retries, no reconnects (a target that
 * drops the session is a failure to see, not to hide), and any status but GOOD counts
 * as an error and makes the exit code 1.
 *
 *   iscsi-load [options] iscsi://HOST:PORT/IQN/LUN
 *     --rw read|write        (default read)     --pattern rand|seq  (default rand)
 *     --bs BYTES             (default 4k)       --qd N              (default 1)
 *     --runtime SECONDS      (default 10)       --ramp SECONDS      (default 1)
 *     --size BYTES           span of the LUN used, from offset 0 (default: READ CAPACITY)
 *     --seed N               offsets and write data (default 1: same offsets every run)
 *     --initiator-name IQN   --timeout SECONDS  (per command, default 30)
 * Sizes take K, M, G suffixes (binary). Output, one line:
 *   {"rw":..,"pattern":..,"bs":..,"qd":..,"runtime_s":..,"ios":..,"iops":..,"mb_s":..,
 *    "lat_mean_us":..,"lat_p50_us":..,"lat_p99_us":..,"lat_p999_us":..,"lat_max_us":..,
 *    "errors":..}
 * MB = 10^6 bytes. Only commands completed inside the measured window (after the ramp)
 * count; at the end no new command is issued and those in flight are drained.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define MAX_QD 1024
#define POOL_BYTES (16u << 20) /* random write data; each write starts at a random offset */
#define ERRORS_SHOWN 10        /* failed commands described on stderr, the rest counted */

/*
 * Latency histogram, log-linear: values below 2^SUB_BITS ns are exact, above that each
 * power of two is split into 2^(SUB_BITS-1) buckets, so a bucket is at most 1/128 of its
 * value wide (percentiles within 0.8%) in a fixed 60 KiB whatever the run length.
 */
#define SUB_BITS 8
#define HALF (1u << (SUB_BITS - 1))
#define NBUCKETS ((1u << SUB_BITS) + (64 - SUB_BITS) * HALF)

struct hist {
	uint64_t n[NBUCKETS];
	uint64_t count, sum_ns, max_ns;
};

static unsigned hist_index(uint64_t v)
{
	if (v < (1u << SUB_BITS))
		return (unsigned)v;
	unsigned k = 63u - (unsigned)__builtin_clzll(v); /* k >= SUB_BITS */
	unsigned m = (unsigned)(v >> (k - (SUB_BITS - 1))); /* in [HALF, 2*HALF) */
	return (1u << SUB_BITS) + (k - SUB_BITS) * HALF + (m - HALF);
}

/* The middle of bucket i, in ns. */
static double hist_value(unsigned i)
{
	if (i < (1u << SUB_BITS))
		return i;
	unsigned k = (i - (1u << SUB_BITS)) / HALF + SUB_BITS;
	unsigned m = (i - (1u << SUB_BITS)) % HALF + HALF;
	double lo = (double)((uint64_t)m << (k - (SUB_BITS - 1)));
	return lo + (double)(1ull << (k - (SUB_BITS - 1))) / 2;
}

static void hist_add(struct hist *h, uint64_t ns)
{
	h->n[hist_index(ns)]++;
	h->count++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

/* The q-quantile (0 < q <= 1) in ns; never above the exact maximum. */
static double hist_quantile(const struct hist *h, double q)
{
	if (h->count == 0)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)h->count + 0.5);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < NBUCKETS; i++) {
		seen += h->n[i];
		if (seen >= rank) {
			double v = hist_value(i);
			return v > (double)h->max_ns ? (double)h->max_ns : v;
		}
	}
	return (double)h->max_ns;
}

struct opts {
	const char *url, *initiator;
	int write, seq;
	uint64_t bs, size, seed;
	unsigned qd;
	double runtime, ramp;
	int timeout;
};

struct bench;

/* One queue slot: at most one command in flight per slot. */
struct slot {
	struct bench *b;
	struct scsi_iovec iov; /* must live until the command completes */
	unsigned char *rbuf;   /* this slot's read buffer */
	uint64_t t0;           /* submission time, ns */
};

struct bench {
	struct opts o;
	struct iscsi_context *iscsi;
	int lun;
	uint32_t blksz;
	uint64_t units;    /* o.size / o.bs: the offsets a command can start at */
	uint64_t seq_next; /* next unit of the sequential pattern */
	uint64_t rng;      /* xorshift64 state of the offsets */
	uint64_t data_rng; /* and of the write data's place in the pool */
	unsigned char *pool, *rbufs;
	struct slot slots[MAX_QD];
	unsigned inflight;
	int stopping, failed;
	uint64_t t_meas, t_end; /* measured window [t_meas, t_end), ns */
	uint64_t errors;
	struct hist h;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static int submit(struct slot *s);

static const char *status_str(int status)
{
	switch (status) {
	case SCSI_STATUS_CANCELLED: return "cancelled (session lost)";
	case SCSI_STATUS_ERROR: return "session error";
	case SCSI_STATUS_TIMEOUT: return "timed out";
	case SCSI_STATUS_BUSY: return "BUSY";
	case SCSI_STATUS_RESERVATION_CONFLICT: return "RESERVATION CONFLICT";
	case SCSI_STATUS_TASK_SET_FULL: return "TASK SET FULL";
	case SCSI_STATUS_TASK_ABORTED: return "TASK ABORTED";
	default: return "unexpected status";
	}
}

/* The LBA of a READ(16) / WRITE(16) CDB (bytes 2..9, big-endian). */
static uint64_t cdb16_lba(const unsigned char *cdb)
{
	uint64_t v = 0;
	for (int i = 2; i < 10; i++)
		v = v << 8 | cdb[i];
	return v;
}

static void complete(struct iscsi_context *iscsi, int status, void *command_data, void *private)
{
	struct slot *s = private;
	struct bench *b = s->b;
	struct scsi_task *task = command_data;
	uint64_t t = now_ns();
	(void)iscsi;

	b->inflight--;
	if (status != SCSI_STATUS_GOOD) {
		if (b->errors < ERRORS_SHOWN) {
			if (status == SCSI_STATUS_CHECK_CONDITION && task)
				fprintf(stderr, "iscsi-load: %s at LBA %" PRIu64 ": CHECK CONDITION %s (0x%02x) %s (0x%04x)\n",
					b->o.write ? "write" : "read", cdb16_lba(task->cdb),
					scsi_sense_key_str(task->sense.key), (unsigned)task->sense.key,
					scsi_sense_ascq_str(task->sense.ascq), (unsigned)task->sense.ascq);
			else
				fprintf(stderr, "iscsi-load: %s failed: %s (0x%x): %s\n", b->o.write ? "write" : "read",
					status_str(status), (unsigned)status, iscsi_get_error(b->iscsi));
		}
		b->errors++;
		/* Cancelled: the session is gone (no reconnects), so is the rest of the run. */
		if (status == SCSI_STATUS_CANCELLED || status == SCSI_STATUS_ERROR)
			b->failed = 1;
	} else if (t >= b->t_meas && t < b->t_end) {
		hist_add(&b->h, t - s->t0);
	}
	if (task)
		scsi_free_scsi_task(task);
	/* Nothing new once the window closed or the session broke. */
	if (!b->stopping && !b->failed && t < b->t_end)
		if (submit(s) < 0)
			b->failed = 1;
}

static int submit(struct slot *s)
{
	struct bench *b = s->b;
	uint64_t unit;
	if (b->o.seq) {
		unit = b->seq_next;
		b->seq_next = (b->seq_next + 1) % b->units;
	} else {
		unit = xorshift64(&b->rng) % b->units;
	}
	uint64_t lba = unit * (b->o.bs / b->blksz);
	uint32_t len = (uint32_t)b->o.bs;
	struct scsi_task *task;

	s->t0 = now_ns();
	if (b->o.write) {
		/* Data from a random place in the pool: never the same bytes twice in a row,
		 * and no copy or fill per command. */
		uint64_t off = (xorshift64(&b->data_rng) % (POOL_BYTES / 8)) * 8;
		s->iov.iov_base = b->pool + off;
		s->iov.iov_len = len;
		task = iscsi_write16_iov_task(b->iscsi, b->lun, lba, NULL, len, (int)b->blksz, 0, 0, 0, 0, 0,
					      complete, s, &s->iov, 1);
	} else {
		s->iov.iov_base = s->rbuf;
		s->iov.iov_len = len;
		task = iscsi_read16_iov_task(b->iscsi, b->lun, lba, len, (int)b->blksz, 0, 0, 0, 0, 0, complete,
					     s, &s->iov, 1);
	}
	if (!task) {
		fprintf(stderr, "iscsi-load: cannot queue a command: %s\n", iscsi_get_error(b->iscsi));
		return -1;
	}
	b->inflight++;
	return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !(*out >= 0) ? -1 : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: iscsi-load [--rw read|write] [--pattern rand|seq] [--bs BYTES] [--qd N]\n"
		   "                  [--runtime S] [--ramp S] [--size BYTES] [--seed N]\n"
		   "                  [--initiator-name IQN] [--timeout S] iscsi://HOST:PORT/IQN/LUN\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "rw", required_argument, NULL, 'w' },
		{ "pattern", required_argument, NULL, 'p' },
		{ "bs", required_argument, NULL, 'b' },
		{ "qd", required_argument, NULL, 'q' },
		{ "runtime", required_argument, NULL, 't' },
		{ "ramp", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'S' },
		{ "initiator-name", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct opts){
		.initiator = "iqn.2026-11.org.tandem:iscsi-load",
		.bs = 4096,
		.qd = 1,
		.runtime = 10,
		.ramp = 1,
		.seed = 1,
		.timeout = 30,
	};
	int c, li = 0;
	uint64_t v;
	while ((c = getopt_long(argc, argv, "h", longopts, &li)) != -1) {
		switch (c) {
		case 'w':
			if (strcmp(optarg, "read") && strcmp(optarg, "write"))
				goto bad;
			o->write = !strcmp(optarg, "write");
			break;
		case 'p':
			if (strcmp(optarg, "rand") && strcmp(optarg, "seq"))
				goto bad;
			o->seq = !strcmp(optarg, "seq");
			break;
		case 'b':
			if (parse_size(optarg, &o->bs) || o->bs == 0 || o->bs > (64u << 20))
				goto bad;
			break;
		case 'q':
			if (parse_size(optarg, &v) || v < 1 || v > MAX_QD)
				goto bad;
			o->qd = (unsigned)v;
			break;
		case 't':
			if (parse_double(optarg, &o->runtime) || o->runtime <= 0)
				goto bad;
			break;
		case 'r':
			if (parse_double(optarg, &o->ramp))
				goto bad;
			break;
		case 's':
			if (parse_size(optarg, &o->size) || o->size == 0)
				goto bad;
			break;
		case 'S':
			if (parse_size(optarg, &o->seed))
				goto bad;
			break;
		case 'i':
			o->initiator = optarg;
			break;
		case 'T':
			if (parse_size(optarg, &v) || v < 1 || v > 3600)
				goto bad;
			o->timeout = (int)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return -1;
	}
	o->url = argv[optind];
	return 0;
bad:
	fprintf(stderr, "iscsi-load: bad value for --%s: '%s'\n", longopts[li].name, optarg);
	return -1;
}

/* Block size and capacity in bytes, READ CAPACITY(16), else (10). */
static int capacity(struct bench *b, uint64_t *bytes)
{
	struct scsi_task *t = iscsi_readcapacity16_sync(b->iscsi, b->lun);
	if (t && t->status == SCSI_STATUS_GOOD) {
		struct scsi_readcapacity16 *rc = scsi_datain_unmarshall(t);
		if (rc && rc->block_length) {
			b->blksz = rc->block_length;
			*bytes = (rc->returned_lba + 1) * rc->block_length;
			scsi_free_scsi_task(t);
			return 0;
		}
	}
	if (t)
		scsi_free_scsi_task(t);
	t = iscsi_readcapacity10_sync(b->iscsi, b->lun, 0, 0);
	if (t && t->status == SCSI_STATUS_GOOD) {
		struct scsi_readcapacity10 *rc = scsi_datain_unmarshall(t);
		if (rc && rc->block_size) {
			b->blksz = rc->block_size;
			*bytes = ((uint64_t)rc->lba + 1) * rc->block_size;
			scsi_free_scsi_task(t);
			return 0;
		}
	}
	if (t)
		scsi_free_scsi_task(t);
	fprintf(stderr, "iscsi-load: READ CAPACITY failed: %s\n", iscsi_get_error(b->iscsi));
	return -1;
}

static int setup(struct bench *b)
{
	struct opts *o = &b->o;
	b->iscsi = iscsi_create_context(o->initiator);
	if (!b->iscsi) {
		fprintf(stderr, "iscsi-load: cannot create an iSCSI context\n");
		return -1;
	}
	struct iscsi_url *u = iscsi_parse_full_url(b->iscsi, o->url);
	if (!u) {
		fprintf(stderr, "iscsi-load: bad URL '%s': %s\n", o->url, iscsi_get_error(b->iscsi));
		return -1;
	}
	b->lun = u->lun;
	int rc = 0;
	if (iscsi_set_targetname(b->iscsi, u->target) || iscsi_set_session_type(b->iscsi, ISCSI_SESSION_NORMAL) ||
	    iscsi_set_header_digest(b->iscsi, ISCSI_HEADER_DIGEST_NONE) ||
	    (u->user[0] && iscsi_set_initiator_username_pwd(b->iscsi, u->user, u->passwd))) {
		fprintf(stderr, "iscsi-load: %s\n", iscsi_get_error(b->iscsi));
		rc = -1;
	} else if (iscsi_full_connect_sync(b->iscsi, u->portal, u->lun)) {
		fprintf(stderr, "iscsi-load: login to %s failed: %s\n", o->url, iscsi_get_error(b->iscsi));
		rc = -1;
	}
	iscsi_destroy_url(u);
	if (rc)
		return -1;
	/* After login: a failed session ends the run instead of being retried behind our back. */
	iscsi_set_noautoreconnect(b->iscsi, 1);
	iscsi_set_timeout(b->iscsi, o->timeout);

	uint64_t cap;
	if (capacity(b, &cap))
		return -1;
	if (o->bs % b->blksz) {
		fprintf(stderr, "iscsi-load: --bs %" PRIu64 " is not a multiple of the block size %" PRIu32 "\n",
			o->bs, b->blksz);
		return -1;
	}
	if (!o->size)
		o->size = cap;
	if (o->size > cap || o->size < o->bs) {
		fprintf(stderr, "iscsi-load: --size %" PRIu64 " must lie between --bs and the capacity %" PRIu64 "\n",
			o->size, cap);
		return -1;
	}
	b->units = o->size / o->bs;

	b->rng = o->seed ? o->seed : 0x9e3779b97f4a7c15ull;
	if (o->write) {
		b->pool = malloc(POOL_BYTES + o->bs);
		if (!b->pool)
			goto oom;
		b->data_rng = b->rng ^ 0xd1b54a32d192ed03ull;
		uint64_t x = b->data_rng;
		for (size_t i = 0; i < (POOL_BYTES + o->bs) / 8; i++) {
			uint64_t r = xorshift64(&x);
			memcpy(b->pool + i * 8, &r, 8);
		}
	} else {
		b->rbufs = aligned_alloc(4096, o->qd * ((o->bs + 4095) & ~(uint64_t)4095));
		if (!b->rbufs)
			goto oom;
	}
	for (unsigned i = 0; i < o->qd; i++) {
		b->slots[i].b = b;
		if (b->rbufs)
			b->slots[i].rbuf = b->rbufs + i * ((o->bs + 4095) & ~(uint64_t)4095);
	}
	return 0;
oom:
	fprintf(stderr, "iscsi-load: out of memory\n");
	return -1;
}

/* Runs until the window closes and every command in flight is back (or the session
 * fails). Returns 0, or -1 when the session broke. */
static int run(struct bench *b)
{
	uint64_t t = now_ns();
	b->t_meas = t + (uint64_t)(b->o.ramp * 1e9);
	b->t_end = b->t_meas + (uint64_t)(b->o.runtime * 1e9);
	uint64_t t_give_up = b->t_end + (uint64_t)(b->o.timeout + 5) * 1000000000u;

	for (unsigned i = 0; i < b->o.qd; i++)
		if (submit(&b->slots[i]) < 0)
			return -1;
	while (b->inflight > 0 && !b->failed) {
		t = now_ns();
		if (t >= b->t_end)
			b->stopping = 1;
		if (t >= t_give_up) {
			fprintf(stderr, "iscsi-load: %u commands still in flight %d s after the end\n", b->inflight,
				b->o.timeout + 5);
			return -1;
		}
		struct pollfd p = { .fd = iscsi_get_fd(b->iscsi), .events = (short)iscsi_which_events(b->iscsi) };
		int ms = 100;
		if (!b->stopping && (b->t_end - t) / 1000000u < 100)
			ms = (int)((b->t_end - t) / 1000000u) + 1;
		int n = poll(&p, 1, ms);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("iscsi-load: poll");
			return -1;
		}
		/* revents 0 (a timeout) lets libiscsi expire commands past --timeout. */
		if (iscsi_service(b->iscsi, n ? p.revents : 0) < 0) {
			fprintf(stderr, "iscsi-load: session failed: %s\n", iscsi_get_error(b->iscsi));
			return -1;
		}
	}
	return b->failed ? -1 : 0;
}

static void report(const struct bench *b)
{
	const struct hist *h = &b->h;
	double secs = b->o.runtime;
	double iops = (double)h->count / secs;
	printf("{\"rw\":\"%s\",\"pattern\":\"%s\",\"bs\":%" PRIu64 ",\"qd\":%u,\"runtime_s\":%.3f,"
	       "\"ios\":%" PRIu64 ",\"iops\":%.1f,\"mb_s\":%.2f,\"lat_mean_us\":%.1f,\"lat_p50_us\":%.1f,"
	       "\"lat_p99_us\":%.1f,\"lat_p999_us\":%.1f,\"lat_max_us\":%.1f,\"errors\":%" PRIu64 "}\n",
	       b->o.write ? "write" : "read", b->o.seq ? "seq" : "rand", b->o.bs, b->o.qd, secs, h->count, iops,
	       iops * (double)b->o.bs / 1e6, h->count ? (double)h->sum_ns / (double)h->count / 1e3 : 0.0,
	       hist_quantile(h, 0.50) / 1e3, hist_quantile(h, 0.99) / 1e3, hist_quantile(h, 0.999) / 1e3,
	       (double)h->max_ns / 1e3, b->errors);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct bench *b = calloc(1, sizeof(*b));
	if (!b) {
		fprintf(stderr, "iscsi-load: out of memory\n");
		return 1;
	}
	if (parse_args(argc, argv, &b->o)) {
		free(b);
		return 2;
	}
	int rc = 1;
	if (setup(b) == 0) {
		int broken = run(b);
		report(b);
		if (!broken && iscsi_logout_sync(b->iscsi))
			fprintf(stderr, "iscsi-load: logout failed: %s\n", iscsi_get_error(b->iscsi));
		if (b->errors)
			fprintf(stderr, "iscsi-load: %" PRIu64 " commands failed\n", b->errors);
		rc = broken || b->errors ? 1 : 0;
	}
	if (b->iscsi)
		iscsi_destroy_context(b->iscsi);
	free(b->pool);
	free(b->rbufs);
	free(b);
	return rc;
}
