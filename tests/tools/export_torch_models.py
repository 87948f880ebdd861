#!/usr/bin/python3
"""Exports PyTorch models to ONNX for basin's import tests, with PyTorch's own outputs
as the reference: torchvision's resnet18 and mobilenet_v2 and a small transformer
block. Weights are random but fixed (seed 0); batch-norm statistics are randomized too,
so that the outputs are of order one rather than vanishing.

    /usr/bin/python3 export_torch_models.py OUT_DIR [NAME ...]

Writes OUT_DIR/NAME.onnx, NAME.input.npy and NAME.output.npy.
"""
import os
import sys

import numpy as np
import torch
import torchvision


class Block(torch.nn.Module):
    """A pre-norm transformer block: self-attention with 4 heads, a GELU MLP."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):  # x [S, D]
        s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(s, self.heads, self.hd).transpose(0, 1)
        k = k.reshape(s, self.heads, self.hd).permute(1, 2, 0)
        v = v.reshape(s, self.heads, self.hd).transpose(0, 1)
        a = torch.softmax(torch.matmul(q, k) / self.hd ** 0.5, dim=-1)
        x = x + self.proj(torch.matmul(a, v).transpose(0, 1).reshape(s, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def randomize_batch_norm(m):
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            n = mod.num_features
            mod.running_mean.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
            mod.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            mod.weight.data.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            mod.bias.data.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)


def build(name):
    torch.manual_seed(0)
    if name == "block":
        return Block().eval(), torch.randn(16, 64), 17
    m = getattr(torchvision.models, name)()
    with torch.no_grad():
        randomize_batch_norm(m)
    return m.eval(), torch.randn(1, 3, 224, 224), 13


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or ["resnet18", "mobilenet_v2", "block"]
    os.makedirs(out, exist_ok=True)
    for name in names:
        m, x, opset = build(name)
        with torch.no_grad():
            y = m(x)
        torch.onnx.export(m, x, os.path.join(out, name + ".onnx"), opset_version=opset,
                          input_names=["x"], output_names=["y"])
        np.save(os.path.join(out, name + ".input.npy"), x.numpy())
        np.save(os.path.join(out, name + ".output.npy"), y.numpy())
        print(f"{name}: output {tuple(y.shape)}, largest |y| {y.abs().max().item():.3g}")


if __name__ == "__main__":
    main()
