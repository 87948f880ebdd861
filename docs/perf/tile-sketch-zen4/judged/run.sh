#!/bin/bash
# The judged pair, two threads, twice each in turn.
B=/work/main/build/bin/basin
for p in 1 2; do for s in gradient annealing; do
  rm -f $s-$p.db*
  $B tune-op --workload resnet18-c6 --strategy $s --trials 200 --compare --json --records $s-$p.db > $s-$p.json 2> $s-$p.err
done; done
echo done > DONE
