#!/usr/bin/env python3
# For every run in the folders given (seeds.sh's layout: NAME.json beside NAME.db), the
# best latency the run reported over the lowest median of a confirmed program in its
# own records: above 1 where the last contest was held in a slow phase of the host.
#   /usr/bin/python3 docs/perf/zen4-s54/reported_best.py /tmp/c12 /tmp/c9 ...
import glob, json, os, sqlite3, sys
rows = []
for d in sys.argv[1:]:
    for j in glob.glob(os.path.join(d, '*.json')):
        db = j[:-5] + '.db'
        if not os.path.exists(db):
            continue
        best = json.load(open(j))['best_latency_us']
        low = sqlite3.connect(db).execute(
            "SELECT MIN(latency_us) FROM records WHERE error = '' AND confirm_us != '[]'").fetchone()[0]
        if low:
            rows.append((best / low, j, best, low))
rows.sort(reverse=True)
for r in rows:
    print('%.3f %s reported %.0f us, lowest confirmed median %.0f us' % r)
print('%d runs: %d over 5%%, %d over 2%%' % (len(rows), sum(r[0] > 1.05 for r in rows), sum(r[0] > 1.02 for r in rows)))
