#!/bin/bash
# Every ResNet-18 layer tuned on one thread by the gradient search (300 trials), against LibTorch (oneDNN) in the same run.
B=/work/main/build/bin/basin
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
  rm -f c$i.db*
  BASIN_NUM_THREADS=1 $B tune-op --workload resnet18-c$i --strategy gradient --trials 300 --compare --json --records c$i.db > c$i.json 2> c$i.err
done
echo done > DONE
