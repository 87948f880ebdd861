"""Prints the peers' versions as JSON (what bench/networks.py records with each run)."""
import json


def versions():
    out = {}
    for name in ("onnxruntime", "openvino", "torch", "torchvision", "onnx", "onnxscript", "transformers", "numpy"):
        try:
            mod = __import__(name)
            out[name] = getattr(mod, "__version__", "?")
        except Exception as e:  # a missing peer is reported, not fatal
            out[name] = "missing: " + type(e).__name__
    return out


if __name__ == "__main__":
    print(json.dumps(versions(), indent=1))
