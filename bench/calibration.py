"""bench/calibration: what calibrating the estimator on a new machine does to a network's tuning.

On this machine, for each zoo network, three tunings from an empty records file, one
after the other:

- `shipped`: `basin tune --no-calibrate`, the shipped estimator as it is;
- `calibrated`: with this machine's calibration, made once beforehand by `basin
  estimator calibrate --budget CAL` in a cache of the benchmark's own (its seconds are
  reported apart: a machine pays them once);
- `auto` (with --auto): `basin tune` in an empty cache, as a new user runs it: it
  calibrates within its own budget (a quarter, at most two minutes) and tunes the rest.

`shipped` and `calibrated` tune in segments that resume their records file (the
network run with `basin run --repeat` after each: latency against tuning seconds);
`auto` runs its whole budget in one call, timed at its end. Then every tuned network
is compiled once and the compiled networks are timed in turn for --rounds rounds (the
host's speed drifts over minutes), each keeping its fastest. With --eval RECORDS (a
held-out network's tuning records, measured twice: `basin estimator dataset --records
R --tasks zoo:NAME --per-task 1 --repeat 1`), also `basin estimator eval` of the
shipped and the calibrated estimator on them. Writes results.json and table.md to --out.

    python3 bench/calibration.py [--models resnet18] [--budget 4m] [--segments 1m,4m]
        [--calibration 2m] [--auto] [--eval R.db ...] [--out DIR] [--basin build/bin/basin]
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


def seconds(text):
    text = text.strip()
    if text.endswith("m"):
        return float(text[:-1]) * 60
    if text.endswith("h"):
        return float(text[:-1]) * 3600
    return float(text.rstrip("s"))


def run(cmd, env, check=True):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p


def run_ms(basin, target, records, repeat, env):
    """The fastest of `repeat` runs of a network (compiled from records, or a .basin file)."""
    cmd = [basin, "run", target, "--repeat", str(repeat), "--json", "--quiet"]
    if records:
        cmd += ["--records", records]
    return json.loads(run(cmd, env).stdout)["latency_us"] / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--budget", default="4m")
    ap.add_argument("--segments", default="1m,4m")
    ap.add_argument("--calibration", default="2m")
    ap.add_argument("--auto", action="store_true")
    ap.add_argument("--eval", nargs="*", default=[])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="bench-results/calibration")
    ap.add_argument("--basin", default=os.path.join(ROOT, "build", "bin", "basin"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    basin = a.basin
    marks = [seconds(s) for s in a.segments.split(",")]
    budget = seconds(a.budget)
    cache = os.path.abspath(os.path.join(a.out, "cache"))
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, BASIN_CACHE_DIR=cache)
    t0 = time.time()
    cal = run([basin, "estimator", "calibrate", "--budget", a.calibration, "--json"], env)
    calibration = json.loads(cal.stdout)
    calibration["wall_seconds"] = time.time() - t0
    print(f"calibration: {calibration['measured']} programs of {calibration['tasks']} tasks in "
          f"{calibration['wall_seconds']:.0f} s", flush=True)
    results = {"calibration": calibration, "date": time.strftime("%Y-%m-%d %H:%M"), "models": []}
    for rec in a.eval:
        row = {"records": rec}
        for mode, extra in (("shipped", ["--no-calibrate"]), ("calibrated", [])):
            j = json.loads(run([basin, "estimator", "eval", "--records", rec, "--all", "--estimator", "ensemble",
                                "--json"] + extra, env).stdout)
            row[mode] = {k: j.get(k) for k in ("pairwise_accuracy", "repeatability", "of_repeatability",
                                               "top5_recall", "best_tenth_recall", "samples", "tasks")}
        print(f"eval {rec}: {row}", flush=True)
        results.setdefault("eval", []).append(row)
    for name in a.models.split(","):
        m = {"model": name, "modes": {}}
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        modes = [("shipped", ["--no-calibrate"]), ("calibrated", [])]
        for mode, extra in modes:
            records = os.path.join(d, mode + ".db")
            for f in (records, records + "-wal", records + "-shm"):
                if os.path.exists(f):
                    os.remove(f)
            spent, curve = 0.0, []
            for mark in marks:
                run([basin, "tune", "zoo:" + name, "--budget", f"{mark - spent:.0f}s", "--records", records,
                     "--quiet"] + extra, env)
                spent = mark
                ms = run_ms(basin, "zoo:" + name, records, a.repeat, env)
                curve.append([mark, ms])
                print(f"  {name} {mode} after {mark:.0f} s: {ms:.3f} ms", flush=True)
            m["modes"][mode] = {"curve": curve, "records": records}
        if a.auto:
            fresh = os.path.join(a.out, "cache-auto")
            shutil.rmtree(fresh, ignore_errors=True)
            auto_env = dict(os.environ, BASIN_CACHE_DIR=fresh)
            records = os.path.join(d, "auto.db")
            for f in (records, records + "-wal", records + "-shm"):
                if os.path.exists(f):
                    os.remove(f)
            p = run([basin, "tune", "zoo:" + name, "--budget", f"{budget:.0f}s", "--records", records], auto_env)
            said = [l for l in p.stderr.splitlines() if "calibrat" in l]
            ms = run_ms(basin, "zoo:" + name, records, a.repeat, auto_env)
            m["modes"]["auto"] = {"curve": [[budget, ms]], "records": records, "said": said}
            print(f"  {name} auto after {budget:.0f} s: {ms:.3f} ms ({len(said)} calibration lines)", flush=True)
        # The final networks side by side.
        files = {}
        for mode, v in m["modes"].items():
            files[mode] = os.path.join(d, mode + ".basin")
            run([basin, "compile", "zoo:" + name, "--records", v["records"], "-o", files[mode]], env)
        best = {mode: float("inf") for mode in files}
        for _ in range(a.rounds):
            for mode, f in files.items():
                best[mode] = min(best[mode], run_ms(basin, f, None, a.repeat, env))
        for mode in files:
            m["modes"][mode]["final_ms"] = best[mode]
        results["models"].append(m)
        print(f"  {name} side by side: " + ", ".join(f"{k} {v:.3f} ms" for k, v in best.items()), flush=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    rows = ["| model | " + " | ".join(f"shipped {s:.0f} s" for s in marks) + " | " +
            " | ".join(f"calibrated {s:.0f} s" for s in marks) + " | side by side: shipped / calibrated" +
            (" / auto" if a.auto else "") + " (ms) |",
            "|---|" + "---|" * (2 * len(marks) + 1)]
    for m in results["models"]:
        sh, ca = m["modes"]["shipped"], m["modes"]["calibrated"]
        finals = [sh["final_ms"], ca["final_ms"]] + ([m["modes"]["auto"]["final_ms"]] if a.auto else [])
        rows.append(f"| {m['model']} | " + " | ".join(f"{ms:.2f}" for _, ms in sh["curve"]) + " | " +
                    " | ".join(f"{ms:.2f}" for _, ms in ca["curve"]) + " | " +
                    " / ".join(f"{x:.2f}" for x in finals) + " |")
    for e in results.get("eval", []):
        rows.append(f"\neval {e['records']}: pairwise shipped {e['shipped']['pairwise_accuracy']:.3f} "
                    f"({e['shipped']['of_repeatability']:.3f} of repeatability), calibrated "
                    f"{e['calibrated']['pairwise_accuracy']:.3f} ({e['calibrated']['of_repeatability']:.3f})")
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
