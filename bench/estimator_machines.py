"""bench/estimator_machines: the leave-one-machine-out table of docs/estimators.md.

For each committed dataset (one machine each), an ensemble trained on the other
machines' files ranks the left-out machine's programs, without and with calibration:

- `trained on the others`: `basin estimator train --estimator ensemble --test-fraction 0`
  on the other files merged, evaluated on the left-out file's held-out tasks;
- `calibrated`: that ensemble fine-tuned as `basin estimator calibrate` fine-tunes
  (2 passes, trees at eta 0.2 with 4 pair samples) on the left-out machine's other
  tasks, a --calibration-fraction of them (the stand-in for the sample a calibration
  measures on arrival: random programs of a few dozen tasks), evaluated on the same
  held-out tasks;
- `shipped`: the shipped ensemble (models/weights/cpu_ensemble.bin) on those tasks,
  and calibrated the same way.

The split is by task (`--seed`): the held-out tasks are the same in every row of a
machine. Repeatability is printed where the file holds programs measured twice.
Writes results.json and table.md to --out.

    python3 bench/estimator_machines.py [--data models/data] [--extra zen3=FILE.db ...]
        [--calibration-fraction 0.05] [--seed 1] [--out DIR] [--basin build/bin/basin]
"""
import argparse
import glob
import json
import lzma
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(ROOT, "models", "data"))
    ap.add_argument("--extra", nargs="*", default=[], help="NAME=FILE.db: a further machine's records")
    ap.add_argument("--calibration-fraction", type=float, default=0.05)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--out", default="bench-results/estimator_machines")
    ap.add_argument("--basin", default=os.path.join(ROOT, "build", "bin", "basin"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    basin = a.basin
    files = {}
    for xz in sorted(glob.glob(os.path.join(a.data, "*.db.xz"))):
        name = os.path.basename(xz)[:-len(".db.xz")]
        db = os.path.join(a.out, name + ".db")
        if not os.path.exists(db):
            with lzma.open(xz) as src, open(db, "wb") as dst:
                shutil.copyfileobj(src, dst)
        files[name] = db
    for e in a.extra:
        name, path = e.split("=", 1)
        files[name] = os.path.abspath(path)
    shipped = os.path.join(ROOT, "models", "weights", "cpu_ensemble.bin")
    # The held-out tasks: 1 - fraction of each file's tasks; the fraction left trains
    # the calibration (the same seed and fraction split alike in train and eval).
    held = str(1 - a.calibration_fraction)
    results = []
    for out_name, out_db in files.items():
        others = [f for n, f in files.items() if n != out_name]
        merged = os.path.join(a.out, f"others-{out_name}.db")
        for ext in ("", "-wal", "-shm"):
            if os.path.exists(merged + ext):
                os.remove(merged + ext)
        run([basin, "records", "merge", "--into", merged] + others)
        trained = os.path.join(a.out, f"ensemble-without-{out_name}.bin")
        if not os.path.exists(trained):
            run([basin, "estimator", "train", "--records", merged, "--estimator", "ensemble", "--test-fraction", "0",
                 "--seed", a.seed, "--out", trained])
        row = {"machine": out_name, "trained_on": [n for n in files if n != out_name]}
        for label, est in (("others", trained), ("shipped", shipped)):
            ev = json.loads(run([basin, "estimator", "eval", "--records", out_db, "--estimator", est, "--test-fraction",
                                 held, "--seed", a.seed, "--json"]))
            cal = json.loads(run([basin, "estimator", "train", "--records", out_db, "--from", est, "--test-fraction",
                                  held, "--seed", a.seed, "--epochs", "2", "--tree-eta", "0.2", "--pair-samples", "4",
                                  "--json"]))
            row[label] = {"pairwise": ev["pairwise_accuracy"], "best_tenth": ev["best_tenth_recall"],
                          "calibrated_pairwise": cal["test"]["pairwise_accuracy"],
                          "calibrated_best_tenth": cal["test"]["best_tenth_recall"],
                          "calibration_programs": cal["train"]["samples"], "calibration_tasks": cal["train"]["tasks"],
                          "held_out_programs": ev["samples"], "held_out_tasks": ev["tasks"],
                          "repeatability": ev.get("repeatability")}
            print(f"{out_name} {label}: {row[label]}", flush=True)
        results.append(row)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    rows = ["| left out | held-out tasks (programs) | calibration tasks (programs) | trained on the others | "
            "+ calibration | shipped | + calibration |", "|---|---|---|---|---|---|---|"]
    for r in results:
        o, s = r["others"], r["shipped"]
        rows.append(f"| {r['machine']} | {o['held_out_tasks']} ({o['held_out_programs']}) | {o['calibration_tasks']} "
                    f"({o['calibration_programs']}) | {o['pairwise']:.3f} | {o['calibrated_pairwise']:.3f} | "
                    f"{s['pairwise']:.3f} | {s['calibrated_pairwise']:.3f} |")
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
