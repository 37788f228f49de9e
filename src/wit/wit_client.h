/* A node's session with tandem-witness, shared by all its volumes
 * (docs/WITNESS.md). It dials [cluster] witness, proves the secret and
 * checks the witness's proof, pings every witness-timeout / 4, and declares
 * the session dead after witness-timeout of silence (then dials again).
 *
 * Session states:
 *   down -> dialing -> hello -> auth -> up -> down   [silence, reset, ERROR]
 * Invariants:
 *   WC1. Volumes hear `session(up)` only once the witness proved the secret,
 *        and `session(down)` before anything else once it is gone.
 *   WC2. A verdict reaches the volume that sent the message (by name); the
 *        volume matches it to what it sent by seq.
 * Never: decides anything about roles (src/repl does); keeps messages
 * across sessions (volumes send their report again on `session(up)`). */
#ifndef TANDEM_WIT_CLIENT_H
#define TANDEM_WIT_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "../../include/proto/witness.h"
#include "../config/config.h"
#include "../ev/ev.h"

struct wit_client;

struct wit_vol_ops {
	void (*session)(void *ctx, bool up);
	/* REPORT_ACK or CLAIM_REPLY for this volume */
	void (*verdict)(void *ctx, uint16_t type, const struct wit_verdict *v);
};

int wit_client_new(struct ev_loop *ev, const struct cfg *cfg, unsigned self,
		   struct wit_client **out);
/* Registers a volume; returns its handle (index) or -errno. */
int wit_client_attach(struct wit_client *wc, const char *volume, const struct wit_vol_ops *ops,
		      void *ctx);
/* Before wit_client_start: the session speaks TLS (net/tls.h); the caller
 * keeps tls until after wit_client_free. */
struct net_tls_ctx;
void wit_client_use_tls(struct wit_client *wc, struct net_tls_ctx *tls);
void wit_client_start(struct wit_client *wc);
bool wit_client_up(const struct wit_client *wc);
/* Sends REPORT or CLAIM for a volume now: false when the session is not up
 * (nothing is queued). */
bool wit_client_send(struct wit_client *wc, uint16_t type, const struct wit_vol_msg *m);
/* The lease anchor (docs/WITNESS.md L2): when the newest PING answered on
 * this session was sent (CLOCK_BOOTTIME ns), 0 none or no session. */
uint64_t wit_client_anchor(const struct wit_client *wc);
/* A PING now (a fresh anchor one round trip later). */
void wit_client_ping(struct wit_client *wc);
void wit_client_shutdown(struct wit_client *wc);
/* After shutdown: no connection or dial is left (then it may be freed). */
bool wit_client_idle(const struct wit_client *wc);
void wit_client_free(struct wit_client *wc); /* NULL is a no-op; only when idle */

#endif
