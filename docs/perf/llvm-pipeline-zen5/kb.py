import json, math, sys
def load(p): return {w["workload"]: w for w in json.load(open(p))["workloads"]}
runs = {k: [load(f"kernels_bench/kb_{k}{r}.json") for r in (1, 2, 3)] for k in ("base", "full")}
ws = list(runs["base"][0])
print("| workload | LibTorch us (min of 6) | base us (min of 3) | full us (min of 3) | full/base | base vs LibTorch | full vs LibTorch |")
print("|---|---|---|---|---|---|---|")
gb, gf, conv_b, conv_f = [], [], [], []
for w in ws:
    t = min(r[w]["torch_latency_us"] for k in runs for r in runs[k])
    b = min(r[w]["config_latency_us"] for r in runs["base"]); f = min(r[w]["config_latency_us"] for r in runs["full"])
    print(f"| {w} | {t:.1f} | {b:.1f} | {f:.1f} | {f/b:.3f} | {t/b:.2f} | {t/f:.2f} |")
    gb.append(f / b)
    if w.startswith("resnet18-c"): conv_b.append(t / b); conv_f.append(t / f)
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print(f"full/base geomean {g(gb):.3f}; C1-C12 vs oneDNN: base {g(conv_b):.3f}, full {g(conv_f):.3f}")
