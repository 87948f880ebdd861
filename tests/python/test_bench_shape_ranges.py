"""bench/shape_ranges.py's pieces that need no peer: the inputs at each length (seeded
token ids, an all-ones mask) and the table (latencies, basin against the fastest peer,
errors; a model that failed gives its error)."""

import numpy as np
import pytest

from conftest import load_bench


def test_inputs_are_seeded_ids_and_a_full_mask_at_each_length():
    b = load_bench("shape_ranges")
    ids, mask = b.inputs_at(37, 100)
    assert ids.shape == (1, 37) and ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 100
    assert mask.shape == (1, 37) and (mask == 1).all()
    np.testing.assert_array_equal(b.inputs_at(37, 100)[0], ids)
    assert not np.array_equal(b.inputs_at(38, 100)[0][:, :37], ids)


def test_the_table_compares_basin_with_the_fastest_peer():
    b = load_bench("shape_ranges")
    results = [{"model": "bert", "lengths": [{"length": 8, "ms": {"basin": 2.0, "ort": 3.0, "openvino": 5.0},
                                               "err": {"basin": 1e-6, "ort": 2e-6, "openvino": 3e-6},
                                               "speedup_vs_best_peer": 1.5}]},
               {"model": "gpt2", "error": "no program"}]
    lines = b.table(results, ["ort", "openvino"]).splitlines()
    assert lines[0].startswith("| model | length | basin (ms) | ort (ms) | openvino (ms) | vs fastest peer")
    assert lines[2] == "| bert | 8 | 2.00 | 3.00 | 5.00 | 1.50x | 1.0e-06 | 2.0e-06 | 3.0e-06 |"
    assert lines[3] == "| gpt2 | - | no program |"


def test_basin_cmd_keeps_the_standard_error_in_its_log_and_raises_on_failure(tmp_path):
    b = load_bench("shape_ranges")
    stub = tmp_path / "basin"
    stub.write_text("#!/bin/sh\necho out\necho \"round 1 of $1\" >&2\n[ \"$1\" = ok ] || { echo 'basin: error: bad' >&2; exit 3; }\n")
    stub.chmod(0o755)
    log = tmp_path / "tune.log"
    assert b.basin_cmd(str(stub), ["ok"], 2, log=str(log)) == "out\n"
    assert log.read_text() == "round 1 of ok\n"
    with pytest.raises(RuntimeError, match="basin: error: bad"):
        b.basin_cmd(str(stub), ["no"], 2, log=str(log))
    assert "round 1 of no" in log.read_text()


def test_a_baseline_gets_its_latency_and_basin_against_it():
    b = load_bench("shape_ranges")
    results = [{"model": "gpt2", "lengths": [{"length": 300, "ms": {"basin": 2.0, "baseline": 3.0, "ort": 4.0},
                                               "err": {"basin": 1e-6, "baseline": 1e-6, "ort": 2e-6},
                                               "speedup_vs_best_peer": 2.0}]}]
    lines = b.table(results, ["ort"]).splitlines()
    assert lines[0].startswith("| model | length | basin (ms) | baseline (ms) | vs baseline | ort (ms) |")
    assert lines[1].count("---") == lines[0].count("|") - 1
    assert lines[2] == "| gpt2 | 300 | 2.00 | 3.00 | 1.50x | 4.00 | 2.00x | 1.0e-06 | 2.0e-06 |"
