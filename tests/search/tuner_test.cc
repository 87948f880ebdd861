// The tuning loop: records, resume, machines and code generations, confirmation and
// contests, budgets, compiling ahead, brief timing, interleaved strategies. The
// resume-after-SIGKILL test runs the real binary: tests/tools/tune_op_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <unistd.h>

#include "codegen/version.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/util/error.h"
#include "core/util/hardware.h"
#include "core/util/host.h"
#include "models/dataset.h"
#include "models/estimator.h"
#include "relax/features.h"
#include "relax/relaxed_sketch.h"
#include "records/records.h"
#include "search/tuner.h"
#include "tests/codegen/fault_hooks.h"
#include "tests/search/search_test_util.h"

using namespace basin;
using namespace basin::search_test;

namespace {

// The records files of the running test, removed with their -wal and -shm files (and
// the copies some tests make) when it ends (the Tuner fixture).
std::vector<std::string>& temp_files() {
  static std::vector<std::string> files;
  return files;
}
void remove_db(const std::string& p) {
  for (const char* ext : {"", "-wal", "-shm", ".copy", ".copy-wal", ".copy-shm"}) std::remove((p + ext).c_str());
}
std::string temp_db(const std::string& name) {
  std::string p =
      (std::filesystem::temp_directory_path() / ("basin_tuner_" + name + "_" + std::to_string(::getpid()) + ".db"))
          .string();
  remove_db(p);
  temp_files().push_back(p);
  return p;
}

class Tuner : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& p : temp_files()) remove_db(p);
    temp_files().clear();
  }
};

TEST_F(Tuner, RecordsEveryProgramAndOneSeedReproducesTheRun) {
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget.trials = 12;
  opt.batch = 5;
  opt.seed = 7;
  std::vector<std::vector<std::string>> configs;
  for (int run = 0; run < 2; ++run) {
    std::string db = temp_db(run ? "repro_b" : "repro_a");
    search::RecordStore store(db);
    std::vector<std::string> lines;
    opt.log = [&](const std::string& l) { lines.push_back(l); };
    search::TuneResult r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
    EXPECT_EQ(r.trials, 12);
    EXPECT_EQ(r.measured, 12);
    EXPECT_EQ(r.resumed, 0);
    EXPECT_EQ(r.rounds, 3);
    EXPECT_EQ(lines.size(), 3u);
    EXPECT_EQ(store.count(), 12);
    ASSERT_TRUE(r.best);
    EXPECT_EQ(r.best_latency_us, r.best->latency_us());
    EXPECT_GT(r.overhead_fraction, 0.0);
    EXPECT_LT(r.overhead_fraction, 1.0);
    EXPECT_LE(r.measure_seconds, r.seconds);
    // A point per program, one per round after its confirmations, and one after the
    // fastest programs were measured again at the end (settled).
    ASSERT_EQ(r.curve.size(), 13u + 3u + r.settled);
    EXPECT_EQ(r.curve.back().trials, 12);
    for (size_t i = 1; i < r.curve.size(); ++i) {
      EXPECT_GE(r.curve[i].trials, r.curve[i - 1].trials);
      EXPECT_LE(r.curve[i].trials, r.curve[i - 1].trials + 1);
      EXPECT_GE(r.curve[i].seconds, r.curve[i - 1].seconds);
      // A new program can only lower the best; the best measured again at the end of
      // a round (the point with no new trial) can raise it.
      if (r.curve[i - 1].best_us > 0 && r.curve[i].trials > r.curve[i - 1].trials) {
        EXPECT_LE(r.curve[i].best_us, r.curve[i - 1].best_us);
      }
    }
    // The best is measured again once per round from the round after it is confirmed
    // (twice, beside challengers), and three programs twice each at the end.
    EXPECT_TRUE(r.settled);
    EXPECT_GE(r.best_remeasurements, 1 + 2 * 2);
    EXPECT_LE(r.best_remeasurements, 2 * (r.rounds - 1) + 3 * 2);
    // It is the program named the best last, and the file names it.
    int64_t last_named = 0;
    for (const search::Record& rec : store.all()) last_named = std::max(last_named, rec.best_seq);
    EXPECT_EQ(r.best->best_seq, last_named);
    EXPECT_TRUE(r.best->confirmed());
    EXPECT_EQ(store.best(r.task_key, "llvm")->config, r.best->config);
    ASSERT_FALSE(r.bests.empty());
    EXPECT_EQ(r.bests.back().config, r.best->config);
    std::vector<std::string> cs;
    for (const search::Record& rec : store.all()) cs.push_back(rec.config);
    configs.push_back(cs);
    std::remove(db.c_str());
  }
  EXPECT_EQ(configs[0], configs[1]);
}

// Annealing plans 64 programs per search and its estimator is retrained once per plan
// (AutoTVM's plan_size); the gradient search's estimator is updated after every batch.
TEST_F(Tuner, AnnealingRetrainsOncePerPlan) {
  for (const char* name : {"annealing", "gradient"}) {
    std::unique_ptr<search::Strategy> s = search::make_strategy(name);
    std::unique_ptr<models::Estimator> est = models::make_estimator(name == std::string("annealing") ? "gbt" : "mlp");
    std::string db = temp_db(name);
    search::RecordStore store(db);
    search::TuneOptions opt;
    const bool annealing = name == std::string("annealing");
    opt.budget.trials = 16 * (annealing ? 10 : 4);
    opt.batch = 16;
    opt.seed = 3;
    search::TuneResult r = search::tune_task(small_gemm(), store, *s, est.get(), opt);
    EXPECT_EQ(r.measured, opt.budget.trials) << name;
    EXPECT_EQ(r.rounds, annealing ? 10 : 4) << name;
    if (annealing) {
      EXPECT_EQ(s->plan_size(), 64);
      // First trained on the first batch (16 >= min_train_samples), then at 80 and 144.
      EXPECT_EQ(r.updates, 3);
    } else {
      EXPECT_EQ(s->plan_size(), 0);
      EXPECT_EQ(r.updates, 4);  // after every batch
    }
    std::remove(db.c_str());
  }
}

TEST_F(Tuner, ResumesFromItsRecordsWithoutMeasuringTwice) {
  std::string db = temp_db("resume");
  std::unique_ptr<search::Strategy> evo = search::make_strategy("evolutionary");
  std::unique_ptr<models::Estimator> est = models::make_estimator("gbt");
  search::TuneOptions opt;
  opt.budget.trials = 10;
  opt.batch = 10;
  {
    search::RecordStore store(db);
    search::TuneResult r = search::tune_task(small_gemm(), store, *evo, est.get(), opt);
    EXPECT_EQ(r.measured, 10);
    EXPECT_TRUE(est->ready()) << "the estimator was not trained on the first batch";
  }
  opt.budget.trials = 18;
  search::RecordStore store(db);
  search::TuneResult r = search::tune_task(small_gemm(), store, *evo, est.get(), opt);
  EXPECT_EQ(r.resumed, 10);
  EXPECT_EQ(r.measured, 8);
  EXPECT_EQ(r.trials, 18);
  std::set<std::string> distinct;
  for (const search::Record& rec : store.all()) EXPECT_TRUE(distinct.insert(rec.config).second) << rec.config;
  EXPECT_EQ(distinct.size(), 18u);
  std::remove(db.c_str());
}

// Tunes small_gemm for 6 trials into a fresh file, copies its records into a second
// file with `change` applied to each and a latency no program here has (0.001 us), and
// tunes again from the copy: the second run's result, its log lines, and the copy's
// best record.
struct CopiedRun {
  search::TuneResult first, second;
  std::vector<std::string> logs;  // the second run's
  search::Record best;
};
CopiedRun tune_from_a_changed_copy(const char* name, const std::function<void(search::Record&)>& change) {
  const std::string db = temp_db(name), copy = db + ".copy";
  std::unique_ptr<search::Strategy> rnd = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget.trials = 6;
  opt.batch = 6;
  CopiedRun out;
  opt.log = [&](const std::string& line) { out.logs.push_back(line); };
  {
    search::RecordStore store(db);
    out.first = search::tune_task(small_gemm(), store, *rnd, nullptr, opt);
    search::RecordStore copied(copy);
    for (search::Record rec : store.all()) {
      EXPECT_EQ(rec.host, host_description());
      EXPECT_EQ(rec.codegen, codegen::codegen_version("llvm"));
      change(rec);
      rec.latencies_us = {0.001};
      copied.add(rec);
    }
  }
  out.logs.clear();
  search::RecordStore store(copy);
  out.second = search::tune_task(small_gemm(), store, *rnd, nullptr, opt);
  out.best = *store.best(search::TaskSpace(small_gemm(), "llvm").key(), "llvm");
  std::remove(db.c_str());
  std::remove(copy.c_str());
  return out;
}

TEST_F(Tuner, AnotherMachinesRecordsAreLeftOutAndMeasuredAgain) {
  // The same file, copied to a machine that is not this one.
  CopiedRun run =
      tune_from_a_changed_copy("other_host", [](search::Record& r) { r.host = "Elsewhere CPU, 8 cores, avx512"; });
  EXPECT_EQ(run.first.measured, 6);
  EXPECT_EQ(run.first.other_host, 0);
  const search::TuneResult& r = run.second;
  EXPECT_EQ(r.other_host, 6);
  EXPECT_EQ(r.resumed, 0);
  EXPECT_EQ(r.measured, 6);
  EXPECT_GT(r.best_latency_us, 0.001) << "another machine's latency became this run's best";
  ASSERT_FALSE(run.logs.empty());
  EXPECT_NE(run.logs[0].find("another machine"), std::string::npos) << run.logs[0];
  EXPECT_NE(run.logs[0].find("Elsewhere CPU"), std::string::npos) << run.logs[0];
  EXPECT_EQ(run.best.host, host_description());
}

// A records file from an older basin, whose code generation differed: its latencies
// are not this code's, so its programs are measured again and none is the best.
TEST_F(Tuner, AnotherCodeGenerationsRecordsAreLeftOutAndMeasuredAgain) {
  CopiedRun run = tune_from_a_changed_copy("other_codegen", [](search::Record& r) { r.codegen = "llvm 0"; });
  EXPECT_EQ(run.first.other_codegen, 0);
  const search::TuneResult& r = run.second;
  EXPECT_EQ(r.other_codegen, 6);
  EXPECT_EQ(r.other_host, 0);
  EXPECT_EQ(r.resumed, 0);
  EXPECT_EQ(r.measured, 6);
  EXPECT_GT(r.best_latency_us, 0.001) << "the old code's latency became this run's best";
  ASSERT_FALSE(run.logs.empty());
  EXPECT_NE(run.logs[0].find("another generation (llvm 0, not " + codegen::codegen_version("llvm") + ")"),
            std::string::npos)
      << run.logs[0];
  EXPECT_EQ(run.best.codegen, codegen::codegen_version("llvm"));
}

// A program that runs fast only the first time it is measured (as one can in a worker
// whose history happens to suit it: docs/PERFORMANCE.md@6bf7154) never becomes the best: the
// tuner measures a would-be best again after the round's other programs and keeps the
// median. Here every measurement after a program's first runs its body 30 times.
TEST_F(Tuner, AProgramFastOnlyOnceNeverBecomesTheBest) {
  auto slow_again = basin::testing::one_at_a_time([](const LoweredFunc& f) {
    static std::set<std::string> seen;  // in the measurement worker
    return seen.insert(to_string(f.body)).second ? f : repeated(f, 30);
  });
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  for (int confirm : {2, 0}) {
    std::string db = temp_db(confirm ? "confirm" : "no_confirm");
    search::TuneOptions opt;
    opt.budget.trials = 10;
    opt.batch = 5;
    opt.seed = 5;
    opt.confirm = confirm;
    opt.program_hook = slow_again;
    opt.keep_programs = false;  // each measurement compiles, and meets, the hook
    opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's counts
    search::TuneResult r;
    {
      search::RecordStore store(db);
      r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
    }
    ASSERT_TRUE(r.best);
    EXPECT_EQ(r.measured, 10);
    if (confirm == 0) {
      EXPECT_EQ(r.confirmations, 0);
      EXPECT_FALSE(r.best->confirmed());
      EXPECT_EQ(r.best_latency_us, r.best->min_latency_us());
      std::remove(db.c_str());
      continue;
    }
    // Two rounds, up to two programs each, measured twice more.
    EXPECT_GT(r.confirmations, 0);
    EXPECT_LE(r.confirmations, 2 * 2 * 2);
    EXPECT_EQ(r.confirmations % 2, 0);
    ASSERT_TRUE(r.best->confirmed());
    // Two confirmations, and one more measurement per round it was the best at.
    ASSERT_GE(r.best->confirm_us.size(), 2u);
    ASSERT_LE(r.best->confirm_us.size(), 2u + r.best_remeasurements);
    // The median, all but one of them 30 times slower: far from the run's fastest
    // single measurement (two configurations can lower to one body, so a program's
    // first measurement may be a slow one too).
    double fastest_once = 1e300;
    std::string every;  // for the message: each program's first measurement, then the others
    for (const search::Record& rec : search::RecordStore(db).all()) {
      if (rec.ok()) fastest_once = std::min(fastest_once, rec.min_latency_us());
      every += "\n  " + std::to_string(rec.min_latency_us()) + " then " + ::testing::PrintToString(rec.confirm_us);
    }
    EXPECT_GT(r.best_latency_us, 10 * fastest_once)
        << "the best's first measurement " << r.best->min_latency_us() << " us, then "
        << ::testing::PrintToString(r.best->confirm_us) << "; every program:" << every;
    std::vector<double> all = r.best->confirm_us;
    all.push_back(r.best->min_latency_us());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(r.best_latency_us, all[all.size() / 2]);
    // The file keeps the confirmations, and the best it names is the confirmed one.
    search::RecordStore store(db);
    int confirmed = 0;
    for (const search::Record& rec : store.all()) confirmed += rec.confirmed();
    EXPECT_EQ(confirmed * 2, r.confirmations);
    std::optional<search::Record> best = store.best(r.task_key, "llvm");
    ASSERT_TRUE(best);
    EXPECT_TRUE(best->confirmed());
    EXPECT_EQ(best->config, r.best->config);
    // Resumed, the same best, and nothing measured again.
    search::TuneResult again = search::tune_task(small_gemm(), store, *random, nullptr, opt);
    EXPECT_EQ(again.measured, 0);
    EXPECT_EQ(again.best_latency_us, r.best_latency_us);
    std::remove(db.c_str());
  }
}

// Every program runs its body as it is for its first three measurements and 30 times
// after. The count is kept in the measurement worker, which each tuner forks afresh.
LoweredFunc fast_three_times(const LoweredFunc& f) {
  static std::map<std::string, int> times;
  return ++times[to_string(f.body)] <= 3 ? f : repeated(f, 30);
}

// small_gemm tuned by random search into the records file `db`.
search::TuneResult tune_random(const std::string& db, const search::TuneOptions& opt) {
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::RecordStore store(db);
  return search::tune_task(small_gemm(), store, *random, nullptr, opt);
}

// On a shared machine a program can be fast for a while and slow later (another
// guest's cache traffic: docs/PERFORMANCE.md@6bf7154). The best is measured again every round,
// so once its median shows the slow phase, new programs challenge it side by side and
// win. Here every program is fast for its first three measurements and 30 times
// slower after: a best is measured slow three times alone (its median turns slow), then
// loses to a challenger measured fast beside it.
TEST_F(Tuner, ABestThatTurnsSlowGivesWay) {
  std::string db = temp_db("turns_slow");
  search::TuneOptions opt;
  opt.budget.trials = 24;
  opt.batch = 3;
  opt.seed = 4;
  opt.program_hook = basin::testing::one_at_a_time(fast_three_times);
  opt.keep_programs = false;  // each measurement compiles, and meets, the hook
  opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's counts
  search::TuneResult r = tune_random(db, opt);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.rounds, 8);
  EXPECT_GE(r.best_remeasurements, 5);
  // More than one program was the best, and none kept it for more than five rounds
  // (its confirmation, three slow measurements alone, and the lost contest).
  ASSERT_GE(r.bests.size(), 2u);
  for (size_t i = 1; i < r.bests.size(); ++i) {
    EXPECT_NE(r.bests[i].record_id, r.bests[i - 1].record_id);
    EXPECT_GE(r.bests[i].trials, r.bests[i - 1].trials);
    EXPECT_LE(r.bests[i].trials - r.bests[i - 1].trials, 5 * opt.batch) << "a best measured slow stayed the best";
  }
  // The bests' measurements again are in the file.
  search::RecordStore store(db);
  int remeasured = 0;
  for (const search::Record& rec : store.all()) remeasured += rec.confirm_us.size() > 2u;
  EXPECT_GE(remeasured, 1);
  // The file names the run's best.
  EXPECT_EQ(store.best(r.task_key, "llvm")->config, r.best->config);
  std::remove(db.c_str());
}

// --stop-at-latency ends a run once the best is that fast, but a program confirmed in
// one phase must also have been measured again in a later round first. Without
// confirmation, the first program that runs stops it.
TEST_F(Tuner, StopsAtALatencyOnceTheBestWasMeasuredInLaterRounds) {
  for (int confirm : {2, 0}) {
    std::string db = temp_db(confirm ? "stop_at" : "stop_at_no_confirm");
    search::TuneOptions opt;
    opt.budget.trials = 30;
    opt.batch = 3;
    opt.seed = 6;
    opt.confirm = confirm;
    opt.stop_at_us = 1e9;  // any program
    search::TuneResult r = tune_random(db, opt);
    ASSERT_TRUE(r.best);
    if (confirm == 0) {
      EXPECT_EQ(r.measured, 1);
      EXPECT_FALSE(r.settled);
    } else {
      // The first best is confirmed at the end of the first round and measured again in
      // later ones (twice in a contest, once in a round without challengers), where a
      // program confirmed then may take its place and need rounds more: whole rounds,
      // at least two, and a best measured at least twice after its confirmation.
      EXPECT_GE(r.rounds, 2);
      EXPECT_LT(r.rounds, 10);
      EXPECT_EQ(r.measured, 3 * r.rounds);
      EXPECT_GE(r.best->confirm_us.size(), 4u);
    }
    std::remove(db.c_str());
  }
}

// The lower median of the last n measurements of a record (its window in a contest).
double window_us(const search::Record& rec, size_t n) {
  std::vector<double> v(rec.confirm_us.end() - static_cast<std::ptrdiff_t>(n), rec.confirm_us.end());
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// Regression: a contest judged each program by the upper median of its
// window, with two measurements its slower one, so one slowdown of a shared machine
// (787 us measured 2041 once) named a program 11% slower the best. The measurements
// are those of that run's settle: the best, then its two rivals.
TEST_F(Tuner, OneSlowMeasurementDoesNotLoseAContest) {
  EXPECT_EQ(search::contest_winner({{2041.2, 786.6}, {887.9, 849.5}, {902.0, 871.3}}), 0);
  // A program slower in both of its measurements loses.
  EXPECT_EQ(search::contest_winner({{900, 905}, {880, 890}}), 1);
  // Odd windows: the median, so one fast measurement does not win either.
  EXPECT_EQ(search::contest_winner({{500, 990, 995}, {900, 905, 2000}}), 1);
  // Empty windows (every measurement failed) never win; equals: the first.
  EXPECT_EQ(search::contest_winner({{}, {700, 710}, {700, 710}}), 1);
  EXPECT_EQ(search::contest_winner({{}, {}}), -1);
  EXPECT_EQ(search::contest_winner({}), -1);
}

// At the end of a run the best and the two fastest other confirmed programs are
// measured twice more, side by side, and the winner is the best: a program whose
// confirmation caught a fast phase meets its rivals in the same one. Here every
// measurement after a program's third is 30 times slower.
TEST_F(Tuner, SettlesTheBestAmongTheFastestAtTheEnd) {
  std::string db = temp_db("settle");
  search::TuneOptions opt;
  opt.budget.trials = 9;
  opt.batch = 3;
  opt.seed = 8;
  // The first round confirms all three of its programs (none is the best yet), so the
  // settle has two others to choose from whatever later first measurements show.
  opt.confirm_programs = 3;
  opt.program_hook = basin::testing::one_at_a_time(fast_three_times);
  opt.keep_programs = false;  // each measurement compiles, and meets, the hook
  opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's counts
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneResult r;
  {
    search::RecordStore store(db);
    search::TaskTuner tuner(small_gemm(), store, *random, nullptr, opt);
    while (!tuner.done()) ASSERT_GT(tuner.round(opt.batch), 0);
    std::map<int64_t, size_t> before;
    for (const search::Record& rec : store.all()) before[rec.id] = rec.confirm_us.size();
    tuner.settle();
    r = tuner.result();
    ASSERT_TRUE(r.best);
    EXPECT_TRUE(r.settled);
    // The contest: the programs measured twice more.
    std::vector<search::Record> contest;
    for (const search::Record& rec : store.all())
      if (rec.confirm_us.size() == before[rec.id] + 2) contest.push_back(rec);
    ASSERT_EQ(contest.size(), 3u);
    bool best_in = false;
    for (const search::Record& rec : contest) {
      best_in |= rec.id == r.best->id;
      EXPECT_GE(window_us(rec, 2), window_us(*r.best, 2)) << "the best did not win the side-by-side measurement";
    }
    EXPECT_TRUE(best_in);
    EXPECT_EQ(r.curve.back().best_us, r.best_latency_us);
    EXPECT_EQ(r.best_latency_us, r.best->latency_us());
    EXPECT_EQ(store.best(r.task_key, "llvm")->config, r.best->config);
  }
  // Resumed with nothing left to measure: nothing is measured again, and the best is
  // the one named, not the program of lowest median.
  search::TuneResult again = tune_random(db, opt);
  EXPECT_EQ(again.measured, 0);
  EXPECT_FALSE(again.settled);
  EXPECT_EQ(again.best_remeasurements, 0);
  EXPECT_EQ(again.best->id, r.best->id);
  EXPECT_EQ(again.best_latency_us, r.best_latency_us);
  std::remove(db.c_str());
}

// `f` with its body in a loop of no iterations: it computes nothing (a wrong result).
LoweredFunc computes_nothing(const LoweredFunc& f) {
  LoweredFunc wrong = f;
  wrong.body = make_for(Var("never"), Expr(int64_t{0}), Expr(int64_t{0}), ForKind::Serial, f.body);
  return wrong;
}

// Regression: a program that ran once and failed every confirmation counted at its
// first measurement, so one fast measurement made the best. Here every measurement
// after a program's first computes nothing (a wrong result): nothing is confirmed, and
// the result is the fallback, marked unconfirmed.
TEST_F(Tuner, AProgramThatFailsItsConfirmationsIsNotTheBest) {
  std::string db = temp_db("unconfirmable");
  search::TuneOptions opt;
  opt.budget.trials = 6;
  opt.batch = 3;
  opt.seed = 9;
  opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's counts
  opt.program_hook = basin::testing::one_at_a_time([](const LoweredFunc& f) {
    static std::set<std::string> seen;  // in the measurement worker
    return seen.insert(to_string(f.body)).second ? f : computes_nothing(f);
  });
  opt.keep_programs = false;  // each measurement compiles, and meets, the hook
  search::TuneResult r = tune_random(db, opt);
  ASSERT_TRUE(r.best);
  EXPECT_GT(r.confirmations, 0);
  EXPECT_FALSE(r.best->confirmed());
  EXPECT_TRUE(r.bests.empty());
  for (const search::Record& rec : search::RecordStore(db).all()) EXPECT_FALSE(rec.confirmed());
  std::remove(db.c_str());
}

// Regression: the network scheduler asks for the result in the middle of a round (its
// stop callback). The fastest program then shows as the best before it is confirmed,
// and the round's confirmation skipped it, as no program beat it: the run ended with
// an unconfirmed best.
TEST_F(Tuner, AResultAskedForMidRoundStillConfirmsTheBest) {
  std::string db = temp_db("mid_round");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget.trials = 4;
  opt.seed = 2;
  // The first program measured is the fastest: every later one runs its body 30 times.
  opt.program_hook = basin::testing::one_at_a_time([](const LoweredFunc& f) {
    static int programs = 0;  // in the measurement worker
    return programs++ == 0 ? f : repeated(f, 30);
  });
  search::TaskTuner tuner(small_gemm(), store, *random, nullptr, opt);
  int asked = 0;
  EXPECT_EQ(tuner.round(4,
                        [&] {
                          ++asked;
                          tuner.result();
                          return false;
                        }),
            4);
  EXPECT_GT(asked, 0);
  const search::TuneResult& r = tuner.result();
  ASSERT_TRUE(r.best);
  EXPECT_TRUE(r.best->confirmed());
  EXPECT_GT(r.confirmations, 0);
  std::remove(db.c_str());
}

// Regression: a stop (a network's budget, its first round's slice of it) halted a round
// after its first program even when that program failed, leaving the task with no
// program to compile (a 6-second network tuning on a loaded machine: tasks with
// "none"). The round goes on while the task has no valid program.
TEST_F(Tuner, AStopWaitsForTheTasksFirstValidProgram) {
  std::string db = temp_db("stop_valid");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget.trials = 8;
  opt.seed = 3;
  opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's count
  // Each program compiled just before it runs, so that the hook sees them in the order
  // they are measured (compiled ahead on several threads, any of the first two could be
  // the hook's first).
  opt.compile_threads = 1;
  // The first program measured computes nothing (a wrong result); the others are right.
  opt.program_hook = basin::testing::one_at_a_time([](const LoweredFunc& f) {
    static int programs = 0;  // in the measurement worker
    return programs++ > 0 ? f : computes_nothing(f);
  });
  search::TaskTuner tuner(small_gemm(), store, *random, nullptr, opt);
  const int measured = tuner.round(4, [] { return true; });
  EXPECT_EQ(measured, 2);
  const search::TuneResult& r = tuner.result();
  ASSERT_TRUE(r.best);
  // Once it has one, a stop halts the next round after its first program.
  EXPECT_EQ(tuner.round(4, [] { return true; }), 1);
  std::remove(db.c_str());
}

TEST_F(Tuner, StopsOnItsTimeBudget) {
  std::string db = temp_db("budget");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget.seconds = 1.0;
  opt.batch = 4;
  search::TuneResult r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
  EXPECT_GT(r.measured, 0);
  EXPECT_LT(r.seconds, 6.0);  // the budget, one candidate's timeout at most
  std::remove(db.c_str());
}

// A batch far larger than the budget allows: compiled a slice at a time, so the budget
// stops the round after one slice, not after the whole batch is compiled.
TEST_F(Tuner, ABudgetStopsARoundMidBatch) {
  std::string db = temp_db("budget_batch");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget.seconds = 1.0;
  opt.batch = 1000;
  search::TuneResult r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
  EXPECT_GT(r.measured, 0);
  EXPECT_LT(r.measured, 1000);
  EXPECT_LT(r.seconds, 15.0);  // the budget and one slice of 16 programs, not 1000
  std::remove(db.c_str());
}

// Each round's batch, and each contest's measurements, are compiled ahead on two
// threads and measured from there; one compile thread compiles each program just
// before it runs. The records are alike.
// A random search of small_gemm() from a fresh records file: `trials` trials in
// batches of `batch`, the options set by `adjust`; its result and its records.
struct RandomRun {
  search::TuneResult result;
  std::vector<search::Record> records;
};
RandomRun random_run(const char* name, int trials, int batch, const std::function<void(search::TuneOptions&)>& adjust) {
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  std::string db = temp_db(name);
  RandomRun run;
  {
    search::RecordStore store(db);
    search::TuneOptions opt;
    opt.budget.trials = trials;
    opt.batch = batch;
    adjust(opt);
    run.result = search::tune_task(small_gemm(), store, *random, nullptr, opt);
    run.records = store.all();
  }
  std::remove(db.c_str());
  return run;
}

TEST_F(Tuner, CompilesEachBatchAheadOfItsMeasurement) {
  for (int threads : {2, 1}) {
    auto [r, records] = random_run(threads == 2 ? "ahead" : "not_ahead", 10, 5,
                                   [&](search::TuneOptions& opt) { opt.compile_threads = threads; });
    EXPECT_EQ(r.measured, 10);
    EXPECT_EQ(r.errors, 0);
    if (threads == 1) {
      EXPECT_EQ(r.measured_ahead, 0);
    } else {
      // The batches', and the contests' (confirmations and the best's measurements in
      // them; a round without a challenger measures the best alone, not ahead).
      EXPECT_GE(r.measured_ahead, 10 + r.confirmations);
      EXPECT_LE(r.measured_ahead, 10 + r.confirmations + r.best_remeasurements);
    }
    for (const search::Record& rec : records) EXPECT_GT(rec.compile_seconds, 0);
  }
}

// The tuner's instruction limit reaches its measurer: with a limit smaller than any
// program every trial is a recorded "too large to compile" error, and there is no best;
// with none (0) the same programs run.
TEST_F(Tuner, ProgramsOverItsInstructionLimitAreRecordedErrors) {
  for (int64_t limit : {int64_t{1}, int64_t{0}}) {
    auto [r, records] = random_run(limit ? "too_large" : "no_limit", 6, 3,
                                   [&](search::TuneOptions& opt) { opt.max_instructions = limit; });
    EXPECT_EQ(r.measured, 6);
    EXPECT_EQ(r.errors, limit ? 6 : 0);
    EXPECT_EQ(r.best.has_value(), limit == 0);
    for (const search::Record& rec : records)
      EXPECT_EQ(rec.error.rfind("too large to compile", 0) == 0, limit != 0) << rec.error;
  }
}

// A new program slower than slow_factor times the fastest so far is timed briefly (one
// round: TuneOptions::slow_factor); the first program, and every program with the
// factor 0, gets the full rounds.
TEST_F(Tuner, ProgramsFarSlowerThanTheFastestAreTimedBriefly) {
  for (double factor : {1.0, 0.0}) {
    auto [r, records] = random_run(factor > 0 ? "brief" : "not_brief", 12, 6,
                                   [&](search::TuneOptions& opt) { opt.slow_factor = factor; });
    EXPECT_EQ(r.measured, 12);
    int brief = 0;
    double fastest = std::numeric_limits<double>::infinity();
    for (const search::Record& rec : records) {
      ASSERT_TRUE(rec.ok()) << rec.error;
      if (rec.latencies_us.size() == 1) {
        ++brief;
        EXPECT_GT(rec.latencies_us[0], factor * fastest);  // slower than the bound when measured
      } else {
        EXPECT_EQ(rec.latencies_us.size(), 3u);
      }
      fastest = std::min(fastest, rec.latency_us());
    }
    ASSERT_FALSE(records.empty());
    EXPECT_EQ(records.front().latencies_us.size(), 3u);
    EXPECT_EQ(r.brief, brief);
    if (factor > 0) {
      EXPECT_GT(brief, 0);
    } else {
      EXPECT_EQ(brief, 0);
    }
  }
}

// A tuner's clock runs only in its own work (constructor, rounds, settle): a network's
// tasks and interleaved strategies take turns, and each counts its own time.
TEST_F(Tuner, ATunersClockStopsBetweenItsRounds) {
  std::string db = temp_db("clock");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget.trials = 8;
  auto t0 = std::chrono::steady_clock::now();
  search::TaskTuner tuner(small_gemm(), store, *random, nullptr, opt);
  ASSERT_EQ(tuner.round(4), 4);
  const double after_one = tuner.result().seconds;
  ::usleep(1500 * 1000);  // another tuner's round
  EXPECT_DOUBLE_EQ(tuner.result().seconds, after_one);
  ASSERT_EQ(tuner.round(4), 4);
  tuner.settle();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const search::TuneResult& r = tuner.result();
  EXPECT_GT(r.seconds, after_one);
  EXPECT_LT(r.seconds, wall - 1.4);
  EXPECT_LE(r.curve.back().seconds, r.seconds);
  EXPECT_GE(r.overhead_fraction, 0.0);
  std::remove(db.c_str());
}

// Strategies tuned at once take a round each in turn, each with its own records and
// clock, so that both meet the same phases of a shared machine.
TEST_F(Tuner, InterleavedStrategiesTakeTurnsRoundByRound) {
  std::string db_a = temp_db("turns_a"), db_b = temp_db("turns_b");
  search::RecordStore a(db_a), b(db_b);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  std::unique_ptr<search::Strategy> annealing = search::make_strategy("annealing");
  std::unique_ptr<models::Estimator> gbt = models::make_estimator("gbt");
  search::TuneOptions opt;
  opt.budget.trials = 12;
  opt.batch = 4;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<search::TuneResult> rs =
      search::tune_interleaved(small_gemm(), {{random.get(), nullptr, &a}, {annealing.get(), gbt.get(), &b}}, opt);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].strategy, "random");
  EXPECT_EQ(rs[1].strategy, "annealing");
  for (const search::TuneResult& r : rs) {
    EXPECT_EQ(r.trials, 12);
    EXPECT_EQ(r.rounds, 3);
    EXPECT_TRUE(r.best.has_value());
  }
  // Each clock counts its own rounds: together no more than the wall time.
  EXPECT_LE(rs[0].seconds + rs[1].seconds, wall + 0.01);
  // Each file has its strategy's programs only, and the rounds alternate: the second
  // strategy's round k started after the first's round k and before its round k+1.
  std::vector<search::Record> ra = a.task_records(rs[0].task_key, "llvm"), rb = b.task_records(rs[1].task_key, "llvm");
  ASSERT_EQ(ra.size(), 12u);
  ASSERT_EQ(rb.size(), 12u);
  auto started = [](std::vector<search::Record> v) {
    std::vector<double> t;
    for (const search::Record& r : v) t.push_back(r.started_at);
    std::sort(t.begin(), t.end());
    return t;
  };
  std::vector<double> sa = started(ra), sb = started(rb);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_GT(sb[4 * k], sa[4 * k + 3]) << "round " << k;
    if (k < 2) {
      EXPECT_LT(sb[4 * k + 3], sa[4 * k + 4]) << "round " << k;
    }
  }
  for (const search::Record& r : ra) EXPECT_EQ(r.estimator_version.rfind("random", 0), 0u) << r.estimator_version;
  for (const search::Record& r : rb) EXPECT_EQ(r.estimator_version.rfind("annealing", 0), 0u) << r.estimator_version;
  // Two strategies cannot share a records file: each would resume from the other's.
  search::RecordStore again(db_a);
  EXPECT_THROW(
      search::tune_interleaved(small_gemm(), {{random.get(), nullptr, &a}, {annealing.get(), gbt.get(), &again}}, opt),
      Error);
  std::remove(db_a.c_str());
  std::remove(db_b.c_str());
}

TEST_F(Tuner, RejectsWhatItCannotRun) {
  std::string db = temp_db("reject");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> gradient = search::make_strategy("gradient");
  std::unique_ptr<models::Estimator> gbt = models::make_estimator("gbt");
  search::TuneOptions opt;
  opt.budget.trials = 4;
  EXPECT_THROW(search::tune_task(small_gemm(), store, *gradient, gbt.get(), opt), Error);
  EXPECT_THROW(search::tune_task(small_gemm(), store, *gradient, nullptr, opt), Error);
  opt.budget.trials = 0;
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  EXPECT_THROW(search::tune_task(small_gemm(), store, *random, nullptr, opt), Error);
  opt.budget.trials = 4;
  opt.target = "cuda9";
  EXPECT_THROW(search::tune_task(small_gemm(), store, *random, nullptr, opt), Error);
  opt.target = "llvm";
  for (double factor : {0.5, -1.0, std::numeric_limits<double>::infinity()}) {
    opt.slow_factor = factor;
    EXPECT_THROW(search::tune_task(small_gemm(), store, *random, nullptr, opt), Error) << factor;
  }
  EXPECT_EQ(store.count(), 0);
  std::remove(db.c_str());
}

TEST_F(Tuner, PairwiseAccuracy) {
  EXPECT_DOUBLE_EQ(search::pairwise_accuracy({1, 2, 3}, {10, 20, 30}), 1.0);
  EXPECT_DOUBLE_EQ(search::pairwise_accuracy({3, 2, 1}, {10, 20, 30}), 0.0);
  EXPECT_DOUBLE_EQ(search::pairwise_accuracy({1, 2}, {5, 5}), -1.0);
}

}  // namespace

// The machine's description (its measured FMA peak among it) is measured before the
// tuner's workers and compiling threads start: measured while they ran, it read half
// the peak of a 2-core machine. In a fresh process with an empty cache, constructing
// a tuner has described the machine before any program is measured.
TEST_F(Tuner, DescribesTheMachineBeforeItsWorkersStart) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string dir = temp_db("fresh-cache") + ".d";
  EXPECT_EXIT(
      {
        std::filesystem::create_directories(dir);
        ::setenv("BASIN_CACHE_DIR", dir.c_str(), 1);
        std::unique_ptr<search::Strategy> random = search::make_strategy("random");
        search::TuneOptions opt;
        opt.budget.trials = 3;
        search::RecordStore store(dir + "/r.db");
        search::TaskTuner tuner(small_gemm(), store, *random, nullptr, opt);
        std::exit(std::filesystem::exists(hardware_cache_path()) && store.all().empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  std::filesystem::remove_all(dir);
}
