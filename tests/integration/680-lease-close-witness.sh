#!/usr/bin/env bash
# 620's scenario; the witness sees a's session close while a still holds a
# lease from the witness (LEASE_FAULT=close-witness: see 620-lease-stale-read.sh).
TANDEM_TEST_NAME=680-lease-close-witness LEASE_FAULT=close-witness \
	exec bash "$(dirname "$0")/620-lease-stale-read.sh"
