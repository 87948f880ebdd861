#!/usr/bin/env python3
"""PyTorch's latency for one of basin's zoo networks on GPU 0: eager and torch.compile,
each with TF32 on (cuDNN and cuBLAS) and off (exact FP32), and with --precisions fp16 or
bf16 under torch.autocast of that type (FP32 weights and input, as basin's), batch 1,
the fastest of --repeat calls after a warm-up (each call synchronized). Prints one JSON
object.

The networks are PyTorch's own modules with random weights: torchvision's resnet18, and
nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True),
which zoo:transformer_layer builds the same way. Needs PyTorch with CUDA (torchvision for
resnet18); a failing torch.compile is reported in the JSON, not raised.

    python3 bench/peers/gpu_network.py --model resnet18|transformer_layer [--repeat 50]
        [--modes eager,compile] [--precisions tf32,fp32]
"""
import argparse
import json
import sys
import time


def build(name, torch):
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18().eval(), torch.randn(1, 3, 224, 224)
    if name == "transformer_layer":
        m = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True).eval()
        return m, torch.randn(1, 64, 256)
    raise SystemExit(f"gpu_network: unknown model '{name}' (resnet18, transformer_layer)")


def fastest_ms(fn, torch, repeat):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--precisions", default="tf32,fp32", help="of tf32, fp32, fp16, bf16")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print(json.dumps({"model": args.model, "error": "no GPU visible to PyTorch"}))
        return 1
    model, x = build(args.model, torch)
    model, x = model.cuda(), x.cuda()
    out = {"model": args.model, "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    for prec in args.precisions.split(","):
        tf32 = prec == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True
        half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(prec)
        for mode in args.modes.split(","):
            key = f"{mode}_{prec}_ms"
            try:
                with torch.no_grad():
                    if mode == "eager":
                        fn = lambda: model(x)
                    elif mode == "compile":
                        torch._dynamo.reset()
                        compiled = torch.compile(model)
                        fn = lambda: compiled(x)
                    else:
                        raise ValueError(f"unknown mode {mode}")
                    if half is not None:
                        exact = fn

                        def fn():
                            with torch.autocast("cuda", dtype=half):
                                return exact()
                    out[key] = round(fastest_ms(fn, torch, args.repeat), 4)
            except Exception as e:  # a peer that cannot run is reported, not fatal
                out[key] = None
                out[f"{mode}_{prec}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
