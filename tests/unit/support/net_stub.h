/* A link-time replacement of src/net for the engine unit tests: every
 * function of net.h, with no socket I/O. What a connection sends is recorded
 * (stub_conn.out) and, when two connections are wired, handed to the other
 * one's receive side; a test can also push bytes into a connection as its
 * peer, hold or reset the link, and call a captured listener's on_accept.
 * Never: reads or writes a socket (the fds it is given are only closed). */
#ifndef TANDEM_TESTS_NET_STUB_H
#define TANDEM_TESTS_NET_STUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../../src/ev/ev.h"
#include "../../../src/net/net.h"

/* One connection the engine made with net_conn_init. Kept (with its log)
 * after net_conn_destroy until stub_reset, so a test can read what a closed
 * connection sent. */
struct stub_conn {
	struct net_conn *c;     /* NULL once destroyed */
	struct stub_conn *peer; /* wired: what this one sends, the peer receives */
	int fd;
	bool accepted;    /* made inside stub_accept (else: the engine dialed) */
	char dial_addr[64]; /* dialed: the address ("ip:port"), "" if unknown */
	bool plugged;     /* output stays queued, as behind a full socket */
	bool rx_hold;     /* input waits in `in`, as data still on the wire */
	bool shut;        /* this side shut its socket down (the peer sees EOF) */
	bool broken;      /* stub_break: nothing goes out any more */
	bool closed_seen; /* on_closed ran */
	uint8_t *out;     /* every byte sent, in wire order */
	size_t out_len, out_cap;
	unsigned ntx; /* net_tx items sent */
	uint8_t *in;  /* received, not yet handed to the engine */
	size_t in_len, in_off, in_cap;
	int in_end; /* after `in`: 0 more may come, 1 EOF (FIN), <0 that error */
	struct ev_loop *ev;
	struct ev_deferred deliver, finish;
};

/* Frees every record; call once the engines have destroyed their connections. */
void stub_reset(void);
/* Fault loops: the nth net_send / net_send_bulk from now, of any
 * connection, breaks that connection with err (both ends, delivered from
 * the loop, as a failed send would). stub_send_fault_fired: whether it came. */
void stub_fail_send(unsigned nth, int err);
bool stub_send_fault_fired(void);
/* Frees the records of destroyed connections only (listeners stay): for a
 * long-running user such as a fuzz harness. */
void stub_forget_closed(void);
unsigned stub_nconns(void);
struct stub_conn *stub_conn_at(unsigned i); /* in the order they were made */
struct stub_conn *stub_find(const struct net_conn *c);

/* Calls the on_accept of the open listener on addr with fd (which the
 * engine then owns); the connection it makes is marked `accepted`.
 * 0, or -ENOENT when nothing listens on addr. */
int stub_accept(const char *addr, int fd);
bool stub_listening(const char *addr);

/* From now on a's output goes to b's input and back; output sent before
 * (a dialer's HELLO) is delivered first. */
void stub_wire(struct stub_conn *a, struct stub_conn *b);
/* Dials of addr ("ip:port") are refused while on, as are dials of an
 * address no listener has. */
void stub_refuse(const char *addr, bool on);
/* As the peer: bytes arrive on s (delivered from the loop, as a recv would). */
void stub_push(struct stub_conn *s, const void *buf, size_t len);
/* As the peer: it closed its sending side (FIN after what was pushed). */
void stub_fin(struct stub_conn *s);
void stub_plug(struct stub_conn *s, bool on);    /* off: the queued output goes */
void stub_hold_rx(struct stub_conn *s, bool on); /* off: held input is delivered */
/* The link of s dies: s and its peer both see err (e.g. -ECONNRESET) on their
 * receive side; input not yet delivered and output not yet sent are lost. */
void stub_break(struct stub_conn *s, int err);
/* Every net_tx item that a wired connection sends is handed to fn, as the
 * bytes that just reached its peer `to` (a copy: editing them changes only
 * what `to` receives), before `to` reads them: a peer that sends something
 * else (tests of a misconfigured pair). NULL: none. */
void stub_set_tamper(void (*fn)(struct stub_conn *to, uint8_t *buf, size_t len));
/* net_tx items still queued on s: foreground (bulk false) or background. */
unsigned stub_queued(const struct stub_conn *s, bool bulk);

#endif
