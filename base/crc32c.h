// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected), as used by iSCSI,
// ext4 and the dataset.json checksums. Test vector: "123456789" -> 0xE3069283.
// defines: zt_crc32c, zt_crc32c_sw, zt_crc32c_hw, zt_crc32c_hw_available
#ifndef ZT_CRC32C_H
#define ZT_CRC32C_H
#include <stddef.h>
#include <stdint.h>
// Incremental: crc = zt_crc32c(0, a, n); crc = zt_crc32c(crc, b, m); ...
// Uses the SSE4.2 crc32 instruction when the CPU has it, else slice-by-8 tables.
uint32_t zt_crc32c(uint32_t crc, const void *buf, size_t n);
// The two implementations behind zt_crc32c, exposed so a test can hold them together.
uint32_t zt_crc32c_sw(uint32_t crc, const void *buf, size_t n);
uint32_t zt_crc32c_hw(uint32_t crc, const void *buf, size_t n);  // only when available
int zt_crc32c_hw_available(void);
#endif
