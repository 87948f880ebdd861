import json, sqlite3, sys, collections
# per (sketch, tile i x j): fastest latency, count, per file
rows = collections.defaultdict(list)
for f in sys.argv[1:]:
    for cfg, lat, rid in sqlite3.connect(f).execute("select config, latency_us, id from records where latency_us is not null"):
        c = json.loads(cfg); s = c['splits']
        acc1 = '.acc1' in c['sketch']
        ti = s['i'][-1] * (s['i'][-2] if acc1 else 1); tj = s['j'][-1] * (s['j'][-2] if acc1 else 1)
        rows[(c['sketch'].replace('tile.',''), s['i'][-1], s['j'][-1])].append((lat, f.split('/')[-1], rid))
out = sorted(rows.items(), key=lambda kv: min(kv[1])[0])
for k, v in out[:14]:
    v.sort()
    print(k, 'n', len(v), 'best', [(round(l), f[:14], r) for l, f, r in v[:3]])
