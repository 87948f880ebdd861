#!/usr/bin/python3
"""bench/search: search efficiency of the four strategies on the same space and measurer.

For each workload and seed, annealing (AutoTVM's method, XGBoost trees) tunes for
--trials programs; gradient, evolutionary and random then get the same trial budget
and stop early once they match annealing's best. Each run starts from an empty records
file. Afterwards each strategy's best program and LibTorch's kernel (oneDNN / OpenBLAS)
are timed again in the same process with the full protocol (basin tune-op --compare).

Writes to --out: results.json (every run, its curve), one PNG per workload (best latency
against seconds and against trials), and table.md: per strategy the trials and seconds
to come within 5% of the best any strategy found, the overhead share, the tuned latency
against LibTorch; then each strategy's ratios to annealing and the C1-C12 geometric mean.

    /usr/bin/python3 bench/search.py [--workloads resnet18-c2,gemm-1024] [--seeds 1]
        [--trials 1000] [--strategies gradient,annealing,evolutionary,random] [--threads N]
        [--interleave] [--peer metaschedule] [--out DIR]
    /usr/bin/python3 bench/search.py --from DIR/results.json --out DIR   # plots and table again
    /usr/bin/python3 bench/search.py --from DIR/results.json --out DIR --side-by-side

With --interleave, the strategies of a workload and seed tune at once in one process
(`basin tune-op --strategy annealing,gradient`): a round of each in turn, each to the full
budget, each strategy's seconds counting its own rounds. All meet the same phases of a
host whose speed moves over minutes, which separate runs do not. A strategy may carry
options (`basin strategies`), so that two variants of one are judged in one run, an A/B:
--strategies annealing,gradient,gradient:tile_slots=0 --interleave.

With --peer metaschedule, TVM MetaSchedule (apache-tvm in the peers' virtual environment,
bench/peers/setup.sh) tunes each workload too, on the same threads, with the same trial
budget or --peer-trials, by
bench/peers/metaschedule.py: its curve goes into the plots beside basin's, and the table
says how long each of basin's strategies took to reach MetaSchedule's final best and
MetaSchedule to reach theirs. MetaSchedule's best is timed by TVM's time evaluator, basin's
by basin's protocol: the two timers differ, so the table gives both figures as measured.

With the six specs of the fair grid among --strategies (gradient and gradient:sources=0,
annealing and annealing:sources=1, evolutionary and evolutionary:sources=1), the table
ends with the grid: each cell's best program against the fastest of its workload and
seed, and what the sources are worth to each strategy. --resume keeps the finished
workload and seed pairs of --out's results.json (the same machine, trials, threads and
interleaving) and runs the others, so that the grid accumulates over several sittings.

After each workload and seed, the strategies' best programs are timed again side by side
(alternating, 3 times each, with LibTorch): the host's speed can drift by tens of percent
between runs minutes apart, so only programs timed in turn compare. Then every program
that was any run's best at some point (tune-op's `bests`) is timed again, all in turn,
--retime times, and the ratios to annealing are judged on those re-timed curves too.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
from statistics import median, stdev

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, peer_json, python_problem, vector_isa  # noqa: E402

DEFAULT_WORKLOADS = [f"resnet18-c{i}" for i in range(1, 13)] + ["gemm-1024", "bert-768x3072"]
STRATEGIES = ["annealing", "gradient", "evolutionary", "random"]


def tune(basin, workload, strategy, seed, trials, records, stop_at=None, compare=False):
    """`basin tune-op`: its JSON. `strategy` may name several, comma-separated (interleaved)."""
    cmd = [basin, "tune-op", "--workload", workload, "--strategy", strategy, "--trials", str(trials),
           "--seed", str(seed), "--records", records, "--json", "--quiet"]
    if stop_at:
        cmd += ["--stop-at-latency", repr(stop_at)]
    if compare:
        cmd += ["--compare"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench/search: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def time_op(basin, workload, config_path, compare=False):
    """`basin op` on one configuration with the full protocol: its JSON."""
    cmd = [basin, "op", "--workload", workload, "--config", config_path, "--timing", "full", "--oracle", "never",
           "--json"] + (["--compare"] if compare else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench/search: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def side_by_side(basin, workload, configs, rounds=3):
    """Each strategy's best program (configs: strategy -> best_config), and LibTorch, timed with
    the full protocol, the strategies alternating, `rounds` times each: on a host whose speed
    drifts over minutes, programs timed at different times do not compare, programs timed in
    turn do. Returns strategy -> [latency per round], and LibTorch's latencies."""
    import tempfile
    out, torch = {s: [] for s in configs}, []
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for s, cfg in configs.items():
            paths[s] = os.path.join(d, f"{s}.json")
            with open(paths[s], "w") as f:
                json.dump(cfg, f)
        for _ in range(rounds):
            for s, path in paths.items():
                j = time_op(basin, workload, path, compare=True)
                out[s].append(j["latency_us"])
                torch.append(j["torch_latency_us"])
    return out, torch


def add_side_by_side(basin, results, workload, seed):
    """Times the best programs of one workload and seed side by side into their runs."""
    rs = [r for r in results["runs"] if r["workload"] == workload and r["seed"] == seed and r.get("best_config")]
    if len(rs) < 2:
        return
    times, torch = side_by_side(basin, workload, {r["strategy"]: r["best_config"] for r in rs})
    for r in rs:
        r["side_by_side_us"] = times[r["strategy"]]
        r["side_by_side_torch_us"] = torch
    print(f"{workload} seed {seed} side by side: " +
          ", ".join(f"{r['strategy']} {median(times[r['strategy']]):.1f} us" for r in rs) +
          f", LibTorch {median(torch):.1f} us", file=sys.stderr, flush=True)


PEER_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".cache", "peers", "bin", "python")


def peer_available(python):
    """Why MetaSchedule cannot run with `python` (None when it can)."""
    return python_problem(python, ["tvm", "tvm.s_tir.meta_schedule"])


def run_metaschedule(basin, python, workload, seed, trials, threads, out):
    """bench/peers/metaschedule.py on one workload: its JSON, as a run of results.json (the
    curve in basin's form: seconds, trials, best so far)."""
    path = os.path.join(out, f"{workload}.{seed}.metaschedule.json")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "metaschedule.py")
    cmd = [python, script, "--workload", workload, "--trials", str(trials), "--threads", str(threads),
           "--seed", str(seed), "--basin", basin, "--out", path]
    t0 = time.time()
    j = peer_json(cmd, path, "bench/search")
    run = {"workload": workload, "strategy": "metaschedule", "peer": True, "seed": seed, "trials": j["trials"],
           "best_latency_us": j["best_us"], "search_seconds": j["seconds"], "final_latency_us": j["final_us"],
           "curve": j["curve"], "tvm": j["tvm"], "target": j["target"]}
    print(f"{workload} metaschedule seed {seed}: best {j['best_us']:.1f} us in {j['trials']} trials, "
          f"{j['seconds']:.0f} s; timed again by TVM {j['final_us']:.1f} us [{time.time() - t0:.0f} s]",
          file=sys.stderr, flush=True)
    return run


def remove_db(db):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)


def run_of(workload, seed, r, c):
    """One run's entry in results.json: tune-op's JSON `r`, and `c` with the best and the
    peer timed again (--compare; the same object when the run compared)."""
    return {"workload": workload, "strategy": r["strategy"], "seed": seed, "trials": r["trials"],
            "best_latency_us": r["best_latency_us"], "search_seconds": r["search_seconds"],
            "overhead_fraction": r["overhead_fraction"], "propose_seconds": r["propose_seconds"],
            "update_seconds": r["update_seconds"], "measure_seconds": r["measure_seconds"],
            "errors": r["errors"], "confirmations": r.get("confirmations", 0), "brief": r.get("brief", 0),
            "curve": r["curve"],
            "final_latency_us": c.get("final_latency_us"), "torch_latency_us": c.get("torch_latency_us"),
            "best_config": r.get("best_config"), "best_remeasurements": r.get("best_remeasurements", 0),
            "settled": r.get("settled", False), "bests": r.get("bests", [])}


def report(run, seconds):
    print(f"{run['workload']} {run['strategy']} seed {run['seed']}: best {run['best_latency_us']:.1f} us in "
          f"{run['trials']} trials, {run['search_seconds']:.0f} s (overhead {100 * run['overhead_fraction']:.1f}%); "
          f"timed again {run['final_latency_us']:.1f} us, LibTorch {run['torch_latency_us']:.1f} us "
          f"[{seconds:.0f} s]", file=sys.stderr, flush=True)


def config_key(cfg):
    return json.dumps(cfg, sort_keys=True)


def retime(basin, workload, configs, rounds=3):
    """Every program in `configs` timed with the full protocol, in turn, `rounds` times (the
    order rotating each round). Returns config_key -> [latency per round]."""
    import tempfile
    out = {config_key(c): [] for c in configs}
    programs = list(out)
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for i, k in enumerate(programs):
            paths[k] = os.path.join(d, f"{i}.json")
            with open(paths[k], "w") as f:
                f.write(k)
        for r in range(rounds):
            shift = r * len(programs) // max(rounds, 1)
            for k in programs[shift:] + programs[:shift]:
                out[k].append(time_op(basin, workload, paths[k])["latency_us"])
    return out


def add_retimed_bests(basin, results, workload, seed, rounds=3):
    """Every program that was a run's best at some point, of every strategy of one workload
    and seed, timed again in turn (`retime`): the runs' curves, re-measured in the same
    minutes, so that "reached annealing's best" does not hang on one fast phase of the host."""
    rs = [r for r in results["runs"] if r["workload"] == workload and r["seed"] == seed and r.get("bests")]
    if len(rs) < 2:
        return
    configs = {config_key(b["config"]): b["config"] for r in rs for b in r["bests"]}
    t0 = time.time()
    times = retime(basin, workload, list(configs.values()), rounds)
    for r in rs:
        r["bests_retimed_us"] = [times[config_key(b["config"])] for b in r["bests"]]
    print(f"{workload} seed {seed}: {len(configs)} programs that were a best re-timed {rounds} times in turn "
          f"[{time.time() - t0:.0f} s]", file=sys.stderr, flush=True)


def retimed_curve(run):
    """(seconds, trials, re-timed median of the program held as best then) per change of best."""
    return [(b["seconds"], b["trials"], median(t)) for b, t in zip(run["bests"], run["bests_retimed_us"])]


def timing_noise(runs):
    """The re-timings' own noise for one workload and seed: one standard deviation of the
    difference between two re-timed figures (medians of `rounds` timings each), estimated
    as the median over the re-timed programs of their rounds' relative standard deviation,
    times sqrt(2 / rounds). 0 when fewer than two rounds were timed."""
    rel = [stdev(t) / median(t) for r in runs for t in r["bests_retimed_us"] if len(t) >= 2]
    if not rel:
        return 0.0
    rounds = min(len(t) for r in runs for t in r["bests_retimed_us"])
    return median(rel) * math.sqrt(2 / rounds)


def reach(curve, target):
    """(seconds, trials) when the curve's best first came within `target`, or None."""
    for seconds, trials, best in curve:
        if best and best <= target:
            return seconds, trials
    return None


def shares(hit, ann):
    """A reach (seconds, trials) as shares of annealing's trials and seconds, formatted."""
    if not hit:
        return "not reached", "not reached"
    return f"{hit[1] / ann['trials']:.2f}", f"{hit[0] / ann['search_seconds']:.2f}"


def plot(workload, runs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench/search: matplotlib is missing (apt-get install python3-matplotlib); no plot", file=sys.stderr)
        return False
    fig, (ax_t, ax_n) = plt.subplots(1, 2, figsize=(11, 4))
    for r in runs:
        pts = [(s, n, b) for s, n, b in r["curve"] if b]
        if not pts:
            continue
        label = f"{r['strategy']} (seed {r['seed']})"
        style = {"color": "black", "linestyle": ":"} if r.get("peer") else {}
        line = ax_t.step([p[0] for p in pts], [p[2] for p in pts], where="post", label=label, **style)[0]
        ax_n.step([p[1] for p in pts], [p[2] for p in pts], where="post", label=label, **style)
        if r.get("bests_retimed_us"):
            # The re-timed curve, to the end of the run.
            rc = retimed_curve(r)
            rc.append((r["search_seconds"], r["trials"], rc[-1][2]))
            for ax, x in ((ax_t, 0), (ax_n, 1)):
                ax.step([p[x] for p in rc], [p[2] for p in rc], where="post", linestyle="--",
                        color=line.get_color(), label=f"{label}, re-timed" if ax is ax_n else None)
    for ax, xl in ((ax_t, "seconds"), (ax_n, "trials")):
        ax.set_xlabel(xl)
        ax.set_ylabel("best latency (us)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_xscale("symlog", linthresh=10)
    ax_t.set_xlim(left=0)
    ax_n.legend(fontsize=8)
    fig.suptitle(f"{workload}: best latency found ({cpu_model()}, {os.cpu_count()} cores, {vector_isa()})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def finished(results, strategies):
    """The (workload, seed) pairs of `results` in which every one of `strategies` ran and
    the best programs were timed side by side (what a resumed run keeps)."""
    done = {}
    for r in results["runs"]:
        if not r.get("peer") and r.get("side_by_side_us") is not None:
            done.setdefault((r["workload"], r["seed"]), set()).add(r["strategy"])
    return {k for k, v in done.items() if set(strategies) <= v}


def resumed(path, machine, trials, interleave, strategies):
    """results.json at `path` for a resumed run: its finished pairs' runs kept, the rest
    dropped. Exits when it was measured otherwise (another machine, budget, threads or
    interleaving): its figures would not compare."""
    with open(path) as f:
        old = json.load(f)
    for what, mine, theirs in (("machine", machine, old.get("machine")), ("trials", trials, old.get("trials")),
                               ("interleaving", interleave, old.get("interleaved"))):
        if mine != theirs:
            raise SystemExit(f"bench/search: --resume: {path} was measured with {what} {theirs}, this run's is "
                             f"{mine}; give another --out")
    keep = finished(old, strategies)
    old["runs"] = [r for r in old["runs"] if (r["workload"], r["seed"]) in keep]
    return old, keep


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--trials", type=int, default=1000, help="annealing's budget, and the others' at most")
    ap.add_argument("--out", default="bench-search")
    ap.add_argument("--basin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin", "basin"))
    ap.add_argument("--from", dest="from_results", metavar="RESULTS.json",
                    help="measure nothing: redraw the plots and the table of an earlier run into --out")
    ap.add_argument("--side-by-side", action="store_true",
                    help="with --from: time the runs' best programs side by side (those not timed so yet), "
                         "and write results.json into --out too")
    ap.add_argument("--retime", type=int, default=3, metavar="ROUNDS",
                    help="after each workload and seed, time every program that was a run's best again, in turn, "
                         "ROUNDS times, and judge the curves on those timings too (0: do not)")
    ap.add_argument("--threads", type=int, default=0, metavar="N",
                    help="run basin's kernels and LibTorch on N threads (BASIN_NUM_THREADS; default: every core)")
    ap.add_argument("--interleave", action="store_true",
                    help="tune the strategies at once (basin tune-op --strategy annealing,gradient,...): a round of "
                         "each in turn in one process, each to the full --trials, so that all meet the same phases "
                         "of the host; each strategy's seconds count its own rounds")
    ap.add_argument("--peer", choices=["metaschedule"],
                    help="tune each workload with TVM MetaSchedule too (the same trials and threads), from the "
                         "peers' Python (--peer-python)")
    ap.add_argument("--peer-trials", type=int, default=0, metavar="N",
                    help="the peer's trial budget (default: --trials)")
    ap.add_argument("--peer-python", default=PEER_PYTHON, metavar="PYTHON",
                    help="the Python with apache-tvm (default: bench/peers/setup.sh's environment)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the finished workload and seed pairs of --out's results.json (the same machine, "
                         "trials, threads and interleaving) and run only the others: a grid accumulated over "
                         "several sittings")
    a = ap.parse_args(argv)
    if a.peer:
        why = peer_available(a.peer_python)
        if why:
            raise SystemExit(f"bench/search: --peer {a.peer}: {why}")
    if a.threads < 0:
        raise SystemExit("bench/search: --threads must be at least 1 (or 0 for every core)")
    if a.threads:
        # Inherited by every basin process this script starts: the tuners' measurement
        # workers, tune-op --compare's LibTorch, basin op's side-by-side timings.
        os.environ["BASIN_NUM_THREADS"] = str(a.threads)
    if a.from_results:
        with open(a.from_results) as f:
            results = json.load(f)
        os.makedirs(a.out, exist_ok=True)
        runs = results["runs"]
        ran_on = results["machine"].get("threads")
        if a.side_by_side and not a.threads and ran_on and ran_on != os.cpu_count():
            os.environ["BASIN_NUM_THREADS"] = str(ran_on)  # time again as the runs were timed
        workloads = list(dict.fromkeys(r["workload"] for r in runs))
        strategies = list(dict.fromkeys(r["strategy"] for r in runs if not r.get("peer")))
        seeds = list(dict.fromkeys(r["seed"] for r in runs))
        if a.side_by_side:
            for w in workloads:
                for seed in seeds:
                    if not any("side_by_side_us" in r for r in runs if r["workload"] == w and r["seed"] == seed):
                        add_side_by_side(a.basin, results, w, seed)
                    if a.retime and not any("bests_retimed_us" in r for r in runs
                                            if r["workload"] == w and r["seed"] == seed):
                        add_retimed_bests(a.basin, results, w, seed, a.retime)
            with open(os.path.join(a.out, "results.json"), "w") as f:
                json.dump(results, f, indent=1)
        for w in workloads:
            plot(w, [r for r in runs if r["workload"] == w], os.path.join(a.out, f"{w}.png"))
        with open(os.path.join(a.out, "table.md"), "w") as f:
            f.write(table(results, workloads, strategies, seeds))
        print(open(os.path.join(a.out, "table.md")).read())
        return
    workloads = [w for w in a.workloads.split(",") if w]
    strategies = [s for s in a.strategies.split(",") if s]
    if "annealing" not in strategies:
        raise SystemExit("bench/search: annealing sets the budget; keep it in --strategies")
    strategies = ["annealing"] + [s for s in strategies if s != "annealing"]
    seeds = [int(s) for s in a.seeds.split(",") if s]
    os.makedirs(a.out, exist_ok=True)
    results = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "isa": vector_isa(),
                           "threads": a.threads or os.cpu_count()}, "trials": a.trials,
               "interleaved": a.interleave,
               "started": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": []}
    skip = set()
    asked_workloads, asked_seeds = list(workloads), list(seeds)
    if a.resume and os.path.exists(os.path.join(a.out, "results.json")):
        results, skip = resumed(os.path.join(a.out, "results.json"), results["machine"], a.trials, a.interleave,
                                strategies)
        print(f"bench/search: --resume: {len(skip)} finished workload and seed pairs kept", file=sys.stderr)
        # The table covers every pair measured, in this sitting or before.
        workloads += [w for w in dict.fromkeys(w for w, _ in skip) if w not in workloads]
        seeds += [x for x in dict.fromkeys(x for _, x in skip) if x not in seeds]
    for w in workloads:
        for seed in seeds:
            if (w, seed) in skip or w not in asked_workloads or seed not in asked_seeds:
                continue
            anneal_best = None
            if a.interleave:
                # One process, a round of each strategy in turn, each to the full budget.
                db = os.path.join(a.out, f"{w}.{seed}.db")
                for s in strategies:
                    remove_db(os.path.join(a.out, f"{w}.{seed}.{s}.db"))
                t0 = time.time()
                j = tune(a.basin, w, ",".join(strategies), seed, a.trials, db, compare=True)
                for r in j["runs"]:
                    run = run_of(w, seed, r, r)
                    results["runs"].append(run)
                    report(run, time.time() - t0)
                with open(os.path.join(a.out, "results.json"), "w") as f:
                    json.dump(results, f, indent=1)
            for s in ([] if a.interleave else strategies):
                db = os.path.join(a.out, f"{w}.{s}.{seed}.db")
                remove_db(db)
                t0 = time.time()
                r = tune(a.basin, w, s, seed, a.trials, db, stop_at=anneal_best if s != "annealing" else None)
                # The best program and the peer, timed again in one process.
                c = tune(a.basin, w, s, seed, r["trials"], db, compare=True)
                run = run_of(w, seed, r, c)
                results["runs"].append(run)
                if s == "annealing":
                    anneal_best = r["best_latency_us"]
                report(run, time.time() - t0)
                with open(os.path.join(a.out, "results.json"), "w") as f:
                    json.dump(results, f, indent=1)
            add_side_by_side(a.basin, results, w, seed)
            if a.retime:
                add_retimed_bests(a.basin, results, w, seed, a.retime)
            if a.peer == "metaschedule":
                results["runs"].append(run_metaschedule(os.path.abspath(a.basin), a.peer_python, w, seed,
                                                        a.peer_trials or a.trials, a.threads or os.cpu_count(), a.out))
            with open(os.path.join(a.out, "results.json"), "w") as f:
                json.dump(results, f, indent=1)
        plot(w, [r for r in results["runs"] if r["workload"] == w], os.path.join(a.out, f"{w}.png"))
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table(results, workloads, strategies, seeds))
    print(open(os.path.join(a.out, "table.md")).read())


def peer_lines(results, workloads, seeds):
    """The peers' runs (MetaSchedule) beside basin's strategies: each strategy's seconds and
    trials to reach the peer's best, and the peer's to reach each strategy's best."""
    peers = [r for r in results["runs"] if r.get("peer")]
    if not peers:
        return []
    lines = ["", "Against TVM MetaSchedule (its own timer; basin's figures are basin's): the peer's best as it "
             "measured it and as TVM's time evaluator timed it again; each basin strategy's best, and the "
             "seconds and trials each side needed to reach the other's best.", "",
             "| workload | seed | strategy | best (us) | trials | seconds | timed again (us) | "
             "to MetaSchedule's best: trials, seconds | MetaSchedule to its best: trials, seconds |",
             "|---|---|---|---|---|---|---|---|---|"]
    def trials_seconds(hit):
        return f"{hit[1]}, {hit[0]:.0f}" if hit else "not reached"

    ours = [r for r in results["runs"] if not r.get("peer")]
    for w in workloads:
        for seed in seeds:
            for p in (r for r in peers if r["workload"] == w and r["seed"] == seed):
                lines.append(f"| {w} | {seed} | {p['strategy']} (TVM {p.get('tvm', '?')}) | {p['best_latency_us']:.1f} | "
                             f"{p['trials']} | {p['search_seconds']:.0f} | {p['final_latency_us']:.1f} | - | - |")
                for r in (r for r in ours if r["workload"] == w and r["seed"] == seed):
                    final = r.get("final_latency_us")
                    lines.append(f"| {w} | {seed} | {r['strategy']} | {r['best_latency_us']:.1f} | {r['trials']} | "
                                 f"{r['search_seconds']:.0f} | {f'{final:.1f}' if final else '-'} | "
                                 f"{trials_seconds(reach(r['curve'], p['best_latency_us']))} | "
                                 f"{trials_seconds(reach(p['curve'], r['best_latency_us']))} |")
    return lines


# The fair grid (docs/search.md): each strategy with and without the proposal sources.
GRID = ["gradient", "annealing", "evolutionary"]


def grid_cell(spec):
    """(strategy, with the sources) of a spec of the fair grid, or None: the gradient search
    takes the sources unless `sources=0`, the others only with `sources=1`; a spec with any
    other option is a variant, not a cell."""
    name, *opts = spec.split(":")
    kv = dict(o.split("=", 1) for o in opts if "=" in o)
    if name not in GRID or len(kv) != len(opts) or set(kv) - {"sources"}:
        return None
    return name, kv.get("sources", "1" if name == "gradient" else "0") != "0"


def geomean(v):
    return math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")


def grid_lines(results, workloads, seeds):
    """The fair grid's table: per cell, the geometric mean over the workloads and seeds of
    its best program timed side by side, against the fastest cell's of that workload and
    seed (1.000: the fastest every time), and what the sources are worth to each strategy
    (its program without them over its program with them, > 1: they help)."""
    cells = {}  # (w, seed) -> {(name, sources): side-by-side median}
    for r in results["runs"]:
        c = grid_cell(r["strategy"]) if not r.get("peer") else None
        if c and r.get("side_by_side_us"):
            cells.setdefault((r["workload"], r["seed"]), {})[c] = median(r["side_by_side_us"])
    groups = [(w, s) for w in workloads for s in seeds if len(cells.get((w, s), {})) >= 2]
    if not groups:
        return []
    rel = {}    # cell -> [its / the group's fastest]
    worth = {}  # name -> [without / with]
    for g in groups:
        got = cells[g]
        fastest = min(got.values())
        for c, us in got.items():
            rel.setdefault(c, []).append(us / fastest)
        for name in GRID:
            if (name, False) in got and (name, True) in got:
                worth.setdefault(name, []).append(got[(name, False)] / got[(name, True)])
    lines = ["", f"The fair grid ({len(groups)} workload and seed pairs: "
             f"{', '.join(f'{w} {s}' for w, s in groups)}): each cell's best program, timed side by side with the "
             "others of its workload and seed, against the fastest of them (geometric mean; 1.000 is the fastest "
             "every time, n the pairs it ran in); the sources' worth: the strategy's program without them over "
             "its program with them (> 1: they help).", "",
             "| strategy | no sources | with the sources | the sources' worth |", "|---|---|---|---|"]
    for name in GRID:
        def cell(src):
            v = rel.get((name, src))
            return f"{geomean(v):.3f} (n {len(v)})" if v else "-"
        w = worth.get(name)
        lines.append(f"| {'the descent (gradient)' if name == 'gradient' else name} | {cell(False)} | {cell(True)} | "
                     f"{f'{geomean(w):.3f}' if w else '-'} |")
    return lines


def table(results, workloads, strategies, seeds):
    runs = [r for r in results["runs"] if not r.get("peer")]
    m = results["machine"]
    threads = m.get("threads", m["cores"])
    on = f" (kernels and LibTorch on {threads} thread{'s' if threads != 1 else ''})" if threads != m["cores"] else ""
    how = ("; the strategies tuned at once, a round of each in turn, each to the full budget, each strategy's "
           "seconds counting its own rounds only" if results.get("interleaved") else "")
    lines = [f"Machine: {m['cpu']}, {m['cores']} cores{on}, {m.get('isa', 'ISA not recorded')}; annealing budget "
             f"{results['trials']} trials; seeds {', '.join(map(str, seeds))}{how}.", "",
             "| workload | seed | strategy | best (us) | trials | trials to 5% | seconds to 5% | overhead | "
             "timed again (us) | LibTorch (us) | speedup |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios = []       # gradient / annealing, trials and seconds to annealing's best
    speedups = {}     # workload -> best speedup over LibTorch of any strategy (geomean over seeds)
    for w in workloads:
        for seed in seeds:
            rs = [r for r in runs if r["workload"] == w and r["seed"] == seed]
            if not rs:
                continue
            best_any = min(r["best_latency_us"] for r in rs if r["best_latency_us"])
            for r in rs:
                hit = reach(r["curve"], 1.05 * best_any)
                sp = r["torch_latency_us"] / r["final_latency_us"] if r["final_latency_us"] else float("nan")
                lines.append(f"| {w} | {seed} | {r['strategy']} | {r['best_latency_us']:.1f} | {r['trials']} | "
                             f"{hit[1] if hit else '-'} | {f'{hit[0]:.0f}' if hit else '-'} | "
                             f"{100 * r['overhead_fraction']:.1f}% | {r['final_latency_us']:.1f} | "
                             f"{r['torch_latency_us']:.1f} | {sp:.2f} |")
            ann = next((r for r in rs if r["strategy"] == "annealing"), None)
            for r in (rs if ann else []):
                if r is not ann:
                    ratios.append((w, seed, r["strategy"]) + shares(reach(r["curve"], ann["best_latency_us"]), ann))
            finals = [r["torch_latency_us"] / r["final_latency_us"] for r in rs if r["final_latency_us"]]
            if finals:
                speedups.setdefault(w, []).append(max(finals))
    lines += ["", "Against annealing: the share of annealing's trials and seconds each strategy needed to reach "
              "annealing's best (target for the gradient strategy: at most 0.20 of each).", "",
              "| workload | seed | strategy | trials ratio | time ratio |", "|---|---|---|---|---|"]
    for w, seed, name, tr, ti in ratios:
        lines.append(f"| {w} | {seed} | {name} | {tr} | {ti} |")
    side = [r for r in runs if r.get("side_by_side_us")]
    if side:
        lines += ["", "The best programs timed side by side after the runs (the full protocol, the strategies "
                  "alternating, 3 times each; median, and its ratio to annealing's): the figure that compares "
                  "programs on a host whose speed drifts between runs.", "",
                  "| workload | seed | strategy | side by side (us) | / annealing's | LibTorch (us) |",
                  "|---|---|---|---|---|---|"]
        for w in workloads:
            for seed in seeds:
                rs = [r for r in side if r["workload"] == w and r["seed"] == seed]
                ann = next((r for r in rs if r["strategy"] == "annealing"), None)
                for r in rs:
                    m = median(r["side_by_side_us"])
                    rel = f"{m / median(ann['side_by_side_us']):.3f}" if ann else "-"
                    lines.append(f"| {w} | {seed} | {r['strategy']} | {m:.1f} | {rel} | "
                                 f"{median(r['side_by_side_torch_us']):.1f} |")
    timed = [r for r in runs if r.get("bests_retimed_us")]
    if timed:
        lines += ["", "Re-timed curves: every program that was a run's best at some point, timed again after the "
                  "workload's runs, all in turn, with the full protocol (median of the rounds). A run's re-timed "
                  "curve is the re-timed latency of the program it held as best at each point. Each other "
                  "strategy's share of annealing's trials and seconds to hold a program as fast as annealing's "
                  "final one, and to come within 5% of it, judged on these timings. The last column counts a "
                  "program as fast as annealing's final one when it is slower by at most the re-timings' own "
                  "noise, d: one standard deviation of the difference between two re-timed figures (the median "
                  "relative standard deviation of a program's rounds, times sqrt(2 / rounds)):", "",
                  "| workload | seed | strategy | annealing's final best, re-timed (us) | its final, re-timed (us) | "
                  "trials ratio | time ratio | within 5%: trials, time | d | within d: trials, time |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for w in workloads:
            for seed in seeds:
                rs = [r for r in timed if r["workload"] == w and r["seed"] == seed]
                ann = next((r for r in rs if r["strategy"] == "annealing"), None)
                if not ann:
                    continue
                target = retimed_curve(ann)[-1][2]
                d = timing_noise(rs)
                for r in rs:
                    if r is ann:
                        continue
                    gc = retimed_curve(r)
                    hit, hit5, hitd = reach(gc, target), reach(gc, 1.05 * target), reach(gc, (1 + d) * target)
                    tr, ti = shares(hit, ann)
                    t5 = ", ".join(shares(hit5, ann)) if hit5 else "not reached"
                    td = ", ".join(shares(hitd, ann)) if hitd else "not reached"
                    lines.append(f"| {w} | {seed} | {r['strategy']} | {target:.1f} | {gc[-1][2]:.1f} | {tr} | {ti} | "
                                 f"{t5} | {100 * d:.2f}% | {td} |")
    conv = [math.exp(sum(map(math.log, v)) / len(v)) for w, v in speedups.items() if w.startswith("resnet18-c")]
    if conv:
        g = math.exp(sum(map(math.log, conv)) / len(conv))
        lines += ["", f"Tuned ResNet-18 layers ({len(conv)} of C1-C12): geometric-mean speedup of the best tuned "
                  f"program over LibTorch (oneDNN) {g:.2f} (target: at least 1.0)."]
    lines += grid_lines(results, workloads, seeds)
    lines += peer_lines(results, workloads, seeds)
    over = [r["overhead_fraction"] for r in runs]
    lines += ["", f"Tuning overhead (share of wall time outside compile and measure): mean "
              f"{100 * sum(over) / len(over):.1f}%, max {100 * max(over):.1f}% over {len(over)} runs (target: under 10%)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
