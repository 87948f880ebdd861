#include "core/expr/dtype.h"

#include "core/util/error.h"

namespace basin {

std::string DType::str() const {
  std::string s;
  switch (code) {
    case TypeCode::Int:
      s = "int" + std::to_string(bits);
      break;
    case TypeCode::Float:
      s = "float" + std::to_string(bits);
      break;
    case TypeCode::Bool:
      s = "bool";
      break;
    case TypeCode::BFloat:
      s = "bfloat16";
      break;
    case TypeCode::UInt:
      s = "uint" + std::to_string(bits);
      break;
  }
  if (lanes != 1) s += "x" + std::to_string(lanes);
  return s;
}

DType DType::parse(const std::string& s) {
  if (s == "float32" || s == "f32") return f32();
  if (s == "float64" || s == "f64") return f64();
  if (s == "int32" || s == "i32") return i32();
  if (s == "int64" || s == "i64") return i64();
  if (s == "int8" || s == "i8") return i8();
  if (s == "uint8" || s == "u8") return u8();
  if (s == "bool") return boolean();
  if (s == "bfloat16" || s == "bf16") return bf16();
  throw ParseError("unknown dtype '" + s +
                   "' (expected float32, float64, int32, int64, int8, uint8, bool or bfloat16)");
}

}  // namespace basin
