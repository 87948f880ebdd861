// The tuning commands (`tune`, `tune-op`) started by mpirun as one of K > 1 ranks
// (search/mpi.h, docs/distributed.md): rank 0 tunes with the others measuring for it,
// the others serve it.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "search/cluster.h"
#include "search/mpi.h"

namespace basin::tools {

struct Ranks {
  std::unique_ptr<search::mpi::Session> session;  // null: a run of its own
  std::unique_ptr<search::Cluster> cluster;       // rank 0's view of the others
  // A worker rank: it serves rank 0 (serve()) and does nothing else.
  bool worker() const { return session && session->rank() > 0; }
  // Measures what rank 0 sends until it says stop; the command's exit status.
  int serve() { return session->serve(); }
  // Rank 0, after the run: each rank's share (`local`, the programs measured here) as
  // JSON and in one line on stderr naming the lost ranks; null when single.
  nlohmann::json report(int local, double local_busy, bool quiet) const;
  // Rank 0's messages of the run (search::Traffic) as JSON; null when single.
  nlohmann::json traffic() const;
};

// MPI started when mpirun started this process as one of K > 1 ranks; on rank 0, the
// cluster of the others once they said hello. One line on stderr (unless quiet) says
// how many ranks tune, and a rank whose CPU set is narrower than the threads its
// kernels use says so (mpirun binds each rank to a core unless told --bind-to none).
Ranks start_ranks(bool quiet);

}  // namespace basin::tools
