// A task's search space as the strategies see it (DESIGN.md, "Search"): its sketches,
// candidate programs (a sketch and a configuration), their features through each
// sketch's exact evaluator (relax/relaxed_sketch.h, the same code path as the
// training features), the estimator's predictions with a cache, and the moves of the
// discrete strategies: a random configuration, a neighbour (one knob changed), a tile
// mutation (one prime factor moved between levels of a split) and a crossover.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ops/registry.h"
#include "core/schedule/sketch.h"
#include "models/estimator.h"

namespace basin::relax {
class RelaxedSketch;
}

namespace basin::search {

struct Candidate {
  int sketch = 0;  // index into TaskSpace::sketches()
  sched::Config config;
  std::string json;  // sched::config_to_json: names the sketch, identifies the program
  double predicted = std::numeric_limits<double>::quiet_NaN();  // estimator score, lower = faster
};

class TaskSpace {
 public:
  // The task's sketches for `target` ("llvm": CPU sketches, "cuda": GPU sketches) and
  // `precision` (sched::sketches_for).
  explicit TaskSpace(ops::OpGraph task, const std::string& target = "llvm", const std::string& precision = "");
  ~TaskSpace();
  TaskSpace(const TaskSpace&) = delete;
  TaskSpace& operator=(const TaskSpace&) = delete;

  const ops::OpGraph& task() const { return task_; }
  const std::string& key() const { return key_; }
  const std::vector<sched::Sketch>& sketches() const { return sketches_; }
  int sketch_index(const std::string& name) const;  // throws NotFoundError

  // A candidate of sketch `sketch` (its json filled in).
  Candidate make(int sketch, sched::Config config) const;
  // A uniformly random sketch, then a uniformly random valid configuration.
  Candidate random(std::mt19937_64& rng) const;

  // Moves; each returns false when it found no valid result (out is then unchanged).
  // One knob (a split's factor tuple or the unroll depth) set to another of its values.
  bool neighbor(const Candidate& c, std::mt19937_64& rng, Candidate* out) const;
  // One prime factor moved from one level of a split (the outermost included) to
  // another, or the unroll depth changed (Ansor's tile-size and unroll mutations).
  bool mutate(const Candidate& c, std::mt19937_64& rng, Candidate* out) const;
  // Each split's factors and the unroll depth from either parent (same sketch).
  bool crossover(const Candidate& a, const Candidate& b, std::mt19937_64& rng, Candidate* out) const;
  // c's configuration in another sketch, `sketch`, whose splits have the same names,
  // extents and shapes: the same tiling with another vector axis, packing, accumulator
  // level or producer placement. False when the splits differ, the sketch is c's own,
  // or the configuration is not valid there.
  bool transplant(const Candidate& c, int sketch, Candidate* out) const;
  // The register tile of c: the innermost factor of each split of two or more levels
  // (0 for the others).
  std::vector<int64_t> register_tile(const Candidate& c) const;
  // c with other register tiles: the innermost factors of one or two splits of two or
  // more levels multiplied or divided by one or two of their primes (8x16 to 4x64 is
  // one reshape), or set to one of the two sizes nearest above or below among the
  // split's factors (4 to 7 of 56). A factor gained comes from the levels outside, the nearest first,
  // the outermost (extent / product) last; a factor lost goes to the next level out.
  // Only valid configurations, each tile once.
  std::vector<Candidate> reshaped_tiles(const Candidate& c) const;
  // The registers and loads per step of c's register tile (relax/cpu_tiles.h, the CPU
  // register-tile model).
  int64_t tile_registers(const Candidate& c, int vector_bytes) const;
  int64_t tile_loads(const Candidate& c, int vector_bytes) const;
  // Its accumulators and the operand values its loop order keeps live
  // (relax::live_registers): what filled_tiles holds within the register file.
  int64_t live_registers(const Candidate& c, int vector_bytes) const;
  // c with register tiles whose accumulators and the operand values they keep live
  // (live_registers) fit `registers` vector registers (the register file), their
  // accumulators at least half of `registers` less 4, the fullest first, and of equally
  // full ones those with the fewest loads per step first (tile_loads; further ties in
  // the order enumerated). Every split of two or more levels gets an innermost factor among its factors,
  // the vectorized one whole vectors; where no whole vector is among its factors, the
  // widest power-of-two part of one that is at least half (one register), else c's own
  // lanes. The levels outside give or take the difference as reshaped_tiles' do (with
  // an accumulator at level 1, S2 is 1: its factor goes a level out). The
  // unroll depth is c's, or where that is below the register tile's loop steps (the
  // vector loop one step) the smallest of the menu at least those. Only valid
  // configurations, each tile once; none when tile_registers(c) is 0. With
  // `fullest_only`, only the tiles as full as the fullest valid one (the others are
  // not built); with `whole_only`, only tiles whose factors divide their splits'
  // extents (no partial tile at an edge). docs/search.md, "Register-filling tiles".
  std::vector<Candidate> filled_tiles(const Candidate& c, int registers, int vector_bytes, bool fullest_only = false,
                                      bool whole_only = false) const;
  // How many of the anchor choices (vector axis, packing, accumulator level, producer
  // placement, shared prefix, warp shuffles; a tensor-core pipeline's stages count their
  // difference) two sketches differ in; another rule counts 10.
  int sketch_distance(int a, int b) const;

  // The candidates' exact features, padded to the largest store count.
  models::FeatureBatch features(const std::vector<Candidate>& cs);
  // The programs' features as training samples (latency left 0), each with its own
  // sketch's store count; computed in one batch (features()).
  std::vector<models::Sample> samples(const std::vector<Candidate>& cs);
  // Fills `predicted` of each candidate. Scores are cached by program for one
  // estimator until invalidate_predictions() (call it after the estimator changes); a
  // call with another estimator starts a new cache.
  void predict(models::Estimator& est, std::vector<Candidate>& cs);
  void invalidate_predictions() { scores_.clear(); }
  // Number of programs scored by predict() (cache misses), for the overhead report.
  int64_t predictions() const { return predictions_; }

  // The sketch's evaluators, built on first use (by build_evaluators, the relaxed one
  // with the exact one): exact (features of configurations) and relaxed (the gradient
  // search).
  relax::RelaxedSketch& exact(int sketch);
  relax::RelaxedSketch& relaxed(int sketch);
  // Builds the evaluators not built yet of the sketches listed (every sketch when none
  // is), the exact ones and with `relaxed` the relaxed ones too, a sketch per helper
  // thread, both modes from one derivation: a task's first round builds all of them,
  // and each takes milliseconds (the features derived symbolically, then compiled to a
  // tape).
  void build_evaluators(bool relaxed, const std::vector<int>& sketches = {});

 private:
  ops::OpGraph task_;
  std::string key_;
  std::vector<sched::Sketch> sketches_;
  std::vector<std::unique_ptr<relax::RelaxedSketch>> exact_, relaxed_;
  std::unordered_map<std::string, double> scores_;
  const models::Estimator* scored_by_ = nullptr;
  int64_t predictions_ = 0;
};

}  // namespace basin::search
