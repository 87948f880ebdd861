#!/usr/bin/python3
"""Session 46: the A B B A runs of ab.sh. Per workload: each run's seconds, and the ratio
of the runs compiling ahead (2 threads) to those compiling one program at a time (1),
in search seconds and in the pool's seconds; and, since both measured the same programs,
the geometric mean of their per-program latency ratio (the code must run as fast).
Usage: analyse.py OUT"""
import glob, json, math, os, sqlite3, statistics, sys

out = sys.argv[1]
rows = []
for w in ["resnet18-c2", "resnet18-c6", "resnet18-c12", "gemm-1024"]:
    runs = {}
    for f in sorted(glob.glob(f"{out}/{w}.*.json")):
        _, t, k, _ = os.path.basename(f).rsplit(".", 3)
        txt = open(f).read()
        if not txt.strip():
            continue
        j = json.loads(txt)
        lat = {c: l for c, l in sqlite3.connect(f[:-5] + ".db").execute(
            "select config, min_latency_us from records where error=''")}
        runs[(int(t), int(k))] = (j, lat)
        print(f"{w} threads {t} run {k}: search {j['search_seconds']:.1f} s, pool {j['measure_seconds']:.1f} s, "
              f"compile (sum) {j['compile_seconds']:.1f} s, measured ahead {j.get('measured_ahead', 0)}, "
              f"best {j['best_latency_us']:.1f} us")
    one = [v for (t, _), v in runs.items() if t == 1]
    two = [v for (t, _), v in runs.items() if t == 2]
    if not one or not two:
        continue
    s1 = statistics.mean(j["search_seconds"] for j, _ in one)
    s2 = statistics.mean(j["search_seconds"] for j, _ in two)
    m1 = statistics.mean(j["measure_seconds"] for j, _ in one)
    m2 = statistics.mean(j["measure_seconds"] for j, _ in two)
    logs = []
    for _, a in one:
        for _, b in two:
            logs += [math.log(b[c] / a[c]) for c in a if c in b]
    geo = math.exp(statistics.mean(logs))
    rows.append((w, s1, s2, m1, m2, geo))
print()
print("| workload | search s (1 thread) | search s (ahead) | ratio | pool s (1) | pool s (ahead) | program latency, ahead / 1 (geomean) |")
print("|---|---|---|---|---|---|---|")
for w, s1, s2, m1, m2, geo in rows:
    print(f"| {w} | {s1:.1f} | {s2:.1f} | {s2 / s1:.3f} | {m1:.1f} | {m2:.1f} | {geo:.3f} |")
