// The operator library's registry: every operator with its parameters (shapes and
// attributes, typed, with defaults), a builder that validates them and produces the
// tensor-expression DAG, and the random-input domains used to test it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/te/tensor.h"

namespace basin::ops {

enum class ParamType { Int, Ints, Float, String };
const char* param_type_name(ParamType t);

using AttrValue = std::variant<int64_t, std::vector<int64_t>, double, std::string>;
std::string attr_to_string(const AttrValue& v);

struct ParamSpec {
  std::string name;
  ParamType type;
  AttrValue default_value;
  std::string doc;
};

// Validated, typed attribute values of one operator instance. Accessors throw OpError
// naming the operator and attribute if a value is missing or of another type.
class Attrs {
 public:
  explicit Attrs(std::string op = "") : op_(std::move(op)) {}
  const std::string& op() const { return op_; }
  int64_t i(const std::string& name) const;
  const std::vector<int64_t>& ints(const std::string& name) const;
  double f(const std::string& name) const;
  const std::string& s(const std::string& name) const;
  void set(const std::string& name, AttrValue v) { values_[name] = std::move(v); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::map<std::string, AttrValue>& values() const { return values_; }

 private:
  const AttrValue& get(const std::string& name) const;
  std::string op_;
  std::map<std::string, AttrValue> values_;
};

// Where random test inputs of an operator are drawn from: uniform in [lo, hi) for
// floats, integers in [lo, hi) for index tensors.
struct InputRange {
  double lo = -1.0;
  double hi = 1.0;
};

// One operator instantiated with concrete attributes: its inputs (placeholders, in
// argument order), outputs and work.
struct OpGraph {
  std::string op;
  Attrs attrs;
  std::vector<te::Tensor> inputs;
  std::vector<te::Tensor> outputs;
  std::vector<InputRange> ranges;  // one per input
  double flops = 0;                // floating-point operations of one run
};

struct OpDef {
  std::string name;
  std::string family;  // "nn", "elementwise", "normalization", "reduction", "data"
  std::string summary;
  std::vector<ParamSpec> params;
  std::function<OpGraph(const Attrs&)> build;
};

// Every operator, in a stable order.
const std::vector<OpDef>& all_ops();
// Throws NotFoundError listing near names when `name` is unknown.
const OpDef& find_op(const std::string& name);
// Parses K=V strings against the operator's parameters, filling defaults. Throws
// OpError for an unknown parameter or a value of the wrong form.
Attrs parse_attrs(const OpDef& def, const std::map<std::string, std::string>& kv);
// find_op + parse_attrs + build.
OpGraph build_op(const std::string& name, const std::map<std::string, std::string>& kv = {});
OpGraph build_op(const std::string& name, const Attrs& attrs);

// Registration, one function per family file.
void register_linear_ops(std::vector<OpDef>& r);
void register_conv_ops(std::vector<OpDef>& r);
void register_blocked_ops(std::vector<OpDef>& r);
void register_winograd_ops(std::vector<OpDef>& r);
void register_pool_ops(std::vector<OpDef>& r);
void register_elementwise_ops(std::vector<OpDef>& r);
void register_normalization_ops(std::vector<OpDef>& r);
void register_reduction_ops(std::vector<OpDef>& r);
void register_transform_ops(std::vector<OpDef>& r);
void register_fused_ops(std::vector<OpDef>& r);
void register_logic_ops(std::vector<OpDef>& r);
void register_attention_ops(std::vector<OpDef>& r);
void register_quantize_ops(std::vector<OpDef>& r);

}  // namespace basin::ops
