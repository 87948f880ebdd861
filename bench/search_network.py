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

With --peer metaschedule, TVM MetaSchedule's network tuning runs after basin's runs of
each model and seed (bench/peers/metaschedule_network.py with the peers' Python: the
model exported from PyTorch by bench/models/export.py, or the ONNX file, --peer-trials
programs in all, for each of --peer-seeds after every seed of basin's): its curve goes
into the plot, and its row into the table, its network timed by TVM's own evaluator (not
in turn with basin's: marked so).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, peer_json, python_problem, vector_isa  # noqa: E402

MODELS = ["resnet18", "mobilenet_v2", "bert_base"]
STRATEGIES = ["gradient", "annealing", "evolutionary"]
PEER_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".cache", "peers", "bin", "python")
# basin's zoo names that bench/models/export.py spells otherwise.
EXPORT_NAMES = {"bert_base": "bert"}


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
            "estimated_us": j["estimated_latency_us"], "curve": j["curve"],
            # Timings another process disturbed (repeated; kept disturbed): a run beside other work.
            "disturbed": j.get("disturbed", 0), "disturbed_kept": j.get("disturbed_kept", 0)}


def peer_available(python):
    """Why MetaSchedule's network tuning cannot run with `python` (None when it can)."""
    return python_problem(python, ["tvm", "tvm.s_tir.meta_schedule", "torch", "onnx"])


def run_metaschedule(python, model, seed, trials, out):
    """bench/peers/metaschedule_network.py on one model: its JSON, as a run of results.json."""
    path = os.path.join(out, f"{model_name(model)}.{seed}.metaschedule.json")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "metaschedule_network.py")
    arg = model if model.endswith(".onnx") else EXPORT_NAMES.get(model, model)
    cmd = [python, script, "--model", arg, "--trials", str(trials), "--seed", str(seed), "--out", path]
    t0 = time.time()
    j = peer_json(cmd, path, "bench/search_network")
    print(f"{model_name(model)} seed {seed} metaschedule: estimated {j['estimated_us']} us after {j['trials']} "
          f"trials, {j['search_seconds']:.0f} s; measured by TVM {j['measured_us']:.1f} us [{time.time() - t0:.0f} s]",
          flush=True)
    return {"model": model_name(model), "strategy": "metaschedule", "peer": True, "seed": seed,
            "budget": f"{trials} trials", "trials": j["trials"], "search_seconds": j["search_seconds"],
            "overhead": None, "estimated_us": j["estimated_us"], "measured_us": j["measured_us"],
            "curve": j["curve"], "tvm": j["tvm"], "target": j["target"]}


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
    peers = False
    for (model, seed), runs in groups.items():
        best = min((r["estimated_us"] for r in runs if r["estimated_us"]), default=None)
        grad = next((r["measured_us"] for r in runs if r["strategy"] == "gradient"), None)
        for r in runs:
            reach = seconds_to(r["curve"], best * 1.05) if best else None
            ratio = f"{r['measured_us'] / grad:.3f}" if grad else "-"
            est = "-" if not r["estimated_us"] else f"{r['estimated_us']:.1f}"
            overhead = "-" if r.get("overhead") is None else f"{100 * r['overhead']:.1f}%"
            mark = "¹" if r.get("peer") else ""
            peers |= bool(r.get("peer"))
            lines.append(f"| {model} | {seed} | {r['strategy']} | {r['budget']} | {r['trials']} | "
                         f"{est} | {r['measured_us']:.1f}{mark} | "
                         f"{'-' if reach is None else f'{reach:.0f}'} | {overhead} | {ratio} |")
    if peers:
        lines += ["", "¹ Timed by TVM's time evaluator after its run (the fastest of 20 runs of 10 calls), not in "
                  "turn with basin's networks; its estimate: each task's best weighted by its launches, once every "
                  "task has a measured program ('-': never, in its trials)."]
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


def save(out, host, results):
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"host": host, "runs": results}, f, indent=1)


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
    ap.add_argument("--peer", choices=["metaschedule"], help="TVM MetaSchedule's network tuning after basin's runs")
    ap.add_argument("--peer-trials", type=int, default=640, help="MetaSchedule's programs in all, per model and seed")
    ap.add_argument("--peer-seeds", default="1", help="the seeds MetaSchedule runs with, after basin's runs")
    ap.add_argument("--peer-python", default=PEER_PYTHON)
    a = ap.parse_args(argv)
    if a.peer_trials <= 0:
        ap.error("--peer-trials must be positive")
    os.makedirs(a.out, exist_ok=True)
    host = f"{cpu_model()}, {os.cpu_count()} cores, {vector_isa()}"
    if a.from_json:
        with open(a.from_json) as f:
            results = json.load(f)["runs"]
    else:
        if not os.path.exists(a.basin):
            sys.exit(f"no basin at {a.basin}: build it first (scripts/test) or pass --basin")
        if a.peer:
            why = peer_available(a.peer_python)
            if why:
                sys.exit(f"bench/search_network: --peer metaschedule: {why}")
        strategies = a.strategies.split(",")
        results = []
        for model in a.models.split(","):
            for k, seed in enumerate(int(s) for s in a.seeds.split(",")):
                order = strategies[k % len(strategies):] + strategies[:k % len(strategies)]
                runs = []
                for strategy in order:
                    r = tune_and_compile(a.basin, model, strategy, seed, a.budget, a.out)
                    print(f"{model} seed {seed} {strategy}: estimated {r['estimated_us']:.1f} us after "
                          f"{r['trials']} trials, {r['search_seconds']:.0f} s"
                          + (f", {r['disturbed']} timings disturbed by other work ({r['disturbed_kept']} at every try)"
                             if r["disturbed"] else ""), flush=True)
                    runs.append(r)
                time_in_turn(a.basin, runs, a.rounds, a.repeat)
                for r in runs:
                    print(f"{model} seed {seed} {r['strategy']}: measured {r['measured_us']:.1f} us", flush=True)
                results.extend(runs)
                save(a.out, host, results)
            # The peer after every seed of basin's: the longest runs last.
            for seed in (int(s) for s in a.peer_seeds.split(",") if a.peer):
                results.append(run_metaschedule(a.peer_python, model, seed, a.peer_trials, a.out))
                save(a.out, host, results)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table(results, host))
    plot(results, a.out)
    print(table(results, host))


if __name__ == "__main__":
    main()
