"""basin.torch: PyTorch modules tuned and compiled by basin.

    import basin.torch
    fast = basin.torch.compile(model.eval(), (x,), budget="4m")
    y = fast(x)                     # torch tensors in, torch tensors out

compile() exports the module to ONNX (torch.onnx's dynamo exporter at torch's default
opset on torch 2.x, the TorchScript one on older torch), tunes its kernels, compiles the network and returns a
callable with the module's calling convention. Every measured program goes to a records
file (by default one in the cache folder, shared by every module): a second compile()
of the same module finds its kernels there and does not tune again.
"""

import os
import tempfile

import numpy as np
import torch as _torch

from ._network import Model, Network, parse_duration

_DEFAULT_OPSET_LEGACY = 17  # the newest the TorchScript exporter of torch 1.13 writes


def cache_dir():
    """Where compile() keeps exported models and the default records: $BASIN_CACHE_DIR, else
    $XDG_CACHE_HOME/basin, else ~/.cache/basin."""
    d = os.environ.get("BASIN_CACHE_DIR")
    if not d:
        d = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "basin")
    return d


def _torch_major():
    return int(_torch.__version__.split(".")[0])


def export(module, example_inputs, path, opset=None):
    """Writes `module` called on `example_inputs` as an ONNX file (weights inside it)."""
    args = tuple(example_inputs)
    with _torch.no_grad():
        if _torch_major() >= 2:
            # torch's own choice of opset unless one is asked for (torch 2.15: 20).
            kw = {"opset_version": opset} if opset else {}
            _torch.onnx.export(module, args, path, dynamo=True, external_data=False, verbose=False, **kw)
        else:
            names = [f"input{i}" for i in range(len(args))]
            _torch.onnx.export(module, args, path, opset_version=opset or _DEFAULT_OPSET_LEGACY, input_names=names,
                               do_constant_folding=True)


def _flatten(out):
    """The tensors of a module's output and how to put them back (torch's pytree: tuples, lists,
    dicts and Hugging Face's ModelOutput)."""
    from torch.utils import _pytree as pytree
    leaves, spec = pytree.tree_flatten(out)
    return leaves, (lambda xs: pytree.tree_unflatten(xs, spec))


class CompiledModule:
    """A module compiled by basin: called as the module is (positional tensors), it returns what
    the module returns (a tensor, a tuple, a dict or a ModelOutput) with basin's outputs in it."""

    def __init__(self, network, onnx_path, records, rebuild, report, max_abs_error):
        self.network = network
        self.onnx_path = onnx_path
        self.records = records
        self.tune_report = report  # None when the records had every kernel already
        self.max_abs_error = max_abs_error  # against the module on the example inputs
        self._rebuild = rebuild

    def __call__(self, *args):
        specs = self.network.inputs
        if len(args) != len(specs):
            raise ValueError(f"the compiled module takes {len(specs)} tensors ({', '.join(s.name for s in specs)}), "
                             f"got {len(args)}")
        arrays = []
        for spec, a in zip(specs, args):
            if not isinstance(a, _torch.Tensor):
                raise ValueError(f"input '{spec.name}': expected a torch.Tensor, got {type(a).__name__}")
            arrays.append(a.detach().cpu().contiguous().numpy())
        outs = self.network(*arrays)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return self._rebuild([_torch.from_numpy(np.asarray(o)) for o in outs])

    def __repr__(self):
        return f"basin.torch.CompiledModule({self.network!r})"


def compile(module, example_inputs, budget="1m", *, records=None, precision="", strategy="gradient", trials=0,
            first_batch=0, progress=True, retune=False, opset=None, log=None):
    """Exports `module` on `example_inputs` (a tensor or a tuple of tensors), tunes its kernels for
    `budget` unless `records` has a program for each already (retune=True tunes anyway), compiles
    it and returns a CompiledModule. records: the records file (default: the cache folder's);
    precision: "" (f32) or "bf16"; trials, first_batch, progress and log as in basin.Model.tune."""
    if not isinstance(module, _torch.nn.Module):
        raise ValueError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    if isinstance(example_inputs, _torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if not example_inputs or not all(isinstance(a, _torch.Tensor) for a in example_inputs):
        raise ValueError("example_inputs: a tensor or a non-empty tuple of tensors")
    if trials == 0:
        parse_duration(budget)  # a bad budget fails before the export
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    records = os.fspath(records) if records is not None else os.path.join(folder, "records.db")
    with _torch.no_grad():
        expected = module(*example_inputs)
    leaves, rebuild = _flatten(expected)
    fd, onnx_path = tempfile.mkstemp(prefix=type(module).__name__ + "-", suffix=".onnx", dir=folder)
    os.close(fd)
    export(module, example_inputs, onnx_path, opset)
    model = Model.load(onnx_path)
    net = Network.compile(model, records if os.path.exists(records) else None, precision=precision)
    report = None
    if retune or net.untuned_tasks > 0:
        report = model.tune(budget, records, trials=trials, first_batch=first_batch, strategy=strategy,
                            precision=precision, progress=progress, log=log)
        net = Network.compile(model, records, precision=precision)
    tensors = [x for x in leaves if isinstance(x, _torch.Tensor)]
    if len(tensors) != len(net.outputs) or len(tensors) != len(leaves):
        rebuild = (lambda xs: xs[0]) if len(net.outputs) == 1 else tuple
    compiled = CompiledModule(net, onnx_path, records, rebuild, report, None)
    got = compiled(*example_inputs)
    got_leaves, _ = _flatten(got)
    if len(got_leaves) == len(tensors):
        compiled.max_abs_error = max(
            (float((g.double() - e.double()).abs().max()) if e.numel() else 0.0) for g, e in zip(got_leaves, tensors))
    return compiled
