#!/usr/bin/env python3
"""TVM MetaSchedule's network tuning on one model: the outside peer of the network-level
search curves (bench/search_network.py --peer metaschedule). Run with the peers' Python
(bench/peers/setup.sh installs apache-tvm); it writes one JSON file:

    .cache/peers/bin/python bench/peers/metaschedule_network.py --model resnet18 \\
        --trials 640 --threads 2 --seed 1 --out ms.json

The model is a name bench/models/export.py builds (torchvision's, random weights, batch
1; exported to ONNX, opset 17) or an ONNX file. TVM's Relax front end imports it; its
tasks are extracted as `tune_relax` extracts them (legalized, fused), and MetaSchedule's
task scheduler (gradient, evolutionary search, XGBoost cost model) tunes them for the
host's CPU named explicitly (its `-mcpu=native` becomes generic SSE2) up to --trials
programs in all. Every measured program is recorded as it comes back, and the curve is
the network's estimated latency (each task's best weighted by its launches, as basin's
scheduler estimates it) against seconds since the start, from the moment every task has
a measured program. The tuned network is then compiled from the database and timed with
TVM's time evaluator (the fastest of `--repeat` runs of 10 calls).
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from metaschedule import host_cpu  # noqa: E402


def onnx_of(model, work):
    """The model's ONNX file and its input: a file as it is (inputs random normal), or a
    name exported by bench/models/export.py."""
    import onnx
    if model.endswith(".onnx"):
        m = onnx.load(model)
        inputs = {}
        for i in m.graph.input:
            dims = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
            inputs[i.name] = np.random.default_rng(0).standard_normal(dims).astype("float32")
        return m, inputs
    import export
    import torch
    net, args = export.build(model)
    path = os.path.join(work, model + ".onnx")
    with torch.no_grad():
        export.export(net, args, path, "legacy")
    return onnx.load(path), {f"in{i}": a.numpy() for i, a in enumerate(args)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a name of bench/models/export.py, or an ONNX file")
    ap.add_argument("--trials", type=int, default=640, help="programs in all (max_trials_global)")
    ap.add_argument("--per-iter", type=int, default=16, help="programs per task per iteration (num_trials_per_iter)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", help="MetaSchedule's working folder, kept (default: a temporary one)")
    a = ap.parse_args()
    if a.trials <= 0 or a.per_iter <= 0:
        sys.exit("metaschedule_network.py: --trials and --per-iter must be positive")
    os.environ["TVM_NUM_THREADS"] = str(a.threads)

    import tvm
    from tvm import relax
    from tvm.ir.utils import derived_object
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or tmp
        os.makedirs(work, exist_ok=True)
        model, inputs = onnx_of(a.model, work)
        mod = from_onnx(model, shape_dict={k: v.shape for k, v in inputs.items()}, keep_params_in_input=True)
        mod, params = relax.frontend.detach_params(mod)
        # The weights, after the inputs among main's parameters, bound by name.
        weights_of = params.get("main", []) if params else []
        params = {p: v for p, v in zip(mod["main"].params[len(inputs):], weights_of)}
        mod = tvm.ir.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                           relax.transform.CanonicalizeBindings()])(mod)
        target = tvm.target.Target({"kind": "llvm", "mcpu": host_cpu(), "num-cores": a.threads})
        # The tasks of the module compile_relax builds from the database: bound, dispatched,
        # legalized and fused as it prepares it, so that the database's keys match.
        try:
            dispatch = relax.pipeline.library_dispatch_passes(target)
        except (ValueError, AttributeError):
            dispatch = []
        with target:
            fused = tvm.ir.transform.Sequential(
                [relax.transform.BindParams("main", params), *dispatch, relax.transform.LegalizeOps(),
                 relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(), relax.transform.FuseOps(),
                 relax.transform.FuseTIR()])(mod)
        extracted = ms.relax_integration.extract_tasks(fused, target)
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            extracted, work, seed=a.seed, num_threads=a.threads)
        names = [c.task_name for c in contexts]

        best = [None] * len(contexts)  # each task's fastest program so far, us
        curve = []  # (seconds, trials, estimated network us or None)
        trials = [0]
        t0 = time.time()

        @derived_object
        class Record(PyMeasureCallback):
            def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
                for r in runner_results:
                    trials[0] += 1
                    secs = [float(s) for s in r.run_secs] if r.run_secs else []
                    if secs and not r.error_msg:
                        us = 1e6 * min(secs)
                        if best[task_id] is None or us < best[task_id]:
                            best[task_id] = us
                est = None
                if all(b is not None for b in best):
                    est = sum(w * b for w, b in zip(weights, best))
                curve.append((time.time() - t0, trials[0], est))

        # A builder process spends about 27 s importing TVM's tensor intrinsics before its
        # first build: the default 30 s limit fails every build on a loaded host.
        builder = ms.builder.LocalBuilder(timeout_sec=300)
        db = ms.tune.tune_tasks(tasks=contexts, task_weights=weights, work_dir=work, max_trials_global=a.trials,
                                num_trials_per_iter=a.per_iter, builder=builder,
                                measure_callbacks=[Record()] + ms.measure_callback.MeasureCallback.create("default"))
        seconds = time.time() - t0
        ex = ms.relax_integration.compile_relax(db, mod, target, params)
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    args = [tvm.runtime.tensor(v, dev) for v in inputs.values()]
    ev = vm.time_evaluator("main", dev, number=10, repeat=a.repeat)
    measured_us = 1e6 * min(ev(*args).results)
    final = next((e for _, _, e in reversed(curve) if e is not None), None)
    json.dump({"peer": "metaschedule", "tvm": tvm.__version__, "model": os.path.basename(a.model).replace(".onnx", ""),
               "target": str(target), "threads": a.threads, "seed": a.seed, "tasks": names,
               "weights": [float(w) for w in weights], "trials": trials[0], "search_seconds": seconds,
               "estimated_us": final, "measured_us": measured_us, "curve": curve}, open(a.out, "w"), indent=1)
    print("metaschedule %s: %d tasks, %d trials in %.0f s, estimated %s us, measured %.1f us"
          % (a.model, len(names), trials[0], seconds, "none" if final is None else "%.1f" % final, measured_us))


if __name__ == "__main__":
    main()
