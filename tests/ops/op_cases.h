// The operator cases shared by the tests: shapes compared against references (odd ones
// included) and bad attributes that must be rejected.
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace basin {

struct Case {
  std::string op;
  std::string params;  // "K=V K=V ..."
};

inline std::map<std::string, std::string> parse(const std::string& s) {
  std::map<std::string, std::string> m;
  std::istringstream is(s);
  std::string kv;
  while (is >> kv) {
    auto eq = kv.find('=');
    m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return m;
}

inline std::vector<Case> good_cases() {
  std::vector<Case> c = {
      {"dense", ""},
      {"dense", "M=7 K=13 N=5"},
      {"dense", "M=1 K=97 N=3"},
      {"matmul", ""},
      {"matmul", "M=5 K=1 N=7"},
      {"matmul", "M=31 K=17 N=2"},
      {"batch_matmul", ""},
      {"batch_matmul", "B=3 M=5 K=7 N=1"},
      {"batch_matmul", "B=1 M=13 K=3 N=11"},
      {"conv1d", ""},
      {"conv1d", "in_channels=6 width=23 out_channels=4 kernel=5 stride=2 padding=2 dilation=2 groups=2"},
      {"conv1d", "kernel=1 padding=0"},
      {"conv2d", ""},
      {"conv2d", "in_channels=3 height=17 width=19 out_channels=5 kernel=7 stride=2 padding=3"},
      {"conv2d", "kernel=3 dilation=2 padding=2"},
      {"conv2d", "in_channels=8 out_channels=12 groups=4"},
      {"conv2d", "in_channels=8 out_channels=8 groups=8 height=13 width=7"},
      {"conv2d", "kernel=3,1 stride=2,1 padding=1,0"},
      {"conv2d", "kernel=1 padding=0 stride=2 height=15 width=15"},
      {"conv3d", ""},
      {"conv3d", "in_channels=4 depth=5 height=6 width=7 out_channels=6 kernel=3 stride=2 padding=1 groups=2"},
      {"conv3d", "kernel=1,2,3 padding=0"},
      {"depthwise_conv2d", ""},
      {"depthwise_conv2d", "channels=5 height=13 width=11 multiplier=2 stride=2"},
      {"depthwise_conv2d", "kernel=5 padding=2"},
      {"conv2d_nchwc", ""},
      {"conv2d_nchwc", "in_channels=3 in_block=3 out_channels=16 block=8 stride=2 height=11 width=9"},
      {"conv2d_nchwc", "in_channels=24 out_channels=24 block=8 groups=24 kernel=5 padding=2 stride=2"},
      {"conv2d_nchwc", "in_channels=32 in_block=16 out_channels=8 block=8 kernel=1 padding=0 dilation=2"},
      {"winograd_input", ""},
      {"winograd_input", "m=4 in_channels=8 block=8 height=7 width=5 padding=0"},
      {"winograd_gemm", ""},
      {"winograd_gemm", "m=4 in_channels=24 block=8 out_channels=16 out_block=16 height=5 width=6"},
      {"winograd_output", ""},
      {"winograd_output", "m=4 in_channels=8 block=8 height=7 width=5"},
      {"to_nchwc", ""},
      {"to_nchwc", "channels=24 block=8 height=5 width=3"},
      {"from_nchwc", ""},
      {"from_nchwc", "channels=24 block=8 height=5 width=3"},
      {"conv2d_transpose", ""},
      {"conv2d_transpose", "stride=1 padding=0 output_padding=0"},
      {"conv2d_transpose", "in_channels=4 out_channels=6 groups=2 stride=2 padding=0 output_padding=1 kernel=4"},
      {"conv2d_transpose", "dilation=2 stride=3 output_padding=2 padding=2"},
      {"conv2d_transpose", "kernel=4 stride=2 padding=1 output_padding=0"},
      {"conv2d_transpose", "height=1 width=1 kernel=4 stride=1 padding=0 output_padding=0"},
      {"conv2d_transpose", "kernel=4,5 stride=2,3 padding=0,2 output_padding=1,0 groups=2 in_channels=4"},
      {"conv2d_transpose", "kernel=2 stride=3 padding=0 output_padding=2"},
      {"conv2d_transpose", "width_phases=1"},
      {"conv2d_transpose", "kernel=4 stride=2 padding=1 output_padding=0 out_channels=3 width=8 width_phases=1"},
      {"conv2d_transpose", "kernel=5 stride=2,3 padding=1 output_padding=0 width=5 groups=2 width_phases=1"},
      {"attention", ""},
      {"attention", "batch=2 heads=3 queries=7 keys=9 head_dim=5 value_dim=6 mask=padding"},
      {"attention", "queries=12 keys=12 mask=causal scale=1"},
      {"attention", "batch=2 heads=2 mask=full value_dim=16"},
      {"max_pool2d", ""},
      {"max_pool2d", "kernel=2 stride=2 padding=0 height=13 width=13"},
      {"max_pool2d", "kernel=3 stride=1 padding=1 dilation=2"},
      {"max_pool2d", "kernel=3 stride=2 padding=0 height=14 width=13 ceil_mode=1"},
      {"max_pool2d", "kernel=2 stride=2 padding=0 height=7 width=7 ceil_mode=1"},
      {"max_pool2d", "dtype=uint8"},
      {"max_pool2d", "dtype=int8 kernel=2 stride=2 padding=0 height=7 width=7 ceil_mode=1"},
      {"avg_pool2d", "kernel=3 stride=2 padding=1 height=14 width=12 ceil_mode=1"},
      {"avg_pool2d", "kernel=3 stride=2 padding=1 height=14 width=12 ceil_mode=1 count_include_pad=0"},
      {"avg_pool2d", ""},
      {"avg_pool2d", "count_include_pad=0"},
      {"avg_pool2d", "kernel=2 stride=2 padding=0"},
      {"avg_pool2d", "kernel=3,2 stride=1,2 padding=1,1 count_include_pad=0"},
      {"global_avg_pool2d", ""},
      {"global_avg_pool2d", "height=1 width=13 channels=3"},
      {"global_max_pool2d", ""},
      {"global_max_pool2d", "batch=2 channels=5 height=4 width=3"},
      {"clip", "min=-0.5 max=0.5"},
      {"leaky_relu", "alpha=0.2"},
      {"batch_norm", ""},
      {"batch_norm", "shape=3,7"},
      {"batch_norm", "shape=1,3,4,5,6 epsilon=0.1"},
      {"softmax", ""},
      {"softmax", "axis=0"},
      {"softmax", "shape=2,3,5,7 axis=1"},
      {"softmax", "shape=1"},
      {"log_softmax", ""},
      {"log_softmax", "axis=0"},
      {"log_softmax", "shape=2,3,5,7 axis=1"},
      {"layer_norm", ""},
      {"layer_norm", "axis=1"},
      {"layer_norm", "shape=3,17 axis=0"},
      {"rms_norm", ""},
      {"rms_norm", "axis=1"},
      {"rms_norm", "shape=5,31"},
      {"reshape", ""},
      {"reshape", "new_shape=-1"},
      {"reshape", "shape=2,3,5 new_shape=5,1,6"},
      {"transpose", ""},
      {"transpose", "perm="},
      {"transpose", "shape=2,3,4,5 perm=3,1,0,2"},
      {"flatten", ""},
      {"flatten", "start_dim=0"},
      {"flatten", "start_dim=1 end_dim=2"},
      {"concat", ""},
      {"concat", "axis=0 sizes=1,2"},
      {"concat", "shape=3,2,9 axis=-1 sizes=4,4,1,7"},
      {"split", ""},
      {"split", "shape=7,3 axis=0 sizes=3,4"},
      {"split", "shape=2,2,9 axis=-1 sizes=1,1,7"},
      {"slice", ""},
      {"slice", "starts=0 ends=-1 steps="},
      {"slice", "axes=2,0 starts=1,2 ends=4,7 steps=1,2"},
      {"slice", "axes=2,0 starts=-1,5 ends=-9223372036854775807,1 steps=-1,-2"},
      {"slice", "axes=1 starts=2 ends=0 steps=-1"},
      {"slice", "axes=-1 starts=1 ends=9223372036854775807 steps=1"},
      {"pad", ""},
      {"pad", "mode=edge"},
      {"pad", "mode=reflect pads=1,2,1,0,3,2"},
      {"pad", "value=2.5 pads=0,0,1,0,0,0"},
      {"gather", ""},
      {"gather", "axis=0 indices_shape=11"},
      {"gather", "axis=-1 indices_shape=3,1,2"},
      {"embedding", ""},
      {"embedding", "num_embeddings=7 dim=3 indices_shape=13"},
      {"gather_elements", ""},
      {"gather_elements", "shape=5,7 indices_shape=5,2 axis=-1"},
      {"gather_elements", "shape=3,4 indices_shape=6,2 axis=0"},
      {"gather_nd", ""},
      {"gather_nd", "batch_dims=0 shape=4,5,6 indices_shape=7,2"},
      {"gather_nd", "batch_dims=0 shape=4,5 indices_shape=2,3,2"},
      {"gather_nd", "batch_dims=2 shape=2,3,4,5 indices_shape=2,3,1"},
      {"cumsum", ""},
      {"cumsum", "axis=0 exclusive=1"},
      {"cumsum", "shape=2,9 axis=-1 reverse=1"},
      {"cumsum", "shape=2,9 axis=1 reverse=1 exclusive=1"},
      {"broadcast_to", ""},
      {"broadcast_to", "shape=1 new_shape=4,5"},
      {"broadcast_to", "shape=2,1,3 new_shape=2,7,3"},
      {"squeeze", ""},
      {"squeeze", "axes="},
      {"squeeze", "axes=-1,1"},
      {"unsqueeze", ""},
      {"unsqueeze", "axes=-1"},
      {"unsqueeze", "axes=0 shape=5"},
      {"resize", ""},
      {"resize", "align_corners=1"},
      {"resize", "mode=nearest"},
      {"resize", "mode=nearest out_height=10 out_width=14"},
      {"resize", "out_height=3 out_width=4"},
      {"resize", "mode=nearest out_height=2 out_width=3 height=7 width=11"},
      {"resize", "mode=cubic"},
      {"resize", "mode=cubic align_corners=1 out_height=4 out_width=13"},
      {"resize", "mode=linear coord=pytorch_half_pixel out_height=3 out_width=14"},
      {"resize", "mode=nearest coord=half_pixel nearest_mode=round_prefer_ceil out_height=10 out_width=21"},
      {"resize", "mode=cubic coord=half_pixel out_height=11 out_width=3"},
      {"sum", ""},
      {"mean", ""},
      {"max", ""},
      {"min", ""},
      {"conv2d_bias_relu", ""},
      {"conv2d_bias_relu", "in_channels=3 out_channels=5 height=9 width=7 kernel=3 stride=2"},
      {"dense_bias_gelu", ""},
      {"dense_bias_gelu", "M=5 K=7 N=3"},
      // Fused network tasks (core/ops/subgraph.h): a conv with a broadcast bias and a
      // residual, and a transposed view followed by a row reduction.
      {"subgraph", ""},
      {"subgraph",
       "graph=x0:f32[1,4,6,6]@-1:1;x1:f32[8,4,3,3]@-1:1;x2:f32[8,1,1]@-1:1;x3:f32[1,8,6,6]@-1:1;"
       "t0=conv2d(x0,x1){dilation=1,1|groups=1|padding=1,1|stride=1,1};t1=add(t0,x2){};t2=add(t1,x3){};t3=relu(t2){}"},
      {"subgraph", "graph=x0:f32[3,5,7]@-1:1;t0=transpose(x0){perm=2,0,1};t1=softmax(t0){axis=-1}"},
  };
  for (const char* op : {"sum", "mean", "max", "min"}) {
    c.push_back({op, "axes="});
    c.push_back({op, "axes=0,2 keepdims=1"});
    c.push_back({op, "shape=4,9 axes=-1"});
  }
  for (const char* op :
       {"equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor"}) {
    c.push_back({op, ""});
    c.push_back({op, "a_shape=5,7 b_shape=5,7"});
    c.push_back({op, "a_shape=1 b_shape=4,1,3"});
  }
  for (const char* op : {"logical_not", "isnan", "isinf"}) {
    c.push_back({op, ""});
    c.push_back({op, "shape=97"});
  }
  c.push_back({"isinf", "detect_positive=0"});
  c.push_back({"where", ""});
  c.push_back({"where", "cond_shape=5,7 x_shape=5,7 y_shape=5,7"});
  c.push_back({"where", "cond_shape=2,1,3 x_shape=1 y_shape=4,1"});
  c.push_back({"mod", ""});
  c.push_back({"mod", "fmod=1"});
  c.push_back({"mod", "a_shape=5,7 b_shape=1 fmod=1"});
  c.push_back({"cast", ""});
  c.push_back({"cast", "to=bool shape=97"});
  c.push_back({"cast", "to=int32 shape=2,1,3,5"});
  c.push_back({"cast", "to=float64"});
  c.push_back({"quantize_linear", ""});
  c.push_back({"quantize_linear", "per_axis=1 axis=1 qmin=-128 qmax=127 shape=2,16,3,5"});
  c.push_back({"quantize_linear", "per_axis=1 axis=-1 qmin=-32768 qmax=32767 shape=4,97"});
  c.push_back({"fake_quantize", ""});
  c.push_back({"fake_quantize", "per_axis=1 axis=1 qmin=-128 qmax=127 shape=2,16,3,5"});
  c.push_back({"dequantize_linear", ""});
  c.push_back({"dequantize_linear", "per_axis=1 axis=0 shape=16,3,3 dtype=int8"});
  c.push_back({"dequantize_linear", "dtype=int32 shape=7,9"});
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum", "pow"}) {
    c.push_back({op, ""});
    c.push_back({op, "a_shape=5,7 b_shape=5,7"});
    c.push_back({op, "a_shape=1 b_shape=4,1,3"});
  }
  for (const char* op :
       {"relu",        "relu6", "clip", "leaky_relu", "sigmoid", "tanh",     "gelu", "silu", "hardswish",
        "hardsigmoid", "exp",   "log",  "sqrt",       "rsqrt",   "erf",      "neg",  "abs",  "sin",
        "cos",         "floor", "ceil", "round",      "sign",    "softplus", "elu",  "selu"}) {
    c.push_back({op, ""});
    c.push_back({op, "shape=97"});
    c.push_back({op, "shape=2,1,3,5"});
  }
  return c;
}

struct BadCase {
  std::string op;
  std::string params;
  std::string attr;  // the attribute the error must name
};

inline std::vector<BadCase> bad_cases() {
  std::vector<BadCase> c = {
      {"dense", "M=0", "M"},
      {"dense", "M=abc", "M"},
      {"dense", "foo=1", "foo"},
      {"matmul", "K=-3", "K"},
      {"batch_matmul", "B=0", "B"},
      {"conv1d", "groups=3", "groups"},
      {"conv2d", "stride=0", "stride"},
      {"conv2d", "kernel=20", "kernel"},
      {"conv2d", "dilation=0", "dilation"},
      {"conv2d", "padding=-1", "padding"},
      {"conv2d", "kernel=3,3,3", "kernel"},
      {"conv2d", "out_channels=10 groups=4 in_channels=8", "groups"},
      {"conv3d", "kernel=12", "kernel"},
      {"depthwise_conv2d", "multiplier=0", "multiplier"},
      {"conv2d_transpose", "output_padding=2 stride=2", "output_padding"},
      {"conv2d_transpose", "groups=3", "groups"},
      {"conv2d_transpose", "width_phases=1 stride=1 output_padding=0", "width_phases"},
      {"conv2d_transpose", "width_phases=1 dilation=2", "width_phases"},
      {"conv2d_transpose", "width_phases=1 width=5 output_padding=0", "width_phases"},
      {"conv2d_transpose", "width_phases=2", "width_phases"},
      {"conv2d_nchwc", "block=7 in_block=16", "block"},
      {"conv2d_nchwc", "in_channels=24 in_block=16", "in_block"},
      {"conv2d_nchwc", "in_channels=16 out_channels=32 groups=16", "groups"},
      {"winograd_input", "m=3", "m"},
      {"winograd_input", "padding=3", "padding"},
      {"winograd_input", "height=1 padding=0", "x"},
      {"winograd_gemm", "in_channels=24 block=16", "block"},
      {"winograd_gemm", "out_channels=24 out_block=16", "out_block"},
      {"winograd_output", "m=6", "m"},
      {"winograd_output", "in_channels=24 block=16", "block"},
      {"to_nchwc", "channels=24 block=16", "block"},
      {"from_nchwc", "block=0", "block"},
      {"attention", "mask=diagonal", "mask"},
      {"attention", "head_dim=0", "head_dim"},
      {"max_pool2d", "padding=2", "padding"},
      {"max_pool2d", "kernel=0", "kernel"},
      {"max_pool2d", "ceil_mode=2", "ceil_mode"},
      {"max_pool2d", "dtype=int32", "dtype"},
      {"avg_pool2d", "count_include_pad=2", "count_include_pad"},
      {"avg_pool2d", "stride=0", "stride"},
      {"global_avg_pool2d", "height=0", "height"},
      {"global_max_pool2d", "channels=-1", "channels"},
      {"clip", "min=2 max=1", "min"},
      {"leaky_relu", "alpha=nan", "alpha"},
      {"elu", "alpha=inf", "alpha"},
      {"selu", "gamma=nan", "gamma"},
      {"batch_norm", "epsilon=0", "epsilon"},
      {"batch_norm", "shape=5", "shape"},
      {"softmax", "axis=5", "axis"},
      {"log_softmax", "axis=-3", "axis"},
      {"layer_norm", "epsilon=-1", "epsilon"},
      {"rms_norm", "axis=3", "axis"},
      {"reshape", "new_shape=7,-1", "new_shape"},
      {"reshape", "new_shape=-1,-1", "new_shape"},
      {"transpose", "perm=0,0,1", "perm"},
      {"flatten", "start_dim=2 end_dim=1", "end_dim"},
      {"concat", "sizes=3,0", "sizes"},
      {"concat", "axis=4", "axis"},
      {"split", "sizes=2,2", "sizes"},
      {"slice", "steps=0,1", "steps"},
      {"slice", "starts=1 ends=2,3 steps=", "ends"},
      {"pad", "mode=wrap", "mode"},
      {"pad", "pads=1,2", "pads"},
      {"pad", "mode=reflect pads=3,0,0,0,0,0", "pads"},
      {"gather", "axis=3", "axis"},
      {"gather_elements", "indices_shape=4,3", "indices"},
      {"gather_elements", "indices_shape=5,3,6", "indices"},
      {"cumsum", "axis=3", "axis"},
      {"gather_nd", "batch_dims=3", "batch_dims"},
      {"gather_nd", "indices_shape=3,2,3", "indices"},
      {"gather_nd", "batch_dims=1 indices_shape=2,1", "indices"},
      {"cumsum", "reverse=2", "reverse"},
      {"embedding", "num_embeddings=0", "num_embeddings"},
      {"broadcast_to", "new_shape=4", "new_shape"},
      {"squeeze", "axes=0", "axes"},
      {"unsqueeze", "axes=5", "axes"},
      {"conv2d_bias_relu", "stride=0", "stride"},
      {"conv2d_bias_relu", "kernel=20", "kernel"},
      {"dense_bias_gelu", "M=0", "M"},
      {"dense_bias_gelu", "K=x", "K"},
      {"subgraph", "graph=x0:f32[2,3]@-1:1;t0=add(x0,x9){}", "graph"},
      {"subgraph", "graph=x0:f32[2,3]@-1:1;x1:f32[4,5]@-1:1;t0=add(x0,x1){}", "graph"},
      {"resize", "mode=area", "mode"},
      {"resize", "coord=tf_crop_and_resize", "coord"},
      {"resize", "mode=nearest nearest_mode=round", "nearest_mode"},
      {"resize", "mode=nearest align_corners=1", "align_corners"},
  };
  for (const char* op : {"sum", "mean", "max", "min"}) {
    c.push_back({op, "axes=0,0", "axes"});
    c.push_back({op, "keepdims=2", "keepdims"});
  }
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "equal", "less", "less_equal",
                         "greater", "greater_equal", "logical_and", "logical_or", "logical_xor", "mod"})
    c.push_back({op, "a_shape=2,3 b_shape=4", "shape"});
  c.push_back({"logical_not", "shape=3,0", "shape"});
  c.push_back({"isnan", "shape=0", "shape"});
  c.push_back({"isinf", "shape=-2", "shape"});
  c.push_back({"where", "cond_shape=2,3 x_shape=4", "shape"});
  c.push_back({"mod", "fmod=2", "fmod"});
  c.push_back({"cast", "to=float16", "to"});
  c.push_back({"quantize_linear", "qmin=5 qmax=4", "qmin"});
  c.push_back({"quantize_linear", "per_axis=1 axis=3", "axis"});
  c.push_back({"dequantize_linear", "per_axis=1 axis=-4", "axis"});
  c.push_back({"fake_quantize", "qmin=3 qmax=2", "qmin"});
  c.push_back({"dequantize_linear", "dtype=float32", "dtype"});
  for (const char* op :
       {"relu",        "relu6", "clip", "leaky_relu", "sigmoid", "tanh",     "gelu", "silu", "hardswish",
        "hardsigmoid", "exp",   "log",  "sqrt",       "rsqrt",   "erf",      "neg",  "abs",  "sin",
        "cos",         "floor", "ceil", "round",      "sign",    "softplus", "elu",  "selu"})
    c.push_back({op, "shape=3,0", "shape"});
  return c;
}

}  // namespace basin
