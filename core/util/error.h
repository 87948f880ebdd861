// The two error channels of basin (STYLE.md, habit 9).
//
// User errors are typed exceptions deriving from basin::Error; each names the thing at
// fault (operator, attribute, tensor, file, flag) and reaches the user as one line.
// Internal invariants use BASIN_CHECK, which reports file:line, the condition and any
// context streamed into it, building the message only when the check fails.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace basin {

// Base of every user-facing error.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// A bad operator attribute or shape: names the operator, the attribute and its value.
class OpError : public Error {
 public:
  OpError(std::string op, std::string attr, const std::string& msg)
      : Error("operator '" + op + "': " + (attr.empty() ? "" : "attribute '" + attr + "': ") + msg),
        op_(std::move(op)),
        attr_(std::move(attr)) {}
  const std::string& op() const { return op_; }
  const std::string& attr() const { return attr_; }

 private:
  std::string op_, attr_;
};

// Malformed text given by the user (a --param value, a workload name, a config file).
class ParseError : public Error {
 public:
  using Error::Error;
};

// Something the user named does not exist (an operator, a workload, a file).
class NotFoundError : public Error {
 public:
  using Error::Error;
};

// A failure while running a program (out-of-bounds access, division by zero in the
// interpreter): reported against the kernel, never a crash.
class RuntimeError : public Error {
 public:
  using Error::Error;
};

// Internal invariant violation: a bug in basin, not in the user's input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
// Collects the message of a failed check; throws when destroyed at the end of the
// full expression, so that `BASIN_CHECK(c) << "context"` reads naturally.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    os_ << file << ":" << line << ": check failed: " << cond;
  }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    if (!ctx_) {
      os_ << ": ";
      ctx_ = true;
    }
    os_ << v;
    return *this;
  }
  ~CheckFailure() noexcept(false) { throw InternalError(os_.str()); }

 private:
  std::ostringstream os_;
  bool ctx_ = false;
};
}  // namespace detail

}  // namespace basin

// `while` rather than `if`/`else` so that the macro nests inside an unbraced if; the
// failure throws from its destructor, so the loop body runs at most once.
#define BASIN_CHECK(cond) \
  while (!(cond)) ::basin::detail::CheckFailure(__FILE__, __LINE__, #cond)
