#include "relax/torch_bridge.h"

#include <torch/torch.h>

#include "core/util/error.h"

namespace basin::relax {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor as_double(const torch::Tensor& t) { return t.to(torch::kCPU, torch::kFloat64).contiguous(); }

struct RelaxedFunction : torch::autograd::Function<RelaxedFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, RelaxedSketch* rs) {
    torch::Tensor xd = as_double(x);
    int64_t batch = xd.size(0);
    auto opts = torch::TensorOptions().dtype(torch::kFloat64);
    torch::Tensor f = torch::empty({batch, rs->num_stores(), rs->num_features()}, opts);
    torch::Tensor c = torch::empty({batch, rs->num_constraints()}, opts);
    rs->forward(xd.data_ptr<double>(), static_cast<int>(batch), f.data_ptr<double>(), c.data_ptr<double>());
    ctx->save_for_backward({xd});
    ctx->saved_data["rs"] = reinterpret_cast<int64_t>(rs);
    ctx->saved_data["generation"] = static_cast<int64_t>(rs->generation());
    ctx->saved_data["dtype"] = x.scalar_type();
    return {f.to(x.scalar_type()), c.to(x.scalar_type())};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* rs = reinterpret_cast<RelaxedSketch*>(ctx->saved_data["rs"].toInt());
    torch::Tensor xd = ctx->get_saved_variables()[0];
    int batch = static_cast<int>(xd.size(0));
    if (static_cast<int64_t>(rs->generation()) != ctx->saved_data["generation"].toInt()) {
      // Another forward ran since: restore this one's state.
      std::vector<double> f(static_cast<size_t>(batch) * rs->num_stores() * rs->num_features());
      std::vector<double> c(static_cast<size_t>(batch) * rs->num_constraints());
      rs->forward(xd.data_ptr<double>(), batch, f.data(), c.data());
      ctx->saved_data["generation"] = static_cast<int64_t>(rs->generation());
    }
    auto opts = torch::TensorOptions().dtype(torch::kFloat64);
    torch::Tensor gf =
        grads[0].defined() ? as_double(grads[0]) : torch::zeros({batch, rs->num_stores(), rs->num_features()}, opts);
    torch::Tensor gc = grads[1].defined() ? as_double(grads[1]) : torch::zeros({batch, rs->num_constraints()}, opts);
    torch::Tensor gx = torch::empty({batch, rs->num_vars()}, opts);
    rs->backward(gf.data_ptr<double>(), gx.data_ptr<double>(), gc.data_ptr<double>());
    return {gx.to(ctx->saved_data["dtype"].toScalarType()), torch::Tensor()};
  }
};

}  // namespace

std::vector<at::Tensor> relaxed_features(RelaxedSketch& rs, const at::Tensor& x) {
  if (x.dim() != 2 || x.size(1) != rs.num_vars())
    throw Error("relaxed_features: expected knob points of shape [batch, " + std::to_string(rs.num_vars()) + "], got " +
                std::to_string(x.dim()) + " dimensions");
  if (!x.is_floating_point()) throw Error("relaxed_features: knob points must be float32 or float64");
  return RelaxedFunction::apply(x, &rs);
}

at::Tensor scaled_search_gradient(const at::Tensor& cost, const at::Tensor& penalty, const at::Tensor& x,
                                  double weight) {
  auto grad_of = [&](const torch::Tensor& y) {
    torch::Tensor g = torch::autograd::grad({y.sum()}, {x}, {}, /*retain_graph=*/true, false, /*allow_unused=*/true)[0];
    return g.defined() ? as_double(g) : torch::zeros(x.sizes(), torch::kFloat64);
  };
  torch::Tensor gc = grad_of(cost), gp = grad_of(penalty);
  torch::Tensor out = torch::empty_like(gc);
  scale_penalty_gradient(gc.data_ptr<double>(), gp.data_ptr<double>(), static_cast<int>(x.size(0)),
                         static_cast<int>(x.size(1)), weight, out.data_ptr<double>());
  return out.to(x.scalar_type());
}

}  // namespace basin::relax
