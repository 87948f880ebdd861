#!/bin/bash
# The judged pair (two threads, every core), gradient then annealing, twice; then the
# four best programs timed in turn, 3 rounds, full protocol. Run in an output folder:
#   mkdir -p /tmp/judged && cd /tmp/judged && /work/main/docs/perf/compile-ahead/judged.sh
B=${B:-/work/main/build/bin/basin}
for p in 1 2; do for s in gradient annealing; do
  rm -f $s-$p.db*
  $B tune-op --workload resnet18-c6 --strategy $s --trials 200 --compare --json --records $s-$p.db > $s-$p.json 2> $s-$p.err
  /usr/bin/python3 -c "import json; json.dump(json.load(open('$s-$p.json'))['best_config'], open('$s-$p.cfg.json', 'w'))"
done; done
for r in 1 2 3; do for f in gradient-1 annealing-1 gradient-2 annealing-2; do
  echo "$f $($B op --workload resnet18-c6 --config $f.cfg.json --oracle never --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["latency_us"])')"
done; done > side-by-side.raw
echo done > DONE
