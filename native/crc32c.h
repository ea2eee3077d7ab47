/* CRC-32C (Castagnoli), the checksum of v2 record batches. */
#ifndef KT_CRC32C_H
#define KT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Must run once before kt_crc32c (module init): builds the table, picks the implementation. */
void kt_crc32c_init(void);
/* Continue `crc` (0 to start) over p[0..n). */
uint32_t kt_crc32c(uint32_t crc, const uint8_t *p, size_t n);
/* "sse4.2" or "table": what kt_crc32c_init picked on this CPU. */
const char *kt_crc32c_impl(void);

#endif
