#!/bin/bash
# Session 26's judged-command runs (docs/PERFORMANCE.md): the judged commands, in turn,
# three times each, then interleaved runs of seeds 1 to 5. Run from an empty folder;
# BASIN is the basin binary (default build/bin/basin of the checkout).
B=${BASIN:-$(dirname "$0")/../../../build/bin/basin}
for rep in 1 2 3; do for s in gradient annealing; do
  $B tune-op --workload resnet18-c6 --strategy $s --trials 200 --compare --json --records j-$s-$rep.db > j-$s-$rep.json
done; done
for seed in 1 2 3 4 5; do
  $B tune-op --workload resnet18-c6 --strategy gradient,annealing --trials 200 --seed $seed --json --records i-$seed.db > i-$seed.json
done
