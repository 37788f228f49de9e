#!/usr/bin/env bash
# The primary's disk fills up under a running fio verify job: a's image is a
# sparse file on XFS with 12 MiB of room left, so writes to new blocks fail
# with ENOSPC. With on-io-error = detach (the default) the job sees no error;
# a serves through b and says `diskless` and why (ENOSPC); the witness
# record stays synced; a kill of a fails over without --force, and b holds
# every block (tests/integration/lib4.sh).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
# shellcheck source=lib4.sh
. "$_root/tests/integration/lib4.sh"

primary_disk_fails enospc
log "ok"
