// The C++ API example of the user guide (docs/examples/tune_network.cc, <basin/basin.h>
// alone), run on a small ONNX model for a few seconds: it tunes, compiles, saves, runs
// and prints the output. Built in the tree, and built again as a project of its own
// against the package `cmake --install` writes (find_package(basin)).
// 8 seconds leave a margin for each of the 3 tasks to get its first round: with 3, an
// intermediate pretrained MLP (feature set 3) left one or two tasks untuned, as its
// first picks on these tiny nests (unroll 512) compiled 2.6 times as long (64
// programs: 4.6 s against 1.7 s).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "codegen/network.h"
#include "tests/tools/run_basin.h"

#if BASIN_HAVE_ONNX
#include "tests/core/onnx_builder.h"
#endif

namespace {

namespace fs = std::filesystem;

TEST(CppExample, TunesCompilesAndRunsAnOnnxModel) {
#if !BASIN_HAVE_ONNX
  GTEST_SKIP() << "built without libonnx";
#else
  std::string dir = (fs::temp_directory_path() / ("basin_example_" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  basin::testing::small_cnn().save(dir + "/cnn.onnx");
  auto r = basin::testing::capture("cd " + dir + " && " + BASIN_BINARY_DIR +
                                   "/bin/tune_network_example cnn.onnx 8 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("small_cnn: output [1, 10]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 of 3 tasks untuned"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir + "/example.db"));
  basin::codegen::CompiledNetwork net = basin::codegen::CompiledNetwork::load(dir + "/example.basin");
  EXPECT_EQ(net.kernels(), 3);
  fs::remove_all(dir);
#endif
}

// The example as a user builds it: basin installed under a prefix, the example's own
// CMake project finding it there, the program run from outside both trees.
TEST(CppExample, BuildsAgainstTheInstalledPackage) {
#if !BASIN_HAVE_ONNX
  GTEST_SKIP() << "built without libonnx";
#else
  const std::string dir = (fs::temp_directory_path() / ("basin_installed_" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  auto sh = [&](const std::string& cmd) { return basin::testing::capture("(" + cmd + ") 2>&1"); };
  auto r = sh(std::string("cmake --install ") + BASIN_BINARY_DIR + " --prefix " + dir + "/prefix");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir + "/prefix/include/basin/basin.h"));
  EXPECT_FALSE(fs::exists(dir + "/prefix/include/basin/core")) << "internal headers are not installed";
  // The compiler that built basin (and, in the sanitizer build, its runtimes).
  const std::string flags = BASIN_SANITIZER_FLAGS;
  r = sh(std::string("cmake -S ") + BASIN_SOURCE_DIR + "/docs/examples -B " + dir + "/build -DCMAKE_PREFIX_PATH=" +
         dir + "/prefix -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=" + BASIN_CXX_COMPILER +
         (flags.empty() ? "" : " '-DCMAKE_CXX_FLAGS=" + flags + "'") + " && cmake --build " + dir + "/build");
  ASSERT_EQ(r.code, 0) << r.out;
  basin::testing::small_cnn().save(dir + "/cnn.onnx");
  r = basin::testing::capture("cd " + dir + " && " + dir + "/build/tune_network cnn.onnx 4 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("small_cnn: output [1, 10]"), std::string::npos) << r.out;
  // A user error is one line on stderr and a failing exit status.
  r = basin::testing::capture("cd " + dir + " && " + dir + "/build/tune_network missing.onnx 1 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing.onnx"), std::string::npos) << r.out;
  fs::remove_all(dir);
#endif
}

}  // namespace
