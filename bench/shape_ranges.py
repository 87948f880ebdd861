"""bench/shape_ranges: one compiled network for every sequence length, against the
runtimes that run a dynamic model, in one run.

For each model (BERT-base, and a GPT-2-style decoder's prefill: GPT2Model, 12 layers;
Hugging Face models built from their configs, random weights seeded, eager attention),
exported once to ONNX with a dynamic `sequence_length` axis (inputs input_ids and
attention_mask; TorchScript exporter, opset 17):

- basin: ONE tuning run (`basin tune MODEL --shape sequence_length=LO..HI --budget`, from
  an empty records file) and ONE compiled file (`basin compile ... --shape
  sequence_length=LO..HI`), its shape buckets behind one dispatcher;
- ONNX Runtime (one session of the dynamic model, intra_op_num_threads) and OpenVINO
  (one compiled model of the dynamic model, INFERENCE_PRECISION_HINT f32,
  INFERENCE_NUM_THREADS) run every length from that one loaded model.

--records FILE compiles from an earlier run's records instead of tuning (the tuning's
figures are then that run's); --baseline FILE times another compiled network of the
same model and range beside basin's (an earlier build's: a change's worth, at lengths
between the buckets' extents too), its column `baseline`.

Each length of --lengths is then timed in a head-to-head: --rounds rounds in which every
runtime runs --repeat times in turn, each keeping its fastest run; every output is
compared with PyTorch eager's at that length (max relative error: the largest absolute
difference over the largest magnitude). Writes results.json and table.md to --out.

Run with the peers' Python (bench/peers/setup.sh):

    .cache/peers/bin/python bench/shape_ranges.py [--models bert,gpt2] [--range 1..512]
        [--lengths 8,32,128,384] [--budget 10m] [--threads 2] [--repeat 20] [--rounds 3]
        [--peers ort,openvino] [--out DIR] [--basin build/bin/basin] [--records FILE]
        [--baseline FILE.basin]
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from networks import ort_session, parse_seconds, rel_err, time_calls  # noqa: E402


def build(name):
    """The PyTorch model (input_ids, attention_mask) -> last hidden state, and its vocabulary."""
    import torch
    import transformers as tf
    torch.manual_seed(0)
    if name == "bert":
        cfg = tf.BertConfig()
        m = tf.BertModel(cfg)
    elif name == "gpt2":
        cfg = tf.GPT2Config(n_layer=12)
        m = tf.GPT2Model(cfg)
    elif name == "tiny_bert":  # for the tests
        cfg = tf.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                            vocab_size=256, max_position_embeddings=64)
        m = tf.BertModel(cfg)
    else:
        raise ValueError(name)
    m.eval()
    m.config._attn_implementation = "eager"

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state
    return Wrapped().eval(), cfg.vocab_size


def inputs_at(length, vocab):
    """Token ids (seeded by the length) and an all-ones attention mask, [1, length] int64."""
    ids = np.random.default_rng(length).integers(0, vocab, size=(1, length), dtype=np.int64)
    return ids, np.ones((1, length), dtype=np.int64)


def export(model, vocab, path, example):
    import torch
    ids, mask = inputs_at(example, vocab)
    torch.onnx.export(model, (torch.from_numpy(ids), torch.from_numpy(mask)), path, dynamo=False, opset_version=17,
                      input_names=["input_ids", "attention_mask"], output_names=["out"],
                      dynamic_axes={"input_ids": {1: "sequence_length"}, "attention_mask": {1: "sequence_length"},
                                    "out": {1: "sequence_length"}})


def peer(name, path, threads):
    """A function running the dynamic model on (ids, mask) and returning its output."""
    if name == "ort":
        sess = ort_session(path, threads)
        return lambda ids, mask: sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    if name == "openvino":
        import openvino as ov
        cm = ov.Core().compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                                   "INFERENCE_PRECISION_HINT": "f32"})
        req = cm.create_infer_request()
        return lambda ids, mask: np.asarray(req.infer([ids, mask])[cm.output(0)])
    raise ValueError(name)


def basin_cmd(basin, args, threads, ok=(0,), log=None):
    """basin's standard output; RuntimeError with its last error line on another exit
    status than `ok` (tune exits 4 when a task is left without a program). `log`: a file
    that keeps its standard error (the tuning's rounds, the family sweep)."""
    p = subprocess.run([basin] + args, capture_output=True, text=True,
                       env=dict(os.environ, BASIN_NUM_THREADS=str(threads)))
    if log:
        with open(log, "w") as f:
            f.write(p.stderr)
    if p.returncode not in ok:
        raise RuntimeError((p.stderr.strip().splitlines() or ["?"])[-1][:300])
    return p.stdout


def table(results, peers):
    """The markdown table: per model and length, each runtime's latency, basin against
    the fastest peer, and each one's error against PyTorch; with a baseline (--baseline),
    its latency and basin against it after basin's."""
    based = any("baseline" in row["ms"] for r in results for row in r.get("lengths", []))
    lines = ["| model | length | basin (ms) | " + ("baseline (ms) | vs baseline | " if based else "") +
             " | ".join(f"{p} (ms)" for p in peers) +
             " | vs fastest peer | basin error | " + " | ".join(f"{p} error" for p in peers) + " |",
             "|" + "---|" * (5 + 2 * len(peers) + 2 * based)]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | - | {r['error']} |")
            continue
        for row in r["lengths"]:
            base = (f"{row['ms']['baseline']:.2f} | {row['ms']['baseline'] / row['ms']['basin']:.2f}x | "
                    if based else "")
            lines.append(f"| {r['model']} | {row['length']} | {row['ms']['basin']:.2f} | " + base +
                         " | ".join(f"{row['ms'][p]:.2f}" for p in peers) +
                         f" | {row['speedup_vs_best_peer']:.2f}x | {row['err']['basin']:.1e} | " +
                         " | ".join(f"{row['err'][p]:.1e}" for p in peers) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="bert,gpt2")
    ap.add_argument("--range", default="1..512")
    ap.add_argument("--lengths", default="8,32,128,384")
    ap.add_argument("--budget", default="10m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peers", default="ort,openvino")
    ap.add_argument("--out", default="bench-results/shape_ranges")
    ap.add_argument("--basin", default=os.path.join(ROOT, "build", "bin", "basin"))
    ap.add_argument("--tune-args", default="", help="more options for `basin tune`, one string (--family-sweep 0)")
    ap.add_argument("--records", default="", metavar="FILE",
                    help="compile from this earlier run's records (one model) instead of tuning")
    ap.add_argument("--baseline", default="", metavar="FILE.basin",
                    help="another compiled network of the model and range, timed beside basin's (one model)")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    lo, hi = (int(x) for x in a.range.split(".."))
    lengths = [int(x) for x in a.lengths.split(",")]
    if any(n < lo or n > hi for n in lengths):
        sys.exit("every --lengths value must lie in --range")
    if (a.records or a.baseline) and len(a.models.split(",")) != 1:
        sys.exit("--records and --baseline belong to one model: give one in --models")
    os.makedirs(a.out, exist_ok=True)
    results = []
    for name in a.models.split(","):
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        model, vocab = build(name)
        onnx_path = os.path.join(d, name + ".dyn.onnx")
        export(model, vocab, onnx_path, min(hi, 128))
        shape = f"sequence_length={lo}..{hi}"
        records, compiled = a.records or os.path.join(d, "records.db"), os.path.join(d, name + ".basin")
        r = {"model": name, "range": a.range, "threads": a.threads, "budget": a.budget, "tune_args": a.tune_args}
        t0 = time.time()
        try:
            if a.records:
                if not os.path.exists(records):
                    sys.exit(f"--records {records}: no such file")
                r["records"] = records
            else:
                if os.path.exists(records):
                    os.remove(records)
                tune = json.loads(basin_cmd(a.basin, ["tune", onnx_path, "--shape", shape, "--records", records,
                                                      "--budget", f"{int(parse_seconds(a.budget))}s", "--json"] +
                                            shlex.split(a.tune_args), a.threads, ok=(0, 4),
                                            log=os.path.join(d, "tune.log")))
                r["tune_seconds"] = time.time() - t0
                r["buckets_estimated_us"] = {m["model"].split(" ", 1)[1]: m["estimated_latency_us"]
                                             for m in tune.get("models", [])}
            t0 = time.time()
            comp = json.loads(basin_cmd(a.basin, ["compile", onnx_path, "--shape", shape, "--records", records, "-o",
                                                  compiled, "--json", "--quiet"], a.threads))
            r["compile_seconds"] = time.time() - t0
            r["buckets"] = [b["extents"] for b in comp["buckets"]]
            r["basin_accuracy"] = comp["accuracy"]
            r["untuned_tasks"] = len(comp["untuned_tasks"])
            r["file_mb"] = os.path.getsize(compiled) / 1e6
        except RuntimeError as e:
            r["error"] = str(e)
            results.append(r)
            print(json.dumps(r), flush=True)
            continue
        peers = {p: peer(p, onnx_path, a.threads) for p in a.peers.split(",") if p}
        r["lengths"] = []
        for n in lengths:
            ids, mask = inputs_at(n, vocab)
            with torch.no_grad():
                ref = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
            files = [os.path.join(d, f"ids{n}.npy"), os.path.join(d, f"mask{n}.npy")]
            np.save(files[0], ids)
            np.save(files[1], mask)
            row = {"length": n, "ms": {}, "err": {}}
            out_npy = os.path.join(d, f"out{n}.npy")
            def run_cmd(path, out):
                c = ["run", path, "--json", "--quiet", "--repeat", str(a.repeat), "--output", out]
                for f in files:
                    c += ["--input", f]
                return c
            basins = {"basin": (compiled, out_npy)}
            if a.baseline:
                basins["baseline"] = (a.baseline, os.path.join(d, f"baseline{n}.npy"))
            best = {k: float("inf") for k in list(basins) + list(peers)}
            for _ in range(a.rounds):
                for p, fn in peers.items():
                    best[p] = min(best[p], time_calls(lambda: fn(ids, mask), a.repeat)[0])
                for k, (path, out) in basins.items():
                    best[k] = min(best[k], json.loads(basin_cmd(a.basin, run_cmd(path, out), a.threads))["latency_us"] / 1e3)
            row["ms"] = best
            for k, (path, out) in basins.items():
                row["err"][k] = rel_err(np.load(out), ref)
            for p, fn in peers.items():
                row["err"][p] = rel_err(fn(ids, mask), ref)
            fastest = min((best[p] for p in peers), default=float("nan"))
            row["speedup_vs_best_peer"] = fastest / best["basin"]
            r["lengths"].append(row)
            print(json.dumps({"model": name, **row}), flush=True)
        results.append(r)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    text = table(results, [p for p in a.peers.split(",") if p])
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
