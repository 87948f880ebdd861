// Data types carried by every expression and buffer: a type code, a bit width, and a
// lane count for vectors (1 for scalars).
#pragma once

#include <cstdint>
#include <string>

namespace basin {

// BFloat is bfloat16, a storage type only (TypeCode::BFloat, 16 bits): buffers hold it,
// loads of such a buffer and casts to it have it, and a value of it is only stored or
// cast back to float32 (exactly: its bits are float32's upper 16). Arithmetic,
// comparisons and math functions never take it (the expression factories refuse).
//
// The 8-bit integers (int8: TypeCode::Int, 8 bits; uint8: TypeCode::UInt, 8 bits) are
// storage types too, of quantized tensors: loads and stores, casts to and from other
// types (a float cast to one saturates to its range, toward zero, NaN giving 0) and
// selects between them; arithmetic and comparisons take them cast to int32.
enum class TypeCode : uint8_t { Int, Float, Bool, BFloat, UInt };

struct DType {
  TypeCode code = TypeCode::Int;
  uint8_t bits = 64;
  uint16_t lanes = 1;

  static constexpr DType i32() { return {TypeCode::Int, 32, 1}; }
  static constexpr DType i64() { return {TypeCode::Int, 64, 1}; }
  static constexpr DType f32() { return {TypeCode::Float, 32, 1}; }
  static constexpr DType f64() { return {TypeCode::Float, 64, 1}; }
  static constexpr DType boolean() { return {TypeCode::Bool, 1, 1}; }
  static constexpr DType bf16() { return {TypeCode::BFloat, 16, 1}; }
  static constexpr DType i8() { return {TypeCode::Int, 8, 1}; }
  static constexpr DType u8() { return {TypeCode::UInt, 8, 1}; }
  // The type of loop variables, extents and indices.
  static constexpr DType index() { return i64(); }

  bool is_int() const { return code == TypeCode::Int; }
  bool is_float() const { return code == TypeCode::Float; }
  bool is_bool() const { return code == TypeCode::Bool; }
  bool is_bf16() const { return code == TypeCode::BFloat; }
  bool is_uint() const { return code == TypeCode::UInt; }
  // An 8-bit integer (int8 or uint8): a storage type.
  bool is_byte() const { return (code == TypeCode::Int || code == TypeCode::UInt) && bits == 8; }
  bool is_scalar() const { return lanes == 1; }
  DType element() const { return {code, bits, 1}; }
  DType with_lanes(int n) const { return {code, bits, static_cast<uint16_t>(n)}; }
  // Storage size of one element in bytes (bool is stored as one byte).
  int bytes() const { return code == TypeCode::Bool ? 1 : bits / 8; }

  std::string str() const;
  // Parses "float32", "f32", "int64", "i32", "int8", "i8", "uint8", "u8", "bool",
  // "bfloat16", "bf16"; throws ParseError otherwise.
  static DType parse(const std::string& s);

  friend bool operator==(DType a, DType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }
  friend bool operator!=(DType a, DType b) { return !(a == b); }
};

}  // namespace basin
