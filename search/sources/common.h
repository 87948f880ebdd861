// What the proposal sources share (search/sources/source.h): the best predicted of a set, register tiles as a sketch
// and its innermost factors, and the vector file a register-filling tile may take.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/util/host.h"
#include "relax/constraints.h"
#include "search/space.h"
#include "search/strategy.h"

namespace basin::search::detail {

// The best predicted of `cs` (not empty), whose predictions it fills.
inline Candidate& best_predicted(SearchState& state, std::vector<Candidate>& cs) {
  state.space.predict(*state.estimator, cs);
  return *std::min_element(cs.begin(), cs.end(),
                           [](const Candidate& a, const Candidate& b) { return a.predicted < b.predicted; });
}

// The register tile holds the accumulators: one that fills the vector registers
// loads each input value once for the most arithmetic, the micro-kernel shape of BLIS
// (on resnet18-c12 and -c9, Zen 4: 28 of 32 AVX-512 registers, in an
// unpacked sketch). A sketch's random programs mostly have small tiles, so a sketch
// that is fastest with a full one can measure among the slowest at first: on C12
// the best family's random programs were, the estimator ranked its fast programs at
// chance, and 2 of 8 gradient runs (no annealing run) found it, the register tile
// growing a reshape at a time (7 accumulators, 3861 us; 14, 2687; 28, 2297).
// This host's vector width, and the registers a filling tile may take with the operand
// values it keeps live: the register file (relax::CpuTarget, the same file its
// register-tile penalty counts).
inline VectorFile fill_file(int registers) {
  const relax::CpuTarget t = relax::CpuTarget::host();
  return {registers > 0 ? registers : t.vector_registers, t.vector_bytes};
}
// Keeps the first of `cs` (filled tiles in TaskSpace::filled_tiles' order) and those as
// full with as few loads.
inline void keep_leanest_fullest(const SearchState& state, std::vector<Candidate>& cs, int vector_bytes) {
  if (cs.empty()) return;
  const TaskSpace& space = state.space;
  const int64_t registers = space.tile_registers(cs[0], vector_bytes), loads = space.tile_loads(cs[0], vector_bytes);
  cs.erase(std::remove_if(cs.begin(), cs.end(),
                          [&](const Candidate& c) {
                            return space.tile_registers(c, vector_bytes) != registers ||
                                   space.tile_loads(c, vector_bytes) != loads;
                          }),
           cs.end());
}
using Tile = std::pair<int, std::vector<int64_t>>;  // a sketch and a register tile
struct TileGroup {
  int count = 0;                   // measured programs with the tile
  const Measured* best = nullptr;  // the fastest of them
};
inline Tile tile_of(const SearchState& state, const Candidate& c) { return {c.sketch, state.space.register_tile(c)}; }
// Into `seen` the tiles of the measured programs and of `taken`, into `used` the
// programs of `taken`.
inline void taken_tiles(const SearchState& state, const std::vector<Candidate>& taken, std::set<Tile>* seen,
                        std::set<std::string>* used) {
  for (const Measured& m : state.history) seen->insert(tile_of(state, m.candidate));
  for (const Candidate& c : taken) {
    seen->insert(tile_of(state, c));
    used->insert(c.json);
  }
}

}  // namespace basin::search::detail
