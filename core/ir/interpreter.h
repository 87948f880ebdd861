// The loop-IR interpreter: runs any (concrete) lowered function on host buffers. It is
// the correctness oracle for every generated kernel, so it follows expr.h and stmt.h to
// the letter: float32 arithmetic in float32, bounds-checked accesses, integer division
// by zero and out-of-bounds accesses reported as RuntimeError naming the buffer.
//
// The function is compiled once into a tree of closures over slot-addressed variables
// and buffers; run() may then be called many times. Loops of every kind run serially,
// which computes what a parallel or vectorized loop computes.
#pragma once

#include <memory>
#include <vector>

#include "core/ir/ndarray.h"
#include "core/ir/stmt.h"

namespace basin {

class Interpreter {
 public:
  explicit Interpreter(const LoweredFunc& f);
  ~Interpreter();
  Interpreter(Interpreter&&) noexcept;
  Interpreter& operator=(Interpreter&&) noexcept;

  // args in the order of f.params; their dtypes and element counts must match.
  void run(const std::vector<NDArray*>& args) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Compiles and runs once.
void interpret(const LoweredFunc& f, const std::vector<NDArray*>& args);

}  // namespace basin
