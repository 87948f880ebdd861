// The gradient search's proposals for fixed seeds, summarized by one digest: a change
// that only moves or reorganizes the search (the descent, the proposal sources, their
// composition in search/gradient.cc) leaves it as it is. A change meant to change what
// the search proposes updates kDigest (the failure prints the new one) and says why in
// its commit message.
//
// The ctest entry pins what proposals depend on besides the code (tests/CMakeLists.txt):
// AVX2's vector registers (BASIN_VECTOR_ISA), two kernel threads, OpenBLAS's Haswell
// kernels and LibTorch's AVX2 ones on one thread each, so that every x86 host with AVX2
// proposes the same programs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/util/sha256.h"
#include "models/estimator.h"
#include "search/space.h"
#include "search/strategy.h"
#include "tests/search/search_test_util.h"

using namespace basin;
using namespace basin::search_test;

namespace {

// Recorded when the register-tile model came to count the operand values a tile's
// loop order keeps live and the filled tiles came to be ordered by pace (before it:
// 5508027ac139eeba, unchanged from 6ae14ec through the proposal sources' move into
// files of their own).
const char* const kDigest = "bb18e12e8c3a3d44";

TEST(Proposals, TheGradientSearchProposesTheRecordedPrograms) {
  if (!std::getenv("BASIN_PINNED_PROPOSALS")) GTEST_SKIP() << "run it through ctest, whose entry pins the CPU";
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  ASSERT_TRUE(mlp->ready()) << "the pretrained CPU MLP is missing";
  std::string all;
  for (const ops::OpGraph& g : move_tasks()) {
    search::TaskSpace space(g);
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    for (int batch = 0; batch < 3; ++batch) {
      std::unique_ptr<search::Strategy> s = search::make_strategy("gradient");
      std::mt19937_64 rng(7 + batch);
      search::SearchState state{space, mlp.get(), history, measured, rng};
      std::vector<search::Candidate> got = s->propose(state, 16);
      // Measured with made-up latencies that favour some sketches and tiles over others.
      for (size_t i = 0; i < got.size(); ++i) {
        all += got[i].json + "\n";
        const double latency = 100.0 + 17.0 * static_cast<double>((got[i].json.size() * 31 + i * 7) % 23);
        if (measured.insert(got[i].json).second) history.push_back({got[i], latency});
      }
      all += "--\n";
    }
  }
  const std::string digest = sha256_hex(all).substr(0, 16);
  EXPECT_EQ(digest, kDigest) << "the proposals changed; their new digest is " << digest;
}

}  // namespace
