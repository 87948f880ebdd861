#!/bin/bash
cd /tmp/s42/judged
for i in 1 2; do for s in gradient annealing; do
  rm -f $s-$i.db*
  /work/main/build/bin/basin tune-op --workload resnet18-c6 --strategy $s --trials 200 --compare --json --records $s-$i.db > $s-$i.json 2> $s-$i.log
done; done
echo done > DONE
