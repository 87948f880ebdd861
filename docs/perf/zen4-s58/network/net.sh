#!/bin/bash
mkdir -p /tmp/s58/net && cd /tmp/s58/net
B=/work/main/build/bin/basin
for i in 1 2; do
  cp /work/main/demo-records.db resumed$i.db
  $B tune zoo:resnet18 --budget 60s --records resumed$i.db --quiet --json > resumed$i.json 2>/dev/null
done
rm -f fresh1.db
$B tune zoo:resnet18 --budget 60s --records fresh1.db --quiet --json > fresh1.json 2>/dev/null
for f in resumed1 resumed2 fresh1; do /usr/bin/python3 -c "import json;d=json.load(open('$f.json'));print('$f', 'overhead %.1f%%' % (100*d['overhead_fraction']), 'propose %.2f update %.2f setup %.2f wall %.1f measured %d resumed %d' % (d['propose_seconds'],d['update_seconds'],d['setup_seconds'],d['search_seconds'],d['measured'],d['resumed']))"; done
