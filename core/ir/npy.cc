#include "core/ir/npy.h"

#include <cstring>
#include <fstream>
#include <cctype>
#include <set>

#include "core/util/error.h"
#include "core/util/io.h"
#include "core/util/output_file.h"

namespace basin {

namespace {

const char kMagic[] = "\x93NUMPY";

std::string descr_of(DType t) {
  if (t == DType::f32()) return "<f4";
  if (t == DType::f64()) return "<f8";
  if (t == DType::i64()) return "<i8";
  if (t == DType::i32()) return "<i4";
  if (t.is_bool()) return "|b1";
  throw Error("no .npy type for " + t.str());
}

// The header as numpy reads it (a Python dict literal, numpy's safe_eval): strings in
// single or double quotes, True/False, a tuple of integers; a repeated key takes its last
// value; the keys must be exactly descr, fortran_order and shape.
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

template <typename Bad>
Header parse_header(const std::string& text, const Bad& bad) {
  size_t p = 0;
  auto space = [&] {
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t' || text[p] == '\n' || text[p] == '\r')) ++p;
  };
  auto expect = [&](char c) {
    space();
    if (p >= text.size() || text[p] != c) throw bad(std::string("malformed header (expected '") + c + "')");
    ++p;
  };
  auto peek = [&](char c) {
    space();
    return p < text.size() && text[p] == c;
  };
  auto string = [&] {
    space();
    if (p >= text.size() || (text[p] != '\'' && text[p] != '"')) throw bad("malformed header (expected a string)");
    const char q = text[p++];
    const size_t end = text.find(q, p);
    if (end == std::string::npos) throw bad("malformed header (an unterminated string)");
    std::string v = text.substr(p, end - p);
    if (v.find('\\') != std::string::npos) throw bad("malformed header (an escape in a string)");
    p = end + 1;
    return v;
  };
  auto word = [&] {
    space();
    const size_t from = p;
    while (p < text.size() && (std::isalnum(static_cast<unsigned char>(text[p])) || text[p] == '_')) ++p;
    return text.substr(from, p - from);
  };
  Header h;
  std::set<std::string> seen;
  expect('{');
  while (!peek('}')) {
    const std::string key = string();
    expect(':');
    if (key == "descr") {
      if (peek('[')) throw bad("a structured element type");
      h.descr = string();
    } else if (key == "fortran_order") {
      const std::string v = word();
      if (v != "True" && v != "False") throw bad("fortran_order is '" + v + "', not True or False");
      h.fortran_order = v == "True";
    } else if (key == "shape") {
      expect('(');
      h.shape.clear();
      while (!peek(')')) {
        std::string d = word();
        if (!d.empty() && (d.back() == 'L' || d.back() == 'l')) d.pop_back();  // Python 2's long
        if (d.empty()) throw bad("malformed shape");
        for (char c : d)
          if (c < '0' || c > '9') throw bad("extent '" + d + "' is not a non-negative integer");
        if (d.size() > 15) throw bad("extent " + d + " is too large");
        h.shape.push_back(std::stoll(d));
        if (!peek(')')) expect(',');
      }
      expect(')');
    } else {
      throw bad("the header has the key '" + key + "' (numpy's are descr, fortran_order, shape)");
    }
    seen.insert(key);
    if (!peek('}')) expect(',');
  }
  expect('}');
  space();
  if (p != text.size()) throw bad("malformed header (text after the dictionary)");
  for (const char* k : {"descr", "fortran_order", "shape"})
    if (!seen.count(k)) throw bad(std::string("the header has no '") + k + "'");
  return h;
}

}  // namespace

NDArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw NotFoundError("cannot open '" + path + "'");
  std::string data = read_rest(f);
  auto bad = [&](const std::string& why) { return ParseError("'" + path + "' is not a supported .npy file: " + why); };
  if (data.size() < 10 || data.compare(0, 6, kMagic, 6) != 0) throw bad("no NumPy magic");
  const int major = static_cast<uint8_t>(data[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(data[8]) | (static_cast<size_t>(static_cast<uint8_t>(data[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) throw bad("truncated header");
    uint32_t n = 0;
    std::memcpy(&n, data.data() + 8, 4);
    header_len = n;
    start = 12;
  } else {
    throw bad("format version " + std::to_string(major));
  }
  if (start + header_len > data.size()) throw bad("truncated header");
  const Header h = parse_header(data.substr(start, header_len), bad);
  const std::string& descr = h.descr;
  const std::vector<int64_t>& shape = h.shape;
  DType t;
  if (descr == "<f4") t = DType::f32();
  else if (descr == "<f8") t = DType::f64();
  else if (descr == "<i8") t = DType::i64();
  else if (descr == "<i4") t = DType::i32();
  else if (descr == "|b1") t = DType::boolean();
  else throw bad("element type '" + descr + "' (float32, float64, int64, int32, bool)");
  // The data size the shape needs, checked against the file before anything is
  // allocated (a corrupt shape must not ask for terabytes).
  const size_t have = data.size() - start - header_len;
  size_t need = t.bytes();
  bool empty = false;
  for (int64_t e : shape) empty |= e == 0;
  for (int64_t e : shape) {
    if (empty) {
      need = 0;
      break;
    }
    if (need > have / static_cast<size_t>(e)) {  // extents are at least 1: the product only grows
      need = have + 1;                           // more than the file holds, without overflowing
      break;
    }
    need *= static_cast<size_t>(e);
  }
  if (need != have)
    throw bad("holds " + std::to_string(have) + " data bytes; shape " + shape_str(shape) + " of " + t.str() +
              " needs " + (need == have + 1 ? "more" : std::to_string(need)));
  NDArray a(t, shape);
  const char* src = data.data() + start + header_len;
  if (!h.fortran_order || shape.size() < 2) {
    std::memcpy(a.data(), src, a.nbytes());
    return a;
  }
  // Fortran order: the first index varies fastest in the file.
  const size_t e = t.bytes(), r = shape.size();
  std::vector<int64_t> idx(r, 0), fstride(r, 1);
  for (size_t d = 1; d < r; ++d) fstride[d] = fstride[d - 1] * shape[d - 1];
  auto* dst = static_cast<char*>(a.data());
  for (int64_t flat = 0; flat < a.numel(); ++flat) {
    int64_t from = 0;
    for (size_t d = 0; d < r; ++d) from += idx[d] * fstride[d];
    std::memcpy(dst + flat * e, src + from * e, e);
    for (size_t d = r; d-- > 0;) {  // the next C-order index
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return a;
}

void write_npy(const std::string& path, const NDArray& a, const std::vector<std::string>& inputs) {
  std::string shape = "(";
  for (size_t i = 0; i < a.shape().size(); ++i)
    shape += std::to_string(a.shape()[i]) + (a.shape().size() == 1 ? "," : i + 1 < a.shape().size() ? ", " : "");
  shape += ")";
  std::string header = "{'descr': '" + descr_of(a.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  write_output_file(
      path,
      [&](OutputFile& f) {
        f.write(kMagic, 6);
        const char ver[2] = {1, 0};
        f.write(ver, 2);
        const uint16_t n = static_cast<uint16_t>(header.size());
        f.write(&n, 2);
        f.write(header);
        f.write(a.data(), a.nbytes());
      },
      inputs);
}

}  // namespace basin
