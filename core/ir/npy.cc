#include "core/ir/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

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
  std::string header = data.substr(start, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'"))) throw bad("no descr");
  const std::string descr = m[1];
  if (std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*True"))) throw bad("Fortran order");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)"))) throw bad("no shape");
  std::vector<int64_t> shape;
  std::string dims = m[1];
  // Comma-separated extents, each decimal digits alone; "()" is a scalar and "(3,)" has
  // one trailing comma.
  std::vector<std::string> fields;
  for (size_t from = 0;;) {
    const size_t comma = dims.find(',', from);
    std::string d = dims.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    d.erase(0, d.find_first_not_of(" \t"));
    d.erase(d.find_last_not_of(" \t") + 1);
    fields.push_back(d);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (fields.back().empty() && (fields.size() > 1 || dims.find(',') == std::string::npos)) fields.pop_back();
  for (const std::string& d : fields) {
    if (d.empty()) throw bad("an empty extent in shape (" + dims + ")");
    for (char c : d)
      if (c < '0' || c > '9') throw bad("extent '" + d + "' is not a non-negative integer");
    if (d.size() > 15) throw bad("extent " + d + " is too large");
    shape.push_back(std::stoll(d));
  }
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
  std::memcpy(a.data(), data.data() + start + header_len, a.nbytes());
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
