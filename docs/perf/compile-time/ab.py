# Times sample.json's programs under two LLVM settings, in the order A B B A (or the
# given order), each a fresh `basin op --json` on one thread (the full timing: 5 rounds
# of 200 ms; latency_median_us) with its compile seconds. One JSON line per program.
#   /usr/bin/python3 docs/perf/compile-time/ab.py A_ARGS B_ARGS [ORDER] [INDICES]
# Session 45's runs, from the repository root (basin at session 45's first commit):
#   ab.py "-dag-maps-huge-region=1000" "-dag-maps-huge-region=1000 -post-RA-scheduler=false -enable-misched=false"  > schedulers-off.jsonl
#   ab.py "-dag-maps-huge-region=1000" "" ABBA                      > region-limit-abba.jsonl (stopped at 64)
#   ab.py "-dag-maps-huge-region=1000" "" ABBAAB 22,36,37,50,51,64,65,68,78,79,81,82 > region-limit-differing.jsonl
import json, os, subprocess, sys, tempfile
here = os.path.dirname(os.path.abspath(__file__))
sample = json.load(open(os.path.join(here, 'sample.json')))
a_args, b_args = sys.argv[1], sys.argv[2]
order = sys.argv[3] if len(sys.argv) > 3 else 'ABBA'
indices = [int(i) for i in sys.argv[4].split(',')] if len(sys.argv) > 4 else range(len(sample))
tmp = tempfile.mkdtemp()
for i in indices:
    p = sample[i]
    cfg = os.path.join(tmp, '%d.json' % i)
    json.dump(p['config'], open(cfg, 'w'))
    r = {'i': i, 'workload': p['workload'], 'kind': p['kind'], 'A': [], 'B': []}
    for arm in order:
        env = dict(os.environ, BASIN_NUM_THREADS='1', BASIN_LLVM_ARGS=a_args if arm == 'A' else b_args)
        o = subprocess.run(['build/bin/basin', 'op', '--workload', p['workload'], '--config', cfg, '--oracle', 'never', '--json'],
                           env=env, capture_output=True, text=True)
        try:
            j = json.loads(o.stdout)
            r[arm].append((j['latency_median_us'], j['compile_seconds']))
        except ValueError:
            r[arm].append(None)
            print('failed', i, arm, o.stderr[-300:], file=sys.stderr, flush=True)
    print(json.dumps(r), flush=True)
