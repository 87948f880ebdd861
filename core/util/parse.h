// Whole-string number parsing for user input (operator parameters, subgraph shapes,
// task lists): the value, or nothing when the text is not exactly one integer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

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

// "a,b,,c" -> {"a", "b", "", "c"}: every piece between the separators, empty ones too.
inline std::vector<std::string> split_list(const std::string& list, char separator = ',') {
  std::vector<std::string> pieces;
  for (size_t at = 0; at <= list.size();) {
    size_t end = std::min(list.find(separator, at), list.size());
    pieces.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  return pieces;
}

}  // namespace basin
