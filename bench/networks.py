"""bench/networks: whole networks, basin against the runtimes users already run, in one run.

For each model (exported from PyTorch to ONNX with random weights, batch 1, FP32), on the
same input and the same threads:

- basin untuned (every task on its first sketch's default program): `basin run`;
- basin tuned from an empty records file: `basin tune MODEL.onnx --budget` run in
  segments that resume one records file, the network timed after each (`basin run
  --records`), which gives the curve of latency against tuning seconds (on a machine the
  shipped estimator does not know, the first segment of a minute or more calibrates it
  first, as `basin tune` does for a user; docs/estimators.md, "A new machine");
- ONNX Runtime (intra_op_num_threads), OpenVINO (INFERENCE_PRECISION_HINT f32: its default
  on AVX-512-BF16 CPUs is bf16; INFERENCE_NUM_THREADS), PyTorch eager, torch.compile
  (default) and torch.compile with Inductor's `freezing` (its inference setting).

--precision bf16 compares what users run on a bfloat16 CPU: basin tunes, compiles and
runs with `--precision bf16`; OpenVINO runs at its default precision (read back from the
compiled model and printed: bf16 on AVX512-BF16 CPUs); PyTorch eager and torch.compile
run under `torch.autocast("cpu", dtype=torch.bfloat16)`; ONNX Runtime has no bfloat16
CPU path and runs float32. Each peer's precision is in results.json and the table.

--precision int8 compares what users deploy after quantizing: the exported model goes
through ONNX Runtime's `quantize_static` (QDQ format, its default int8 types, per-channel
weights, min-max calibration on --calibration-inputs seeded inputs), and ONNX Runtime,
OpenVINO (its default precision; where that refuses the file, its f32 hint, the
quantized operators still int8, "(default refused)" in its precision) and basin
(tuned on it) all run that one QDQ file;
PyTorch has no path for it and is left out. basin also quantizes the float model itself
(`basin quantize`, the same calibration inputs, per-channel int8 weights and uint8 inputs
of its convolutions and matrix products, min-max) and is tuned and timed on that file too:
the row "MODEL (basin quantize)", beside the same peers. Accuracy is against PyTorch eager in float32,
as for every precision.

Accuracy: besides the timing input, --accuracy-inputs further inputs (random, seeded;
none for a model with integer inputs, whose exported graphs specialise on the example's
token ids) run through every runtime; results.json and the
accuracy table give each one's max relative error against PyTorch eager in float32 over
them all, and for classifiers (an output [1, C]) on how many the top-1 class agrees.

Every output is compared with PyTorch eager's (max relative error: the largest absolute
difference over the largest magnitude). The host's speed drifts over minutes, so the
figures of the table and the plot come from a final head-to-head: the network compiled
untuned and after each segment (`basin compile` with the records as they were), then
--rounds rounds in which every peer and each of basin's networks run --repeat times in
turn; each keeps its fastest run over all rounds (the timings right after each segment
stay in results.json as `ms`). Writes results.json, table.md and curves.png (basin's
latency against tuning seconds, the peers as horizontal lines) to --out.

Run with the peers' Python (bench/peers/setup.sh):

    .cache/peers/bin/python bench/networks.py [--models resnet18,mobilenet_v2,...] [--budget 4m]
        [--segments 30s,1m,2m,4m] [--threads 2] [--repeat 30] [--rounds 5] [--out DIR] [--basin build/bin/basin]
        [--peers ort,openvino,eager,compile,compile_freezing] [--precision f32|bf16|int8] [--accuracy-inputs 8]
        [--calibration-inputs 8] [--batch 1]
        [--table-from results.json]

--batch N runs every model on N samples per inference (its first axis; float inputs drawn
again, token ids repeated), basin tuned and compiled for that shape, the peers on the same
file and input; the table adds each network's throughput (samples per second) beside the
latencies.

--table-from prints the table of an earlier run's results.json and draws its plot to --out.

--retime runs the final head-to-head again on the run in --out (its results.json, ONNX
files, inputs and compiled networks; --models picks some of its models): the peers built
again from the model, no tuning; each figure then keeps its fastest run over the earlier
rounds and these, as within one head-to-head. A host disturbed for minutes moves every
figure of a head-to-head that falls in it (the peers' too); results.json keeps the
earlier figures under `final_before_retime` and the table says when it was retimed.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "models"))

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "shufflenet_v2_x1_0", "transformer_layer",
          "dcgan", "bert"]
PEERS = ["ort", "openvino", "eager", "compile", "compile_freezing"]


def parse_seconds(s):
    s = s.strip()
    if s.endswith("m"):
        return float(s[:-1]) * 60
    if s.endswith("h"):
        return float(s[:-1]) * 3600
    return float(s.rstrip("s"))


def build(name):
    """The PyTorch model and its inputs."""
    import torch
    torch.manual_seed(0)
    if name == "transformer_layer":
        m = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True).eval()
        return m, (torch.randn(1, 64, 256, generator=torch.Generator().manual_seed(0)),)
    if name == "dcgan":
        nz, ngf = 100, 64
        L = torch.nn
        m = L.Sequential(
            L.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), L.BatchNorm2d(ngf * 8), L.ReLU(True),
            L.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), L.BatchNorm2d(ngf * 4), L.ReLU(True),
            L.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), L.BatchNorm2d(ngf * 2), L.ReLU(True),
            L.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), L.BatchNorm2d(ngf), L.ReLU(True),
            L.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), L.Tanh())
        import export
        with torch.no_grad():
            export.randomize_batch_norm(m)
        return m.eval(), (torch.randn(1, nz, 1, 1, generator=torch.Generator().manual_seed(0)),)
    import export
    return export.build(name)


def batched(args, batch):
    """The example inputs at `batch` samples: float inputs drawn again (standard normal,
    seeded), integer ones (token ids) repeated."""
    import torch
    if batch == 1:
        return args
    out = []
    for k, t in enumerate(args):
        shape = (batch,) + tuple(t.shape[1:])
        if t.dtype.is_floating_point:
            out.append(torch.randn(shape, generator=torch.Generator().manual_seed(500 + k), dtype=t.dtype))
        else:
            out.append(t[:1].repeat((batch,) + (1,) * (t.dim() - 1)))
    return tuple(out)


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return float("inf")
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-6))


def time_calls(fn, repeat):
    fn()
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3, float(np.median(ts)) * 1e3


def run_peer(peer, model, args, onnx_path, threads, repeat, precision):
    out, fn, infer, prec = make_peer(peer, model, args, onnx_path, threads, precision)
    return out, time_calls(fn, repeat), fn, infer, prec


def ort_session(onnx_path, threads, optimize=True):
    """ONNX Runtime on the CPU: `threads` intra-op threads, one inter-op, every graph
    optimization (none with optimize=False: a file's arithmetic as ONNX defines it)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])


def compile_openvino(core, onnx_path, config, precision):
    """OpenVINO's compiled model, and "" or what made it retry. OpenVINO 2026.4 refuses
    some QDQ files at its default bf16 on AMX hosts ("No suitable implementations"); at
    int8 it retries once with its f32 hint (the quantized operators still int8), says why
    on stderr and marks the precision "(default refused)": never a silent change."""
    try:
        return core.compile_model(onnx_path, "CPU", config), ""
    except RuntimeError as e:
        if precision != "int8" or "INFERENCE_PRECISION_HINT" in config:
            raise
        lines = [l for l in str(e).splitlines() if l.strip()]
        print(f"  openvino: its default refused {os.path.basename(onnx_path)} ({lines[-1] if lines else e}); "
              "retrying at its f32 hint", file=sys.stderr)
        retry = dict(config, INFERENCE_PRECISION_HINT="f32")
        return core.compile_model(onnx_path, "CPU", retry), " (default refused)"


def make_peer(peer, model, args, onnx_path, threads, precision):
    """The peer's output, a function that runs it once, one that runs it on other
    inputs (a tuple of tensors) and returns its output, and the precision it runs at."""
    import torch
    feeds = [a.numpy() for a in args]
    if peer == "ort":
        sess = ort_session(onnx_path, threads)
        names = [i.name for i in sess.get_inputs()]
        feed = dict(zip(names, feeds))
        out = sess.run(None, feed)[0]
        return out, lambda: sess.run(None, feed), \
            lambda xs: sess.run(None, {n: x.numpy() for n, x in zip(names, xs)})[0], \
            "int8" if precision == "int8" else "f32"
    if peer == "openvino":
        import openvino as ov
        core = ov.Core()
        config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
        if precision == "f32":
            config["INFERENCE_PRECISION_HINT"] = "f32"  # its default on a bfloat16 CPU is bf16
        cm, fallback = compile_openvino(core, onnx_path, config, precision)
        hint = str(cm.get_property("INFERENCE_PRECISION_HINT")).lower()  # "<type: 'bfloat16'>", "f32"
        prec = "bf16" if "bf" in hint else "f16" if ("f16" in hint or "float16" in hint) else \
            "f32" if ("f32" in hint or "float32" in hint) else hint
        if precision == "int8":  # the QDQ model's quantized operators run in int8, the rest at `prec`
            prec = "int8+" + prec + fallback
        req = cm.create_infer_request()
        out = req.infer(feeds)[cm.output(0)]
        return np.asarray(out), lambda: req.infer(feeds), \
            lambda xs: np.asarray(req.infer([x.numpy() for x in xs])[cm.output(0)]), prec
    torch.set_num_threads(threads)
    if peer == "eager":
        f = model
    else:
        import torch._inductor.config as ic
        ic.freezing = peer == "compile_freezing"
        torch._dynamo.reset()
        f = torch.compile(model)

    def infer(xs):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            return f(*xs).float().detach().numpy()
    out = infer(args)
    return out, lambda: infer(args), infer, precision


def calibration_sets(args, count):
    """`count` seeded inputs like `args` (standard normal); integer inputs calibrate on the
    example itself."""
    import torch
    return [args] if any(not a.dtype.is_floating_point for a in args) else [
        tuple(torch.randn(a.shape, generator=torch.Generator().manual_seed(2000 + k), dtype=a.dtype) for a in args)
        for k in range(count)]


def quantize_basin(basin, onnx_path, args, count, d):
    """`basin quantize` of the float model on the calibration sets quantize_qdq uses,
    beside it as NAME.basin_int8.onnx; RuntimeError with its message on failure."""
    out = onnx_path[:-len(".onnx")] + ".basin_int8.onnx"
    cmd = [basin, "quantize", onnx_path, "-o", out, "--quiet"]
    for k, xs in enumerate(calibration_sets(args, count)):
        files = []
        for i, x in enumerate(xs):
            files.append(os.path.join(d, f"cal{k}_in{i}.npy"))
            np.save(files[-1], x.numpy())
        cmd += ["--calibrate", ",".join(files)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError((p.stderr or p.stdout).strip()[-300:])
    return out


def quantize_qdq(onnx_path, args, count):
    """ONNX Runtime's static quantization of the model (QDQ, per-channel weights, min-max
    calibration on `count` seeded inputs like `args`; integer inputs calibrate on the
    example itself) beside it as NAME.qdq.onnx."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    names = [f"in{i}" for i in range(len(args))]
    sets = calibration_sets(args, count)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{n: x.numpy() for n, x in zip(names, xs)} for xs in sets])

        def get_next(self):
            return next(self.it, None)
    out = onnx_path[:-len(".onnx")] + ".qdq.onnx"
    quantize_static(onnx_path, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    return out


def rows_top1(got, ref):
    """(agreeing rows, rows) of a classifier's output [N, C]; (0, 0) for other outputs."""
    got, ref = np.asarray(got), np.asarray(ref)
    if ref.ndim != 2 or ref.shape[1] < 2 or got.shape != ref.shape:
        return 0, 0
    return int((got.argmax(1) == ref.argmax(1)).sum()), ref.shape[0]


def accuracy_inputs(args, count):
    """`count` further inputs like `args`, floats standard normal. A model with an integer
    input (token ids) gets none: the exported ONNX graphs of transformers specialise on
    the example's ids (ONNX Runtime in float32 differs from PyTorch by 0.6 on other ids),
    so every runtime's accuracy is measured on the example alone."""
    import torch
    if any(not a.dtype.is_floating_point for a in args):
        return []
    sets = []
    for k in range(count):
        g = torch.Generator().manual_seed(1000 + k)
        sets.append(tuple(torch.randn(a.shape, generator=g, dtype=a.dtype) for a in args))
    return sets


def accuracy(outputs, refs):
    """Max relative error over every input's output, and top-1 agreement."""
    err, agree, rows = 0.0, 0, 0
    for got, ref in zip(outputs, refs):
        err = max(err, rel_err(got, ref))
        a, n = rows_top1(got, ref)
        agree, rows = agree + a, rows + n
    r = {"max_rel_err": err, "inputs": len(refs)}
    if rows:
        r["top1_agree"], r["top1_rows"] = agree, rows
    return r


def basin_run(basin, onnx_path, inputs, records, threads, repeat, out_npy, precision="f32"):
    cmd = [basin, "run", onnx_path, "--json", "--quiet", "--repeat", str(repeat), "--output", out_npy]
    if precision != "f32":
        cmd += ["--precision", precision]
    for i in inputs:
        cmd += ["--input", i]
    if records:
        cmd += ["--records", records]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, BASIN_NUM_THREADS=str(threads)))
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    j = json.loads(p.stdout)
    if repeat <= 0:
        return {}
    return {"ms": j["latency_us"] / 1e3, "median_ms": j["median_latency_us"] / 1e3, "untuned": len(j.get("untuned_tasks", []))}


def basin_compile(basin, onnx_path, records, compiled, precision="f32"):
    """`basin compile` with the records as they are now (none: untuned); an error dict or
    the compile's JSON (kernels, bf16 kernels, its own accuracy check)."""
    cmd = [basin, "compile", onnx_path, "-o", compiled, "--quiet", "--json"] + \
        (["--records", records] if records else []) + (["--precision", precision] if precision != "f32" else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(p.stdout)


def basin_outputs(basin, compiled, sets, d, threads):
    """The compiled network's output on each input set (a tuple of tensors)."""
    outs = []
    for k, xs in enumerate(sets):
        files = []
        for i, x in enumerate(xs):
            files.append(os.path.join(d, f"acc{k}_in{i}.npy"))
            np.save(files[-1], x.numpy())
        out_npy = os.path.join(d, f"acc{k}_out.npy")
        b = basin_run(basin, compiled, files, None, threads, 0, out_npy)
        if "error" in b:
            raise RuntimeError(b["error"])
        outs.append(np.load(out_npy))
    return outs


def head_to_head(basin, inputs, fns, networks, threads, repeat, rounds):
    """Each peer (fns: name -> function) and each of basin's compiled networks (networks:
    label -> .basin file: untuned and after each tuning segment) timed in turn for `rounds`
    rounds of `repeat` runs; the fastest run of each over all rounds. The host's speed
    drifts over minutes: only figures of the same rounds compare."""
    best = {name: float("inf") for name in list(fns) + list(networks)}
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = min(best[name], time_calls(fn, repeat)[0])
        for label, compiled in networks.items():
            b = basin_run(basin, compiled, inputs, None, threads, repeat, compiled + ".npy")
            if "error" in b:
                return b
            best[label] = min(best[label], b["ms"])
    return best


def fastest_of_both(before, new, last):
    """Each figure of a head-to-head run again: its fastest over the earlier rounds
    (`before`) and the new ones, as within one head-to-head; basin's is the network after
    the last segment (`last`, e.g. "600s")."""
    both = {k: min(v, before[k]) if isinstance(v, (int, float)) and isinstance(before.get(k), (int, float)) else v
            for k, v in new.items()}
    both["basin"] = both[last]
    return both


def retime(a, peers, basin_precision):
    """--retime: each model of the earlier run in a.out (those of --models when given) timed
    again head to head with its peers and compiled networks, each figure the fastest of
    the earlier and the new rounds; results.json and table.md rewritten."""
    path = os.path.join(a.out, "results.json")
    if not os.path.exists(path):
        sys.exit(f"--retime: no earlier run in {a.out} (its results.json is missing)")
    with open(path) as f:
        run = json.load(f)
    if run["meta"].get("precision", "f32") == "int8":
        sys.exit("--retime: an int8 run's head-to-head is not retimed (its QDQ files are rebuilt by a run)")
    picked = set(a.models.split(",")) if a.models != ",".join(MODELS) else None
    for r in run["results"]:
        name = r["model"]
        if (picked and name not in picked) or "final" not in r or "error" in r["final"]:
            continue
        print(f"== {name} (retimed)", flush=True)
        d = os.path.join(a.out, name)
        onnx_path = os.path.join(d, f"{name}.onnx")
        model, args = build(name)
        args = batched(args, r.get("batch", 1))
        inputs = [os.path.join(d, f"in{i}.npy") for i in range(len(args))]
        fns = {}
        for p in peers:
            if "error" in r.get("peers", {}).get(p, {"error": ""}):
                continue
            fns[p] = run_peer(p, model, args, onnx_path, a.threads, 1, run["meta"].get("precision", "f32"))[2]
        networks = {}
        untuned = os.path.join(d, f"{name}.untuned.basin")
        if os.path.exists(untuned):
            networks["untuned"] = untuned
        for c in r.get("curve", []):
            if "compiled" in c:
                networks[f"{c['seconds']:.0f}s"] = c["compiled"]
        final = head_to_head(a.basin, inputs, fns, networks, a.threads, a.repeat, a.rounds)
        if "error" in final:
            print(f"  head-to-head failed: {final['error']}", flush=True)
            continue
        before = r["final"]
        final = fastest_of_both(before, final, f"{r['curve'][-1]['seconds']:.0f}s")
        r["final_before_retime"] = before
        r["final"] = final
        if "untuned" in final:
            r.setdefault("basin_untuned", {})["h2h_ms"] = final["untuned"]
        for c in r.get("curve", []):
            c["h2h_ms"] = final.get(f"{c['seconds']:.0f}s")
        r["retimed"] = time.strftime("%Y-%m-%d %H:%M")
        print(f"  head-to-head, the fastest of both: {final}", flush=True)
        with open(path, "w") as f:
            json.dump(run, f, indent=1)
    meta, results = run["meta"], run["results"]
    retimed = sorted({f"{r['model']} {r['retimed']}" for r in results if "retimed" in r})
    t = table(results, peers) + "\n\n" + accuracy_table(results)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(f"{meta['cpu']}, {meta['threads']} threads, tuning budget {meta['budget_s']:.0f} s, precision "
                f"{meta['precision']}, batch {meta['batch']}, {meta['date']}; head-to-head retimed: "
                f"{', '.join(retimed) or 'none'}\n\n{t}\n")
    plot(results, os.path.join(a.out, "curves.png"))
    print(t)


def basin_tune(basin, onnx_path, records, seconds, threads, precision="f32"):
    cmd = [basin, "tune", onnx_path, "--records", records, "--budget", f"{max(1, int(round(seconds)))}s", "--quiet", "--json"]
    if precision != "f32":
        cmd += ["--precision", precision]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, BASIN_NUM_THREADS=str(threads)))
    return time.time() - t0, p.returncode, (p.stderr.strip().splitlines() or [""])[-1][:300]


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    n = len(results)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for ax, r in zip(axes.flat, results):
        u = r.get("basin_untuned", {})
        curve = [(0, u.get("h2h_ms") or u.get("ms"))] + \
                [(c["seconds"], c.get("h2h_ms") or c.get("ms")) for c in r.get("curve", [])]
        curve = [(s, ms) for s, ms in curve if ms is not None]
        if curve:
            ax.plot([c[0] for c in curve], [c[1] for c in curve], "o-", label="basin", color="black")
        # The peers from the same head-to-head as basin's points where there is one.
        final = r.get("final", {})
        for peer, v in r.get("peers", {}).items():
            ms = final.get(peer) if isinstance(final.get(peer), (int, float)) else v.get("ms")
            if ms is not None:
                ax.axhline(ms, linestyle="--", linewidth=1, label=peer, color=f"C{PEERS.index(peer) if peer in PEERS else 0}")
        ax.set_title(r["model"])
        ax.set_xlabel("tuning seconds")
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def table(results, peers):
    """The head-to-head's figures where there are (older results: the first timings): basin
    untuned and after each tuning segment, each peer, and the best peer over basin at the end."""
    marks = []
    for r in results:
        for c in r.get("curve", []):
            if c["seconds"] not in marks:
                marks.append(c["seconds"])
    marks.sort()
    prec = {}
    for r in results:
        for p, v in r.get("peers", {}).items():
            prec.setdefault(p, v.get("precision"))
    # Batches of several samples: each network's throughput too (samples per second).
    batch = max([r.get("batch", 1) for r in results] or [1])
    thr = " | basin (samples/s) | best peer (samples/s)" if batch > 1 else ""
    head = "| model | basin untuned (ms) | " + " | ".join(f"basin after {m:.0f} s (ms)" for m in marks) + " | " + \
           " | ".join(f"{p}{' ' + prec[p] if prec.get(p) else ''} (ms)" for p in peers) + thr + \
           " | best peer / basin | max rel. error vs PyTorch (basin) |"
    rows = [head, "|" + "---|" * (4 + len(marks) + len(peers) + (2 if batch > 1 else 0))]
    for r in results:
        tuned = dict(r.get("basin_tuned", {}))
        final = r.get("final", {})
        if "basin" in final:
            tuned["ms"] = final["basin"]
        at = {c["seconds"]: c.get("h2h_ms") or c.get("ms") for c in r.get("curve", [])}
        segs = " | ".join(f"{at[m]:.2f}" if at.get(m) else "-" for m in marks)
        peer_ms = {}
        for p, v in r.get("peers", {}).items():
            if v.get("ms") is not None:
                peer_ms[p] = final.get(p, v["ms"])
        best = min(list(peer_ms.values()) or [float("nan")])
        ratio = best / tuned["ms"] if tuned.get("ms") else float("nan")
        cells = []
        for p in peers:
            v = r.get("peers", {}).get(p, {})
            cells.append(f"{peer_ms[p]:.2f}" if p in peer_ms else ("error" if "error" in v else "-"))
        if batch > 1:
            n = r.get("batch", 1)
            rate = lambda ms: f"{n * 1e3 / ms:.1f}" if ms and ms == ms else "-"
            cells += [rate(tuned.get("ms")), rate(best)]
        unt = r.get("basin_untuned", {})
        rows.append(f"| {r['model']} | {unt.get('h2h_ms') or unt.get('ms', float('nan')):.2f} | {segs} | " +
                    " | ".join(cells) + f" | {ratio:.2f} | {tuned.get('err', unt.get('err', float('nan'))):.1e} |")
    return "\n".join(rows)


def accuracy_table(results):
    """Each runtime's precision, max relative error against PyTorch eager in float32 over
    the accuracy inputs, and top-1 agreement for classifiers."""
    rows = ["| model | runtime | precision | max rel. error vs f32 | top-1 agrees |", "|---|---|---|---|---|"]

    def row(model, name, prec, acc):
        if not acc or "error" in acc:
            rows.append(f"| {model} | {name} | {prec} | {(acc or {}).get('error', '-')} | - |")
            return
        top1 = f"{acc['top1_agree']}/{acc['top1_rows']}" if "top1_rows" in acc else "-"
        rows.append(f"| {model} | {name} | {prec} | {acc['max_rel_err']:.1e} | {top1} |")
    for r in results:
        c = r.get("basin_tuned", {})
        prec = "f32" if not c.get("bf16_kernels") else f"bf16 ({c['bf16_kernels']} of {c['kernels']} kernels)"
        if r.get("quantized"):
            prec = f"int8 ({c.get('int8_kernels', '?')} of {c.get('kernels', '?')} kernels)"
        row(r["model"], "basin", prec, r.get("basin_accuracy"))
        for p, v in r.get("peers", {}).items():
            row(r["model"], p, v.get("precision", "-"), v.get("accuracy"))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--budget", default="4m")
    ap.add_argument("--segments", default="", help="cumulative tuning seconds at which the network is timed "
                                                  "(default: 30s, then doubling up to the budget)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the final head-to-head (0: none)")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--out", default="bench-results/networks")
    ap.add_argument("--basin", default=os.path.join(ROOT, "build", "bin", "basin"))
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "int8"],
                    help="bf16: basin --precision bf16, OpenVINO at its default, PyTorch under bf16 autocast; "
                         "int8: every runtime on ONNX Runtime's quantize_static QDQ model")
    ap.add_argument("--calibration-inputs", type=int, default=8, help="int8: the calibration inputs")
    ap.add_argument("--accuracy-inputs", type=int, default=8, help="further inputs of the accuracy check (0: none)")
    ap.add_argument("--batch", type=int, default=1,
                    help="samples per inference (every model's first axis): the table adds throughput columns")
    ap.add_argument("--table-from", metavar="RESULTS_JSON")
    ap.add_argument("--retime", action="store_true",
                    help="the final head-to-head again on the run in --out, without tuning")
    a = ap.parse_args()
    if a.batch < 1:
        ap.error(f"--batch must be at least 1, got {a.batch}")
    os.makedirs(a.out, exist_ok=True)
    peers = [p for p in a.peers.split(",") if p]
    if a.precision == "int8":
        dropped = [p for p in peers if p not in ("ort", "openvino")]
        peers = [p for p in peers if p in ("ort", "openvino")]
        if dropped:
            print(f"int8: {', '.join(dropped)} have no path for a QDQ model and are left out", flush=True)
    # basin's --precision: the QDQ model is int8 by its own operators.
    basin_precision = "f32" if a.precision == "int8" else a.precision
    if a.table_from:
        with open(a.table_from) as f:
            results = json.load(f)["results"]
        print(table(results, peers))
        print()
        print(accuracy_table(results))
        plot(results, os.path.join(a.out, "curves.png"))
        return
    import torch
    import warnings
    warnings.filterwarnings("ignore")
    torch.backends.mha.set_fastpath_enabled(False)
    if a.retime:
        retime(a, peers, basin_precision)
        return
    budget = parse_seconds(a.budget)
    if a.segments:
        marks = [parse_seconds(s) for s in a.segments.split(",")]
    else:
        marks, t = [], 30.0
        while t < budget:
            marks.append(t)
            t *= 2
        marks.append(budget)
    sys.path.insert(0, os.path.join(HERE, "peers"))
    import versions
    from machine import cpu_model
    meta = {"cpu": cpu_model(), "threads": a.threads, "budget_s": budget, "peers": versions.versions(),
            "precision": a.precision, "batch": a.batch, "date": time.strftime("%Y-%m-%d %H:%M")}
    results = []
    for name in a.models.split(","):
        r = {"model": name, "batch": a.batch}
        print(f"== {name}" + (f" (batch {a.batch})" if a.batch > 1 else ""), flush=True)
        try:
            model, args = build(name)
            args = batched(args, a.batch)
        except Exception as e:  # an unknown name or a failed build is reported, not fatal
            r["error"] = "build: " + (type(e).__name__ + ": " + str(e))[:300]
            results.append(r)
            print(f"  {r['error']}", flush=True)
            continue
        with torch.no_grad():
            ref = model(*args)
        ref = ref.detach().numpy()
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        onnx_path = os.path.join(d, f"{name}.onnx")
        inputs = []
        for i, t in enumerate(args):
            inputs.append(os.path.join(d, f"in{i}.npy"))
            np.save(inputs[-1], t.numpy())
        names = [f"in{i}" for i in range(len(args))]
        try:
            torch.onnx.export(model, args, onnx_path, dynamo=False, opset_version=17, input_names=names,
                              output_names=["out"])
            r["exporter"] = "legacy"
        except Exception as e:  # the legacy exporter fails on some modules: the dynamo one
            print(f"  legacy export failed ({type(e).__name__}); exporting with dynamo=True", flush=True)
            try:
                torch.onnx.export(model, args, onnx_path, dynamo=True, opset_version=18, input_names=names,
                                  output_names=["out"], external_data=False)
                r["exporter"] = "dynamo"
            except Exception as e2:
                r["error"] = "export: " + (type(e2).__name__ + ": " + str(e2))[:300]
                results.append(r)
                print(f"  export failed: {r['error']}", flush=True)
                continue
        float_path = onnx_path
        if a.precision == "int8":
            r["quantized"] = True  # basin runs the QDQ model as it is
            try:
                onnx_path = quantize_qdq(onnx_path, args, a.calibration_inputs)
            except Exception as e:
                r["error"] = "quantize_static: " + (type(e).__name__ + ": " + str(e))[:300]
                results.append(r)
                print(f"  {r['error']}", flush=True)
                continue
        sets = accuracy_inputs(args, a.accuracy_inputs)
        with torch.no_grad():
            refs = [ref] + [model(*xs).detach().numpy() for xs in sets]
        fns = {}
        # int8: basin runs the runtimes' QDQ file, then its own quantization of the float
        # model (`basin quantize`, the same calibration inputs) as a row of its own.
        variants = [(r, onnx_path)]
        if a.precision == "int8":
            try:
                own = quantize_basin(a.basin, float_path, args, a.calibration_inputs, d)
                variants.append(({"model": f"{name} (basin quantize)", "batch": a.batch, "quantized": True, "own": True},
                                 own))
            except RuntimeError as e:
                r["own_error"] = str(e)[:300]
                print(f"  basin quantize failed: {r['own_error']}", flush=True)
        for r, onnx_path in variants:
            for p in (peers if not r.get("own") else []):
                try:
                    out, (ms, med), fns[p], infer, prec = run_peer(p, model, args, onnx_path, a.threads, a.repeat,
                                                                   a.precision)
                    r.setdefault("peers", {})[p] = {"ms": ms, "median_ms": med, "err": rel_err(out, ref),
                                                    "precision": prec,
                                                    "accuracy": accuracy([out] + [infer(xs) for xs in sets], refs)}
                except Exception as e:  # a peer that fails is reported, not fatal
                    r.setdefault("peers", {})[p] = {"error": (type(e).__name__ + ": " + str(e))[:300]}
                print(f"  {p}: {r['peers'][p]}", flush=True)
            if r.get("own"):
                r["peers"] = variants[0][0].get("peers", {})
            tag = "own." if r.get("own") else ""
            out_npy = os.path.join(d, f"{tag}basin.npy")
            u = basin_run(a.basin, onnx_path, inputs, None, a.threads, a.repeat, out_npy, basin_precision)
            if "ms" in u:
                u["err"] = rel_err(np.load(out_npy), ref)
            r["basin_untuned"] = u
            print(f"  basin untuned: {u}", flush=True)
            records = os.path.join(d, f"{tag}records.db")
            for f in (records, records + "-wal", records + "-shm"):
                if os.path.exists(f):
                    os.remove(f)
            spent, curve = 0.0, []
            for mark in marks:
                if "error" in u:
                    break
                wall, rc, tail = basin_tune(a.basin, onnx_path, records, mark - spent, a.threads, basin_precision)
                spent = mark
                c = basin_run(a.basin, onnx_path, inputs, records, a.threads, a.repeat, out_npy, basin_precision)
                c["seconds"], c["wall_seconds"], c["tune_rc"] = mark, wall, rc
                if rc not in (0, 4):
                    c["tune_error"] = tail
                if "ms" in c:
                    c["err"] = rel_err(np.load(out_npy), ref)
                    c["compiled"] = os.path.join(d, f"{tag}{name}.{mark:.0f}s.basin")
                    compiled = basin_compile(a.basin, onnx_path, records, c["compiled"], basin_precision)
                    if "error" in compiled:
                        c.pop("compiled")
                        c["compile_error"] = compiled["error"]
                    else:
                        c["kernels"], c["bf16_kernels"] = compiled["kernels"], compiled.get("bf16_kernels", 0)
                        c["int8_kernels"] = compiled.get("int8_kernels", 0)
                        c["basin_accuracy_check"] = compiled.get("accuracy")
                curve.append(c)
                print(f"  basin after {mark:.0f}s: {c}", flush=True)
            r["curve"] = curve
            r["tuning_seconds"] = spent
            if curve:
                r["basin_tuned"] = curve[-1]
                if a.rounds > 0 and "compiled" in curve[-1]:
                    networks = {}
                    untuned = os.path.join(d, f"{tag}{name}.untuned.basin")
                    if "error" not in basin_compile(a.basin, onnx_path, None, untuned, basin_precision):
                        networks["untuned"] = untuned
                    for c in curve:
                        if "compiled" in c:
                            networks[f"{c['seconds']:.0f}s"] = c["compiled"]
                    final = head_to_head(a.basin, inputs, fns, networks, a.threads, a.repeat, a.rounds)
                    if "error" not in final:
                        final["basin"] = final[f"{curve[-1]['seconds']:.0f}s"]
                        if "untuned" in final:
                            u["h2h_ms"] = final["untuned"]
                        for c in curve:
                            c["h2h_ms"] = final.get(f"{c['seconds']:.0f}s")
                    r["final"] = final
                    print(f"  head-to-head: {r['final']}", flush=True)
                if "compiled" in curve[-1]:
                    try:
                        outs = basin_outputs(a.basin, curve[-1]["compiled"], sets, d, a.threads)
                        r["basin_accuracy"] = accuracy([np.load(out_npy)] + outs, refs)
                    except RuntimeError as e:
                        r["basin_accuracy"] = {"error": str(e)[:300]}
                    print(f"  basin accuracy: {r['basin_accuracy']}", flush=True)
            results.append(r)
            with open(os.path.join(a.out, "results.json"), "w") as f:
                json.dump({"meta": meta, "results": results}, f, indent=1)
    t = table(results, peers) + "\n\n" + accuracy_table(results)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(f"{meta['cpu']}, {a.threads} threads, tuning budget {a.budget}, precision {a.precision}, "
                f"batch {a.batch}, {meta['date']}\n\n{t}\n")
    plot(results, os.path.join(a.out, "curves.png"))
    print(t)


if __name__ == "__main__":
    main()
