"""bench/search_network.py: its table (the seconds each run took to come within 5% of the
best final estimate, the measured ratios to the gradient search's) from made-up runs,
and, where basin is built, a whole run on a small CNN: two strategies tune it from empty
records, their networks compiled and timed in turn."""

import os

import pytest

from conftest import BINARY, TINY_CNN, load_bench


def run(strategy, curve, measured):
    return {"model": "m", "strategy": strategy, "seed": 1, "budget": "1m", "trials": 10, "overhead": 0.05,
            "estimated_us": curve[-1][2], "measured_us": measured, "curve": curve}


def test_table_times_each_run_to_the_best_estimate():
    sn = load_bench("search_network")
    runs = [run("gradient", [[0, 0, 900.0], [10, 16, 120.0], [60, 96, 100.0]], 105.0),
            run("annealing", [[0, 0, 900.0], [30, 48, 104.0], [60, 96, 103.0]], 110.25)]
    text = sn.table(runs, "a host")
    rows = [line for line in text.splitlines() if line.startswith("| m |")]
    assert len(rows) == 2
    grad = [c.strip() for c in rows[0].strip("|").split("|")]
    ann = [c.strip() for c in rows[1].strip("|").split("|")]
    # The best final estimate is 100 us: within 5% (105) at 60 s for gradient, 30 s for annealing.
    assert grad[7] == "60" and ann[7] == "30"
    assert grad[9] == "1.000" and ann[9] == "1.050"
    assert sn.seconds_to([[0, 0, 900.0], [5, 8, None]], 100) is None


def test_a_peer_row_is_marked_and_a_peer_without_an_estimate_reaches_nothing():
    sn = load_bench("search_network")
    peer = run("metaschedule", [[0, 0, None], [500, 320, None]], 210.0)
    peer.update({"peer": True, "overhead": None, "estimated_us": None})
    runs = [run("gradient", [[0, 0, 900.0], [60, 96, 100.0]], 105.0), peer]
    text = sn.table(runs, "a host")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| m |")]
    assert rows[1][2] == "metaschedule"
    assert rows[1][5] == "-" and rows[1][6] == "210.0¹" and rows[1][7] == "-" and rows[1][8] == "-"
    assert rows[1][9] == "2.000"
    assert "¹ Timed by TVM's time evaluator" in text
    # Without a peer, no footnote.
    assert "¹" not in sn.table(runs[:1], "a host")


def test_the_peer_needs_the_peers_python(tmp_path):
    sn = load_bench("search_network")
    assert "no peers' Python" in sn.peer_available(str(tmp_path / "missing-python"))
    with pytest.raises(SystemExit):
        sn.main(["--peer", "metaschedule", "--peer-trials", "0", "--out", str(tmp_path)])


@pytest.mark.skipif(not os.path.exists(os.path.join(BINARY, "bin", "basin")), reason="basin is not built")
def test_a_small_cnn_tuned_by_two_strategies(tmp_path):
    sn = load_bench("search_network")
    sn.main(["--models", TINY_CNN, "--strategies", "gradient,random", "--budget", "6s", "--rounds", "1",
             "--repeat", "3", "--basin", os.path.join(BINARY, "bin", "basin"), "--out", str(tmp_path)])
    text = (tmp_path / "table.md").read_text()
    name = os.path.splitext(os.path.basename(TINY_CNN))[0]
    rows = [line for line in text.splitlines() if line.startswith(f"| {name} |")]
    assert len(rows) == 2, text
    assert (tmp_path / "results.json").exists()
