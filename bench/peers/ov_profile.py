"""OpenVINO's per-node profile of a model, to put beside `basin profile`.

Compiles the model for the CPU at --precision (f32, the default; `default`: OpenVINO's
own choice, bf16 on a CPU with AVX512-BF16 or AMX, read back and printed), the given threads
and performance counters on, runs it N times, then prints each executed node's time
(the fastest of the runs), its layer type and the primitive OpenVINO chose (e.g.
jit_avx512_FP32, brgconv_avx2_FP32), slowest first; --types sums them per layer type.

    .cache/peers/bin/python bench/peers/ov_profile.py MODEL.onnx [--input in0.npy ...] [--threads 2]
        [--runs 20] [--nodes 30] [--types] [--json] [--precision f32|default]
"""
import argparse
import collections
import json

import numpy as np
import openvino as ov


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=30, help="the N slowest nodes (0: all)")
    ap.add_argument("--types", action="store_true", help="sum the nodes' times per layer type")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--precision", choices=["f32", "default"], default="f32",
                    help="f32 (forced) or OpenVINO's default (bf16 where the CPU has it)")
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": a.threads, "NUM_STREAMS": 1, "PERF_COUNT": True,
              "PERFORMANCE_HINT": "LATENCY"}
    if a.precision == "f32":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = core.compile_model(a.model, "CPU", config)
    precision = str(compiled.get_property("INFERENCE_PRECISION_HINT")).replace("<Type: '", "").replace("'>", "")
    feed = []
    for i, inp in enumerate(compiled.inputs):
        if i < len(a.input):
            feed.append(np.load(a.input[i]))
        else:
            shape = [d.get_length() if d.is_static else 1 for d in inp.get_partial_shape()]
            feed.append(np.random.default_rng(i).random(shape).astype(np.float32))
    req = compiled.create_infer_request()
    for _ in range(2):
        req.infer(feed)
    best = {}
    run_us = []
    for _ in range(a.runs):
        req.infer(feed)
        run_us.append(req.latency * 1e3)  # ms -> us
        for p in req.profiling_info:
            if p.status != p.Status.EXECUTED:
                continue
            us = p.real_time.total_seconds() * 1e6
            prev = best.get(p.node_name)
            if prev is None or us < prev["us"]:
                best[p.node_name] = {"node": p.node_name, "type": p.node_type, "exec": p.exec_type, "us": us}
    nodes = sorted(best.values(), key=lambda n: -n["us"])
    kernels = sum(n["us"] for n in nodes)
    out = {"model": a.model, "precision": precision, "run_us": float(np.min(run_us)), "kernels_us": kernels,
           "nodes": nodes}
    types = collections.defaultdict(lambda: {"us": 0.0, "nodes": 0})
    for n in nodes:
        types[n["type"]]["us"] += n["us"]
        types[n["type"]]["nodes"] += 1
    out["types"] = sorted(({"type": t, **v} for t, v in types.items()), key=lambda x: -x["us"])
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{a.model}: OpenVINO {ov.get_version()}, {precision}, {a.threads} threads, fastest run {out['run_us']:.1f} us "
          f"of {a.runs}; node times are each node's fastest")
    if a.types:
        print(f"{'type':<24} {'us':>10} {'nodes':>6}")
        for t in out["types"]:
            print(f"{t['type']:<24} {t['us']:10.1f} {t['nodes']:6d}")
    else:
        for n in nodes[:a.nodes or len(nodes)]:
            print(f"{n['us']:10.1f} us  {n['type']:<16} {n['exec']:<24} {n['node']}")
    print(f"nodes {kernels:.1f} us in all")


if __name__ == "__main__":
    main()
