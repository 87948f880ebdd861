import json,sys,collections,statistics as st
for f in sys.argv[1:]:
    rows=[json.loads(l) for l in open(f)]; rows=[r for r in rows if r['latency_us']>0 and 'vec=c' in r['sketch'] and 'stage' in r['sketch']]
    rows.sort(key=lambda r:r['score']); rk={id(r):i for i,r in enumerate(rows)}
    g=collections.defaultdict(list)
    for r in rows:
        sp=r['config']['splits']; g[(sp['h'][2],sp['w'][2],sp['c'][2],'pack' if 'pack' in r['sketch'] else 'nopack')].append(r)
    print(f, len(rows))
    for k,v in sorted(g.items(),key=lambda kv:min(r['latency_us'] for r in kv[1]))[:6]:
        print("  ",k,len(v),"best",round(min(r['latency_us'] for r in v)),"med",round(st.median(r['latency_us'] for r in v)),"rank med",st.median(rk[id(r)] for r in v))
