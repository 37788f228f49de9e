#!/usr/bin/env bash
# A primary that steps down first makes what its peer acknowledged durable
# there (docs/SPEC.md, "Role changes"): writes that no client flushed leave
# extents in the activity log; `secondary` must return only after a FLUSH on
# both nodes emptied it, so that the new primary never holds acknowledged
# writes only in a volatile cache with nothing recording them. A power loss
# cannot be staged here; the test checks the mechanism: the role changes
# only after a flush pass of the demotion itself emptied a's activity log.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
need python3

export VOL_SIZE=32M
write_config2 "$T/c.ini"
start_pair
# Writes without any flush, spread over many extents.
python3 - "${NBDP[a]}" <<'EOF2' || fail "writing to a failed"
import os, struct, sys
sys.path.insert(0, os.environ["TANDEM_TOOLS"])
import nbdclient
s, size = nbdclient.connect("127.0.0.1", int(sys.argv[1]))
buf = os.urandom(65536)
for i in range(64):
    off = i * (4 << 20) % size + (i % 4) * 65536
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, i, off, len(buf)) + buf)
    magic, err, handle = struct.unpack(">IIQ", nbdclient.recvall(s, 16))
    assert magic == 0x67446698 and err == 0 and handle == i, (magic, err, handle)
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 999, 0, 0))  # DISC, no flush
s.close()
EOF2
ctl_on a secondary vol0 || fail "a: secondary failed"
# In this order: the demotion's own flush pass, the activity log empty, the
# role change (the writes above are too recent for the lazy cleaner).
grep -E "flushing both nodes before the role change|written data is durable on both nodes|role primary -> secondary|flushing before the role change failed" \
	"$T/a.log" >"$T/order"
printf '%s\n' "flushing both nodes before the role change" "written data is durable on both nodes" \
	"role primary -> secondary" >"$T/want"
sed -E 's/^.*volume vol0: //' "$T/order" | diff "$T/want" - >&2 ||
	fail "a did not step down after a flush of both nodes that emptied its activity log"
ctl_on b primary vol0 || fail "b: primary failed"
compare_replicas
stop b
stop a
