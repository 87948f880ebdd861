// The Felix descent (DESIGN.md, "Proposal"; the Felix paper): seeds in each sketch's
// polytope (points of the best measured programs with a little noise, the rest uniform),
// Adam on the knobs' exponents minimizing the differentiable estimator's score of the
// relaxed features plus the constraint penalty (its gradient scaled against the
// score's), a projection back into the polytope after each step, and every visited
// point rounded to valid configurations. The proposal sources (search/sources) add
// programs beside it; search/gradient.cc composes a batch from both.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "search/strategy.h"

namespace basin::models {
class DifferentiableEstimator;
}

namespace basin::search::detail {

struct DescentOptions {
  int seeds = 32;               // per batch, over every sketch
  int steps = 32;               // Adam steps per descent
  double learning_rate = 0.22;  // in exponent units
  double penalty_weight = 1.0;  // the constraint penalty's gradient against the score's
  double best_share = 0.25;     // seeds started at the best measured programs
  double seed_noise = 0.5;      // their Gaussian noise, in exponent units
  // Every visited point also rounded to its nearest tilings (KnobSpace::round_to_tilings):
  // rounding each prime's exponent alone turns a tile of 2^2 * 7^0.29 = 7 into 4, and on
  // resnet18-c10 the search then measured 26 programs with the whole 7-wide row in the
  // register tile where annealing measured 405, and annealing's were the fastest.
  int nearest_tilings = 1;
};

// One batch's descents from every sketch at once, seeded from `good` (the measured
// programs, fastest first): every visited point's rounded programs not yet measured,
// into `visited` by their configuration's JSON.
void descend(SearchState& state, models::DifferentiableEstimator& est, const std::vector<const Measured*>& good,
             const DescentOptions& opt, std::map<std::string, Candidate>& visited);

}  // namespace basin::search::detail
