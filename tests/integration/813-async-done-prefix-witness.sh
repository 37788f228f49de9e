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
# With the witness, which promotes b by itself (812: without, b forced).
# Before, RS_DONE went out ahead of older stream entries still queued on a,
# and b's image held newer writes beside missing older ones.
# Slow: about 70 s, as 812 (the same burst and catch-up over a slow link),
# then the witness's promotion.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
need python3

export VOL_SIZE=64M PEER_TIMEOUT=4 REPL_MODE=async
NBLK=4096

write_config3 "$T/c.ini" "async-backlog = 32M" "bitmap-granularity = 4K"
start_trio
prefix_at_uptodate link ab
prefix_check
kill_witness TERM
