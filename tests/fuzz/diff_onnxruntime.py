"""Differential fuzzing against ONNX Runtime: random small ONNX graphs (a seeded draw of
chains of elementwise, broadcast, reduction, softmax, layout, slicing, gathering, padding,
concatenation, selection and matrix operators, quantize-dequantize pairs (uint8 and int8,
per tensor and per axis), convolutions and pooling on images, on
inputs that hold NaN and infinities now and then) are run by `basin run` and by ONNX
Runtime on the same inputs; the outputs must agree (NaN where ONNX Runtime has NaN,
else within float32 tolerance) or basin must refuse the model with one clear line. A
graph that quantizes agrees when 95% of its elements do (a float difference of one
rounding before a quantization moves a value by a whole step, which later operators
carry; a wrong rounding, zero point or axis moves most of them) and a NaN output is not
compared.

    python diff_onnxruntime.py BASIN_BINARY CASES [SEED]

Exits 1 on the first disagreement or crash, printing the model and inputs kept for it.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

ort.set_default_logger_severity(3)  # no warnings about unused initializers
from onnx import TensorProto, helper, numpy_helper

UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Softplus", "Erf", "Floor", "Ceil", "Sign", "HardSwish",
         "HardSigmoid", "Elu", "Selu", "LeakyRelu", "Sqrt", "Reciprocal", "IsNaN"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"]


class Draw:
    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def const(self, shape):
        name = self.name("c")
        data = self.rng.uniform(-2, 2, shape).astype(np.float32)
        self.inits.append(numpy_helper.from_array(data, name))
        return name

    def step(self, x, shape):
        """One operator on x (of `shape`): its output and shape."""
        r = self.rng
        kinds = ["unary", "binary", "clip", "reduce", "softmax", "transpose", "matmul", "reshape", "concat", "slice",
                 "gather", "pad", "where", "qdq"]
        weights = [0.2, 0.14, 0.05, 0.08, 0.06, 0.06, 0.06, 0.06, 0.06, 0.06, 0.05, 0.06, 0.06, 0.08]
        if len(shape) == 4:  # images: convolutions and pooling too
            kinds += ["conv", "pool"]
            weights += [0.2, 0.1]
        weights = np.array(weights) / np.sum(weights)
        kind = r.choice(kinds, p=weights)
        y = self.name("v")
        if kind == "conv":
            n, c, h, w = shape
            k = int(r.integers(1, min(h, w, 3) + 1))
            cout, stride, pad = int(r.integers(1, 5)), int(r.integers(1, 3)), int(r.integers(0, k))
            weight = self.const([cout, c, k, k])
            ins = [x, weight] + ([self.const([cout])] if r.random() < 0.5 else [])
            self.nodes.append(helper.make_node("Conv", ins, [y], kernel_shape=[k, k], strides=[stride, stride],
                                               pads=[pad] * 4))
            return y, [n, cout, (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1]
        if kind == "pool":
            n, c, h, w = shape
            k = int(r.integers(1, min(h, w, 3) + 1))
            stride = int(r.integers(1, 3))
            op = str(r.choice(["MaxPool", "AveragePool"]))
            self.nodes.append(helper.make_node(op, [x], [y], kernel_shape=[k, k], strides=[stride, stride]))
            return y, [n, c, (h - k) // stride + 1, (w - k) // stride + 1]
        if kind == "concat":
            ax = int(r.integers(0, len(shape)))
            other = self.const(shape) if r.random() < 0.5 else x
            self.nodes.append(helper.make_node("Concat", [x, other], [y], axis=ax - len(shape) * int(r.random() < .5)))
            s = list(shape)
            s[ax] *= 2
            return y, s
        if kind == "slice":
            ax = int(r.integers(0, len(shape)))
            d = shape[ax]
            step = int(r.choice([1, 1, 2, -1]))
            if step > 0:
                start, end = int(r.integers(-d, d)), int(r.integers(-d, d + 2))
            else:
                start, end = int(r.integers(-1, d)), int(r.integers(-d - 1, 0))
            rng_ = range(*slice(start, end, step).indices(d))
            if len(rng_) == 0:
                self.nodes.append(helper.make_node("Relu", [x], [y]))
                return y, shape
            names = [self.name(v) for v in ("st", "en", "ax", "sp")]
            for nm, v in zip(names, (start, end, ax, step)):
                self.inits.append(numpy_helper.from_array(np.array([v], np.int64), nm))
            self.nodes.append(helper.make_node("Slice", [x] + names, [y]))
            s = list(shape)
            s[ax] = len(rng_)
            return y, s
        if kind == "gather":
            ax = int(r.integers(0, len(shape)))
            d = shape[ax]
            idx = r.integers(-d, d, int(r.integers(1, 4))).astype(np.int64)
            t = self.name("idx")
            self.inits.append(numpy_helper.from_array(idx, t))
            self.nodes.append(helper.make_node("Gather", [x, t], [y], axis=ax))
            return y, shape[:ax] + [len(idx)] + shape[ax + 1:]
        if kind == "pad":
            pads = [int(v) for v in r.integers(0, 3, 2 * len(shape))]
            t = self.name("pads")
            self.inits.append(numpy_helper.from_array(np.array(pads, np.int64), t))
            self.nodes.append(helper.make_node("Pad", [x, t], [y], mode="constant"))
            return y, [d + pads[i] + pads[i + len(shape)] for i, d in enumerate(shape)]
        if kind == "where":
            c, b = self.name("cond"), self.const(shape[-1:])
            self.nodes.append(helper.make_node("Greater", [x, b], [c]))
            self.nodes.append(helper.make_node("Where", [c, x, self.const(shape)], [y]))
            return y, shape
        if kind == "qdq":
            signed = r.random() < 0.5
            ax = int(r.integers(0, len(shape))) if len(shape) > 1 and r.random() < 0.5 else None
            n = shape[ax] if ax is not None else None
            pshape = [n] if n else []
            scale = r.uniform(0.01, 0.1, pshape).astype(np.float32)
            zp = (r.integers(-20, 21, pshape) if signed else r.integers(0, 256, pshape)).astype(
                np.int8 if signed else np.uint8)
            s, z, q = self.name("scale"), self.name("zp"), self.name("q")
            self.inits += [numpy_helper.from_array(np.asarray(scale), s), numpy_helper.from_array(np.asarray(zp), z)]
            attrs = {"axis": ax} if ax is not None else {}
            self.nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [q], **attrs))
            self.nodes.append(helper.make_node("DequantizeLinear", [q, s, z], [y], **attrs))
            return y, shape
        if kind == "unary":
            op = str(r.choice(UNARY))
            if op == "IsNaN":  # a bool, back to float
                b = self.name("b")
                self.nodes.append(helper.make_node("IsNaN", [x], [b]))
                self.nodes.append(helper.make_node("Cast", [b], [y], to=TensorProto.FLOAT))
            else:
                attrs = {"alpha": float(r.uniform(0.01, 0.5))} if op in ("LeakyRelu", "Elu") else {}
                self.nodes.append(helper.make_node(op, [x], [y], **attrs))
            return y, shape
        if kind == "binary":
            op = str(r.choice(BINARY))
            # A constant broadcast over trailing dims, or x with itself.
            k = int(r.integers(0, len(shape) + 1))
            other = self.const(shape[len(shape) - k:]) if r.random() < 0.8 else x
            ins = [x, other] if r.random() < 0.5 else [other, x]
            self.nodes.append(helper.make_node(op, ins, [y]))
            return y, shape
        if kind == "clip":
            lo, hi = sorted(r.uniform(-1.5, 1.5, 2).astype(np.float32))
            mn, mx = self.name("lo"), self.name("hi")
            self.inits += [numpy_helper.from_array(np.array(lo, np.float32), mn),
                           numpy_helper.from_array(np.array(hi, np.float32), mx)]
            self.nodes.append(helper.make_node("Clip", [x, mn, mx], [y]))
            return y, shape
        if kind == "reduce" and len(shape) > 1:
            op = str(r.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"]))
            ax = int(r.integers(0, len(shape)))
            axes = self.name("axes")
            self.inits.append(numpy_helper.from_array(np.array([ax], np.int64), axes))
            if op == "ReduceSum":
                self.nodes.append(helper.make_node(op, [x, axes], [y], keepdims=1))
            else:  # axes an attribute before opset 18
                self.nodes.append(helper.make_node(op, [x], [y], axes=[ax], keepdims=1))
            s = list(shape)
            s[ax] = 1
            return y, s
        if kind == "softmax":
            ax = int(r.integers(-len(shape), len(shape)))
            self.nodes.append(helper.make_node(str(r.choice(["Softmax", "LogSoftmax"])), [x], [y], axis=ax))
            return y, shape
        if kind == "transpose" and len(shape) > 1:
            perm = [int(p) for p in r.permutation(len(shape))]
            self.nodes.append(helper.make_node("Transpose", [x], [y], perm=perm))
            return y, [shape[p] for p in perm]
        if kind == "matmul" and len(shape) > 1:
            n = int(r.integers(1, 9))
            w = self.const([shape[-1], n])
            self.nodes.append(helper.make_node("MatMul", [x, w], [y]))
            return y, shape[:-1] + [n]
        if kind == "reshape" and len(shape) > 1:
            s = [int(np.prod(shape[:-1])), shape[-1]] if r.random() < 0.5 else [int(np.prod(shape))]
            t = self.name("shape")
            self.inits.append(numpy_helper.from_array(np.array(s, np.int64), t))
            self.nodes.append(helper.make_node("Reshape", [x, t], [y]))
            return y, s
        self.nodes.append(helper.make_node("Relu", [x], [y]))
        return y, shape


def make_case(rng):
    rank = int(rng.integers(1, 5))
    shape = [int(d) for d in rng.integers(1, 6, rank)]
    if rank == 4:
        shape[0] = 1
        shape[2:] = [int(d) for d in rng.integers(3, 8, 2)]
    d = Draw(rng)
    x, s = "x", shape
    for _ in range(int(rng.integers(1, 7))):
        x, s = d.step(x, s)
    graph = helper.make_graph(d.nodes, "diff", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], d.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = rng.uniform(-3, 3, shape).astype(np.float32)
    if rng.random() < 0.3:  # NaN and infinities, as ONNX defines their propagation
        flat = data.reshape(-1)
        for v in (np.nan, np.inf, -np.inf):
            if rng.random() < 0.5:
                flat[int(rng.integers(0, flat.size))] = v
    return model, data


# basin's reductions by maximum and minimum propagate NaN, as PyTorch's and numpy's do;
# ONNX Runtime's skip it on some paths. Where a graph has one, a NaN of basin's where
# ONNX Runtime has a number is that difference, not a disagreement.
NAN_PROPAGATING = {"ReduceMax", "ReduceMin"}


def agree(got, want, ops):
    if got.shape != want.shape:
        return f"shape {got.shape} against {want.shape}"
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    if NAN_PROPAGATING & set(ops):
        want = np.where(nan_g, np.nan, want)
        nan_w = np.isnan(want)
    if "QuantizeLinear" in ops:  # see the module's note
        ok = ~(nan_w | nan_g)
        g, w = got[ok].astype(np.float64), want[ok].astype(np.float64)
        scale = max(1.0, float(np.abs(w[np.isfinite(w)]).max())) if np.isfinite(w).any() else 1.0
        close = (g == w) | (np.abs(g - w) <= 2e-4 * scale)
        return None if close.size == 0 or close.mean() >= 0.95 else \
            f"{(~close).sum()} of {close.size} elements differ (largest {np.abs(g - w)[~close].max():.3g})"
    if (nan_w != nan_g).any():
        return f"NaN at {np.argwhere(nan_w != nan_g)[:4].tolist()} differs (basin {got[nan_w != nan_g][:4]}, " \
               f"ONNX Runtime {want[nan_w != nan_g][:4]})"
    ok = ~nan_w
    g, w = got[ok].astype(np.float64), want[ok].astype(np.float64)
    inf = np.isinf(w) | np.isinf(g)
    if (g[inf] != w[inf]).any():
        return "infinities differ"
    g, w = g[~inf], w[~inf]
    scale = max(1.0, float(np.abs(w).max())) if w.size else 1.0
    err = float(np.abs(g - w).max()) / scale if w.size else 0.0
    return None if err <= 2e-4 else f"largest difference {err:.3g} of the largest value"


def main():
    basin, cases = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rng = np.random.default_rng(seed)
    work = tempfile.mkdtemp(prefix="basin_diff_")
    refused = 0
    for i in range(cases):
        model, data = make_case(rng)
        path, inp, out = (os.path.join(work, f) for f in ("m.onnx", "x.npy", "y.npy"))
        onnx.save(model, path)
        np.save(inp, data)
        try:
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": data})[0]
        except Exception:  # a model ONNX Runtime refuses says nothing of basin
            continue
        env = dict(os.environ, BASIN_NUM_THREADS="1")
        p = subprocess.run([basin, "run", path, "--input", inp, "--output", out, "--quiet"], capture_output=True,
                           text=True, env=env, timeout=300)
        problem = None
        if p.returncode == 1 and p.stderr.count("\n") == 1 and p.stderr.startswith("basin: error:"):
            refused += 1
            if os.environ.get("BASIN_FUZZ_VERBOSE"):
                print(f"case {i} refused: {p.stderr.strip()}", file=sys.stderr)
        elif p.returncode != 0:
            problem = f"basin exited {p.returncode}: {p.stderr[-2000:]}"
        else:
            problem = agree(np.load(out), want, [n.op_type for n in model.graph.node])
        if problem:
            keep = os.path.join(os.getcwd(), f"diff-case-{seed}-{i}")
            os.makedirs(keep, exist_ok=True)
            shutil.copy(path, keep)
            shutil.copy(inp, keep)
            print(f"case {i} (seed {seed}): {problem}\n  operators: {[n.op_type for n in model.graph.node]}\n"
                  f"  kept in {keep}", file=sys.stderr)
            sys.exit(1)
    shutil.rmtree(work)
    print(f"{cases} random graphs: basin agrees with ONNX Runtime {ort.__version__} "
          f"({refused} refused with one line)", file=sys.stderr)


if __name__ == "__main__":
    main()
