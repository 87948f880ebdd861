# The held-out experiment of session 40: Zen 4 latencies (new code generation) and the Zen 5 file.
# A fifth of each file's tasks is held out (seed 1); held-out tasks are left out of every training file.
import sqlite3, random, os, sys
z4, z5 = "zen4new.db", "zen5.db"
def tasks(p): return sorted(t for (t,) in sqlite3.connect(p).execute("select distinct task_key from records"))
t4, t5 = tasks(z4), tasks(z5)
r = random.Random(1)
test4 = set(r.sample(t4, len(t4) // 5)); test5 = set(r.sample(t5, len(t5) // 5))
held = test4 | test5
print("zen4 tasks", len(t4), "held out", len(test4), "; zen5 tasks", len(t5), "held out", len(test5), "; in both files", len(set(t4) & set(t5)))
def build(path, parts):
    if os.path.exists(path): os.remove(path)
    c = sqlite3.connect(path)
    for (sql,) in sqlite3.connect(z5).execute("select sql from sqlite_master where type in ('table','index') and name not like 'sqlite_%'"):
        c.execute(sql)
    cols = ",".join(r[1] for r in c.execute("pragma table_info(records)") if r[1] != "id")
    for src, keep in parts:
        c.execute("attach ? as s", (src,))
        c.execute("create temp table k(t text primary key)")
        c.executemany("insert into k values (?)", [(t,) for t in keep])
        c.execute(f"insert into records ({cols}) select {cols} from s.records where task_key in (select t from k)")
        c.execute("drop table k"); c.commit(); c.execute("detach s")
    print(path, c.execute("select count(*), count(distinct task_key) from records").fetchone())
build("test-z4.db", [(z4, test4)])
build("test-z5.db", [(z5, test5)])
build("train-z5.db", [(z5, [t for t in t5 if t not in held])])
build("train-z4.db", [(z4, [t for t in t4 if t not in held])])
build("train-both.db", [(z5, [t for t in t5 if t not in held]), (z4, [t for t in t4 if t not in held])])
