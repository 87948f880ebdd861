#!/bin/bash
# Session 33's judged-command runs (docs/PERFORMANCE.md): the judged commands, in turn,
# three times each, each run's best configuration kept; then every run's best timed
# with the full protocol, all in turn, three rounds (retime.txt). Run from an empty
# folder; BASIN is the basin binary (default build/bin/basin of the checkout).
B=${BASIN:-$(cd "$(dirname "$0")/../../.." && pwd)/build/bin/basin}
for rep in 1 2 3; do for s in gradient annealing; do
  $B tune-op --workload resnet18-c6 --strategy $s --trials 200 --compare --json --records j-$s-$rep.db > j-$s-$rep.json
  /usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["best_config"]))' j-$s-$rep.json > j-$s-$rep.cfg.json
done; done
for round in 1 2 3; do for f in j-*-?.cfg.json; do
  echo "$round ${f%.cfg.json} $($B op --workload resnet18-c6 --config $f --timing full --oracle never --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["latency_us"],1), round(d["latency_median_us"],1))')"
done; done > retime.txt
rm -f j-*.db j-*.db-*
