#!/usr/bin/env bash
# The primary's disk dies under a running fio verify job: XFS on a loop
# device, shut down (`xfs_io -x -c shutdown`: every later I/O fails with EIO,
# as from a dead disk). The job sees no error; a serves through b and says
# `diskless` and why; the witness record stays synced; a kill of a fails over
# without --force, and b holds every block (tests/integration/lib4.sh).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=lib2.sh
. "$_root/tests/integration/lib2.sh"
# shellcheck source=lib3.sh
. "$_root/tests/integration/lib3.sh"
# shellcheck source=lib4.sh
. "$_root/tests/integration/lib4.sh"

primary_disk_fails xfs
log "ok"
