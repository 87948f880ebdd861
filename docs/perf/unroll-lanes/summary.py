# The A/B of ab.jsonl as a table: each program whose loop IR changed, its latency after
# over before (the mean of its A and B timings) and its compile seconds before and after.
#   /usr/bin/python3 docs/perf/unroll-lanes/summary.py docs/perf/unroll-lanes/ab.jsonl
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
changed = [r for r in rows if not r['same']]
print(f"{len(rows)} programs, {len(changed)} with another loop IR\n")
print("| # | workload | kind | latency after / before | compile s, before -> after |")
print("|---|---|---|---|---|")
ratios = []
for r in changed:
    a = [x for x in r['A'] if x]
    b = [x for x in r['B'] if x]
    ratio = (sum(x[0] for x in b) / len(b)) / (sum(x[0] for x in a) / len(a))
    ratios.append(ratio)
    print(f"| {r['i']} | {r['workload']} | {r['kind']} | {ratio:.3f} | "
          f"{sum(x[1] for x in a) / len(a):.2f} -> {sum(x[1] for x in b) / len(b):.2f} |")
g = math.exp(sum(map(math.log, ratios)) / len(ratios))
print(f"\ngeometric mean of the changed programs' latency ratios: {g:.3f}; "
      f"largest {max(ratios):.3f}, smallest {min(ratios):.3f}")
