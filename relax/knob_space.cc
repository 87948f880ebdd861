#include "relax/knob_space.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/util/error.h"

namespace basin::relax {

KnobSpace::KnobSpace(const sched::Sketch& s) : sketch_(s) {
  std::vector<double> var_upper;
  for (size_t i = 0; i < s.splits.size(); ++i) {
    const sched::SplitSpec& sp = s.splits[i];
    auto add = [&](int64_t p, int group, double weight, double upper) {
      for (int l = 0; l < sp.parts; ++l) {
        vars_.push_back({static_cast<int>(i), l, p, group, weight});
        var_upper.push_back(upper);
        names_.push_back(sp.name + "." + std::to_string(l + 1) + "^" + std::to_string(p));
      }
    };
    if (sp.guarded) {
      int group = static_cast<int>(group_bound_.size());
      group_bound_.push_back(std::log2(static_cast<double>(sp.extent)));
      for (int64_t p : sched::factor_primes(sp)) {
        int most = 0;  // the largest power of p within the extent
        for (int64_t q = p; q <= sp.extent; q *= p) ++most;
        add(p, group, std::log2(static_cast<double>(p)), most);
      }
    } else {
      for (const auto& [p, e] : factorize(sp.extent)) {
        int group = static_cast<int>(group_bound_.size());
        group_bound_.push_back(e);
        add(p, group, 1.0, e);
      }
    }
  }
  for (const sched::SplitSpec& sp : s.splits) {
    tilings_.push_back(&sched::split_factorizations(sp));
    std::vector<double> lg;
    for (const std::vector<int64_t>& t : *tilings_.back())
      for (int64_t f : t) lg.push_back(std::log2(static_cast<double>(f)));
    tiling_log2_.push_back(std::move(lg));
  }
  names_.push_back("unroll");
  int n = num_vars();
  int groups = static_cast<int>(group_bound_.size());
  A_ = Eigen::MatrixXd::Zero(groups, n);
  b_ = Eigen::VectorXd(groups);
  upper_ = Eigen::VectorXd(n);
  for (int g = 0; g < groups; ++g) b_(g) = group_bound_[g];
  for (size_t v = 0; v < vars_.size(); ++v) {
    A_(vars_[v].group, static_cast<int>(v)) = vars_[v].weight;
    upper_(static_cast<int>(v)) = var_upper[v];
  }
  for (int64_t u : s.unroll_menu) menu_log2_.push_back(std::log2(1.0 + static_cast<double>(u)));
  upper_(n - 1) = *std::max_element(menu_log2_.begin(), menu_log2_.end());
}

bool KnobSpace::contains(const Eigen::VectorXd& x, double tol) const {
  if (x.size() != num_vars()) return false;
  for (int i = 0; i < num_vars(); ++i)
    if (x(i) < -tol || x(i) > upper_(i) + tol) return false;
  return ((A_ * x - b_).array() <= tol).all();
}

std::vector<std::vector<double>> KnobSpace::factors(const Eigen::VectorXd& x) const {
  std::vector<std::vector<double>> f;
  for (const sched::SplitSpec& sp : sketch_.splits) f.push_back(std::vector<double>(sp.parts, 1.0));
  for (size_t v = 0; v < vars_.size(); ++v)
    f[vars_[v].split][vars_[v].level] *= std::pow(static_cast<double>(vars_[v].prime), x(static_cast<int>(v)));
  return f;
}

double KnobSpace::unroll(const Eigen::VectorXd& x) const { return std::exp2(x(unroll_var())) - 1.0; }

Eigen::VectorXd KnobSpace::point_of(const sched::Config& c) const {
  std::string why = sched::invalid_reason(sketch_, c);
  if (!why.empty()) throw Error("not a configuration of sketch " + sketch_.name + ": " + why);
  Eigen::VectorXd x = Eigen::VectorXd::Zero(num_vars());
  for (size_t v = 0; v < vars_.size(); ++v) {
    int64_t f = c.factors[vars_[v].split][vars_[v].level];
    int e = 0;
    while (f % vars_[v].prime == 0) {
      f /= vars_[v].prime;
      ++e;
    }
    x(static_cast<int>(v)) = e;
  }
  for (size_t m = 0; m < sketch_.unroll_menu.size(); ++m)
    if (sketch_.unroll_menu[m] == c.unroll) x(unroll_var()) = menu_log2_[m];
  return x;
}

sched::Config KnobSpace::round(const Eigen::VectorXd& x) const {
  std::vector<int> e(vars_.size());
  for (size_t v = 0; v < vars_.size(); ++v)
    e[v] = static_cast<int>(std::lround(std::clamp(x(static_cast<int>(v)), 0.0, upper_(static_cast<int>(v)))));
  // Repair each group (row of A) into the polytope: take back the units that were
  // rounded up the most.
  for (size_t g = 0; g < group_bound_.size(); ++g) {
    for (;;) {
      double sum = 0;
      int worst = -1;
      double worst_excess = -std::numeric_limits<double>::infinity();
      for (size_t v = 0; v < vars_.size(); ++v) {
        if (vars_[v].group != static_cast<int>(g)) continue;
        sum += e[v] * vars_[v].weight;
        double excess = e[v] - x(static_cast<int>(v));
        if (e[v] > 0 && excess > worst_excess) {
          worst_excess = excess;
          worst = static_cast<int>(v);
        }
      }
      if (sum <= group_bound_[g] + 1e-9) break;
      --e[worst];
    }
  }
  return finish(std::move(e), x);
}

sched::Config KnobSpace::round_to_tilings(const Eigen::VectorXd& x) const {
  std::vector<int> e(vars_.size(), 0);
  for (size_t i = 0; i < sketch_.splits.size(); ++i) {
    const sched::SplitSpec& sp = sketch_.splits[i];
    std::vector<double> want(static_cast<size_t>(sp.parts), 0.0);  // log2 of each level's continuous factor
    for (size_t v = 0; v < vars_.size(); ++v)
      if (vars_[v].split == static_cast<int>(i))
        want[static_cast<size_t>(vars_[v].level)] +=
            std::max(0.0, x(static_cast<int>(v))) * std::log2(static_cast<double>(vars_[v].prime));
    const std::vector<std::vector<int64_t>>& tilings = *tilings_[i];
    const std::vector<double>& lg = tiling_log2_[i];
    const size_t parts = want.size();
    size_t nearest = tilings.size();
    double best = std::numeric_limits<double>::infinity();
    for (size_t t = 0; t < tilings.size(); ++t) {
      double d = 0;
      for (size_t l = 0; l < parts; ++l) {
        const double gap = lg[t * parts + l] - want[l];
        d += gap * gap;
      }
      if (d < best) {
        best = d;
        nearest = t;
      }
    }
    if (nearest == tilings.size()) continue;
    for (size_t v = 0; v < vars_.size(); ++v) {
      if (vars_[v].split != static_cast<int>(i)) continue;
      for (int64_t f = tilings[nearest][static_cast<size_t>(vars_[v].level)]; f % vars_[v].prime == 0;
           f /= vars_[v].prime)
        ++e[v];
    }
  }
  return finish(std::move(e), x);
}

sched::Config KnobSpace::finish(std::vector<int> e, const Eigen::VectorXd& x) const {
  sched::Config c;
  for (const sched::SplitSpec& sp : sketch_.splits) c.factors.push_back(std::vector<int64_t>(sp.parts, 1));
  auto rebuild = [&] {
    for (auto& f : c.factors) std::fill(f.begin(), f.end(), 1);
    for (size_t v = 0; v < vars_.size(); ++v)
      for (int k = 0; k < e[v]; ++k) c.factors[vars_[v].split][vars_[v].level] *= vars_[v].prime;
  };
  rebuild();
  size_t best = 0;
  for (size_t m = 1; m < menu_log2_.size(); ++m)
    if (std::abs(menu_log2_[m] - x(unroll_var())) < std::abs(menu_log2_[best] - x(unroll_var()))) best = m;
  c.unroll = sketch_.unroll_menu[best];
  // Shrink the largest inner tile (its largest prime first) until the sketch accepts.
  while (!sched::invalid_reason(sketch_, c).empty()) {
    int pick = -1;
    double largest = 1.0;
    for (size_t v = 0; v < vars_.size(); ++v) {
      if (e[v] == 0) continue;
      double f = static_cast<double>(c.factors[vars_[v].split][vars_[v].level]) +
                 1e-3 * static_cast<double>(vars_[v].level) + 1e-6 * static_cast<double>(vars_[v].prime);
      if (f > largest) {
        largest = f;
        pick = static_cast<int>(v);
      }
    }
    BASIN_CHECK(pick >= 0) << "sketch " << sketch_.name << " rejects the all-ones configuration";
    --e[pick];
    rebuild();
  }
  return c;
}

Eigen::VectorXd KnobSpace::center() const {
  // Each group's bound shared equally by its variables and one more share, so that
  // every row keeps slack.
  std::vector<int> members(group_bound_.size(), 0);
  for (const PrimeVar& pv : vars_) ++members[pv.group];
  Eigen::VectorXd x(num_vars());
  for (size_t v = 0; v < vars_.size(); ++v) {
    const PrimeVar& pv = vars_[v];
    int parts = sketch_.splits[pv.split].parts;
    int primes = members[pv.group] / parts;
    x(static_cast<int>(v)) =
        std::min(upper_(static_cast<int>(v)), group_bound_[pv.group] / pv.weight / primes) / (parts + 1);
  }
  x(unroll_var()) = upper_(unroll_var()) / 2;
  return x;
}

std::vector<Eigen::VectorXd> KnobSpace::sample(int n, std::mt19937_64& rng, int burn_in, int thin) const {
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit;
  Eigen::VectorXd x = center();
  int dim = num_vars();
  std::vector<Eigen::VectorXd> out;
  auto step = [&] {
    Eigen::VectorXd d(dim);
    for (int i = 0; i < dim; ++i) d(i) = normal(rng);
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    auto clip = [&](double slack, double rate) {  // keeps slack - t * rate >= 0
      if (rate > 1e-15) hi = std::min(hi, slack / rate);
      else if (rate < -1e-15) lo = std::max(lo, slack / rate);
    };
    Eigen::VectorXd ad = A_ * d, slack = b_ - A_ * x;
    for (int r = 0; r < ad.size(); ++r) clip(slack(r), ad(r));
    for (int i = 0; i < dim; ++i) {
      clip(x(i), -d(i));             // x_i + t d_i >= 0
      clip(upper_(i) - x(i), d(i));  // x_i + t d_i <= upper_i
    }
    if (lo < hi) x += (lo + (hi - lo) * unit(rng)) * d;
  };
  for (int i = 0; i < burn_in; ++i) step();
  while (static_cast<int>(out.size()) < n) {
    for (int i = 0; i < thin; ++i) step();
    out.push_back(x);
  }
  return out;
}

}  // namespace basin::relax
