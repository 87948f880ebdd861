// Host tensors: a dtype, a shape and 64-byte-aligned contiguous row-major storage.
// Copies share storage; clone() copies the data.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/expr/dtype.h"

namespace basin {

class NDArray {
 public:
  NDArray() = default;
  // Zero-filled.
  NDArray(DType t, std::vector<int64_t> shape);
  // An array over memory it does not own (contiguous, row-major, at any alignment):
  // `owner` lives as long as the array and its copies (null: the caller's concern).
  static NDArray borrow(DType t, std::vector<int64_t> shape, void* data, std::shared_ptr<void> owner);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_.bytes(); }
  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data());
  }
  bool defined() const { return storage_ != nullptr || numel_ == 0; }

  // Element access through double, for any dtype (tests, comparisons, printing).
  double get(int64_t i) const;
  // Out-of-range values saturate for integer dtypes (NaN gives 0).
  void set(int64_t i, double v);
  // Exact integer access: integer dtypes read and write their values without passing
  // through a double (int64 extents such as INT64_MAX stay exact); floats convert,
  // saturating.
  int64_t get_int(int64_t i) const;
  void set_int(int64_t i, int64_t v);

  NDArray clone() const;
  // A copy with another shape of the same element count (InternalError otherwise).
  NDArray reshaped(std::vector<int64_t> shape) const;
  // Uniform random values in [lo, hi) (integers: [lo, hi - 1]), deterministic in seed.
  static NDArray random(DType t, std::vector<int64_t> shape, double lo, double hi, uint64_t seed);

 private:
  DType dtype_ = DType::f32();
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::shared_ptr<uint8_t> storage_;
};

// The largest tensor one NDArray may hold, in bytes: the machine's physical memory
// unless set (the fuzz targets set a small limit). A larger shape is a basin::Error
// naming it, before anything is allocated: a model whose constant cannot fit is a
// clear error, not an out-of-memory abort.
int64_t max_tensor_bytes();
// 0 restores the default.
void set_max_tensor_bytes(int64_t bytes);
// The bytes of a tensor of `shape` and type t, by the rules every tensor of basin
// follows, data-path values of a graph included (whose memory the compiled network's
// arena holds): no negative extent, an element count whose arithmetic cannot wrap, at
// most max_tensor_bytes(). Throws basin::Error naming the shape otherwise.
int64_t tensor_bytes(DType t, const std::vector<int64_t>& shape);

// Largest absolute difference between two arrays of equal shape (NaN counts as
// infinite), and the same divided by the largest magnitude of `ref` (at least 1e-6).
struct ErrorStats {
  double max_abs = 0;
  double max_rel = 0;
};
ErrorStats compare_arrays(const NDArray& got, const NDArray& ref);

std::string shape_str(const std::vector<int64_t>& s);

}  // namespace basin
