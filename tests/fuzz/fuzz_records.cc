// libFuzzer target: the records reader and what `basin compile` does with the best
// record of a task. The input's first four lines are one record's task key,
// configuration, latencies and confirmation latencies, written into a records file as
// a hand edit would; the read-only store then reads it, names the task's best, parses
// its task key and configuration against the task's sketches, and lowers the program.
// A damaged record reads as a failed one and anything else is refused with
// basin::Error; a configuration that parses always lowers.
#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "core/schedule/lower_sketch.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "records/records.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

std::string line(const std::string& text, size_t& pos) {
  const size_t end = std::min(text.find('\n', pos), text.size());
  std::string s = text.substr(pos, end - pos);
  pos = std::min(end + 1, text.size());
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t pos = 0;
  const std::string key = line(text, pos), config = line(text, pos), latencies = line(text, pos),
                    confirm = line(text, pos);

  const std::string path = (basin::fuzz::work_dir() / "records.db").string();
  std::remove(path.c_str());
  {
    basin::search::RecordStore w(path);
    basin::search::Record r;
    r.task_key = "placeholder";
    r.target = "llvm";
    r.sketch = "s";
    r.config = "{}";
    r.latencies_us = {1};
    w.add(r);
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) __builtin_trap();
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "UPDATE records SET task_key = ?, config = ?, latencies_us = ?, confirm_us = ?", -1, &st,
                     nullptr);
  const std::string* fields[] = {&key, &config, &latencies, &confirm};
  for (int i = 0; i < 4; ++i) sqlite3_bind_text(st, i + 1, fields[i]->c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st) != SQLITE_DONE) __builtin_trap();
  sqlite3_finalize(st);
  sqlite3_close(db);

  try {
    basin::search::RecordStore store(path, basin::search::RecordStore::ReadOnly::Yes);
    if (store.all().size() != 1) __builtin_trap();
    std::optional<basin::search::Record> best = store.best(key, "llvm");
    if (!best) return 0;
    const basin::ops::OpGraph task = basin::sched::task_from_key(best->task_key);
    const std::vector<basin::sched::Sketch> sketches = basin::sched::sketches_for(task, "llvm");
    const basin::sched::Sketch* s = nullptr;
    const basin::sched::Config c = basin::sched::config_from_json(best->config, sketches, path, &s);
    basin::sched::lower_config(task, *s, c);
  } catch (const basin::Error& e) {
    basin::fuzz::refused(e);
  }
  return 0;
}
