#ifndef OUTBOX_CRC32C_H
#define OUTBOX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Whether this processor computes CRC-32C in hardware (x86-64 with SSE 4.2), so that
/// `outbox_crc32c_hardware_update` may be called.
int outbox_crc32c_hardware_available(void);

/// The CRC-32C register `crc` (not inverted) advanced over `count` bytes at `bytes`, by the
/// processor's CRC-32C instruction. Only when `outbox_crc32c_hardware_available()`.
uint32_t outbox_crc32c_hardware_update(uint32_t crc, const void *bytes, size_t count);

#endif
