#!/usr/bin/env python3
"""TVM MetaSchedule on one of basin's benchmark workloads: the outside baseline of the
search benchmark (bench/search.py --peer metaschedule). Run with the peers' Python
(bench/peers/setup.sh installs apache-tvm); it writes one JSON file:

    .cache/peers/bin/python bench/peers/metaschedule.py --workload resnet18-c6 \\
        --trials 1000 --threads 2 --out ms.json

The operator is built in TVM's tensor expressions from the workload's parameters as
`basin workloads --json` names them (conv2d NCHW/OIHW with padding and stride; matmul,
dense and batch_matmul as basin defines them), float32. MetaSchedule tunes it for the
host's CPU named explicitly (its `-mcpu=native` becomes generic SSE2), on the given
threads; every measured program is recorded as it comes back (seconds since the start,
the trial, its latency), and the best program is timed again at the end with TVM's
time evaluator. The curve is what MetaSchedule measured; the final figure is re-timed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np


def host_cpu():
    """LLVM's name for this CPU (`llc-16 --version`): TVM's `-mcpu=native` does not resolve."""
    out = subprocess.run(["llc-16", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Host CPU:\s*(\S+)", out)
    if not m:
        sys.exit("metaschedule.py: llc-16 --version names no host CPU")
    return m.group(1)


def workload(basin, name):
    out = subprocess.run([basin, "workloads", "--json"], capture_output=True, text=True, check=True).stdout
    for w in json.loads(out)["workloads"]:
        if w["name"] == name:
            return w["op"], {k: int(v) for k, v in w["params"].items() if re.fullmatch(r"-?\d+", v)}
    sys.exit("metaschedule.py: no workload '%s' (basin workloads)" % name)


def compute(op, p):
    from tvm import te, topi

    if op == "conv2d":
        n, c, h, w = p.get("batch", 1), p["in_channels"], p["height"], p["width"]
        k, o = p["kernel"], p["out_channels"]
        s, pad = p.get("stride", 1), p.get("padding", 0)
        x = te.placeholder((n, c, h, w), name="x")
        wt = te.placeholder((o, c, k, k), name="w")
        y = topi.nn.conv2d_nchw(x, wt, (s, s), (pad, pad), (1, 1))
        return [x, wt, y], 2.0 * n * o * int(y.shape[2]) * int(y.shape[3]) * c * k * k
    if op in ("matmul", "dense"):
        m, nn, kk = p["M"], p["N"], p["K"]
        a = te.placeholder((m, kk), name="a")
        b = te.placeholder((kk, nn) if op == "matmul" else (nn, kk), name="b")
        r = te.reduce_axis((0, kk), name="k")
        if op == "matmul":
            y = te.compute((m, nn), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="y")
        else:
            y = te.compute((m, nn), lambda i, j: te.sum(a[i, r] * b[j, r], axis=r), name="y")
        return [a, b, y], 2.0 * m * nn * kk
    if op == "batch_matmul":
        bb, m, nn, kk = p["B"], p["M"], p["N"], p["K"]
        a = te.placeholder((bb, m, kk), name="a")
        b = te.placeholder((bb, kk, nn), name="b")
        r = te.reduce_axis((0, kk), name="k")
        y = te.compute((bb, m, nn), lambda q, i, j: te.sum(a[q, i, r] * b[q, r, j], axis=r), name="y")
        return [a, b, y], 2.0 * bb * m * nn * kk
    sys.exit("metaschedule.py: operator '%s' is not built here (conv2d, matmul, dense, batch_matmul)" % op)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", help="MetaSchedule's working folder, kept (default: a temporary one)")
    ap.add_argument("--basin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                    "build", "bin", "basin"))
    a = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(a.threads)

    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    op, params = workload(a.basin, a.workload)
    tensors, flops = compute(op, params)
    func = te.create_prim_func(tensors)
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    cpu = host_cpu()
    target = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": a.threads})

    curve = []  # (seconds, trial, latency_us) per measured program
    t0 = time.time()

    @derived_object
    class Record(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            for r in runner_results:
                secs = [float(s) for s in r.run_secs] if r.run_secs else []
                us = 1e6 * min(secs) if secs and not r.error_msg else None
                curve.append((time.time() - t0, len(curve) + 1, us))

    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or tmp
        # A builder process spends about 27 s importing TVM's tensor intrinsics before
        # its first build: the default 30 s limit fails every build on a loaded host.
        builder = ms.builder.LocalBuilder(timeout_sec=300)
        db = ms.tune_tir(mod, target, work, a.trials, num_trials_per_iter=64, seed=a.seed,
                         num_tuning_cores=a.threads, builder=builder,
                         measure_callbacks=[Record()] + ms.measure_callback.MeasureCallback.create("default"))
        seconds = time.time() - t0
        sch = ms.tir_integration.compile_tir(db, mod, target)
        lib = tvm.compile(sch.mod, target=target)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(np.random.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32"), dev)
            for t in tensors]
    rt = lib.mod if hasattr(lib, "mod") else lib
    ev = rt.time_evaluator("main", dev, number=10, repeat=5, min_repeat_ms=200)
    final_us = 1e6 * min(ev(*args).results)
    best = None
    out_curve = []
    for s, trial, us in curve:
        if us is not None and (best is None or us < best):
            best = us
        out_curve.append([s, trial, best])
    json.dump({"peer": "metaschedule", "tvm": tvm.__version__, "workload": a.workload, "target": str(target),
               "threads": a.threads, "trials": len(curve), "seconds": seconds, "flops": flops,
               "best_us": best, "final_us": final_us, "final_gflops": flops / final_us / 1e3, "curve": out_curve},
              open(a.out, "w"), indent=1)
    print("metaschedule %s: %d trials in %.0f s, best %.1f us measured, %.1f us re-timed (%.1f GFLOP/s)"
          % (a.workload, len(curve), seconds, best or float("nan"), final_us, flops / final_us / 1e3))


if __name__ == "__main__":
    main()
