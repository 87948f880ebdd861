#include "core/graph/zoo.h"

#include <cmath>
#include <functional>
#include <random>

namespace basin::graph {

std::string NetBuilder::next(const std::string& name) { return name + "." + std::to_string(counter_++); }

int NetBuilder::weight(const std::string& name, std::vector<int64_t> shape, double bound) {
  std::string n = next(name);
  return g_.add_constant(n, random_weight(std::move(shape), bound, seed_ * 1000003 + static_cast<uint64_t>(counter_)));
}

int NetBuilder::uniform(const std::string& name, std::vector<int64_t> shape, double lo, double hi) {
  std::string n = next(name);
  return g_.add_constant(
      n, NDArray::random(DType::f32(), std::move(shape), lo, hi, seed_ * 1000003 + static_cast<uint64_t>(counter_)));
}

int NetBuilder::op(const std::string& o, std::vector<int> inputs, const std::map<std::string, ops::AttrValue>& attrs) {
  return g_.add_node(o, inputs, attrs, next(o));
}

int NetBuilder::conv(int x, int64_t oc, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                     std::vector<int64_t> padding, int64_t groups, bool bias) {
  const std::vector<int64_t>& s = g_.value(x).shape;
  const size_t rank = s.size() - 2;
  if (kernel.size() == 1) kernel.assign(rank, kernel[0]);
  int64_t ic = s[1] / groups, fan_in = ic;
  for (int64_t k : kernel) fan_in *= k;
  std::vector<int64_t> wshape = {oc, ic};
  wshape.insert(wshape.end(), kernel.begin(), kernel.end());
  int w = weight("conv.w", wshape, std::sqrt(6.0 / static_cast<double>(fan_in)));
  int y = op("conv" + std::to_string(rank) + "d", {x, w},
             {{"stride", stride}, {"padding", padding}, {"dilation", std::vector<int64_t>{1}}, {"groups", groups}});
  if (!bias) return y;
  std::vector<int64_t> bshape(rank + 1, 1);
  bshape[0] = oc;
  return op("add", {y, weight("conv.b", bshape, 0.05)});
}

int NetBuilder::conv_transpose(int x, int64_t oc, int64_t k, int64_t stride, int64_t padding) {
  int64_t ic = g_.value(x).shape[1];
  int w = weight("convt.w", {ic, oc, k, k}, std::sqrt(6.0 / static_cast<double>(ic * k * k / (stride * stride))));
  return op("conv2d_transpose", {x, w},
            {{"stride", std::vector<int64_t>{stride}}, {"padding", std::vector<int64_t>{padding}}});
}

int NetBuilder::batch_norm(int x) {
  int64_t c = g_.value(x).shape[1];
  int gamma = uniform("bn.gamma", {c}, 0.9, 1.1), beta = uniform("bn.beta", {c}, -0.05, 0.05);
  int mean = uniform("bn.mean", {c}, -0.05, 0.05), var = uniform("bn.var", {c}, 0.9, 1.1);
  return op("batch_norm", {x, gamma, beta, mean, var}, {{"epsilon", 1e-5}});
}

int NetBuilder::dense(int x, int64_t n, bool bias) {
  int64_t k = g_.value(x).shape.back();
  int y = op("dense", {x, weight("dense.w", {n, k}, std::sqrt(3.0 / static_cast<double>(k)))});
  return bias ? op("add", {y, weight("dense.b", {n}, 0.02)}) : y;
}

int NetBuilder::layer_norm(int x) {
  int64_t d = g_.value(x).shape.back();
  return op("layer_norm", {x, uniform("ln.gamma", {d}, 0.9, 1.1), uniform("ln.beta", {d}, -0.05, 0.05)},
            {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
}

namespace {

using I = std::vector<int64_t>;

int conv_bn(NetBuilder& b, int x, int64_t oc, int64_t k, int64_t stride, int64_t pad, bool relu, int64_t groups = 1) {
  int y = b.batch_norm(b.conv(x, oc, {k}, {stride}, {pad}, groups));
  return relu ? b.op("relu", {y}) : y;
}

int relu6(NetBuilder& b, int x) { return b.op("clip", {x}, {{"min", 0.0}, {"max", 6.0}}); }

int head(NetBuilder& b, int x, int64_t classes) {
  int p = b.op("global_avg_pool2d", {x});
  int f = b.op("flatten", {p}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}});
  return b.dense(f, classes);
}

Graph resnet(int depth) {
  Graph g;
  g.name = "resnet" + std::to_string(depth);
  NetBuilder b(g, static_cast<uint64_t>(depth));
  int x = g.add_input("input", {1, 3, 224, 224});
  x = conv_bn(b, x, 64, 7, 2, 3, true);
  x = b.op("max_pool2d", {x}, {{"kernel", I{3}}, {"stride", I{2}}, {"padding", I{1}}});
  const bool bottleneck = depth >= 50;
  const std::vector<int> blocks = depth == 18 ? std::vector<int>{2, 2, 2, 2} : std::vector<int>{3, 4, 6, 3};
  int64_t in_c = 64;
  for (int stage = 0; stage < 4; ++stage) {
    int64_t width = 64 << stage, out_c = bottleneck ? width * 4 : width;
    for (int i = 0; i < blocks[stage]; ++i) {
      int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      int y;
      if (bottleneck) {
        y = conv_bn(b, x, width, 1, 1, 0, true);
        y = conv_bn(b, y, width, 3, stride, 1, true);
        y = conv_bn(b, y, out_c, 1, 1, 0, false);
      } else {
        y = conv_bn(b, x, width, 3, stride, 1, true);
        y = conv_bn(b, y, width, 3, 1, 1, false);
      }
      int shortcut = (stride != 1 || in_c != out_c) ? conv_bn(b, x, out_c, 1, stride, 0, false) : x;
      x = b.op("relu", {b.op("add", {y, shortcut})});
      in_c = out_c;
    }
  }
  g.add_output(head(b, x, 1000));
  return g;
}

Graph mobilenet_v2() {
  Graph g;
  g.name = "mobilenet_v2";
  NetBuilder b(g, 2);
  int x = g.add_input("input", {1, 3, 224, 224});
  auto cbr6 = [&](int v, int64_t oc, int64_t k, int64_t s, int64_t groups) {
    return relu6(b, conv_bn(b, v, oc, k, s, k / 2, false, groups));
  };
  x = cbr6(x, 32, 3, 2, 1);
  int64_t in_c = 32;
  const int64_t cfg[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                            {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  for (const auto& c : cfg) {
    for (int64_t i = 0; i < c[2]; ++i) {
      int64_t stride = i == 0 ? c[3] : 1, hidden = in_c * c[0];
      int y = x;
      if (c[0] != 1) y = cbr6(y, hidden, 1, 1, 1);
      y = cbr6(y, hidden, 3, stride, hidden);
      y = conv_bn(b, y, c[1], 1, 1, 0, false);
      x = (stride == 1 && in_c == c[1]) ? b.op("add", {y, x}) : y;
      in_c = c[1];
    }
  }
  x = cbr6(x, 1280, 1, 1, 1);
  g.add_output(head(b, x, 1000));
  return g;
}

// Multi-head self-attention on x[S, D] (no mask unless given [S, S]), output [S, D].
int attention(NetBuilder& b, int x, int64_t heads, int mask = -1) {
  const int64_t s = b.graph().value(x).shape[0], d = b.graph().value(x).shape[1], hd = d / heads;
  auto split_heads = [&](int v, I perm) {
    return b.op("transpose", {b.op("reshape", {v}, {{"new_shape", I{s, heads, hd}}})}, {{"perm", perm}});
  };
  int q = split_heads(b.dense(x, d), {1, 0, 2});  // [H, S, hd]
  int k = split_heads(b.dense(x, d), {1, 2, 0});  // [H, hd, S]
  int v = split_heads(b.dense(x, d), {1, 0, 2});  // [H, S, hd]
  int scores = b.op("batch_matmul", {q, k});
  scores = b.op("mul", {scores, b.graph().add_constant("attn.scale" + std::to_string(x), [&] {
                          NDArray a(DType::f32(), {1});
                          a.set(0, 1.0 / std::sqrt(static_cast<double>(hd)));
                          return a;
                        }())});
  if (mask >= 0) scores = b.op("add", {scores, mask});
  int probs = b.op("softmax", {scores}, {{"axis", int64_t{-1}}});
  int ctx = b.op("batch_matmul", {probs, v});  // [H, S, hd]
  ctx = b.op("reshape", {b.op("transpose", {ctx}, {{"perm", I{1, 0, 2}}})}, {{"new_shape", I{s, d}}});
  return b.dense(ctx, d);
}

Graph bert_base() {
  Graph g;
  g.name = "bert_base";
  NetBuilder b(g, 3);
  const int64_t s = 128, d = 768, vocab = 30522;
  int ids = g.add_input("input_ids", {1, s}, DType::i64());
  int emb = b.op("embedding", {b.weight("word_embeddings", {vocab, d}, 0.05), ids});  // [1, S, D]
  int x = b.op("reshape", {emb}, {{"new_shape", I{s, d}}});
  x = b.op("add", {x, b.weight("position_embeddings", {s, d}, 0.05)});
  x = b.layer_norm(x);
  for (int layer = 0; layer < 12; ++layer) {
    x = b.layer_norm(b.op("add", {attention(b, x, 12), x}));
    int h = b.op("gelu", {b.dense(x, 3072)});
    x = b.layer_norm(b.op("add", {b.dense(h, d), x}));
  }
  g.add_output(b.op("reshape", {x}, {{"new_shape", I{1, s, d}}}));
  return g;
}

// One encoder layer as PyTorch's nn.TransformerEncoderLayer(d_model=256, nhead=8,
// dim_feedforward=1024, batch_first=True) in its defaults: post-norm, ReLU, 64 tokens.
Graph transformer_layer() {
  Graph g;
  g.name = "transformer_layer";
  NetBuilder b(g, 9);
  const int64_t s = 64, d = 256;
  int in = g.add_input("x", {1, s, d});
  int x = b.op("reshape", {in}, {{"new_shape", I{s, d}}});
  x = b.layer_norm(b.op("add", {x, attention(b, x, 8)}));
  int h = b.op("relu", {b.dense(x, 1024)});
  x = b.layer_norm(b.op("add", {x, b.dense(h, d)}));
  g.add_output(b.op("reshape", {x}, {{"new_shape", I{1, s, d}}}));
  return g;
}

Graph vit_b16() {
  Graph g;
  g.name = "vit_b16";
  NetBuilder b(g, 4);
  const int64_t d = 768, tokens = 197;
  int x = g.add_input("input", {1, 3, 224, 224});
  x = b.conv(x, d, {16}, {16}, {0}, 1, true);  // [1, D, 14, 14]
  x = b.op("reshape", {x}, {{"new_shape", I{d, 196}}});
  x = b.op("transpose", {x}, {{"perm", I{1, 0}}});  // [196, D]
  x = b.op("concat", {b.weight("cls_token", {1, d}, 0.05), x}, {{"axis", int64_t{0}}});
  x = b.op("add", {x, b.weight("pos_embedding", {tokens, d}, 0.05)});
  for (int layer = 0; layer < 12; ++layer) {
    x = b.op("add", {attention(b, b.layer_norm(x), 12), x});
    int h = b.op("gelu", {b.dense(b.layer_norm(x), 3072)});
    x = b.op("add", {b.dense(h, d), x});
  }
  x = b.layer_norm(x);
  int cls = b.op("slice", {x}, {{"starts", I{0}}, {"ends", I{1}}, {"axes", I{0}}, {"steps", I{1}}});
  g.add_output(b.dense(cls, 1000));
  return g;
}

Graph dcgan() {
  Graph g;
  g.name = "dcgan";
  NetBuilder b(g, 5);
  int x = g.add_input("z", {1, 100, 1, 1});
  x = b.op("relu", {b.batch_norm(b.conv_transpose(x, 512, 4, 1, 0))});  // 4x4
  for (int64_t c : {256, 128, 64}) x = b.op("relu", {b.batch_norm(b.conv_transpose(x, c, 4, 2, 1))});
  g.add_output(b.op("tanh", {b.conv_transpose(x, 3, 4, 2, 1)}));  // 64x64
  return g;
}

Graph llama_layer() {
  Graph g;
  g.name = "llama_layer";
  NetBuilder b(g, 6);
  const int64_t s = 128, d = 4096, heads = 32, hd = 128, ffn = 11008;
  int x = g.add_input("hidden", {s, d});
  auto rms = [&](int v) {
    return b.op("rms_norm", {v, b.uniform("rms.gamma", {d}, 0.9, 1.1)}, {{"axis", int64_t{-1}}, {"epsilon", 1e-6}});
  };
  // Rotary embeddings: tables of cos and sin per position and pair, applied as
  // x * cos + rotate_half(x) * sin on [H, S, hd].
  NDArray cos_t(DType::f32(), {s, hd}), sin_t(DType::f32(), {s, hd});
  for (int64_t p = 0; p < s; ++p)
    for (int64_t i = 0; i < hd; ++i) {
      double theta = static_cast<double>(p) *
                     std::pow(10000.0, -2.0 * static_cast<double>(i % (hd / 2)) / static_cast<double>(hd));
      cos_t.set(p * hd + i, std::cos(theta));
      sin_t.set(p * hd + i, std::sin(theta));
    }
  int cosv = g.add_constant("rope.cos", cos_t), sinv = g.add_constant("rope.sin", sin_t);
  auto rope = [&](int v) {  // v: [H, S, hd]
    int lo = b.op("slice", {v}, {{"starts", I{0}}, {"ends", I{hd / 2}}, {"axes", I{2}}, {"steps", I{1}}});
    int hi = b.op("slice", {v}, {{"starts", I{hd / 2}}, {"ends", I{hd}}, {"axes", I{2}}, {"steps", I{1}}});
    int rot = b.op("concat", {b.op("neg", {hi}), lo}, {{"axis", int64_t{2}}});
    return b.op("add", {b.op("mul", {v, cosv}), b.op("mul", {rot, sinv})});
  };
  NDArray mask(DType::f32(), {s, s});
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s; ++j) mask.set(i * s + j, j > i ? -1e9 : 0.0);
  int maskv = g.add_constant("causal_mask", mask);
  int h = rms(x);
  auto heads_of = [&](int v, I perm) {
    return b.op("transpose", {b.op("reshape", {v}, {{"new_shape", I{s, heads, hd}}})}, {{"perm", perm}});
  };
  int q = rope(heads_of(b.dense(h, d, false), {1, 0, 2}));
  int k = rope(heads_of(b.dense(h, d, false), {1, 0, 2}));
  int v = heads_of(b.dense(h, d, false), {1, 0, 2});
  int kt = b.op("transpose", {k}, {{"perm", I{0, 2, 1}}});
  int scores = b.op("mul", {b.op("batch_matmul", {q, kt}),
                            b.uniform("attn.scale", {1}, 1.0 / std::sqrt(128.0), 1.0 / std::sqrt(128.0) + 1e-9)});
  int probs = b.op("softmax", {b.op("add", {scores, maskv})}, {{"axis", int64_t{-1}}});
  int ctx = b.op("batch_matmul", {probs, v});
  ctx = b.op("reshape", {b.op("transpose", {ctx}, {{"perm", I{1, 0, 2}}})}, {{"new_shape", I{s, d}}});
  x = b.op("add", {b.dense(ctx, d, false), x});
  h = rms(x);
  int gate = b.op("silu", {b.dense(h, ffn, false)});
  int up = b.dense(h, ffn, false);
  x = b.op("add", {b.dense(b.op("mul", {gate, up}), d, false), x});
  g.add_output(x);
  return g;
}

Graph r3d_18() {
  Graph g;
  g.name = "r3d_18";
  NetBuilder b(g, 7);
  int x = g.add_input("input", {1, 3, 16, 112, 112});
  auto cbr = [&](int v, int64_t oc, I k, I s, I p, bool relu) {
    int y = b.batch_norm(b.conv(v, oc, k, s, p));
    return relu ? b.op("relu", {y}) : y;
  };
  x = cbr(x, 64, {3, 7, 7}, {1, 2, 2}, {1, 3, 3}, true);
  int64_t in_c = 64;
  for (int stage = 0; stage < 4; ++stage) {
    int64_t c = 64 << stage;
    for (int i = 0; i < 2; ++i) {
      int64_t st = (stage > 0 && i == 0) ? 2 : 1;
      int y = cbr(x, c, {3}, {st}, {1}, true);
      y = cbr(y, c, {3}, {1}, {1}, false);
      int sc = (st != 1 || in_c != c) ? cbr(x, c, {1}, {st}, {0}, false) : x;
      x = b.op("relu", {b.op("add", {y, sc})});
      in_c = c;
    }
  }
  x = b.op("mean", {x}, {{"axes", I{2, 3, 4}}, {"keepdims", int64_t{0}}});  // [1, 512]
  g.add_output(b.dense(x, 400));
  return g;
}

// One of `v`, uniformly.
int64_t pick(std::mt19937_64& rng, std::initializer_list<int64_t> v) {
  return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
}

// A small random network (random_network below): a few convolution blocks of the kinds
// ResNet and MobileNet have, or a few transformer blocks, with drawn widths and sizes.
void random_cnn(NetBuilder& b, std::mt19937_64& rng) {
  Graph& g = b.graph();
  auto pick = [&](std::initializer_list<int64_t> v) { return graph::pick(rng, v); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  int64_t c = pick({3, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 384, 512});
  // Keep the input under about 400k elements: wide layers get small images.
  int64_t h = pick({7, 8, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 112});
  while (c * h * h > 400000 && h > 7) h = h * 2 / 3;
  int x = g.add_input("input", {1, c, h, h});
  const int blocks = static_cast<int>(std::uniform_int_distribution<int>(2, 4)(rng));
  for (int i = 0; i < blocks; ++i) {
    const int64_t stride = (h >= 8 && chance(0.35)) ? 2 : 1;
    auto act = [&](int v) {
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0:
          return b.op("relu", {v});
        case 1:
          return relu6(b, v);
        default:
          return v;
      }
    };
    int64_t oc = c;
    switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
      case 0: {  // convolution, batch norm, activation
        const int64_t k = pick({1, 1, 3, 3, 3, 5, 7});
        oc = std::max<int64_t>(8, std::min<int64_t>(768, c * pick({1, 1, 2, 4}) / pick({1, 2}) / 8 * 8));
        x = act(conv_bn(b, x, oc, k, stride, k / 2, false));
        break;
      }
      case 1: {  // depthwise 3x3 (or 5x5), batch norm, ReLU6
        if (c < 8) continue;
        const int64_t k = pick({3, 3, 5});
        x = relu6(b, conv_bn(b, x, c, k, stride, k / 2, false, c));
        break;
      }
      case 2: {  // a residual block, as ResNet's basic block or MobileNet's inverted one
        if (chance(0.5)) {
          int y = conv_bn(b, x, c, 3, 1, 1, true);
          y = conv_bn(b, y, c, 3, 1, 1, false);
          x = b.op("relu", {b.op("add", {y, x})});
        } else {
          const int64_t hidden = std::min<int64_t>(1024, c * pick({2, 4, 6}));
          int y = relu6(b, conv_bn(b, x, hidden, 1, 1, 0, false));
          y = relu6(b, conv_bn(b, y, hidden, 3, 1, 1, false, hidden));
          x = b.op("add", {conv_bn(b, y, c, 1, 1, 0, false), x});
        }
        break;
      }
      case 3:  // pooling
        if (h < 8) continue;
        x = b.op(chance(0.5) ? "max_pool2d" : "avg_pool2d", {x},
                 {{"kernel", I{pick({2, 3})}}, {"stride", I{2}}, {"padding", I{chance(0.5) ? 1 : 0}}});
        break;
      default: {  // bottleneck: 1x1 down, 3x3, 1x1 up, with a projected shortcut when the shape changes
        const int64_t width = std::max<int64_t>(8, c / pick({1, 2, 4}) / 8 * 8);
        oc = std::max<int64_t>(16, std::min<int64_t>(1024, width * 4));
        int y = conv_bn(b, x, width, 1, 1, 0, true);
        y = conv_bn(b, y, width, 3, stride, 1, true);
        y = conv_bn(b, y, oc, 1, 1, 0, false);
        int shortcut = (stride != 1 || oc != c) ? conv_bn(b, x, oc, 1, stride, 0, false) : x;
        x = b.op("relu", {b.op("add", {y, shortcut})});
        break;
      }
    }
    c = g.value(x).shape[1];
    h = g.value(x).shape[2];
  }
  g.add_output(chance(0.5) ? head(b, x, pick({10, 100, 1000})) : x);
}

void random_transformer(NetBuilder& b, std::mt19937_64& rng) {
  Graph& g = b.graph();
  auto pick = [&](std::initializer_list<int64_t> v) { return graph::pick(rng, v); };
  const int64_t s = pick({16, 32, 49, 64, 96, 128, 196, 256}), heads = pick({2, 4, 8});
  const int64_t d = heads * pick({16, 32, 48, 64});
  int x = g.add_input("input", {s, d});
  const int layers = static_cast<int>(std::uniform_int_distribution<int>(1, 2)(rng));
  for (int layer = 0; layer < layers; ++layer) {
    x = b.layer_norm(b.op("add", {attention(b, x, heads), x}));
    int h = b.dense(x, d * pick({2, 3, 4}));
    h = b.op(std::uniform_int_distribution<int>(0, 1)(rng) ? "gelu" : "relu", {h});
    x = b.layer_norm(b.op("add", {b.dense(h, d), x}));
  }
  g.add_output(x);
}

struct ZooBuilder {
  ZooEntry entry;
  std::function<Graph()> build;
};

const std::vector<ZooBuilder>& builders() {
  static const std::vector<ZooBuilder> b = {
      {{"resnet18", "ResNet-18, 1x3x224x224 -> 1000 classes"}, [] { return resnet(18); }},
      {{"resnet50", "ResNet-50 (bottleneck blocks), 1x3x224x224 -> 1000 classes"}, [] { return resnet(50); }},
      {{"mobilenet_v2", "MobileNetV2 (depthwise separable, inverted residuals), 1x3x224x224 -> 1000"}, mobilenet_v2},
      {{"bert_base", "BERT-base encoder: 12 layers, hidden 768, 12 heads, sequence 128"}, bert_base},
      {{"transformer_layer",
        "one transformer encoder layer (PyTorch's defaults): hidden 256, 8 heads, 1024 "
        "feed-forward, 64 tokens"},
       transformer_layer},
      {{"vit_b16", "ViT-B/16: 16x16 patches of 224x224, 12 layers, hidden 768 -> 1000"}, vit_b16},
      {{"dcgan", "DCGAN generator: 100-d noise -> 3x64x64 image (transposed convolutions)"}, dcgan},
      {{"llama_layer", "one LLaMA-7B decoder layer: RMS norm, rotary attention (causal), SiLU-gated MLP, sequence 128"},
       llama_layer},
      {{"r3d_18", "R3D-18 video ResNet (3-D convolutions), 1x3x16x112x112 -> 400 classes"}, r3d_18},
  };
  return b;
}

}  // namespace

const std::vector<ZooEntry>& zoo_networks() {
  static const std::vector<ZooEntry> e = [] {
    std::vector<ZooEntry> v;
    for (const auto& b : builders()) v.push_back(b.entry);
    return v;
  }();
  return e;
}

Graph zoo_network(const std::string& name) {
  std::string names;
  for (const auto& b : builders()) {
    if (b.entry.name == name) return b.build();
    names += (names.empty() ? "" : ", ") + b.entry.name;
  }
  throw NotFoundError("no zoo network '" + name + "' (networks: " + names + ")");
}

Graph random_network(uint64_t index) {
  std::mt19937_64 rng(0x5eed0000ULL + index);
  Graph g;
  g.name = "random" + std::to_string(index);
  NetBuilder b(g, 100 + index);
  // Two in three are convolutional, as most of the zoo's tasks are.
  if (std::uniform_int_distribution<int>(0, 2)(rng)) random_cnn(b, rng);
  else random_transformer(b, rng);
  return g;
}

}  // namespace basin::graph
