# sample.json: programs of session 51's seed-1 tuning runs (resnet18-c2, -c6, -c9,
# -c12, gemm-1024; 1000 trials, both strategies' records pooled): per workload the 10
# fastest, the 4 slowest to compile among the rest, and 4 others at random. The
# records files were not committed; sample.json is.
#   /usr/bin/python3 docs/perf/unroll-lanes/sample.py > docs/perf/unroll-lanes/sample.json
import json, random, sqlite3
random.seed(52)
out = []
for w in ('resnet18-c2', 'resnet18-c6', 'resnet18-c9', 'resnet18-c12', 'gemm-1024'):
    rows = {}
    for s in ('annealing', 'gradient'):
        db = sqlite3.connect('/tmp/s51/sub/%s-s1/%s.1.%s.db' % (w, w, s))
        for cfg, lat, comp in db.execute("select config, latency_us, compile_seconds from records "
                                         "where latency_us is not null and error=''"):
            if cfg not in rows or rows[cfg][0] > lat:
                rows[cfg] = (lat, comp)
    ranked = sorted(rows.items(), key=lambda kv: kv[1][0])
    top, rest = ranked[:10], ranked[10:]
    slow = sorted(rest, key=lambda kv: -kv[1][1])[:4]
    rnd = random.sample([r for r in rest if r not in slow], 4)
    for kind, lst in (('top', top), ('slowcompile', slow), ('random', rnd)):
        for cfg, (lat, comp) in lst:
            out.append({'workload': w, 'kind': kind, 'config': json.loads(cfg),
                        'search_latency_us': lat, 'search_compile_s': comp})
print(json.dumps(out, indent=0))
