#!/bin/bash
# Session 56: gemm-1024's final bests of session 55's seed study (docs/perf/zen4-s55/gemm,
# gradient seeds 1-4 at 300 trials, annealing seeds 1-2 at 1000) timed in turn, 4 rounds,
# full protocol, one thread. Run in an output folder; sbs.raw has one line per timing.
B=${B:-/work/main/build/bin/basin}
S=$(cd "$(dirname "$0")/../../zen4-s55/gemm" && pwd)
for f in a1000s1 a1000s2 g300s1 g300s2 g300s3 g300s4; do
  /usr/bin/python3 -c "import json; json.dump(json.load(open('$S/$f.json'))['best_config'], open('$f.cfg.json', 'w'))"
done
for r in 1 2 3 4; do for f in a1000s1 g300s1 a1000s2 g300s2 g300s3 g300s4; do
  echo "$f $(BASIN_NUM_THREADS=1 $B op --workload gemm-1024 --config $f.cfg.json --oracle never --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["latency_us"])')"
done; done > sbs.raw
echo done > DONE
