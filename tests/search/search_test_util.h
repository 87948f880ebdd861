// Shared by the search suites (space_test, strategy_test, tuner_test): small tasks whose
// spaces the tests move through, slowed programs, and random histories.
#pragma once

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/ops/registry.h"
#include "core/schedule/sketch.h"
#include "search/space.h"
#include "search/strategy.h"

namespace basin::search_test {

using namespace basin;

// The tests here tell programs apart by latency: a hook slows a program 30 times and
// the tuner must see it. A kernel with a parallel loop waits on every call for the
// pool's second thread, and on a loaded machine (ctest -j2, CI) that wait is a
// scheduler time slice: milliseconds that swamp a 30 us kernel and its 30-times-slower
// twin alike (seen in CI: a program slowed 30 times measured 1.7 times slower). One
// thread per kernel keeps the factor; the measurement workers inherit the setting.
[[maybe_unused]] inline const bool kOneThreadPerKernel = setenv("BASIN_NUM_THREADS", "1", 1) == 0;

inline ops::OpGraph small_gemm() { return ops::build_op("matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}}); }

inline std::vector<ops::OpGraph> move_tasks() {
  return {small_gemm(),
          ops::build_op("conv2d", {{"in_channels", "16"},
                                   {"out_channels", "32"},
                                   {"height", "14"},
                                   {"width", "14"},
                                   {"kernel", "3"},
                                   {"padding", "1"}}),
          ops::build_op("dense", {{"M", "197"}, {"K", "64"}, {"N", "96"}}),
          ops::build_op("softmax", std::map<std::string, std::string>{{"shape", "12,197,197"}})};
}

// f with its body run `times` times over (a program that slows by that much).
inline LoweredFunc repeated(const LoweredFunc& f, int64_t times) {
  LoweredFunc slow = f;
  slow.body = make_for(Var("again"), Expr(int64_t{0}), Expr(times), ForKind::Serial, f.body);
  return slow;
}

// The program of `space` a configuration's JSON names; `s`, where given, gets its sketch.
inline search::Candidate parse_program(search::TaskSpace& space, const std::string& json,
                                       const sched::Sketch** s = nullptr) {
  const sched::Sketch* sketch = nullptr;
  const sched::Config c = sched::config_from_json(json, space.sketches(), "test", &sketch);
  if (s) *s = sketch;
  return space.make(space.sketch_index(sketch->name), c);
}

// n distinct random programs of `space` into history (latencies 200, 201, ...).
inline void measure_random(const search::TaskSpace& space, uint64_t seed, size_t n,
                           std::vector<search::Measured>& history, std::unordered_set<std::string>& measured) {
  std::mt19937_64 rng(seed);
  while (history.size() < n) {
    search::Candidate c = space.random(rng);
    if (measured.insert(c.json).second) history.push_back({c, 200.0 + history.size()});
  }
}

// The programs of `got` that are reshapes of `parent`'s register tile.
inline std::vector<search::Candidate> reshapes_in(const search::TaskSpace& space, const search::Candidate& parent,
                                                  const std::vector<search::Candidate>& got) {
  std::set<std::string> all;
  for (const search::Candidate& r : space.reshaped_tiles(parent)) all.insert(r.json);
  std::vector<search::Candidate> out;
  for (const search::Candidate& c : got)
    if (all.count(c.json)) out.push_back(c);
  return out;
}

}  // namespace basin::search_test
