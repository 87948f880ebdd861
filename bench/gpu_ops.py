#!/usr/bin/env python3
"""bench/gpu_ops: basin's tuned CUDA kernels against PyTorch's (cuBLAS, cuDNN) on one GPU.

For each workload: `basin tune-op --target cuda` tunes it (each strategy of --strategies,
from an empty records file, the same trial budget), then the best program is timed again
with `basin op --target cuda --config BEST` (CUDA events, the L2 flushed before every
launch) and PyTorch's kernel is timed in this process the same way: TF32 on (cuBLAS's
and cuDNN's tensor cores) and off (exact FP32), and at --precision fp16 or bf16 under
torch.autocast of that type too (FP32 tensors, as basin's: the casts are in the time),
cuDNN's autotuner on. basin tunes at --precision (tf32, fp16, bf16: its tensor-core
sketches too; fp32: exact programs only); the speedup is against PyTorch at the same
precision. Needs a GPU, a built basin with
NVRTC, and PyTorch with CUDA.

Writes to --out: results.json (every run with its tuning curve) and table.md.

    python3 bench/gpu_ops.py [--workloads gemm-4096,resnet18-c1,...] [--strategies gradient]
        [--trials 1000] [--seed 1] [--estimator mlp] [--precision tf32|fp32|fp16|bf16] [--basin build/bin/basin]
        [--out bench-gpu]

The search-efficiency comparison of the issue: --workloads resnet18-c6,resnet18-c9
--strategies gradient,annealing,evolutionary,random.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

DEFAULT_WORKLOADS = ["gemm-4096"] + [f"resnet18-c{i}" for i in range(1, 13)]


def run_json(cmd, ok=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.strip() or p.stdout.strip()}")
    return json.loads(p.stdout)


def torch_peer(op, params, flush_l2, precision, rounds=5, min_ms=200.0):
    """PyTorch's kernel for the workload at a precision (tf32, fp32, or fp16 and bf16 by
    autocast), timed like basin's: events, L2 flush per launch."""
    import torch
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    p = {k: int(v) if v.lstrip("-").isdigit() else v for k, v in params.items()}
    if op == "matmul":
        a = torch.randn(p["M"], p["K"], device=dev)
        b = torch.randn(p["K"], p["N"], device=dev)
        fn = lambda: torch.matmul(a, b)
    elif op == "dense":
        x = torch.randn(p["M"], p["K"], device=dev)
        w = torch.randn(p["N"], p["K"], device=dev)
        fn = lambda: torch.nn.functional.linear(x, w)
    elif op == "conv2d":
        x = torch.randn(p.get("batch", 1), p["in_channels"], p["height"], p["width"], device=dev)
        k = p["kernel"]
        w = torch.randn(p["out_channels"], p["in_channels"] // p.get("groups", 1), k, k, device=dev)
        fn = lambda: torch.nn.functional.conv2d(x, w, stride=p.get("stride", 1), padding=p.get("padding", 0),
                                                 dilation=p.get("dilation", 1), groups=p.get("groups", 1))
    else:
        raise ValueError(f"no PyTorch peer for {op}")
    if precision in ("fp16", "bf16"):
        exact = fn
        half = torch.float16 if precision == "fp16" else torch.bfloat16

        def fn():
            with torch.autocast("cuda", dtype=half):
                return exact()
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size if hasattr(torch.cuda.get_device_properties(dev), "L2_cache_size") else 50 << 20
    flush = torch.empty(max(2 * l2, 8 << 20), dtype=torch.uint8, device=dev)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def span(n):
        total = 0.0
        for i in range(n if flush_l2 else 1):
            if flush_l2:
                flush.fill_(i & 255)
            start.record()
            for _ in range(1 if flush_l2 else n):
                fn()
            stop.record()
            stop.synchronize()
            total += start.elapsed_time(stop)
        return total

    for _ in range(3):
        span(1)
    one = max(span(1), 1e-4)
    n = max(1, min(1000 if flush_l2 else 100000, int(min_ms / one)))
    per_call = sorted(span(n) * 1e3 / n for _ in range(rounds))
    return {"min_us": per_call[0], "median_us": per_call[len(per_call) // 2], "device": torch.cuda.get_device_name(dev),
            "torch": torch.__version__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    ap.add_argument("--strategies", default="gradient")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--estimator", default="", help="tune-op's --estimator (default: each strategy's own)")
    ap.add_argument("--basin", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "basin"))
    ap.add_argument("--out", default="bench-gpu")
    ap.add_argument("--no-flush", action="store_true", help="time without flushing the L2 (both sides)")
    ap.add_argument("--precision", default="tf32", choices=["tf32", "fp32", "fp16", "bf16"])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    for w in args.workloads.split(","):
        for strategy in args.strategies.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                records = os.path.join(tmp, "records.db")
                t = run_json([args.basin, "tune-op", "--workload", w, "--target", "cuda", "--strategy", strategy,
                              "--trials", str(args.trials), "--seed", str(args.seed), "--records", records,
                              "--precision", args.precision, "--json", "--quiet"] +
                             (["--estimator", args.estimator] if args.estimator else []))
                row = {"workload": w, "strategy": strategy, "precision": args.precision, "trials": t["trials"],
                       "errors": t["errors"], "best_sketch": (t.get("best_config") or {}).get("sketch"),
                       "search_seconds": t["search_seconds"], "overhead_fraction": t["overhead_fraction"],
                       "curve": t["curve"]}
                if t.get("best_config"):
                    cfg = os.path.join(tmp, "best.json")
                    with open(cfg, "w") as f:
                        json.dump(t["best_config"], f)
                    o = run_json([args.basin, "op", "--workload", w, "--target", "cuda", "--config", cfg,
                                  "--precision", args.precision, "--json"])
                    row.update({"op": o["op"], "params": o["params"], "basin_us": o["latency_us"],
                                "verified": o["verified"], "device": o.get("device")})
                    for precision in sorted({"tf32", "fp32", args.precision}):
                        peer = torch_peer(o["op"], o["params"], not args.no_flush, precision)
                        row[f"torch_{precision}_us"] = peer["min_us"]
                        row["torch_version"] = peer["torch"]
                    row["torch_us"] = row[f"torch_{args.precision}_us"]
                    row["speedup"] = row["torch_us"] / o["latency_us"]
                results.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    nan = float("nan")
    lines = ["| workload | strategy | precision | best sketch | trials | search s | basin us | PyTorch same precision us | "
             "PyTorch TF32 us | PyTorch FP32 us | PyTorch / basin (same precision) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['workload']} | {r['strategy']} | {r['precision']} | {r.get('best_sketch')} | "
                     f"{r['trials']} | {r['search_seconds']:.0f} | {r.get('basin_us', nan):.1f} | "
                     f"{r.get('torch_us', nan):.1f} | {r.get('torch_tf32_us', nan):.1f} | "
                     f"{r.get('torch_fp32_us', nan):.1f} | {r.get('speedup', nan):.2f}x |")
    conv = [r["speedup"] for r in results if r["workload"].startswith("resnet18-c") and "speedup" in r]
    if conv:
        lines.append(f"\nresnet18 C1-C12 geometric mean, PyTorch (cuDNN) / basin: "
                     f"{math.exp(sum(math.log(s) for s in conv) / len(conv)):.2f}x over {len(conv)} runs")
    device = next((r.get("device") for r in results if r.get("device")), "?")
    lines.append(f"\nGPU: {device}; PyTorch {next((r.get('torch_version') for r in results if r.get('torch_version')), '?')}")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
