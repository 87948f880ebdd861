"""Exports the model families of basin's coverage benchmark to ONNX, with both of
torch 2.x's exporters, random weights (seed 0) and nothing downloaded (Hugging Face
models are built from config objects). For each model and exporter it writes
NAME.EXPORTER.onnx, the inputs as NAME.in0.npy, NAME.in1.npy ..., PyTorch's output as
NAME.torch.npy and ONNX Runtime's as NAME.EXPORTER.ort.npy, and prints one JSON line
per export (what failed is reported, not raised).

Run with the peers' Python (bench/peers/setup.sh):

    .cache/peers/bin/python bench/models/export.py OUT_DIR [--set small|full] [--only NAME,...]
        [--exporters legacy,dynamo,default]

Exporters: legacy (TorchScript, opset 17), dynamo (opset 18), default (torch.onnx.export
with no options: torch 2.x's choice of exporter and opset, what a user gets first).
"""
import argparse
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")

VISION = ["resnet50", "resnext50_32x4d", "wide_resnet50_2", "densenet121", "inception_v3", "mobilenet_v3_small",
          "mobilenet_v3_large", "mnasnet1_0", "regnet_y_400mf", "efficientnet_v2_s", "convnext_tiny", "alexnet",
          "vgg11", "vit_b_16", "swin_t", "maxvit_t", "googlenet", "squeezenet1_0", "resnet18", "mobilenet_v2",
          "efficientnet_b0", "shufflenet_v2_x1_0"]
SEGMENTATION = ["fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
TEXT = ["bert", "distilbert", "roberta", "gpt2", "llama", "t5_encoder", "t5_decoder"]
FULL = VISION + SEGMENTATION + TEXT
# Small versions of each family, fast enough for CI.
SMALL = ["tiny_bert", "tiny_distilbert", "tiny_roberta", "tiny_gpt2", "tiny_llama", "tiny_t5_encoder",
         "tiny_t5_decoder", "tiny_vit", "tiny_swin", "tiny_cnn_ceil"]


def randomize_batch_norm(m):
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
            n = mod.num_features
            mod.running_mean.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
            mod.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            if mod.weight is not None:
                mod.weight.data.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                mod.bias.data.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)


class Outputs0(torch.nn.Module):
    """The first output of a model that returns a tuple, dict or ModelOutput."""

    def __init__(self, m, key=None):
        super().__init__()
        self.m, self.key = m, key

    def forward(self, *args):
        y = self.m(*args)
        if isinstance(y, dict):
            return y[self.key] if self.key else next(iter(y.values()))
        if isinstance(y, (tuple, list)):
            return y[0]
        if hasattr(y, "last_hidden_state"):
            return y.last_hidden_state
        return y


class TinyCnnCeil(torch.nn.Module):
    """Pooling with ceil_mode (googlenet's and squeezenet's), a channel split and concat."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(4, 8, 1)
        self.p1 = torch.nn.MaxPool2d(3, 2, ceil_mode=True)
        self.p2 = torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        y = self.p1(torch.relu(self.c1(x)))
        a, b = y.split(4, dim=1)
        return torch.cat([self.p2(self.c2(a)), self.p2(b.flip(-1))], 1)


def text_model(name):
    import transformers as tf
    tiny = name.startswith("tiny_")
    base = name[5:] if tiny else name
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=256,
                 max_position_embeddings=32)
    seq = 16 if tiny else 128
    if base == "bert":
        cfg = tf.BertConfig(**(small if tiny else {}))
        m = tf.BertModel(cfg)
    elif base == "roberta":
        cfg = tf.RobertaConfig(**(small if tiny else {}))
        m = tf.RobertaModel(cfg)
    elif base == "distilbert":
        cfg = tf.DistilBertConfig(**(dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=256,
                                          max_position_embeddings=32) if tiny else {}))
        m = tf.DistilBertModel(cfg)
    elif base == "gpt2":
        cfg = tf.GPT2Config(**(dict(n_embd=32, n_layer=2, n_head=4, vocab_size=256, n_positions=32) if tiny
                               else dict(n_layer=12)))
        m = tf.GPT2Model(cfg)
    elif base == "llama":
        kw = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=64, vocab_size=256) if tiny else dict(
            hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
            intermediate_size=1376, vocab_size=32000)
        m = tf.LlamaModel(tf.LlamaConfig(**kw))
    elif base in ("t5_encoder", "t5_decoder"):
        kw = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=256) \
            if tiny else dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8)
        cfg = tf.T5Config(**kw)
        if base == "t5_encoder":
            m = tf.T5EncoderModel(cfg)
        else:
            full = tf.T5Model(cfg).eval()

            class Decoder(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.d = full.decoder

                def forward(self, ids, enc):
                    return self.d(input_ids=ids, encoder_hidden_states=enc).last_hidden_state
            g = torch.Generator().manual_seed(0)
            ids = torch.randint(0, cfg.vocab_size, (1, seq), generator=g)
            enc = torch.randn(1, seq, cfg.d_model, generator=g)
            return Decoder().eval(), (ids, enc)
    else:
        raise ValueError(name)
    m.eval()
    if hasattr(m.config, "_attn_implementation"):
        m.config._attn_implementation = "eager"
    vocab = getattr(m.config, "vocab_size", 1000)
    ids = torch.randint(0, vocab, (1, seq), generator=torch.Generator().manual_seed(0))
    return Outputs0(m), (ids,)


def vision_model(name):
    import torchvision
    tiny = {
        "tiny_vit": lambda: torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                                                 hidden_dim=32, mlp_dim=64, num_classes=10),
        "tiny_swin": lambda: torchvision.models.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                                                                num_heads=[2, 4], window_size=[4, 4], num_classes=10),
        "tiny_cnn_ceil": TinyCnnCeil,
    }
    if name in tiny:
        m = tiny[name]()
        size = 32 if name != "tiny_cnn_ceil" else 17
    elif name in SEGMENTATION:
        m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, aux_loss=False)
        m = Outputs0(m, "out")
        size = 224
    else:
        kw = {"aux_logits": False, "init_weights": True} if name in ("inception_v3", "googlenet") else {}
        m = getattr(torchvision.models, name)(weights=None, **kw)
        size = 299 if name == "inception_v3" else 224
    with torch.no_grad():
        randomize_batch_norm(m)
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    return m.eval(), (x,)


def build(name):
    torch.manual_seed(0)
    base = name[5:] if name.startswith("tiny_") else name
    if base in [t for t in TEXT] or name in ("tiny_t5_encoder", "tiny_t5_decoder"):
        return text_model(name)
    return vision_model(name)


def export(m, args, path, exporter):
    names = [f"in{i}" for i in range(len(args))]
    if exporter == "legacy":
        torch.onnx.export(m, args, path, dynamo=False, opset_version=17, input_names=names, output_names=["out"])
    elif exporter == "default":  # what a user gets from torch.onnx.export without options
        torch.onnx.export(m, args, path, input_names=names, output_names=["out"])
    else:
        torch.onnx.export(m, args, path, dynamo=True, opset_version=18, input_names=names, output_names=["out"],
                          external_data=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--set", choices=["small", "full"], default="small")
    ap.add_argument("--only", default="")
    ap.add_argument("--exporters", default="legacy,dynamo")
    ap.add_argument("--refs-only", action="store_true",
                    help="write only the ONNX files, inputs and NAME.EXPORTER.ref.npy (ONNX Runtime's output, or "
                         "PyTorch's where ONNX Runtime is more than 1e-4 from it): the committed CI set")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import onnxruntime as ort
    names = a.only.split(",") if a.only else (SMALL if a.set == "small" else FULL)
    torch.set_num_threads(2)
    # The fused attention fast path has no ONNX export (torchvision's ViT in eval mode).
    torch.backends.mha.set_fastpath_enabled(False)
    for name in names:
        try:
            m, args = build(name)
            with torch.no_grad():
                ref = m(*args)
            if not a.refs_only:
                np.save(os.path.join(a.out, f"{name}.torch.npy"), ref.detach().numpy())
            for i, t in enumerate(args):
                np.save(os.path.join(a.out, f"{name}.in{i}.npy"), t.numpy())
        except Exception as e:
            print(json.dumps({"model": name, "error": "build: " + repr(e)[:500]}), flush=True)
            continue
        for exporter in a.exporters.split(","):
            rec = {"model": name, "exporter": exporter}
            path = os.path.join(a.out, f"{name}.{exporter}.onnx")
            t0 = time.time()
            try:
                with torch.no_grad():
                    export(m, args, path, exporter)
                rec["export_s"] = round(time.time() - t0, 1)
                so = ort.SessionOptions()
                so.intra_op_num_threads = 2
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                feed = {i.name: t.numpy() for i, t in zip(sess.get_inputs(), args)}
                y = sess.run(None, feed)[0]
                r = ref.detach().numpy()
                rec["ort_vs_torch"] = float(np.abs(y - r).max() / max(np.abs(r).max(), 1e-6))
                if a.refs_only:
                    np.save(os.path.join(a.out, f"{name}.{exporter}.ref.npy"), y if rec["ort_vs_torch"] <= 1e-4 else r)
                else:
                    np.save(os.path.join(a.out, f"{name}.{exporter}.ort.npy"), y)
            except Exception as e:
                rec["error"] = type(e).__name__ + ": " + str(e).strip().splitlines()[-1][:300] if str(e).strip() else repr(e)
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
