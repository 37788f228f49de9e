/* Shared by the SCSI command-layer unit tests (test_scsi.c, test_xcopy.c):
 * a request that starts as garbage, and the checks of a completed one.
 * Header-only (static inline), like unit.h; include unit.h first. */
#ifndef TANDEM_TESTS_SCSI_UNIT_H
#define TANDEM_TESTS_SCSI_UNIT_H

#include "../../src/scsi/scsi.h"

static inline struct scsi_req *req_new(void)
{
	struct scsi_req *r = malloc(sizeof(*r));
	assert_non_null(r);
	memset(r, 0xa5, sizeof(*r)); /* nothing may rely on a zeroed request */
	return r;
}

static inline void assert_good(const struct scsi_req *r)
{
	assert_int_equal(r->kind, SCSI_DONE);
	assert_int_equal(r->status, SCSI_GOOD);
	assert_int_equal(r->sense_len, 0);
}

/* CHECK CONDITION with 18 bytes of fixed sense of key and ASC<<8|ASCQ. */
static inline void assert_sense(const struct scsi_req *r, int key, int asc)
{
	assert_int_equal(r->kind, SCSI_DONE);
	assert_int_equal(r->status, SCSI_CHECK_CONDITION);
	assert_int_equal(r->sense_len, 18);
	assert_int_equal(r->data_len, 0);
	assert_int_equal(scsi_sense_key(r->sense, r->sense_len), key);
	assert_int_equal(scsi_sense_asc(r->sense, r->sense_len), asc);
}

#endif
