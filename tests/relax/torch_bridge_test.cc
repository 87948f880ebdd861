// The relaxation inside LibTorch's autograd: the bridge gives the evaluator's values,
// its gradients reach the knob points through a LibTorch model stacked on top (checked
// against central finite differences), and a forward in between does not corrupt an
// earlier graph's backward.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>

#include "core/ops/registry.h"
#include "core/util/error.h"
#include "relax/torch_bridge.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

std::vector<std::pair<ops::OpGraph, sched::Sketch>> cases() {
  std::vector<std::pair<ops::OpGraph, sched::Sketch>> out;
  for (const auto& [op, params] : std::vector<std::pair<std::string, std::string>>{
           {"conv2d", "in_channels=8 out_channels=16 height=10 width=12 kernel=3 padding=1"},
           {"dense", "M=37 K=10 N=23"},
           {"softmax", "shape=4,197"}}) {
    ops::OpGraph g = ops::build_op(op, parse(params));
    for (const sched::Sketch& s : sched::cpu_sketches(g)) out.push_back({g, s});
  }
  return out;
}

torch::Tensor points(const relax::KnobSpace& space, int n, std::mt19937_64& rng) {
  torch::Tensor x = torch::empty({n, space.num_vars()}, torch::kFloat64);
  std::vector<Eigen::VectorXd> p = space.sample(n, rng);
  for (int b = 0; b < n; ++b)
    for (int v = 0; v < space.num_vars(); ++v) x[b][v] = p[b](v);
  return x;
}

TEST(TorchBridge, ValuesAreTheEvaluators) {
  std::mt19937_64 rng(21);
  for (auto& [g, s] : cases()) {
    relax::RelaxedSketch rs(g, s);
    torch::Tensor x = points(rs.space(), 5, rng);
    std::vector<torch::Tensor> out = relax::relaxed_features(rs, x);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{5, rs.num_stores(), rs.num_features()}));
    EXPECT_EQ(out[1].sizes(), (std::vector<int64_t>{5, rs.num_constraints()}));
    std::vector<double> f(out[0].numel()), c(out[1].numel());
    rs.forward(x.data_ptr<double>(), 5, f.data(), c.data());
    EXPECT_TRUE(torch::equal(out[0], torch::from_blob(f.data(), out[0].sizes(), torch::kFloat64))) << s.name;
    EXPECT_TRUE(torch::equal(out[1], torch::from_blob(c.data(), out[1].sizes(), torch::kFloat64))) << s.name;
  }
}

// An MLP over each store's features, summed over stores, plus the constraint penalty.
struct Head {
  torch::nn::Sequential mlp;
  explicit Head(int features) : mlp(torch::nn::Linear(features, 16), torch::nn::Tanh(), torch::nn::Linear(16, 1)) {
    mlp->to(torch::kFloat64);
  }
  torch::Tensor loss(relax::RelaxedSketch& rs, const torch::Tensor& x) {
    std::vector<torch::Tensor> out = relax::relaxed_features(rs, x);
    torch::Tensor score = mlp->forward(out[0]).sum();
    return score + torch::relu(out[1]).pow(2).sum();
  }
};

TEST(TorchBridge, GradientsThroughAnEstimatorAgreeWithFiniteDifferences) {
  torch::manual_seed(3);
  std::mt19937_64 rng(22);
  int checked = 0;
  for (auto& [g, s] : cases()) {
    relax::RelaxedSketch rs(g, s);
    Head head(rs.num_features());
    torch::Tensor x = points(rs.space(), 2, rng).requires_grad_(true);
    head.loss(rs, x).backward();
    torch::Tensor grad = x.grad().clone();
    ASSERT_TRUE(torch::isfinite(grad).all().item<bool>()) << s.name;
    torch::NoGradGuard no_grad;
    for (int b = 0; b < 2; ++b)
      for (int v = 0; v < rs.num_vars(); ++v) {
        const double h = 1e-5;
        torch::Tensor xp = x.detach().clone(), xm = x.detach().clone();
        xp[b][v] += h;
        xm[b][v] -= h;
        double fd = (head.loss(rs, xp).item<double>() - head.loss(rs, xm).item<double>()) / (2 * h);
        double an = grad[b][v].item<double>();
        EXPECT_LE(std::abs(fd - an) / std::max({1.0, std::abs(fd), std::abs(an)}), 1e-3)
            << s.name << " " << rs.space().var_names()[v] << ": autograd " << an << ", finite differences " << fd;
        ++checked;
      }
  }
  EXPECT_GT(checked, 100);
}

TEST(TorchBridge, FloatInputsGetFloatGradients) {
  auto [g, s] = cases()[0];
  relax::RelaxedSketch rs(g, s);
  std::mt19937_64 rng(23);
  torch::Tensor x = points(rs.space(), 3, rng).to(torch::kFloat32).requires_grad_(true);
  std::vector<torch::Tensor> out = relax::relaxed_features(rs, x);
  EXPECT_EQ(out[0].scalar_type(), torch::kFloat32);
  out[0].sum().backward();
  EXPECT_EQ(x.grad().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
}

TEST(TorchBridge, AnInterveningForwardDoesNotCorruptABackward) {
  auto [g, s] = cases()[0];
  relax::RelaxedSketch rs(g, s);
  std::mt19937_64 rng(24);
  torch::Tensor x1 = points(rs.space(), 4, rng).requires_grad_(true);
  torch::Tensor x2 = points(rs.space(), 7, rng).requires_grad_(true);
  relax::relaxed_features(rs, x1)[0].sum().backward();
  torch::Tensor want = x1.grad().clone();
  x1.grad().zero_();
  torch::Tensor first = relax::relaxed_features(rs, x1)[0].sum();
  torch::Tensor second = relax::relaxed_features(rs, x2)[0].sum();  // a different batch in between
  first.backward();
  EXPECT_TRUE(torch::allclose(x1.grad(), want));
  second.backward();
  EXPECT_TRUE(torch::isfinite(x2.grad()).all().item<bool>());
}

TEST(TorchBridge, RejectsBadShapes) {
  auto [g, s] = cases()[0];
  relax::RelaxedSketch rs(g, s);
  EXPECT_THROW(relax::relaxed_features(rs, torch::zeros({3, rs.num_vars() + 1}, torch::kFloat64)), Error);
  EXPECT_THROW(relax::relaxed_features(rs, torch::zeros({rs.num_vars()}, torch::kFloat64)), Error);
  EXPECT_THROW(relax::relaxed_features(rs, torch::zeros({2, rs.num_vars()}, torch::kInt64)), Error);
}

TEST(TorchBridge, SearchGradientScalesThePenaltyPerPoint) {
  auto [g, s] = cases()[0];
  relax::RelaxedSketch rs(g, s);
  std::mt19937_64 rng(25);
  torch::Tensor x = points(rs.space(), 4, rng).requires_grad_(true);
  std::vector<torch::Tensor> out = relax::relaxed_features(rs, x);
  torch::Tensor cost = out[0].sum({1, 2});
  torch::Tensor pen = torch::relu(out[1] + 8.0).pow(2).sum(1);  // shifted so that every point violates
  torch::Tensor d = relax::scaled_search_gradient(cost, pen, x, 1.0);
  torch::Tensor gc = torch::autograd::grad({cost.sum()}, {x}, {}, true)[0];
  torch::Tensor gp = torch::autograd::grad({pen.sum()}, {x}, {}, true)[0];
  for (int b = 0; b < 4; ++b) {
    torch::Tensor part = d[b] - gc[b];  // the scaled penalty part: parallel to gp, as long as gc
    EXPECT_NEAR(part.norm().item<double>(), gc[b].norm().item<double>(), 1e-9);
    EXPECT_NEAR(torch::dot(part, gp[b]).item<double>(), part.norm().item<double>() * gp[b].norm().item<double>(),
                1e-6 * (1 + part.norm().item<double>() * gp[b].norm().item<double>()));
  }
}

}  // namespace
}  // namespace basin
