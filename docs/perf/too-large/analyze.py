#!/usr/bin/python3
# Program size against compile time and latency, from `compile_replay --each` (sizes.tsv:
# records file, record id, emitted LLVM instructions, compile seconds, latency in us or
# -1 for an error; later versions add a sixth column, a hash of the machine code). Prints, per run, the largest program within 10% of the run's best and
# the programs over each size.
import collections, csv, sys
path = sys.argv[1] if len(sys.argv) > 1 else "sizes.tsv"
runs = collections.defaultdict(list)
for row in csv.reader(open(path), delimiter="\t"):
    f, _, n, s, l = row[:5]
    runs[f].append((int(n), float(s), float(l)))
print("| run | programs | best (us) | largest within 10% of the best | over 80,000: programs, compile s, fastest / best | over 100,000: programs, compile s, fastest / best |")
print("|---|---|---|---|---|---|")
for f, v in runs.items():
    best = min(l for n, s, l in v if l > 0)
    near = max(n for n, s, l in v if 0 < l <= 1.1 * best)
    cells = []
    for limit in (80000, 100000):
        over = [(n, s, l) for n, s, l in v if n > limit]
        ran = [l / best for n, s, l in over if l > 0]
        cells.append("%d, %.1f, %s" % (len(over), sum(s for n, s, l in over), "%.1f" % min(ran) if ran else "-"))
    print("| %s | %d | %.1f | %d | %s | %s |" % (f.replace(".db", ""), len(v), best, near, cells[0], cells[1]))
