#!/bin/bash
# Session 40: ensembles trained on the Zen 5 file, the new Zen 4 file, or both (held-out tasks left out of all), scored on each file's held-out tasks.
B=/work/main/build/bin/basin
for v in z5 z4 both; do
  /usr/bin/time -f "train-$v: %e s" $B estimator train --records train-$v.db --estimator ensemble --seed 1 --test-fraction 0 --out ens-$v.bin > train-$v.log 2>&1
  tail -1 train-$v.log
  for t in test-z4 test-z5; do echo "$v on $t: $($B estimator eval --records $t.db --all --estimator ens-$v.bin --json | tr -d '\n ' )"; done
done
# the shipped ensemble (trained on every Zen 5 task, so its test-z5 figure is not held out)
for t in test-z4 test-z5; do echo "shipped on $t: $($B estimator eval --records $t.db --all --estimator ensemble --json | tr -d '\n ' )"; done
