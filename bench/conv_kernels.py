"""ResNet-50's convolutions kernel for kernel, in the blocked layout, against oneDNN at
the same vector instructions: basin tuned (`basin tune-op conv2d_nchwc`, the gradient
search) and oneDNN's kernel through PyTorch (a module and its input moved to oneDNN's
blocked tensors once, so that neither side reorders in the timed calls), timed in
alternation in the same run. `--isa avx2` holds both to AVX2 (`BASIN_VECTOR_ISA`,
`ONEDNN_MAX_CPU_ISA`), so an AVX-512 host measures the AVX2 kernels too.

    .cache/peers/bin/python bench/conv_kernels.py [--isa avx2|native] [--trials 200]
        [--seeds 1] [--shapes NAME,...] [--rounds 5] [--threads 2] [--out DIR] [--json]

Prints one row per convolution and seed: basin's and oneDNN's microseconds, both timed
by the same protocol (the fastest of 5 rounds of calls over at least 0.2 s, per call),
--rounds times in alternation, each time in a new process, and the fastest kept (oneDNN's
1x1 kernels vary by the process: 1255 to 2017 us for one of them on Zen 4, while basin's
stays within 3%); their GFLOP/s and oneDNN / basin. The records stay in --out (a rerun with the same --out
tunes no further than --trials).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# ResNet-50's distinct convolutions after the stem (stride 1; the 1x1s that widen and
# narrow, the 3x3 of each stage): name -> (in, out, size, kernel).
SHAPES = {
    "c1x1-64-256-56": (64, 256, 56, 1),
    "c1x1-256-64-56": (256, 64, 56, 1),
    "c3x3-64-56": (64, 64, 56, 3),
    "c1x1-512-128-28": (512, 128, 28, 1),
    "c3x3-128-28": (128, 128, 28, 3),
    "c1x1-1024-256-14": (1024, 256, 14, 1),
    "c3x3-256-14": (256, 256, 14, 3),
    "c1x1-2048-512-7": (2048, 512, 7, 1),
    "c3x3-512-7": (512, 512, 7, 3),
}

# Times one convolution with oneDNN through PyTorch as basin times its programs
# (codegen/timing.h's full protocol: rounds of calls over at least 0.2 s, each round's
# time per call): argv in, out, size, kernel, threads, rounds; prints one JSON line of
# the rounds' microseconds.
ONEDNN = r"""
import json, sys, time, torch
import torch.utils.mkldnn
cin, cout, size, k, threads, rounds = (int(v) for v in sys.argv[1:7])
torch.set_num_threads(threads)
conv = torch.nn.Conv2d(cin, cout, k, 1, k // 2, bias=False).eval()
m = torch.utils.mkldnn.to_mkldnn(conv)
x = torch.randn(1, cin, size, size).to_mkldnn()
out = []
with torch.no_grad():
    for _ in range(10):
        m(x)
    for _ in range(rounds):
        t = time.perf_counter()
        n = 0
        while time.perf_counter() - t < 0.2:
            m(x)
            n += 1
        out.append((time.perf_counter() - t) / n * 1e6)
print(json.dumps({"us": out}))
"""


def flops(shape):
    cin, cout, size, k = shape
    return 2.0 * cin * cout * k * k * size * size


def lanes(isa):
    """Output channels per block: a vector of floats at the ISA (native: this CPU's)."""
    if isa == "native":
        try:
            with open("/proc/cpuinfo") as f:
                isa = "avx512" if " avx512f" in f.read() else "avx2"
        except OSError:
            isa = "avx2"
    return 8 if isa == "avx2" else 16


def op_args(shape, isa):
    cin, cout, size, k = shape
    return ["conv2d_nchwc", "--param", f"in_channels={cin}", f"out_channels={cout}", f"height={size}",
            f"width={size}", f"kernel={k}", f"padding={k // 2}", f"block={lanes(isa)}"]


def basin_env(isa, threads):
    env = dict(os.environ, BASIN_NUM_THREADS=str(threads))
    if isa != "native":
        env["BASIN_VECTOR_ISA"] = isa
    return env


def onednn_env(isa):
    env = dict(os.environ, ONEDNN_VERBOSE="0")
    if isa != "native":
        env["ONEDNN_MAX_CPU_ISA"] = isa.upper()
    return env


def run(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return p.stdout


def tune(basin, shape, isa, threads, trials, seed, records):
    out = run([basin, "tune-op", *op_args(shape, isa), "--strategy", "gradient", "--trials", str(trials), "--seed",
               str(seed), "--records", records, "--quiet", "--json"], basin_env(isa, threads))
    return json.loads(out)["best_config"]


def time_basin(basin, shape, isa, threads, config_path):
    out = run([basin, "op", *op_args(shape, isa), "--config", config_path, "--oracle", "never", "--json"],
              basin_env(isa, threads))
    return json.loads(out)["latency_us"]


def time_onednn(shape, isa, threads, rounds=5):
    out = run([sys.executable, "-c", ONEDNN, *(str(v) for v in shape), str(threads), str(rounds)], onednn_env(isa))
    return min(json.loads(out.strip().splitlines()[-1])["us"])


def onednn_kernel(shape, isa, threads):
    """The implementation oneDNN runs (ONEDNN_VERBOSE's convolution line: "jit:avx2")."""
    env = dict(onednn_env(isa), ONEDNN_VERBOSE="1")
    out = run([sys.executable, "-c", ONEDNN, *(str(v) for v in shape), str(threads), "1"], env)
    return kernel_of(out)


def kernel_of(verbose):
    for line in verbose.splitlines():
        f = line.split(",")
        if len(f) > 6 and f[0] == "onednn_verbose" and "exec" in f and "convolution" in f:
            return f[f.index("convolution") + 1]
    return "unknown"


def table(rows):
    lines = ["| convolution | seed | basin (us) | oneDNN (us) | basin GFLOP/s | oneDNN GFLOP/s | oneDNN / basin |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['seed']} | {r['error']} |")
            continue
        f = flops(SHAPES[r["name"]])
        lines.append(f"| {r['name']} | {r['seed']} | {r['basin_us']:.1f} | {r['onednn_us']:.1f} | "
                     f"{f / r['basin_us'] / 1e3:.1f} | {f / r['onednn_us'] / 1e3:.1f} | "
                     f"{r['onednn_us'] / r['basin_us']:.2f}x |")
    ok = [r for r in rows if "error" not in r]
    kernels = sorted({r.get("onednn_kernel", "unknown") for r in ok})
    if kernels:
        lines.append(f"\noneDNN ran {', '.join(kernels)}.")
    if ok:
        g = math.exp(sum(math.log(r["onednn_us"] / r["basin_us"]) for r in ok) / len(ok))
        lines.append(f"Geometric mean oneDNN / basin: {g:.2f}x over {len(ok)} rows.")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--isa", choices=["avx2", "avx512", "native"], default="avx2")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--basin", default=os.path.join(HERE, "..", "build", "bin", "basin"))
    ap.add_argument("--out", default=None, help="where the records and configurations stay (default: a new temporary folder)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    names = a.shapes.split(",")
    for n in names:
        if n not in SHAPES:
            ap.error(f"unknown convolution {n!r}; the known ones: {', '.join(SHAPES)}")
    out = a.out or tempfile.mkdtemp(prefix="conv_kernels-")
    os.makedirs(out, exist_ok=True)
    rows = []
    for name in names:
        shape = SHAPES[name]
        for seed in (int(s) for s in a.seeds.split(",")):
            row = {"name": name, "seed": seed}
            try:
                records = os.path.join(out, f"{name}.{a.isa}.{seed}.db")
                config = tune(a.basin, shape, a.isa, a.threads, a.trials, seed, records)
                path = os.path.join(out, f"{name}.{a.isa}.{seed}.json")
                with open(path, "w") as f:
                    json.dump(config, f)
                b, o = [], []
                for _ in range(a.rounds):  # in alternation
                    b.append(time_basin(a.basin, shape, a.isa, a.threads, path))
                    o.append(time_onednn(shape, a.isa, a.threads))
                row.update(basin_us=min(b), onednn_us=min(o), config=config,
                           onednn_kernel=onednn_kernel(shape, a.isa, a.threads))
            except (RuntimeError, ValueError, KeyError) as e:
                row["error"] = str(e)
            rows.append(row)
            print(json.dumps(row) if a.json else f"{name} seed {seed}: " +
                  (row.get("error") or f"basin {row['basin_us']:.1f} us, oneDNN {row['onednn_us']:.1f} us"),
                  file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps({"isa": a.isa, "threads": a.threads, "trials": a.trials, "rows": rows}, indent=1))
    else:
        print(f"ISA {a.isa}, {a.threads} threads, {a.trials} trials of the gradient search per convolution\n")
        print(table(rows))


if __name__ == "__main__":
    main()
