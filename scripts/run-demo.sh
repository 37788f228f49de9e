#!/usr/bin/env bash
# `make run`: starts the embedded demo (examples/demo.ini) in the foreground on
# loopback and prints where to connect. Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
CFG=examples/demo.ini
BIN=build
for c in $(awk -F' *= *' '/^nbd/ {print $2}' "$CFG"); do
	echo "Tandem demo: volume vol0 (1 GiB) on node a"
	echo "  NBD:      nbd://$c/vol0"
	echo "            nbdinfo nbd://$c/vol0"
	echo "            qemu-img convert -n -O raw disk.img nbd://$c/vol0"
	echo "  status:   $BIN/tandemctl -c $CFG -n a status"
	echo "  stop:     Ctrl-C"
done
exec "$BIN/tandemd" -c "$CFG" -n a -f
