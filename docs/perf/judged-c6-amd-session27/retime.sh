#!/bin/bash
# Each judged run's best program timed with the full protocol, all in turn, three rounds.
cd "$(dirname "$0")"
B=${BASIN:-../../../build/bin/basin}
for round in 1 2 3; do for f in j-*-?.cfg.json; do
  echo "$round ${f%.cfg.json} $($B op --workload resnet18-c6 --config $f --timing full --oracle never --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["latency_us"],1), round(d["latency_median_us"],1))')"
done; done
