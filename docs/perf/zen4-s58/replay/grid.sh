#!/bin/bash
cd /work/main
F=""
for f in docs/perf/zen4-s56/subset/*/*.db demo-records.db; do F="$F --records $f"; done
run() { echo "== $*"; env "$@" BASIN_NUM_THREADS=1 build/bin/update_replay $F --batch ${B:-16} --json > /tmp/s58/$1.json; /usr/bin/python3 -c "
import json,sys; d=json.load(open('/tmp/s58/$1.json')); print(round(d['update_seconds'],2), round(d['next_batch_pairwise'],4)); [print('  ', r['records'].split('/')[-1][:40], round(r['update_seconds'],2), round(r['next_batch_pairwise'],3), round(r['predict_1000_seconds']*1e3,1)) for r in d['runs']]"; }
run X=base
run X_MLP_WINDOW=256
run X_MLP_WINDOW=256 X_TREE_WINDOW=256
run X_MLP_WINDOW=128 X_TREE_WINDOW=128
run X_MLP_WINDOW=128
