import json,subprocess,sys,os
# name, workload, sketch, splits, unroll
V=[
 ('c10 g1 S2=1',        'resnet18-c10','tile.vec=c.pack.acc1.stage', dict(c=[64,1,8],h=[7,1,1],w=[1,1,7],rc=[1],rh=[1],rw=[3]),64),
 ('c10 g1 S2 h7',       'resnet18-c10','tile.vec=c.pack.acc1.stage', dict(c=[64,1,8],h=[1,7,1],w=[1,1,7],rc=[1],rh=[1],rw=[3]),64),
 ('c10 g5 S2=1',        'resnet18-c10','tile.vec=c.pack.acc1.stage', dict(c=[2,1,8],h=[7,1,1],w=[1,1,7],rc=[2],rh=[3],rw=[3]),64),
 ('c10 g5 S2 h7',       'resnet18-c10','tile.vec=c.pack.acc1.stage', dict(c=[2,1,8],h=[1,7,1],w=[1,1,7],rc=[2],rh=[3],rw=[3]),64),
 ('c10 g5 S2 h7 rc1',   'resnet18-c10','tile.vec=c.pack.acc1.stage', dict(c=[2,1,8],h=[1,7,1],w=[1,1,7],rc=[1],rh=[3],rw=[1]),16),
 ('c12 S2 h7 (w tile)', 'resnet18-c12','tile.vec=c.pack.acc1.stage', dict(c=[4,1,8],h=[1,7,1],w=[1,1,7],rc=[1],rh=[3],rw=[1]),16),
 ('c12 S2 w7 u64',      'resnet18-c12','tile.vec=c.pack.acc1.stage', dict(c=[4,1,8],h=[1,1,7],w=[1,7,1],rc=[1],rh=[3],rw=[1]),64),
 ('c12 S2 w7 rc8 rw3',  'resnet18-c12','tile.vec=c.pack.acc1.stage', dict(c=[4,1,8],h=[1,1,7],w=[1,7,1],rc=[8],rh=[3],rw=[3]),64),
 ('c12 unpacked S2 w7', 'resnet18-c12','tile.vec=c.acc1.stage', dict(c=[4,1,8],h=[1,1,7],w=[1,7,1],rc=[1],rh=[3],rw=[1]),16),
 ('c9 S2=1',            'resnet18-c9','tile.vec=c.pack.acc1.stage', dict(c=[4,1,8],h=[14,1,1],w=[2,1,7],rc=[1],rh=[3],rw=[1]),16),
 ('c9 S2 h14',          'resnet18-c9','tile.vec=c.pack.acc1.stage', dict(c=[4,1,8],h=[1,14,1],w=[2,1,7],rc=[1],rh=[3],rw=[1]),16),
 ('c9 S2 h7',           'resnet18-c9','tile.vec=c.pack.acc1.stage', dict(c=[4,1,8],h=[2,7,1],w=[2,1,7],rc=[1],rh=[3],rw=[1]),16),
]
sel=sys.argv[1:]
for name,w,sk,sp,u in V:
    if sel and not any(name.startswith(x) for x in sel): continue
    sp=dict(sp); sp.setdefault('n',[1,1,1])
    json.dump(dict(sketch=sk,splits=sp,unroll=u),open('v3.json','w'))
    r=subprocess.run(['/work/main/build/bin/basin','op','--workload',w,'--config','v3.json','--json'],capture_output=True,text=True,env=dict(os.environ,BASIN_NUM_THREADS='1'))
    try:
        d=json.loads(r.stdout); print(f"{name:24s} {d['latency_us']:9.1f} verified={d['verified']}",flush=True)
    except Exception as e: print(name,'ERR',r.stderr[-300:],flush=True)
