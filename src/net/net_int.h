/* Between net.c and tls.c only: the pieces of a connection's queues and
 * receive path that the TLS layer drives. Owners use net.h. */
#ifndef TANDEM_NET_INT_H
#define TANDEM_NET_INT_H

#include "net.h"

/* Background output joins the queue (once the foreground output is out). */
void net_promote_bulk(struct net_conn *c);
/* n bytes of input went straight into the owner's direct destination or
 * the end of the receive buffer: counts them, completes a direct receive
 * that is whole. */
void net_rx_got(struct net_conn *c, size_t n);
/* Makes room at the end of the receive buffer (empty: back to the start;
 * less than a quarter left: the unread part moves to the start). */
void net_rx_make_room(struct net_conn *c);
/* Hands everything buffered to the owner (see net.c). */
void net_rx_parse(struct net_conn *c);
/* The input ended: res 0 a FIN (or TLS close_notify), < 0 the peer is gone. */
void net_rx_ended(struct net_conn *c, int res);

#endif
