// The measurement pool: candidates are compiled, checked and timed in a worker
// process; a kernel made to crash, one made to hang and one made to compute a wrong
// result each end as an error result while the pool goes on measuring. A batch is
// compiled ahead on several threads; a compilation that crashes or hangs there ends
// as its own program's error too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/llvm_jit.h"
#include "codegen/measure.h"
#include "core/ops/registry.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/sketch.h"
#include "tests/codegen/fault_hooks.h"

namespace basin {
namespace {

using testing::unroll_of;

// Candidates of the first sketch, each configuration drawn at random, with the given
// unroll depths.
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

// The program with unroll 16 writes a wrong value after its work (others unchanged).
LoweredFunc wrong_at_unroll_16(const LoweredFunc& f) {
  if (unroll_of(f) != 16) return f;
  LoweredFunc bad = f;
  const Buffer& out = f.params[f.output_params[0]];
  bad.body = make_seq({f.body, make_store(out, {Expr(int64_t{5})}, fconst(1234.0))});
  return bad;
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

// A network's weights are constants: a program's repacking of one is split off and run
// once before its check and timing, as the compiled network runs it; the program still
// matches the reference. Programs that repack nothing, and pools without constants,
// time the whole program.
TEST_F(Measure, AConstantWeightsRepackingRunsOnceUntimed) {
  std::vector<sched::Sketch> sketches = sched::cpu_sketches(task);
  const sched::Sketch* packed = nullptr;
  const sched::Sketch* plain = nullptr;
  for (const sched::Sketch& s : sketches) {
    if (s.pack && s.name.find("vec=j") != std::string::npos && !packed) packed = &s;  // packs w
    if (!s.pack && !plain) plain = &s;
  }
  ASSERT_TRUE(packed && plain);
  std::mt19937_64 rng(5);
  for (bool constant : {true, false}) {
    codegen::MeasureOptions opt;
    if (constant) opt.constant_inputs = {1};  // dense(x, w): the weight
    codegen::MeasurePool pool(task, sketches, opt);
    std::vector<codegen::Candidate> batch;
    for (const sched::Sketch* s : {packed, plain}) {
      const size_t index = static_cast<size_t>(s - sketches.data());
      batch.push_back({&pool.sketches()[index], sched::random_config(*s, rng)});
    }
    std::vector<codegen::MeasureResult> r = pool.measure(batch);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_TRUE(r[0].ok() && r[1].ok()) << r[0].error << r[1].error;
    EXPECT_EQ(r[0].constant_stage, constant) << packed->name;
    EXPECT_FALSE(r[1].constant_stage) << plain->name;
  }
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
  opt.program_hook = wrong_at_unroll_16;
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  auto r = pool.measure(candidates(pool, {16, 64}));
  EXPECT_NE(r[0].error.find("wrong result"), std::string::npos) << r[0].error;
  EXPECT_TRUE(r[1].ok()) << r[1].error;
  EXPECT_EQ(pool.workers_started(), 1);
}

// A batch compiled ahead on two threads gives the results one at a time would: every
// program measured from what was compiled ahead, the test hook applied to each.
TEST_F(Measure, ABatchIsCompiledAheadOnSeveralThreads) {
  codegen::MeasureOptions opt;
  opt.compile_threads = 2;
  opt.program_hook = wrong_at_unroll_16;
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  auto r = pool.measure(candidates(pool, {0, 16, 64, 0, 16}));
  ASSERT_EQ(r.size(), 5u);
  for (size_t i : {0, 2, 3}) {
    EXPECT_TRUE(r[i].ok()) << r[i].error;
    EXPECT_EQ(r[i].latencies_us.size(), 3u);
    EXPECT_GT(r[i].compile_seconds, 0);
  }
  for (size_t i : {1, 4}) EXPECT_NE(r[i].error.find("wrong result"), std::string::npos) << r[i].error;
  EXPECT_EQ(pool.measured_ahead(), 5);
  EXPECT_EQ(pool.workers_started(), 1);
  // A program asked for again runs as the worker compiled it before (no compile time).
  std::vector<codegen::Candidate> c = candidates(pool, {0, 16, 64});
  codegen::MeasureResult again = pool.measure_one(c[0]);
  EXPECT_TRUE(again.ok()) << again.error;
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.compile_seconds, 0);
  EXPECT_EQ(pool.measured_ahead(), 5);
  pool.prepare({c[0], c[2], c[0]});
  for (size_t i : {0, 2, 0}) {
    codegen::MeasureResult r = pool.measure_one(c[i]);
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_TRUE(r.reused);
  }
  EXPECT_EQ(pool.measured_ahead(), 8);
  // A new program listed twice in a batch is compiled once, for two measurements in turn.
  codegen::Candidate fresh = c[0];
  fresh.config.unroll = 64;
  pool.prepare({fresh, c[2], fresh});
  codegen::MeasureResult first = pool.measure_one(fresh), in_turn = (pool.measure_one(c[2]), pool.measure_one(fresh));
  EXPECT_TRUE(first.ok() && in_turn.ok()) << first.error << in_turn.error;
  EXPECT_FALSE(first.reused);
  EXPECT_GT(first.compile_seconds, 0);
  EXPECT_TRUE(in_turn.reused);
  EXPECT_EQ(pool.measured_ahead(), 11);
}

// The worker keeps the programs it compiled for their next measurements: the most
// recently used, and the fastest measured however long ago.
TEST_F(Measure, TheWorkerKeepsItsRecentAndItsFastestPrograms) {
  codegen::MeasureOptions opt;
  opt.compile_threads = 1;
  // Programs of unroll 64 do their work 20 times: slower, and right.
  opt.program_hook = [](const LoweredFunc& f) {
    if (unroll_of(f) != 64) return f;
    LoweredFunc slow = f;
    slow.body = make_seq(std::vector<Stmt>(20, f.body));
    return slow;
  };
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  // The first program unrolled 0, then 40 others of unroll 64.
  std::vector<codegen::Candidate> c;
  std::set<std::vector<std::vector<int64_t>>> seen;
  for (const codegen::Candidate& x : candidates(pool, std::vector<int64_t>(400, 64))) {
    if (c.empty()) {
      c.push_back(x);
      c.back().config.unroll = 0;
    } else if (seen.insert(x.config.factors).second && c.size() < 41) {
      c.push_back(x);
    }
  }
  ASSERT_EQ(c.size(), 41u);
  for (const codegen::Candidate& x : c) {
    codegen::MeasureResult r = pool.measure_one(x);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_FALSE(r.reused);
  }
  EXPECT_TRUE(pool.measure_one(c[0]).reused);      // the fastest, measured first
  EXPECT_TRUE(pool.measure_one(c.back()).reused);  // the latest
  EXPECT_FALSE(pool.measure_one(c[1]).reused);     // slow and long unused: compiled again
  EXPECT_EQ(pool.workers_started(), 1);
}

// With one compile thread nothing is compiled ahead.
TEST_F(Measure, OneCompileThreadCompilesEachProgramJustBeforeItRuns) {
  codegen::MeasureOptions opt;
  opt.compile_threads = 1;
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  for (const codegen::MeasureResult& r : pool.measure(candidates(pool, {0, 16, 64}))) EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(pool.measured_ahead(), 0);
}

// A program whose lowering or compilation kills the worker while the batch is compiled
// ahead: the batch goes to a new worker one program at a time, so the crash is that
// program's error and the others are measured.
TEST_F(Measure, ACrashWhileCompilingAheadIsItsProgramsError) {
  codegen::MeasureOptions opt;
  opt.compile_threads = 2;
  opt.program_hook = [](const LoweredFunc& f) {
    if (unroll_of(f) == 16) std::abort();
    return f;
  };
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  auto r = pool.measure(candidates(pool, {0, 16, 64}));
  EXPECT_TRUE(r[0].ok()) << r[0].error;
  EXPECT_NE(r[1].error.find("the worker died: signal"), std::string::npos) << r[1].error;
  EXPECT_TRUE(r[2].ok()) << r[2].error;
  EXPECT_EQ(pool.measured_ahead(), 0);
  EXPECT_EQ(pool.workers_started(), 3);  // the first, after the batch's crash, after the program's
}

// A compilation that runs past the timeout while the batch is compiled ahead is its
// program's timeout; the worker is replaced, and the others are compiled ahead again
// and measured. Regression: the worker ran the hook under a lock, so a program whose
// hook came after the hang's waited for it, and was killed as late too (on some hosts
// every time). Here the programs with unroll 0 wait for the hang to begin (a flag in
// memory shared with the workers), so they are compiled while it hangs.
TEST_F(Measure, ACompilationPastTheTimeoutIsItsProgramsTimeout) {
  void* shared = mmap(nullptr, sizeof(std::atomic<bool>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  std::atomic<bool>* hanging = new (shared) std::atomic<bool>(false);
  codegen::MeasureOptions opt;
  opt.compile_threads = 2;
  opt.timeout_seconds = 2;
  opt.program_hook = [hanging](const LoweredFunc& f) {
    if (unroll_of(f) == 16) {
      *hanging = true;
      std::this_thread::sleep_for(std::chrono::seconds(600));
    }
    while (unroll_of(f) == 0 && !*hanging) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return f;
  };
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  auto t0 = std::chrono::steady_clock::now();
  auto r = pool.measure(candidates(pool, {0, 16, 64, 0}));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60);
  EXPECT_TRUE(r[0].ok()) << r[0].error;
  EXPECT_NE(r[1].error.find("timeout"), std::string::npos) << r[1].error;
  EXPECT_TRUE(r[2].ok()) << r[2].error;
  EXPECT_TRUE(r[3].ok()) << r[3].error;
  EXPECT_EQ(pool.workers_started(), 2);
  EXPECT_EQ(pool.measured_ahead(), 3);
  munmap(shared, sizeof(std::atomic<bool>));
}

// A program over the instruction limit is its own error result, found by the worker's
// compile thread in the emitted code: nothing is killed, nothing waits for a timeout,
// and the batch's other programs are measured as they were compiled ahead.
TEST_F(Measure, AProgramOverTheInstructionLimitIsAnErrorWithoutCompiling) {
  std::vector<sched::Sketch> sketches = sched::cpu_sketches(task);
  std::mt19937_64 rng(5);
  sched::Config small = sched::random_config(sketches[0], rng);
  small.unroll = 0;
  sched::Config large = small;
  large.unroll = 512;
  auto size_of = [&](const sched::Config& c) {
    return codegen::compile_llvm(sched::lower_config(task, sketches[0], c))->emitted_instructions();
  };
  const int64_t small_size = size_of(small), large_size = size_of(large);
  ASSERT_LT(small_size, large_size) << "unrolling made the program no larger";
  for (int threads : {1, 2}) {
    codegen::MeasureOptions opt;
    opt.compile_threads = threads;
    opt.max_instructions = (small_size + large_size) / 2;
    codegen::MeasurePool pool(task, sketches, opt);
    const codegen::Candidate s{&pool.sketches()[0], small}, l{&pool.sketches()[0], large};
    auto t0 = std::chrono::steady_clock::now();
    auto r = pool.measure({s, l, s});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30);
    EXPECT_TRUE(r[0].ok()) << r[0].error;
    EXPECT_NE(r[1].error.find("too large to compile: " + std::to_string(large_size)), std::string::npos) << r[1].error;
    EXPECT_TRUE(r[1].latencies_us.empty());
    EXPECT_TRUE(r[2].ok()) << r[2].error;
    EXPECT_EQ(pool.workers_started(), 1);
    EXPECT_EQ(pool.measured_ahead(), threads == 2 ? 3 : 0);
  }
}

// Brief timing of slow programs (TimingOptions::slow_us): a program whose check run
// and warm-up call both take longer than slow_us is timed by those two calls, one
// round; one slow call alone (a preempted call, a cold first run) is not enough.
TEST_F(Measure, AProgramSlowerThanTheBoundIsTimedBriefly) {
  codegen::MeasurePool pool(task, sched::cpu_sketches(task));
  const codegen::Candidate c = candidates(pool, {16})[0];
  const codegen::MeasureResult full = pool.measure_one(c);
  ASSERT_TRUE(full.ok()) << full.error;
  EXPECT_FALSE(full.brief);
  EXPECT_EQ(full.latencies_us.size(), 3u);
  const codegen::MeasureResult brief = pool.measure_one(c, 1e-3);  // every program is slower
  ASSERT_TRUE(brief.ok()) << brief.error;
  EXPECT_TRUE(brief.brief);
  ASSERT_EQ(brief.latencies_us.size(), 1u);
  EXPECT_GT(brief.latencies_us[0], 0);
  const codegen::MeasureResult fast = pool.measure_one(c, 1e9);  // no program is
  ASSERT_TRUE(fast.ok()) << fast.error;
  EXPECT_FALSE(fast.brief);
  EXPECT_EQ(fast.latencies_us.size(), 3u);
}

// A call of f that takes `us` microseconds (a busy wait, so that a loaded machine
// only lengthens it).
void spin_for(double us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(Timing, BriefOnlyWhenTheWarmUpAndTheEarlierCallAreBothSlow) {
  codegen::TimingOptions opt = codegen::TimingOptions::with(1, 3, 0.001);
  opt.slow_us = 2000;
  auto timed = [&](std::vector<double> calls_us, double prior_us) {
    size_t i = 0;
    std::vector<double> rounds;
    codegen::Timing t =
        codegen::time_function([&] { spin_for(calls_us[std::min(i++, calls_us.size() - 1)]); }, opt, &rounds, prior_us);
    EXPECT_EQ(rounds.size(), t.brief ? 1u : 3u);
    return std::make_pair(t, rounds);
  };
  // Slow, and the check run slow too: one round, the faster of the two calls.
  auto [slow, slow_rounds] = timed({4000}, 3000);
  EXPECT_TRUE(slow.brief);
  EXPECT_GE(slow_rounds[0], 3000);
  EXPECT_LT(slow_rounds[0], 4000);
  EXPECT_EQ(slow.calls, 1);
  // No earlier call: the warm-up alone decides.
  EXPECT_TRUE(timed({4000}, 0).first.brief);
  // A slow check run (cold), then fast calls: the full rounds.
  EXPECT_FALSE(timed({100}, 3000).first.brief);
  // A fast check run, then one slow call (preempted): the full rounds.
  EXPECT_FALSE(timed({4000, 100}, 100).first.brief);
  // Off.
  opt.slow_us = 0;
  EXPECT_FALSE(timed({4000}, 3000).first.brief);
}

// A step before every call (a network's weights evicted from the caches) is not timed:
// each call is timed alone, and a round ends when the calls alone took its time.
TEST(Timing, TheStepBeforeEveryCallIsNotTimed) {
  codegen::TimingOptions opt = codegen::TimingOptions::with(1, 3, 0.002);
  int before = 0, calls = 0;
  opt.before_call = [&] {
    ++before;
    spin_for(1000);
  };
  std::vector<double> rounds;
  codegen::Timing t = codegen::time_function(
      [&] {
        ++calls;
        spin_for(100);
      },
      opt, &rounds);
  EXPECT_EQ(before, calls);
  EXPECT_EQ(t.calls + 1, calls);  // the warm-up call is not counted
  ASSERT_EQ(rounds.size(), 3u);
  // Timing the step would put every round past 1000 us; a preempted round (a loaded
  // machine) may pass 900 alone.
  EXPECT_LT(*std::min_element(rounds.begin(), rounds.end()), 900) << "the step's 1000 us were timed";
  EXPECT_GE(t.min_us, 100);
  // About 20 calls a round (2 ms of 100 us calls; a preempted call makes it fewer), where
  // timing the step too would give 2.
  EXPECT_GE(t.calls, 3 * 10);
}

TEST(Timing, EvictingFromTheCachesKeepsTheData) {
  std::vector<float> v(100000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  codegen::evict_from_caches(v.data() + 3, (v.size() - 3) * sizeof(float));  // an unaligned start
  codegen::evict_from_caches(v.data(), 0);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<float>(i));
}

int cpus() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Processes that spin until stopped (or destroyed): other work sharing the cores. (Processes,
// not threads: a timing's own process is not another.)
class Hogs {
 public:
  explicit Hogs(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        volatile uint64_t x = 0;
        for (;;) x = x + 1;
      }
      pids_.push_back(pid);
    }
  }
  Hogs(const Hogs&) = delete;
  Hogs& operator=(const Hogs&) = delete;
  ~Hogs() { stop(); }
  void stop() {
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;
};

// A timing during which another process took the cores is disturbed: the rule compares
// the timing thread's time on a CPU with the timing's length.
TEST(Timing, ATimingOffItsCoreATenthOfTheTimeIsDisturbed) {
  EXPECT_FALSE(codegen::disturbed_timing(0.02, 0.02));
  EXPECT_FALSE(codegen::disturbed_timing(0.96, 1.0));  // the kernel's own threads: a few percent
  EXPECT_TRUE(codegen::disturbed_timing(0.5, 1.0));    // a core shared with another process
  EXPECT_TRUE(codegen::disturbed_timing(0, 0.01));
  EXPECT_FALSE(codegen::disturbed_timing(0, 0));  // nothing timed
}

// Child processes that spin beside this one on every CPU take time slices from a thread
// that never waits: its time on a CPU falls behind the wall time.
TEST(Timing, AThreadSharingItsCoreWithAnotherProcessIsOffItAPartOfTheTime) {
  Hogs hogs(2 * cpus());
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  spin_for(300'000);
  const double cpu = thread_cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  hogs.stop();
  EXPECT_TRUE(codegen::disturbed_timing(cpu, wall)) << cpu << " s on a CPU of " << wall << " s";
}

// The pool's worker times a program again when another process took its cores, and says
// so; the result is still a latency.
TEST_F(Measure, ATimingAnotherProcessDisturbedIsRepeated) {
  codegen::MeasurePool pool(task, sched::cpu_sketches(task));
  const codegen::Candidate c = candidates(pool, {16})[0];
  Hogs hogs(2 * cpus());
  const codegen::MeasureResult r = pool.measure_one(c);
  hogs.stop();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_GT(r.disturbed, 0);
  EXPECT_LE(r.disturbed, codegen::kTimingAttempts);
  EXPECT_EQ(r.disturbed_kept(), r.disturbed == codegen::kTimingAttempts);
  EXPECT_EQ(r.latencies_us.size(), 3u);
  EXPECT_GT(r.min_us(), 0);
}

// A network whose weights exceed half the last-level cache times its tasks with them evicted
// (search::weights_exceed_cache); the results are right either way.
TEST_F(Measure, ColdConstantsAreMeasuredAndRight) {
  codegen::MeasureOptions opt;
  opt.constant_inputs = {1};
  opt.cold_constants = true;
  codegen::MeasurePool pool(task, sched::cpu_sketches(task), opt);
  for (const codegen::MeasureResult& r : pool.measure(candidates(pool, {0, 16}))) {
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_GT(r.min_us(), 0);
  }
}

}  // namespace
}  // namespace basin
