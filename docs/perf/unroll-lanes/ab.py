# Times sample.json's programs under two basin binaries, A (before) and B (after): first
# each program's loop IR from both (`basin op --emit ir`, quick timing); where the two
# differ, the program is timed in the order A B B A, each a fresh `basin op --json` on
# one thread (the full timing: 5 rounds of 200 ms; latency_median_us) with its compile
# seconds. One JSON line per program ("same": the loop IR is identical, not timed).
#   /usr/bin/python3 docs/perf/unroll-lanes/ab.py BASIN_A BASIN_B [ORDER] > FILE.jsonl
import json, os, subprocess, sys, tempfile
here = os.path.dirname(os.path.abspath(__file__))
sample = json.load(open(os.path.join(here, 'sample.json')))
bins = {'A': sys.argv[1], 'B': sys.argv[2]}
order = sys.argv[3] if len(sys.argv) > 3 else 'ABBA'
tmp = tempfile.mkdtemp()
env = dict(os.environ, BASIN_NUM_THREADS='1')


def op(arm, cfg, w, *extra):
    return subprocess.run([bins[arm], 'op', '--workload', w, '--config', cfg, '--oracle', 'never', *extra],
                          env=env, capture_output=True, text=True)


for i, p in enumerate(sample):
    cfg = os.path.join(tmp, '%d.json' % i)
    json.dump(p['config'], open(cfg, 'w'))
    ir = {arm: op(arm, cfg, p['workload'], '--timing', 'quick', '--emit', 'ir').stdout.split('\noperator ')[0]
          for arm in 'AB'}
    r = {'i': i, 'workload': p['workload'], 'kind': p['kind'], 'same': ir['A'] == ir['B'], 'A': [], 'B': []}
    if not r['same']:
        for arm in order:
            o = op(arm, cfg, p['workload'], '--json')
            try:
                j = json.loads(o.stdout)
                r[arm].append((j['latency_median_us'], j['compile_seconds']))
            except ValueError:
                r[arm].append(None)
                print('failed', i, arm, o.stderr[-300:], file=sys.stderr, flush=True)
    print(json.dumps(r), flush=True)
