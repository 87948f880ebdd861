# sample.json: 84 programs of six workloads from session 44's (C2, C6, C10, C12, seed 1)
# and session 42's (C9 seed 1, GEMM seed 2) 1000-trial tuning runs, both strategies'
# records pooled: per workload the 8 fastest, the 2 slowest to compile among the rest,
# and 4 others at random. The records files were not committed; sample.json is.
import sqlite3, json, random, sys
random.seed(45)
srcs = {
 'resnet18-c2': '/tmp/s44/resnet18-c2-s1/resnet18-c2.1.%s.db',
 'resnet18-c6': '/tmp/s44/resnet18-c6-s1/resnet18-c6.1.%s.db',
 'resnet18-c10': '/tmp/s44/resnet18-c10-s1/resnet18-c10.1.%s.db',
 'resnet18-c12': '/tmp/s44/resnet18-c12-s1/resnet18-c12.1.%s.db',
 'resnet18-c9': '/tmp/s42/ab/resnet18-c9-s1/resnet18-c9.1.%s.db',
 'gemm-1024': '/tmp/s42/ab/gemm-1024-s2/gemm-1024.2.%s.db',
}
out = []
for w, pat in srcs.items():
    rows = {}
    for s in ('annealing', 'gradient'):
        db = sqlite3.connect(pat % s)
        for cfg, lat, comp in db.execute("select config, latency_us, compile_seconds from records where latency_us is not null and error=''"):
            if cfg not in rows or rows[cfg][0] > lat: rows[cfg] = (lat, comp)
    ranked = sorted(rows.items(), key=lambda kv: kv[1][0])
    top = ranked[:8]
    rest = ranked[8:]
    slow = sorted(rest, key=lambda kv: -kv[1][1])[:2]   # the slowest to compile
    rnd = random.sample([r for r in rest if r not in slow], 4)
    for kind, lst in (('top', top), ('slowcompile', slow), ('random', rnd)):
        for cfg, (lat, comp) in lst:
            out.append({'workload': w, 'kind': kind, 'config': json.loads(cfg), 'search_latency_us': lat, 'search_compile_s': comp})
json.dump(out, open('sample.json', 'w'), indent=0)
print(len(out))
