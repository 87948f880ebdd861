#!/usr/bin/env python3
# Every (gradient seed, annealing seed) pair: does the gradient run reach the annealing
# run's final best within 20% of its trials and of its seconds?
import json, sys
grad = sorted(sys.argv[1].split(','))
ann = sorted(sys.argv[2].split(','))
def curve(f):
    return json.load(open(f))['curve']
def reach(c, target):
    for s, t, b in c:
        if b > 0 and b <= target:
            return t, s
    return None
met = 0; total = 0
for a in ann:
    ca = curve(a); fa = ca[-1]; at, asec, abest = fa[1], fa[0], fa[2]
    row = []
    for g in grad:
        r = reach(curve(g), abest)
        ok = r is not None and r[0] <= 0.2 * at and r[1] <= 0.2 * asec
        met += ok; total += 1
        row.append('%s' % ('-' if r is None else '%d/%.2f%s' % (r[0], r[1] / asec, '*' if ok else '')))
    print('%-14s best %.0f in %d trials %.0f s: ' % (a, abest, at, asec) + ' '.join(row))
print('pairs meeting the target: %d of %d' % (met, total))
for g in grad:
    c = curve(g); b200 = min([b for s, t, b in c if t <= 200 and b > 0]); print(g, 'best at 200 trials %.0f' % b200, 'final %.0f' % c[-1][2])
