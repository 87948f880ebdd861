"""`pip install .` into a fresh virtual environment: the standard build backend
(scikit-build-core) builds the extension against this build tree's libbasin.so
(BASIN_PREBUILT: the libraries are not built twice), and the installed package imports,
finds its estimators, runs a network and provides the `basin` command.
BASIN_TEST_FULL_INSTALL=1 builds everything from scratch instead (about six minutes on
two cores), as a user's `pip install .` does."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import BINARY, SOURCE, TINY_CNN

OFFLINE = ("Could not find a version", "NewConnectionError", "Temporary failure in name resolution",
           "No matching distribution", "Network is unreachable")


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return env


def test_pip_install_into_a_fresh_environment(tmp_path):
    venv = tmp_path / "venv"
    # Debian's NumPy (and torch) from the system; the build backend from PyPI.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # (--config-settings: Debian's pip 23.0 predates its short form -C.)
    cmd = [py, "-m", "pip", "install", "--disable-pip-version-check", "-q", SOURCE,
           f"--config-settings=build-dir={tmp_path / 'build'}"]
    if os.environ.get("BASIN_TEST_FULL_INSTALL") != "1":
        cmd += [f"--config-settings=cmake.define.BASIN_PREBUILT={BINARY}", "--config-settings=build.targets=basin_python"]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, cwd=tmp_path)
    if r.returncode != 0 and any(s in r.stdout + r.stderr for s in OFFLINE):
        pytest.skip("PyPI is unreachable: pip cannot fetch the build backend (scikit-build-core, pybind11)")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    script = textwrap.dedent(f"""
        import os, numpy as np, basin
        assert "{venv}" in basin.__file__, basin.__file__
        assert os.path.exists(os.path.join(os.environ["BASIN_DATA_DIR"], "cpu_mlp.bin"))
        net = basin.Network.compile(basin.Model.load("{TINY_CNN}"))
        y = net(np.ones(net.inputs[0].shape, np.float32))
        assert net.accuracy["max_rel_error"] < 1e-4 and np.isfinite(y).all()
        print("ok", y.shape)
    """)
    r = subprocess.run([py, "-c", script], env=_env(), capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
    r = subprocess.run([str(venv / "bin" / "basin"), "ops"], env=_env(), capture_output=True, text=True)
    assert r.returncode == 0 and "conv2d" in r.stdout, r.stdout + r.stderr
