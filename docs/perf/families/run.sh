#!/bin/bash
cd "$(dirname "$0")/../../.."
for w in resnet18-c2 resnet18-c12; do for s in 1 2 3 4 5 6; do for st in annealing gradient; do
  docs/perf/families/seeds.sh $w $st $s
done; done; done
echo done
