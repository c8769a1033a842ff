// CRC-32C for block-file checksums: slice-by-8 tables everywhere, and the SSE4.2
// crc32 instruction (about 10x faster) chosen once at run time on x86-64 CPUs
// that have it. Both compute the same function; test_data checks that they agree.
#include "base/crc32c.h"

#include <pthread.h>
#include <string.h>

#define ZT_CRC32C_POLY 0x82F63B78u  // 0x1EDC6F41 bit-reversed

static uint32_t crc_table[8][256];
static int crc_have_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (ZT_CRC32C_POLY & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    // table[k][i] = crc of byte i followed by k zero bytes: lets 8 bytes fold per step.
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xff];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

int zt_crc32c_hw_available(void) {
    pthread_once(&crc_once, crc_init);
    return crc_have_hw;
}

uint32_t zt_crc32c_sw(uint32_t crc, const void *buf, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        // The tables assume little-endian loads; the block files are little-endian
        // too, and dataset.c refuses to build on anything else.
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
__attribute__((target("sse4.2"))) uint32_t zt_crc32c_hw(uint32_t crc, const void *buf, size_t n) {
    const unsigned char *p = buf;
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#else
uint32_t zt_crc32c_hw(uint32_t crc, const void *buf, size_t n) { return zt_crc32c_sw(crc, buf, n); }
#endif

uint32_t zt_crc32c(uint32_t crc, const void *buf, size_t n) {
    pthread_once(&crc_once, crc_init);
    return crc_have_hw ? zt_crc32c_hw(crc, buf, n) : zt_crc32c_sw(crc, buf, n);
}
