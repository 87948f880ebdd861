// The task scheduler across a network's tasks: every task gets programs, the trial
// budget is the network's, a run resumes from its records, a task with no valid
// program is retired without stalling the others, and compilation names every task
// left untuned.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "codegen/llvm_jit.h"
#include "codegen/network.h"
#include "core/graph/fusion.h"
#include "core/graph/passes.h"
#include "core/graph/zoo.h"
#include "core/util/hardware.h"
#include "core/util/host.h"
#include "search/network.h"
#include "search/space.h"

namespace basin::search {
namespace {

namespace fs = std::filesystem;
using I = std::vector<int64_t>;

// Three distinct tasks: conv+bias+relu (twice), a pooling, a dense+bias.
graph::Partition small_partition(graph::Graph* keep = nullptr) {
  graph::Graph g;
  g.name = "tiny";
  graph::NetBuilder b(g, 4);
  int x = g.add_input("x", {1, 4, 8, 8});
  for (int i = 0; i < 2; ++i) x = b.op("relu", {b.conv(x, 4, {3}, {1, 1}, {1, 1}, 1, true)});
  int p = b.op("global_avg_pool2d", {x});
  g.add_output(b.dense(b.op("flatten", {p}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}}), 6));
  g = graph::optimize(g);
  graph::Partition part = graph::partition(g);
  if (keep) *keep = std::move(g);
  return part;
}

class NetworkTune : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
    dir = (fs::temp_directory_path() / ("basin_nettune_" + std::to_string(getpid()))).string();
    fs::create_directories(dir);
  }
  void TearDown() override {
    if (!dir.empty()) fs::remove_all(dir);
  }
  std::string dir;
};

TEST_F(NetworkTune, SpreadsATrialBudgetAndResumes) {
  graph::Graph g;
  graph::Partition p = small_partition(&g);
  ASSERT_EQ(p.tasks.size(), 3u);
  EXPECT_EQ(p.tasks[0].weight, 2);
  RecordStore store(dir + "/r.db");
  NetworkTuneOptions opt;
  opt.strategy = "random";
  opt.budget.trials = 18;
  opt.task.batch = 4;
  NetworkTuneResult r = tune_network(p, store, opt);
  EXPECT_EQ(r.trials, 18);
  EXPECT_EQ(r.measured, 18);
  EXPECT_EQ(r.resumed, 0);
  ASSERT_EQ(r.tasks.size(), 3u);
  double estimate = 0;
  for (const TaskReport& t : r.tasks) {
    EXPECT_GE(t.trials, 4) << t.label;  // every task had its first round
    EXPECT_GT(t.best_us, 0) << t.label;
    estimate += t.weight * t.best_us;
  }
  EXPECT_NEAR(r.estimated_latency_us, estimate, 1e-6 * estimate);
  ASSERT_GE(r.curve.size(), 2u);
  // Trials only grow. The estimate can rise as well as fall: each task's best is
  // measured again every round (docs/search.md, "Confirmation").
  for (size_t i = 1; i < r.curve.size(); ++i) EXPECT_GE(r.curve[i].trials, r.curve[i - 1].trials);
  EXPECT_NEAR(r.curve.back().estimated_us, r.estimated_latency_us, 1e-6 * estimate);
  // Every task is tuned: compilation uses the records, nothing is reported untuned.
  std::vector<int> untuned;
  std::vector<codegen::ProgramChoice> c = choose_programs(p, &store, "llvm", &untuned);
  EXPECT_TRUE(untuned.empty());
  for (const auto& x : c) EXPECT_TRUE(x.tuned);
  codegen::CompiledNetwork net = codegen::CompiledNetwork::compile(g, p, c);
  NDArray in = NDArray::random(DType::f32(), {1, 4, 8, 8}, -1, 1, 2);
  ErrorStats e = compare_arrays(net.run({in})[0], graph::interpret_graph(g, {in})[0]);
  EXPECT_LT(e.max_rel, 1e-4);

  // The same budget again: everything is in the file, nothing is measured.
  NetworkTuneResult again = tune_network(p, store, opt);
  EXPECT_EQ(again.resumed, 18);
  EXPECT_EQ(again.measured, 0);
  // A larger budget measures only the difference.
  opt.budget.trials = 26;
  NetworkTuneResult more = tune_network(p, store, opt);
  EXPECT_EQ(more.resumed, 18);
  EXPECT_EQ(more.measured, 8);
  EXPECT_EQ(more.trials, 26);
}

// The first round of every task is short (first_batch programs), so that every task has
// a measured program early; a later round measures up to twice the programs its task
// has, so the rounds grow to the full batch.
TEST_F(NetworkTune, EveryTaskFirstGetsAShortRound) {
  graph::Partition p = small_partition();
  RecordStore store(dir + "/r.db");
  NetworkTuneOptions opt;
  opt.strategy = "random";
  opt.task.batch = 8;
  opt.first_batch = 2;
  opt.budget.trials = 6;
  NetworkTuneResult r = tune_network(p, store, opt);
  ASSERT_EQ(r.tasks.size(), 3u);
  for (const TaskReport& t : r.tasks) {
    EXPECT_EQ(t.trials, 2) << t.label;
    EXPECT_GT(t.best_us, 0) << t.label;
  }
  opt.budget.trials = 10;  // one more round: twice the task's 2 programs
  NetworkTuneResult more = tune_network(p, store, opt);
  EXPECT_EQ(more.measured, 4);
  int grown = 0;
  for (const TaskReport& t : more.tasks) grown += t.trials == 6;
  EXPECT_EQ(grown, 1);
  opt.budget.trials = 18;  // that task's next round is the full batch of 8
  NetworkTuneResult full = tune_network(p, store, opt);
  EXPECT_EQ(full.measured, 8);
  int at_full = 0;
  for (const TaskReport& t : full.tasks) at_full += t.trials == 14;
  EXPECT_EQ(at_full, 1);
}

// Every program of every task takes 0.3 s more (after its measurement).
void slow_programs(NetworkTuneOptions& opt) {
  opt.task_options = [](size_t, TuneOptions& to) {
    to.progress = [](int, int, double, double) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); };
  };
}

// A budget too small for every task's full first round still leaves each task a
// measured program: a first round takes its task's share of the trials left, and ends
// by its task's share of the seconds left (a GPU's trials are slow; a network has
// many tasks).
TEST_F(NetworkTune, ASmallBudgetIsSharedByTheFirstRounds) {
  graph::Partition p = small_partition();
  {
    RecordStore store(dir + "/trials.db");
    NetworkTuneOptions opt;
    opt.strategy = "random";
    opt.task.batch = 16;  // the first rounds' 16 programs each would leave tasks 1 and 2 none
    opt.budget.trials = 7;
    NetworkTuneResult r = tune_network(p, store, opt);
    EXPECT_EQ(r.trials, 7);
    for (const TaskReport& t : r.tasks) {
      EXPECT_GE(t.trials, 2) << t.label;
      EXPECT_GT(t.best_us, 0) << t.label;
    }
  }
  RecordStore store(dir + "/seconds.db");
  NetworkTuneOptions opt;
  opt.strategy = "random";
  opt.task.batch = 16;
  opt.budget.seconds = 3;
  slow_programs(opt);  // 16 of them, 4.8 s
  NetworkTuneResult r = tune_network(p, store, opt);
  for (const TaskReport& t : r.tasks) {
    EXPECT_GT(t.best_us, 0) << t.label;
    EXPECT_LT(t.trials, 16) << t.label;
  }
  EXPECT_GT(r.estimated_latency_us, 0);
}

// Regression: the first rounds overran their slices of a small budget (a slice's
// compilations on a loaded machine), and the tasks left when it was spent had no round
// and no program (a 6-second tuning beside another test: "a task has no program").
// Each gets its first round once the budget is spent, until it has a valid program.
TEST_F(NetworkTune, TasksLeftWhenTheBudgetIsSpentStillGetAProgram) {
  graph::Partition p = small_partition();
  RecordStore store(dir + "/late.db");
  NetworkTuneOptions opt;
  opt.strategy = "random";
  opt.task.batch = 8;
  opt.budget.seconds = 0.2;
  slow_programs(opt);  // the first task's round alone spends the budget
  NetworkTuneResult r = tune_network(p, store, opt);
  ASSERT_EQ(r.tasks.size(), 3u);
  for (const TaskReport& t : r.tasks) {
    EXPECT_GT(t.best_us, 0) << t.label;
    EXPECT_LE(t.trials, 8) << t.label;
  }
  EXPECT_GT(r.estimated_latency_us, 0);
  // A stopped run gives no late rounds.
  RecordStore stopped_store(dir + "/stopped.db");
  opt.stop = [] { return true; };
  NetworkTuneResult s = tune_network(p, stopped_store, opt);
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.trials, 0);
}

// The settling contests come out of a seconds budget: the reserve is each task's
// settle_programs x confirm measurements at its mean measurement time, at most a tenth
// of the budget; none without a seconds budget, confirmation or a contest of two.
TEST(SettleReserve, IsEachTasksMeasurementsAtItsMeanTimeAtMostATenthOfTheBudget) {
  TuneResult a, b, untouched;
  a.measured = 8, a.confirmations = 2, a.best_remeasurements = 0, a.measure_seconds = 1.0;  // 0.1 s each
  b.measured = 3, b.confirmations = 0, b.best_remeasurements = 1, b.measure_seconds = 0.2;  // 0.05 s each
  untouched.measure_seconds = 5;  // resumed, nothing measured now: no contest
  EXPECT_NEAR(settle_reserve_seconds({&a, &b, &untouched}, 3, 2, 100), 6 * 0.1 + 6 * 0.05, 1e-9);
  EXPECT_NEAR(settle_reserve_seconds({&a, &b}, 3, 2, 5), 0.5, 1e-9);  // a tenth of 5 s
  EXPECT_EQ(settle_reserve_seconds({&a, &b}, 3, 2, 0), 0);            // a trials budget
  EXPECT_EQ(settle_reserve_seconds({&a, &b}, 1, 2, 100), 0);          // no contest of one
  EXPECT_EQ(settle_reserve_seconds({&a, &b}, 3, 0, 100), 0);          // no confirmation
  EXPECT_EQ(settle_reserve_seconds({}, 3, 2, 100), 0);
}

// The report names the tasks whose settling contest ran: a trials budget leaves time
// for every task's, and the tasks with two confirmed programs or more hold one.
TEST_F(NetworkTune, TheReportSaysWhichTasksSettled) {
  graph::Partition p = small_partition();
  RecordStore store(dir + "/trials.db");
  NetworkTuneOptions opt;
  opt.strategy = "random";
  opt.task.batch = 8;
  opt.budget.trials = 48;
  NetworkTuneResult r = tune_network(p, store, opt);
  int settled = 0;
  for (const TaskReport& t : r.tasks) settled += t.settled;
  EXPECT_GT(settled, 0);
  opt.task.settle_programs = 1;  // no contest of one program
  RecordStore none(dir + "/none.db");
  for (const TaskReport& t : tune_network(p, none, opt).tasks) EXPECT_FALSE(t.settled) << t.label;
}

// The network's constant bytes: each task's constant inputs times its groups. Weights
// beyond the last-level cache make every task's tuner time its programs with them
// evicted; a small network's stay cached.
TEST_F(NetworkTune, WeightsBeyondTheCacheAreTimedCold) {
  graph::Partition p = small_partition();
  // conv weights [4, 4, 3, 3] and biases [4, 1, 1] twice, dense [6, 4] and its bias [6].
  EXPECT_DOUBLE_EQ(constant_bytes(p), 4.0 * (2 * (144 + 4) + 24 + 6));
  EXPECT_FALSE(weights_exceed_cache(p));
  std::vector<bool> cold;
  RecordStore store(dir + "/r.db");
  NetworkTuneOptions opt;
  opt.strategy = "random";
  opt.budget.trials = 3;
  opt.task.batch = 1;
  opt.task_options = [&](size_t, TuneOptions& to) { cold.push_back(to.cold_constants); };
  tune_network(p, store, opt);
  EXPECT_EQ(cold, std::vector<bool>(3, false));
  // Cold from half the last-level cache on: task 0's constants are 4 x 148 bytes a group.
  const int64_t llc = effective_cache_bytes();
  EXPECT_GE(llc, int64_t{1} << 20);
  EXPECT_LE(llc, last_level_cache_bytes() > 0 ? last_level_cache_bytes() : int64_t{32} << 20);
  const double others = constant_bytes(p) - 4.0 * 148 * p.tasks[0].weight;
  graph::Partition big = p;
  big.tasks[0].weight = static_cast<int>((0.5 * static_cast<double>(llc) - others) / (4 * 148)) - 1;
  EXPECT_FALSE(weights_exceed_cache(big));
  big.tasks[0].weight += 2;
  EXPECT_TRUE(weights_exceed_cache(big));
  cold.clear();
  opt.budget.trials = 6;
  tune_network(big, store, opt);
  EXPECT_EQ(cold, std::vector<bool>(3, true));
}

// Networks merged for one tuning run (a range's buckets) read the weights of one of them
// per run: their constant bytes are the most of one, not the merged weights' sum (which
// counts each bucket's share of the calls and timed every bucket's programs cold).
TEST_F(NetworkTune, MergedNetworksCountTheWeightsOfOneRun) {
  graph::Partition p = small_partition();
  graph::Partition bigger = p;
  bigger.tasks[0].weight *= 2;
  const graph::Partition merged = merge_partitions({&p, &bigger}, {1000000, 1000000});
  EXPECT_DOUBLE_EQ(constant_bytes(merged), constant_bytes(bigger));
  EXPECT_GT(constant_bytes(bigger), constant_bytes(p));
  EXPECT_FALSE(weights_exceed_cache(merged));
  // Merged once more, the bytes stay those of the largest network.
  const graph::Partition again = merge_partitions({&merged, &p}, {7, 7});
  EXPECT_DOUBLE_EQ(constant_bytes(again), constant_bytes(bigger));
}

TEST_F(NetworkTune, ATaskWithNoValidProgramIsRetiredWithoutStallingTheOthers) {
  graph::Partition p = small_partition();
  RecordStore store(dir + "/r.db");
  NetworkTuneOptions opt;
  opt.strategy = "random";
  opt.budget.trials = 40;
  opt.task.batch = 3;
  std::vector<std::string> logs;
  opt.task.log = [&](const std::string& line) { logs.push_back(line); };
  // Task 1's programs all compute a wrong value: none is ever valid.
  opt.task_options = [](size_t task, TuneOptions& to) {
    if (task != 1) return;
    to.program_hook = [](const LoweredFunc& f) {
      LoweredFunc bad = f;
      const Buffer& out = f.params[f.output_params[0]];
      bad.body = make_seq({f.body, make_store(out, {Expr(int64_t{0})}, fconst(1e6))});
      return bad;
    };
  };
  NetworkTuneResult r = tune_network(p, store, opt);
  EXPECT_TRUE(r.tasks[1].retired);
  EXPECT_EQ(r.tasks[1].best_us, 0);
  EXPECT_EQ(r.tasks[1].errors, r.tasks[1].measured);
  EXPECT_LE(r.tasks[1].rounds, 3);
  EXPECT_EQ(r.trials, 40);  // the budget went to the others
  EXPECT_GT(r.tasks[0].best_us, 0);
  EXPECT_GT(r.tasks[2].best_us, 0);
  EXPECT_EQ(r.estimated_latency_us, 0);  // no estimate while a task has no program
  bool named = false;
  for (const auto& l : logs)
    named |= l.find("retired") != std::string::npos && l.find(p.tasks[1].label) != std::string::npos;
  EXPECT_TRUE(named);
  // Compilation names the untuned task and falls back to its default program.
  std::vector<int> untuned;
  std::vector<codegen::ProgramChoice> c = choose_programs(p, &store, "llvm", &untuned);
  EXPECT_EQ(untuned, std::vector<int>{1});
  EXPECT_FALSE(c[1].tuned);
  EXPECT_TRUE(c[0].tuned);
}

TEST_F(NetworkTune, ATimeBudgetStopsTheRun) {
  graph::Partition p = small_partition();
  RecordStore store(dir + "/r.db");
  NetworkTuneOptions opt;
  opt.strategy = "random";
  opt.budget.seconds = 3;
  opt.task.batch = 2;
  NetworkTuneResult r = tune_network(p, store, opt);
  EXPECT_GT(r.measured, 0);
  EXPECT_LT(r.seconds, 3 + 10.0);  // at most one program past the budget (timeout 10 s)
  EXPECT_GE(r.overhead_fraction, 0);
  EXPECT_LE(r.overhead_fraction, 1);
  // The wall time's parts: measuring, proposing, estimator updates (the tasks' sums)
  // and the tuners' start, disjoint and within it.
  EXPECT_GT(r.measure_seconds, 0);
  EXPECT_GT(r.propose_seconds, 0);
  EXPECT_GT(r.setup_seconds, 0);
  EXPECT_GE(r.update_seconds, 0);
  EXPECT_LE(r.measure_seconds + r.propose_seconds + r.update_seconds + r.setup_seconds, r.seconds);
}

TEST_F(NetworkTune, BadOptionsAreRejected) {
  graph::Partition p = small_partition();
  RecordStore store(dir + "/r.db");
  NetworkTuneOptions opt;
  EXPECT_THROW(tune_network(p, store, opt), Error);  // no budget
  opt.budget.trials = 4;
  opt.task.batch = 0;
  EXPECT_THROW(tune_network(p, store, opt), Error);
  opt.task.batch = 2;
  opt.first_batch = -1;
  EXPECT_THROW(tune_network(p, store, opt), Error);
  opt.first_batch = 0;
  opt.strategy = "no_such_strategy";
  EXPECT_THROW(tune_network(p, store, opt), Error);
  // No records at all: every task is named untuned.
  std::vector<int> untuned;
  choose_programs(p, nullptr, "llvm", &untuned);
  EXPECT_EQ(untuned, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace basin::search

namespace basin::search {
namespace {

// A dense layer at M rows (a shape bucket of a range of M).
graph::Partition dense_at(int64_t m, graph::Graph* keep) {
  graph::Graph g;
  graph::NetBuilder b(g, 4);
  g.add_output(b.op("relu", {b.dense(g.add_input("x", {m, 40}), 24)}));
  *keep = graph::optimize(g);
  return graph::partition(*keep);
}

// The buckets of a range tuned as one partition: weights scaled by each bucket's, one
// operator chain's tasks one estimator family (the bucket extents masked, the others
// kept), tuned with the family's estimator shared.
TEST(RangeTuning, BucketsMergeWithTheirWeightsAndShareAnEstimatorPerChain) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  graph::Graph g8, g16;
  graph::Partition p8 = dense_at(8, &g8), p16 = dense_at(16, &g16);
  const graph::Partition merged = merge_partitions({&p8, &p16}, {3, 1});
  ASSERT_EQ(merged.tasks.size(), 2u);
  EXPECT_EQ(merged.tasks[0].weight, 3 * p8.tasks[0].weight);
  EXPECT_EQ(merged.tasks[1].weight, p16.tasks[0].weight);
  const std::vector<std::string> f = range_families(merged, {8, 16});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0], f[1]) << f[0] << " / " << f[1];
  EXPECT_NE(f[0].find('#'), std::string::npos) << f[0];
  EXPECT_NE(f[0].find("24"), std::string::npos) << f[0];  // not a bucket extent: kept
  EXPECT_NE(range_families(merged, {8})[0], range_families(merged, {8})[1]);
  const std::string dir = (fs::temp_directory_path() / ("basin_rangetune_" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  {
    RecordStore store(dir + "/r.db");
    NetworkTuneOptions opt;
    opt.budget.trials = 16;
    opt.task.batch = 4;
    opt.estimator_family = f;
    NetworkTuneResult r = tune_network(merged, store, opt);
    EXPECT_EQ(r.trials, 16);
    for (const TaskReport& t : r.tasks) EXPECT_GT(t.best_us, 0) << t.label;
    opt.estimator_family = {"only one"};
    EXPECT_THROW(tune_network(merged, store, opt), InternalError);
  }
  fs::remove_all(dir);
}

// The family sweep: a bucket's task measures the best program of its family's most tuned
// task, fitted to its own extents (TaskTuner::seed), and, tuned by its first round only,
// four proposals of the family's estimator; here due as soon as the first rounds are
// done.
TEST(RangeTuning, TheFamilySweepMeasuresOtherBucketsBestPrograms) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  graph::Graph g8, g64;
  graph::Partition p8 = dense_at(8, &g8), p64 = dense_at(64, &g64);
  const graph::Partition merged = merge_partitions({&p8, &p64}, {1, 64});
  ASSERT_EQ(merged.tasks.size(), 2u);
  const std::string dir = (fs::temp_directory_path() / ("basin_sweep_" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  {
    RecordStore store(dir + "/r.db");
    NetworkTuneOptions opt;
    opt.budget.trials = 16;
    opt.first_batch = 3;
    opt.task.batch = 4;
    opt.family_sweep = 1.0;
    opt.kin_seeds = 0;  // the sweep alone
    opt.estimator_family = range_families(merged, {8, 64});
    std::vector<std::string> lines;
    opt.task.log = [&](const std::string& l) { lines.push_back(l); };
    tune_network(merged, store, opt);
    // Both tasks had their first round only: each queues its others' best (at most one
    // each) and four proposals, 8 to 10 in all, at most 2 without the proposals.
    int queued = -1;
    for (const std::string& l : lines)
      if (size_t at = l.find(" of "); l.find("family sweep: ") != std::string::npos && at != std::string::npos)
        queued = std::stoi(l.substr(at + 4));
    EXPECT_GE(queued, 8);
    // The 8-row task's fourth program is one of the 64-row task's first three, fitted.
    TaskSpace small(merged.tasks[0].graph, "llvm", "");
    std::vector<Record> big = store.task_records(merged.tasks[1].key, "llvm"),
                        mine = store.task_records(merged.tasks[0].key, "llvm");
    auto by_id = [](const Record& a, const Record& b) { return a.id < b.id; };
    std::sort(big.begin(), big.end(), by_id);
    std::sort(mine.begin(), mine.end(), by_id);
    ASSERT_GE(big.size(), 3u);
    ASSERT_GE(mine.size(), 4u);
    std::set<std::string> fitted;
    for (size_t k = 0; k < 3; ++k)
      for (const sched::Sketch& s : small.sketches())
        if (std::optional<sched::Config> c = sched::fit_config(s, big[k].config))
          fitted.insert(sched::config_to_json(s, *c));
    EXPECT_TRUE(fitted.count(mine[3].config)) << mine[3].config;
    // Tuned by its first round only, it also measured its family estimator's proposals.
    EXPECT_GE(mine.size(), 3u + 1 + 4);
    // Without families, no sweep.
    lines.clear();
    opt.estimator_family.clear();
    tune_network(merged, store, opt);
    for (const std::string& l : lines) EXPECT_EQ(l.find("family sweep"), std::string::npos) << l;
  }
  fs::remove_all(dir);
}

// Three convolutions with their ReLU (3x3 at 4 and 8 channels in, a 1x1 at 8), a
// pooling and a dense layer: the convolutions are one chain at other extents.
graph::Partition conv_chain(graph::Graph* keep) {
  graph::Graph g;
  g.name = "chain";
  graph::NetBuilder b(g, 5);
  int x = g.add_input("x", {1, 4, 8, 8});
  x = b.op("relu", {b.conv(x, 8, {3}, {1, 1}, {1, 1}, 1, true)});
  x = b.op("relu", {b.conv(x, 8, {3}, {1, 1}, {1, 1}, 1, true)});
  x = b.op("relu", {b.conv(x, 24, {1}, {1, 1}, {0, 0}, 1, true)});
  int p = b.op("global_avg_pool2d", {x});
  g.add_output(b.dense(b.op("flatten", {p}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}}), 6));
  *keep = graph::optimize(g);
  return graph::partition(*keep);
}

// A task's kin: the tasks of its key but for the numbers, the nearest first.
TEST(KinTasks, AreTheSameChainAtOtherExtentsNearestFirst) {
  graph::Graph g;
  const graph::Partition p = conv_chain(&g);
  std::vector<size_t> convs;
  for (size_t i = 0; i < p.tasks.size(); ++i)
    if (p.tasks[i].label.rfind("conv2d", 0) == 0) convs.push_back(i);
  ASSERT_EQ(convs.size(), 3u);
  const std::vector<std::vector<size_t>> kin = kin_tasks(p, 5);
  ASSERT_EQ(kin.size(), p.tasks.size());
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const bool conv = std::find(convs.begin(), convs.end(), i) != convs.end();
    EXPECT_EQ(kin[i].size(), conv ? 2u : 0u) << p.tasks[i].label;
    for (size_t j : kin[i]) EXPECT_NE(std::find(convs.begin(), convs.end(), j), convs.end()) << p.tasks[j].label;
  }
  // The second 3x3 is nearer the first than the 1x1 is.
  ASSERT_EQ(kin[convs[0]].size(), 2u);
  EXPECT_EQ(kin[convs[0]][0], convs[1]);
  EXPECT_EQ(kin_tasks(p, 1)[convs[0]], std::vector<size_t>{convs[1]});
  EXPECT_TRUE(kin_tasks(p, 0)[convs[0]].empty());
}

// A task's first round starts with its kin's best program so far, fitted to its extents;
// kin_seeds = 0 seeds nothing.
TEST_F(NetworkTune, AFirstRoundStartsFromItsKinsBestProgram) {
  graph::Graph g;
  const graph::Partition p = conv_chain(&g);
  const std::vector<std::vector<size_t>> kin = kin_tasks(p, 1);
  size_t first = p.tasks.size(), second = p.tasks.size();
  for (size_t i = 0; i < p.tasks.size() && second == p.tasks.size(); ++i)
    if (!kin[i].empty()) (first == p.tasks.size() ? first : second) = i;
  ASSERT_LT(second, p.tasks.size());
  ASSERT_EQ(kin[second][0], first);  // the two 3x3s, in order
  {
    RecordStore store(dir + "/kin.db");
    NetworkTuneOptions opt;
    opt.budget.trials = static_cast<int>(3 * p.tasks.size());
    opt.first_batch = 3;
    opt.task.batch = 4;
    NetworkTuneResult r = tune_network(p, store, opt);
    EXPECT_GE(r.kin_seeded, 1);  // the second 3x3 (the 1x1 too, where a 3x3 program fits it)
    auto in_order = [&](size_t t) {
      std::vector<Record> rs = store.task_records(p.tasks[t].key, "llvm");
      std::sort(rs.begin(), rs.end(), [](const Record& a, const Record& b) { return a.id < b.id; });
      return rs;
    };
    const std::vector<Record> before = in_order(first), mine = in_order(second);
    ASSERT_EQ(before.size(), 3u);
    ASSERT_FALSE(mine.empty());
    // Its first program is one of the first 3x3's round (its best), fitted.
    TaskSpace space(p.tasks[second].graph, "llvm", "");
    std::set<std::string> fitted;
    for (const Record& x : before)
      for (const sched::Sketch& s : space.sketches())
        if (std::optional<sched::Config> c = sched::fit_config(s, x.config)) {
          fitted.insert(sched::config_to_json(s, *c));
          break;
        }
    EXPECT_TRUE(fitted.count(mine[0].config)) << mine[0].config;
  }
  {
    RecordStore store(dir + "/alone.db");
    NetworkTuneOptions opt;
    opt.budget.trials = static_cast<int>(3 * p.tasks.size());
    opt.first_batch = 3;
    opt.task.batch = 4;
    opt.kin_seeds = 0;
    EXPECT_EQ(tune_network(p, store, opt).kin_seeded, 0);
  }
}

}  // namespace
}  // namespace basin::search
