#!/usr/bin/env python3
# The seed pairs again, timed side by side. For every (gradient run, annealing run) pair,
# the gradient run's best program as of 20% of the annealing run's trials and seconds (the
# last entry of its `bests` within both) against the annealing run's final best. Every
# such program is timed in turn, ROUNDS rounds (`basin op --config`, the full protocol,
# one thread), and a pair meets the target when the gradient program's median over the
# rounds is at most the annealing program's.
#   sbs_pairs.py WORKLOAD g1.json,g2.json,... a1.json,... [ROUNDS] > sbs.txt
import json, os, statistics, subprocess, sys, tempfile
here = os.path.dirname(os.path.abspath(__file__))
B = os.environ.get('B', os.path.join(here, '../../../build/bin/basin'))
workload = sys.argv[1]
grad = sorted(sys.argv[2].split(','))
ann = sorted(sys.argv[3].split(','))
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 4

def final(f):
    j = json.load(open(f)); c = j['curve'][-1]
    return j['best_config'], c[1], c[0], c[2]

def best_within(f, trials, seconds):
    picked = None
    for b in json.load(open(f))['bests']:
        if b['trials'] <= trials and b['seconds'] <= seconds:
            picked = b
    return picked

programs = {}  # key: canonical config JSON -> name
def name_of(cfg, label):
    k = json.dumps(cfg, sort_keys=True)
    if k not in programs:
        programs[k] = label
    return programs[k]

pairs = []
for a in ann:
    acfg, at, asec, abest = final(a)
    aname = name_of(acfg, os.path.basename(a))
    for g in grad:
        b = best_within(g, 0.2 * at, 0.2 * asec)
        gname = None if b is None else name_of(b['config'], '%s@%d' % (os.path.basename(g), b['trials']))
        pairs.append((a, g, aname, gname, abest, None if b is None else b['latency_us']))

tmp = tempfile.mkdtemp()
files = {}
for i, (k, n) in enumerate(programs.items()):
    files[n] = os.path.join(tmp, '%d.json' % i)
    open(files[n], 'w').write(k)
times = {n: [] for n in files}
env = dict(os.environ, BASIN_NUM_THREADS='1')
for r in range(rounds):
    for n, p in files.items():
        out = subprocess.run([B, 'op', '--workload', workload, '--config', p, '--oracle', 'never',
                              '--json'], capture_output=True, text=True, env=env, check=True).stdout
        times[n].append(json.loads(out)['latency_us'])
        print('round %d %-22s %.1f' % (r + 1, n, times[n][-1]), file=sys.stderr)

print('%s: %d rounds, one thread; median latency (us) over the rounds' % (workload, rounds))
for n in files:
    print('  %-22s median %.1f  (%s)' % (n, statistics.median(times[n]),
                                         ' '.join('%.0f' % t for t in times[n])))
met = 0
for a, g, an, gn, abest, gbest in pairs:
    am = statistics.median(times[an])
    if gn is None:
        print('%-14s %-14s no gradient best within 20%%' % (os.path.basename(a), os.path.basename(g)))
        continue
    gm = statistics.median(times[gn])
    ok = gm <= am; met += ok
    print('%-14s %-14s gradient %-22s %.1f vs %.1f: %.3f%s  (during tuning %.0f vs %.0f)' % (
        os.path.basename(a), os.path.basename(g), gn, gm, am, gm / am, ' *' if ok else '', gbest, abest))
print('pairs meeting the target side by side: %d of %d' % (met, len(pairs)))
