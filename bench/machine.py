"""What the benchmark scripts print about the machine they ran on."""
import platform


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
