// The continuous space of a sketch's knobs (DESIGN.md, "The relaxation"). A split
// factor f of a loop with extent N = prod_p p^e_p is written f = prod_p p^x_p with real
// exponents x_p >= 0; the exponents of one prime over a split's levels sum to at most
// e_p, a linear constraint, so integer points of the polytope are exactly the divisor
// tilings. A guarded split (awkward extents, sched::SplitSpec) has exponents of 2, 3 and
// its extent's primes, with one constraint over all its levels, sum x_p log2 p <=
// log2 N: its integer points are the tilings whose product is at most N, and the
// number of tiles ceil(N / prod f) is relaxed with the rest. The unroll depth u is one real variable z = log2(1 + u),
// rounded to the nearest menu entry in that space (the entry 0, no unrolling, sits at z = 0).
//
// Variables are laid out split by split, level by level, prime by prime, then z.
#pragma once

#include <Eigen/Core>
#include <random>
#include <string>
#include <vector>

#include "core/schedule/sketch.h"

namespace basin::relax {

class KnobSpace {
 public:
  explicit KnobSpace(const sched::Sketch& s);

  const sched::Sketch& sketch() const { return sketch_; }
  int num_vars() const { return static_cast<int>(names_.size()); }
  // "<split>.<level>^<prime>" and "unroll".
  const std::vector<std::string>& var_names() const { return names_; }
  int unroll_var() const { return num_vars() - 1; }

  // The polytope: A x <= b, and 0 <= x_i <= upper_i for every variable.
  const Eigen::MatrixXd& A() const { return A_; }
  const Eigen::VectorXd& b() const { return b_; }
  const Eigen::VectorXd& upper() const { return upper_; }
  bool contains(const Eigen::VectorXd& x, double tol = 1e-9) const;

  // Real factor values at x: factors[split][level] = prod_p p^x.
  std::vector<std::vector<double>> factors(const Eigen::VectorXd& x) const;
  double unroll(const Eigen::VectorXd& x) const;  // 2^z - 1

  // The exact point of an integer configuration.
  Eigen::VectorXd point_of(const sched::Config& c) const;
  // The nearest valid configuration: exponents rounded to the nearest integers and
  // repaired into the polytope (the most rounded-up first), z to the nearest menu
  // entry in log2 space, then inner tiles shrunk while the sketch's checks fail.
  sched::Config round(const Eigen::VectorXd& x) const;
  // The nearest tilings: each split's tiling (sched::split_factorizations) nearest the
  // point's continuous factors (the product of p^x over its primes, per level) in log2
  // space, z and the sketch's checks as in round. Where round takes each prime's
  // exponent on its own, this keeps a level's size: a guarded split of 7 at 2^2 * 7^0.29
  // (a tile of 7.0, on the group's bound) is 7 here and 4 there.
  sched::Config round_to_tilings(const Eigen::VectorXd& x) const;

  // A point strictly inside the polytope (every level gets an equal share of each prime).
  Eigen::VectorXd center() const;
  // n points uniform in the polytope by hit-and-run from center(), after `burn_in`
  // steps and keeping every `thin`-th step.
  std::vector<Eigen::VectorXd> sample(int n, std::mt19937_64& rng, int burn_in = 50, int thin = 10) const;

  // The exponent variables (every variable but the unroll one), in variable order.
  struct PrimeVar {
    int split, level;
    int64_t prime;
    int group;      // row of A: the (split, prime) pair, or the guarded split
    double weight;  // its coefficient there: 1, or log2(prime) for a guarded split
  };
  const std::vector<PrimeVar>& exponent_vars() const { return vars_; }

 private:
  // Exponents `e` (one per variable) into a configuration: z to the nearest menu entry,
  // then inner tiles shrunk while the sketch's checks fail.
  sched::Config finish(std::vector<int> e, const Eigen::VectorXd& x) const;
  sched::Sketch sketch_;
  std::vector<PrimeVar> vars_;  // one per exponent variable (z excluded)
  std::vector<std::string> names_;
  std::vector<double> group_bound_;
  // Per split: its valid tilings (sched::split_factorizations, cached there) and their
  // factors' log2, flat (tiling t, level l at t * parts + l), for round_to_tilings.
  std::vector<const std::vector<std::vector<int64_t>>*> tilings_;
  std::vector<std::vector<double>> tiling_log2_;
  Eigen::MatrixXd A_;
  Eigen::VectorXd b_, upper_;
  std::vector<double> menu_log2_;  // log2(1 + u) of each unroll menu entry u
};

using sched::factorize;

}  // namespace basin::relax
