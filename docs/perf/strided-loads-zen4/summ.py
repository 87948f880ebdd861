import json,statistics as st,sys,math,os
d={}
for b in ['old','new']:
    for p in [1,2]:
        try: j=json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)),'kb-%s-%d.json'%(b,p))))
        except Exception as e: continue
        for w in j['workloads']:
            d.setdefault(w['workload'],{}).setdefault(b,[]).append((w['config_latency_us'],w['torch_latency_us']))
print('| workload | old us | new us | new/old | LibTorch us | old vs LibTorch | new vs LibTorch |')
print('|---|---|---|---|---|---|---|')
go=[];gn=[];r=[]
for w,v in d.items():
    o=min(x[0] for x in v['old']); n=min(x[0] for x in v['new']); t=min(x[1] for x in v['old']+v['new'])
    print('| %s | %.1f | %.1f | %.3f | %.1f | %.2f | %.2f |'%(w,o,n,n/o,t,t/o,t/n))
    r.append(n/o)
    if w.startswith('resnet18'): go.append(t/o); gn.append(t/n)
g=lambda v: math.exp(sum(map(math.log,v))/len(v))
print('geomean new/old %.3f; C1-C12 vs LibTorch old %.3f new %.3f'%(g(r),g(go),g(gn)))
