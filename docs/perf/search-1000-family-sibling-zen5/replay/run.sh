#!/bin/bash
# replays of d32c's first 100 trials with variants: VARIANTS="name:ENV=V,ENV=V ..."
export BASIN_NUM_THREADS=1
for seed in ${SEEDS:-3 4 5 6 7 8}; do
 for spec in $VARIANTS; do
  v=${spec%%:*}; envs=${spec#*:}
  db=/tmp/s36/replay/$v-$seed.db
  cp ${SRC:-/tmp/sb/d32c/resnet18-c12.3.gradient.db} $db; sqlite3 $db "delete from records where id>${CUT:-100}"
  env ${envs//,/ } /work/main/build/bin/basin tune-op --workload ${W:-resnet18-c12} --strategy gradient --trials ${T:-300} --seed $seed --records $db --json --quiet > /tmp/s36/replay/$v-$seed.json
 done
done
echo done
