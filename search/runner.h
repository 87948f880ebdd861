// Where a task's round measures its new programs (TaskTuner::round, search/tuner.h): all
// here (the local runner), or shared out between this process and the live worker ranks
// of a run on several machines (the cluster runner, search/cluster.h). The tuner owns
// what happens to a measured program (the records file, the history, the estimator's
// samples, the contest); a runner decides only which program is measured where and when.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/measure.h"
#include "search/cluster.h"

namespace basin::search::detail {

// A round as its runner sees it: `size()` new programs, slots 0 to size() - 1.
class Round {
 public:
  virtual ~Round() = default;
  virtual size_t size() const = 0;
  // Measures the programs of `which` here, in order, compiled ahead a slice at a time,
  // each followed by `between`. Once one program of the round is measured, a spent
  // budget (or a stop) ends it: the rest are left unmeasured.
  virtual void measure_here(const std::vector<size_t>& which, const std::function<void()>& between) = 0;
  // A program of the round measured by a worker rank.
  virtual void take_remote(size_t slot, const RemoteOutcome& outcome) = 0;
  // A program of the round left unmeasured (it may be proposed again).
  virtual void leave_unmeasured(size_t slot) = 0;
  // True once a program of the round is measured and the budget is spent or a stop asked.
  virtual bool halted() = 0;
  // Holds the round's contest (ContestPolicy::round) now; returns the measurements it took.
  virtual int hold_contest() = 0;
  // Seconds the round waited for the worker ranks' results (counted as measurement).
  virtual void waited(double seconds) = 0;
  // What a worker needs to measure slot's program: the task's key, the sketch's name, the
  // configuration's JSON and the latency above which it is timed briefly.
  virtual std::string task_key() const = 0;
  virtual RemoteProgram remote_program(size_t slot) const = 0;
};

class RoundRunner {
 public:
  virtual ~RoundRunner() = default;
  // A round starts (the cluster runner takes the workers alive now for it): the most of
  // the `proposed` programs of a round of `n` it takes. A runner that measures one
  // program at a time stops at a trial budget by itself; one that sends a round out at
  // once takes n at most.
  virtual size_t start_round(size_t proposed, int n) = 0;
  // Measures (or leaves unmeasured) every program of the round started last. Returns whether it
  // held the round's contest on the way; if not, the tuner holds it after.
  virtual bool run(Round& round) = 0;
};

// Every program measured here, in order.
std::unique_ptr<RoundRunner> local_runner();
// Shared out between this process and `cluster`'s live workers (those alive when the
// round starts; none: as the local runner). The workers measure with `options` (the
// tuner's). This process holds the contest as soon as its own share is measured, while
// the workers still measure theirs: its share is the round's work (the new programs
// and the last contest's measurements) split evenly between the ranks, less the contest.
std::unique_ptr<RoundRunner> cluster_runner(Cluster& cluster, const codegen::MeasureOptions& options);

}  // namespace basin::search::detail
