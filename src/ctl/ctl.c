/* Control socket server (protocol: include/proto/ctl.h). One request per
 * connection; the reply is built in memory, queued, and the connection is
 * closed once it is sent. */
#include "ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/list.h"
#include "../common/log.h"
#include "../common/util.h"
#include "../net/net.h"
#include "../net/peer.h"
#include "../repl/repl.h"

struct ctl_conn {
	struct net_peer peer; /* socket and life; the reply in flight holds a reference */
	struct ctl_server *srv;
	struct net_tx tx;
	char *out;
	size_t len, cap;
	bool answered, subscriber;
	struct list sub_link; /* in server->subs while it follows `events` */
	size_t ev_queued;     /* event bytes not yet sent */
};

/* One event line on its way to a subscriber. */
struct ctl_evtx {
	struct net_tx tx;
	struct ctl_conn *c;
	size_t len;
	char buf[];
};

#define CTL_EVENTS_MAX_QUEUED (1u << 20) /* a subscriber this far behind is dropped */

struct ctl_server {
	struct ev_loop *ev;
	struct net_srv srv;
	struct ctl_info info;
	char path[256];
	struct list subs;
};

/* A local client that connects and says nothing holds a descriptor until
 * CTL_HS_TIMEOUT_NS; at most CTL_MAX_CONNS are open at once, so a runaway
 * script cannot take the descriptors the volumes need. */
#define CTL_MAX_CONNS 128
#define CTL_HS_TIMEOUT_NS (10ull * 1000000000ull)

int ctl_parse_line(char *buf, char *argv[CTL_MAX_ARGS])
{
	int n = 0;
	char *p = buf;

	for (char *q = buf; *q; q++)
		if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
			return -EINVAL;
	while (*p) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		if (n == CTL_MAX_ARGS)
			return -EINVAL;
		argv[n++] = p;
		while (*p && *p != ' ')
			p++;
		if (*p)
			*p++ = '\0';
	}
	return n ? n : -EINVAL;
}

/* ---- output ---- */

static void out_add(struct ctl_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_add(struct ctl_conn *c, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(c->out + c->len, c->cap - c->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < c->cap - c->len) {
			c->len += (size_t)n;
			return;
		}
		char *o = realloc(c->out, c->cap * 2 + (size_t)n);
		if (!o)
			return;
		c->out = o;
		c->cap = c->cap * 2 + (size_t)n;
	}
}

static void json_str(char *out, size_t cap, const char *s)
{
	/* names are restricted to [A-Za-z0-9._-], so no escaping is needed; be safe */
	size_t j = 0;
	for (; *s && j + 1 < cap; s++)
		if (*s != '"' && *s != '\\' && (unsigned char)*s >= 0x20)
			out[j++] = *s;
	out[j] = '\0';
}

/* One event line: {"time":...,"node":...,FRAGMENT} and a newline (cut to
 * fit len); returns the length snprintf wanted. */
static int event_line(const struct ctl_server *s, char *buf, size_t len, const char *frag)
{
	struct timespec ts;
	char node[CFG_NAME_MAX];

	clock_gettime(CLOCK_REALTIME, &ts);
	json_str(node, sizeof(node), s->info.node);
	return snprintf(buf, len, "{\"time\":%lld.%03ld,\"node\":\"%s\",%s}\n",
			(long long)ts.tv_sec, ts.tv_nsec / 1000000, node, frag);
}

/* A JSON value: "2026-12-05T02:10:00.123Z" (UTC), or null for 0. */
static void fmt_time(char *out, size_t cap, uint64_t ns)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;

	if (!ns || !gmtime_r(&t, &tm)) {
		snprintf(out, cap, "null");
		return;
	}
	snprintf(out, cap, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03uZ\"", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(ns % 1000000000ull / 1000000ull));
}

static double pct(double p)
{
	return p < 0 ? 0 : p > 100 ? 100 : p;
}

size_t ctl_status_json(const struct ctl_info *info, const char *only, char *out, size_t cap)
{
	size_t n = 0;
	char a[CFG_NAME_MAX], b[CFG_NAME_MAX];
	bool first = true;

#define PUT(...)                                                            \
	do {                                                                \
		int k_ = snprintf(out + n, n < cap ? cap - n : 0, __VA_ARGS__); \
		if (k_ > 0)                                                 \
			n += (size_t)k_;                                    \
	} while (0)
	json_str(a, sizeof(a), info->node);
	json_str(b, sizeof(b), info->cluster);
	PUT("{\"node\":\"%s\",\"cluster\":\"%s\",\"volumes\":[", a, b);
	for (unsigned i = 0; i < info->nvols; i++) {
		const struct vol *v = info->vols[i];
		if (only && strcmp(only, v->name))
			continue;
		json_str(a, sizeof(a), v->name);
		{
			struct repl_status q;
			memset(&q, 0, sizeof(q));
			q.quorum = -1;
			q.witness_primary = "";
			if (v->repl)
				repl_get_status(v->repl, &q);
			json_str(b, sizeof(b), q.witness_primary);
			PUT("%s{\"name\":\"%s\",\"size\":%llu,\"role\":\"%s\",\"disk\":\"%s\","
			    "\"quorum\":%s,\"lease\":%s,",
			    first ? "" : ",", a, (unsigned long long)v->size,
			    vol_role_name(v->role), vol_disk_name(v->disk),
			    q.quorum == 0 ? "false" : "true",
			    v->role == VOL_PRIMARY && vol_lease_ok(v) ? "true" : "false");
			if (v->disk_error.err) {
				char t[48];
				const char *en = strerrorname_np(v->disk_error.err);
				fmt_time(t, sizeof(t), v->disk_error.at_ns);
				PUT("\"disk_error\":{\"error\":\"%s\",\"message\":\"%s\","
				    "\"op\":\"%s\",\"time\":%s},",
				    en ? en : "?", strerror(v->disk_error.err), v->disk_error.op,
				    t);
			} else {
				PUT("\"disk_error\":null,");
			}
			if (q.quorum >= 0)
				PUT("\"witness\":{\"session\":%s,\"primary\":\"%s\","
				    "\"held_writes\":%u},",
				    q.witness_session ? "true" : "false", b, q.held_writes);
			if (v->repl) {
				char t[48], path[sizeof(v->data_path) * 2 + 32], note[420];
				fmt_time(t, sizeof(t), q.cp_have ? q.cp_time_ns : 0);
				json_str(path, sizeof(path), v->data_path);
				json_str(note, sizeof(note), q.cp_note ? q.cp_note : "");
				if (q.cp_have)
					PUT("\"consistent_copy\":{\"path\":\"%s.consistent\","
					    "\"time\":%s},",
					    path, t);
				else
					PUT("\"consistent_copy\":null,");
				if (note[0])
					PUT("\"consistent_copy_note\":\"%s\",", note);
			}
			PUT("\"peers\":[");
		}
		if (v->repl) {
			struct repl_status st;
			char e[256], cp[48], eta[32];
			repl_get_status(v->repl, &st);
			fmt_time(cp, sizeof(cp), st.consistent_point_ns);
			if (st.eta_seconds < 0)
				snprintf(eta, sizeof(eta), "null");
			else
				snprintf(eta, sizeof(eta), "%.1f", st.eta_seconds);
			json_str(b, sizeof(b), st.peer);
			json_str(e, sizeof(e), st.error);
			PUT("{\"node\":\"%s\",\"connection\":\"%s\",\"replication\":\"%s\","
			    "\"disk\":\"%s\",\"role\":\"%s\",\"out_of_sync_bytes\":%llu,"
			    "\"sync_percent\":%.1f,\"resync_bytes_per_sec\":%llu,"
			    "\"mode\":\"%s\",\"congestion\":\"%s\","
			    "\"backlog_bytes\":%llu,\"backlog_reserved_bytes\":%llu,"
			    "\"backlog_resident_bytes\":%llu,"
			    "\"lag_seconds\":%.3f,\"lag_bytes\":%llu,"
			    "\"consistent_point\":%s,\"eta_seconds\":%s,\"split_brain\":%s,"
			    "\"error\":\"%s\",\"generation\":\"%016llx\","
			    "\"bitmap_generation\":\"%016llx\","
			    "\"resync_window_bytes\":%llu,\"resync_request_bytes\":%llu,"
			    "\"resync_sent_bytes\":%llu,\"resync_zero_bytes\":%llu,"
			    "\"resync_same_bytes\":%llu,\"verify\":{\"state\":\"%s\","
			    "\"percent\":%.1f,\"mismatch_ranges\":%llu,\"mismatch_bytes\":%llu},"
			    "\"link\":{\"wire_bytes\":%llu,\"data_bytes\":%llu,\"zero_bytes\":%llu,"
			    "\"send_bytes_per_sec\":%llu,\"rtt_ms\":%.3f,\"compression\":\"%s\","
			    "\"compressed_in_bytes\":%llu,\"compressed_out_bytes\":%llu,"
			    "\"compress_skipped_bytes\":%llu,\"compress_cpu_ms\":%.3f,"
			    "\"decompressed_bytes\":%llu,\"decompress_cpu_ms\":%.3f,\"tls\":\"%s\"}"
			    "}",
			    b, repl_conn_name(st.conn),
			    st.behind ? "behind" : repl_rep_name(st.rep),
			    st.peer_disk < 0 ? "unknown"
					     : vol_disk_name((enum vol_disk)st.peer_disk),
			    st.peer_role < 0 ? "unknown"
					     : vol_role_name((enum vol_role)st.peer_role),
			    (unsigned long long)st.out_of_sync_bytes, pct(st.sync_percent),
			    (unsigned long long)st.resync_bytes_per_sec,
			    st.async ? "async" : "sync",
			    st.ahead     ? "ahead"
			    : st.blocked ? "blocked"
					 : "none",
			    (unsigned long long)st.backlog_bytes,
			    (unsigned long long)st.backlog_reserved,
			    (unsigned long long)st.backlog_resident, st.lag_seconds,
			    (unsigned long long)st.lag_bytes, cp, eta,
			    st.split_brain ? "true" : "false", e,
			    (unsigned long long)st.gen_current, (unsigned long long)st.gen_bitmap,
			    (unsigned long long)st.resync_window_bytes,
			    (unsigned long long)st.resync_request_bytes,
			    (unsigned long long)st.resync_sent_bytes,
			    (unsigned long long)st.resync_zero_bytes,
			    (unsigned long long)st.resync_same_bytes, st.verify,
			    pct(st.verify_percent), (unsigned long long)st.verify_mismatch_ranges,
			    (unsigned long long)st.verify_mismatch_bytes,
			    (unsigned long long)st.link_wire_bytes,
			    (unsigned long long)st.link_data_bytes,
			    (unsigned long long)st.link_zero_bytes,
			    (unsigned long long)st.link_send_bytes_per_sec, st.link_rtt_ms,
			    st.link_compression ? st.link_compression : "none",
			    (unsigned long long)st.link_compressed_in_bytes,
			    (unsigned long long)st.link_compressed_out_bytes,
			    (unsigned long long)st.link_compress_skipped_bytes,
			    st.link_compress_cpu_ms, (unsigned long long)st.link_decompressed_bytes,
			    st.link_decompress_cpu_ms, st.link_tls);
		}
		PUT("]}");
		first = false;
	}
	PUT("]}\n");
#undef PUT
	return n < cap ? n : cap;
}

size_t ctl_status_text(const struct ctl_info *info, const char *only, char *out, size_t cap)
{
	size_t n = 0;
	int k;

	k = snprintf(out, cap, "node %s, cluster %s\n%-16s %8s  %-9s  %-12s  %s\n", info->node,
		     info->cluster, "VOLUME", "SIZE", "ROLE", "DISK", "PEERS");
	if (k > 0)
		n += (size_t)k;
	for (unsigned i = 0; i < info->nvols && n < cap; i++) {
		const struct vol *v = info->vols[i];
		char sz[32], peers[512] = "-";
		if (only && strcmp(only, v->name))
			continue;
		format_size(v->size, sz, sizeof(sz));
		if (v->repl) {
			struct repl_status st;
			char oos[32];
			repl_get_status(v->repl, &st);
			format_size(st.out_of_sync_bytes, oos, sizeof(oos));
			snprintf(peers, sizeof(peers), "%s %s %s %s%s%s%s%s%s", st.peer,
				 repl_conn_name(st.conn), repl_rep_name(st.rep),
				 st.peer_disk < 0 ? "unknown" :
						    vol_disk_name((enum vol_disk)st.peer_disk),
				 st.out_of_sync_bytes ? ", out of sync " : "",
				 st.out_of_sync_bytes ? oos : "",
				 st.split_brain ? ", SPLIT BRAIN" : "", st.error[0] ? ": " : "",
				 st.error);
		}
		k = snprintf(out + n, cap - n, "%-16s %8s  %-9s  %-12s  %s\n", v->name, sz,
			     vol_role_name(v->role), vol_disk_name(v->disk), peers);
		if (k > 0)
			n += (size_t)k;
	}
	return n < cap ? n : cap;
}

static struct vol *find(struct ctl_server *s, const char *name)
{
	for (unsigned i = 0; i < s->info.nvols; i++)
		if (strcmp(s->info.vols[i]->name, name) == 0)
			return s->info.vols[i];
	return NULL;
}

static void render(struct ctl_conn *c, size_t (*fn)(const struct ctl_info *, const char *,
						    char *, size_t),
		   const char *only)
{
	for (;;) {
		size_t room = c->cap - c->len;
		size_t n = fn(&c->srv->info, only, c->out + c->len, room);
		if (n < room - 1) {
			c->len += n;
			return;
		}
		char *o = realloc(c->out, c->cap * 2);
		if (!o)
			return;
		c->out = o;
		c->cap *= 2;
	}
}

/* inject VOLUME read|write|flush|trim|zero|crash|slow ... (fault-injection =
 * on only): make this node's store fail, crash or slow down, for tests. */
static void cmd_inject(struct ctl_server *s, struct ctl_conn *c, int argc, char **argv)
{
	struct vol *v = find(s, argv[1]);
	char msg[256] = "";
	unsigned after = 0, ms = 0;
	unsigned long long seed = 1;
	int kind = BS_CRASH_ANY;
	int err = EIO, r;
	bool once = false;
	if (!v) {
		out_add(c, "error no volume named '%s' on node %s\n", argv[1], s->info.node);
		return;
	}
	if (!s->info.faults) {
		out_add(c,
			"error fault injection is off on node %s (fault-injection = on "
			"in its [node] section)\n",
			s->info.node);
		return;
	}
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--once") == 0) {
			once = true;
		} else if (strcmp(argv[i], "--after") == 0 && i + 1 < argc) {
			after = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
			ms = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--at") == 0 && i + 1 < argc) {
			i++;
			kind = !strcmp(argv[i], "write")   ? BS_CRASH_WRITE
			       : !strcmp(argv[i], "flush") ? BS_CRASH_FLUSH
			       : !strcmp(argv[i], "meta")  ? BS_CRASH_META
			       : !strcmp(argv[i], "any")   ? BS_CRASH_ANY
							   : -1;
			if (kind < 0) {
				out_add(c, "error --at is write, flush, meta or any\n");
				return;
			}
		} else if (strcmp(argv[i], "--errno") == 0 && i + 1 < argc) {
			i++;
			err = !strcmp(argv[i], "EIO")      ? EIO
			      : !strcmp(argv[i], "ENOSPC") ? ENOSPC
							   : 0;
			if (!err) {
				out_add(c, "error --errno is EIO or ENOSPC\n");
				return;
			}
		} else {
			out_add(c, "error usage: inject VOLUME read|write|flush|trim|zero "
				   "[--after N] [--errno EIO|ENOSPC] [--once], or inject "
				   "VOLUME crash [--after N] [--seed S] [--at "
				   "write|flush|meta|any], or inject VOLUME slow --ms N\n");
			return;
		}
	}
	if (strcmp(argv[2], "crash") == 0)
		r = vol_inject_crash(v, kind, after, seed, msg, sizeof(msg));
	else if (strcmp(argv[2], "slow") == 0)
		r = vol_inject_slow(v, ms, msg, sizeof(msg));
	else
		r = vol_inject(v, argv[2], after, err, once, msg, sizeof(msg));
	if (r)
		out_add(c, "error %s\n", msg);
	else
		out_add(c, "ok\n");
}

static void run_command(struct ctl_conn *c, int argc, char **argv)
{
	struct ctl_server *s = c->srv;
	const char *cmd = argv[0];

	if (strcmp(cmd, "ping") == 0 && argc == 1) {
		out_add(c, "ok\n");
	} else if (strcmp(cmd, "status") == 0 && argc <= 3) {
		const char *only = NULL;
		bool json = false;
		for (int i = 1; i < argc; i++) {
			if (strcmp(argv[i], "--json") == 0)
				json = true;
			else if (!only)
				only = argv[i];
			else {
				out_add(c, "error usage: status [VOLUME] [--json]\n");
				return;
			}
		}
		if (only && !find(s, only)) {
			out_add(c, "error no volume named '%s' on node %s\n", only, s->info.node);
			return;
		}
		out_add(c, "ok\n");
		render(c, json ? ctl_status_json : ctl_status_text, only);
	} else if (strcmp(cmd, "wait-sync") == 0 && argc == 2) {
		struct vol *v = find(s, argv[1]);
		char msg[256];
		int r;
		if (!v) {
			out_add(c, "error no volume named '%s' on node %s\n", argv[1], s->info.node);
			return;
		}
		if (v->repl) {
			r = repl_in_sync(v->repl, msg, sizeof(msg));
			if (r > 0)
				out_add(c, "ok\n");
			else if (r == 0)
				out_add(c, "wait %s\n", msg);
			else
				out_add(c, "error %s\n", msg);
			return;
		}
		/* A volume on one node is in sync whenever its disk is up to date. */
		if (v->disk == VOL_UPTODATE)
			out_add(c, "ok\n");
		else if (v->disk == VOL_FAILED || v->disk == VOL_DISKLESS)
			out_add(c, "error volume %s is %s\n", v->name, vol_disk_name(v->disk));
		else
			out_add(c, "wait volume %s is %s\n", v->name, vol_disk_name(v->disk));
	} else if (strcmp(cmd, "switchover") == 0 && (argc == 2 || argc == 3)) {
		struct vol *v = find(s, argv[1]);
		char msg[256] = "";
		int r;
		if (!v) {
			out_add(c, "error no volume named '%s' on node %s\n", argv[1],
				s->info.node);
			return;
		}
		if (!v->repl) {
			out_add(c, "error volume %s lives on this node only (no replication)\n",
				v->name);
			return;
		}
		r = repl_switchover(v->repl, argc == 3 ? argv[2] : NULL, msg, sizeof(msg));
		if (r == 0)
			out_add(c, "ok\n");
		else if (r == -EAGAIN)
			out_add(c, "wait volume %s: %s\n", v->name, msg[0] ? msg : "under way");
		else
			out_add(c, "error %s\n", msg[0] ? msg : strerror(-r));
	} else if ((strcmp(cmd, "primary") == 0 &&
		    (argc == 2 || (argc == 3 && strcmp(argv[2], "--force") == 0))) ||
		   (argc == 2 && (strcmp(cmd, "secondary") == 0 || strcmp(cmd, "connect") == 0 ||
				  strcmp(cmd, "disconnect") == 0 || strcmp(cmd, "verify") == 0 ||
				  strcmp(cmd, "invalidate") == 0))) {
		struct vol *v = find(s, argv[1]);
		char msg[256] = "";
		int r;
		if (!v) {
			out_add(c, "error no volume named '%s' on node %s\n", argv[1], s->info.node);
			return;
		}
		if (!v->repl) {
			out_add(c, "error volume %s lives on this node only (no replication)\n",
				v->name);
			return;
		}
		if (cmd[0] == 'p')
			r = repl_promote(v->repl, argc == 3, msg, sizeof(msg));
		else if (cmd[0] == 's')
			r = repl_demote(v->repl, msg, sizeof(msg));
		else if (cmd[0] == 'c')
			r = repl_connect(v->repl, msg, sizeof(msg));
		else if (cmd[0] == 'd')
			r = repl_disconnect(v->repl, msg, sizeof(msg));
		else if (cmd[0] == 'v')
			r = repl_verify(v->repl, msg, sizeof(msg));
		else
			r = repl_invalidate(v->repl, msg, sizeof(msg));
		if (r == 0)
			out_add(c, "ok\n");
		else if (r == -EAGAIN)
			out_add(c, "wait volume %s: %s\n", v->name,
				msg[0] ? msg :
				cmd[0] == 's' ? "in-flight writes or the peer's acknowledgement" :
						"not yet");
		else
			out_add(c, "error %s\n", msg[0] ? msg : strerror(-r));
	} else if (strcmp(cmd, "attach") == 0 &&
		   (argc == 2 || (argc == 4 && strcmp(argv[2], "--disk") == 0))) {
		struct vol *v = find(s, argv[1]);
		char msg[512] = "";
		int r;
		if (!v || !v->repl) {
			out_add(c, "error no replicated volume named '%s' on node %s\n", argv[1],
				s->info.node);
			return;
		}
		r = repl_attach(v->repl, argc == 4 ? argv[3] : NULL, msg, sizeof(msg));
		if (r == 0)
			out_add(c, "ok\n");
		else if (r == -EAGAIN)
			out_add(c, "wait %s\n", msg);
		else
			out_add(c, "error %s\n", msg[0] ? msg : strerror(-r));
	} else if (strcmp(cmd, "inject") == 0 && argc >= 3) {
		cmd_inject(s, c, argc, argv);
	} else if (strcmp(cmd, "set") == 0 && argc >= 3) {
		struct vol *v = find(s, argv[1]);
		char msg[256] = "";
		if (!v || !v->repl) {
			out_add(c, "error no replicated volume named '%s' on node %s\n", argv[1],
				s->info.node);
			return;
		}
		for (int i = 2; i < argc; i++) {
			char *eq = strchr(argv[i], '=');
			if (!eq) {
				out_add(c, "error usage: set VOLUME KEY=VALUE...\n");
				return;
			}
			*eq = 0;
			if (repl_set(v->repl, argv[i], eq + 1, msg, sizeof(msg))) {
				out_add(c, "error %s\n", msg);
				return;
			}
		}
		out_add(c, "ok\n");
	} else if (strcmp(cmd, "events") == 0 && argc == 1) {
		char line[128];
		/* The first line says the subscription is live: every event
		 * after it reaches this client. */
		event_line(c->srv, line, sizeof(line), "\"event\":\"subscribed\"");
		out_add(c, "ok\n%s", line);
		c->subscriber = true;
	} else {
		out_add(c, "error unknown command or wrong arguments: '%s'\n", cmd);
	}
}

static void reply_done(struct net_tx *tx, int err)
{
	struct ctl_conn *c = container_of(tx, struct ctl_conn, tx);
	(void)err;
	net_peer_unref(&c->peer);
}

static void on_rx(struct net_conn *nc)
{
	struct ctl_conn *c = container_of(nc, struct ctl_conn, peer.net);
	const uint8_t *p = net_rx_peek(nc);
	size_t avail = net_rx_avail(nc);
	const uint8_t *nl;
	char line[CTL_MAX_LINE];
	char *argv[CTL_MAX_ARGS];
	int argc;

	if (c->answered) {
		net_rx_consume(nc, avail);
		return;
	}
	nl = memchr(p, '\n', avail);
	if (!nl) {
		if (avail >= CTL_MAX_LINE) {
			out_add(c, "error request line too long\n");
			goto send;
		}
		return;
	}
	if ((size_t)(nl - p) >= sizeof(line)) {
		out_add(c, "error request line too long\n");
		goto send;
	}
	memcpy(line, p, (size_t)(nl - p));
	line[nl - p] = '\0';
	argc = ctl_parse_line(line, argv);
	if (argc < 0)
		out_add(c, "error malformed request\n");
	else
		run_command(c, argc, argv);
send:
	net_rx_consume(nc, avail);
	c->answered = true;
	c->tx.iov[0].iov_base = c->out;
	c->tx.iov[0].iov_len = c->len;
	c->tx.iovcnt = 1;
	c->tx.done = reply_done;
	net_peer_ref(&c->peer);
	net_peer_hs_done(&c->peer);
	net_send(nc, &c->tx);
	if (c->subscriber) {
		list_add_tail(&c->srv->subs, &c->sub_link);
		return; /* stays open: one line per event until the client leaves */
	}
	net_close(nc);
}

static void evtx_done(struct net_tx *tx, int err)
{
	struct ctl_evtx *e = container_of(tx, struct ctl_evtx, tx);
	(void)err;
	e->c->ev_queued -= e->len;
	free(e);
}

/* vol_event sink: {"time":...,"node":...,FRAGMENT} to every subscriber. */
static void emit(void *ctx, const char *frag)
{
	struct ctl_server *s = ctx;
	struct list *pos, *tmp;
	char line[640];
	int n = event_line(s, line, sizeof(line), frag);

	list_for_each_safe(pos, tmp, &s->subs) {
		struct ctl_conn *c = container_of(pos, struct ctl_conn, sub_link);
		struct ctl_evtx *e;
		if (c->peer.net.closing)
			continue;
		if (c->ev_queued > CTL_EVENTS_MAX_QUEUED) {
			list_del(&c->sub_link);
			net_abort(&c->peer.net);
			continue;
		}
		e = malloc(sizeof(*e) + sizeof(line));
		if (!e)
			continue;
		e->len = (size_t)MIN(n, (int)sizeof(line) - 1);
		memcpy(e->buf, line, e->len);
		e->c = c;
		e->tx.iov[0].iov_base = e->buf;
		e->tx.iov[0].iov_len = e->len;
		e->tx.iovcnt = 1;
		e->tx.done = evtx_done;
		c->ev_queued += e->len;
		net_send(&c->peer.net, &e->tx);
	}
}

static void conn_release(struct net_peer *p)
{
	struct ctl_conn *c = container_of(p, struct ctl_conn, peer);

	list_del(&c->sub_link);
	free(c->out);
	free(c);
}

static void conn_kill(struct net_peer *p, const char *why)
{
	if (why)
		log_info("control: closing a connection: %s", why);
	net_close(&p->net);
}

static const struct net_peer_ops ctl_peer_ops = { .release = conn_release, .kill = conn_kill };

static void on_closed(struct net_conn *nc)
{
	net_peer_closed(&container_of(nc, struct ctl_conn, peer.net)->peer);
}

static const struct net_conn_ops ctl_net_ops = { .on_rx = on_rx, .on_closed = on_closed };

static void on_accept(struct net_srv *ns, int fd, const char *host)
{
	struct ctl_server *s = container_of(ns, struct ctl_server, srv);
	struct ctl_conn *c = calloc(1, sizeof(*c));

	if (!c || !(c->out = malloc(4096))) {
		free(c);
		close(fd);
		return;
	}
	c->cap = 4096;
	c->srv = s;
	list_init(&c->sub_link);
	if (net_peer_open(&c->peer, s->ev, ns, fd, host, CTL_MAX_LINE + 1, &ctl_net_ops,
			  &ctl_peer_ops)) {
		free(c->out);
		free(c);
	}
}

int ctl_server_new(struct ev_loop *ev, const char *path, const struct ctl_info *info,
		   struct ctl_server **out)
{
	struct ctl_server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->ev = ev;
	list_init(&s->subs);
	s->info = *info;
	for (unsigned i = 0; i < info->nvols; i++) {
		info->vols[i]->event_fn = emit;
		info->vols[i]->event_ctx = s;
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->srv.name = "control";
	s->srv.max = CTL_MAX_CONNS;
	s->srv.hs_timeout_ns = CTL_HS_TIMEOUT_NS;
	s->srv.may_use_reserve = true;
	s->srv.on_accept = on_accept;
	r = net_srv_listen_unix(&s->srv, ev, path);
	if (r) {
		free(s);
		return r;
	}
	*out = s;
	return 0;
}

void ctl_server_shutdown(struct ctl_server *s)
{
	struct stat st;

	net_srv_shutdown(&s->srv);
	for (unsigned i = 0; i < s->info.nvols; i++)
		s->info.vols[i]->event_fn = NULL;
	if (lstat(s->path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(s->path);
}

unsigned ctl_server_conns(const struct ctl_server *s)
{
	return s->srv.npeers;
}

void ctl_server_free(struct ctl_server *s)
{
	free(s);
}
