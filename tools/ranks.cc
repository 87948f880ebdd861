#include "tools/ranks.h"

#include <sched.h>

#include <algorithm>
#include <iostream>

#include "codegen/cpu_runtime.h"
#include "core/util/host.h"

namespace basin::tools {

Ranks start_ranks(bool quiet) {
  search::mpi::Settings settings;
  // A lost rank is said even when quiet: the run goes on with fewer.
  settings.log = [](const std::string& line) { std::cerr << "basin: " << line << "\n" << std::flush; };
  Ranks r;
  r.session = search::mpi::Session::start_if_launched(settings);
  if (!r.session) return r;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int threads = codegen::runtime_threads();
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < threads)
    std::cerr << "basin: warning: rank " << r.session->rank() << " may run on " << CPU_COUNT(&set)
              << " cores, but its kernels use " << threads
              << " threads (BASIN_NUM_THREADS): bind ranks to as many cores as they use (mpirun --bind-to none, "
                 "or set BASIN_NUM_THREADS)\n";
  if (r.session->rank() == 0) {
    r.cluster = r.session->cluster();
    if (!quiet)
      std::cerr << "basin: tuning on " << r.session->size() << " ranks (" << r.cluster->live_workers().size()
                << " measuring for rank 0, which tunes, keeps the records and measures too)\n";
  }
  return r;
}

nlohmann::json Ranks::report(int local, double local_busy, bool quiet) const {
  if (!cluster) return nullptr;
  nlohmann::json j = nlohmann::json::array();
  std::string line = "programs measured by rank:";
  for (const search::RankReport& k : cluster->report(local, local_busy)) {
    j.push_back({{"rank", k.rank},
                 {"host", k.host},
                 {"measured", k.measured},
                 {"busy_seconds", std::max(0.0, k.busy_seconds)},
                 {"lost", k.lost}});
    line += " " + std::to_string(k.rank) + ": " + std::to_string(k.measured) + (k.lost ? " (lost)" : "");
  }
  for (const search::RankReport& k : cluster->report(local))
    if (k.lost) line += "; rank " + std::to_string(k.rank) + " (" + k.host + ") was lost during the run";
  if (!quiet || line.find("lost during") != std::string::npos) std::cerr << "basin: " << line << "\n";
  return j;
}

nlohmann::json Ranks::traffic() const {
  if (!cluster) return nullptr;
  const search::Traffic t = cluster->traffic();
  return {{"messages_out", t.messages_out},
          {"bytes_out", t.bytes_out},
          {"messages_in", t.messages_in},
          {"bytes_in", t.bytes_in}};
}

}  // namespace basin::tools
