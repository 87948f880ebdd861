#include "core/util/parquet.h"

#include <cstring>
#include <set>

#include "core/util/error.h"

namespace basin {

namespace {

// Thrift's compact protocol, the encoding of Parquet's page headers and footer: only
// what the structures written below use.
class Compact {
 public:
  enum : uint8_t { kI32 = 5, kI64 = 6, kBinary = 8, kList = 9, kStruct = 12 };

  std::string out;

  void varint(uint64_t v) {
    while (v >= 0x80) {
      out += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out += static_cast<char>(v);
  }
  static uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }

  void field(int id, uint8_t type) {
    const int delta = id - last_.back();
    if (delta > 0 && delta <= 15) {
      out += static_cast<char>((delta << 4) | type);
    } else {
      out += static_cast<char>(type);
      varint(zigzag(id));
    }
    last_.back() = id;
  }
  void i32(int id, int32_t v) {
    field(id, kI32);
    varint(zigzag(v));
  }
  void i64(int id, int64_t v) {
    field(id, kI64);
    varint(zigzag(v));
  }
  void binary(int id, const std::string& s) {
    field(id, kBinary);
    raw_binary(s);
  }
  void raw_binary(const std::string& s) {
    varint(s.size());
    out += s;
  }
  // A list's header; its elements follow (structs with begin()/end(), or raw values).
  void list(int id, uint8_t element_type, size_t size) {
    field(id, kList);
    if (size < 15) {
      out += static_cast<char>((size << 4) | element_type);
    } else {
      out += static_cast<char>(0xf0 | element_type);
      varint(size);
    }
  }
  void begin_struct(int id) {
    field(id, kStruct);
    begin();
  }
  // A struct as a list element or the top level: its fields count from 0.
  void begin() { last_.push_back(0); }
  void end() {
    out += '\0';
    last_.pop_back();
  }

 private:
  std::vector<int> last_{0};
};

// Parquet's enumerations, as parquet.thrift numbers them.
enum ParquetType { kInt64 = 2, kFloat = 4, kDouble = 5, kByteArray = 6 };
enum Repetition { kRequired = 0, kOptional = 1 };
constexpr int kPlain = 0, kRle = 3, kDataPage = 0, kUncompressed = 0, kUtf8 = 0;

int physical(ParquetColumn::Type t) {
  switch (t) {
    case ParquetColumn::Type::Int64:
      return kInt64;
    case ParquetColumn::Type::Float:
      return kFloat;
    case ParquetColumn::Type::Double:
      return kDouble;
    case ParquetColumn::Type::String:
      return kByteArray;
  }
  return kByteArray;
}

template <typename T>
void put_le(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86 and AArch64 are little-endian, as Parquet is
  out.append(b, sizeof(T));
}

// The definition levels of an optional column (bit width 1) in the RLE/bit-packed
// hybrid, as runs, after their 4-byte length.
std::string definition_levels(const std::vector<bool>& present) {
  Compact runs;
  for (size_t i = 0; i < present.size();) {
    size_t j = i;
    while (j < present.size() && present[j] == present[i]) ++j;
    runs.varint(static_cast<uint64_t>(j - i) << 1);  // an RLE run of j - i
    runs.out += static_cast<char>(present[i] ? 1 : 0);
    i = j;
  }
  std::string out;
  put_le<uint32_t>(out, static_cast<uint32_t>(runs.out.size()));
  return out + runs.out;
}

// The page's data: the definition levels (optional columns), then the present values.
std::string page_data(const ParquetColumn& c) {
  std::string out;
  if (!c.present.empty()) out += definition_levels(c.present);
  const size_t n = c.rows();
  for (size_t i = 0; i < n; ++i) {
    if (!c.present.empty() && !c.present[i]) continue;
    switch (c.type) {
      case ParquetColumn::Type::Int64:
        put_le<int64_t>(out, c.i64[i]);
        break;
      case ParquetColumn::Type::Float:
        put_le<float>(out, c.f32[i]);
        break;
      case ParquetColumn::Type::Double:
        put_le<double>(out, c.f64[i]);
        break;
      case ParquetColumn::Type::String:
        put_le<uint32_t>(out, static_cast<uint32_t>(c.str[i].size()));
        out += c.str[i];
        break;
    }
  }
  return out;
}

}  // namespace

size_t ParquetColumn::rows() const {
  switch (type) {
    case Type::Int64:
      return i64.size();
    case Type::Float:
      return f32.size();
    case Type::Double:
      return f64.size();
    case Type::String:
      return str.size();
  }
  return 0;
}

std::string parquet_file(const std::vector<ParquetColumn>& columns,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  const size_t rows = columns.empty() ? 0 : columns[0].rows();
  std::set<std::string> names;
  for (const ParquetColumn& c : columns) {
    if (c.name.empty()) throw Error("a Parquet column without a name");
    if (!names.insert(c.name).second) throw Error("two Parquet columns named '" + c.name + "'");
    if (c.rows() != rows || (!c.present.empty() && c.present.size() != rows))
      throw Error("Parquet column '" + c.name + "' has " + std::to_string(c.rows()) + " rows, the first column " +
                  std::to_string(rows));
  }
  std::string file = "PAR1";
  struct Chunk {
    int64_t offset = 0, size = 0;
  };
  std::vector<Chunk> chunks;
  for (const ParquetColumn& c : columns) {
    const std::string data = page_data(c);
    if (data.size() > 0x7fffffffu) throw Error("Parquet column '" + c.name + "' holds more than 2 GiB");
    Compact h;
    h.i32(1, kDataPage);
    h.i32(2, static_cast<int32_t>(data.size()));
    h.i32(3, static_cast<int32_t>(data.size()));
    h.begin_struct(5);  // DataPageHeader
    h.i32(1, static_cast<int32_t>(rows));
    h.i32(2, kPlain);
    h.i32(3, kRle);
    h.i32(4, kRle);
    h.end();
    h.end();
    chunks.push_back({static_cast<int64_t>(file.size()), static_cast<int64_t>(h.out.size() + data.size())});
    file += h.out;
    file += data;
  }
  Compact m;  // FileMetaData
  m.i32(1, 1);
  m.list(2, Compact::kStruct, columns.size() + 1);
  m.begin();  // the root
  m.binary(4, "schema");
  m.i32(5, static_cast<int32_t>(columns.size()));
  m.end();
  for (const ParquetColumn& c : columns) {
    m.begin();
    m.i32(1, physical(c.type));
    m.i32(3, c.present.empty() ? kRequired : kOptional);
    m.binary(4, c.name);
    if (c.type == ParquetColumn::Type::String) m.i32(6, kUtf8);
    m.end();
  }
  m.i64(3, static_cast<int64_t>(rows));
  m.list(4, Compact::kStruct, 1);
  m.begin();  // the row group
  int64_t total = 0;
  for (const Chunk& k : chunks) total += k.size;
  m.list(1, Compact::kStruct, columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    const ParquetColumn& c = columns[i];
    m.begin();  // ColumnChunk
    m.i64(2, chunks[i].offset);
    m.begin_struct(3);  // ColumnMetaData
    m.i32(1, physical(c.type));
    m.list(2, Compact::kI32, c.present.empty() ? 1 : 2);
    m.varint(Compact::zigzag(kPlain));
    if (!c.present.empty()) m.varint(Compact::zigzag(kRle));
    m.list(3, Compact::kBinary, 1);
    m.raw_binary(c.name);
    m.i32(4, kUncompressed);
    m.i64(5, static_cast<int64_t>(rows));
    m.i64(6, chunks[i].size);
    m.i64(7, chunks[i].size);
    m.i64(9, chunks[i].offset);
    m.end();
    m.end();
  }
  m.i64(2, total);
  m.i64(3, static_cast<int64_t>(rows));
  m.end();
  if (!metadata.empty()) {
    m.list(5, Compact::kStruct, metadata.size());
    for (const auto& [k, v] : metadata) {
      m.begin();
      m.binary(1, k);
      m.binary(2, v);
      m.end();
    }
  }
  m.binary(6, "basin");
  m.end();
  file += m.out;
  put_le<uint32_t>(file, static_cast<uint32_t>(m.out.size()));
  file += "PAR1";
  return file;
}

}  // namespace basin
