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
  // Rank 0, after a shared run that measured `measured` programs in all, `busy_seconds`
  // of them here: each rank's share into `j` ("ranks") with rank 0's messages
  // ("rank0_traffic", search::Traffic), and one line on stderr naming the lost ranks
  // (unless quiet and none was lost). Nothing in a run of its own.
  void report(nlohmann::json& j, int measured, double busy_seconds, bool quiet) const;
};

// MPI started when mpirun started this process as one of K > 1 ranks; on rank 0, the
// cluster of the others once they said hello. One line on stderr (unless quiet) says
// how many ranks tune, and a rank whose CPU set is narrower than the threads its
// kernels use says so (mpirun binds each rank to a core unless told --bind-to none).
Ranks start_ranks(bool quiet);

}  // namespace basin::tools
