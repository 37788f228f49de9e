#!/usr/bin/env bash
# The link proxy the replication tests run on (tests/tools/linkproxy.py):
# its self-test, tests/tools/test-linkproxy.sh (rate, delay and jitter,
# loss, corrupt, capture, backpressure; no tandemd), on ports claimed here.
# Alone (tests/run-integration.sh): it measures rates and round trips.
# tandem-test: serial
# tandem-test: plain-only
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need python3

LINKPROXY_TEST_PORTS="$(free_port) $(free_port)" TMPDIR=$T \
	bash "$_root/tests/tools/test-linkproxy.sh" || fail "link proxy self-test"
