#include "core/ir/ndarray.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "core/expr/evaluate.h"
#include "core/util/error.h"

namespace basin {

namespace {

std::atomic<int64_t> g_max_tensor_bytes{0};  // 0: the machine's memory

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

// The elements of a shape (a negative extent is an internal error; the API checks users'
// shapes first), refusing a count whose bytes would overflow. The bound holds for the
// product of the non-zero extents too: an empty tensor of shape [0, 2^62, 3] would let
// every product over its other extents (a pooling window, a row length) wrap.
int64_t element_count(DType t, const std::vector<int64_t>& shape) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) throw Error("shape " + shape_str(shape) + " has a negative extent");
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero > (int64_t{1} << 62) / d / t.bytes())
      throw Error("shape " + shape_str(shape) + " of " + t.str() + " has too many elements to store");
    nonzero *= d;
  }
  return empty ? 0 : nonzero;
}

}  // namespace

int64_t max_tensor_bytes() {
  const int64_t set = g_max_tensor_bytes.load();
  if (set > 0) return set;
  static const int64_t memory = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : std::numeric_limits<int64_t>::max();
  }();
  return memory;
}

void set_max_tensor_bytes(int64_t bytes) { g_max_tensor_bytes.store(bytes > 0 ? bytes : 0); }

int64_t tensor_bytes(DType t, const std::vector<int64_t>& shape) {
  const int64_t bytes = element_count(t, shape) * static_cast<int64_t>(t.bytes());
  if (bytes > max_tensor_bytes())
    throw Error("a tensor of shape " + shape_str(shape) + " of " + t.str() + " needs " +
                gib(static_cast<uint64_t>(bytes)) + ", more than the " +
                gib(static_cast<uint64_t>(max_tensor_bytes())) + " one tensor may take here" +
                (g_max_tensor_bytes.load() > 0 ? "" : " (this machine's memory)"));
  return bytes;
}

NDArray::NDArray(DType t, std::vector<int64_t> shape) : dtype_(t), shape_(std::move(shape)) {
  BASIN_CHECK(t.is_scalar()) << "NDArray of vector type " << t.str();
  numel_ = tensor_bytes(t, shape_) / static_cast<int64_t>(t.bytes());
  size_t bytes = (nbytes() + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes == 0 ? 64 : bytes);
  storage_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

NDArray NDArray::borrow(DType t, std::vector<int64_t> shape, void* data, std::shared_ptr<void> owner) {
  BASIN_CHECK(t.is_scalar()) << "NDArray of vector type " << t.str();
  NDArray a;
  a.dtype_ = t;
  a.shape_ = std::move(shape);
  a.numel_ = element_count(t, a.shape_);
  if (!data && a.numel_ > 0) throw Error("a borrowed tensor of shape " + shape_str(a.shape_) + " has no data");
  // The aliasing constructor: the owner's count, the caller's pointer.
  a.storage_ = std::shared_ptr<uint8_t>(std::move(owner), static_cast<uint8_t*>(data));
  return a;
}

double NDArray::get(int64_t i) const {
  switch (dtype_.code) {
    case TypeCode::Float:
      return dtype_.bits == 32 ? as<float>()[i] : as<double>()[i];
    case TypeCode::Int:
    case TypeCode::UInt:
      return static_cast<double>(get_int(i));
    case TypeCode::Bool:
      return as<uint8_t>()[i];
    case TypeCode::BFloat:
      return bf16_value(as<uint16_t>()[i]);
  }
  return 0;
}

void NDArray::set(int64_t i, double v) {
  switch (dtype_.code) {
    case TypeCode::Float:
      if (dtype_.bits == 32) as<float>()[i] = static_cast<float>(v);
      else as<double>()[i] = v;
      return;
    case TypeCode::Int:
    case TypeCode::UInt: {
      // Saturating: a double past the type's range (2^63 is INT64_MAX read through a
      // double) or NaN has no defined conversion.
      int64_t x;
      if (std::isnan(v)) x = 0;
      else if (v <= -9223372036854775808.0) x = INT64_MIN;
      else if (v >= 9223372036854775807.0) x = INT64_MAX;
      else x = static_cast<int64_t>(v);
      set_int(i, x);
      return;
    }
    case TypeCode::Bool:
      as<uint8_t>()[i] = v != 0;
      return;
    case TypeCode::BFloat:
      as<uint16_t>()[i] = bf16_bits(static_cast<float>(v));
      return;
  }
}

int64_t NDArray::get_int(int64_t i) const {
  switch (dtype_.code) {
    case TypeCode::Int:
      return dtype_.bits == 8 ? as<int8_t>()[i] : dtype_.bits == 32 ? as<int32_t>()[i] : as<int64_t>()[i];
    case TypeCode::UInt:
      return as<uint8_t>()[i];
    case TypeCode::Bool:
      return as<uint8_t>()[i] != 0;
    case TypeCode::Float:
    case TypeCode::BFloat: {
      NDArray t(DType::i64(), {1});
      t.set(0, get(i));
      return t.as<int64_t>()[0];
    }
  }
  return 0;
}

void NDArray::set_int(int64_t i, int64_t v) {
  switch (dtype_.code) {
    case TypeCode::Int:  // saturating
      if (dtype_.bits == 8) as<int8_t>()[i] = static_cast<int8_t>(std::clamp<int64_t>(v, INT8_MIN, INT8_MAX));
      else if (dtype_.bits == 32) as<int32_t>()[i] = static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
      else as<int64_t>()[i] = v;
      return;
    case TypeCode::UInt:
      as<uint8_t>()[i] = static_cast<uint8_t>(std::clamp<int64_t>(v, 0, UINT8_MAX));
      return;
    case TypeCode::Bool:
      as<uint8_t>()[i] = v != 0;
      return;
    case TypeCode::Float:
    case TypeCode::BFloat:
      set(i, static_cast<double>(v));
      return;
  }
}

NDArray NDArray::reshaped(std::vector<int64_t> shape) const {
  NDArray b(dtype_, std::move(shape));
  if (b.numel() != numel_) throw InternalError("reshaped: element counts differ");
  if (numel_ > 0) std::memcpy(b.data(), data(), nbytes());
  return b;
}

NDArray NDArray::clone() const {
  NDArray r(dtype_, shape_);
  if (nbytes()) std::memcpy(r.data(), data(), nbytes());
  return r;
}

NDArray NDArray::random(DType t, std::vector<int64_t> shape, double lo, double hi, uint64_t seed) {
  NDArray r(t, std::move(shape));
  std::mt19937_64 rng(seed);
  if (t.is_float() || t.is_bf16()) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < r.numel(); ++i) r.set(i, d(rng));
  } else {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi) - 1);
    for (int64_t i = 0; i < r.numel(); ++i) r.set(i, static_cast<double>(d(rng)));
  }
  return r;
}

ErrorStats compare_arrays(const NDArray& got, const NDArray& ref) {
  BASIN_CHECK(got.shape() == ref.shape())
      << "comparing " << shape_str(got.shape()) << " with " << shape_str(ref.shape());
  ErrorStats s;
  double scale = 1e-6;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double a = got.get(i), b = ref.get(i);
    double d = (std::isnan(a) != std::isnan(b)) ? std::numeric_limits<double>::infinity()
                                                : (std::isnan(a) ? 0.0 : std::fabs(a - b));
    if (std::isinf(a) && std::isinf(b) && a == b) d = 0;
    s.max_abs = std::max(s.max_abs, d);
    if (std::isfinite(b)) scale = std::max(scale, std::fabs(b));
  }
  s.max_rel = s.max_abs / scale;
  return s;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace basin
