#!/usr/bin/python3
"""bench/networks: whole networks at batch 1 against LibTorch in the same run.

For each network: its untuned latency (every task on its first sketch's default
configuration) and LibTorch's (the same Graph run op by op with LibTorch's kernels:
oneDNN and OpenBLAS), both from one `basin compare`; then `basin tune` for --budget
(the task scheduler spreads it over the network's tasks, from an empty records file);
then `basin compare --records` for the tuned latency, LibTorch's again, and the largest
error against LibTorch. Both compares time with the full protocol (warm-up, 5 rounds of
at least 200 ms, the minimum), on every core for both.

Writes results.json and table.md to --out, and prints the table.

    /usr/bin/python3 bench/networks.py [--networks resnet18,resnet50,mobilenet_v2,bert_base]
        [--budget 10m] [--strategy gradient] [--out DIR] [--basin build/bin/basin]
"""
import argparse
import json
import os
import subprocess
import sys
import time

from machine import cpu_model

NETWORKS = ["resnet18", "resnet50", "mobilenet_v2", "bert_base"]


def basin_json(cmd):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 4):  # 4: tune ended with a task without a program
        raise SystemExit(f"bench/networks: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    j = json.loads(p.stdout)
    j["_wall_seconds"] = time.time() - t0
    return j


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--networks", default=",".join(NETWORKS))
    ap.add_argument("--budget", default="10m", help="tuning time per network (90s, 10m)")
    ap.add_argument("--strategy", default="gradient")
    ap.add_argument("--out", default="bench-results/networks")
    ap.add_argument("--basin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin", "basin"))
    ap.add_argument("--table-from", metavar="RESULTS_JSON", help="only rebuild table.md from an earlier results.json")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.table_from:
        with open(a.table_from) as f:
            j = json.load(f)
        write_table(a.out, j["machine"], j["budget"], j["strategy"], j["results"])
        return
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    print(f"bench/networks on {machine['cpu']}, {machine['cores']} cores; budget {a.budget} per network, "
          f"strategy {a.strategy}", file=sys.stderr)
    results = []
    for net in a.networks.split(","):
        model = net if net.endswith(".onnx") else f"zoo:{net}"
        records = os.path.join(a.out, f"{net.replace('/', '_')}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(records + suffix):
                os.remove(records + suffix)
        print(f"[{net}] untuned compare", file=sys.stderr)
        untuned = basin_json([a.basin, "compare", model, "--json", "--quiet"])
        print(f"[{net}] tune for {a.budget}", file=sys.stderr)
        tuned_run = basin_json([a.basin, "tune", model, "--budget", a.budget, "--strategy", a.strategy,
                                "--records", records, "--json", "--quiet"])
        print(f"[{net}] tuned compare", file=sys.stderr)
        tuned = basin_json([a.basin, "compare", model, "--records", records, "--json", "--quiet"])
        # LibTorch is timed in both compares; the peer is its faster time.
        torch_us = min(untuned["torch_latency_us"], tuned["torch_latency_us"])
        r = {
            "network": net,
            "tasks": tuned["tasks"],
            "untuned_us": untuned["latency_us"],
            "torch_us_untuned_run": untuned["torch_latency_us"],
            "torch_us_tuned_run": tuned["torch_latency_us"],
            "tuned_us": tuned["latency_us"],
            "torch_us": torch_us,
            "speedup_vs_torch": torch_us / tuned["latency_us"],
            "max_abs_error": tuned["max_abs_error"],
            "max_rel_error": tuned["max_rel_error"],
            "untuned_tasks_after_tuning": len(tuned["untuned_tasks"]),
            "tune": {k: tuned_run[k] for k in ("trials", "measured", "search_seconds", "overhead_fraction",
                                                "measure_seconds", "propose_seconds", "update_seconds",
                                                "setup_seconds", "estimated_latency_us", "tasks_without_program",
                                                "curve")},
        }
        results.append(r)
        print(f"[{net}] untuned {r['untuned_us']:.0f} us, tuned {r['tuned_us']:.0f} us, LibTorch {r['torch_us']:.0f} us "
              f"(speedup {r['speedup_vs_torch']:.2f}x), max rel error {r['max_rel_error']:.2g}", file=sys.stderr)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"machine": machine, "budget": a.budget, "strategy": a.strategy, "results": results}, f, indent=1)

    write_table(a.out, machine, a.budget, a.strategy, results)


def write_table(out, machine, budget, strategy, results):
    lines = [f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['date']}. "
             f"Tuning: {strategy}, {budget} per network, from empty records. LibTorch: the faster of its "
             "two timings (untuned and tuned compares).", "",
             "| network | tasks | untuned (ms) | tuned (ms) | LibTorch (ms) | speedup vs LibTorch | max rel. error | trials | overhead | untuned tasks left |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        t = r["tune"]
        lines.append(f"| {r['network']} | {r['tasks']} | {r['untuned_us'] / 1e3:.1f} | {r['tuned_us'] / 1e3:.2f} | "
                     f"{r['torch_us'] / 1e3:.2f} | {r['speedup_vs_torch']:.2f} | {r['max_rel_error']:.1e} | "
                     f"{t['trials']} | {100 * t['overhead_fraction']:.0f}% | {r['untuned_tasks_after_tuning']} |")
    met = [r["network"] for r in results if r["speedup_vs_torch"] > 1.0]
    lines += ["", f"Faster than LibTorch: {len(met)} of {len(results)} ({', '.join(met) if met else 'none'}). "
              f"Errors within 1e-3: {sum(r['max_rel_error'] <= 1e-3 for r in results)} of {len(results)}."]
    table = "\n".join(lines)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
