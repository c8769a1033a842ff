// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected), as used by iSCSI,
// ext4 and the dataset.json checksums. Test vector: "123456789" -> 0xE3069283.
// defines: zt_crc32c
#ifndef ZT_CRC32C_H
#define ZT_CRC32C_H
#include <stddef.h>
#include <stdint.h>
// Incremental: crc = zt_crc32c(0, a, n); crc = zt_crc32c(crc, b, m); ...
uint32_t zt_crc32c(uint32_t crc, const void *buf, size_t n);
#endif
