"""bench/networks.py's pieces that need no peer: --batch's inputs (float inputs drawn again,
token ids repeated), the table's throughput columns (samples per second of basin and
of the fastest peer, from the head-to-head's latencies) and OpenVINO's one retry at its
f32 hint for a QDQ file its default refuses (a stand-in for OpenVINO's Core)."""

import pytest

from conftest import load_bench

torch = pytest.importorskip("torch", reason="torch is not installed for this interpreter")


def test_batched_inputs_draw_floats_again_and_repeat_token_ids():
    nets = load_bench("networks")
    image = torch.randn(1, 3, 8, 8)
    ids = torch.tensor([[5, 9, 2, 7]])
    assert nets.batched((image, ids), 1)[0] is image
    x, t = nets.batched((image, ids), 4)
    assert tuple(x.shape) == (4, 3, 8, 8) and x.dtype == image.dtype
    assert not torch.equal(x[0], x[1])  # distinct samples, not copies
    assert tuple(t.shape) == (4, 4) and t.dtype == ids.dtype
    assert all(torch.equal(t[k], ids[0]) for k in range(4))
    x2, _ = nets.batched((image, ids), 4)
    assert torch.equal(x, x2)  # seeded


def test_table_gives_throughput_at_batches_above_one():
    nets = load_bench("networks")

    def result(batch):
        return {"model": "m", "batch": batch, "basin_untuned": {"ms": 40.0},
                "curve": [{"seconds": 60, "ms": 21.0, "h2h_ms": 20.0, "err": 1e-6}],
                "basin_tuned": {"seconds": 60, "ms": 21.0, "err": 1e-6},
                "final": {"basin": 20.0, "ort": 25.0, "openvino": 40.0},
                "peers": {"ort": {"ms": 26.0, "precision": "f32"}, "openvino": {"ms": 41.0, "precision": "f32"}}}

    text = nets.table([result(8)], ["ort", "openvino"])
    head, rule, row = text.splitlines()
    assert "basin (samples/s)" in head and "best peer (samples/s)" in head
    assert head.count("|") == rule.count("|") == row.count("|")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert "400.0" in cells  # 8 samples in 20 ms
    assert "320.0" in cells  # the fastest peer: ONNX Runtime, 8 in 25 ms
    assert "1.25" in cells  # best peer / basin
    single = nets.table([result(1)], ["ort", "openvino"])
    assert "samples/s" not in single


class RefusingCore:
    """Compiles only with the f32 hint, as OpenVINO 2026.4 does some QDQ files on AMX hosts."""

    def __init__(self):
        self.configs = []

    def compile_model(self, path, device, config):
        self.configs.append(dict(config))
        if config.get("INFERENCE_PRECISION_HINT") != "f32":
            raise RuntimeError("Exception from plugin.cpp:59:\nNo suitable implementations.\n\n")
        return "compiled"


def test_openvino_retries_an_int8_file_at_its_f32_hint_and_says_so():
    nets = load_bench("networks")
    core = RefusingCore()
    cm, why = nets.compile_openvino(core, "m.onnx", {"INFERENCE_NUM_THREADS": 2}, "int8")
    assert cm == "compiled" and why == " (default refused)"
    assert [c.get("INFERENCE_PRECISION_HINT") for c in core.configs] == [None, "f32"]
    for precision in ("bf16", "f32"):  # no retry where the precision is what is measured
        with pytest.raises(RuntimeError):
            nets.compile_openvino(RefusingCore(), "m.onnx", {}, precision)


def test_a_retimed_head_to_head_keeps_each_figures_fastest_run_of_both():
    nets = load_bench("networks")
    before = {"ort": 6.7, "openvino": 7.6, "untuned": 12.8, "60s": 6.2, "600s": 6.3, "basin": 6.3}
    new = {"ort": 6.2, "openvino": 8.0, "untuned": 12.2, "60s": 6.0, "600s": 5.2, "basin": 5.2, "extra": 1.0}
    both = nets.fastest_of_both(before, new, "600s")
    assert both["ort"] == 6.2 and both["openvino"] == 7.6  # each its own fastest
    assert both["600s"] == 5.2 and both["basin"] == 5.2  # basin's: the last segment's network
    assert both["extra"] == 1.0  # a figure the earlier run lacked is the new one
    with pytest.raises(KeyError):
        nets.fastest_of_both(before, {"ort": 1.0}, "600s")  # no network of the last segment


def test_retime_refuses_a_folder_without_a_run(tmp_path):
    nets = load_bench("networks")

    class Args:
        out = str(tmp_path)
        models = ",".join(nets.MODELS)

    with pytest.raises(SystemExit, match="no earlier run"):
        nets.retime(Args(), ["ort"], "f32")
