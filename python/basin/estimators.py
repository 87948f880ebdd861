"""Latency estimators written in Python, called by basin's C++ search.

An estimator is any object with

    predict(features[, mask]) -> scores         one per program, lower = predicted faster
    update(features[, mask], latencies_us)      optional: the measured programs of the task

where features is [programs, stores, features] float32 (basin.features.names() names the
last axis; each value is log2(1 + x)), mask is [programs, stores] (1 for a real store, 0
for the padding of a program with fewer stores) and latencies_us is [programs] float64.
Give predict and update the mask argument or not: basin looks at their signatures.

The arrays are NumPy arrays, or torch tensors for an estimator that asks for them
(`inputs = "torch"`; a torch.nn.Module does by default, and its forward serves as
predict when it has none). The gradient search needs the scores' gradient in the
features: a torch estimator has it when its scores are computed from the features with
torch operations (basin calls predict with features that require grad); a NumPy
estimator may define gradient(features[, mask]) -> d sum(scores) / d features. Other
optional attributes: `name` (records and logs; default the class name) and `ready`
(a bool or a method: False while the scores mean nothing yet, so the search proposes
programs at random and calls update once 8 are measured).

Pass the object as `estimator=` to Model.tune or basin.tune_op; a string there names
one of basin's own (mlp, gbt, ensemble, roofline) or an estimator file.
"""

import inspect

import numpy as np

__all__ = ["Estimator", "bridge"]


class Estimator:
    """An optional base class: subclass it and define predict (and update)."""

    inputs = "numpy"

    def predict(self, features, mask):
        raise NotImplementedError("an estimator defines predict(features, mask)")

    def update(self, features, mask, latencies_us):
        pass


def _positional(fn):
    """How many positional arguments fn takes (None when it takes *args)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    n = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            n += 1
    return n


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


class _Bridge:
    """What the extension calls (basin._basin's PyEstimator): NumPy arrays in and out,
    the user's object's conventions handled here."""

    def __init__(self, obj):
        torch = _torch()
        self.obj = obj
        is_module = torch is not None and isinstance(obj, torch.nn.Module)
        mode = getattr(obj, "inputs", "torch" if is_module else "numpy")
        if mode not in ("numpy", "torch"):
            raise ValueError(f"estimator: inputs = {mode!r} must be 'numpy' or 'torch'")
        if mode == "torch" and torch is None:
            raise ValueError("estimator: inputs = 'torch', but torch cannot be imported")
        self.torch = torch if mode == "torch" else None
        predict = getattr(obj, "predict", None)
        if predict is None and is_module:
            predict = obj  # forward(features, mask), the TorchScript estimator's contract
        if not callable(predict):
            raise ValueError(f"estimator: {type(obj).__name__} has no predict(features[, mask]) method")
        self._predict_fn = predict
        self._predict_mask = self._takes_mask(predict, 1, "predict")
        update = getattr(obj, "update", None)
        if update is not None and not callable(update):
            raise ValueError("estimator: update must be a method update(features[, mask], latencies_us)")
        self._update_fn = update
        self._update_mask = self._takes_mask(update, 2, "update") if update is not None else False
        gradient = getattr(obj, "gradient", None)
        self._gradient_fn = gradient if callable(gradient) else None
        self._gradient_mask = self._takes_mask(gradient, 1, "gradient") if self._gradient_fn else False
        name = getattr(obj, "name", None)
        self.name = str(name) if isinstance(name, str) and name else type(obj).__name__
        self.differentiable = self.torch is not None or self._gradient_fn is not None
        if self.torch is not None and getattr(obj, "differentiable", True) is False:
            self.differentiable = False

    @staticmethod
    def _takes_mask(fn, without, what):
        n = _positional(fn)
        if n is None or n == without + 1:
            return True
        if n == without:
            return False
        args = "features, latencies_us" if what == "update" else "features"
        raise ValueError(f"estimator: {what} takes {n} arguments; it takes ({args}) or the same with mask "
                         f"after features")

    def _args(self, values, mask, with_mask):
        return (values, mask) if with_mask else (values,)

    def _scores(self, s, n):
        torch = self.torch
        if torch is not None and isinstance(s, torch.Tensor):
            s = s.detach().to("cpu", torch.float64).numpy()
        s = np.asarray(s, dtype=np.float64)
        if s.ndim == 2 and s.shape[1] == 1:
            s = s[:, 0]
        if s.shape != (n,):
            raise ValueError(f"estimator {self.name}: predict returned scores of shape {s.shape} for {n} programs "
                             f"(one score per program)")
        return np.ascontiguousarray(s)

    def _ready(self):
        r = getattr(self.obj, "ready", True)
        return bool(r() if callable(r) else r)

    def _predict(self, values, mask):
        torch = self.torch
        if torch is None:
            return self._scores(self._predict_fn(*self._args(values, mask, self._predict_mask)), len(values))
        with torch.no_grad():
            x, m = torch.from_numpy(values), torch.from_numpy(mask)
            return self._scores(self._predict_fn(*self._args(x, m, self._predict_mask)), len(values))

    def _gradient(self, values, mask):
        torch = self.torch
        if torch is None:
            g = np.asarray(self._gradient_fn(*self._args(values, mask, self._gradient_mask)), dtype=np.float32)
        else:
            x = torch.from_numpy(values).requires_grad_(True)
            m = torch.from_numpy(mask)
            with torch.enable_grad():
                s = self._predict_fn(*self._args(x, m, self._predict_mask))
                if not isinstance(s, torch.Tensor) or not s.requires_grad:
                    raise ValueError(f"estimator {self.name}: predict's scores have no gradient in the features "
                                     f"(return a torch tensor computed from them; the gradient search needs it)")
                (g,) = torch.autograd.grad(s.sum(), x, allow_unused=True)
            g = np.zeros_like(values) if g is None else g.detach().to(torch.float32).numpy()
        if g.shape != values.shape:
            raise ValueError(f"estimator {self.name}: the gradient has shape {g.shape}, the features {values.shape}")
        return np.ascontiguousarray(g, dtype=np.float32)

    def _update(self, values, mask, latencies):
        if self._update_fn is None:
            return
        torch = self.torch
        if torch is not None:
            values, mask, latencies = torch.from_numpy(values), torch.from_numpy(mask), torch.from_numpy(latencies)
        self._update_fn(*self._args(values, mask, self._update_mask), latencies)


def bridge(estimator):
    """(spec, object) for the extension: a string names one of basin's estimators, None
    the strategy's default; anything else is a Python estimator (checked here)."""
    if estimator is None:
        return "", None
    if isinstance(estimator, str):
        return estimator, None
    return "", _Bridge(estimator)
