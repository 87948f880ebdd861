import json,sys,collections,statistics as st
tag=sys.argv[1]
rows=[]
for s in ('annealing','gradient'):
    rows+=[json.loads(l) for l in open(f'pred-{tag}-c12-{s}.jsonl')]
rows=[r for r in rows if r['latency_us']>0 and r['sketch']=='tile.vec=c.acc2.stage']
g=collections.defaultdict(list)
for r in rows:
    sp=r['config']['splits']; g[(sp['h'][2],sp['w'][2],sp['c'][2])].append(r)
for k,v in sorted(g.items(),key=lambda kv:st.median(r['score'] for r in kv[1]))[:12]:
    print(tag,k,len(v),"best",round(min(r['latency_us'] for r in v)),"med",round(st.median(r['latency_us'] for r in v)),"score med %.3f min %.3f"%(st.median(r['score'] for r in v),min(r['score'] for r in v)))
