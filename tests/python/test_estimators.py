"""Estimators written in Python, called by the C++ search (basin.estimators): a torch MLP
driving the gradient search of tune_op, a NumPy one driving annealing, a NumPy one with
its own gradient, one estimator shared by a network's tasks, and the bad ones, each
refused with one clear exception."""

import sqlite3
import time

import numpy as np
import pytest

import basin

torch = pytest.importorskip("torch", reason="torch is not installed for this interpreter")

OP = dict(op="matmul", params={"M": 64, "N": 64, "K": 48})
FEATURES = len(basin.features.names())


class TorchMLP(torch.nn.Module):
    """Per-store encoder summed over real stores, trained on log latency (centred)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        self.opt = torch.optim.Adam(self.parameters(), 1e-2)
        self.forwards = self.with_grad = 0
        self.updates = []

    def forward(self, features, mask):
        self.forwards += 1
        self.with_grad += features.requires_grad
        return (self.net(features).squeeze(-1) * mask).sum(1)

    def update(self, features, mask, latencies_us):
        self.updates.append((tuple(features.shape), tuple(latencies_us.shape)))
        assert features.dtype == torch.float32 and latencies_us.dtype == torch.float64
        y = torch.log(latencies_us).float()
        for _ in range(10):
            s = self(features, mask)
            loss = ((s - s.mean()) - (y - y.mean())).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


def records_of(path):
    with sqlite3.connect(path) as db:
        return db.execute("select count(*) from records").fetchone()[0]


def test_a_torch_mlp_drives_the_gradient_search(tmp_path):
    e = TorchMLP()
    r = basin.tune_op(**OP, records=tmp_path / "r.db", trials=30, strategy="gradient", estimator=e, progress=False)
    assert r.trials == 30 and r.measured == 30 and r.errors == 0
    assert r.best_latency_us > 0 and r.best_sketch
    assert r.estimator == "TorchMLP"
    assert e.with_grad > 0, "the gradient search took no gradient of the estimator's scores"
    assert e.forwards > e.with_grad, "the proposals were never ranked by predict"
    assert e.updates, "the measured latencies never reached update"
    for feats, lat in e.updates:
        assert feats[0] == lat[0] and feats[2] == FEATURES
    # A second run resumes from the records.
    again = basin.tune_op(**OP, records=tmp_path / "r.db", trials=30, estimator=e, progress=False)
    assert again.resumed == 30 and again.measured == 0


class NumpyLinear:
    """A least-squares fit of log latency on the summed features; no gradient."""

    name = "numpy-linear"

    def __init__(self):
        self.w = None
        self.seen = 0

    def ready(self):
        return self.w is not None

    def predict(self, features):  # no mask: padded stores are zero rows
        assert isinstance(features, np.ndarray) and features.dtype == np.float32
        return features.sum(axis=1) @ self.w

    def update(self, features, latencies_us):
        x = features.sum(axis=1).astype(np.float64)
        self.w, *_ = np.linalg.lstsq(x, np.log(latencies_us), rcond=None)
        self.seen = len(latencies_us)


def test_a_numpy_estimator_drives_annealing(tmp_path):
    e = NumpyLinear()
    r = basin.tune_op(**OP, records=tmp_path / "r.db", trials=40, strategy="annealing", estimator=e, batch=8,
                      progress=False)
    assert r.measured == 40 and r.best_latency_us > 0
    assert r.estimator == "numpy-linear"
    assert e.w is not None and e.seen >= 8


class NumpyWithGradient(NumpyLinear):
    name = "numpy-gradient"

    def __init__(self):
        super().__init__()
        self.gradients = 0

    def gradient(self, features, mask):
        self.gradients += 1
        return np.broadcast_to(self.w.astype(np.float32), features.shape) * mask[:, :, None]


def test_a_numpy_estimator_with_its_gradient_drives_the_gradient_search(tmp_path):
    e = NumpyWithGradient()
    r = basin.tune_op(**OP, records=tmp_path / "r.db", trials=40, strategy="gradient", estimator=e, progress=False)
    assert r.measured == 40 and e.gradients > 0


def test_one_estimator_serves_every_task_of_a_network(tiny_cnn, tmp_path):
    e = TorchMLP()
    model = basin.Model.load(tiny_cnn)
    r = model.tune(records=tmp_path / "n.db", trials=12 * model.tasks, batch=4, first_batch=4, estimator=e, progress=False)
    assert r.tasks_without_program == 0
    assert e.with_grad > 0 and e.forwards > 0
    with sqlite3.connect(tmp_path / "n.db") as db:
        kinds = {k for (k,) in db.execute("select distinct estimator_version from records")}
    assert kinds <= {"gradient:TorchMLP"}, kinds
    # The strategy's default by name, and one of basin's by name.
    model.tune(records=tmp_path / "m.db", trials=model.tasks * 2, estimator="roofline", strategy="annealing",
               progress=False)


class RaisesOnceTrained(NumpyLinear):
    """Ready from the start; its first prediction after an update raises."""

    def __init__(self):
        super().__init__()
        self.w = np.zeros(FEATURES)

    def predict(self, features):
        if self.seen:
            raise ZeroDivisionError("the estimator's own bug")
        return super().predict(features)


def test_the_estimators_exception_is_raised_as_it_was_and_the_records_kept(tmp_path):
    db = tmp_path / "r.db"
    with pytest.raises(ZeroDivisionError, match="the estimator's own bug"):
        basin.tune_op(**OP, records=db, trials=200, strategy="annealing", estimator=RaisesOnceTrained(), batch=8,
                      progress=False)
    kept = records_of(db)
    assert kept > 0
    r = basin.tune_op(**OP, records=db, trials=kept + 4, strategy="random", progress=False)
    assert r.resumed == kept and r.measured == 4


class NeverReturns(NumpyLinear):
    """Ready from the start; its predict never returns."""

    def ready(self):
        return True

    def predict(self, features):
        while True:
            pass


def test_an_estimator_that_never_returns_is_given_up_in_time(tmp_path, monkeypatch):
    monkeypatch.setenv("BASIN_PLUGIN_TIMEOUT", "2")
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="did not return from predict within 2 s"):
        basin.tune_op(**OP, records=tmp_path / "r.db", trials=24, strategy="annealing", estimator=NeverReturns(),
                      batch=8, progress=False)
    assert time.monotonic() - start < 60
    # The package goes on working.
    r = basin.tune_op(**OP, records=tmp_path / "r.db", trials=4, strategy="random", progress=False)
    assert r.trials >= 4


class WrongCount(NumpyLinear):
    def ready(self):
        return True

    def predict(self, features):
        return np.zeros(len(features) + 1)


class NotFinite(NumpyLinear):
    def ready(self):
        return True

    def predict(self, features):
        return np.full(len(features), np.nan)


class NoGradientInTorch(torch.nn.Module):
    def forward(self, features, mask):
        return torch.tensor(features.detach().numpy().sum(axis=(1, 2)))


def test_each_bad_estimator_is_refused_with_one_clear_exception(tmp_path):
    def tune(estimator, strategy="annealing"):
        return basin.tune_op(**OP, records=tmp_path / "bad.db", trials=24, batch=8, strategy=strategy,
                             estimator=estimator, progress=False)

    with pytest.raises(ValueError, match="one score per program"):
        tune(WrongCount())
    with pytest.raises(basin.Error, match="not finite"):
        tune(NotFinite())
    with pytest.raises(basin.Error, match="differentiable estimator"):
        tune(NumpyLinear(), strategy="gradient")
    with pytest.raises(ValueError, match="no gradient in the features"):
        tune(NoGradientInTorch(), strategy="gradient")
    with pytest.raises(ValueError, match="no predict"):
        tune(object())
    with pytest.raises(ValueError, match="takes 3 arguments"):
        tune(type("ThreeArgs", (), {"predict": lambda self, a, b, c: None})())
    with pytest.raises(basin.Error, match="nonesuch"):
        tune("nonesuch")


def test_bad_operators_are_refused(tmp_path):
    with pytest.raises(ValueError, match="workload or an op"):
        basin.tune_op(records=tmp_path / "r.db", trials=4)
    with pytest.raises(ValueError, match="own parameters"):
        basin.tune_op("gemm-256", params={"M": 4}, records=tmp_path / "r.db", trials=4)
    with pytest.raises(basin.Error, match="nonesuch"):
        basin.tune_op("nonesuch", records=tmp_path / "r.db", trials=4, progress=False)
    with pytest.raises(basin.Error, match="unknown parameter"):
        basin.tune_op(op="matmul", params={"Q": 4}, records=tmp_path / "r.db", trials=4, progress=False)
    with pytest.raises(ValueError, match="records"):
        basin.tune_op("gemm-256", records=None, trials=4)
