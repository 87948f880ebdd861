"""basin.torch.compile: a PyTorch module exported, tuned, compiled and called with torch
tensors, matching the module; the records make a second compile skip tuning. Runs with
the interpreter's torch (Debian's 1.13 in CI: the TorchScript exporter)."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed for this interpreter (Debian: python3-torch)")
pytest.importorskip("onnx", reason="onnx is not installed for this interpreter (Debian: python3-onnx)")

import basin.torch  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x, scale):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(y) * scale, y


def test_a_module_compiles_and_matches_pytorch(tmp_path, monkeypatch):
    monkeypatch.setenv("BASIN_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    m = Net().eval()
    x, s = torch.randn(2, 3, 12, 12), torch.tensor(1.5)
    fast = basin.torch.compile(m, (x, s), trials=12, first_batch=1, strategy="random", progress=False)
    assert fast.tune_report is not None and fast.tune_report.trials == 12
    assert fast.network.untuned_tasks == 0
    assert fast.records == str(tmp_path / "records.db")
    x2 = torch.randn(2, 3, 12, 12)
    out, feat = fast(x2, s)  # the module's structure: a tuple of two tensors
    ref_out, ref_feat = m(x2, s)
    assert isinstance(out, torch.Tensor) and out.shape == ref_out.shape
    torch.testing.assert_close(out, ref_out.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(feat, ref_feat.detach(), rtol=1e-4, atol=1e-4)
    assert fast.max_abs_error < 1e-4

    again = basin.torch.compile(m, (x, s), budget="30s", progress=False)  # every kernel has a record
    assert again.tune_report is None
    torch.testing.assert_close(again(x2, s)[0], out)


def test_bad_arguments_raise_one_clear_exception(tmp_path, monkeypatch):
    monkeypatch.setenv("BASIN_CACHE_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="torch.nn.Module"):
        basin.torch.compile(lambda x: x, (torch.zeros(1),))
    with pytest.raises(ValueError, match="example_inputs"):
        basin.torch.compile(Net(), ())
    with pytest.raises(ValueError, match="budget"):
        basin.torch.compile(Net(), (torch.zeros(1, 3, 4, 4), torch.tensor(1.0)), budget="soon")
    fast = basin.torch.compile(Net().eval(), (torch.zeros(1, 3, 4, 4), torch.tensor(1.0)), trials=4,
                               first_batch=1, strategy="random", progress=False)
    with pytest.raises(ValueError, match="takes 2 tensors"):
        fast(torch.zeros(1, 3, 4, 4))
    with pytest.raises(ValueError, match="expects float32"):
        fast(torch.zeros(1, 3, 5, 5), torch.tensor(1.0))
