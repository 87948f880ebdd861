// The relaxation as a LibTorch autograd function, so that an estimator written in
// LibTorch (models/) and the gradient search (search/) differentiate through it: the
// features and constraints of a batch of knob points come back as tensors whose
// backward runs the sketch's own compiled reverse mode (relax/tape.h).
//
// LibTorch's headers stay out of this one: include <torch/torch.h> where it is used.
#pragma once

#include <vector>

#include "relax/relaxed_sketch.h"

namespace at {
class Tensor;
}

namespace basin::relax {

// x: [B, num_vars] (float32 or float64; the result takes its dtype) ->
// {features [B, num_stores, num_features], constraints [B, num_constraints]}.
// Differentiable with respect to x. `rs` must outlive the graph; a forward through
// `rs` between this call and the backward is allowed (the backward recomputes).
std::vector<at::Tensor> relaxed_features(RelaxedSketch& rs, const at::Tensor& x);

// The gradient search's direction at x [B, n_vars]: d cost / dx plus the penalty
// gradient scaled against it per point (scale_penalty_gradient in constraints.h).
// cost and penalty are [B] tensors computed from x; both graphs are kept.
at::Tensor scaled_search_gradient(const at::Tensor& cost, const at::Tensor& penalty, const at::Tensor& x,
                                  double weight);

}  // namespace basin::relax
