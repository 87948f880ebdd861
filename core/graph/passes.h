// Graph passes (DESIGN.md, "Graph"): each returns a new graph computing the same
// outputs. Shape inference happens as nodes are added (graph.h).
#pragma once

#include "core/graph/graph.h"

namespace basin::graph {

// One node evaluated on constant inputs by the loop-IR interpreter (the default
// schedule): how constant folding and the ONNX importer compute constants.
NDArray evaluate_node(const std::string& op, const ops::Attrs& attrs, const std::vector<NDArray>& inputs);

// The whole graph run node by node with evaluate_node: the loop-IR interpreter as the
// oracle of a network (slow; for tests and small graphs). Outputs in the graph's order.
std::vector<NDArray> interpret_graph(const Graph& g, const std::vector<NDArray>& inputs);

// Nodes whose inputs are all constants become constants, computed by the loop-IR
// interpreter on the operator's default schedule.
Graph fold_constants(const Graph& g);
// conv -> batch_norm with constant weight and statistics (the conv's output read by the
// norm alone) becomes conv -> add(bias) with the scale folded into the weight; the same
// for conv2d_transpose with one group.
Graph fold_batch_norm(const Graph& g);
// Scaled dot-product attention, batch_matmul(q, k) [-> view] [* or / scalar] [+ mask]
// -> softmax over the last axis [-> view] -> batch_matmul(., v), every value in between
// read once, becomes one `attention` node (one task, computed row by row).
Graph fuse_attention(const Graph& g);
// An elementwise node reading a view that only adds leading extents of 1 ([128, 768]
// -> [1, 128, 768], how an imported MatMul's rows come back) runs on the viewed shape
// instead, the view moved after it (its other inputs viewed alike where they carry
// such extents): the chain then fuses into the matrix product's epilogue (a bias,
// GELU, a residual add), which fusion never does across a view.
Graph sink_views(const Graph& g);
// Quantization pairs inside what a quantized model computes in float32, rewritten to
// equal values with less work: dequantize_linear(quantize_linear(x)) read by elementwise
// nodes (a convolution's output quantized and dequantized before a residual add) becomes
// fake_quantize(x), one float32 rounding; quantize_linear(max_pool2d(dequantize_linear(x)))
// of an 8-bit x with one positive scale and the type's range becomes max_pool2d(x), since
// the pooling commutes with the increasing dequantization and quantizing a dequantized
// value gives it back. The replaced nodes stay for eliminate_dead_code.
Graph fold_quantization(const Graph& g);
// pow(x, c) with a constant exponent c of one value 2, 3 or 4 (every element), not
// broadcasting x, becomes products of x: x * x, (x * x) * x, (x * x) * (x * x), as
// PyTorch computes such powers (a transformer's tanh-GELU cubes its input). The
// products vectorize and fuse into a matrix product's epilogue; a pow is a call of
// the C library per element.
Graph expand_powers(const Graph& g);
// A transposed convolution of a 1x1 map (one group, no padding, no dilation: a GAN
// generator's first layer, its latent vector to a KxK map) is a product: each output
// is sum_c x[n, c] w[c, o, y, x], so x viewed [N, C] times w viewed [C, O*KH*KW],
// viewed back [N, O, KH, KW]; the elementwise chain after it (a bias, an activation:
// constants of at most 65,536 elements broadcast to the map) runs on the product's
// rows, in its epilogue. The transposed convolution would visit every tap of every
// output and skip all but one.
Graph one_pixel_transposed_convs(const Graph& g);
// Drops nodes whose value reaches no output.
Graph eliminate_dead_code(const Graph& g);
// At --precision bf16 on a CPU with bfloat16 instructions: every float32 value one
// kernel writes and another reads (the output of a fused group, partition()) is stored
// as bfloat16, a cast appended to the node that computes it (fusion puts it in that
// node's kernel, and the kernels that read the value read it as float32:
// ops::apply_node), which halves the bytes moved between kernels. Network outputs (and
// the values they view) stay float32, as do Winograd's transformed tiles (their rounding
// is amplified by the inverse transform), what a layer or RMS norm reads or writes (a
// transformer's residual stream, whose rounding would accumulate over the layers) and a
// matrix product's right operand (what its bfloat16 sketches pack, from float32). The
// partition of the result is the same groups, each stored output's cast in its group.
Graph store_activations_bf16(const Graph& g);
// After store_activations_bf16, where convolutions run on AMX tiles: a bfloat16 value
// blocked by 32 channels ([N, C / 32, H, W, 32], H x W at least 28 x 28, the cast of a
// float32 value R) whose one reader is a convolution of one group, stride and dilation
// 1 and a zero padding (p, q) is stored with that padding as its border instead:
// cast(pad(R)), [N, C / 32, H + 2p, W + 2q, 32], the convolution reading it with
// padding 0. Fusion puts the border in the kernel that computes R (its stores moved by
// the border, the border zeroed: sched::output_border), and the convolution's flat-row
// tiles read the bordered plane in place (sched::AmxDirect::plane), with no padded
// copy per call.
Graph store_borders(const Graph& g);
// Every pass above, in order: batch-norm folding, 1x1 transposed convolutions as
// products, constant folding, powers expanded,
// dead code, quantization folding, attention fusion, view sinking; then the layout plan for vectors of `layout_lanes`
// floats (layout.h; 0 leaves every value NCHW, host_layout_lanes() is this machine's).
Graph optimize(const Graph& g, int64_t layout_lanes = 0, bool tiles = false);

}  // namespace basin::graph
