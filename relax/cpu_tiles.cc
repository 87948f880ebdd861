#include "relax/cpu_tiles.h"

#include <algorithm>

namespace basin::relax {

std::vector<int64_t> register_tile(const sched::Sketch& s, const sched::Config& c) {
  std::vector<int64_t> tile(s.splits.size(), 0);
  for (size_t k = 0; k < s.splits.size(); ++k)
    if (s.splits[k].parts >= 2) tile[k] = c.factors[k].back();
  return tile;
}

int64_t tile_registers(const sched::Sketch& s, const sched::Config& c, int vector_bytes) {
  if (s.rule != sched::SketchRule::Anchor) return 0;
  int64_t count = 1;
  bool vector = false;
  for (size_t k = 0; k < s.splits.size(); ++k) {
    if (s.splits[k].parts < 2) continue;
    const std::vector<int64_t>& f = c.factors[k];
    if (s.acc_level == 1) count *= f[f.size() - 2];  // the accumulator covers S2 x S3
    if (s.splits[k].vectorized) {
      count *= (4 * f.back() + vector_bytes - 1) / vector_bytes;
      vector = true;
    } else {
      count *= f.back();
    }
  }
  return vector ? count : 0;
}

int64_t step_loads(const sched::Sketch& s, const std::vector<bool>& operand, const std::vector<int64_t>& inner,
                   int vector_bytes) {
  int64_t vectors = 1, broadcasts = 1;
  for (size_t k = 0; k < s.splits.size(); ++k) {
    if (s.splits[k].parts < 2) continue;
    const int64_t f = inner[k];
    if (s.splits[k].vectorized) vectors *= s.vector_operand_strided ? f : (4 * f + vector_bytes - 1) / vector_bytes;
    else if (operand[k]) vectors *= f;
    else broadcasts *= f;
  }
  return vectors + broadcasts;
}

int64_t tile_loads(const sched::Sketch& s, const sched::Config& c, int vector_bytes) {
  if (tile_registers(s, c, vector_bytes) == 0) return 0;
  return step_loads(s, sched::vector_operand_splits(s), register_tile(s, c), vector_bytes);
}

int64_t live_registers(const sched::Sketch& s, const std::vector<bool>& operand, const std::vector<int64_t>& inner,
                       int64_t accumulators, int vector_bytes) {
  std::vector<int64_t> counted = inner;  // the vectorized split in vectors
  for (size_t k = 0; k < s.splits.size(); ++k)
    if (s.splits[k].vectorized) counted[k] = (4 * inner[k] + vector_bytes - 1) / vector_bytes;
  return accumulators +
         operand_registers<int64_t>(s, operand, counted, [](int64_t x) { return std::min<int64_t>(x, 1); }, 1, 0);
}

int64_t live_registers(const sched::Sketch& s, const sched::Config& c, int vector_bytes) {
  const int64_t acc = tile_registers(s, c, vector_bytes);
  if (acc == 0) return 0;
  return live_registers(s, sched::vector_operand_splits(s), register_tile(s, c), acc, vector_bytes);
}

}  // namespace basin::relax
