#include "core/ops/registry.h"

#include <sstream>

#include "core/util/error.h"
#include "core/util/parse.h"

namespace basin::ops {

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Int:
      return "int";
    case ParamType::Ints:
      return "ints";
    case ParamType::Float:
      return "float";
    case ParamType::String:
      return "string";
  }
  return "?";
}

std::string attr_to_string(const AttrValue& v) {
  if (auto p = std::get_if<int64_t>(&v)) return std::to_string(*p);
  if (auto p = std::get_if<double>(&v)) {
    std::ostringstream os;
    os << *p;
    return os.str();
  }
  if (auto p = std::get_if<std::string>(&v)) return *p;
  const auto& l = std::get<std::vector<int64_t>>(v);
  std::string s;
  for (size_t i = 0; i < l.size(); ++i) s += (i ? "," : "") + std::to_string(l[i]);
  return s;
}

const AttrValue& Attrs::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw OpError(op_, name, "missing");
  return it->second;
}
int64_t Attrs::i(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<int64_t>(&v)) return *p;
  throw OpError(op_, name, "expected an integer, got '" + attr_to_string(v) + "'");
}
const std::vector<int64_t>& Attrs::ints(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<std::vector<int64_t>>(&v)) return *p;
  throw OpError(op_, name, "expected a list of integers, got '" + attr_to_string(v) + "'");
}
double Attrs::f(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<double>(&v)) return *p;
  if (auto p = std::get_if<int64_t>(&v)) return static_cast<double>(*p);
  throw OpError(op_, name, "expected a number, got '" + attr_to_string(v) + "'");
}
const std::string& Attrs::s(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<std::string>(&v)) return *p;
  throw OpError(op_, name, "expected a string, got '" + attr_to_string(v) + "'");
}

const std::vector<OpDef>& all_ops() {
  static const std::vector<OpDef> ops = [] {
    std::vector<OpDef> r;
    register_linear_ops(r);
    register_attention_ops(r);
    register_conv_ops(r);
    register_blocked_ops(r);
    register_winograd_ops(r);
    register_pool_ops(r);
    register_elementwise_ops(r);
    register_logic_ops(r);
    register_normalization_ops(r);
    register_reduction_ops(r);
    register_transform_ops(r);
    register_fused_ops(r);
    register_quantize_ops(r);
    return r;
  }();
  return ops;
}

const OpDef& find_op(const std::string& name) {
  for (const OpDef& d : all_ops())
    if (d.name == name) return d;
  std::string near;
  for (const OpDef& d : all_ops())
    if (d.name.find(name) != std::string::npos || name.find(d.name) != std::string::npos)
      near += (near.empty() ? "" : ", ") + d.name;
  throw NotFoundError("unknown operator '" + name + "'" +
                      (near.empty() ? std::string(" (`basin ops` lists them)") : " (did you mean " + near + "?)"));
}

namespace {

int64_t parse_int(const std::string& op, const std::string& name, const std::string& text) {
  if (std::optional<int64_t> v = basin::parse_int(text)) return *v;
  throw OpError(op, name, "expected an integer, got '" + text + "'");
}

AttrValue parse_value(const std::string& op, const ParamSpec& p, const std::string& text) {
  switch (p.type) {
    case ParamType::Int:
      return parse_int(op, p.name, text);
    case ParamType::Float: {
      try {
        size_t pos = 0;
        double v = std::stod(text, &pos);
        if (pos == text.size()) return v;
      } catch (const std::exception&) {
      }
      throw OpError(op, p.name, "expected a number, got '" + text + "'");
    }
    case ParamType::String:
      return text;
    case ParamType::Ints: {
      std::vector<int64_t> l;
      if (text.empty()) return l;
      std::string item;
      std::istringstream is(text);
      while (std::getline(is, item, ',')) l.push_back(parse_int(op, p.name, item));
      if (!text.empty() && text.back() == ',') throw OpError(op, p.name, "trailing comma in '" + text + "'");
      return l;
    }
  }
  return int64_t{0};
}

}  // namespace

Attrs parse_attrs(const OpDef& def, const std::map<std::string, std::string>& kv) {
  Attrs a(def.name);
  for (const ParamSpec& p : def.params) a.set(p.name, p.default_value);
  for (const auto& [k, v] : kv) {
    const ParamSpec* spec = nullptr;
    for (const ParamSpec& p : def.params)
      if (p.name == k) spec = &p;
    if (!spec) {
      std::string names;
      for (const ParamSpec& p : def.params) names += (names.empty() ? "" : ", ") + p.name;
      throw OpError(def.name, k, "unknown parameter (parameters: " + names + ")");
    }
    a.set(k, parse_value(def.name, *spec, v));
  }
  return a;
}

OpGraph build_op(const std::string& name, const Attrs& attrs) {
  const OpDef& def = find_op(name);
  Attrs full(def.name);
  for (const ParamSpec& p : def.params) full.set(p.name, p.default_value);
  for (const auto& [k, v] : attrs.values()) {
    bool known = false;
    for (const ParamSpec& p : def.params) known |= p.name == k;
    if (!known) throw OpError(def.name, k, "unknown parameter");
    full.set(k, v);
  }
  OpGraph g = def.build(full);
  g.op = def.name;
  g.attrs = full;
  return g;
}

OpGraph build_op(const std::string& name, const std::map<std::string, std::string>& kv) {
  const OpDef& def = find_op(name);
  return build_op(name, parse_attrs(def, kv));
}

}  // namespace basin::ops
