// Whole-string number parsing for user input (operator parameters, subgraph shapes,
// task lists): the value, or nothing when the text is not exactly one integer.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

namespace basin {

inline std::optional<int64_t> parse_int(const std::string& text) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace basin
