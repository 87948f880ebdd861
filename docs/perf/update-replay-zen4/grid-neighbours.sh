#!/bin/bash
F="--records /tmp/p6.db"
for f in /tmp/s40/sb/resnet18-c6-s2/*.db /tmp/s40/sb/resnet18-c12-s2/*.db /tmp/s40/ab/resnet18-c12-s3/resnet18-c12.3.gradient.db /tmp/s40/ab/resnet18-c12-s3/resnet18-c12.3.annealing.db /tmp/s40/judged/j1-gradient.db /tmp/s40/judged/j2-annealing.db /tmp/s41/z5-* /tmp/s41/sb/*/*.db; do F="$F --records $f"; done
run() { echo "== $*"; env "$@" BASIN_NUM_THREADS=1 /work/main/build/bin/update_replay $F --estimator /work/main/models/weights/cpu_ensemble.bin | tail -1; }
run X=base
run X_LR=0.003
run X_MLP_EPOCHS=4
run X_MLP_WINDOW=256
run X_MLP_WINDOW=256 X_MLP_EPOCHS=4
run X_LR=0.0003
