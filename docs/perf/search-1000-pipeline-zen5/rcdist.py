import sys, json, collections, sqlite3
# per db: count of programs by the first reduction split's tile, and the best latency per value
for db in sys.argv[1:]:
    c = collections.Counter(); best = {}
    for cfg, lat in sqlite3.connect(db).execute("select config, latency_us from records"):
        d = json.loads(cfg)["splits"]
        key = "rc" if "rc" in d else "k"
        v = d[key][0]; c[v] += 1
        if lat is not None and (v not in best or lat < best[v]): best[v] = lat
    print(db.split("/")[-1], " ".join(f"{v}:{c[v]}({best.get(v, float('nan')):.0f})" for v in sorted(c)))
