import json, subprocess, sys, os, glob, math, collections
files = sorted(glob.glob(sys.argv[1] + "/*.json")); reps = int(sys.argv[2]); T = sys.argv[3]
out = {}
for f in files:
    name = os.path.basename(f)[:-5]; w = name.rsplit(".", 1)[0]
    res = {"old": [], "new": []}
    for r in range(reps):
        for b in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
            cp = subprocess.run([f"./basin-{b}", "op", "--workload", w, "--config", f, "--timing", "quick", "--oracle", "never", "--json"],
                                env=dict(os.environ, BASIN_NUM_THREADS=T), capture_output=True, text=True)
            d = json.loads(cp.stdout); res[b].append((d["latency_us"], d["compile_seconds"] * 1000))
    out[name] = res
    print(name, "old=%.0f new=%.0f" % (min(x[0] for x in res["old"]), min(x[0] for x in res["new"])), flush=True)
json.dump(out, open(sys.argv[4], "w"))
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
per = collections.defaultdict(list)
for n, r in out.items():
    per[n.rsplit(".", 1)[0]].append(min(x[0] for x in r["new"]) / min(x[0] for x in r["old"]))
for w, v in per.items(): print(w, "new/old %.3f (%.3f..%.3f)" % (g(v), min(v), max(v)))
print("all", "%.3f" % g([x for v in per.values() for x in v]))
