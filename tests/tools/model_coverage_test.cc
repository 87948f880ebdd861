// The small versions of the model families (docs/models.md): each committed ONNX file
// of tests/models/coverage, exported from PyTorch by bench/models/export.py with both
// exporters, is run with `basin run` on its committed inputs and must match the
// reference committed beside it (ONNX Runtime's output; PyTorch's where ONNX Runtime
// is more than 1e-4 from PyTorch) within 1e-4 of the reference's largest magnitude.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/ir/ndarray.h"
#include "core/ir/npy.h"
#include "tests/tools/run_basin.h"

namespace basin {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(BASIN_SOURCE_DIR) / "tests" / "models" / "coverage";

std::vector<std::string> models() {
  std::vector<std::string> out;
  if (!fs::exists(kDir)) return out;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".onnx") out.push_back(e.path().stem().string());  // NAME.EXPORTER
  std::sort(out.begin(), out.end());
  return out;
}

class ModelCoverage : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelCoverage, RunsAndMatchesTheReference) {
  if (!BASIN_HAVE_ONNX) GTEST_SKIP() << "built without libonnx: ONNX models cannot be imported";
  const std::string stem = GetParam();  // NAME.EXPORTER
  const std::string name = stem.substr(0, stem.find('.'));
  std::string args = "run " + (kDir / (stem + ".onnx")).string() + " --quiet";
  for (int i = 0; fs::exists(kDir / (name + ".in" + std::to_string(i) + ".npy")); ++i)
    args += " --input " + (kDir / (name + ".in" + std::to_string(i) + ".npy")).string();
  const std::string out =
      (fs::temp_directory_path() / ("basin_cov_" + std::to_string(getpid()) + "_" + stem + ".npy")).string();
  testing::Result r = testing::run_basin(args + " --output " + out, true);
  ASSERT_EQ(r.code, 0) << r.out;
  fs::path ref = kDir / (stem + ".ref.npy");
  ASSERT_TRUE(fs::exists(ref)) << ref;
  NDArray got = read_npy(out), want = read_npy(ref.string());
  fs::remove(out);
  ASSERT_EQ(got.shape(), want.shape());
  ErrorStats e = compare_arrays(got, want);
  EXPECT_LE(e.max_rel, 1e-4) << stem << ": max abs error " << e.max_abs;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(SmallFamilies, ModelCoverage, ::testing::ValuesIn(models()), test_name);

TEST(ModelCoverageSet, EveryFamilyIsPresentWithBothExporters) {
  const char* families[] = {"tiny_bert",       "tiny_distilbert", "tiny_roberta", "tiny_gpt2", "tiny_llama",
                            "tiny_t5_encoder", "tiny_t5_decoder", "tiny_vit",     "tiny_swin", "tiny_cnn_ceil"};
  for (const char* f : families)
    for (const char* e : {"legacy", "dynamo"})
      EXPECT_TRUE(fs::exists(kDir / (std::string(f) + "." + e + ".onnx"))) << f << "." << e;
}

}  // namespace
}  // namespace basin
