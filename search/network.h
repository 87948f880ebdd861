// Whole networks on the search side: the task scheduler that spends a network's tuning
// budget across its tasks (DESIGN.md, "Search"), and the choice of each task's program
// for compilation from the records.
//
// The scheduler, after Ansor's: every task first gets one round (first_batch programs,
// the estimator's best guesses; short when the tasks are many, so that each has a
// measured program within the first minute); then each round goes to the task with the largest expected
// gain in end-to-end latency, weight x (the improvement of its last round, or an
// optimistic share of its best latency that shrinks with the rounds it already had).
// A task that has no valid program after three rounds, or whose space is exhausted, is
// retired: it never stalls the others.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "codegen/network.h"
#include "core/graph/fusion.h"
#include "records/records.h"
#include "search/tuner.h"

namespace basin::search {

struct NetworkTuneOptions {
  // Each task's tuner: target, seed (task i tunes with seed + i), batch, timeout,
  // compile threads, instruction limit, slow factor, log. The scheduler's budget, the
  // strategy and the estimator below are the network's; TuneOptions' own budget and
  // progress fields are left to the scheduler. A round is smaller than a lone task's
  // (16 programs, against 32): the scheduler picks the task of the largest expected
  // gain again after every round, so shorter rounds move the budget sooner.
  TuneOptions task = network_task_defaults();
  std::string strategy = "gradient";
  std::string estimator;  // empty: the strategy's default
  // When set, makes task i's estimator in place of `estimator` (a user's own, api/).
  std::function<std::unique_ptr<models::Estimator>(size_t)> make_estimator;
  // Trials: stop when the network's tasks have this many records in all; seconds: after
  // this much wall time in this run. One of them is needed.
  Budget budget;
  // Programs of each task's first round (at most task.batch); 0: 256 programs shared by
  // the tasks, at least 4 each (a network of many tasks has a measured program for each
  // early, one of few gets a broad first look at each).
  int first_batch = 0;
  // After each round: trials so far, the trial budget (0 when in seconds), seconds,
  // the estimated network latency (sum of weight x best; 0 until every task has one).
  std::function<void(int, int, double, double)> progress;
  // Asked before each program is proposed: true stops the run where it is (no settling
  // contest; every program measured so far is in the records, so a second run
  // resumes). Ctrl-C in `basin tune` and in the Python package's tuning.
  std::function<bool()> stop;
  // Tasks of one family (equal non-empty estimator_family[i]) share one estimator: each
  // task's updates fine-tune it on that task's programs, so that a task of the family
  // starts from what the others taught it (the shape buckets of a range: one operator
  // chain at several extents). Empty, or an empty name: an estimator of the task's own.
  // Not with make_estimator (a user's own per task).
  std::vector<std::string> estimator_family;
  // With families: the share of the budget (trials, or seconds) left when every task of
  // a family measures the best programs of up to three others at their extents (the
  // family sweep, tune_network); 0: none.
  double family_sweep = 0.1;
  // Before each of a task's rounds, the best programs of up to kin_seeds of its kin
  // (kin_tasks: the same operator chain at other extents, the nearest first), fitted to
  // its extents (TaskTuner::seed), lead the round in place of as many proposals, once
  // each: a task's first round starts from what its kin tuned before it, and a task
  // measures what its kin found since. 0: each task tunes alone.
  int kin_seeds = 2;
  // How the CPU's programs are timed with respect to their constant inputs: Cold
  // (evicted before every call), Warm (cached), Auto: cold when the network's weights
  // exceed half the cache (weights_exceed_cache).
  enum class WeightsTiming { Auto, Cold, Warm };
  WeightsTiming weights_timing = WeightsTiming::Auto;
  // Test hook: adjusts the options of task i's tuner before it starts (fault injection).
  std::function<void(size_t, TuneOptions&)> task_options;

  static TuneOptions network_task_defaults() {
    TuneOptions t;
    t.batch = 16;
    return t;
  }
};

struct TaskReport {
  std::string key, label;
  int weight = 0;
  int trials = 0, resumed = 0, measured = 0, errors = 0, rounds = 0;
  double best_us = 0;  // 0: no valid program
  bool retired = false;
  bool settled = false;  // its settling contest ran (TuneResult::settled)
};

struct NetworkTuneResult {
  std::vector<TaskReport> tasks;
  int trials = 0, resumed = 0, measured = 0;
  // Timings another process disturbed, repeated, and measurements disturbed at every
  // try (TuneResult::disturbed, disturbed_kept, summed over the tasks).
  int disturbed = 0, disturbed_kept = 0;
  // Wall time and its parts, as TuneResult's summed over the tasks; setup_seconds is
  // the tasks' tuners starting (spaces, estimators, records read, worker processes).
  double seconds = 0, measure_seconds = 0, propose_seconds = 0, update_seconds = 0, setup_seconds = 0;
  double wait_seconds = 0;          // of measure_seconds, waiting for worker ranks (TuneResult::wait_seconds)
  double overhead_fraction = 0;     // 1 - measure_seconds / seconds
  double estimated_latency_us = 0;  // sum of weight x best over tasks (0 if one has none)
  struct Point {
    double seconds;
    int trials;
    double estimated_us;
  };
  std::vector<Point> curve;
  bool stopped = false;  // NetworkTuneOptions::stop ended it
  int kin_seeded = 0;    // programs of tasks' kin queued to lead their rounds (kin_seeds)
};

// Every task's programs on the CPU are timed with their constant inputs evicted from the
// caches (TuneOptions::cold_constants) when the network's weights, all its kernels'
// constant inputs, exceed half the last-level cache this process finds its data in
// again (effective_cache_bytes: measured, as a guest is told its host's cache): in a run
// of the network each kernel then reads its weights from memory (resnet18's 44 MB on an
// Intel VM told 480 MiB and re-reading 16 MiB at cache speed: its kernels, tuned warm,
// ran 1.52x their records in the network, and 3 minutes tuned cold ran 7% faster). Half, because a
// run sweeps its weights in one order (a cache that cannot hold them all keeps none of
// them for the next run), the activations pass through the same cache, and a machine's
// last-level cache is shared with its other tenants (BERT-base's 440 MB of float32
// weights against a reported 480 MiB: tuned warm, its kernels ran 1.35x slower in the
// network than in their records, and 8% slower than the programs tuned cold).
NetworkTuneResult tune_network(const graph::Partition& p, RecordStore& store, const NetworkTuneOptions& opt);
// The bytes of constant inputs one run of the network's kernels reads (of networks merged
// by merge_partitions: the most that one run of one of them reads, whatever their
// weights), and whether they exceed half the last-level cache.
double constant_bytes(const graph::Partition& p);
bool weights_exceed_cache(const graph::Partition& p);

// The seconds a network's settling contests (TaskTuner::settle) are expected to take:
// each task that measured programs, its settle_programs x confirm measurements at its
// own mean seconds per measurement (measure_seconds over new programs, confirmations and
// remeasurements), at most a tenth of `budget_seconds`. A seconds budget's rounds end
// that much before it; the tasks then settle, the heaviest first, while it lasts.
double settle_reserve_seconds(const std::vector<const TuneResult*>& tasks, int settle_programs, int confirm,
                              double budget_seconds);

// The tasks of several networks as one partition for the task scheduler: a task that
// two networks share is one task whose weight is the sum of theirs (its constant inputs
// those constant in both), so that the budget goes where the networks' summed latency
// gains most. `scale[n]` (when given) multiplies network n's weights: a shape bucket's
// share of the calls (core/graph/shape_range.h).
graph::Partition merge_partitions(const std::vector<const graph::Partition*>& parts,
                                  const std::vector<int64_t>& scale = {});

// The estimator families of a range's buckets (NetworkTuneOptions::estimator_family):
// each task's label with every extent that is one of `extents` (the ranged dimensions'
// bucket extents) replaced by '#': one operator chain at several extents of the range.
std::vector<std::string> range_families(const graph::Partition& p, const std::set<int64_t>& extents);

// Each task's kin, nearest first: the other tasks whose keys are equal but for their
// numbers (one operator chain, its attributes and its tensors' ranks alike, at other
// extents: a CNN's depthwise convolutions of every stage), by the distance of those
// numbers (the sum of |log((1 + a) / (1 + b))|: a depthwise convolution is far from a
// pointwise one, whose groups and weights differ), at most `most` each.
std::vector<std::vector<size_t>> kin_tasks(const graph::Partition& p, int most);

// Each task's program: its best valid record on `target` among the sketches `precision`
// allows (sched::sketches_for), or, when it has none, the default configuration of its
// default sketch (sched::default_sketch; tuned = false), with the task's index added to
// `untuned`.
std::vector<codegen::ProgramChoice> choose_programs(const graph::Partition& p, const RecordStore* store,
                                                    const std::string& target, std::vector<int>* untuned,
                                                    const std::string& precision = "");

}  // namespace basin::search
