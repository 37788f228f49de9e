#!/usr/bin/env bash
# Up to date means a prefix (SPEC guarantee 9, ASYNC.md A7-A9). a streams
# async to b over an 8 Mbit/s link (2 Mbit/s during the burst) with a 32M backlog (far more than the
# sockets hold, so that most of it waits on a) and a change bitmap of 4K
# regions. One client writes stamped 4K blocks over the first 16M: a burst
# that ends once a went ahead (a live resync then catches b up), then 100
# writes a second, slower than the link, so the stream is still backed up
# when the resync ends. The moment b turns `inconsistent -> uptodate`, the
# link is cut and a killed. b's image must then be a prefix of a's write
# order: nothing newer than a write it lacks.
# Without a witness: b is promoted with --force (813: with the witness,
# which promotes b by itself).
# Before, RS_DONE went out ahead of older stream entries still queued on a,
# and b's image held newer writes beside missing older ones.
# Slow: about 70 s. The burst must overflow a 32M backlog over a 2 Mbit/s
# link and the catch-up must then run while the stream stays backed up, at
# 8 Mbit/s: the window the bug lived in exists only at link speed.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=64M PEER_TIMEOUT=4 REPL_MODE=async
NBLK=4096

PROXY=1 write_config2 "$T/c.ini" "async-backlog = 32M" "bitmap-granularity = 4K"
proxy_start
start_pair
prefix_at_uptodate proxy
wait_for b "p['connection'] != 'connected'" 30
ctl_on b primary vol0 --force >/dev/null || fail "b: primary --force failed"
prefix_check
