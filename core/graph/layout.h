// The layout plan (docs/networks.md, "Layouts"): which values of a network are held in
// the blocked channel layout NCHWc ([N, C/b, H, W, b], core/ops/blocked.cc) instead of
// NCHW, so that consecutive convolutions, their epilogues and the pooling between them
// agree on it and nothing is converted between them. The network's inputs and outputs
// stay NCHW; conversions (to_nchwc, from_nchwc) are added where a blocked value meets
// an operator that reads NCHW.
#pragma once

#include <cstdint>
#include <string>

#include "core/graph/graph.h"

namespace basin::graph {

// The channels per block of a value with `channels` channels on a machine whose vectors
// hold `lanes` floats: the largest of lanes, lanes / 2 (not below 8) that divides them;
// 0 when none does. The plan uses a half vector only for a value whose width fills a
// smaller share of NCHW's vectors than the half vector fills of its own.
int64_t channel_block(int64_t channels, int64_t lanes);

// The blocks of this machine's vectors (16 floats with AVX-512, 8 with AVX2, 4 with
// SSE), or 0 when BASIN_LAYOUT=nchw turns the plan off (any other value is an error).
int64_t host_layout_lanes();
// The plan's lanes for a target: this machine's on the CPU ("llvm"); 0 (every value
// NCHW) on the GPU.
int64_t layout_lanes(const std::string& target);

// The output tile m of Winograd's F(m x m, 3 x 3) that the plan's `auto` rule gives a
// 3x3, stride-1 convolution from in_channels into out_channels with outputs of
// height x width, or 0 where the direct convolution is faster (docs/networks.md,
// "Winograd").
int64_t winograd_auto(int64_t in_channels, int64_t out_channels, int64_t height, int64_t width);

// The graph with the plan applied for vectors of `lanes` floats (0: the graph as it is):
// - conv2d with a constant weight, one group or one per channel, becomes conv2d_nchwc
//   (its weight packed now) where its output channels have a block (a depthwise one
//   keeps its input's); an input whose channels have none is read in one block of all
//   its channels (NHWC); a 3x3 stride-1 one of one group whose input is blocked may
//   instead become Winograd's winograd_input, winograd_gemm (its weight transformed
//   now) and winograd_output (winograd_auto, BASIN_WINOGRAD);
// - elementwise operators whose variable inputs are [N, C, H, W] values of the
//   output's channels in one block, one of them already blocked, run blocked (constant
//   operands broadcast along the channels are repacked, those along no channel
//   reshaped);
// - pooling, global pooling and concatenation along the channels of blocked values (of
//   one block) run blocked;
// - a strided conv2d_transpose whose output channels have no block computes its width
//   phase-major (each stride phase's columns contiguous, vectorized along them) and a
//   transpose restores NCHW;
// - every other operator reads NCHW.
// The outputs are the same up to rounding (a blocked convolution sums its input
// channels block by block).
// With `tiles` (the convolutions will run on matrix tiles: bfloat16 on a CPU with
// AMX-BF16, sched's amx.bf16 sketches), `auto` keeps every convolution direct (a tile's
// products cost less than Winograd's transforms save), and at 16 lanes a value whose
// channels 32 divide is blocked by 32 (a tile row's values of k: 1x1 convolutions read
// such blocks in place).
Graph plan_layouts(const Graph& g, int64_t lanes, bool tiles = false);

}  // namespace basin::graph
