"""basin: a tensor-program optimizer, from Python.

    import basin
    model = basin.Model.load("resnet18.onnx")            # or "zoo:resnet18"
    model.tune(budget="4m", records="resnet18.db")       # resumable; Ctrl-C stops cleanly
    net = basin.Network.compile(model, "resnet18.db")
    net.save("resnet18.basin")
    y = basin.Network.load("resnet18.basin")(x)          # NumPy in, NumPy out

The classes bind basin's C++ API (<basin/basin.h>) through the extension basin._basin;
this module adds what is Pythonic on top: keyword arguments, durations such as "4m",
a progress bar, inputs by name, profile rows for pandas. basin.torch compiles PyTorch
modules. docs/python.md is the tutorial.
"""

import os as _os

# The pretrained estimators shipped beside the package (an installed wheel); the build
# tree's copy is found through the source tree.
_data = _os.path.join(_os.path.dirname(__file__), "data")
if _os.path.isdir(_data):
    _os.environ.setdefault("BASIN_DATA_DIR", _data)

from . import _build_config  # noqa: E402

if _build_config.TORCH_WHEEL:
    import torch  # noqa: F401  (see _build_config)

from . import _basin  # noqa: E402
from . import estimators, features  # noqa: E402
from ._network import Model, Network, OperatorTuneReport, TuneReport, profile, tune_op  # noqa: E402
from ._basin import Error  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "Model", "Network", "TuneReport", "OperatorTuneReport", "Error", "profile", "tune_op", "estimators", "features",
    "__version__",
]
