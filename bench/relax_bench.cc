// bench/relax: the differentiable feature evaluator's speed on resnet18-c2's sketches:
// configurations per second for forward + backward at batch 128, and the time of one
// gradient round of 16 seeds x 128 Adam steps (target: under 1 s on 2 cores). Two
// rounds are timed: one on a stand-in objective (a fixed random linear function of the
// features, the relaxation's own share), and one as the search runs it, through
// LibTorch: the autograd bridge, a per-store MLP (28-64-64-1, random weights) summed
// over stores plus the constraint penalty, torch::optim::Adam on the knob points.
//
//   build/bin/relax_bench [--workload W] [--json]
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/machine.h"
#include "core/ops/workloads.h"
#include "relax/relaxed_sketch.h"
#include "relax/torch_bridge.h"

using namespace basin;

int main(int argc, char** argv) {
  std::string workload = "resnet18-c2";
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") json = true;
    else if (a == "--workload" && i + 1 < argc) workload = argv[++i];
    else {
      std::cerr << "relax_bench: unknown argument " << a << "\n";
      return 2;
    }
  }
  const ops::Workload& w = ops::find_workload(workload);
  ops::OpGraph g = ops::build_op(w.op, w.params);
  nlohmann::json out = {{"workload", workload},
                        {"machine", {{"cpu", bench::cpu_model()}, {"cores", bench::cores()}}},
                        {"sketches", nlohmann::json::array()}};
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal;
  using clock = std::chrono::steady_clock;
  double total_round = 0, total_torch_round = 0;
  torch::manual_seed(1);
  torch::set_num_threads(1);
  for (const sched::Sketch& s : sched::cpu_sketches(g)) {
    auto t0 = clock::now();
    relax::RelaxedSketch rs(g, s);
    double build_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    int nf = rs.num_stores() * rs.num_features(), nv = rs.num_vars();

    // Throughput at batch 128.
    const int batch = 128;
    std::vector<Eigen::VectorXd> pts = rs.space().sample(batch, rng);
    std::vector<double> x(static_cast<size_t>(batch) * nv), f(static_cast<size_t>(batch) * nf),
        gf(static_cast<size_t>(batch) * nf, 1.0), gx(static_cast<size_t>(batch) * nv);
    for (int b = 0; b < batch; ++b)
      for (int v = 0; v < nv; ++v) x[b * nv + v] = pts[b](v);
    int reps = 0;
    auto t1 = clock::now();
    do {
      rs.forward(x.data(), batch, f.data());
      rs.backward(gf.data(), gx.data());
      ++reps;
    } while (std::chrono::duration<double>(clock::now() - t1).count() < 0.5);
    double per_sec = reps * batch / std::chrono::duration<double>(clock::now() - t1).count();

    // One gradient round: 16 seeds, 128 Adam steps, clamped to the variable bounds.
    const int seeds = 16, steps = 128;
    std::vector<double> wts(nf);
    for (double& v : wts) v = normal(rng);
    std::vector<Eigen::VectorXd> start = rs.space().sample(seeds, rng);
    std::vector<double> xs(static_cast<size_t>(seeds) * nv), m(xs.size()), vv(xs.size()),
        fs(static_cast<size_t>(seeds) * nf), gs(fs.size()), gxs(xs.size());
    for (int b = 0; b < seeds; ++b)
      for (int v = 0; v < nv; ++v) xs[b * nv + v] = start[b](v);
    for (int b = 0; b < seeds; ++b)
      for (int k = 0; k < nf; ++k) gs[b * nf + k] = wts[k];
    const double lr = 0.05, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    auto t2 = clock::now();
    for (int step = 1; step <= steps; ++step) {
      rs.forward(xs.data(), seeds, fs.data());
      rs.backward(gs.data(), gxs.data());
      for (size_t i = 0; i < xs.size(); ++i) {
        m[i] = b1 * m[i] + (1 - b1) * gxs[i];
        vv[i] = b2 * vv[i] + (1 - b2) * gxs[i] * gxs[i];
        double mh = m[i] / (1 - std::pow(b1, step)), vh = vv[i] / (1 - std::pow(b2, step));
        int var = static_cast<int>(i % nv);
        xs[i] = std::clamp(xs[i] - lr * mh / (std::sqrt(vh) + eps), 0.0, rs.space().upper()(var));
      }
    }
    double round_s = std::chrono::duration<double>(clock::now() - t2).count();
    total_round += round_s;

    // The same round through LibTorch.
    torch::nn::Sequential mlp(torch::nn::Linear(rs.num_features(), 64), torch::nn::ReLU(), torch::nn::Linear(64, 64),
                              torch::nn::ReLU(), torch::nn::Linear(64, 1));
    torch::Tensor tx = torch::empty({seeds, nv}, torch::kFloat32);
    for (int b = 0; b < seeds; ++b)
      for (int v = 0; v < nv; ++v) tx[b][v] = start[b](v);
    tx.requires_grad_(true);
    torch::Tensor upper = torch::empty({nv}, torch::kFloat32);
    for (int v = 0; v < nv; ++v) upper[v] = rs.space().upper()(v);
    torch::optim::Adam adam({tx}, torch::optim::AdamOptions(lr));
    auto t3 = clock::now();
    for (int step = 0; step < steps; ++step) {
      adam.zero_grad();
      std::vector<torch::Tensor> fc = relax::relaxed_features(rs, tx);
      torch::Tensor loss = mlp->forward(fc[0]).sum() + torch::relu(fc[1]).pow(2).sum();
      loss.backward();
      adam.step();
      torch::NoGradGuard no_grad;
      tx.clamp_(0).copy_(torch::min(tx, upper));
    }
    double torch_round_s = std::chrono::duration<double>(clock::now() - t3).count();
    total_torch_round += torch_round_s;
    out["sketches"].push_back({{"sketch", s.name},
                               {"vars", nv},
                               {"stores", rs.num_stores()},
                               {"build_ms", build_ms},
                               {"configs_per_second_batch128", per_sec},
                               {"round_seconds_16x128", round_s},
                               {"torch_round_seconds_16x128", torch_round_s}});
    if (!json)
      std::printf(
          "%-34s vars %3d stores %d  build %6.1f ms  %9.0f configs/s (fwd+bwd, batch 128)  round %.3f s  "
          "LibTorch round %.3f s\n",
          s.name.c_str(), nv, rs.num_stores(), build_ms, per_sec, round_s, torch_round_s);
  }
  double n = static_cast<double>(out["sketches"].size());
  out["mean_round_seconds"] = total_round / n;
  out["mean_torch_round_seconds"] = total_torch_round / n;
  if (json) std::cout << out.dump(2) << "\n";
  else
    std::printf(
        "mean round (16 seeds x 128 steps): stand-in objective %.3f s, through LibTorch (MLP + penalty, Adam) %.3f s\n",
        total_round / n, total_torch_round / n);
  return 0;
}
