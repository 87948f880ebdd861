#include "tools/ranks.h"

#include <sched.h>

#include <algorithm>
#include <iostream>

#include "codegen/cpu_runtime.h"
#include "core/util/hardware.h"
#include "core/util/host.h"

namespace basin::tools {

Ranks start_ranks(bool quiet) {
  // The machine's description (stored with the records) is measured, once per machine,
  // before any kernel runs.
  this_hardware();
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

void Ranks::report(nlohmann::json& j, int measured, double busy_seconds, bool quiet) const {
  if (!cluster) return;
  int remote = 0;
  for (const search::RankReport& k : cluster->report(0)) remote += k.measured;
  nlohmann::json ranks = nlohmann::json::array();
  std::string line = "programs measured by rank:", lost;
  for (const search::RankReport& k : cluster->report(measured - remote, busy_seconds)) {
    ranks.push_back({{"rank", k.rank},
                     {"host", k.host},
                     {"measured", k.measured},
                     {"busy_seconds", std::max(0.0, k.busy_seconds)},
                     {"lost", k.lost}});
    line += " " + std::to_string(k.rank) + ": " + std::to_string(k.measured) + (k.lost ? " (lost)" : "");
    if (k.lost) lost += "; rank " + std::to_string(k.rank) + " (" + k.host + ") was lost during the run";
  }
  if (!quiet || !lost.empty()) std::cerr << "basin: " << line << lost << "\n";
  const search::Traffic t = cluster->traffic();
  j["ranks"] = ranks;
  j["rank0_traffic"] = {{"messages_out", t.messages_out},
                        {"bytes_out", t.bytes_out},
                        {"messages_in", t.messages_in},
                        {"bytes_in", t.bytes_in}};
}

}  // namespace basin::tools
