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
        [--peers ort,openvino,eager,compile,compile_freezing] [--table-from results.json]

--table-from prints the table of an earlier run's results.json and draws its plot to --out.
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


def run_peer(peer, model, args, onnx_path, threads, repeat):
    out, fn = make_peer(peer, model, args, onnx_path, threads)
    return out, time_calls(fn, repeat), fn


def make_peer(peer, model, args, onnx_path, threads):
    """The peer's output and a function that runs it once."""
    import torch
    feeds = [a.numpy() for a in args]
    if peer == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        feed = {i.name: x for i, x in zip(sess.get_inputs(), feeds)}
        out = sess.run(None, feed)[0]
        return out, lambda: sess.run(None, feed)
    if peer == "openvino":
        import openvino as ov
        core = ov.Core()
        cm = core.compile_model(onnx_path, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads,
                                                   "PERFORMANCE_HINT": "LATENCY"})
        req = cm.create_infer_request()
        out = req.infer(feeds)[cm.output(0)]
        return np.asarray(out), lambda: req.infer(feeds)
    torch.set_num_threads(threads)
    if peer == "eager":
        f = model
    else:
        import torch._inductor.config as ic
        ic.freezing = peer == "compile_freezing"
        torch._dynamo.reset()
        f = torch.compile(model)
    with torch.no_grad():
        out = f(*args)

    def call():
        with torch.no_grad():
            f(*args)
    return out.detach().numpy(), call


def basin_run(basin, onnx_path, inputs, records, threads, repeat, out_npy):
    cmd = [basin, "run", onnx_path, "--json", "--quiet", "--repeat", str(repeat), "--output", out_npy]
    for i in inputs:
        cmd += ["--input", i]
    if records:
        cmd += ["--records", records]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, BASIN_NUM_THREADS=str(threads)))
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    j = json.loads(p.stdout)
    return {"ms": j["latency_us"] / 1e3, "median_ms": j["median_latency_us"] / 1e3, "untuned": len(j.get("untuned_tasks", []))}


def basin_compile(basin, onnx_path, records, compiled):
    """`basin compile` with the records as they are now (none: untuned); an error dict or None."""
    cmd = [basin, "compile", onnx_path, "-o", compiled, "--quiet"] + (["--records", records] if records else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]} if p.returncode != 0 else None


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


def basin_tune(basin, onnx_path, records, seconds, threads):
    cmd = [basin, "tune", onnx_path, "--records", records, "--budget", f"{max(1, int(round(seconds)))}s", "--quiet", "--json"]
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
        u = r["basin_untuned"]
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
    head = "| model | basin untuned (ms) | " + " | ".join(f"basin after {m:.0f} s (ms)" for m in marks) + " | " + \
           " | ".join(f"{p} (ms)" for p in peers) + " | best peer / basin | max rel. error vs PyTorch (basin) |"
    rows = [head, "|" + "---|" * (4 + len(marks) + len(peers))]
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
        unt = r.get("basin_untuned", {})
        rows.append(f"| {r['model']} | {unt.get('h2h_ms') or unt.get('ms', float('nan')):.2f} | {segs} | " +
                    " | ".join(cells) + f" | {ratio:.2f} | {tuned.get('err', unt.get('err', float('nan'))):.1e} |")
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
    ap.add_argument("--table-from", metavar="RESULTS_JSON")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    peers = [p for p in a.peers.split(",") if p]
    if a.table_from:
        with open(a.table_from) as f:
            results = json.load(f)["results"]
        print(table(results, peers))
        plot(results, os.path.join(a.out, "curves.png"))
        return
    import torch
    import warnings
    warnings.filterwarnings("ignore")
    torch.backends.mha.set_fastpath_enabled(False)
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
            "date": time.strftime("%Y-%m-%d %H:%M")}
    results = []
    for name in a.models.split(","):
        r = {"model": name}
        print(f"== {name}", flush=True)
        model, args = build(name)
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
        fns = {}
        for p in peers:
            try:
                out, (ms, med), fns[p] = run_peer(p, model, args, onnx_path, a.threads, a.repeat)
                r.setdefault("peers", {})[p] = {"ms": ms, "median_ms": med, "err": rel_err(out, ref)}
            except Exception as e:  # a peer that fails is reported, not fatal
                r.setdefault("peers", {})[p] = {"error": (type(e).__name__ + ": " + str(e))[:300]}
            print(f"  {p}: {r['peers'][p]}", flush=True)
        out_npy = os.path.join(d, "basin.npy")
        u = basin_run(a.basin, onnx_path, inputs, None, a.threads, a.repeat, out_npy)
        if "ms" in u:
            u["err"] = rel_err(np.load(out_npy), ref)
        r["basin_untuned"] = u
        print(f"  basin untuned: {u}", flush=True)
        records = os.path.join(d, "records.db")
        for f in (records, records + "-wal", records + "-shm"):
            if os.path.exists(f):
                os.remove(f)
        spent, curve = 0.0, []
        for mark in marks:
            if "error" in u:
                break
            wall, rc, tail = basin_tune(a.basin, onnx_path, records, mark - spent, a.threads)
            spent = mark
            c = basin_run(a.basin, onnx_path, inputs, records, a.threads, a.repeat, out_npy)
            c["seconds"], c["wall_seconds"], c["tune_rc"] = mark, wall, rc
            if rc not in (0, 4):
                c["tune_error"] = tail
            if "ms" in c:
                c["err"] = rel_err(np.load(out_npy), ref)
                c["compiled"] = os.path.join(d, f"{name}.{mark:.0f}s.basin")
                failed = basin_compile(a.basin, onnx_path, records, c["compiled"])
                if failed:
                    c.pop("compiled")
                    c["compile_error"] = failed["error"]
            curve.append(c)
            print(f"  basin after {mark:.0f}s: {c}", flush=True)
        r["curve"] = curve
        r["tuning_seconds"] = spent
        if curve:
            r["basin_tuned"] = curve[-1]
            if a.rounds > 0 and "compiled" in curve[-1]:
                networks = {}
                untuned = os.path.join(d, f"{name}.untuned.basin")
                if basin_compile(a.basin, onnx_path, None, untuned) is None:
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
        results.append(r)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    t = table(results, peers)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(f"{meta['cpu']}, {a.threads} threads, tuning budget {a.budget}, {meta['date']}\n\n{t}\n")
    plot(results, os.path.join(a.out, "curves.png"))
    print(t)


if __name__ == "__main__":
    main()
