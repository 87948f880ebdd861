"""bench/conv_kernels.py's pieces that need no peer: the operator's arguments at each
vector width, the environments that hold basin and oneDNN to AVX2, oneDNN's kernel
read from its verbose line, and the table (a failed row gives its error)."""

import os

import pytest

from conftest import load_bench


def test_the_blocked_convolution_takes_the_isas_vector_width():
    b = load_bench("conv_kernels")
    args = b.op_args((256, 64, 56, 1), "avx2")
    assert args[0] == "conv2d_nchwc"
    assert "block=8" in args and "padding=0" in args and "in_channels=256" in args
    assert "block=16" in b.op_args((64, 64, 56, 3), "avx512") and "padding=1" in b.op_args((64, 64, 56, 3), "avx512")
    assert b.lanes("native") in (8, 16)  # this CPU's vector of floats


def test_avx2_holds_both_sides_to_avx2_and_native_holds_neither():
    b = load_bench("conv_kernels")
    assert b.basin_env("avx2", 2)["BASIN_VECTOR_ISA"] == "avx2"
    assert b.basin_env("avx2", 2)["BASIN_NUM_THREADS"] == "2"
    assert b.onednn_env("avx2")["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert b.basin_env("native", 2).get("BASIN_VECTOR_ISA") == os.environ.get("BASIN_VECTOR_ISA")
    assert b.onednn_env("native").get("ONEDNN_MAX_CPU_ISA") == os.environ.get("ONEDNN_MAX_CPU_ISA")


def test_the_kernel_is_read_from_onednns_convolution_line():
    b = load_bench("conv_kernels")
    verbose = ("onednn_verbose,v1,primitive,exec,cpu,reorder,jit_direct_copy:uni,undef,src:f32\n"
               "onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2,forward_training,src:f32:a:blocked\n"
               '{"us": [1.0]}\n')
    assert b.kernel_of(verbose) == "jit:avx2"
    assert b.kernel_of('{"us": [1.0]}') == "unknown"


def test_the_table_gives_rates_ratios_and_errors():
    b = load_bench("conv_kernels")
    rows = [{"name": "c3x3-64-56", "seed": 1, "basin_us": 1000.0, "onednn_us": 1100.0, "onednn_kernel": "jit:avx2"},
            {"name": "c1x1-256-64-56", "seed": 1, "error": "tune-op: no program"}]
    lines = b.table(rows).splitlines()
    assert lines[0].startswith("| convolution | seed | basin (us) | oneDNN (us)")
    gflops = 2.0 * 64 * 64 * 9 * 56 * 56 / 1000.0 / 1e3
    assert lines[2] == f"| c3x3-64-56 | 1 | 1000.0 | 1100.0 | {gflops:.1f} | {gflops / 1.1:.1f} | 1.10x |"
    assert lines[3] == "| c1x1-256-64-56 | 1 | tune-op: no program |"
    assert "oneDNN ran jit:avx2." in lines
    assert lines[-1] == "Geometric mean oneDNN / basin: 1.10x over 1 rows."


def test_an_unknown_convolution_is_refused():
    b = load_bench("conv_kernels")
    with pytest.raises(SystemExit):
        b.main(["--shapes", "c3x3-64-56,nope"])
