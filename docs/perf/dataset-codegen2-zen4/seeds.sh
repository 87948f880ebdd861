#!/bin/bash
# Training noise: the shipped-style ensembles (all tasks) with seed 2, on the Zen 5 file alone and on both files.
cd /tmp/s40 && B=/work/main/build/bin/basin
$B estimator train --records zen4/zen5.db --estimator ensemble --seed 2 --test-fraction 0 --out z5-s2.bin > z5-s2.log 2>&1
$B estimator train --records zen4/all.db --estimator ensemble --seed 2 --test-fraction 0 --out both-s2.bin > both-s2.log 2>&1
for db in z5rec/resnet18-c12.2.annealing.db z5rec/resnet18-c12.2.gradient.db ab/resnet18-c12-s3/resnet18-c12.3.annealing.db ab/resnet18-c12-s3/resnet18-c12.3.gradient.db judged/j1-annealing.db judged/j2-annealing.db judged/j1-gradient.db judged/j2-gradient.db sb/resnet18-c12-s2/*.db sb/resnet18-c6-s2/*.db; do
  echo "$db: $(for e in old_ensemble.bin z5-s2.bin ensemble both-s2.bin; do $B estimator eval --records $db --all --estimator $e --json | /usr/bin/python3 -c 'import json,sys;d=json.load(sys.stdin);print(round(d["pairwise_accuracy"],3), end=" ")'; done)"
done
