"""bench/search.py's fair grid and its resumption, on made-up runs: which strategy specs
are the grid's cells, the grid's table (each cell against the fastest of its workload and
seed, the sources' worth), and a resumed run keeping only the pairs that finished on the
same machine and budget."""

import json
import math

import pytest

from conftest import load_bench

SIX = ["gradient:sources=0", "gradient", "annealing", "annealing:sources=1", "evolutionary", "evolutionary:sources=1"]


def run(workload, seed, strategy, side_by_side):
    return {"workload": workload, "seed": seed, "strategy": strategy, "side_by_side_us": side_by_side}


def test_the_grid_cells_are_the_three_strategies_with_and_without_the_sources():
    sb = load_bench("search")
    assert sb.grid_cell("gradient") == ("gradient", True)
    assert sb.grid_cell("gradient:sources=0") == ("gradient", False)
    assert sb.grid_cell("annealing") == ("annealing", False)
    assert sb.grid_cell("annealing:sources=1") == ("annealing", True)
    assert sb.grid_cell("evolutionary:sources=1") == ("evolutionary", True)
    # Variants and other strategies are not cells.
    assert sb.grid_cell("gradient:tile_slots=0") is None
    assert sb.grid_cell("annealing:sources=1:tile_slots=1") is None
    assert sb.grid_cell("random") is None


def test_the_grid_table_compares_each_cell_with_the_fastest_of_its_pair():
    sb = load_bench("search")
    us = {"gradient:sources=0": 110, "gradient": 100, "annealing": 130, "annealing:sources=1": 104,
          "evolutionary": 120, "evolutionary:sources=1": 100}
    runs = [run("c12", 1, s, [us[s]] * 3) for s in SIX]
    # A second pair where annealing without the sources is the fastest.
    runs += [run("gemm", 1, s, [90.0 if s == "annealing" else 100.0] * 3) for s in SIX]
    runs.append(run("c12", 1, "gradient:tile_slots=0", [50.0]))  # a variant: not in the grid
    lines = sb.grid_lines({"runs": runs}, ["c12", "gemm"], [1])
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")[1:]]
            for line in lines if line.startswith("| ") and "strategy" not in line}
    g = lambda *v: math.exp(sum(map(math.log, v)) / len(v))  # noqa: E731
    assert rows["the descent (gradient)"][0] == f"{g(1.10, 100 / 90):.3f} (n 2)"
    assert rows["the descent (gradient)"][1] == f"{g(1.00, 100 / 90):.3f} (n 2)"
    assert rows["the descent (gradient)"][2] == f"{g(1.10, 1.0):.3f}"
    assert rows["annealing"][0] == f"{g(1.30, 1.0):.3f} (n 2)"
    assert rows["annealing"][2] == f"{g(130 / 104, 0.9):.3f}"  # hurt it on one pair
    assert "2 workload and seed pairs" in lines[1]
    # No pair with two cells: no table.
    assert sb.grid_lines({"runs": [run("c12", 1, "gradient", [1.0])]}, ["c12"], [1]) == []


def test_a_resumed_run_keeps_the_finished_pairs_of_the_same_machine_only(tmp_path):
    sb = load_bench("search")
    machine = {"cpu": "a cpu", "cores": 2, "isa": "avx2", "threads": 2}
    strategies = ["annealing", "gradient"]
    old = {"machine": machine, "trials": 400, "interleaved": True, "runs": [
        run("c12", 1, "annealing", [1.0]), run("c12", 1, "gradient", [1.0]),
        run("c12", 2, "annealing", [1.0]), run("c12", 2, "gradient", None),  # not timed side by side yet
        run("gemm", 1, "annealing", [1.0]),  # gradient never ran
    ]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(old))
    results, keep = sb.resumed(str(path), machine, 400, True, strategies)
    assert keep == {("c12", 1)}
    assert {(r["workload"], r["seed"]) for r in results["runs"]} == {("c12", 1)}
    # Another machine, budget or interleaving: refused.
    with pytest.raises(SystemExit):
        sb.resumed(str(path), dict(machine, cpu="another cpu"), 400, True, strategies)
    with pytest.raises(SystemExit):
        sb.resumed(str(path), machine, 1000, True, strategies)
    with pytest.raises(SystemExit):
        sb.resumed(str(path), machine, 400, False, strategies)
