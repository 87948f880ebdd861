// What the sketch rules need to know about a task's tensor-expression DAG: its stages
// in order, which are inlinable, and for the anchor rule the anchor, its producers and
// the chain of elementwise consumers that becomes its epilogue. Internal to schedule/.
#pragma once

#include <optional>
#include <unordered_set>
#include <vector>

#include "core/ops/registry.h"

namespace basin::sched {

struct AnchorInfo {
  te::Op anchor;
  std::vector<te::Op> producers;  // injective stages the anchor reads (padding), topo order
  std::vector<te::Op> epilogue;   // elementwise consumers in order, each reading the anchor or earlier ones
  // The input whose dimension `pack_dim` is indexed by spatial axis `vec_axis` alone,
  // one entry per such (axis, input) pair: candidates for repacking.
  struct PackCandidate {
    int axis;
    te::Op input;
    int dim;
  };
  std::vector<PackCandidate> pack_candidates;
};

// Whether the task's anchor multiplies 8-bit integers (a quantized model's convolution or
// matrix product, summed in int32): what `basin profile` calls an int8 kernel.
bool integer_products(const ops::OpGraph& task);

// A dot-product form of an anchor vectorized along `vec`, `width` products summed per
// instruction: bfloat16 pairs (2, Sketch::bf16_pair, vdpbf16ps) or 8-bit quads (4,
// Sketch::int8_quad, vpdpbusd). Its body is a product of two loads, one of `weight` (the
// pack candidate of `vec`, a placeholder) and one of `act` (a placeholder, or the last
// producer, every producer feeding it), which does not use `vec`: float32 loads for
// pairs; for quads, an unsigned 8-bit act and a signed 8-bit weight, each widened to
// int32. Reduction axis `reduce_axis` indexes act's innermost dimension with coefficient
// 1 and nothing else of act, and weight's dimension `weight_dim` alone, as itself: so k
// .. k + width - 1 are adjacent in act (one 32- or 16-bit load of a group) and can be
// made adjacent in the packed weight. The innermost such axis; none where the anchor
// has no such form.
//
// Or (pairs only), with `act_vector` (no such weight form, the activation the vector
// operand: an NCHW convolution vectorized along the width): act's innermost index is
// `vec` with coefficient 1 plus terms of other axes, and `vec` indexes nothing else of
// act; weight (a placeholder) does not use `vec`. The reduction axis (even extent)
// indexes act's dimension `act_dim`, not its last, and weight's `weight_dim`, each alone
// as itself. The weight is copied to bfloat16 with that dimension moved last (its pairs
// adjacent, one 32-bit load broadcast), the activation to bfloat16 pairs interleaved
// along its last dimension: act_pk[.., kp, .., x, q] = act[.., 2 kp + q, .., x].
struct DotGroups {
  int width = 2;
  int reduce_axis = -1;
  te::Op act;
  te::Op weight;
  int weight_dim = -1;         // the dimension of weight indexed by reduce_axis
  int vec_dim = -1;            // the dimension of weight indexed by vec (the pack candidate's)
  Expr act_load, weight_load;  // the loads under the anchor body's two factors
  // An extent not a multiple of the width: the groups cover it padded by zeros (the
  // activation's copy longer along its last dimension, the weight's last group's tail zero).
  bool padded = false;
  bool act_vector = false;
  int act_dim = -1;  // act_vector: the dimension of act indexed by reduce_axis
};
std::optional<DotGroups> dot_groups(const AnchorInfo& info, int vec, int width);
std::optional<DotGroups> bf16_pairing(const AnchorInfo& info, int vec);

// The form of an anchor that AMX-BF16 tiles compute (the CpuAmx rule): a sum of
// products of two float32 factors, one of them the weight (the pack candidate of `vec`,
// its loads alone), the other (the activation, its producers inlined) not using `vec`:
// a GEMM over the anchor's axes grouped by what reads them. The spatial axes read by
// both factors are batch axes, those the activation alone reads the rows (m, flattened
// in the anchor's order), those the weight alone reads the columns (n, vec among them
// and last; where there are others, vec's extent a multiple of 16 (no tile of 16
// columns straddles two of its values), a divisor of 16 (a tile's columns are 16 / vec
// runs of vec's values, `vec_runs`), or the wide column axes the anchor's last ones (a
// tile's columns straddle values of the others contiguously in the output,
// `straddles`)), the reduction axes of more than one iteration k (flattened). An axis
// neither reads has one iteration. None where the anchor has no such form or no rows.
// Or (`int8`, AMX-INT8 tiles) a sum into int32 of products of two factors each an 8-bit
// value widened to int32: the activation's unsigned, the weight's signed.
struct AmxForm {
  bool int8 = false;
  int weight_factor = -1;  // the body's factor that reads the weight (0 or 1)
  te::Op weight;
  std::vector<int> batch_axes, m_axes, n_axes, k_axes;
  bool straddles = false;  // columns across the wide column axes, linear in the output
  bool vec_runs = false;   // columns in runs of vec's extent (a divisor of 16)
};
std::optional<AmxForm> amx_form(const AnchorInfo& info, int vec);

// The AMX form read in place (a convolution's windows not copied): the activation's
// factor is one load (int8: widened) of `src` (a placeholder, or the last producer: the padding, every
// producer feeding it) whose dimensions are either channel dimensions, each indexed by
// one reduction axis alone over its whole extent (`channel_k`, flattened in src's order
// as the tiles' k, padded to a step: 32 bfloat16, 64 bytes), or others, which use no channel axis; the last m axis
// (`row_axis`, a tile's 16 rows) indexes one of them (`x_dim`) linearly and nothing
// else. The copy of src moves its channel dimensions last (channels-last, bfloat16 or
// bytes), so
// that a tile's rows are 16 consecutive values of row_axis at a constant stride.
struct AmxDirect {
  te::Op src;
  std::vector<int> channel_dims, channel_k;  // src's dimensions, and the reduction axis indexing each
  std::vector<int> window_k;                 // the other reduction axes of more than one iteration
  int row_axis = -1, x_dim = -1;
  int64_t row_stride = 0;  // row_axis's coefficient in x_dim's index
  // With fewer channels than a step and x_dim src's last dimension but the channels, the
  // window axis whose coefficient there is 1 (a first convolution's kernel columns): it
  // folds into the channels' steps, P's columns and channels one dimension, a step's 32
  // elements consecutive (window column, channel) pairs. -1: none.
  int folded_k = -1;
  // Rows across output rows (Sketch::amx_flat_rows): where nothing folds, row_axis moves
  // x_dim by 1 (stride 1), and the m axis before it (`y_axis`) indexes src's dimension
  // `y_dim` alone by 1 (plus window axes), y_dim the last of src's other dimensions
  // before x_dim: in the copy (y, x) are then one dimension, and 16 consecutive values
  // of y * (x_dim's extent) + x are a tile's rows at one stride, across output rows (the
  // columns past the output's computed and never stored). -1: not so.
  int y_axis = -1, y_dim = -1;
  // The largest window offsets along y_dim and x_dim (sum of coefficient x (extent - 1)).
  int64_t y_reach = 0, x_reach = 0;
  // Flat rows with nothing to copy: src is, or widens at its own indices, a bfloat16
  // placeholder laid out [N, C / 32, Y, X, 32] (the channels blocked by a step, y_dim 2,
  // x_dim 3, no padding stage: a value stored with its zero border, graph::plan_layouts),
  // so that a tile's rows are 16 consecutive positions of one plane 64 bytes apart, read
  // where they lie. Null where not so.
  te::Op plane;
};
std::optional<AmxDirect> amx_direct_form(const AnchorInfo& info, const AmxForm& f);
// The tiles of 16 positions over one plane of flat rows (Sketch::amx_flat_rows) for an
// output of h x w positions: to the plane's end (h rows of src's x extent), or read in
// place (AmxDirect::plane) to its last computed position (y h - 1, x w - 1).
int64_t flat_plane_tiles(const AmxDirect& d, int64_t h, int64_t w);

// An input of the anchor that a GPU block caches in shared memory (the GpuTile rule):
// the anchor reads it (a placeholder, or a producer such as the padding, whose values
// are computed as they are cached) at one list of indices, each affine in the anchor's
// axes with non-negative coefficients: index d = offset[d] + sum_a coef[d][a] * axis_a,
// the axes numbered spatial first, then reduction.
struct CachedInput {
  Buffer buffer;
  std::vector<std::vector<int64_t>> coef;
  std::vector<int64_t> offset;
};
struct AnchorInfo;
// The anchor's inputs that can be cached, in the order the anchor first reads them.
std::vector<CachedInput> cached_inputs(const AnchorInfo& info);

// A task whose output is a zero border around the value of its stage before (a value
// stored with the padding its reader needs, graph::store_borders): that stage's value
// (`inner`: the task without the border computes it) and the border before it along
// each dimension (the rest of the output's extent after it). Such a task's sketches
// are those of the task without the border, and its lowering theirs, the output's
// stores moved by the border and the border zeroed (sched::lower_sketch_structure).
struct OutputBorder {
  te::Tensor inner;
  std::vector<int64_t> before;
};
std::optional<OutputBorder> output_border(const ops::OpGraph& task);
// The task computing the border's inner value instead.
ops::OpGraph without_border(const ops::OpGraph& task, const OutputBorder& b);

// The anchor rule applies when the task has one output, computed by a chain of
// elementwise/broadcast stages from one anchor (a tiled reduction), whose other inputs
// are placeholders or injective stages read only by the anchor.
std::optional<AnchorInfo> analyze_anchor(const ops::OpGraph& task);

// Stages of the generic rule: every compute stage except the injective ones inlined
// into their consumers (an injective stage is inlined unless it is an output).
struct GenericInfo {
  std::vector<te::Op> stages;  // topo order
  std::unordered_set<const te::OpNode*> inlined;
  // The largest prefix of axes that every stage shares with the (single) output and by
  // which every stage reads the stages before it (0 if none or several outputs).
  int max_prefix = 0;
};
GenericInfo analyze_generic(const ops::OpGraph& task);

// The attention operator (core/ops/attention.cc) that AMX-BF16 tiles compute (the
// CpuAmx rule with Sketch::amx_attention): the generic stages scores (a sum over D of
// q[b, l, d] k[b, d, s]), max, exp, sum, values (a sum over S of exp[b, l, s]
// v[b, s, e]) and the output, q, k and v float32 placeholders read at exactly those
// indices (or bfloat16 ones through the stages that widen them, and the output then
// perhaps narrowed to bfloat16 by a last stage: stored activations); the logits (scale,
// mask) inlined into the max and exp stages. None for any other task.
struct AmxAttention {
  const te::OpNode *q = nullptr, *k = nullptr, *v = nullptr;  // placeholders of the task
  te::Op scores, max, values, out;
  int64_t B = 0, L = 0, D = 0, S = 0, E = 0;
};
std::optional<AmxAttention> amx_attention_form(const GenericInfo& info);

// The stage that computes a buffer; null for a task's input.
const te::OpNode* producer_of(const Buffer& b);
// Every buffer load in e.
std::vector<Expr> loads_in(const Expr& e);
// A load's index into its buffer, flattened (row-major).
Expr flat_index(const Expr& load);
// The axes of one iteration (spatial and reduction) of a stage, each read as 0.
VarMap single_iteration_axes(const te::OpNode& op);

// e with every read of an inlined stage replaced by that stage's body (recursively).
Expr inline_stages(const Expr& e, const std::unordered_set<const te::OpNode*>& inlined);

// The stride in memory of `axis` in the first load of a task input in e: the change of
// its flat index when the axis moves by one, the other variables of `all` at 0 (0 when
// e reads no input).
int64_t load_stride(const Expr& e, const Var& axis, const std::vector<Var>& all);

// GpuMma: how a factor of the anchor's product (its producers inlined) is staged in
// shared memory. k_inner: its tile stored k innermost, where its memory moves least
// along k (Sketch::mma_k_inner). vector: the fill can move 4 consecutive floats at
// once: the factor is a plain load of a task input whose flat index is affine in the
// anchor's axes, advancing by 1 along the tile's inner axis (k, or the factor's own
// spatial axis) and by multiples of 4 along every other, from an offset that is a
// multiple of 4, the inner axis's extent a multiple of 4 (a vector is wholly inside or
// outside it). The tile's inner extents are multiples of 8, so every vector of the
// fill then starts 16-byte aligned in memory and in the tile.
struct MmaOperandLayout {
  bool k_inner = true;
  bool vector = false;
};
MmaOperandLayout mma_operand_layout(const AnchorInfo& info, int factor, int spatial_axis, int k_axis);

// GpuMma: how many adjacent columns the write-back stores as one vector. The task's
// output must be float32, indexed by the anchor's axes, with the columns
// (`spatial_axis`) innermost (every later extent 1): then 4 where their extent is a
// multiple of 4 (a lane and its pair's columns, 128 bits), 2 where it is even (a
// lane's two adjacent columns, 64 bits), else 1. Each vector then starts at a multiple
// of its lanes, aligned to its size, and lies wholly inside or outside the extent.
int mma_store_lanes(const AnchorInfo& info, int spatial_axis);

// True if op is a pure (non-reducing) compute that may be inlined.
bool is_injective(const te::OpNode& op);

}  // namespace basin::sched
