// CRC-32C by the processor's instruction, where it has one; the Swift side keeps the portable
// slicing-by-8 tables for every other processor (Sources/Outbox/Codec/CRC32C.swift).
#include "crc32c.h"

#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>

int outbox_crc32c_hardware_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}

__attribute__((target("sse4.2")))
uint32_t outbox_crc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    uint64_t wide = crc;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        wide = _mm_crc32_u64(wide, word);
        p += 8;
        count -= 8;
    }
    uint32_t narrow = (uint32_t)wide;
    while (count > 0) {
        narrow = _mm_crc32_u8(narrow, *p);
        p += 1;
        count -= 1;
    }
    return narrow;
}

#else

int outbox_crc32c_hardware_available(void) { return 0; }

uint32_t outbox_crc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return crc;
}

#endif
