/* The control protocol between tandemctl and tandemd, over a Unix stream
 * socket (the node's `control` path, mode 0600).
 *
 * Request: one line of printable ASCII words separated by single spaces,
 *          ending in "\n", at most CTL_MAX_LINE bytes including the newline.
 * Reply:   a first line "ok", "error MESSAGE", or "wait MESSAGE" (a condition
 *          the command waits for does not hold yet: wait-sync retries on it
 *          and on nothing else), then the command's output;
 *          the daemon closes the connection when the reply is complete
 *          (`events` keeps it open and writes one JSON object per line).
 * Text, not binary: it is for admins and scripts and carries no data path.
 */
#ifndef TANDEM_PROTO_CTL_H
#define TANDEM_PROTO_CTL_H

#define CTL_MAX_LINE 1024
#define CTL_MAX_ARGS 16
#define CTL_REPLY_OK "ok"
#define CTL_REPLY_ERROR "error"
#define CTL_REPLY_WAIT "wait"

#endif
