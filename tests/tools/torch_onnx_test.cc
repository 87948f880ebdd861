// Real models exported by PyTorch at test time (tests/tools/export_torch_models.py):
// torchvision's resnet18 and mobilenet_v2 and a small transformer block, each imported
// from ONNX, compiled and run by `basin run` on the exported input; the output must
// match PyTorch's own within 1e-3 of its largest value. `basin compare` runs on one of
// them too. Skips, saying why, where Debian's python3-torch, python3-torchvision or
// python3-onnx are missing (scripts/test installs them).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "core/ir/npy.h"
#include "tests/tools/run_basin.h"

namespace {

namespace fs = std::filesystem;

class TorchOnnx : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = (fs::temp_directory_path() / ("basin_torch_onnx_" + std::to_string(getpid()))).string();
    if (basin::testing::capture("/usr/bin/python3 -c 'import torch, torchvision, onnx' 2>/dev/null").code != 0) {
      skip = "Debian's python3-torch, python3-torchvision and python3-onnx are needed (scripts/test installs them)";
      return;
    }
    auto r = basin::testing::capture("/usr/bin/python3 " + std::string(BASIN_SOURCE_DIR) +
                                     "/tests/tools/export_torch_models.py " + dir + " 2>&1");
    exported = r.code == 0;
    export_log = r.out;
  }
  static void TearDownTestSuite() { fs::remove_all(dir); }
  void SetUp() override {
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_TRUE(exported) << export_log;
  }
  static void check(const std::string& name) {
    const std::string base = dir + "/" + name;
    auto r = basin::testing::run_basin(
        "run " + base + ".onnx --input " + base + ".input.npy --output " + base + ".basin.npy --quiet", true);
    ASSERT_EQ(r.code, 0) << r.out;
    basin::NDArray got = basin::read_npy(base + ".basin.npy"), want = basin::read_npy(base + ".output.npy");
    ASSERT_EQ(got.shape(), want.shape());
    basin::ErrorStats e = basin::compare_arrays(got, want);
    EXPECT_LE(e.max_rel, 1e-3) << name << ": max abs error " << e.max_abs;
  }
  static std::string dir, skip, export_log;
  static bool exported;
};

std::string TorchOnnx::dir, TorchOnnx::skip, TorchOnnx::export_log;
bool TorchOnnx::exported = false;

TEST_F(TorchOnnx, ResNet18MatchesPyTorch) { check("resnet18"); }
TEST_F(TorchOnnx, MobileNetV2MatchesPyTorch) { check("mobilenet_v2"); }
TEST_F(TorchOnnx, TransformerBlockMatchesPyTorch) { check("block"); }

TEST_F(TorchOnnx, CompareReportsLatencyAndErrorAgainstLibTorch) {
  auto r = basin::testing::run_basin("compare " + dir + "/block.onnx --json --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["latency_us"].get<double>(), 0);
  EXPECT_GT(j["torch_latency_us"].get<double>(), 0);
  EXPECT_LT(j["max_rel_error"].get<double>(), 1e-3);
}

}  // namespace
