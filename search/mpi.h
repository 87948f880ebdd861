// MPI for a tuning run shared by K ranks (`mpirun -n K basin tune ...`,
// docs/distributed.md). Every rank runs the same command and builds the same tasks;
// rank 0 tunes them (search/cluster.h), and ranks 1..K-1 measure the programs it sends
// them, each on its own machine. Only search/mpi.cc includes <mpi.h>; a basin built
// without MPI (BASIN_WITH_MPI=OFF, or no MPI found) refuses to run as more than one rank.
//
// Every MPI call is made by one communication thread per process (MPI_THREAD_SERIALIZED):
// it sends what the process posts, receives what comes, and sends each peer it watches
// a heartbeat every second. Rank 0 watches every worker and gives one up after
// Settings::silence_seconds without word from it (a killed rank, a machine gone: its
// programs are measured again on rank 0); a worker watches rank 0 and ends after
// Settings::leader_silence_seconds without it. A rank's death ends the other ranks only
// where mpirun is told not to do so itself (`mpirun --enable-recovery`).
#pragma once

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "codegen/measure.h"
#include "search/cluster.h"

namespace basin::search::mpi {

// Whether this basin was built with MPI (BASIN_WITH_MPI).
bool built_with_mpi();
// The ranks of the mpirun that started this process, from its environment (Open MPI's
// OMPI_COMM_WORLD_SIZE, MPICH's PMI_SIZE); 0 when no mpirun started it.
inline int launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

struct Settings {
  double silence_seconds = 10;                  // rank 0 gives a worker up after this long without word
  double leader_silence_seconds = 30;           // a worker gives rank 0 up
  std::function<void(const std::string&)> log;  // one line per event (a rank lost); may be null
};

class Session {
 public:
  // MPI started, when mpirun started this process as one of K > 1 ranks; else null (a
  // single rank, `mpirun -n 1`, is a run of its own). Throws basin::Error when K > 1
  // and this basin was built without MPI.
  static std::unique_ptr<Session> start_if_launched(Settings settings = {});
  // Rank 0 tells every worker to stop; then MPI ends.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const;
  int size() const;
  // Rank 0: the other ranks, once each has said hello (or is lost). Throws
  // basin::Error naming a rank whose basin generates other code (its programs'
  // latencies would not be this basin's). The cluster lives no longer than the session.
  std::unique_ptr<Cluster> cluster();
  // A worker rank: says hello, then measures what rank 0 sends until rank 0 says stop
  // (returns 0) or is lost (returns 1).
  int serve();

  struct Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace basin::search::mpi
