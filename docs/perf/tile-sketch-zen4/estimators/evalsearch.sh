#!/bin/bash
# usage: evalsearch.sh ESTIMATOR TAG  -- ranks the session-43 search programs (new code generation)
est=$1; tag=$2
for w in c2 c6 c10 c12; do for s in annealing gradient; do
  db=/tmp/s43/resnet18-$w-s1/resnet18-$w.1.$s.db
  out=/work/ds/pred-$tag-$w-$s.jsonl
  r=$(nice -n 19 /work/main/build/bin/basin estimator eval --records $db --all --estimator $est --predictions $out 2>&1 | grep "programs of" | sed 's/.*pairwise accuracy \([0-9.]*\), top-1 recall \([0-9.]*\), top-5 recall \([0-9.]*\).*/\1 \2 \3/')
  best=$(/usr/bin/python3 -c "
import json
rows=[json.loads(l) for l in open('$out')]; rows=[r for r in rows if r['latency_us']>0]
rows.sort(key=lambda r:r['score']); rk={id(r):i for i,r in enumerate(rows)}
b=sorted(rows,key=lambda r:r['latency_us'])[:20]
import statistics; print('fastest20 score-rank median',statistics.median(rk[id(r)] for r in b),'of',len(rows))")
  echo "$tag $w $s pairwise/top1/top5: $r | $best"
done; done
