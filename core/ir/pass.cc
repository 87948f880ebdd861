#include "core/ir/pass.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "core/ir/partition_loops.h"
#include "core/ir/version_tiles.h"

namespace basin {

LoweredFunc run_passes(LoweredFunc f, const char* pipeline, const std::vector<Pass>& passes, bool allow_knob_vars) {
  static const bool debug = std::getenv("BASIN_DEBUG_LOWER") != nullptr;
  for (const Pass& p : passes) {
    const auto t0 = std::chrono::steady_clock::now();
    Stmt r = p.run(f.body);
#ifndef NDEBUG
    LoweredFunc after = f;
    after.body = r;
    verify_well_formed(after, {allow_knob_vars, false});
#endif
    if (debug && !r.same_as(f.body)) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::cerr << "[" << pipeline << "] after " << p.name << " (" << ms << " ms):\n" << to_string(r);
    }
    f.body = std::move(r);
  }
  return f;
}

LoweredFunc prepare_for_backend(const LoweredFunc& f) {
  return run_passes(f, "backend",
                    {{"version_tiles", [](const Stmt& s) { return version_tiles(s); }},
                     {"partition_loops", [](const Stmt& s) { return partition_loops(s); }}});
}

}  // namespace basin
