#!/usr/bin/env python3
"""bench/gpu_networks: basin's zoo networks on GPU 0 against PyTorch eager and torch.compile.

For each model: compiled untuned and run (`basin compile|run --target cuda`), tuned for
--budget from an empty records file (`basin tune --target cuda --precision P`), compiled
with its records and run again (the fastest of --repeat runs), then PyTorch's own module
timed the same way by bench/peers/gpu_network.py (eager and torch.compile, TF32 on and
off, and under autocast at --precision fp16 or bf16). The ratio is PyTorch's fastest at basin's precision over basin's tuned latency.
Writes OUT/networks.json and OUT/networks.md; `--rehearse` runs every step that needs no
GPU (the compilations for --arch) and says what it left for the GPU.

    python3 bench/gpu_networks.py [--models resnet18,transformer_layer] [--budget 90s]
        [--precision tf32|fp32|fp16|bf16] [--basin build/bin/basin] [--out gpu-check] [--rehearse --arch sm_90]
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_ops import run_json  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18,transformer_layer")
    ap.add_argument("--budget", default="90s")
    ap.add_argument("--precision", default="tf32", choices=["tf32", "fp32", "fp16", "bf16"])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--basin", default=os.path.join(HERE, "..", "build", "bin", "basin"))
    ap.add_argument("--estimator", default="", help="basin tune's --estimator")
    ap.add_argument("--out", default="gpu-check")
    ap.add_argument("--rehearse", action="store_true", help="no GPU: compile for --arch, run nothing")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for model in args.models.split(","):
        row = {"model": model, "precision": args.precision, "budget": args.budget}
        t0 = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            net, records = os.path.join(tmp, "net.basin"), os.path.join(tmp, "records.db")
            try:
                if args.rehearse:
                    c = run_json([args.basin, "compile", f"zoo:{model}", "--target", "cuda", "--arch", args.arch,
                                  "--precision", args.precision, "-o", net, "--json"])
                    row.update({"rehearsal": f"compiled for {args.arch}: {c.get('kernels')} kernels",
                                "left_for_the_gpu": ["run untuned", f"tune {args.budget}", "run tuned",
                                                     "PyTorch eager and torch.compile"]})
                else:
                    run_json([args.basin, "compile", f"zoo:{model}", "--target", "cuda", "--precision",
                              args.precision, "-o", net, "--json"])
                    r = run_json([args.basin, "run", net, "--target", "cuda", "--repeat", str(args.repeat), "--json"])
                    row["basin_untuned_ms"] = r["latency_us"] / 1e3
                    # Exit status 4: a task ended without a program (compiled with its default).
                    t = run_json([args.basin, "tune", f"zoo:{model}", "--target", "cuda", "--precision",
                                  args.precision, "--budget", args.budget, "--records", records, "--seed", "1",
                                  "--json", "--quiet"] + (["--estimator", args.estimator] if args.estimator else []),
                                 ok=(0, 4))
                    row["tasks_without_program"] = sum(1 for x in t.get("tasks", []) if not x.get("best_latency_us"))
                    row.update({"trials": t.get("trials"), "search_seconds": t.get("search_seconds")})
                    run_json([args.basin, "compile", f"zoo:{model}", "--target", "cuda", "--precision",
                              args.precision, "--records", records, "-o", net, "--json"])
                    r = run_json([args.basin, "run", net, "--target", "cuda", "--repeat", str(args.repeat), "--json"])
                    row["basin_tuned_ms"] = r["latency_us"] / 1e3
                    row["untuned_tasks_after_tuning"] = len(r.get("untuned_tasks", []))
                    peer = run_json([sys.executable, os.path.join(HERE, "peers", "gpu_network.py"), "--model", model,
                                     "--repeat", str(args.repeat),
                                     "--precisions", ",".join(sorted({"tf32", "fp32", args.precision}))])
                    row["peer"] = peer
                    same = [v for k, v in peer.items() if k.endswith(f"_{args.precision}_ms") and v]
                    if same:
                        row["best_peer_ms"] = min(same)
                        row["best_peer_over_basin"] = min(same) / row["basin_tuned_ms"]
            except Exception as e:  # reported in the results, the next model still runs
                row["error"] = str(e)
        row["seconds"] = round(time.time() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "networks.json"), "w") as f:
        json.dump(rows, f, indent=1)
    nan = float("nan")
    lines = ["| model | precision | budget | basin untuned ms | basin tuned ms | eager ms | torch.compile ms | "
             "best peer / basin |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r.get("peer", {})
        lines.append(f"| {r['model']} | {r['precision']} | {r['budget']} | {r.get('basin_untuned_ms', nan):.3f} | "
                     f"{r.get('basin_tuned_ms', nan):.3f} | {p.get('eager_' + r['precision'] + '_ms') or nan:.3f} | "
                     f"{p.get('compile_' + r['precision'] + '_ms') or nan:.3f} | "
                     f"{r.get('best_peer_over_basin', nan):.2f}x |" + (f" {r['error'][:200]}" if "error" in r else ""))
    with open(os.path.join(args.out, "networks.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
