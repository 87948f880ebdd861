"""Shared fixtures of the Python package's tests. ctest runs them with the build tree's
package on PYTHONPATH (tests/CMakeLists.txt) and BASIN_SOURCE_DIR / BASIN_BINARY_DIR set."""

import importlib.util
import os

import pytest

SOURCE = os.environ.get("BASIN_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BINARY = os.environ.get("BASIN_BINARY_DIR", os.path.join(SOURCE, "build"))
# A small CNN of the model families' CI set (tests/models/coverage), as the C++ API's test.
TINY_CNN = os.path.join(SOURCE, "tests", "models", "coverage", "tiny_cnn_ceil.legacy.onnx")


@pytest.fixture
def tiny_cnn():
    return TINY_CNN


def load_bench(name):
    """bench/NAME.py as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("bench_" + name, os.path.join(SOURCE, "bench", name + ".py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m
