// FNV-1a, 64 bits: the checksum of basin's own files (estimators, compiled networks).
// Not cryptographic; it catches truncation and flipped bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace basin {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;

// Continues hash h over the bytes (start with kFnvOffset).
inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace basin
