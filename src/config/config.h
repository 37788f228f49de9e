/* The cluster configuration: one INI file, the same on every node (SPEC.md).
 * Owns: the parsed, validated, immutable view of that file.
 * Never: opens sockets or data files; cfg_check_local() only checks paths. */
#ifndef TANDEM_CONFIG_H
#define TANDEM_CONFIG_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define CFG_NAME_MAX 64 /* buffer size */
#define CFG_NAME_LEN \
	32 /* longest node, volume or cluster name: keeps disk.NODE
			 * within what the INI library passes through whole */
#define CFG_LINE_MAX 190
#define CFG_KEY_MAX 45
#define CFG_BUSY_POLL_DEFAULT 50 /* microseconds */
#define CFG_DISK_SLOW_MS_DEFAULT 5000 /* a request that slow is sick, not busy */
#define CFG_DISK_SLOW_S_DEFAULT 30
#define CFG_BUSY_POLL_MAX 10000
#define CFG_PATH_MAX 256
#define CFG_ADDR_MAX 96
#define CFG_MAX_NODES 8
#define CFG_MAX_VOLUMES 64
#define CFG_PEER_TIMEOUT_DEFAULT_MS 2000
#define CFG_BITMAP_GRANULARITY_DEFAULT (64u * 1024u)
/* Front-end (iSCSI, NBD) connection limits, [cluster]: per listener, per
 * client address, and the time a handshake / login may take. */
#define CFG_MAX_CONNS_DEFAULT 256
#define CFG_MAX_CONNS_PER_ADDR_DEFAULT 64
#define CFG_MAX_CONNS_LIMIT 65536
#define CFG_HANDSHAKE_TIMEOUT_DEFAULT_MS 10000
/* The witness (docs/WITNESS.md): a session silent this long is dead; a
 * primary without quorum fails held writes and steps down after this. */
#define CFG_WITNESS_TIMEOUT_DEFAULT_MS 2000
#define CFG_QUORUM_TIMEOUT_DEFAULT_MS 30000
#define CFG_WITNESS_DIR_DEFAULT "/var/lib/tandem"

enum cfg_repl { CFG_REPL_SYNC = 0, CFG_REPL_ASYNC };
/* none: O_DIRECT, no page cache (falls back to buffered where the filesystem
 * refuses O_DIRECT, e.g. tmpfs); writeback: through the page cache. Both honour
 * FLUSH and FUA with fdatasync / RWF_DSYNC. */
enum cfg_cache { CFG_CACHE_NONE = 0, CFG_CACHE_WRITEBACK };
/* Compression of replicated data on the link (what this node sends; it takes
 * every codec it knows whatever it sends with). */
enum cfg_compress { CFG_COMPRESS_NONE = 0, CFG_COMPRESS_LZ4, CFG_COMPRESS_ZSTD };

struct cfg_node {
	char name[CFG_NAME_MAX];
	char replication[CFG_ADDR_MAX];
	/* where the other nodes dial this one (NAT, proxies); "" = replication */
	char replication_advertise[CFG_ADDR_MAX];
	/* where this node dials the witness (NAT, proxies); "" = [cluster] witness */
	char witness[CFG_ADDR_MAX];
	char iscsi[CFG_ADDR_MAX];
	char nbd[CFG_ADDR_MAX];
	char metrics[CFG_ADDR_MAX];
	char control[CFG_PATH_MAX];
	char data_dir[CFG_PATH_MAX];
	int line; /* of the section header */
	int control_line, data_dir_line;
	unsigned busy_poll_us; /* event loop polling window; 0 = sleep at once */
	unsigned control_mode; /* the control socket's mode: 0600 (default), 0660, 0666 */
	bool fault_injection;  /* `tandemctl inject` allowed (off by default) */
};

/* iSCSI login authentication (auth, chap-user, chap-secret, chap-mutual-user,
 * chap-mutual-secret): at cluster level for discovery and as every volume's
 * default; a volume's own keys replace the cluster's. */
#define CFG_CHAP_MAX 256
struct cfg_auth {
	bool set;  /* given in this section */
	bool chap; /* auth = chap */
	char user[CFG_CHAP_MAX], secret[CFG_CHAP_MAX];
	char muser[CFG_CHAP_MAX], msecret[CFG_CHAP_MAX]; /* mutual: "" = one-way */
};

struct cfg_volume {
	char name[CFG_NAME_MAX];
	uint64_t size;
	unsigned nnodes;
	unsigned nodes[CFG_MAX_NODES]; /* indexes into cfg.nodes; [0] is the first primary */
	enum cfg_repl replication;
	uint64_t async_backlog;
	uint64_t async_max_lag_ms; /* async: the loss window's bound; 0 = none */
	bool congestion_block;     /* on-congestion = block (default ahead) */
	uint64_t resync_rate; /* bytes/s; 0 = auto */
	uint64_t resync_min_rate; /* bytes/s the resync keeps under any load; 0 = none */
	bool resync_checksum; /* resync compares digests before sending data */
	bool failover_manual; /* failover = manual: never promoted by the witness alone */
	struct cfg_auth auth; /* resolved: the volume's keys, else the cluster's */
	enum cfg_cache cache;
	enum cfg_compress compression; /* resolved: the volume's, else the cluster's */
	bool compression_set;          /* given in [volume] */
	uint64_t bitmap_granularity; /* bytes of data per change-bitmap bit */
	char disk[CFG_MAX_NODES][CFG_PATH_MAX]; /* per cfg.nodes index; "" = data-dir file */
	int disk_line[CFG_MAX_NODES];
	int line;
};

struct cfg {
	char path[CFG_PATH_MAX];
	char cluster[CFG_NAME_MAX];
	char secret[CFG_NAME_MAX * 2];
	char witness[CFG_ADDR_MAX];
	unsigned peer_timeout_ms; /* a silent peer is declared gone after this */
	unsigned max_conns;          /* per front-end listener */
	unsigned max_conns_per_addr; /* per listener and client address */
	unsigned handshake_timeout_ms; /* NBD handshake, iSCSI login */
	unsigned witness_timeout_ms;   /* a silent witness session is dead after this */
	unsigned quorum_timeout_ms;    /* a write held for quorum fails after this */
	/* gray failure: a secondary's disk whose requests stay slower than
	 * disk_slow_ms (more than 1% of them, or none completing) for
	 * disk_slow_s seconds in a row is detached (failed); 0 ms: never */
	unsigned disk_slow_ms, disk_slow_s;
	/* on-io-error: detach (false: a primary whose store fails a request
	 * serves through its up-to-date peer) or pass-on (the error reaches
	 * the client) */
	bool io_error_pass_on;
	/* on-disk-failure: serve (false: a primary whose disk is gone goes on
	 * through its peer) or handover (it hands the primary role to the
	 * peer once the peer can serve) */
	bool disk_failure_handover;
	uint64_t resync_link_rate; /* bytes/s for the resyncs of all volumes to one peer; 0 none */
	char witness_dir[CFG_PATH_MAX]; /* tandem-witness: its state files */
	enum cfg_compress compression;  /* every volume's default */
	/* TLS 1.3 on the replication and witness links: a key derived from the
	 * secret, or certificates when tls_cert is set (then all three are) */
	bool tls;
	char tls_cert[CFG_PATH_MAX], tls_key[CFG_PATH_MAX], tls_ca[CFG_PATH_MAX];
	struct cfg_auth auth;     /* iSCSI: discovery, and the volumes' default */
	unsigned nnodes, nvolumes;
	struct cfg_node nodes[CFG_MAX_NODES];
	struct cfg_volume volumes[CFG_MAX_VOLUMES];
};

/* Parses and validates path. On error returns -EINVAL (or -errno when the file
 * cannot be read) and writes one line naming file, line and key to err. */
int cfg_load(const char *path, struct cfg **out, char *err, size_t errlen);
/* The same on a string (tests, fuzzing); name is used in messages. */
int cfg_parse_string(const char *text, const char *name, struct cfg **out, char *err,
		     size_t errlen);
void cfg_free(struct cfg *cfg); /* NULL is a no-op */
/* True, with why in msg, when cfg holds a secret (the cluster's, a CHAP
 * one) and its file (cfg->path) is readable by every user on this machine:
 * the daemons warn at start. */
bool cfg_secret_exposed(const struct cfg *cfg, char *msg, size_t len);

int cfg_node_index(const struct cfg *cfg, const char *name); /* -1 if absent */
/* True when the volume lives on node index n. */
int cfg_volume_has_node(const struct cfg_volume *v, unsigned n);
/* Checks what node n needs on this machine: its data-dir can be created and
 * written, its control socket's directory exists or can be made, each disk.N
 * path is readable and writable. Creates missing directories. */
int cfg_check_local(const struct cfg *cfg, unsigned n, char *err, size_t errlen);

#endif
