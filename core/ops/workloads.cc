#include "core/ops/workloads.h"

#include "core/util/error.h"

namespace basin::ops {

namespace {

Workload gemm(int n) {
  std::string s = std::to_string(n);
  return {"gemm-" + s, "matmul", {{"M", s}, {"K", s}, {"N", s}}, "square float32 GEMM " + s + "^3"};
}

Workload bert(int k, int n) {
  std::string name = "bert-" + std::to_string(k) + "x" + std::to_string(n);
  return {name,
          "dense",
          {{"M", "128"}, {"K", std::to_string(k)}, {"N", std::to_string(n)}},
          "BERT-base dense layer, 128 tokens, K=" + std::to_string(k) + " N=" + std::to_string(n)};
}

// The AutoTVM paper's Table 1: ResNet-18 convolutions, NCHW, padding k/2.
Workload resnet(int idx, int hw, int ic, int oc, int k, int s) {
  return {"resnet18-c" + std::to_string(idx),
          "conv2d",
          {{"batch", "1"},
           {"in_channels", std::to_string(ic)},
           {"height", std::to_string(hw)},
           {"width", std::to_string(hw)},
           {"out_channels", std::to_string(oc)},
           {"kernel", std::to_string(k)},
           {"stride", std::to_string(s)},
           {"padding", std::to_string(k / 2)}},
          "ResNet-18 C" + std::to_string(idx) + ": " + std::to_string(hw) + "x" + std::to_string(hw) + ", " +
              std::to_string(ic) + "->" + std::to_string(oc) + " channels, " + std::to_string(k) + "x" +
              std::to_string(k) + " stride " + std::to_string(s)};
}

}  // namespace

const std::vector<Workload>& all_workloads() {
  static const std::vector<Workload> w = {
      gemm(256),
      gemm(512),
      gemm(1024),
      gemm(2048),
      gemm(4096),
      bert(768, 768),
      bert(768, 3072),
      bert(3072, 768),
      {"attn-bmm",
       "batch_matmul",
       {{"B", "12"}, {"M", "128"}, {"K", "64"}, {"N", "128"}},
       "BERT-base attention scores: 12 heads, 128x64x128"},
      {"bert-attention",
       "attention",
       {{"heads", "12"},
        {"queries", "128"},
        {"keys", "128"},
        {"head_dim", "64"},
        {"value_dim", "64"},
        {"scale", "0.125"},
        {"mask", "padding"}},
       "BERT-base attention: 12 heads, 128 tokens, head dimension 64, padding mask"},
      {"mobilenet-dw",
       "depthwise_conv2d",
       {{"channels", "192"}, {"height", "28"}, {"width", "28"}, {"kernel", "3"}, {"stride", "1"}, {"padding", "1"}},
       "MobileNetV2 depthwise convolution: 28x28, 192 channels, 3x3 stride 1"},
      {"vit-qkv",
       "dense",
       {{"M", "197"}, {"K", "768"}, {"N", "2304"}},
       "ViT-B/16 QKV projection: 197 tokens (a prime: guarded tiles), 768->2304"},
      {"vit-softmax", "softmax", {{"shape", "12,197,197"}}, "ViT-B/16 attention softmax: 12 heads, 197x197"},
      resnet(1, 224, 3, 64, 7, 2),
      resnet(2, 56, 64, 64, 3, 1),
      resnet(3, 56, 64, 64, 1, 1),
      resnet(4, 56, 64, 128, 3, 2),
      resnet(5, 56, 64, 128, 1, 2),
      resnet(6, 28, 128, 128, 3, 1),
      resnet(7, 28, 128, 256, 3, 2),
      resnet(8, 28, 128, 256, 1, 2),
      resnet(9, 14, 256, 256, 3, 1),
      resnet(10, 14, 256, 512, 3, 2),
      resnet(11, 14, 256, 512, 1, 2),
      resnet(12, 7, 512, 512, 3, 1),
  };
  return w;
}

const Workload& find_workload(const std::string& name) {
  for (const Workload& w : all_workloads())
    if (w.name == name) return w;
  throw NotFoundError("unknown workload '" + name + "' (`basin workloads` lists them)");
}

}  // namespace basin::ops
