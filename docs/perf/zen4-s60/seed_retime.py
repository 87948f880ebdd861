#!/usr/bin/python3
# The seed study's pairs judged as bench/search judges its re-timed curves. Every program
# that a gradient run held as its best by 20% of the annealing runs' trials and seconds,
# and every annealing run's final best, timed again in turn with the full protocol,
# ROUNDS rounds (bench/search.py's `retime`, one thread). For every (gradient run,
# annealing run) pair, the gradient run's re-timed curve against the annealing run's
# final program, re-timed: the pair meets the target when, within 20% of the annealing
# run's trials and seconds, the gradient run held a program at most as slow (strictly),
# and at most d slower (within noise; d as bench/search's `timing_noise`: one standard
# deviation of the difference between two re-timed figures).
#   seed_retime.py WORKLOAD g1.json,g2.json,... a1.json,... [ROUNDS] > retimed.txt
# Every program's timings go to retimed.json (RETIMED_JSON names another file).
import json, os, sys
from statistics import median
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '../../../bench'))
from search import retime, timing_noise, config_key  # noqa: E402

os.environ['BASIN_NUM_THREADS'] = '1'
basin = os.environ.get('B', os.path.join(here, '../../../build/bin/basin'))
workload = sys.argv[1]
grad = {os.path.basename(f): json.load(open(f)) for f in sorted(sys.argv[2].split(','))}
ann = {os.path.basename(f): json.load(open(f)) for f in sorted(sys.argv[3].split(','))}
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5

def last(run):  # (seconds, trials) at the end of a run
    return run['curve'][-1][0], run['curve'][-1][1]

limit_s = max(0.2 * last(a)[0] for a in ann.values())
limit_t = max(0.2 * last(a)[1] for a in ann.values())
for g in grad.values():
    g['early'] = [b for b in g['bests'] if b['seconds'] <= limit_s and b['trials'] <= limit_t]
configs = {config_key(a['best_config']): a['best_config'] for a in ann.values()}
configs.update({config_key(b['config']): b['config'] for g in grad.values() for b in g['early']})
print(f'{workload}: {len(configs)} programs, {rounds} rounds in turn, full protocol, one thread', flush=True)
times = retime(basin, workload, list(configs.values()), rounds)
with open(os.environ.get('RETIMED_JSON', 'retimed.json'), 'w') as f:  # every program's timings
    json.dump([{'config': configs[k], 'latency_us': t} for k, t in times.items()], f)
# bench/search's noise estimate over every program re-timed here.
d = timing_noise([{'bests_retimed_us': list(times.values())}])
print(f'd = {100 * d:.2f}% (one standard deviation of the difference of two re-timed medians)')
for name, a in ann.items():
    print(f'  {name}: during tuning {a["best_latency_us"]:.1f}, re-timed {median(times[config_key(a["best_config"])]):.1f} us')
strict = within = total = 0
for an, a in ann.items():
    target = median(times[config_key(a['best_config'])])
    s_lim, t_lim = 0.2 * last(a)[0], 0.2 * last(a)[1]
    for gn, g in grad.items():
        held = [(b['trials'], b['seconds'], median(times[config_key(b['config'])]))
                for b in g['early'] if b['seconds'] <= s_lim and b['trials'] <= t_lim]
        best = min((h[2] for h in held), default=None)
        hit = next((h for h in held if h[2] <= target), None)
        hitd = next((h for h in held if h[2] <= (1 + d) * target), None)
        strict += hit is not None; within += hitd is not None; total += 1
        desc = 'none held' if best is None else f'fastest held {best:.1f} ({best / target:.4f})'
        mark = ('met' if hit else 'met within d' if hitd else 'missed')
        at = f' at trial {(hit or hitd)[0]}, {(hit or hitd)[1] / last(a)[0]:.2f} of the seconds' if hitd else ''
        print(f'{an:12s} {gn:12s} target {target:.1f}: {desc}: {mark}{at}')
print(f'pairs meeting the target on the re-timed curves: {strict} of {total} strictly, {within} of {total} within d')
