// The other ranks of a distributed tuning run (`mpirun -n K basin tune`), as rank 0's
// tuners see them: machines that measure programs for it (docs/distributed.md).
//
// Rank 0 runs everything a single-process run does: the task scheduler, every task's
// tuner, the estimator, the records file. A round's new programs are shared out: rank 0
// measures one share itself and each live worker rank another, on its own machine and
// under its own host key, while rank 0 waits for nothing but their results. The
// measurements of a program again (confirmations, contests, settling) compare programs
// side by side, so they stay on rank 0. The transport (MPI) is behind this interface:
// search/mpi.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/measure.h"

namespace basin::search {

// One program for a worker rank to measure: its slot in the round's batch (echoed in
// the outcome), its sketch by name and its configuration's JSON, and the latency above
// which it is timed briefly (codegen::MeasurePool::measure_one's slow_us).
struct RemoteProgram {
  int slot = 0;
  std::string sketch, config;
  double slow_us = 0;
};

struct RemoteOutcome {
  enum class Kind {
    Measured,  // a program measured: result, host and codegen set
    Skipped,   // a program not measured, as the work was cancelled
    Lost,      // the rank is gone (no word from it for the silence limit): slot -1
  };
  Kind kind = Kind::Measured;
  int rank = 0;
  uint64_t work = 0;  // the send() that asked for it
  int slot = -1;
  codegen::MeasureResult result;
  std::string host, codegen;  // the machine that measured it, and its code generation
  // The description of that machine (basin::Hardware::to_json) as its rank sent it;
  // empty when it sent none.
  std::string machine;
  double started_at = 0, finished_at = 0;
};

// What one rank did in the run.
struct RankReport {
  int rank = 0;
  std::string host;
  int measured = 0;  // programs it measured that reached the records
  // Seconds it spent compiling and measuring programs (a worker's as of its last
  // result; rank 0's, its own measurements, `local_busy` of report()).
  double busy_seconds = 0;
  bool lost = false;
};

// Rank 0's messages of the run (heartbeats left out): work sent and results received.
struct Traffic {
  int64_t messages_out = 0, bytes_out = 0, messages_in = 0, bytes_in = 0;
};

class Cluster {
 public:
  virtual ~Cluster() = default;
  // The worker ranks that are alive now, in order.
  virtual std::vector<int> live_workers() = 0;
  // Asks `rank` to measure `programs` of the task with key `task_key` (the rank builds
  // the task from its key, sched::task_from_key) with the measurer's `options`, in
  // order; each outcome comes back as it is measured. Returns the work's id.
  virtual uint64_t send(int rank, const std::string& task_key, const codegen::MeasureOptions& options,
                        const std::vector<RemoteProgram>& programs) = 0;
  // The rest of a work's programs are skipped: the one being measured still comes back
  // measured, every other one as Skipped.
  virtual void cancel(int rank, uint64_t work) = 0;
  // The next outcome, waiting up to `timeout_seconds`; nothing when none came. A lost
  // rank is reported once.
  virtual std::optional<RemoteOutcome> next(double timeout_seconds) = 0;
  // Every rank's share so far; rank 0's `local` programs and busy seconds given.
  virtual std::vector<RankReport> report(int local, double local_busy = 0) = 0;
  virtual Traffic traffic() = 0;
};

}  // namespace basin::search
