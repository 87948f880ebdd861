"""basin's Python API: load, tune, compile, save, load, run, profile; tensors of every
dtype in and out without copies; one clear exception for each bad call."""

import os
import subprocess

import numpy as np
import pytest

import basin
from conftest import BINARY


def test_tunes_compiles_saves_loads_and_runs(tiny_cnn, tmp_path):
    model = basin.Model.load(tiny_cnn)
    assert model.tasks > 0
    (spec,) = model.inputs
    assert spec.dtype == "float32"
    rounds = []
    report = model.tune(trials=2 * model.tasks, records=tmp_path / "r.db", strategy="random", first_batch=2,
                        progress=rounds.append)
    assert report.trials == 2 * model.tasks and report.measured == report.trials and not report.stopped
    assert report.tasks_without_program == 0 and report.estimated_latency_us > 0
    assert rounds and rounds[-1]["trials"] == report.trials and rounds[-1]["trial_budget"] == report.trials
    again = model.tune(trials=2 * model.tasks, records=tmp_path / "r.db", strategy="random", progress=False)
    assert again.resumed == report.trials and again.measured == 0  # the file resumes

    net = basin.Network.compile(model, tmp_path / "r.db")
    assert net.untuned_tasks == 0 and net.target == "llvm"
    assert net.accuracy["measured"] and net.accuracy["max_rel_error"] < 1e-4
    x = np.random.default_rng(0).uniform(-1, 1, spec.shape).astype(np.float32)
    y = net(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == tuple(net.outputs[0].shape)
    by_name = net.run({spec.name: x})
    assert list(by_name) == [o.name for o in net.outputs]
    np.testing.assert_array_equal(by_name[net.outputs[0].name], y)
    np.testing.assert_array_equal(net(**{spec.name: x}), y)

    net.save(tmp_path / "n.basin")
    loaded = basin.Network.load(tmp_path / "n.basin")
    np.testing.assert_array_equal(loaded(x), y)
    assert net.time_us(x) > 0

    rows = basin.profile(net, rounds=3)
    assert rows and {"index", "task", "kernel", "us", "share", "gflops", "bytes", "precision"} <= set(rows[0])
    assert all(r["us"] > 0 and r["precision"] == "f32" for r in rows)
    assert basin.profile(model, records=tmp_path / "r.db", rounds=2)[0]["task"] == rows[0]["task"]


def test_outputs_own_their_memory_and_inputs_are_not_copied(tiny_cnn):
    net = basin.Network.compile(basin.Model.load(tiny_cnn))
    x = np.zeros(net.inputs[0].shape, np.float32)
    y1 = net(x)
    x += 0.5  # the same array, changed in place: the next run reads it
    y2 = net(x)
    assert not np.array_equal(y1, y2)
    del net  # the outputs outlive the network
    assert np.isfinite(y1).all() and np.isfinite(y2).all()


def _identity_model(path, dtype):
    """An ONNX model of one input of `dtype` and two outputs computed from it."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    t = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32,
         "int64": TensorProto.INT64, "bool": TensorProto.BOOL}[dtype]
    if dtype == "bool":
        nodes = [helper.make_node("Not", ["x"], ["y"]), helper.make_node("Identity", ["x"], ["z"])]
    else:
        nodes = [helper.make_node("Add", ["x", "x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])]
    g = helper.make_graph(nodes, "round_trip", [helper.make_tensor_value_info("x", t, [2, 3])],
                          [helper.make_tensor_value_info("y", t, [2, 3]), helper.make_tensor_value_info("z", t, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, str(path))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_tensors_of_every_dtype_round_trip(dtype, tmp_path):
    _identity_model(tmp_path / "m.onnx", dtype)
    net = basin.Network.compile(basin.Model.load(tmp_path / "m.onnx"))
    assert [s.dtype for s in net.inputs] == [dtype]
    x = (np.arange(6).reshape(2, 3) % 2 == 0) if dtype == "bool" else (np.arange(6).reshape(2, 3) - 2).astype(dtype)
    out = net.run({"x": x})
    assert list(out) == ["y", "z"]  # outputs by their ONNX names
    if dtype == "bool":
        np.testing.assert_array_equal(out["y"], ~x)
        np.testing.assert_array_equal(out["z"], x)
    else:
        np.testing.assert_array_equal(out["y"], x + x)
        np.testing.assert_array_equal(out["z"], -x)
    assert all(o.dtype == np.dtype(dtype) for o in out.values())
    # Non-contiguous arrays and lists are taken too (copied once).
    np.testing.assert_array_equal(net(np.ascontiguousarray(x.T).T)[0], out["y"])
    np.testing.assert_array_equal(net(x.tolist())[0], out["y"])


def test_the_compiled_network_of_the_command_line_is_the_same(tmp_path):
    """A zoo network tuned and compiled from Python gives the C++ command line's outputs."""
    model = basin.Model.load("zoo:transformer_layer")
    records = tmp_path / "t.db"
    model.tune(trials=model.tasks, records=records, strategy="random", first_batch=1, progress=False)
    net = basin.Network.compile(model, records)
    cli = os.path.join(BINARY, "bin", "basin")
    subprocess.run([cli, "compile", "zoo:transformer_layer", "--records", str(records), "-o", str(tmp_path / "c.basin"),
                    "--quiet"], check=True, capture_output=True)
    other = basin.Network.load(tmp_path / "c.basin")
    x = np.random.default_rng(1).uniform(-1, 1, net.inputs[0].shape).astype(np.float32)
    np.testing.assert_array_equal(net(x), other(x))


def test_each_bad_call_raises_one_clear_exception(tiny_cnn, tmp_path):
    def raises(kind, needle, f, *a, **k):
        with pytest.raises(kind) as e:
            f(*a, **k)
        msg = str(e.value)
        assert needle in msg and "\n" not in msg, msg

    raises(basin.Error, "no_such.onnx", basin.Model.load, tmp_path / "no_such.onnx")
    raises(basin.Error, "nonesuch", basin.Model.load, "zoo:nonesuch")
    raises(ValueError, "shapes", basin.Model.load, tiny_cnn, shapes={"in0": ["a"]})
    model = basin.Model.load(tiny_cnn)
    raises(ValueError, "records", model.tune, "10s")
    raises(ValueError, "budget", model.tune, "ten minutes", records=tmp_path / "r.db")
    raises(ValueError, "budget", model.tune, -5, records=tmp_path / "r.db")
    raises(ValueError, "trials", model.tune, trials=-1, records=tmp_path / "r.db")
    raises(basin.Error, "telepathy", model.tune, "1s", records=tmp_path / "r.db", strategy="telepathy")
    raises(basin.Error, "quantum", model.tune, "1s", records=tmp_path / "r.db", precision="quantum")
    raises(ValueError, "basin.Model", basin.Network.compile, tiny_cnn)
    raises(basin.Error, "no_records.db", basin.Network.compile, model, tmp_path / "no_records.db")
    raises(basin.Error, "missing.basin", basin.Network.load, tmp_path / "missing.basin")

    net = basin.Network.compile(model)
    shape = net.inputs[0].shape
    raises(ValueError, "missing input", net)
    raises(ValueError, "float32", net, np.zeros(shape, np.float64))
    raises(ValueError, "expects float32", net, np.zeros((3, 3), np.float32))
    raises(ValueError, "no input 'bogus'", net, bogus=np.zeros(shape, np.float32))
    raises(ValueError, "takes 1 inputs", net, np.zeros(shape, np.float32), np.zeros(shape, np.float32))
    raises(ValueError, "given twice", net, np.zeros(shape, np.float32), in0=np.zeros(shape, np.float32))
    raises(ValueError, "complex64", net, np.zeros(shape, np.complex64))
    raises(ValueError, "rounds", net.profile, rounds=0)
    raises(basin.Error, "n.basin", net.save, tmp_path / "no" / "such" / "n.basin")


def test_an_exception_in_a_callback_stops_the_run_and_keeps_the_records(tiny_cnn, tmp_path):
    model = basin.Model.load(tiny_cnn)
    seen = []

    def progress(p):
        seen.append(p["trials"])
        raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        model.tune("60s", records=tmp_path / "r.db", strategy="random", first_batch=2, progress=progress)
    assert len(seen) == 1  # no callback after the first raised
    resumed = model.tune(trials=1, records=tmp_path / "r.db", strategy="random", progress=False)
    assert resumed.resumed == seen[0]


def test_the_progress_display_shows_budget_tasks_and_latency(tiny_cnn, tmp_path, capsys):
    model = basin.Model.load(tiny_cnn)
    model.tune(trials=model.tasks, records=tmp_path / "r.db", strategy="random", first_batch=1, progress=True)
    err = capsys.readouterr().err
    # tqdm's bar where it is installed, plain lines otherwise: both name the tasks and the trials.
    assert f"{model.tasks} tasks" in err and "trials" in err, err
    assert "estimated" in err, err


def test_the_feature_names_are_those_of_the_estimators():
    cpu, gpu = basin.features.names(), basin.features.names("cuda")
    assert cpu and len(set(cpu)) == len(cpu) and all(isinstance(n, str) for n in cpu)
    assert "flops_mul" in cpu and "buf0.unique_bytes" in cpu
    assert gpu != cpu
    with pytest.raises(basin.Error, match="tpu"):
        basin.features.names("tpu")


def test_a_range_of_shapes_loads_tunes_compiles_and_runs_any_length(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = np.random.default_rng(1).uniform(-0.5, 0.5, (8, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["q"]),
             helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "xt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "x"], ["y"])]
    graph = helper.make_graph(nodes, "att", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    path = str(tmp_path / "att.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model = basin.Model.load(path, shapes={"seq": "2..12"})
    (spec,) = model.inputs
    assert spec.dims == ("", "seq", "") and spec.shape == (1, 12, 8)
    model.tune(trials=model.tasks, records=tmp_path / "r.db", strategy="random", first_batch=1, progress=False)
    net = basin.Network.compile(model, tmp_path / "r.db")
    assert net.accuracy["measured"] and net.accuracy["max_rel_error"] < 1e-5
    for n in (2, 5, 12):
        x = np.random.default_rng(n).uniform(-1, 1, (1, n, 8)).astype(np.float32)
        fixed = basin.Network.compile(basin.Model.load(path, shapes={"seq": n}))
        np.testing.assert_allclose(net(x), fixed(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(basin.Error, match="outside the range"):
        net(np.zeros((1, 13, 8), np.float32))
    with pytest.raises(ValueError, match="LO..HI"):
        basin.Model.load(path, shapes={"seq": "2..x"})
