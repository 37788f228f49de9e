#!/usr/bin/env bash
# Installs the Debian packages Tandem needs, only those missing.
#   scripts/deps.sh          build + test packages (make test, make lint, make run)
#   scripts/deps.sh --build  build packages only (make)
#   scripts/deps.sh --bench  build + benchmark packages (bench/nbd.sh, bench/repl.sh,
#                            bench/iscsi.sh)
# As root it runs apt-get; otherwise it names what is missing and fails.
set -euo pipefail
build_pkgs=(gcc make pkg-config liburing-dev libinih-dev libcmocka-dev libssl-dev liblz4-dev libzstd-dev)
test_pkgs=(clang libnbd-bin qemu-utils qemu-block-extra fio nbdkit libiscsi-bin iproute2 python3
	shellcheck cppcheck clang-format e2fsprogs xfsprogs git spin openssl)
# qemu-system-common ships qemu-storage-daemon (the anchor of bench/repl.sh);
# coreutils for timeout(1). libiscsi-dev builds bench/iscsi.sh's load generator;
# tgt (tgtd, tgtadm) is its anchor.
bench_pkgs=(qemu-system-common qemu-utils qemu-block-extra fio nbdkit libnbd-bin iproute2 python3
	coreutils libiscsi-dev tgt)
pkgs=("${build_pkgs[@]}")
case "${1:-}" in
--build) ;;
--bench) pkgs+=("${bench_pkgs[@]}") ;;
*) pkgs+=("${test_pkgs[@]}") ;;
esac
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "missing Debian packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})" >&2
	exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || apt-get update
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
