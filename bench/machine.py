"""What the benchmark scripts print about the machine they ran on, whether the peers'
Python can run a peer there, and a peer script's run."""
import json
import os
import platform
import subprocess


def cpu_model():
    """The CPU's model name, family and model numbers from /proc/cpuinfo, as basin's
    records name them ("AMD EPYC (family 26 model 2)"; the platform's processor string
    elsewhere). Under KVM two EPYC generations share the name; the numbers differ."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor()
    if fields.get("cpu family") and fields.get("model"):
        name += f" (family {fields['cpu family']} model {fields['model']})"
    return name


def vector_isa():
    """The widest vector instruction set ("avx512", "avx2", "sse"), as basin's records name it."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    if "avx512f" in flags:
                        return "avx512"
                    if "avx2" in flags and "fma" in flags:
                        return "avx2"
                    return "sse"
    except OSError:
        pass
    return platform.machine()


def python_problem(python, modules):
    """Why `python` cannot import every one of `modules` (None when it can): the peers'
    virtual environment missing, or a module of it."""
    if not os.path.exists(python):
        return f"no peers' Python at {python} (bench/peers/setup.sh creates it)"
    p = subprocess.run([python, "-c", "import " + ", ".join(modules)], capture_output=True, text=True)
    if p.returncode != 0:
        return f"{python} cannot import {', '.join(modules)}: {p.stderr.strip().splitlines()[-1:]}"
    return None


def peer_json(cmd, path, who):
    """Runs a peer script `cmd` that writes its JSON to `path`: that JSON. A failure ends
    the benchmark (`who` names it) with the script's last error lines."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{who}: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    with open(path) as f:
        return json.load(f)
