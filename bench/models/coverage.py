#!/usr/bin/python3
"""bench/models/coverage: which real models basin imports, runs and matches.

Exports each model of a set with both of torch 2.x's ONNX exporters (export.py, run
with the peers' Python), then for each ONNX file runs `basin run FILE --input ...
--output ...` with the exported inputs and compares basin's output with ONNX Runtime's
(max relative error: the largest absolute difference over the largest magnitude of the
reference) and PyTorch's. Writes results.json and table.md to --out and prints the
table; --doc also rewrites docs/models.md's table.

    /usr/bin/python3 bench/models/coverage.py [--set small|full] [--only NAME,...]
        [--out DIR] [--basin build/bin/basin] [--python .cache/peers/bin/python]
        [--exported DIR] [--doc docs/models.md] [--repeat N] [--tune BUDGET]

--exported reuses an earlier export. --repeat N also times basin (untuned programs)
and ONNX Runtime on the same input, N runs each, 2 threads. --tune BUDGET (with
--repeat) also tunes each export that matches from an empty records file (`basin tune
FILE --budget BUDGET`) and times the tuned network; --doc then rewrites the latency
table (its own markers) instead of the coverage table.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOL = 1e-4


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return float("inf")
    if got.size == 0:
        return 0.0
    d = np.abs(got - ref)
    if np.isnan(d).any():
        return float("inf")
    return float(d.max() / max(np.abs(ref).max(), 1e-6))


def one_line(text, limit=240):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    s = lines[-1] if lines else ""
    return s if len(s) <= limit else s[:limit] + "..."


def run_basin(basin, onnx, inputs, out, repeat, records=None):
    cmd = [basin, "run", onnx, "--output", out, "--json"]
    for i in inputs:
        cmd += ["--input", i]
    if repeat:
        cmd += ["--repeat", str(repeat)]
    if records:
        cmd += ["--records", records]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, BASIN_NUM_THREADS="2"))
    rec = {"basin_s": round(time.time() - t0, 1), "rc": p.returncode}
    if p.returncode != 0:
        rec["error"] = one_line(p.stderr)
        return rec
    try:
        j = json.loads(p.stdout)
        rec["tasks"] = len(j.get("untuned_tasks", []))
        if "latency_us" in j:
            rec["latency_ms"] = j["latency_us"] / 1e3
    except json.JSONDecodeError:
        pass
    return rec


def tune_basin(basin, onnx, records, budget):
    """basin tune from an empty records file; the seconds it took, or its error."""
    if os.path.exists(records):
        os.remove(records)
    t0 = time.time()
    p = subprocess.run([basin, "tune", onnx, "--budget", budget, "--records", records, "--quiet"],
                       capture_output=True, text=True, env=dict(os.environ, BASIN_NUM_THREADS="2"))
    rec = {"tune_s": round(time.time() - t0, 1)}
    if p.returncode == 4:  # the budget ended with tasks on untuned programs: still a network
        rec["tune_note"] = "some tasks untuned"
    elif p.returncode != 0:
        rec["tune_error"] = one_line(p.stderr)
    return rec


def time_ort(path, inputs, repeat):
    import onnxruntime as ort  # only with the peers' Python
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {i.name: np.load(x) for i, x in zip(sess.get_inputs(), inputs)}
    sess.run(None, feed)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feed)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def matches(r):
    """Within TOL of ONNX Runtime; where ONNX Runtime itself is off PyTorch by more than
    TOL (an exporter's or ONNX Runtime's fault), within TOL of PyTorch."""
    if r.get("err_ort") is None:
        return False
    if r["err_ort"] <= TOL:
        return True
    return (r.get("ort_vs_torch") or 0) > TOL and r.get("err_torch", float("inf")) <= TOL


def table(results):
    timed = any(r.get("latency_ms") is not None for r in results)
    head = "| model | exporter | imports | matches (max rel. error vs ONNX Runtime) | vs PyTorch | tasks |"
    tuned = any(r.get("tuned_ms") is not None for r in results)
    if timed:
        head += " basin untuned (ms) |" + (" basin tuned (ms) |" if tuned else "") + " ONNX Runtime (ms) |"
        if tuned:
            head += " ONNX Runtime / basin tuned |"
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        imp = "yes" if r.get("rc") == 0 else ("-" if "export_error" in r else "no")
        err, errt = r.get("err_ort"), r.get("err_torch")
        if err is None:
            match = "-: " + (r.get("export_error") or r.get("error") or "").replace("|", "/")
        elif err > TOL and matches(r):
            match = f"yes, against PyTorch: ONNX Runtime is {r['ort_vs_torch']:.1e} off PyTorch here ({err:.1e})"
        else:
            match = ("yes" if matches(r) else "**no**") + f" ({err:.1e})"
        row = f"| {r['model']} | {r['exporter']} | {imp} | {match} | {'-' if errt is None else f'{errt:.1e}'} | {r.get('tasks', '-')} |"
        if timed:
            lat, ort_ms = r.get("latency_ms"), r.get("ort_ms")
            tl = r.get("tuned_ms")
            row += f" {'-' if lat is None else f'{lat:.2f}'} |"
            if tuned:
                cell = "-" if tl is None else f"{tl:.2f}"
                et = r.get("err_tuned")
                if et is not None and et > TOL and not matches(dict(r, err_ort=et)):
                    cell += f" (**off by {et:.1e}**)"
                row += f" {cell} |"
            row += f" {'-' if ort_ms is None else f'{ort_ms:.2f}'} |"
            if tuned:
                row += f" {'-' if tl is None or ort_ms is None else f'{ort_ms / tl:.2f}'} |"
        rows.append(row)
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=["small", "full"], default="small")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="bench-results/models")
    ap.add_argument("--basin", default=os.path.join(ROOT, "build", "bin", "basin"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".cache", "peers", "bin", "python"))
    ap.add_argument("--exported", help="a directory export.py already wrote")
    ap.add_argument("--exporters", default="legacy,dynamo")
    ap.add_argument("--doc", help="rewrite the table of this markdown file (between its table markers)")
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("--tune", help="tuning budget per export (30s, 2m): also the tuned latency (with --repeat)")
    a = ap.parse_args()
    if a.tune and not a.repeat:
        raise SystemExit("bench/models: --tune needs --repeat N (the runs the tuned network is timed over)")
    os.makedirs(a.out, exist_ok=True)
    exp_dir = a.exported or os.path.join(a.out, "onnx")
    exports = []
    if not a.exported:
        if not os.path.exists(a.python):
            raise SystemExit(f"bench/models: no peers' Python at {a.python}: run bench/peers/setup.sh")
        cmd = [a.python, os.path.join(ROOT, "bench", "models", "export.py"), exp_dir, "--set", a.set,
               "--exporters", a.exporters] + (["--only", a.only] if a.only else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                exports.append(json.loads(line))
        if p.returncode != 0:
            print(one_line(p.stderr), file=sys.stderr)
    else:
        with open(os.path.join(exp_dir, "exports.jsonl")) as f:
            exports = [json.loads(l) for l in f if l.startswith("{")]
    if not a.exported:
        with open(os.path.join(exp_dir, "exports.jsonl"), "w") as f:
            for e in exports:
                f.write(json.dumps(e) + "\n")
    # An earlier export, narrowed to --only and --exporters.
    only, exporters = set(filter(None, a.only.split(","))), set(a.exporters.split(","))
    exports = [e for e in exports if (not only or e["model"] in only) and e.get("exporter", "-") in exporters]
    results = []
    for e in exports:
        name, exporter = e["model"], e.get("exporter", "-")
        r = {"model": name, "exporter": exporter, "ort_vs_torch": e.get("ort_vs_torch")}
        if "error" in e:
            r["export_error"] = "export failed: " + e["error"]
            results.append(r)
            continue
        onnx = os.path.join(exp_dir, f"{name}.{exporter}.onnx")
        inputs = []
        while os.path.exists(os.path.join(exp_dir, f"{name}.in{len(inputs)}.npy")):
            inputs.append(os.path.join(exp_dir, f"{name}.in{len(inputs)}.npy"))
        out = os.path.join(a.out, f"{name}.{exporter}.basin.npy")
        r.update(run_basin(a.basin, onnx, inputs, out, a.repeat))
        if r.get("rc") == 0:
            got = np.load(out)
            r["err_ort"] = rel_err(got, np.load(os.path.join(exp_dir, f"{name}.{exporter}.ort.npy")))
            r["err_torch"] = rel_err(got, np.load(os.path.join(exp_dir, f"{name}.torch.npy")))
            if a.repeat and os.path.exists(a.python) and a.python == sys.executable:
                r["ort_ms"] = time_ort(onnx, inputs, a.repeat)
            if a.tune and matches(r):
                records = os.path.join(a.out, f"{name}.{exporter}.records.db")
                r.update(tune_basin(a.basin, onnx, records, a.tune))
                if "tune_error" not in r:
                    t = run_basin(a.basin, onnx, inputs, out + ".tuned.npy", a.repeat, records)
                    if t.get("rc") == 0 and "latency_ms" in t:
                        r["tuned_ms"] = t["latency_ms"]
                        r["err_tuned"] = rel_err(np.load(out + ".tuned.npy"),
                                                 np.load(os.path.join(exp_dir, f"{name}.{exporter}.ort.npy")))
                    else:
                        r["tune_error"] = t.get("error", "no latency")
        results.append(r)
        print(json.dumps(r), flush=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    t = table(results)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(t + "\n")
    print(t)
    n = len(results)
    ok = sum(1 for r in results if matches(r))
    print(f"\n{ok} of {n} exports import, run and match ONNX Runtime (or PyTorch, where ONNX Runtime is off) within {TOL:g}")
    if a.doc:
        with open(a.doc) as f:
            doc = f.read()
        # The tuned runs are a table of their own (a subset: --only).
        begin, end = ("<!-- latency table -->", "<!-- end latency table -->") if a.tune else \
            ("<!-- coverage table -->", "<!-- end coverage table -->")
        if begin in doc and end in doc:
            doc = doc[:doc.index(begin) + len(begin)] + "\n" + t + "\n" + doc[doc.index(end):]
            with open(a.doc, "w") as f:
                f.write(doc)


if __name__ == "__main__":
    main()
