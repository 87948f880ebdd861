# B/A latency ratios of an ab.py run by workload and kind, and compile seconds:
#   /usr/bin/python3 analyse.py schedulers-off.jsonl
import json, math, collections
import sys
rs=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
by=collections.defaultdict(list); comp=collections.defaultdict(lambda:[0,0])
allr=[]
for r in rs:
    if None in r['A'] or None in r['B']: continue
    a=[x[0] for x in r['A']]; b=[x[0] for x in r['B']]
    # ratio B/A from the mean of logs
    ratio=math.exp(sum(map(math.log,b))/2 - sum(map(math.log,a))/2)
    # self-noise: A2/A1
    by[(r['workload'],r['kind'])].append(ratio); allr.append(ratio)
    comp[r['workload']][0]+=sum(x[1] for x in r['A'])/2; comp[r['workload']][1]+=sum(x[1] for x in r['B'])/2
gm=lambda v: math.exp(sum(map(math.log,v))/len(v))
for k,v in sorted(by.items()): print(k, len(v), 'B/A geomean %.4f'%gm(v), 'min %.3f max %.3f'%(min(v),max(v)))
for w,(a,b) in comp.items(): print(w,'compile A %.1f s B %.1f s'%(a,b))
print('all', len(allr), '%.4f'%gm(allr))
noise=[math.exp(abs(math.log(r['A'][0][0]/r['A'][1][0]))) for r in rs if None not in r['A']]
print('A1/A2 abs ratio geomean %.4f'%gm(noise))
