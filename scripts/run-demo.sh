#!/usr/bin/env bash
# `make run`: starts the embedded demo cluster (examples/demo.ini): nodes a and
# b on loopback, volume vol0 replicated synchronously from a to b, and the
# witness. Prints where to connect; Ctrl-C stops all three cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
CFG=examples/demo.ini
BIN=build
pids=()
stop() {
	trap - INT TERM EXIT
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop INT TERM EXIT
mkdir -p /tmp/tandem-demo
# The witness refuses a cluster without a state file unless told it is new
# (--init): the first `make run` is that; a later one finds the file. State
# gone while the nodes hold data is the case --init must not paper over
# (docs/WITNESS.md): the witness then refuses the demo and says so.
winit=()
if [ ! -e /tmp/tandem-demo/w/witness-demo.state ]; then
	if [ -e /tmp/tandem-demo/a ] || [ -e /tmp/tandem-demo/b ]; then
		echo "the witness's state file is gone but the nodes hold data: the witness" \
			"will refuse them (docs/WITNESS.md); rm -rf /tmp/tandem-demo starts over" >&2
	else
		winit=(--init demo)
	fi
fi
"$BIN/tandem-witness" -c "$CFG" "${winit[@]}" -f 2> >(sed -u "s/^/[w] /" >&2) &
pids+=($!)
for n in a b; do
	"$BIN/tandemd" -c "$CFG" -n "$n" -f 2> >(sed -u "s/^/[$n] /" >&2) &
	pids+=($!)
done
for _ in $(seq 100); do
	"$BIN/tandemctl" -c "$CFG" -n a ping >/dev/null 2>&1 &&
		"$BIN/tandemctl" -c "$CFG" -n b ping >/dev/null 2>&1 && break
	sleep 0.1
done
# A node restarts as secondary (its peer may have been promoted meanwhile): on a
# second `make run` with the data of the first, one of them is made primary
# again, a if it can be, else b (which had the newest data then).
primary() {
	"$BIN/tandemctl" -c "$CFG" -n "$1" status vol0 --json 2>/dev/null | grep -q '"role":"primary"'
}
if ! primary a && ! primary b; then
	"$BIN/tandemctl" -c "$CFG" -n a wait-sync vol0 --timeout 10 >/dev/null 2>&1 || true
	"$BIN/tandemctl" -c "$CFG" -n a primary vol0 >/dev/null 2>&1 ||
		"$BIN/tandemctl" -c "$CFG" -n b primary vol0 >/dev/null 2>&1 ||
		echo "neither node could be made primary: see 'tandemctl status'" >&2
fi
cat <<MSG
Tandem demo: volume vol0 (1 GiB) on nodes a (primary) and b (secondary), sync replication,
  a witness on 127.0.0.1:7791
  iSCSI:    iscsi://127.0.0.1:3260/iqn.2026-11.org.tandem:demo.vol0/0   (b: port 3261)
            iscsi-ls -s iscsi://127.0.0.1:3260
  NBD:      nbd://127.0.0.1:10809/vol0          (the primary; b refuses the export)
            nbdinfo nbd://127.0.0.1:10809/vol0
            qemu-img convert -n -O raw disk.img nbd://127.0.0.1:10809/vol0
  status:   $BIN/tandemctl -c $CFG -n a status
  switch:   $BIN/tandemctl -c $CFG -n a switchover vol0     (planned; kill -9 a fails over by itself)
  witness:  $BIN/tandemctl -c $CFG witness-status
  stop:     Ctrl-C
MSG
wait
