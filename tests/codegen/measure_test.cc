// The measurement pool: candidates are compiled, checked and timed in a worker
// process; a kernel made to crash, one made to hang and one made to compute a wrong
// result each end as an error result while the pool goes on measuring.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <random>

#include "codegen/llvm_jit.h"
#include "codegen/measure.h"
#include "core/ops/registry.h"
#include "core/schedule/sketch.h"
#include "tests/codegen/fault_hooks.h"

namespace basin {
namespace {

using testing::unroll_of;

// Candidates of the first sketch with the given unroll depths.
std::vector<codegen::Candidate> candidates(const codegen::MeasurePool& pool, std::vector<int64_t> unrolls) {
  std::mt19937_64 rng(3);
  std::vector<codegen::Candidate> c;
  for (int64_t u : unrolls) {
    codegen::Candidate x{&pool.sketches()[0], sched::random_config(pool.sketches()[0], rng)};
    x.config.unroll = u;
    c.push_back(x);
  }
  return c;
}

class Measure : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
    task = ops::build_op("dense", {{"M", "16"}, {"K", "32"}, {"N", "32"}});
  }
  ops::OpGraph task;
};

TEST_F(Measure, MeasuresValidCandidates) {
  codegen::MeasurePool pool(task, sched::cpu_sketches(task));
  for (const codegen::MeasureResult& r : pool.measure(candidates(pool, {0, 16, 64}))) {
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.latencies_us.size(), 3u);
    EXPECT_GT(r.min_us(), 0);
    EXPECT_GT(r.compile_seconds, 0);
  }
  EXPECT_EQ(pool.workers_started(), 1);
}

// Regression: a network's tuners each own a pool; a worker forked later once inherited
// the earlier pools' pipe ends, so stopping an earlier pool waited forever for its
// worker to see EOF.
TEST_F(Measure, APoolStopsWhileLaterPoolsLive) {
  auto first = std::make_unique<codegen::MeasurePool>(task, sched::cpu_sketches(task));
  codegen::MeasurePool second(task, sched::cpu_sketches(task));
  codegen::MeasurePool third(task, sched::cpu_sketches(task));
  auto t0 = std::chrono::steady_clock::now();
  auto done = std::async(std::launch::async, [&] { first.reset(); });
  if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "stopping the first pool hangs";
    std::_Exit(1);  // the destructor would wait forever
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30);
  EXPECT_TRUE(second.measure(candidates(second, {16}))[0].ok());
}

TEST_F(Measure, ACrashingKernelIsAnErrorAndTheWorkerIsReplaced) {
  codegen::MeasureOptions opt;
  opt.program_hook = [](const LoweredFunc& f) {
    return testing::unroll_of(f) == 16 ? testing::with_store_far_out_of_bounds(f) : f;
  };
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  auto r = pool.measure(candidates(pool, {0, 16, 64}));
  EXPECT_TRUE(r[0].ok()) << r[0].error;
  EXPECT_FALSE(r[1].ok());
  EXPECT_NE(r[1].error.find("the worker died: signal"), std::string::npos) << r[1].error;
  EXPECT_TRUE(r[2].ok()) << r[2].error;
  EXPECT_EQ(pool.workers_started(), 2);
}

TEST_F(Measure, AHangingKernelTimesOutAndTheWorkerIsReplaced) {
  codegen::MeasureOptions opt;
  opt.timeout_seconds = 2;
  opt.program_hook = [](const LoweredFunc& f) {
    if (unroll_of(f) != 16) return f;
    LoweredFunc bad = f;  // 2^50 float additions
    const Buffer& out = f.params[f.output_params[0]];
    Var i("spin");
    Stmt spin = make_for(i, Expr(int64_t{0}), Expr(int64_t{1} << 50), ForKind::Serial,
                         make_store(out, {Expr(int64_t{0})}, load(out, {Expr(int64_t{0})}) + fconst(1.0)));
    bad.body = make_seq({spin, f.body});
    return bad;
  };
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  auto r = pool.measure(candidates(pool, {16, 64}));
  EXPECT_FALSE(r[0].ok());
  EXPECT_NE(r[0].error.find("timeout"), std::string::npos) << r[0].error;
  EXPECT_TRUE(r[1].ok()) << r[1].error;
  EXPECT_EQ(pool.workers_started(), 2);
}

TEST_F(Measure, AWrongResultIsAnErrorAndTheWorkerSurvives) {
  codegen::MeasureOptions opt;
  opt.program_hook = [](const LoweredFunc& f) {
    if (unroll_of(f) != 16) return f;
    LoweredFunc bad = f;
    const Buffer& out = f.params[f.output_params[0]];
    bad.body = make_seq({f.body, make_store(out, {Expr(int64_t{5})}, fconst(1234.0))});
    return bad;
  };
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  auto r = pool.measure(candidates(pool, {16, 64}));
  EXPECT_NE(r[0].error.find("wrong result"), std::string::npos) << r[0].error;
  EXPECT_TRUE(r[1].ok()) << r[1].error;
  EXPECT_EQ(pool.workers_started(), 1);
}

}  // namespace
}  // namespace basin
