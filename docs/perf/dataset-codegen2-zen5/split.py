# Builds the training/test files of the old-vs-new label experiment.
import sqlite3, random, shutil, sys, os
new, old, zen4 = "ds/zen5-cg2.zen5range.db", "zen5-old.db", "zen4.db"
n = sqlite3.connect(new)
tasks = sorted(t for (t,) in n.execute("select distinct task_key from records"))
o = sqlite3.connect(old)
otasks = set(t for (t,) in o.execute("select distinct task_key from records"))
tasks = [t for t in tasks if t in otasks]   # tasks in both files
rng = random.Random(1)
test = set(rng.sample(tasks, len(tasks) // 5))
train = [t for t in tasks if t not in test]
print("tasks", len(tasks), "test", len(test), "train", len(train))
def build(path, parts):
    if os.path.exists(path): os.remove(path)
    shutil.copy(zen4 if parts[0][0] == zen4 else parts[0][0], path) if False else None
    c = sqlite3.connect(path)
    # schema from zen4
    for (sql,) in sqlite3.connect(zen4).execute("select sql from sqlite_master where type in ('table','index') and name not like 'sqlite_%'"):
        c.execute(sql)
    cols = [r[1] for r in c.execute("pragma table_info(records)") if r[1] != "id"]
    cl = ",".join(cols)
    for src, keep in parts:
        c.execute("attach ? as s", (src,))
        if keep is None:
            c.execute(f"insert into records ({cl}) select {cl} from s.records")
        else:
            c.execute("create temp table k(t text primary key)")
            c.executemany("insert into k values (?)", [(t,) for t in keep])
            c.execute(f"insert into records ({cl}) select {cl} from s.records where task_key in (select t from k)")
            c.execute("drop table k")
        c.commit(); c.execute("detach s")
    print(path, c.execute("select count(*), count(distinct task_key) from records").fetchone())
build("test-new.db", [(new, test)])
build("test-old.db", [(old, test)])
build("train-old.db", [(zen4, None), (old, train)])
build("train-new.db", [(zen4, None), (new, train)])
build("train-newonly.db", [(new, train)])
