// .npy files, the inputs and outputs of `basin run`: every supported type round-trips,
// files written by NumPy (format 1.0, other header spacing) read, and every malformed
// or unsupported file is one ParseError naming it; random corruptions never crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/ir/npy.h"
#include "core/util/error.h"
#include "core/util/io.h"

namespace basin {
namespace {

namespace fs = std::filesystem;

struct Dir {
  std::string path = (fs::temp_directory_path() / ("basin_npy_" + std::to_string(getpid()))).string();
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& bytes) const {
    std::string p = path + "/" + name;
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }
};

// A version-1 file with the given header text (padded) and data.
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  header += std::string((64 - (prefix + header.size() + 1) % 64) % 64, ' ') + "\n";
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  uint32_t n = static_cast<uint32_t>(header.size());
  out.append(reinterpret_cast<const char*>(&n), major == 1 ? 2 : 4);
  return out + header + data;
}

TEST(Npy, EveryTypeRoundTrips) {
  Dir d;
  for (DType t : {DType::f32(), DType::f64(), DType::i64(), DType::i32(), DType::boolean()}) {
    SCOPED_TRACE(t.str());
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{}, {7}, {2, 3, 4}, {1, 0, 3}}) {
      NDArray a = t.is_bool() ? NDArray::random(t, shape, 0, 2, 3) : NDArray::random(t, shape, -5, 5, 3);
      write_npy(d.path + "/a.npy", a);
      NDArray b = read_npy(d.path + "/a.npy");
      EXPECT_EQ(b.dtype(), t);
      EXPECT_EQ(b.shape(), shape);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.nbytes()));
    }
  }
}

TEST(Npy, ReadsNumPysOwnSpellings) {
  Dir d;
  float v[3] = {1.5f, -2, 3};
  std::string data(reinterpret_cast<const char*>(v), sizeof v);
  NDArray a = read_npy(d.file("np1.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data)));
  EXPECT_EQ(a.shape(), std::vector<int64_t>{3});
  EXPECT_EQ(a.get(0), 1.5);
  NDArray b = read_npy(d.file("np2.npy", npy("{'descr':'<f4','fortran_order':False,'shape':(1, 3)}", data, 2)));
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(b.get(2), 3.0);
  // As numpy reads the header (a Python literal): double quotes, a repeated key's last
  // value, Fortran order (the first index fastest in the file).
  float w[6] = {0, 3, 1, 4, 2, 5};  // [[0, 1, 2], [3, 4, 5]] in Fortran order
  std::string wd(reinterpret_cast<const char*>(w), sizeof w);
  NDArray f = read_npy(d.file("f.npy", npy("{\"descr\": \"<f4\", \"fortran_order\": True, \"shape\": (2, 3)}", wd)));
  ASSERT_EQ(f.shape(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f.get(i), i) << i;
  NDArray r =
      read_npy(d.file("r.npy", npy("{'descr': '<i4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", wd)));
  EXPECT_EQ(r.dtype(), DType::f32());
  EXPECT_EQ(r.get(1), 3.0);
}

TEST(Npy, MalformedFilesAreOneParseErrorNamingTheFile) {
  Dir d;
  float v[4] = {};
  std::string data(reinterpret_cast<const char*>(v), sizeof v);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty.npy", ""},
      {"magic.npy", "not numpy at all, just text"},
      {"version.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", data, 9)},
      {"big_endian.npy", npy("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", data)},
      {"float16.npy", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (8,), }", data)},
      {"extra_key.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", data)},
      {"no_order.npy", npy("{'descr': '<f4', 'shape': (4,)}", data)},
      {"order_word.npy", npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (4,)}", data)},
      {"after.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} x", data)},
      {"structured.npy", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,)}", data)},
      {"short_data.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", data)},
      {"huge_shape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000000000), }", data)},
      {"endless_extent.npy",
       npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", data)},
      {"no_shape.npy", npy("{'descr': '<f4', 'fortran_order': False}", data)},
      // A negative extent (once read as positive), a non-integer one, an empty one.
      {"negative_extent.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", data)},
      {"negative_pair.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -2), }", data)},
      {"float_extent.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4.0,), }", data)},
      {"empty_extent.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,2), }", data)},
      {"truncated_header.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", data).substr(0, 30)},
  };
  for (const auto& [name, bytes] : cases) {
    SCOPED_TRACE(name);
    std::string path = d.file(name, bytes);
    try {
      read_npy(path);
      ADD_FAILURE() << "read without error";
    } catch (const ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_npy(d.path + "/missing.npy"), NotFoundError);
}

TEST(Npy, CorruptedFilesNeverCrashTheReader) {
  Dir d;
  NDArray a = NDArray::random(DType::f32(), {3, 5}, -1, 1, 1);
  write_npy(d.path + "/good.npy", a);
  std::ifstream f(d.path + "/good.npy", std::ios::binary);
  std::string good((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bad = good;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 3); ++e) {
      size_t at = rng() % bad.size();
      if (trial % 2) bad[at] = static_cast<char>(rng());
      else bad.erase(at, 1 + rng() % 8);
    }
    try {
      read_npy(d.file("fuzz.npy", bad));
    } catch (const ParseError&) {
    }
  }
}

// read_rest, which the file loaders share: the bytes after the stream's position, from
// a file in one read (zero bytes included) and from a stream that cannot seek.
TEST(ReadRest, ReadsTheRestOfAFileOrOfAStreamThatCannotSeek) {
  Dir d;
  std::string body(300000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131 % 251);
  std::ifstream f(d.file("rest.bin", "header line\n" + body), std::ios::binary);
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "header line");
  EXPECT_EQ(read_rest(f), body);
  EXPECT_EQ(read_rest(f), "");  // at the end
  // A buffer with no seeking (as a pipe's): tellg() fails.
  struct Unseekable : std::streambuf {
    explicit Unseekable(std::string& s) { setg(s.data(), s.data(), s.data() + s.size()); }
  };
  std::string bytes = "head\n" + body;
  Unseekable buf(bytes);
  std::istream in(&buf);
  std::getline(in, line);
  EXPECT_EQ(read_rest(in), body);
}

}  // namespace
}  // namespace basin
