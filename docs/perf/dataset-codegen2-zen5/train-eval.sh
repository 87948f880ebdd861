B=/work/main/build/bin/basin
for v in old new newonly; do
  /usr/bin/time -f "%e s" $B estimator train --records train-$v.db --estimator ensemble --seed 1 --test-fraction 0 --out ens-$v.bin > train-$v.log 2>&1
  for t in test-new test-old; do echo "$v on $t: $($B estimator eval --records $t.db --all --estimator ens-$v.bin --json | tr -d '\n ' )"; done
done
