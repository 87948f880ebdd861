"""bench/mpi_scaling: a network tuned by K ranks against one (docs/distributed.md).

On this machine, each rank a one-thread machine (BASIN_NUM_THREADS=1, one program
compiled at a time, mpirun binding each rank to a core): for each K of --ranks with its
budget of --budgets, `mpirun -n K basin tune MODEL --budget B` from an empty records
file. Then each run's network is compiled from its records and the compiled networks
are timed on one thread in turn for --rounds rounds (the host's speed drifts over
minutes), each keeping its fastest of --repeat runs. Reports, per run: trials,
programs measured per second, each rank's share, the estimated network latency on the
way (the tuning curve at each minute), the timed latency, and what rank 0 spent
besides measuring (proposing, estimator updates, the rest) and its messages, the
figures that bound K (docs/distributed.md, "Scaling"). Writes results.json and
table.md to --out.

    python3 bench/mpi_scaling.py [--model zoo:resnet18] [--ranks 1,2] [--budgets 3m,2m]
        [--rounds 5] [--repeat 10] [--out DIR] [--basin build/bin/basin]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))


def run(cmd, env, check=True):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if check and p.returncode not in (0, 4):  # 4: a task without a program
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return p


def estimate_at(curve, t):
    """The estimated network latency (ms) of a tuning curve at t seconds (None before every task has a program)."""
    best = None
    for sec, _trials, est_us in curve:
        if sec <= t and est_us:
            best = est_us / 1e3
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="zoo:resnet18")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--budgets", default="3m,2m")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--out", default="mpi-scaling")
    ap.add_argument("--basin", default=os.path.join(ROOT, "build", "bin", "basin"))
    a = ap.parse_args()
    ranks = [int(k) for k in a.ranks.split(",")]
    budgets = [b.strip() for b in a.budgets.split(",")]
    if len(ranks) != len(budgets):
        sys.exit("give one budget per rank count (--ranks 1,2 --budgets 3m,2m)")
    if not shutil.which("mpirun"):
        sys.exit("no mpirun: install openmpi-bin (scripts/test installs it)")
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, BASIN_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    runs = []
    for k, budget in zip(ranks, budgets):
        db = os.path.join(a.out, f"ranks{k}.db")
        for f in (db, db + "-wal", db + "-shm"):
            if os.path.exists(f):
                os.remove(f)
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "core", "-x", "BASIN_NUM_THREADS", "-n", str(k), a.basin,
               "tune", a.model, "--budget", budget, "--no-calibrate", "--compile-threads", "1", "--json", "--quiet",
               "--records", db]
        t0 = time.time()
        p = run(cmd, env)
        wall = time.time() - t0
        j = json.loads(p.stdout)
        net = os.path.join(a.out, f"ranks{k}.basin")
        run([a.basin, "compile", a.model, "--records", db, "-o", net, "--quiet"], env)
        runs.append({"ranks": k, "budget": budget, "records": db, "network": net, "wall_seconds": wall, "tune": j})
        print(f"{k} rank(s), {budget}: {j['trials']} trials in {j['search_seconds']:.0f} s, "
              f"estimated {j['estimated_latency_us'] and j['estimated_latency_us'] / 1e3} ms", flush=True)
    best = {r["ranks"]: None for r in runs}
    for _ in range(a.rounds):
        for r in runs:
            p = run([a.basin, "run", r["network"], "--repeat", str(a.repeat), "--json", "--quiet"], env)
            ms = json.loads(p.stdout)["latency_us"] / 1e3
            best[r["ranks"]] = ms if best[r["ranks"]] is None else min(best[r["ranks"]], ms)
    for r in runs:
        r["latency_ms"] = best[r["ranks"]]
    json.dump({"model": a.model, "runs": runs}, open(os.path.join(a.out, "results.json"), "w"), indent=1)

    lines = [f"Model {a.model}, each rank one thread; latency: the compiled network on one thread, "
             f"the fastest of {a.rounds} rounds of {a.repeat} runs, in turn.", "",
             "| ranks | budget | trials | programs/s | rank shares | estimated at 1 / 2 / 3 min (ms) | "
             "latency (ms) | rank 0: propose / update / other (s) | rank 0 messages in, out / s | bytes per result |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        j = r["tune"]
        secs = j["search_seconds"]
        shares = ", ".join(str(x["measured"]) + (" lost" if x["lost"] else "") for x in j.get("ranks") or []) or "-"
        est = " / ".join(f"{e:.2f}" if e else "-" for e in (estimate_at(j["curve"], t) for t in (60, 120, 180)))
        other = secs - j["measure_seconds"] - j["propose_seconds"] - j["update_seconds"]
        t = j.get("rank0_traffic")
        msgs = f"{t['messages_in'] / secs:.1f}, {t['messages_out'] / secs:.1f}" if t else "-"
        per = f"{t['bytes_in'] / max(1, t['messages_in']):.0f}" if t else "-"
        lines.append(f"| {r['ranks']} | {r['budget']} | {j['trials']} | {j['measured'] / secs:.2f} | {shares} | {est} | "
                     f"{r['latency_ms']:.2f} | {j['propose_seconds']:.1f} / {j['update_seconds']:.1f} / {other:.1f} | "
                     f"{msgs} | {per} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "table.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
