// The gradient search's proposal sources: each adds programs to a batch that the Felix
// descent (search/descent.h) rarely reaches, for a reason measured on real tasks and
// stated at its definition. search/gradient.cc composes a batch from the descent and
// these, in one place (Gradient::propose). A source that takes places of its own
// returns its programs, none of them measured or among `taken` (the programs earlier
// sources took this batch); `good` is the measured programs that ran, fastest first;
// `n` the batch's size. A source never takes more than a quarter of a batch.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "search/strategy.h"

namespace basin::search::detail {

// The first batch, before anything is measured: the sketches in turn (in a random
// order), each its best predicted of `draws` random programs, and with `fill` first its
// best with a register-filling tile, then with `whole` its best with the fullest
// filling tile that has no partial tile (factors that divide their extents): on AVX2,
// resnet18-c10's and -c12's fastest programs' 1 x 7 tiles were never the fullest, and
// guarded tiles of 12 ran 10 to 20% slower.
struct FirstBatchOptions {
  int draws = 32;
  int fill = 1;
  int whole = 1;
};
// Register-filling tiles: `slots` sketches in turn, each its fastest program with a
// register tile that fills the vector registers; `registers` it may take (0: the
// host's, less the relaxation's reserve).
struct FillOptions {
  int slots = 2;
  int registers = 0;
};
std::vector<Candidate> first_batch(SearchState& state, int n, const FirstBatchOptions& opt, const FillOptions& fill);
std::vector<Candidate> fill_picks(SearchState& state, const std::vector<const Measured*>& good,
                                  const std::vector<Candidate>& taken, int n, const FillOptions& opt);

// The discrete neighbourhood of the `parents` fastest programs (`moves` mutations
// each: one prime factor moved between tiling levels, or the unroll depth changed),
// into the ranked pool beside the descent's points.
struct LocalMoveOptions {
  int parents = 4;
  int moves = 16;
};
void local_moves(SearchState& state, const std::vector<const Measured*>& good, const LocalMoveOptions& opt,
                 std::map<std::string, Candidate>& pool);

// The best-predicted program of `slots` sketches in turn, taken out of `ranked`.
std::vector<Candidate> sketch_picks(const SearchState& state, std::vector<Candidate>& ranked, int n, int slots);

// The fastest programs' tilings in `slots` other sketches, of the first `parents`.
struct SiblingOptions {
  int slots = 2;
  int parents = 4;
};
std::vector<Candidate> sibling_picks(SearchState& state, const std::vector<const Measured*>& good,
                                     const std::vector<Candidate>& taken, int n, const SiblingOptions& opt);

// The fastest programs at `slots` other unroll depths.
std::vector<Candidate> unroll_picks(SearchState& state, const std::vector<const Measured*>& good,
                                    const std::vector<Candidate>& taken, int n, int slots);

// The fastest program with `slots` other factors of a one-level split (a reduction's block).
std::vector<Candidate> block_picks(SearchState& state, const std::vector<const Measured*>& good,
                                   const std::vector<Candidate>& taken, int n, int slots);

// Register tiles: `slots` reshapes of the fastest programs' tiles, a follow-up of a
// tile close to the best (within `margin`, fewer than `followups` programs), and
// `sketch_slots` other sketches' fastest programs reshaped (those within
// `sketch_margin` of the best). The follow-up draws 2 x `moves` mutations. Two other
// sketches' places: with one, resnet18-c12 held `vec=w` programs 20% behind
// annealing's best for 300 trials on seeds 1 to 4, with two on none but seed 4; C2
// and C6 were as fast or faster.
struct TileOptions {
  int slots = 2;
  int followups = 8;
  double margin = 0.03;
  int sketch_slots = 2;
  double sketch_margin = 0.5;
};
std::vector<Candidate> tile_picks(SearchState& state, const std::vector<const Measured*>& good,
                                  const std::vector<Candidate>& taken, int n, const TileOptions& opt, int moves);

}  // namespace basin::search::detail
