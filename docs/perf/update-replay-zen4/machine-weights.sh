#!/bin/bash
B=/work/main/build/bin
W=/work/main/models/weights
FILES="/tmp/s41/sb/resnet18-c6-s2/resnet18-c6.2.annealing.db /tmp/s41/sb/resnet18-c6-s2/resnet18-c6.2.gradient.db /tmp/s41/sb/resnet18-c12-s2/resnet18-c12.2.annealing.db /tmp/s41/sb/resnet18-c12-s2/resnet18-c12.2.gradient.db /tmp/p6.db"
for f in $FILES; do
  for e in cpu_ensemble.bin cpu_ensemble.family-25-model-17.bin; do
    echo "$f $e $($B/basin estimator eval --records $f --all --estimator $W/$e --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d.get("pairwise_accuracy", d.get("eval",{}).get("pairwise_accuracy",-1)),4))')"
  done
done
R=""; for f in $FILES /tmp/s40/sb/resnet18-c6-s2/*.db /tmp/s40/sb/resnet18-c12-s2/*.db /tmp/s40/ab/resnet18-c12-s3/resnet18-c12.3.gradient.db /tmp/s40/ab/resnet18-c12-s3/resnet18-c12.3.annealing.db; do R="$R --records $f"; done
for e in cpu_ensemble.bin cpu_ensemble.family-25-model-17.bin; do
  echo "replay $e"; BASIN_NUM_THREADS=1 $B/update_replay $R --estimator $W/$e
done
