import json,subprocess,sys,os
W=sys.argv[1]
V=[
 ('g1 c2.2.8 h1.1.7 w1.7.1 u16', 'tile.vec=c.pack.acc1.stage', dict(c=[2,2,8],h=[1,1,7],w=[1,7,1],rc=[1],rh=[3],rw=[1]),16),
 ('S2 folded c4.1.8 w7.1.1', 'tile.vec=c.pack.acc1.stage', dict(c=[4,1,8],h=[1,1,7],w=[7,1,1],rc=[1],rh=[3],rw=[1]),16),
 ('S2 c only c2.2.8 w7.1.1', 'tile.vec=c.pack.acc1.stage', dict(c=[2,2,8],h=[1,1,7],w=[7,1,1],rc=[1],rh=[3],rw=[1]),16),
 ('S2 w only c4.1.8 w1.7.1', 'tile.vec=c.pack.acc1.stage', dict(c=[4,1,8],h=[1,1,7],w=[1,7,1],rc=[1],rh=[3],rw=[1]),16),
 ('g1 acc2', 'tile.vec=c.pack.acc2.stage', dict(c=[2,2,8],h=[1,1,7],w=[1,7,1],rc=[1],rh=[3],rw=[1]),16),
 ('g1 rc8', 'tile.vec=c.pack.acc1.stage', dict(c=[2,2,8],h=[1,1,7],w=[1,7,1],rc=[8],rh=[3],rw=[1]),16),
 ('g1 rw3', 'tile.vec=c.pack.acc1.stage', dict(c=[2,2,8],h=[1,1,7],w=[1,7,1],rc=[1],rh=[3],rw=[3]),16),
 ('g5 c4.4.8', 'tile.vec=c.pack.acc1.stage', dict(c=[4,4,8],h=[1,1,7],w=[1,7,1],rc=[1],rh=[3],rw=[1]),16),
 ('a1 c4.8.8 h7.1.1 w1.1.7', 'tile.vec=c.pack.acc1.stage', dict(c=[4,8,8],h=[7,1,1],w=[1,1,7],rc=[1],rh=[3],rw=[3]),16),
]
sel=sys.argv[2:]
for name,sk,sp,u in V:
    if sel and name not in sel: continue
    sp=dict(sp); sp.setdefault('n',[1,1,1])
    json.dump(dict(sketch=sk,splits=sp,unroll=u),open('v2.json','w'))
    r=subprocess.run(['/work/main/build/bin/basin','op','--workload',W,'--config','v2.json','--json'],capture_output=True,text=True,env=dict(os.environ,BASIN_NUM_THREADS='1'))
    try:
        d=json.loads(r.stdout); print(f"{name:32s} {d['latency_us']:9.1f} verified={d['verified']}",flush=True)
    except Exception as e: print(name,'ERR',r.stderr[-300:],flush=True)
