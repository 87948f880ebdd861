// SHA-256 (FIPS 180-4): the checksum of compiled networks, where corruption must never
// pass for a valid file of machine code.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace basin {

class Sha256 {
 public:
  Sha256();
  // Continues the message with these bytes.
  void update(std::string_view bytes);
  void update(const void* data, size_t n) { update(std::string_view(static_cast<const char*>(data), n)); }
  // The 32-byte digest; the object is spent afterwards.
  std::array<uint8_t, 32> digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

// The digest of the bytes, as 32 raw bytes or 64 lowercase hex digits.
std::string sha256_bytes(std::string_view bytes);
std::string sha256_hex(std::string_view bytes);

}  // namespace basin
