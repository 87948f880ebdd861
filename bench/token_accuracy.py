#!/usr/bin/env python3
"""bench/token_accuracy: a low-precision transformer's error over several token inputs.

bench/networks.py measures the accuracy of a model with integer inputs (token ids) on the
export's example alone, since the exported ONNX graph specialises on those ids and differs
from PyTorch on others. One input is a noisy measure of a quantized model: which values
fall on a rounding tie changes from input to input. This script measures the error of
each runtime's low-precision run against the float32 ONNX graph itself (ONNX Runtime in
float32, all optimizations), which is what the quantization is checked against, on the
example and on --inputs - 1 further seeded random token-id inputs:

- ONNX Runtime on the QDQ file, with its graph optimizations (its default: fused kernels
  that skip some of the file's roundings) and without (the file's arithmetic as ONNX
  defines it);
- basin's compiled networks (`basin compile` of the QDQ file, or of its own
  quantization), each run by `basin run`.

    .cache/peers/bin/python bench/token_accuracy.py --float DIR/bert.onnx --qdq DIR/bert.qdq.onnx \\
        --example DIR/in0.npy --basin build/bin/basin --network qdq=DIR/bert.600s.basin \\
        --network own=DIR/own.bert.600s.basin --inputs 6

(bench/networks.py --precision int8 leaves these files in its --out directory.) Prints, per
runtime, the mean and worst max relative error over the inputs and each input's.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from networks import ort_session, rel_err  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--float", required=True, help="the float32 ONNX model (the reference, in ONNX Runtime)")
    ap.add_argument("--qdq", help="its QDQ file, run by ONNX Runtime with and without its optimizations")
    ap.add_argument("--example", required=True, help="the export's example token ids (.npy, int64 [1, L])")
    ap.add_argument("--basin", default="build/bin/basin")
    ap.add_argument("--network", action="append", default=[], help="LABEL=FILE.basin, a compiled network (repeatable)")
    ap.add_argument("--inputs", type=int, default=6, help="the example and this many minus one random inputs")
    ap.add_argument("--vocab", type=int, default=30000, help="random ids are drawn from [1000, VOCAB)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.inputs < 1:
        sys.exit("--inputs must be at least 1")
    example = np.load(a.example)
    if example.dtype != np.int64:
        sys.exit(f"{a.example}: token ids are int64, this file holds {example.dtype}")
    rng = np.random.default_rng(7)
    inputs = [example] + [rng.integers(1000, a.vocab, size=example.shape).astype(np.int64) for _ in range(a.inputs - 1)]
    ref_sess = ort_session(a.float, a.threads)
    name = ref_sess.get_inputs()[0].name
    refs = [ref_sess.run(None, {name: x})[0] for x in inputs]
    del ref_sess
    errors = {}
    if a.qdq:
        for label, optimize in (("onnxruntime", True), ("onnxruntime, no optimizations", False)):
            s = ort_session(a.qdq, a.threads, optimize)
            errors[label] = [rel_err(s.run(None, {name: x})[0], r) for x, r in zip(inputs, refs)]
    env = dict(os.environ, BASIN_NUM_THREADS=str(a.threads))
    with tempfile.TemporaryDirectory() as d:
        for spec in a.network:
            label, _, path = spec.partition("=")
            if not path:
                sys.exit(f"--network {spec}: give LABEL=FILE.basin")
            errs = []
            for k, (x, r) in enumerate(zip(inputs, refs)):
                i, o = os.path.join(d, f"in{k}.npy"), os.path.join(d, f"out{k}.npy")
                np.save(i, x)
                p = subprocess.run([a.basin, "run", path, "--input", i, "--output", o, "--quiet"],
                                   capture_output=True, text=True, env=env)
                if p.returncode:
                    sys.exit(f"basin run {path}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
                errs.append(rel_err(np.load(o), r))
            errors[f"basin {label}"] = errs
    width = max(len(k) for k in errors) if errors else 0
    for label, errs in errors.items():
        print(f"{label:{width}s}  mean {np.mean(errs):.2e}  worst {max(errs):.2e}  | "
              + " ".join(f"{e:.1e}" for e in errs))


if __name__ == "__main__":
    main()
