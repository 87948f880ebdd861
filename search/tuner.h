// The tuning loop of one task (DESIGN.md, "Search"): propose a batch (search/strategy.h),
// measure it in the worker pool (codegen/measure.h), record every program as it is
// measured (records/records.h), update the estimator, and again, until the budget is
// spent. A program that would become the best is measured again first (TuneOptions::
// confirm). Budgets are in trials (the task's measured programs in the records file) or
// in wall-clock seconds of this run. A run restarted on the same records file resumes:
// the programs already there count as trials, train the estimator, seed the strategy,
// and are never measured again. One seed makes a run reproducible: each round's
// random choices depend only on the seed and the number of trials done.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/measure.h"
#include "core/ir/stmt.h"
#include "core/ops/registry.h"
#include "records/records.h"
#include "search/budget.h"
#include "search/cluster.h"
#include "search/strategy.h"

namespace basin::search {

struct TuneOptions {
  std::string target = "llvm";
  // The arithmetic the programs may use (sched::resolve_precision): "" the target's
  // default; "bf16" lets in the sketches that multiply bfloat16 inputs (the CPU's
  // AVX512-BF16, the GPU's tensor cores), "tf32" and "fp16" the GPU's tensor cores at
  // those formats, "f32" keeps every program float32.
  std::string precision;
  // Trials: stop when the task has this many records; seconds: after this much of the
  // tuner's own time in this run (TaskTuner::result). tune_task needs one of them.
  Budget budget;
  int batch = 32;         // programs per round
  double stop_at_us = 0;  // also stop once a program runs this fast (0: never)
  uint64_t seed = 1;
  double timeout_seconds = 10;  // per candidate: compile, check and time
  // Threads that compile each batch ahead of its measurement (codegen::MeasureOptions::
  // compile_threads): 0, every core; 1, each program compiled just before it runs.
  int compile_threads = 0;
  int64_t max_instructions = codegen::kMaxInstructions;  // larger programs are errors, not compiled (0: no limit)
  // A new program whose check run and warm-up call each take more than slow_factor
  // times the fastest latency measured so far is timed by those two calls alone, one
  // round (codegen::MeasurePool::measure_one's slow_us; TuneResult::brief): it cannot
  // be the best, and the estimator needs its latency only roughly, while the full
  // rounds of a program k times slower than the best cost k times a good one's. The
  // llvm target only; measurements again (confirmations, contests) are always full.
  // 0: every program gets the full rounds (docs/search.md, "Brief timing of slow
  // programs").
  double slow_factor = 2;
  bool update_estimator = true;
  std::string label;          // names the task in log lines (default: its key)
  int min_train_samples = 8;  // an untrained estimator trains once this many programs ran
  // A program whose first measurement beats the best is measured `confirm` more times
  // at the end of its round, after the round's other programs, and its latency becomes
  // the median (Record::latency_us); only such confirmed programs become the best. Up
  // to confirm_programs programs per round, fastest first. 0: the first measurement's
  // minimum is the latency and any program can be the best.
  // With confirmation on, the challengers are measured side by side with the best
  // (a contest) and the winner of that window is the best; a round without
  // challengers measures the best once more. On a shared machine whose speed moves in
  // phases, a best confirmed in a fast one is measured in later ones, and a program is
  // compared with the best only in the same phase (docs/search.md, "Confirmation").
  // At most kMaxConfirm; a contest stops measuring when the time budget is spent.
  int confirm = 2;
  static constexpr int kMaxConfirm = 50;
  int confirm_programs = 2;
  // At the end of a run (TaskTuner::settle), a last contest of the best and the
  // fastest other confirmed programs, settle_programs in all, measured `confirm` more
  // times each, in turn (fewer than 2: not).
  int settle_programs = 3;
  // One line per round (best latency so far, trials, the estimator's accuracy on the
  // batch, where the time went).
  std::function<void(const std::string&)> log;
  // After each measured program: trials done, the trial budget (0 when in seconds),
  // seconds so far, the best latency so far (0 when none ran yet).
  std::function<void(int, int, double, double)> progress;
  // The task's inputs that are constants where it runs (codegen::MeasureOptions::
  // constant_inputs): a network's tuning times its programs without their weights'
  // repacking, as the compiled network runs them.
  std::set<int> constant_inputs;
  // Their cache lines evicted before every timed call (codegen::MeasureOptions::
  // cold_constants): a network whose weights exceed the last-level cache.
  bool cold_constants = false;
  // Test hook passed to the measurer (codegen::MeasureOptions::program_hook): called
  // from several compile threads at once, so it must be thread-safe.
  std::function<LoweredFunc(const LoweredFunc&)> program_hook;
  // codegen::MeasureOptions::keep_programs: off, every measurement compiles its
  // program again (a test's program_hook that changes a program between measurements).
  bool keep_programs = true;
  // The worker ranks of a run shared by several (`mpirun -n K basin tune`,
  // search/cluster.h): each round's new programs are shared out between this process
  // and the live workers, which measure theirs on their own machines; measurements
  // again stay here. Null, or no live worker: every program is measured here.
  Cluster* cluster = nullptr;
};

// The measurer's options of a tuner with options `opt` (a worker rank measures a task's
// programs with the same).
codegen::MeasureOptions measure_options(const TuneOptions& opt);

// Whether f is a valid TuneOptions::slow_factor: 0 (off), or finite and at least 1 (below 1,
// programs faster than the fastest would be timed briefly). TaskTuner and the CLI ask here.
// At most 1e6: a larger factor times a latency leaves the range the measurer's timer
// takes (1e308 killed the workers).
inline bool valid_slow_factor(double f) { return f == 0 || (f >= 1 && f <= 1e6); }

struct CurvePoint {
  double seconds = 0;  // since the run started (programs found in the file: 0)
  int trials = 0;
  double best_us = 0;  // 0 while no program ran successfully
};

// A program that became the best, when, and its latency then (Record::latency_us).
struct BestChange {
  double seconds = 0;
  int trials = 0;
  int64_t record_id = 0;
  std::string config;  // the configuration's JSON
  double latency_us = 0;
};

struct TuneResult {
  std::string task_key, strategy, estimator;
  int trials = 0;          // the task's records on this target measured on this machine now
  int resumed = 0;         // ... of which were in the file when the run started
  int other_host = 0;      // the task's records in the file from another machine (left out)
  int other_codegen = 0;   // ... of this machine, of another code generation (left out)
  int measured = 0;        // ... measured by this run
  int errors = 0;          // failed programs of this run
  int left_to_others = 0;  // proposed programs another process tuning the file measured (RecordStore::claim)
  int rounds = 0;
  int updates = 0;        // estimator trainings and updates
  int confirmations = 0;  // measurements again of programs that would become the best
  // Measurements again of the best, one per round, and of the fastest confirmed
  // programs at the end (settle).
  int best_remeasurements = 0;
  // Programs measured from a batch compiled ahead on several threads (TuneOptions::
  // compile_threads); the others, confirmations among them, compiled just before.
  int measured_ahead = 0;
  int brief = 0;         // new programs timed briefly, as slower than slow_factor times the fastest
  // Timings of this run that another process disturbed (codegen::disturbed_timing), each
  // repeated; and measurements whose every timing was (their latencies are high: the
  // machine was not quiet).
  int disturbed = 0, disturbed_kept = 0;
  bool settled = false;  // settle() measured the fastest programs again (a curve point)
  // The confirmed program that won the last contest (the fastest of all while none is
  // confirmed, which the curve does not show) and its latency (Record::latency_us).
  std::optional<Record> best;
  double best_latency_us = 0;
  // Wall time of the run, and its parts: compile and measure (the worker pool, IPC
  // included); proposing; estimator updates; the rest (setup, records, bookkeeping) is
  // wall - measure - propose - update. compile_seconds sums the programs' compile
  // times, which overlap when a batch is compiled on several threads (so it can exceed
  // the wall time the pool spent compiling).
  double seconds = 0, measure_seconds = 0, compile_seconds = 0, propose_seconds = 0, update_seconds = 0;
  // Of measure_seconds, the time a shared round waited for its worker ranks' results
  // after its own (TuneOptions::cluster).
  double wait_seconds = 0;
  double overhead_fraction = 0;     // 1 - measure_seconds / seconds
  double last_batch_accuracy = -1;  // pairwise, on the last batch's predictions (-1: none)
  std::vector<CurvePoint> curve;
  // Every confirmed program that became the best, in order (a program can return).
  std::vector<BestChange> bests;
};

// The tuning of one task, a round at a time: the network scheduler (network.h) keeps
// one per task and gives rounds to the task it expects most from. Construction loads
// the task's records (resume), forks the measurement worker and trains the estimator
// on what the records hold.
class TaskTuner {
 public:
  TaskTuner(const ops::OpGraph& task, RecordStore& store, Strategy& strategy, models::Estimator* estimator,
            const TuneOptions& opt);
  ~TaskTuner();
  TaskTuner(const TaskTuner&) = delete;
  TaskTuner& operator=(const TaskTuner&) = delete;

  // Proposes and measures up to n programs (fewer when the budget's trials are reached or
  // `stop` returns true before a program). Returns the number measured; 0 when the
  // strategy has nothing left to propose.
  int round(int n, const std::function<bool()>& stop = nullptr);
  // Programs of another task of the same operator chain at other extents (a shape
  // range's buckets), as config JSON of sketches named as this task's: each fitted to
  // this task's extents (sched::fit_config) and, unless measured or queued already,
  // queued to lead its next round (in place of as many proposed programs). Returns the
  // number queued.
  int seed(const std::vector<std::string>& configs);
  // At the end of a run: the best and the fastest other confirmed programs measured
  // again side by side, the winner the best (TuneOptions::settle_programs). tune_task and the
  // network scheduler call it once their rounds are done.
  void settle();
  // True once opt's budget (trials, seconds or stop_at_us) is spent; a stop_at_us
  // best must have `confirm` more measurements after the window that confirmed it.
  bool done() const;
  // The result so far (seconds and overhead up to now). Its seconds, the curve's and a
  // seconds budget are the tuner's own: the time spent in its constructor, round() and
  // settle(), not between them while other tuners run.
  const TuneResult& result();
  RecordStore& store() const;

 private:
  struct Impl;
  class RoundImpl;
  std::unique_ptr<Impl> impl_;
};

// Tunes `task` on opt.target ("llvm"). `estimator` may be null (random search needs
// none); it is trained or updated in place as programs are measured. Throws
// basin::Error when the strategy needs a differentiable estimator and gets another.
TuneResult tune_task(const ops::OpGraph& task, RecordStore& store, Strategy& strategy, models::Estimator* estimator,
                     const TuneOptions& opt);

// One strategy of an interleaved run: its estimator (may be null, as for tune_task) and
// its own records file.
struct Contender {
  Strategy* strategy = nullptr;
  models::Estimator* estimator = nullptr;
  RecordStore* store = nullptr;
};

// Tunes `task` with several strategies at once, for a fair comparison on a shared
// machine whose speed moves in phases minutes long: one round of each in turn, each
// with its own tuner (clock, estimator, records file, budget from opt), until each is
// done; then each settles. Every strategy meets the same phases, and each one's
// seconds count its own rounds only. Results are in the order of `contenders`.
// Throws basin::Error when two contenders share a records file.
std::vector<TuneResult> tune_interleaved(const ops::OpGraph& task, const std::vector<Contender>& contenders,
                                         const TuneOptions& opt);

// The winner of a contest: `windows` holds each program's measurements of one
// side-by-side window (measured in turn; empty where all failed). The winner has the
// lowest lower median (the median, the lower one of an even count: with two
// measurements, the faster). A shared machine's interference only slows a program,
// so one spike in a short window says nothing about it: with the upper median, a
// window of two judged each program by its slower measurement, and one slowdown
// (787 us to 2041) named a program 11% slower the best. -1 when every
// window is empty; the first of equals.
long contest_winner(const std::vector<std::vector<double>>& windows);

// Pairwise ranking accuracy of predictions against latencies (pairs with different
// latencies; -1 when there is none).
double pairwise_accuracy(const std::vector<double>& predicted, const std::vector<double>& latency);

}  // namespace basin::search
