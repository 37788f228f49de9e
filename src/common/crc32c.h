/* CRC32C (Castagnoli), as used by iSCSI digests and Tandem's on-disk metadata.
 * Pure function; the table is computed at compile time-free start (static const). */
#ifndef TANDEM_CRC32C_H
#define TANDEM_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* crc32c(0, buf, len) gives the standard CRC32C; feed the result back to continue. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

#endif
