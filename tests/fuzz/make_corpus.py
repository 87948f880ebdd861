#!/usr/bin/python3
"""Writes the fuzz targets' seed corpus (tests/fuzz/corpus/NAME). Run with Debian's
/usr/bin/python3 (python3-onnx, numpy) from the repository root, after a build:

    tests/fuzz/make_corpus.py build/bin/basin

Each seed is small and valid: the fuzzers mutate from inputs that reach deep."""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

basin = sys.argv[1] if len(sys.argv) > 1 else "build/bin/basin"
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def out(kind, name, data):
    os.makedirs(os.path.join(root, kind), exist_ok=True)
    with open(os.path.join(root, kind, name), "wb") as f:
        f.write(data)


# .npy: each dtype basin reads, format versions 1 and 2, a scalar and an empty array.
for name, a in [("f32_2x3", np.arange(6, dtype=np.float32).reshape(2, 3)),
                ("i64_4", np.array([0, 1, 2, 3], dtype=np.int64)),
                ("f64_scalar", np.array(2.5)),
                ("f32_empty", np.zeros((0, 4), dtype=np.float32))]:
    with tempfile.TemporaryFile() as f:
        np.save(f, a)
        f.seek(0)
        out("npy", name + ".npy", f.read())
with tempfile.TemporaryFile() as f:
    np.lib.format.write_array(f, np.ones((2, 2), dtype=np.float32), version=(2, 0))
    f.seek(0)
    out("npy", "v2.npy", f.read())


# ONNX: small models covering convolution, shapes computed from constants, gathers,
# matmul and softmax, and ConstantOfShape.
def model(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    out("onnx", name + ".onnx", m.SerializeToString())


f32 = TensorProto.FLOAT
rng = np.random.default_rng(0)
w = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
model("conv_relu", [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["c"], ["y"])],
      [helper.make_tensor_value_info("x", f32, [1, 2, 6, 6])], [helper.make_tensor_value_info("y", f32, None)],
      [w("w", 3, 2, 3, 3), w("b", 3)])
model("reshape_shape", [helper.make_node("Shape", ["x"], ["s"]),
                        helper.make_node("Gather", ["s", "i"], ["d"], axis=0),
                        helper.make_node("Concat", ["d", "m1"], ["ns"], axis=0),
                        helper.make_node("Reshape", ["x", "ns"], ["y"])],
      [helper.make_tensor_value_info("x", f32, [2, 3, 4])], [helper.make_tensor_value_info("y", f32, None)],
      [numpy_helper.from_array(np.array([0], dtype=np.int64), "i"),
       numpy_helper.from_array(np.array([-1], dtype=np.int64), "m1")])
model("gather_embed", [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)],
      [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 5])],
      [helper.make_tensor_value_info("y", f32, None)], [w("table", 10, 4)])
model("matmul_softmax", [helper.make_node("MatMul", ["x", "w"], ["m"]),
                         helper.make_node("Add", ["m", "b"], ["a"]),
                         helper.make_node("Softmax", ["a"], ["y"], axis=-1)],
      [helper.make_tensor_value_info("x", f32, [1, 4, 8])], [helper.make_tensor_value_info("y", f32, None)],
      [w("w", 8, 6), w("b", 6)])
model("constant_of_shape", [helper.make_node("ConstantOfShape", ["s"], ["c"],
                                             value=numpy_helper.from_array(np.array([1.5], dtype=np.float32))),
                            helper.make_node("Add", ["x", "c"], ["y"])],
      [helper.make_tensor_value_info("x", f32, [2, 3])], [helper.make_tensor_value_info("y", f32, None)],
      [numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "s")])

# Records: a task key, a configuration, latencies, confirmations (fuzz_records.cc), from
# real tuning records of two small operators.
with tempfile.TemporaryDirectory() as d:
    db = os.path.join(d, "r.db")
    for op, params in [("dense", ["M=8", "N=16", "K=16"]), ("softmax", ["shape=4,32"])]:
        args = [basin, "tune-op", op, "--strategy", "random", "--budget", "3s", "--records", db, "--quiet"]
        for p in params:
            args += ["--param", p]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    con = sqlite3.connect(db)
    seen = set()
    for key, config, lat, confirm in con.execute(
            "SELECT task_key, config, latencies_us, confirm_us FROM records WHERE error = '' ORDER BY id"):
        if key in seen:
            continue
        seen.add(key)
        text = "\n".join([key, config, lat, confirm])
        out("records", "%s.txt" % key.split("(")[0], text.encode())

    # .basin headers (fuzz_basin.cc puts them around its own code and weights, compiled
    # from the same model): a compiled network's, its host CPU named "@host" so that the
    # seed loads on any machine.
    net = os.path.join(d, "n.basin")
    model_path = os.path.join(root, "onnx", "conv_relu.onnx")
    subprocess.run([basin, "compile", model_path, "-o", net], check=True, stdout=subprocess.DEVNULL)
    with open(net, "rb") as f:
        data = f.read()
    magic = data.index(b"\n") + 1
    n = int.from_bytes(data[magic:magic + 8], "little")
    header = json.loads(data[magic + 40:magic + 40 + n])
    header["host_cpu"] = "@host"
    offset = 0  # fuzz_basin.cc lays the weights out first
    for w in header["weights"]:
        w["offset"] = offset
        offset += w["size"]
    out("basin", "conv_relu.json", json.dumps(header).encode())
