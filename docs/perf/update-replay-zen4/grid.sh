#!/bin/bash
F="--records /tmp/p6.db"
for f in /tmp/s40/sb/resnet18-c6-s2/*.db /tmp/s40/sb/resnet18-c12-s2/*.db /tmp/s40/ab/resnet18-c12-s3/resnet18-c12.3.gradient.db /tmp/s40/ab/resnet18-c12-s3/resnet18-c12.3.annealing.db /tmp/s40/judged/j1-gradient.db /tmp/s40/judged/j2-annealing.db /tmp/s41/z5-*; do F="$F --records $f"; done
run() { echo "== $*"; env "$@" BASIN_NUM_THREADS=1 /work/main/build/bin/update_replay $F --json > /tmp/s41/$1.json; /usr/bin/python3 -c "
import json,sys; d=json.load(open('/tmp/s41/$1.json')); print(round(d['update_seconds'],2), round(d['next_batch_pairwise'],4)); [print('  ', r['records'].split('/')[-1][:40], round(r['update_seconds'],2), round(r['next_batch_pairwise'],3), round(r['predict_1000_seconds']*1e3,1)) for r in d['runs']]"; }
run X=base
run X_MLP_EPOCHS=2 X_TREE_EPOCHS=2
run X_MLP_EPOCHS=3 X_TREE_EPOCHS=1
