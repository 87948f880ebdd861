"""ONNX Runtime's per-operator profile of a model, to put beside `basin profile`.

Runs the model N times with ONNX Runtime's profiler on (the same threads as basin's
benchmarks), then prints, per operator type, the time per run (median over the runs
of the summed node times), its share, and the node count; --nodes lists the slowest
nodes instead.

    .cache/peers/bin/python bench/peers/ort_profile.py MODEL.onnx [--input in0.npy ...] [--threads 2]
        [--runs 20] [--nodes 20] [--json]
"""
import argparse
import collections
import json
import os
import tempfile

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=0, help="list the N slowest nodes instead of operator types")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    feed = {}
    for i, inp in enumerate(sess.get_inputs()):
        if i < len(a.input):
            feed[inp.name] = np.load(a.input[i])
        else:
            shape = [d if isinstance(d, int) else 1 for d in inp.shape]
            feed[inp.name] = (np.random.default_rng(i).random(shape).astype(np.float32) if "float" in inp.type
                              else np.zeros(shape, dtype=np.int64))
    for _ in range(a.runs + 2):
        sess.run(None, feed)
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][2:]
    nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    per_run = collections.defaultdict(lambda: collections.defaultdict(float))
    count = collections.Counter()
    node_time = collections.defaultdict(list)
    for r_i, r in enumerate(runs):
        t0, t1 = r["ts"], r["ts"] + r["dur"]
        for e in nodes:
            if t0 <= e["ts"] <= t1:
                op = e.get("args", {}).get("op_name", "?")
                per_run[r_i][op] += e["dur"]
                node_time[e["name"][:-len("_kernel_time")]].append((e["dur"], op))
    ops = sorted({op for d in per_run.values() for op in d})
    for e in nodes:
        if runs and runs[0]["ts"] <= e["ts"] <= runs[0]["ts"] + runs[0]["dur"]:
            count[e.get("args", {}).get("op_name", "?")] += 1
    run_us = float(np.median([r["dur"] for r in runs])) if runs else 0.0
    table = []
    for op in ops:
        us = float(np.median([per_run[r].get(op, 0.0) for r in per_run]))
        table.append({"op": op, "us": us, "share": us / run_us if run_us else 0, "nodes": count[op]})
    table.sort(key=lambda x: -x["us"])
    kernels = sum(t["us"] for t in table)
    out = {"model": a.model, "run_us": run_us, "kernels_us": kernels, "outside_us": max(0.0, run_us - kernels),
           "ops": table}
    if a.nodes:
        slow = sorted(((float(np.median([d for d, _ in v])), k, v[0][1]) for k, v in node_time.items()), reverse=True)
        out["nodes"] = [{"node": k, "op": op, "us": us} for us, k, op in slow[:a.nodes]]
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{a.model}: ONNX Runtime {ort.__version__}, {a.threads} threads, run {run_us:.1f} us (median of {len(runs)})")
    if a.nodes:
        for n in out["nodes"]:
            print(f"{n['us']:10.1f} us  {n['op']:<20} {n['node']}")
    else:
        print(f"{'op':<24} {'us':>10} {'share':>7} {'nodes':>6}")
        for t in table:
            print(f"{t['op']:<24} {t['us']:10.1f} {100 * t['share']:6.1f}% {t['nodes']:6d}")
    print(f"kernels {kernels:.1f} us, outside kernels {out['outside_us']:.1f} us")


if __name__ == "__main__":
    main()
