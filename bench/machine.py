"""What the benchmark scripts print about the machine they ran on."""
import platform


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (the platform's processor string elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


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
