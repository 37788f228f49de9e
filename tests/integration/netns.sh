# shellcheck shell=bash
# Sourced first, before lib.sh, by a test whose link must queue on the
# sender as on a WAN (816): it runs the test again in a network
# namespace of its own whose TCP buffers hold at most 256K. The host's
# loopback buffers (4M to send, 32M to receive) would hold a whole async
# backlog, so nothing would wait on the primary itself. Skips (77) where
# that cannot be done (not root, no unshare).
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for a network namespace" >&2; exit 77; }
for c in unshare ip sysctl; do
	command -v "$c" >/dev/null || { echo "SKIP: $c is not installed" >&2; exit 77; }
done
if [ -z "${TANDEM_OWN_NETNS:-}" ]; then
	TANDEM_OWN_NETNS=1 exec unshare -n bash "$0" "$@"
fi
ip link set lo up
sysctl -q -w net.ipv4.tcp_wmem="4096 16384 262144" net.ipv4.tcp_rmem="4096 131072 262144" ||
	{ echo "SKIP: cannot size TCP buffers in a namespace" >&2; exit 77; }
