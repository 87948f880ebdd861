import json, subprocess, sys, os, glob, statistics, math
pipes = dict(l.strip().split("|", 1) for l in open(sys.argv[1]) if l.strip())
files = sorted(glob.glob(sys.argv[2] + "/*.json"))
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 2
out = {}
for f in files:
    name = os.path.basename(f)[:-5]
    w = name.rsplit(".", 1)[0]
    res = {p: [] for p in pipes}
    for r in range(reps):
        order = list(pipes) if r % 2 == 0 else list(reversed(list(pipes)))
        for p in order:
            env = dict(os.environ, BASIN_NUM_THREADS="1")
            if pipes[p] in ("O1", "O3"): env["BASIN_LLVM_OPT"] = pipes[p][1]
            else: env["BASIN_LLVM_PIPELINE"] = pipes[p]
            cp = subprocess.run(["/work/main/build/bin/basin", "op", "--workload", w, "--config", f, "--timing", "quick",
                                 "--oracle", "never", "--json"], env=env, capture_output=True, text=True)
            try:
                d = json.loads(cp.stdout); res[p].append((d["latency_us"], d["compile_seconds"] * 1000, d["verified"]))
            except Exception:
                res[p].append((float("nan"), float("nan"), False)); print("FAIL", name, p, cp.stderr[-300:], file=sys.stderr)
    out[name] = res
    print(name, " ".join(f"{p}={min(x[0] for x in v):.0f}/{statistics.median(x[1] for x in v):.0f}ms{'' if all(x[2] for x in v) else '!'}" for p, v in res.items()), flush=True)
json.dump(out, open(sys.argv[4] if len(sys.argv) > 4 else "cmp.json", "w"))
base = list(pipes)[0]
for p in list(pipes)[1:]:
    r = [min(x[0] for x in out[n][p]) / min(x[0] for x in out[n][base]) for n in out]
    r = [x for x in r if x == x]
    print(f"{p} / {base}: geomean {math.exp(sum(map(math.log, r)) / len(r)):.3f}, min {min(r):.3f}, max {max(r):.3f}")
