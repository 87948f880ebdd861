import sqlite3, sys, math, statistics
old = sqlite3.connect(sys.argv[1]); new = sqlite3.connect(sys.argv[2])
def load(c):
    d = {}
    for t, s, cfg, lat in c.execute("select task_key, sketch, config, coalesce(latency_us, min_latency_us) from records where error='' and min_latency_us is not null"):
        d[(t, s, cfg)] = lat
    return d
o = load(old); n = load(new)
common = [k for k in n if k in o]
print("new", len(n), "old", len(o), "paired", len(common))
by = {}
for k in common: by.setdefault(k[0], []).append((o[k], n[k]))
ratios = [math.log(n[k]/o[k]) for k in common]
print("geomean new/old %.3f" % math.exp(statistics.mean(ratios)))
qs = sorted(ratios); print("quantiles new/old", [round(math.exp(qs[int(q*(len(qs)-1))]),3) for q in (0,0.05,0.25,0.5,0.75,0.95,1)])
# within-task pairwise agreement
agree = tot = 0; top1 = 0; ntask = 0
for t, v in by.items():
    if len(v) < 5: continue
    ntask += 1
    for i in range(len(v)):
        for j in range(i+1, len(v)):
            a = (v[i][0] < v[j][0]); b = (v[i][1] < v[j][1])
            tot += 1; agree += (a == b)
    bo = min(range(len(v)), key=lambda i: v[i][0]); bn = min(range(len(v)), key=lambda i: v[i][1])
    top1 += (bo == bn)
print("tasks", ntask, "pairwise agreement old vs new labels %.4f" % (agree/max(tot,1)), "same best %d/%d" % (top1, ntask))
