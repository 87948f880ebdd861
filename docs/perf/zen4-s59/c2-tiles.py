import json,subprocess,sys,os
V=[
 ('a 4x4x8', 'tile.vec=w.acc1.stage', dict(c=[16,1,4],h=[1,1,4],w=[7,1,8],rc=[8]),512),
 ('4x7x8', 'tile.vec=w.acc1.stage', dict(c=[16,1,4],h=[1,1,7],w=[7,1,8],rc=[8]),512),
 ('8x2x8', 'tile.vec=w.acc1.stage', dict(c=[8,1,8],h=[1,1,2],w=[7,1,8],rc=[8]),512),
 ('4x2x8', 'tile.vec=w.acc1.stage', dict(c=[16,1,4],h=[1,1,2],w=[7,1,8],rc=[8]),512),
 ('2x14x8', 'tile.vec=w.acc1.stage', dict(c=[32,1,2],h=[1,1,14],w=[7,1,8],rc=[8]),512),
 ('4x4x8 rc64', 'tile.vec=w.acc1.stage', dict(c=[16,1,4],h=[1,1,4],w=[7,1,8],rc=[64]),512),
 ('g4 acc2 4x4x8', 'tile.vec=w.acc2.stage', dict(c=[4,4,4],h=[2,1,4],w=[1,1,8],rc=[64]),1024),
 ('vec=c 1x28 c16', 'tile.vec=c.acc1.stage', dict(c=[2,1,16],h=[28,1,1],w=[2,1,28],rc=[32]),1024),
]
V+=[
 ('1x28x8', 'tile.vec=w.acc1.stage', dict(c=[64,1,1],h=[1,1,28],w=[7,1,8],rc=[8]),512),
 ('2x7x8', 'tile.vec=w.acc1.stage', dict(c=[32,1,2],h=[1,1,7],w=[7,1,8],rc=[8]),512),
 ('16x1x8', 'tile.vec=w.acc1.stage', dict(c=[4,1,16],h=[1,1,1],w=[7,1,8],rc=[8]),512),
 ('2x8x8', 'tile.vec=w.acc1.stage', dict(c=[32,1,2],h=[1,1,8],w=[7,1,8],rc=[8]),512),
 ('4x4x16', 'tile.vec=w.acc1.stage', dict(c=[16,1,4],h=[1,1,4],w=[4,1,16],rc=[8]),512),
 ('2x4x16', 'tile.vec=w.acc1.stage', dict(c=[32,1,2],h=[1,1,4],w=[4,1,16],rc=[8]),512),
 ('4x2x16', 'tile.vec=w.acc1.stage', dict(c=[16,1,4],h=[1,1,2],w=[4,1,16],rc=[8]),512),
 ('4x4x8 u1024', 'tile.vec=w.acc1.stage', dict(c=[16,1,4],h=[1,1,4],w=[7,1,8],rc=[8]),1024),
 ('4x7x8 u1024', 'tile.vec=w.acc1.stage', dict(c=[16,1,4],h=[1,1,7],w=[7,1,8],rc=[8]),1024),
]
sel=sys.argv[1:] 
for name,sk,sp,u in V:
    if sel and name not in sel: continue
    sp=dict(sp); sp.setdefault('n',[1,1,1]); sp.setdefault('rh',[3]); sp.setdefault('rw',[3])
    json.dump(dict(sketch=sk,splits=sp,unroll=u),open('v.json','w'))
    r=subprocess.run(['/work/main/build/bin/basin','op','--workload','resnet18-c2','--config','v.json','--json'],capture_output=True,text=True,env=dict(os.environ,BASIN_NUM_THREADS='1'))
    try:
        d=json.loads(r.stdout); print(f"{name:20s} {d['latency_us']:9.1f} verified={d['verified']}",flush=True)
    except Exception as e: print(name,'ERR',r.stderr[-300:],flush=True)
