#!/usr/bin/python3
"""bench/search_network: the search strategies on whole networks, from empty records.

For each model and seed, each strategy tunes the whole network (`basin tune zoo:MODEL
--strategy S --budget B`, the task scheduler spreading the budget) from an empty records
file, the strategies one after another in an order that rotates with the seed, so that
none always meets the host's same phase. Each run's curve is the network's estimated
latency (the tasks' best programs weighted by their launches) against tuning seconds.
Each run is then compiled, and the compiled networks of a model and seed are timed in
turn (--rounds rounds of `basin run --repeat`, the fastest of each round; the median
of the rounds kept): the measured figure that compares the strategies' results.

Writes to --out: results.json (every run, its curve), one PNG per model (estimated
latency against seconds, every run), and table.md: per run the final estimate, the
measured latency, the seconds to come within 5% of the best final estimate of any
strategy (of that model and seed), and each strategy's measured latency against the
gradient search's.

    /usr/bin/python3 bench/search_network.py [--models resnet18,mobilenet_v2,FILE.onnx]
        [--strategies gradient,annealing,evolutionary] [--seeds 1] [--budget 3m]
        [--rounds 3] [--repeat 20] [--out DIR]
    /usr/bin/python3 bench/search_network.py --from DIR/results.json --out DIR   # table and plots again

Any strategy spec `basin strategies` lists works (gradient:sources=0,
annealing:sources=1: the fair grid on networks).
"""
import argparse
import json
import os
import subprocess
import sys
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, vector_isa  # noqa: E402

MODELS = ["resnet18", "mobilenet_v2", "bert_base"]
STRATEGIES = ["gradient", "annealing", "evolutionary"]


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    return json.loads(p.stdout)


def safe(spec):
    return spec.replace(":", "_").replace("=", "-")


def model_arg(model):
    """A zoo name (zoo:NAME) or an ONNX file as it is."""
    return model if model.endswith(".onnx") else f"zoo:{model}"


def model_name(model):
    return os.path.splitext(os.path.basename(model))[0] if model.endswith(".onnx") else model


def tune_and_compile(basin, model, strategy, seed, budget, out):
    stem = os.path.join(out, f"{model_name(model)}.{seed}.{safe(strategy)}")
    records = stem + ".db"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(records + suffix):
            os.remove(records + suffix)
    j = run_json([basin, "tune", model_arg(model), "--strategy", strategy, "--seed", str(seed), "--budget", budget,
                  "--records", records, "--json", "--quiet"])
    compiled = stem + ".basin"
    subprocess.run([basin, "compile", model_arg(model), "--records", records, "-o", compiled, "--quiet"], check=True,
                   capture_output=True)
    return {"model": model_name(model), "strategy": strategy, "seed": seed, "budget": budget, "compiled": compiled,
            "trials": j["trials"], "search_seconds": j["search_seconds"], "overhead": j["overhead_fraction"],
            "estimated_us": j["estimated_latency_us"], "curve": j["curve"]}


def time_in_turn(basin, runs, rounds, repeat):
    """Each compiled network timed in turn, `rounds` times; the median of each's fastest."""
    seen = {r["strategy"]: [] for r in runs}
    for _ in range(rounds):
        for r in runs:
            j = run_json([basin, "run", r["compiled"], "--repeat", str(repeat), "--json"])
            seen[r["strategy"]].append(j["latency_us"])
    for r in runs:
        r["measured_us"] = median(seen[r["strategy"]])
        r["measured_rounds"] = seen[r["strategy"]]


def seconds_to(curve, target):
    for seconds, _, est in curve:
        if est is not None and est > 0 and est <= target:
            return seconds
    return None


def table(results, host):
    lines = [f"Machine: {host}. Each run from empty records; estimated: the tasks' best programs "
             "weighted by their launches; measured: the compiled network timed with the others of its "
             "model and seed in turn (median of the rounds' fastest).", "",
             "| model | seed | strategy | budget | trials | estimated (us) | measured (us) | "
             "seconds to 5% of the best estimate | overhead | measured / gradient's |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    groups = {}
    for r in results:
        groups.setdefault((r["model"], r["seed"]), []).append(r)
    for (model, seed), runs in groups.items():
        best = min(r["estimated_us"] for r in runs if r["estimated_us"])
        grad = next((r["measured_us"] for r in runs if r["strategy"] == "gradient"), None)
        for r in runs:
            reach = seconds_to(r["curve"], best * 1.05)
            ratio = f"{r['measured_us'] / grad:.3f}" if grad else "-"
            lines.append(f"| {model} | {seed} | {r['strategy']} | {r['budget']} | {r['trials']} | "
                         f"{r['estimated_us']:.1f} | {r['measured_us']:.1f} | "
                         f"{'-' if reach is None else f'{reach:.0f}'} | {100 * r['overhead']:.1f}% | {ratio} |")
    return "\n".join(lines) + "\n"


def plot(results, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing: no plots", file=sys.stderr)
        return
    for model in dict.fromkeys(r["model"] for r in results):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in (r for r in results if r["model"] == model):
            pts = [(s, e / 1000) for s, _, e in r["curve"] if e and e > 0]
            if pts:
                ax.step([p[0] for p in pts], [p[1] for p in pts], where="post",
                        label=f"{r['strategy']} (seed {r['seed']})")
        ax.set_xlabel("tuning seconds")
        ax.set_ylabel("estimated network latency (ms)")
        ax.set_title(f"{model}: the strategies from empty records")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"{model}.png"), dpi=110)
        plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--budget", default="3m")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--basin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin",
                                                  "basin"))
    ap.add_argument("--out", default="bench-results/search_network")
    ap.add_argument("--from", dest="from_json")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    host = f"{cpu_model()}, {os.cpu_count()} cores, {vector_isa()}"
    if a.from_json:
        with open(a.from_json) as f:
            results = json.load(f)["runs"]
    else:
        if not os.path.exists(a.basin):
            sys.exit(f"no basin at {a.basin}: build it first (scripts/test) or pass --basin")
        strategies = a.strategies.split(",")
        results = []
        for model in a.models.split(","):
            for k, seed in enumerate(int(s) for s in a.seeds.split(",")):
                order = strategies[k % len(strategies):] + strategies[:k % len(strategies)]
                runs = []
                for strategy in order:
                    r = tune_and_compile(a.basin, model, strategy, seed, a.budget, a.out)
                    print(f"{model} seed {seed} {strategy}: estimated {r['estimated_us']:.1f} us after "
                          f"{r['trials']} trials, {r['search_seconds']:.0f} s", flush=True)
                    runs.append(r)
                time_in_turn(a.basin, runs, a.rounds, a.repeat)
                for r in runs:
                    print(f"{model} seed {seed} {r['strategy']}: measured {r['measured_us']:.1f} us", flush=True)
                results.extend(runs)
                with open(os.path.join(a.out, "results.json"), "w") as f:
                    json.dump({"host": host, "runs": results}, f, indent=1)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table(results, host))
    plot(results, a.out)
    print(table(results, host))


if __name__ == "__main__":
    main()
