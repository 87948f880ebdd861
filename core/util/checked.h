// Element counts that cannot wrap: every product of a shape's extents goes through
// here, so that a hostile model (extents near 2^63) is one clear error, never a wrapped
// count that sizes a buffer or an index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/util/error.h"

namespace basin {

// The product of `extents`; basin::Error when it leaves int64_t.
inline int64_t checked_product(const std::vector<int64_t>& extents) {
  int64_t p = 1;
  for (int64_t x : extents)
    if (__builtin_mul_overflow(p, x, &p)) {
      std::string s;
      for (int64_t e : extents) s += (s.empty() ? "" : ", ") + std::to_string(e);
      throw Error("the element count of shape [" + s + "] overflows 64 bits");
    }
  return p;
}

}  // namespace basin
