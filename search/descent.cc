#include "search/descent.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/util/error.h"
#include "core/util/parallel.h"
#include "models/estimator.h"
#include "relax/relaxed_sketch.h"
#include "relax/torch_bridge.h"

namespace basin::search::detail {

namespace {

// Back into the polytope: into the box, then each violated row of A x <= b (whose
// coefficients are non-negative) scaled down onto its bound.
void project(const relax::KnobSpace& space, double* x) {
  const int nv = space.num_vars();
  for (int v = 0; v < nv; ++v) x[v] = std::clamp(x[v], 0.0, space.upper()(v));
  const Eigen::MatrixXd& A = space.A();
  for (int r = 0; r < A.rows(); ++r) {
    double ax = 0;
    for (int v = 0; v < nv; ++v) ax += A(r, v) * x[v];
    if (ax <= space.b()(r) || ax <= 0) continue;
    const double f = space.b()(r) / ax;
    for (int v = 0; v < nv; ++v)
      if (A(r, v) != 0) x[v] *= f;
  }
}

// The seeds' starting programs among the measured ones (fastest first): half are the
// fastest programs, the rest the fastest of each other sketch in the order of their
// best, so that a sketch the estimator ranks second keeps being refined.
std::vector<const Measured*> best_seeds(const std::vector<const Measured*>& good, int n) {
  const size_t n_global = std::min(good.size(), static_cast<size_t>(n + 1) / 2);
  std::vector<const Measured*> out(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n_global));
  std::vector<bool> used(good.size(), false);
  std::fill(used.begin(), used.begin() + static_cast<std::ptrdiff_t>(n_global), true);
  // The first (fastest) program of each sketch but the fastest one's.
  std::set<int> seen;
  for (size_t i = 0; i < good.size() && static_cast<int>(out.size()) < n; ++i)
    if (seen.insert(good[i]->candidate.sketch).second && i > 0 && !used[i]) {
      out.push_back(good[i]);
      used[i] = true;
    }
  for (size_t i = 0; i < good.size() && static_cast<int>(out.size()) < n; ++i)
    if (!used[i]) out.push_back(good[i]);
  return out;
}

// One sketch's seeds under descent.
struct Group {
  int sketch;
  relax::RelaxedSketch* rs;
  int batch, vars;
  std::vector<double> x, m, v;
  // A step's: the features and constraints at x, and the gradients of the score and
  // of the penalty (the latter only when `violated`).
  std::vector<double> f, c, grad_cost, grad_penalty;
  bool violated = false;
};

// Whether some seed's penalty (its squared violations, summed) is positive. None when
// a penalty is NaN: as autograd's maximum over the seeds was, NaN.
bool violates(const std::vector<double>& c, int batch) {
  if (c.empty()) return false;
  const size_t nc = c.size() / static_cast<size_t>(batch);
  bool any = false;
  for (int b = 0; b < batch; ++b) {
    double p = 0;
    for (size_t i = 0; i < nc; ++i) {
      const double r = std::max(c[b * nc + i], 0.0);
      p += std::isnan(c[b * nc + i]) ? c[b * nc + i] : r * r;
    }
    if (std::isnan(p)) return false;
    any = any || p > 0;
  }
  return any;
}

// Adam from the seeds of every sketch at once (one estimator call per step over all
// of them, stores padded and masked), every visited point rounded into `visited`.
void descend_from(TaskSpace& space, const std::vector<std::vector<Eigen::VectorXd>>& seeds,
                  models::DifferentiableEstimator& est, SearchState& state, const DescentOptions& opt,
                  std::map<std::string, Candidate>& visited) {
  std::vector<Group> groups;
  int stores = 0;
  for (size_t s = 0; s < seeds.size(); ++s) {
    if (seeds[s].empty()) continue;
    Group g;
    g.sketch = static_cast<int>(s);
    g.rs = &space.relaxed(g.sketch);
    g.batch = static_cast<int>(seeds[s].size());
    g.vars = g.rs->num_vars();
    for (const Eigen::VectorXd& p : seeds[s]) g.x.insert(g.x.end(), p.data(), p.data() + g.vars);
    g.m.assign(g.x.size(), 0.0);
    g.v.assign(g.x.size(), 0.0);
    stores = std::max(stores, g.rs->num_stores());
    groups.push_back(std::move(g));
  }
  std::vector<torch::Tensor> masks;
  for (const Group& g : groups) {
    torch::Tensor mk = torch::zeros({g.batch, stores}, torch::kFloat32);
    mk.narrow(1, 0, g.rs->num_stores()).fill_(1);
    masks.push_back(mk);
  }
  const torch::Tensor mask = torch::cat(masks, 0);
  auto round_all = [&] {
    for (const Group& g : groups)
      for (int b = 0; b < g.batch; ++b) {
        Eigen::Map<const Eigen::VectorXd> p(g.x.data() + static_cast<size_t>(b) * g.vars, g.vars);
        auto visit = [&](const sched::Config& config) {
          Candidate c = space.make(g.sketch, config);
          if (!state.measured.count(c.json)) visited.emplace(c.json, std::move(c));
        };
        visit(g.rs->space().round(p));
        if (opt.nearest_tilings) visit(g.rs->space().round_to_tilings(p));
      }
  };
  round_all();
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const int nf = groups.empty() ? 0 : groups[0].rs->num_features();  // one feature set per task
  const int rows = static_cast<int>(mask.size(0));
  std::vector<int> first_row(groups.size(), 0);  // each group's first row in the estimator's batch
  for (size_t k = 1; k < groups.size(); ++k) first_row[k] = first_row[k - 1] + groups[k - 1].batch;
  for (int step = 1; step <= opt.steps; ++step) {
    // Each sketch's tape on a thread of its own (the tapes are the step's largest
    // part, and each group has its own): the features and the constraints.
    parallel_for(static_cast<int>(groups.size()), [&](int k) {
      Group& g = groups[static_cast<size_t>(k)];
      g.f.resize(static_cast<size_t>(g.batch) * g.rs->num_stores() * nf);
      g.c.resize(static_cast<size_t>(g.batch) * g.rs->num_constraints());
      g.rs->forward(g.x.data(), g.batch, g.f.data(), g.c.data());
    });
    // One estimator call over every seed, stores padded and masked: d cost / d features.
    torch::Tensor feats = torch::zeros({rows, stores, nf}, torch::kFloat32);
    float* fp = feats.data_ptr<float>();
    for (size_t k = 0; k < groups.size(); ++k) {
      const Group& g = groups[k];
      const size_t per_row = static_cast<size_t>(g.rs->num_stores()) * nf;
      for (int b = 0; b < g.batch; ++b)
        std::transform(g.f.begin() + static_cast<std::ptrdiff_t>(b * per_row),
                       g.f.begin() + static_cast<std::ptrdiff_t>((b + 1) * per_row),
                       fp + static_cast<size_t>(first_row[k] + b) * stores * nf,
                       [](double v) { return static_cast<float>(v); });
    }
    feats.requires_grad_(true);
    torch::Tensor cost = est.forward(feats, mask).to(torch::kFloat64);
    torch::Tensor gf;
    try {
      gf = torch::autograd::grad({cost.sum()}, {feats}, {}, /*retain_graph=*/false, false,
                                 /*allow_unused=*/true)[0];
    } catch (const c10::Error& e) {
      const std::string why = e.what_without_backtrace();
      throw Error("the estimator's scores have no gradient in the features, which the gradient search needs (" +
                  why.substr(0, why.find('\n')) + ")");
    }
    gf = gf.defined() ? gf.contiguous() : torch::zeros_like(feats);
    const float* gfp = gf.data_ptr<float>();
    // Back through each tape, again a thread per sketch: the score's gradient, and the
    // penalty's (the sum of the squared violations) only where some seed violates a
    // constraint (a few percent of the points): elsewhere it is zero, and its backward
    // pass through the tape would cost as much as the score's.
    parallel_for(static_cast<int>(groups.size()), [&](int k) {
      Group& g = groups[static_cast<size_t>(k)];
      const size_t per_row = static_cast<size_t>(g.rs->num_stores()) * nf;
      std::vector<double> grad_f(g.f.size());
      for (int b = 0; b < g.batch; ++b)
        std::copy(gfp + static_cast<size_t>(first_row[static_cast<size_t>(k)] + b) * stores * nf,
                  gfp + static_cast<size_t>(first_row[static_cast<size_t>(k)] + b) * stores * nf + per_row,
                  grad_f.begin() + static_cast<std::ptrdiff_t>(b * per_row));
      g.grad_cost.resize(g.x.size());
      g.rs->backward(grad_f.data(), g.grad_cost.data());
      g.violated = violates(g.c, g.batch);
      if (!g.violated) return;
      std::vector<double> grad_c(g.c.size());
      for (size_t i = 0; i < g.c.size(); ++i) grad_c[i] = g.c[i] > 0 ? 2 * g.c[i] : 0.0;
      std::fill(grad_f.begin(), grad_f.end(), 0.0);
      g.grad_penalty.resize(g.x.size());
      g.rs->backward(grad_f.data(), g.grad_penalty.data(), grad_c.data());
    });
    const double c1 = 1 - std::pow(b1, step), c2 = 1 - std::pow(b2, step);
    std::vector<double> dir;
    for (size_t k = 0; k < groups.size(); ++k) {
      Group& g = groups[k];
      dir.resize(g.x.size());
      if (!g.violated) {
        std::copy(g.grad_cost.begin(), g.grad_cost.end(), dir.begin());
      } else {
        relax::scale_penalty_gradient(g.grad_cost.data(), g.grad_penalty.data(), g.batch, g.vars, opt.penalty_weight,
                                      dir.data());
      }
      for (size_t i = 0; i < g.x.size(); ++i) {
        g.m[i] = b1 * g.m[i] + (1 - b1) * dir[i];
        g.v[i] = b2 * g.v[i] + (1 - b2) * dir[i] * dir[i];
        g.x[i] -= opt.learning_rate * (g.m[i] / c1) / (std::sqrt(g.v[i] / c2) + eps);
      }
      for (int b = 0; b < g.batch; ++b) project(g.rs->space(), g.x.data() + static_cast<size_t>(b) * g.vars);
    }
    round_all();
  }
}

}  // namespace

void descend(SearchState& state, models::DifferentiableEstimator& est, const std::vector<const Measured*>& good,
             const DescentOptions& opt, std::map<std::string, Candidate>& visited) {
  TaskSpace& space = state.space;
  std::mt19937_64& rng = state.rng;
  const int n_sketches = static_cast<int>(space.sketches().size());
  // Seeds, per sketch: the best measured programs' points with noise, then uniform.
  std::vector<std::vector<Eigen::VectorXd>> seeds(n_sketches);
  const int n_best = std::min(static_cast<int>(good.size()), static_cast<int>(opt.best_share * opt.seeds));
  std::normal_distribution<double> noise(0, opt.seed_noise);
  for (const Measured* m : best_seeds(good, n_best)) {
    const Candidate& c = m->candidate;
    const relax::KnobSpace& ks = space.relaxed(c.sketch).space();
    Eigen::VectorXd x = ks.point_of(c.config);
    for (int v = 0; v < x.size(); ++v) x(v) += noise(rng);
    project(ks, x.data());
    seeds[c.sketch].push_back(x);
  }
  std::vector<int> uniform(n_sketches, 0);
  for (int i = n_best; i < opt.seeds; ++i) ++uniform[std::uniform_int_distribution<int>(0, n_sketches - 1)(rng)];
  for (int s = 0; s < n_sketches; ++s)
    if (uniform[s] > 0)
      for (Eigen::VectorXd& x : space.relaxed(s).space().sample(uniform[s], rng, 20, 5))
        seeds[s].push_back(std::move(x));

  descend_from(space, seeds, est, state, opt, visited);
}

}  // namespace basin::search::detail
