#!/usr/bin/env bash
# nbdinfo sees what the NBD front-end advertises: export name and size, the
# transmission flags, base:allocation, block size limits, LIST, the default
# (empty) export name, and a refusal of unknown names.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need nbdinfo python3

# An odd size (64M + 4K) so that a size taken from the wrong place shows.
export VOL_SIZE=65540K
SIZE=$((64 * 1024 * 1024 + 4096))
write_config "$T/c.ini"
start_node

nbdinfo --json "$NBD_URI" >"$T/info.json" || fail "nbdinfo $NBD_URI failed"
python3 - "$T/info.json" "$SIZE" <<'EOF' || fail "nbdinfo output for vol0 is wrong (see above)"
import json, sys
d = json.load(open(sys.argv[1]))
size = int(sys.argv[2])
bad = []
ex = d["exports"]
if len(ex) != 1:
    bad.append("expected one export, got %d" % len(ex))
e = ex[0]
def want(k, v):
    if e.get(k) != v:
        bad.append("%s = %r, expected %r" % (k, e.get(k), v))
want("export-name", "vol0")
want("export-size", size)
want("is_read_only", False)
for k in ("can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn"):
    want(k, True)
if "base:allocation" not in e.get("contexts", []):
    bad.append("no base:allocation context: %r" % e.get("contexts"))
if e.get("block_size_minimum") not in (1, 512):
    bad.append("block_size_minimum = %r" % e.get("block_size_minimum"))
want("block_size_maximum", 33554432)
if d.get("protocol") != "newstyle-fixed":
    bad.append("protocol = %r" % d.get("protocol"))
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

# LIST must name vol0.
nbdinfo --list --json "nbd://127.0.0.1:$NBD_PORT" >"$T/list.json" || fail "nbdinfo --list failed"
python3 - "$T/list.json" <<'EOF' || fail "nbdinfo --list does not list vol0: $(cat "$T/list.json")"
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if any(e.get("export-name") == "vol0" for e in d["exports"]) else 1)
EOF

# The empty export name is the default export, i.e. vol0 with its size.
got=$(nbdinfo --size "nbd://127.0.0.1:$NBD_PORT/") || fail "default export name refused"
[ "$got" = "$SIZE" ] || fail "default export has size $got, expected $SIZE"

# An unknown name is refused, not silently mapped to some volume.
if nbdinfo "nbd://127.0.0.1:$NBD_PORT/no-such-volume" >/dev/null 2>"$T/err"; then
	fail "nbdinfo accepted export no-such-volume"
fi

# base:allocation answers: a fresh volume reads as zero; after a write the
# written range is reported as data (not hole, not zero).
qemu_ok=0
command -v qemu-io >/dev/null && qemu_ok=1
nbdinfo --map --json "$NBD_URI" >"$T/map0.json" || fail "nbdinfo --map failed"
python3 - "$T/map0.json" "$SIZE" <<'EOF' || fail "map of a fresh volume is wrong: $(cat "$T/map0.json")"
import json, sys
m = json.load(open(sys.argv[1]))
size = int(sys.argv[2])
end = 0
for x in m:
    if x["offset"] != end or not (x["type"] & 2):
        sys.exit(1)
    end += x["length"]
sys.exit(0 if end == size else 1)
EOF
if [ "$qemu_ok" = 1 ]; then
	qemu-io -f raw "$NBD_URI" -c "write -P 0x42 1M 1M" >/dev/null || fail "qemu-io write failed"
	nbdinfo --map --json "$NBD_URI" >"$T/map1.json" || fail "nbdinfo --map failed"
	python3 - "$T/map1.json" <<'EOF' || fail "written 1M..2M is not reported as data: $(cat "$T/map1.json")"
import json, sys
m = json.load(open(sys.argv[1]))
lo, hi = 1 << 20, 2 << 20
ok = any(x["offset"] <= lo and x["offset"] + x["length"] >= hi and x["type"] == 0 for x in m)
sys.exit(0 if ok else 1)
EOF
fi

stop_node
