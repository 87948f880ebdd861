"""Model, Network and profile: basin's C++ API with Python's habits."""

import collections
import math
import os
import re

import numpy as np

from . import _basin, estimators
from ._progress import ProgressDisplay

TensorSpec = collections.namedtuple("TensorSpec", ["name", "dtype", "shape", "index_bound", "divisor", "dims"],
                                    defaults=[()])
TensorSpec.__doc__ = """An input's or output's name, dtype (NumPy's name), shape; for an integer input read
as indices, the bound its values must stay under (0 otherwise); whether it is an integer divisor
(then it must hold no zero); for a network over ranges of shapes, per axis the ranged dimension
it carries ("" for a fixed axis; empty for fixed shapes): `shape` is then the largest, and
any extents of the ranges run."""

_DTYPES = {"float32", "float64", "int32", "int64", "bool"}


def _specs(dicts):
    return [TensorSpec(d["name"], d["dtype"], tuple(d["shape"]), d["index_bound"], d["divisor"],
                       tuple(d.get("dims", ()))) for d in dicts]


def parse_duration(budget):
    """Seconds of a budget: a number of seconds, or "90", "90s", "4m", "1.5h"."""
    if isinstance(budget, bool):
        raise ValueError(f"budget: {budget!r} is not a duration (seconds, or '90s', '4m', '1.5h')")
    if isinstance(budget, (int, float)):
        seconds = float(budget)
    elif isinstance(budget, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", budget)
        if not m:
            raise ValueError(f"budget: {budget!r} is not a duration (seconds, or '90s', '4m', '1.5h')")
        seconds = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    else:
        raise ValueError(f"budget: {budget!r} is not a duration (seconds, or '90s', '4m', '1.5h')")
    if not (math.isfinite(seconds) and 0 < seconds < 1e7):
        raise ValueError(f"budget: {budget!r} must be a positive duration")
    return seconds


TuneReport = collections.namedtuple(
    "TuneReport",
    [
        "trials",
        "measured",
        "resumed",
        "seconds",
        "overhead_fraction",
        "estimated_latency_us",
        "tasks_without_program",
        "stopped",
    ],
)
TuneReport.__doc__ = """What a tuning run did: programs (trials) in the records, measured in this run,
resumed from the file, wall seconds, the share not spent measuring, the network's
estimated latency with each task's best program (0 when a task has none)."""


def _check_tuning(records, budget, trials, batch, first_batch, seed, estimator):
    """The budget's seconds and the estimator for the extension, after the checks every
    tuning call makes (one ValueError each)."""
    if records is None or not str(records):
        raise ValueError("records: a records file is required (every measured program goes there; a second run "
                         "resumes)")
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 0:
        raise ValueError(f"trials: {trials!r} must be a non-negative integer")
    seconds = 0.0 if trials > 0 else parse_duration(budget)
    for name, v in (("batch", batch), ("first_batch", first_batch), ("seed", seed)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{name}: {v!r} must be a non-negative integer")
    spec, bridged = estimators.bridge(estimator)
    return seconds, spec, bridged


class _Display:
    """The progress callback and log of a tuning run: a bar (or the caller's callable) and
    the caller's log, written around the bar."""

    def __init__(self, progress, log, seconds, trials, what, latency="estimated"):
        if log is not None and not callable(log):
            raise ValueError("log: must be a callable taking one line")
        self.display = None
        self.on_progress = None
        if callable(progress):
            self.on_progress = progress
        elif progress:
            self.display = ProgressDisplay(seconds, trials, what, latency=latency)
            self.on_progress = self.display.update
        self.on_log = log
        if self.display is not None and log is not None:
            self.on_log = lambda line: self.display.write(line, log)  # noqa: E731

    def __enter__(self):
        return self.on_progress, self.on_log

    def __exit__(self, *exc):
        if self.display is not None:
            self.display.close()
        return False


OperatorTuneReport = collections.namedtuple(
    "OperatorTuneReport",
    ["task", "trials", "measured", "resumed", "errors", "seconds", "best_latency_us", "best_sketch", "best_config",
     "estimator", "stopped"],
)
OperatorTuneReport.__doc__ = """What tune_op did: the task's key in the records, its programs (trials) in the
records, measured in this run, resumed from the file, failed, wall seconds, the best
program's latency (0 when none ran), sketch and configuration (JSON), the estimator's
kind, and whether Ctrl-C (or an exception of a callback) stopped the run."""


def tune_op(
    workload=None,
    op=None,
    params=None,
    *,
    records,
    budget="1m",
    trials=0,
    strategy="gradient",
    estimator=None,
    target="llvm",
    precision="",
    seed=1,
    batch=16,
    progress=True,
    log=None,
):
    """Tunes one operator, as `basin tune-op` does: a named workload ("gemm-4096"; `basin
    workloads`) or an operator (`basin ops`) with its parameters (a dict, values as the
    CLI's --param takes them). The budget, records, strategy, estimator (a Python one
    too: basin.estimators), progress and log as in Model.tune. Returns an
    OperatorTuneReport."""
    if (workload is None) == (op is None):
        raise ValueError("give a workload or an op (one of them)")
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"params: {params!r} must be a dict of the operator's parameters")
    if workload is not None and params:
        raise ValueError("params: a workload has its own parameters")
    seconds, spec, bridged = _check_tuning(records, budget, trials, batch, 0, seed, estimator)
    kv = {str(k): str(v) for k, v in (params or {}).items()}
    with _Display(progress, log, seconds, trials, workload or op, "best") as (on_progress, on_log):
        r = _basin.tune_operator(workload or "", op or "", kv, os.fspath(records), seconds, trials, batch, strategy,
                                 spec, bridged, target, precision, seed, on_progress, on_log)
    return OperatorTuneReport(**r)


class Model:
    """A network ready to tune and compile: an ONNX file or a zoo network ("zoo:resnet18")."""

    def __init__(self, impl):
        self._impl = impl

    @staticmethod
    def load(model, shapes=None):
        """Loads, optimizes and partitions a network. shapes: {input or symbolic dimension: dims or
        one int} for models exported with dynamic axes (as `basin --shape`); a symbolic
        dimension's value "LO..HI" is a range: the network is compiled as shape buckets
        that serve every value in it (`basin --shape NAME=LO..HI`)."""
        model = os.fspath(model)
        fixed, ranges = {}, {}
        for name, dims in (shapes or {}).items():
            if isinstance(dims, str):
                lo, sep, hi = dims.partition("..")
                if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
                    raise ValueError(f"shapes[{name!r}]: {dims!r} is not a range LO..HI")
                ranges[str(name)] = (int(lo), int(hi))
                continue
            dims = [dims] if isinstance(dims, int) else list(dims)
            if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims):
                raise ValueError(f"shapes[{name!r}]: {dims!r} is not a list of integers")
            fixed[str(name)] = [int(d) for d in dims]
        return Model(_basin.Model.load(model, fixed, ranges))

    @property
    def name(self):
        return self._impl.name

    @property
    def inputs(self):
        return _specs(self._impl.inputs)

    @property
    def tasks(self):
        """Distinct kernels to tune on the CPU."""
        return self._impl.tasks

    def tune(
        self,
        budget="1m",
        records=None,
        *,
        trials=0,
        strategy="gradient",
        target="llvm",
        precision="",
        seed=1,
        batch=16,
        first_batch=0,
        estimator=None,
        progress=True,
        log=None,
    ):
        """Tunes the network's tasks for `budget` (seconds or "4m"; or `trials` programs in all),
        every program measured going to `records`, which a second run resumes. strategy:
        gradient, annealing, evolutionary or random. estimator: None (the strategy's default),
        the name of one of basin's (mlp, gbt, ensemble, roofline) or a file, or a Python
        estimator (basin.estimators; every task asks the same object). progress: True (a bar:
        tqdm where it is installed, plain lines otherwise), False, or a callable taking each
        round's dict. log: a callable taking each event's line. Ctrl-C stops the run cleanly,
        then raises KeyboardInterrupt. Returns a TuneReport."""
        seconds, spec, bridged = _check_tuning(records, budget, trials, batch, first_batch, seed, estimator)
        with _Display(progress, log, seconds, trials, f"{self.tasks} tasks") as (on_progress, on_log):
            r = _basin.tune(
                self._impl,
                os.fspath(records),
                seconds,
                trials,
                batch,
                first_batch,
                strategy,
                spec,
                bridged,
                target,
                precision,
                seed,
                on_progress,
                on_log,
            )
        return TuneReport(**r)

    def __repr__(self):
        return f"basin.Model({self.name!r}, {self.tasks} tasks)"


def _is_torch_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "numpy")


def _array_for(spec, x):
    """x as a C-contiguous NumPy array of the input's dtype and shape (one ValueError otherwise).
    Arrays and torch tensors of the right dtype pass without a copy."""
    if _is_torch_tensor(x):
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        x = x.contiguous().numpy()
    if isinstance(x, np.ndarray):
        if x.dtype.name != spec.dtype:
            raise ValueError(f"input '{spec.name}' expects {spec.dtype} {list(spec.shape)}, got {x.dtype.name} "
                             f"{list(x.shape)}")
    else:
        try:
            x = np.asarray(x, dtype=spec.dtype)
        except (TypeError, ValueError) as e:
            raise ValueError(f"input '{spec.name}' expects {spec.dtype} {list(spec.shape)}: {e}") from None
    # A network over ranges of shapes checks the extents itself (any in its ranges).
    if tuple(x.shape) != tuple(spec.shape) and not spec.dims:
        raise ValueError(f"input '{spec.name}' expects {spec.dtype} {list(spec.shape)}, got {x.dtype.name} "
                         f"{list(x.shape)}")
    return x if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(x.shape)  # (keeps 0-d arrays 0-d)


def random_inputs(specs, seed=1):
    """Inputs of these specs: floats uniform in [-1, 1), indices within their bound, other integers in
    [0, 100), booleans at random."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s.dtype.startswith("float"):
            out.append(rng.uniform(-1, 1, s.shape).astype(s.dtype))
        elif s.dtype == "bool":
            out.append(rng.integers(0, 2, s.shape).astype(bool))
        else:
            low = 1 if s.divisor else 0  # a divisor holds no zero
            out.append(rng.integers(low, s.index_bound if s.index_bound > 0 else 100, s.shape).astype(s.dtype))
    return out


class Network:
    """A compiled network: its kernels, memory plan and weights. Call it with arrays (positional in
    input order, or by name); run() takes and returns dicts by name."""

    def __init__(self, impl):
        self._impl = impl
        self._inputs = _specs(impl.inputs)
        self._outputs = _specs(impl.outputs)

    @staticmethod
    def compile(model, records=None, target="llvm", precision=""):
        """Each task's best program in `records` (None: none; a task without one gets the default
        program, counted by untuned_tasks); `precision` as in Model.tune."""
        if not isinstance(model, Model):
            raise ValueError(f"model: expected a basin.Model, got {type(model).__name__}")
        return Network(_basin.Network.compile(model._impl, os.fspath(records) if records else "", target, precision))

    @staticmethod
    def load(path):
        """A file written by save() or `basin compile`. It holds machine code, which runs as the user:
        load only files you trust."""
        return Network(_basin.Network.load(os.fspath(path)))

    def save(self, path):
        self._impl.save(os.fspath(path))

    @property
    def inputs(self):
        return list(self._inputs)

    @property
    def outputs(self):
        return list(self._outputs)

    @property
    def untuned_tasks(self):
        return self._impl.untuned_tasks

    @property
    def bf16_kernels(self):
        return self._impl.bf16_kernels

    @property
    def target(self):
        return self._impl.target

    @property
    def accuracy(self):
        """The error against the float32 reference measured when it was compiled (a dict)."""
        return self._impl.accuracy

    def _arrays(self, args, kwargs):
        specs = self._inputs
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            args, kwargs = (), args[0]
        elif len(args) == 1 and not kwargs and isinstance(args[0], (list, tuple)) and len(specs) > 1:
            args = tuple(args[0])
        if len(args) > len(specs):
            raise ValueError(f"the network takes {len(specs)} inputs ({', '.join(s.name for s in specs)}), got "
                             f"{len(args)}")
        given = dict(zip((s.name for s in specs), args))
        for name, x in kwargs.items():
            if name in given:
                raise ValueError(f"input '{name}' given twice")
            if name not in {s.name for s in specs}:
                raise ValueError(f"the network has no input '{name}' (its inputs: {', '.join(s.name for s in specs)})")
            given[name] = x
        missing = [s.name for s in specs if s.name not in given]
        if missing:
            raise ValueError(f"missing input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
        return [_array_for(s, given[s.name]) for s in specs]

    def __call__(self, *args, **kwargs):
        """Outputs for the inputs: one array, or a tuple when the network has several outputs."""
        out = self._impl.run(self._arrays(args, kwargs))
        return out[0] if len(out) == 1 else tuple(out)

    def run(self, inputs):
        """{output name: array} for inputs given as {name: array} or a list in input order."""
        arrays = self._arrays((), inputs) if isinstance(inputs, dict) else self._arrays(tuple(inputs), {})
        return dict(zip((s.name for s in self._outputs), self._impl.run(arrays)))

    def time_us(self, *args, **kwargs):
        """The fastest of several timed runs (copies in and out included), in microseconds; random
        inputs when none are given."""
        arrays = self._arrays(args, kwargs) if args or kwargs else random_inputs(self._inputs)
        return self._impl.time_us(arrays)

    def profile(self, inputs=None, rounds=20):
        """Each kernel launch timed alone (fastest of `rounds`), in run order: a list of dicts that
        pandas.DataFrame takes (index, task, kernel, us, share, gflops, bytes, precision)."""
        if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
            raise ValueError(f"rounds: {rounds!r} must be a positive integer")
        if inputs is None:
            arrays = random_inputs(self._inputs)
        elif isinstance(inputs, dict):
            arrays = self._arrays((), inputs)
        else:
            arrays = self._arrays(tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,), {})
        p = self._impl.profile(arrays, rounds)
        rows = []
        for i, k in enumerate(p["launches"]):
            rows.append({
                "index": i,
                "task": k["task"],
                "kernel": k["kernel"],
                "us": k["us"],
                "share": k["us"] / p["run_us"] if p["run_us"] > 0 else 0.0,
                "gflops": k["flops"] / k["us"] / 1e3 if k["us"] > 0 else 0.0,
                "bytes": k["bytes"],
                "precision": k["precision"],
            })
        return rows

    def __repr__(self):
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}" for s in self._inputs)
        return f"basin.Network({ins} -> {len(self._outputs)} outputs, {self.target})"


def profile(network, inputs=None, records=None, rounds=20, precision=""):
    """Per-launch profile rows (Network.profile) of a compiled Network, or of a Model compiled with
    `records` first."""
    if isinstance(network, Model):
        network = Network.compile(network, records, precision=precision)
    elif records is not None:
        raise ValueError("records: only for a Model (a compiled Network has its programs already)")
    if not isinstance(network, Network):
        raise ValueError(f"profile: expected a basin.Network or basin.Model, got {type(network).__name__}")
    return network.profile(inputs, rounds)
