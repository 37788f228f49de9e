#!/usr/bin/env bash
# 620's scenario; b sees its connection to a close while a still holds a
# lease from b's answers (LEASE_FAULT=close-peer: see 620-lease-stale-read.sh).
TANDEM_TEST_NAME=670-lease-close-peer LEASE_FAULT=close-peer \
	exec bash "$(dirname "$0")/620-lease-stale-read.sh"
