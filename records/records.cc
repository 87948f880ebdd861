#include "records/records.h"

#include <signal.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <optional>
#include <filesystem>
#include <limits>
#include <thread>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "codegen/version.h"
#include "core/util/error.h"
#include "core/util/hardware.h"
#include "core/util/host.h"

namespace basin::search {

double Record::min_latency_us() const {
  if (latencies_us.empty()) return std::numeric_limits<double>::infinity();
  return *std::min_element(latencies_us.begin(), latencies_us.end());
}

double upper_median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

bool Record::from_host(const std::string& machine) const { return same_host(host, machine); }

bool Record::measured_here() const {
  return from_host(machine_description(target)) && from_codegen(codegen::codegen_version(target));
}

double Record::latency_us() const {
  if (confirm_us.empty() || !ok()) return min_latency_us();
  std::vector<double> m = confirm_us;
  m.push_back(min_latency_us());
  return upper_median(std::move(m));
}

namespace {

// 1: the first; 2: adds `host` (an old file is upgraded in place, its records' host
// left empty: unknown); 3: adds `confirm_us` and `latency_us` (Record::latency_us; an
// old file's records are unconfirmed, their latency their minimum); 4: adds `best_seq`
// (Record::best_seq; an old file's records were never named, 0); 5: adds `codegen`
// (Record::codegen; an old file's records are of an unknown generation, '').
constexpr int kSchemaVersion = 5;

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_key TEXT NOT NULL,
  target TEXT NOT NULL,
  sketch TEXT NOT NULL,
  config TEXT NOT NULL,
  latencies_us TEXT NOT NULL,
  min_latency_us REAL,
  error TEXT NOT NULL,
  compile_seconds REAL NOT NULL,
  started_at REAL NOT NULL,
  finished_at REAL NOT NULL,
  seed INTEGER NOT NULL,
  estimator_version TEXT NOT NULL,
  host TEXT NOT NULL DEFAULT '',
  confirm_us TEXT NOT NULL DEFAULT '[]',
  latency_us REAL,
  best_seq INTEGER NOT NULL DEFAULT 0,
  codegen TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS records_task ON records(task_key, target);
CREATE INDEX IF NOT EXISTS records_program ON records(task_key, target, sketch, config);
CREATE TABLE IF NOT EXISTS machines (
  host TEXT PRIMARY KEY,
  description TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS claims (
  task_key TEXT NOT NULL,
  target TEXT NOT NULL,
  sketch TEXT NOT NULL,
  config TEXT NOT NULL,
  node TEXT NOT NULL,
  pid INTEGER NOT NULL,
  claimed_at REAL NOT NULL,
  PRIMARY KEY (task_key, target, sketch, config)
);
)sql";

const char* kColumns =
    "id, task_key, target, sketch, config, latencies_us, error, compile_seconds, started_at, finished_at, seed, "
    "estimator_version, host, confirm_us, best_seq, codegen";

}  // namespace

// A text column's value; NULL (a file edited by another tool) reads as empty.
static std::string column_text(sqlite3_stmt* s, int c) {
  const unsigned char* t = sqlite3_column_text(s, c);
  return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
}

struct RecordStore::Db {
  sqlite3* db = nullptr;
  std::string path;

  // Opens `path` with the SQLite flags given (waits up to 10 s on a lock); throws
  // naming the file. A records path is a file: SQLite's special names (an empty path,
  // ":memory:", a "file:" URI) would keep nothing, and a folder, FIFO or device is no
  // records file (opening a FIFO would block).
  void open(int flags) {
    if (path.empty()) throw Error("the records path is empty: give a file");
    if (path == ":memory:" || path.rfind("file:", 0) == 0)
      throw Error("records file '" + path +
                  "': SQLite reads this name as an in-memory database or a URI, which keeps nothing; give a file path "
                  "('./" +
                  path + "' for a file of that name)");
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw Error("records file '" + path + "' is not a regular file (a folder, FIFO or device)");
    open_name(path, flags);
  }
  // sqlite3_open_v2 of `name` (a path, or a URI with SQLITE_OPEN_URI).
  void open_name(const std::string& name, int flags) {
    if (sqlite3_open_v2(name.c_str(), &db, flags | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
      std::string msg = db ? sqlite3_errmsg(db) : "cannot open";
      sqlite3_close(db);
      db = nullptr;
      throw Error("records file '" + path + "': " + msg);
    }
    sqlite3_busy_timeout(db, 10000);
  }
  // The file's schema version (PRAGMA user_version; 0 for a file basin never stamped),
  // read by a statement finalized at once: a statement left open holds its read
  // transaction, and a write on top of a read that another process has since overtaken
  // is a deadlock SQLite answers at once with "database is locked", without waiting
  // (Records.ProcessesOpeningOneNewFileAtOnceAllSucceed). A version newer than this
  // basin's is an error.
  int schema_version() const {
    const int version = [&] {
      Stmt v = prepare("PRAGMA user_version");
      if (sqlite3_step(v.s) != SQLITE_ROW) fail("reading its schema version");
      return sqlite3_column_int(v.s, 0);
    }();
    if (version < 0 || version > kSchemaVersion)
      throw Error("records file '" + path + "' has schema version " + std::to_string(version) + ", this basin reads " +
                  std::to_string(kSchemaVersion) + " and older");
    return version;
  }
  // The first column of `sql`'s first row (0 when it returns none), or nothing when
  // `sql` does not compile (no such table or column). A lock is waited out for up to
  // 10 s, also one that SQLite answers without its busy handler: a new file that
  // another process is converting to WAL (Records.ProcessesOpeningOneNewFileAtOnceAllSucceed:
  // a schema read that failed on that lock named the file "a database of other tables").
  std::optional<int64_t> query_waiting(const std::string& sql) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto locked = [&](int rc) {
      if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) return false;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return true;
    };
    for (;;) {
      sqlite3_stmt* q = nullptr;
      const int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr);
      if (rc != SQLITE_OK) {
        sqlite3_finalize(q);
        if (locked(rc)) continue;
        if ((rc & 0xff) == SQLITE_ERROR) return std::nullopt;
        fail("reading its schema");
      }
      const int step = sqlite3_step(q);
      const int64_t value = step == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
      sqlite3_finalize(q);
      if (step == SQLITE_ROW || step == SQLITE_DONE) return value;
      if (!locked(step)) fail("reading its schema");
    }
  }
  // Whether `SELECT columns FROM records` compiles: the table has those columns.
  bool has_columns(const std::string& columns) const {
    sqlite3_stmt* probe = nullptr;
    const bool yes = sqlite3_prepare_v2(db, ("SELECT " + columns + " FROM records LIMIT 0").c_str(), -1, &probe,
                                        nullptr) == SQLITE_OK;
    sqlite3_finalize(probe);
    return yes;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("records file '" + path + "': " + what + ": " + (db ? sqlite3_errmsg(db) : "cannot open"));
  }
  void exec(const char* sql) const {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      throw Error("records file '" + path + "': " + msg +
                  (msg.find("not a database") != std::string::npos ? " (is it a basin records file?)" : ""));
    }
  }

  // A prepared statement, finalized on scope exit.
  struct Stmt {
    sqlite3_stmt* s = nullptr;
    ~Stmt() { sqlite3_finalize(s); }
  };
  Stmt prepare(const std::string& sql) const {
    Stmt st;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK) fail("preparing a query");
    return st;
  }
  // `sql` prepared with `texts` bound to its first parameters.
  Stmt prepare(const std::string& sql, std::initializer_list<const std::string*> texts) const {
    Stmt st = prepare(sql);
    int i = 0;
    for (const std::string* t : texts) sqlite3_bind_text(st.s, ++i, t->c_str(), -1, SQLITE_TRANSIENT);
    return st;
  }
  // `body` in one transaction that takes the write lock at once (waiting as every
  // write does): what it reads cannot change before it writes.
  template <typename F>
  auto immediately(F body) const {
    exec("BEGIN IMMEDIATE");
    try {
      auto out = body();
      exec("COMMIT");
      return out;
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  static Record row(sqlite3_stmt* s) {
    auto text = [&](int c) { return column_text(s, c); };
    Record r;
    r.id = sqlite3_column_int64(s, 0);
    r.task_key = text(1);
    r.target = text(2);
    r.sketch = text(3);
    r.config = text(4);
    // A column that is not a JSON array of numbers (a file edited or damaged by hand)
    // makes its record a failed one, named in its error; the rest of the file reads on.
    auto numbers = [&](int c, std::vector<double>& out) {
      nlohmann::json j = nlohmann::json::parse(text(c), nullptr, /*allow_exceptions=*/false);
      bool ok = j.is_array();
      if (ok)
        for (const auto& v : j) ok = ok && v.is_number();
      if (!ok) return false;
      for (const auto& v : j) out.push_back(v.get<double>());
      return true;
    };
    const bool latencies_ok = numbers(5, r.latencies_us);
    r.error = text(6);
    r.compile_seconds = sqlite3_column_double(s, 7);
    r.started_at = sqlite3_column_double(s, 8);
    r.finished_at = sqlite3_column_double(s, 9);
    r.seed = static_cast<uint64_t>(sqlite3_column_int64(s, 10));
    r.estimator_version = text(11);
    r.host = text(12);
    const bool confirm_ok = numbers(13, r.confirm_us);
    r.best_seq = sqlite3_column_int64(s, 14);
    r.codegen = text(15);
    if (!latencies_ok || !confirm_ok) {
      r.latencies_us.clear();
      r.confirm_us.clear();
      r.error = std::string("unreadable record ") + std::to_string(r.id) + ": its " +
                (latencies_ok ? "confirm_us" : "latencies_us") + " is not a JSON array of numbers";
    }
    return r;
  }

  std::vector<Record> query(const std::string& where, const std::vector<std::string>& args) const {
    Stmt st = prepare(std::string("SELECT ") + kColumns + " FROM records " + where);
    for (size_t i = 0; i < args.size(); ++i)
      sqlite3_bind_text(st.s, static_cast<int>(i + 1), args[i].c_str(), -1, SQLITE_TRANSIENT);
    std::vector<Record> out;
    int rc;
    while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) out.push_back(row(st.s));
    if (rc != SQLITE_DONE) fail("reading records");
    return out;
  }
};

// The folder a path is in ("." for a bare name).
static std::string folder_of(const std::string& path) {
  const std::string d = std::filesystem::path(path).parent_path().string();
  return d.empty() ? "." : d;
}

// The machine's network name: a process id means something only there.
static std::string this_node() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  std::string out;
  for (const char* c = name; *c; ++c)
    if (std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' || *c == '-' || *c == '_') out += *c;
  return out;
}

RecordStore::RecordStore(const std::string& path) : path_(path), db_(std::make_unique<Db>()) {
  db_->path = path;
  struct stat before;
  const bool exists = ::stat(path.c_str(), &before) == 0;
  const bool holds_data = exists && before.st_size > 0;
  // A tuning run writes records, and SQLite keeps its journal beside the file: a file
  // or folder this process cannot write is named as such before anything runs.
  if (!path.empty() && exists && S_ISREG(before.st_mode) && ::access(path.c_str(), W_OK) != 0)
    throw Error("records file '" + path +
                "' is read-only: this command adds records to it (make it writable, or give another file)");
  const std::string folder = folder_of(path);
  if (!path.empty() && path != ":memory:" && path.rfind("file:", 0) != 0 &&
      ::access(folder.c_str(), W_OK | X_OK) != 0 && (!exists || S_ISREG(before.st_mode)))
    throw Error(exists ? "records file '" + path + "' is in a folder this process cannot write ('" + folder +
                             "'): SQLite keeps its journal beside the file"
                       : "cannot create records file '" + path + "': its folder '" + folder + "' is not writable" +
                             (std::filesystem::is_directory(folder) ? "" : " (or does not exist)"));
  db_->open(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  try {
    // A file that holds data must be basin's before anything is changed in it (the
    // journal mode, the schema, the version): a schema version with a records table, or
    // an older basin's unstamped records table; any other database is refused as it is.
    if (holds_data) {
      const int64_t version = db_->query_waiting("PRAGMA user_version").value_or(0);
      const bool records_table =
          db_->query_waiting(
                 "SELECT count(*) FROM (SELECT id, task_key, target, sketch, config, latencies_us "
                 "FROM records LIMIT 0)")
              .has_value();
      if (!records_table) {
        const bool empty = db_->query_waiting("SELECT count(*) FROM sqlite_master").value_or(1) == 0;
        if (!empty || version != 0)
          throw Error("records file '" + path +
                      "' is not a basin records database (a database of other tables): "
                      "left as it is");
      }
    }
    // Converting a new file to WAL needs the file to itself, and SQLite does not run the
    // busy handler for that conversion: a second process opening the file at that moment
    // gets "database is locked" at once. So the conversion is retried here, within the
    // same 10 s as every other wait (Records.ProcessesOpeningOneNewFileAtOnceAllSucceed).
    // WAL is a property of the file: once converted, the pragma takes no lock.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (int attempt = 0;; ++attempt) {
      const int rc = sqlite3_exec(db_->db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline) {
        db_->exec("PRAGMA journal_mode=WAL");  // the error, in the words every other step uses
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 << std::min(attempt, 6), 50)));
    }
    db_->exec("PRAGMA synchronous=NORMAL");
    const int version = db_->schema_version();  // before anything is written
    db_->exec(kSchema);
    if (version > 0 && version < kSchemaVersion) {
      // Upgraded under a write lock; another process may have done it meanwhile.
      db_->exec("BEGIN IMMEDIATE");
      auto has = [&](const char* column) { return db_->has_columns(column); };
      if (!has("host")) db_->exec("ALTER TABLE records ADD COLUMN host TEXT NOT NULL DEFAULT ''");
      if (!has("confirm_us")) db_->exec("ALTER TABLE records ADD COLUMN confirm_us TEXT NOT NULL DEFAULT '[]'");
      if (!has("latency_us")) {
        db_->exec("ALTER TABLE records ADD COLUMN latency_us REAL");
        db_->exec("UPDATE records SET latency_us = min_latency_us");
      }
      if (!has("best_seq")) db_->exec("ALTER TABLE records ADD COLUMN best_seq INTEGER NOT NULL DEFAULT 0");
      if (!has("codegen")) db_->exec("ALTER TABLE records ADD COLUMN codegen TEXT NOT NULL DEFAULT ''");
      db_->exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion) + "; COMMIT").c_str());
    }
    // A database that is not ours: it must have our columns (checked before a new
    // file is stamped with our schema version).
    db_->prepare(std::string("SELECT ") + kColumns + " FROM records LIMIT 0");
    if (version == 0) db_->exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
  } catch (...) {
    sqlite3_close(db_->db);
    db_->db = nullptr;
    throw;
  }
}

RecordStore::RecordStore(const std::string& path, ReadOnly) : path_(path), db_(std::make_unique<Db>()) {
  db_->path = path;
  if (!std::filesystem::exists(path)) throw Error("records file " + path + " does not exist");
  // A connection opened read-only cannot checkpoint, so the -wal and -shm files it
  // creates beside a WAL database outlive it. Where the file is writable, the store
  // opens it read-write under query_only (SQLite refuses every write): the last
  // connection to close then removes them. A database not in WAL mode is not touched.
  const bool writable = ::access(path.c_str(), W_OK) == 0;
  db_->open(writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY);
  try {
    if (writable) db_->exec("PRAGMA query_only=ON");
    int version = 0;
    try {
      version = db_->schema_version();
    } catch (const Error&) {
      // A WAL database in a folder this process cannot write: SQLite cannot make the
      // -shm file a reader needs. Read as an immutable file (a -wal file beside it
      // without its -shm, which no writer of this folder's files leaves, is not read).
      if (writable || ::access(folder_of(path).c_str(), W_OK | X_OK) == 0) throw;
      sqlite3_close(db_->db);
      db_->db = nullptr;
      std::string uri = "file:";
      for (char c : std::filesystem::absolute(path).string()) {
        if (c == '%' || c == '?' || c == '#') {
          static const char* hex = "0123456789ABCDEF";
          uri += '%';
          uri += hex[(static_cast<unsigned char>(c) >> 4) & 15];
          uri += hex[static_cast<unsigned char>(c) & 15];
        } else {
          uri += c;
        }
      }
      db_->open_name(uri + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      version = db_->schema_version();
    }
    if (version == 0) throw Error("records file '" + path + "' is not a basin records database (no schema version)");
    const bool ours = db_->has_columns(kColumns);
    if (!ours && version < kSchemaVersion)
      throw Error("records file '" + path + "' has schema version " + std::to_string(version) +
                  " of an older basin: a tuning command on it (basin tune-op, basin tune) upgrades it");
    if (!ours) throw Error("records file '" + path + "' is not a basin records database (no records table of basin's)");
  } catch (...) {
    sqlite3_close(db_->db);
    db_->db = nullptr;
    throw;
  }
}

RecordStore::~RecordStore() {
  if (!db_ || !db_->db) return;
  if (claimed_) {  // this process's claims of programs it did not measure (best effort)
    try {
      const std::string node = this_node();
      Db::Stmt del = db_->prepare("DELETE FROM claims WHERE node = ? AND pid = ?", {&node});
      sqlite3_bind_int64(del.s, 2, ::getpid());
      sqlite3_step(del.s);
    } catch (const Error&) {
    }
  }
  sqlite3_close(db_->db);
}

// The WHERE clause of one program's claim, its four parameters the program's columns.
static constexpr char kClaimOfProgram[] =
    " FROM claims WHERE task_key = ? AND target = ? AND sketch = ? AND config = ?";

int64_t RecordStore::add_new(const std::vector<Record>& rs) {
  return db_->immediately([&] {
    int64_t added = 0;
    for (const Record& r : rs)
      if (!contains(r.task_key, r.target, r.sketch, r.config, r.host, r.codegen)) {
        add(r);
        ++added;
      }
    return added;
  });
}

bool RecordStore::claim(const std::string& task_key, const std::string& target, const std::string& sketch,
                        const std::string& config, const std::string& host, const std::string& codegen) {
  const std::string node = this_node();
  const int64_t pid = ::getpid();
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return db_->immediately([&] {
    if (contains(task_key, target, sketch, config, host, codegen)) return false;
    {
      Db::Stmt q = db_->prepare(std::string("SELECT node, pid, claimed_at") + kClaimOfProgram,
                                {&task_key, &target, &sketch, &config});
      if (sqlite3_step(q.s) == SQLITE_ROW) {
        const std::string other = column_text(q.s, 0);
        const int64_t other_pid = sqlite3_column_int64(q.s, 1);
        const double at = sqlite3_column_double(q.s, 2);
        const bool mine = other == node && other_pid == pid;
        // Alive: on this machine, a process of that id (kill 0 tells, EPERM included);
        // elsewhere, as long as the claim is young.
        const bool alive =
            other == node ? other_pid > 0 && (::kill(static_cast<pid_t>(other_pid), 0) == 0 || errno == EPERM) : true;
        if (!mine && alive && now - at < 6 * 3600) return false;
      }
    }
    Db::Stmt ins = db_->prepare(
        "INSERT OR REPLACE INTO claims (task_key, target, sketch, config, node, pid, claimed_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        {&task_key, &target, &sketch, &config, &node});
    sqlite3_bind_int64(ins.s, 6, pid);
    sqlite3_bind_double(ins.s, 7, now);
    if (sqlite3_step(ins.s) != SQLITE_DONE) db_->fail("claiming a program");
    claimed_ = true;
    return true;
  });
}

int64_t RecordStore::add(const Record& r) {
  // The first record of this CPU brings the CPU's description (measured once per
  // machine, basin::this_hardware), so that the file describes every machine whose
  // latencies it holds.
  if (!r.host.empty() && r.host == host_description()) {
    const Hardware& hw = this_hardware();
    if (hw.host == r.host) describe_machine(r.host, hw.to_json());
  }
  Db::Stmt st = db_->prepare(
      "INSERT INTO records (task_key, target, sketch, config, latencies_us, min_latency_us, error, compile_seconds, "
      "started_at, finished_at, seed, estimator_version, host, confirm_us, latency_us, codegen) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const std::string lat_text = nlohmann::json(r.latencies_us).dump();
  const std::string confirm_text = nlohmann::json(r.confirm_us).dump();
  sqlite3_bind_text(st.s, 1, r.task_key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, r.target.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 3, r.sketch.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 4, r.config.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 5, lat_text.c_str(), -1, SQLITE_TRANSIENT);
  if (r.ok()) sqlite3_bind_double(st.s, 6, r.min_latency_us());
  else sqlite3_bind_null(st.s, 6);
  sqlite3_bind_text(st.s, 7, r.error.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st.s, 8, r.compile_seconds);
  sqlite3_bind_double(st.s, 9, r.started_at);
  sqlite3_bind_double(st.s, 10, r.finished_at);
  sqlite3_bind_int64(st.s, 11, static_cast<int64_t>(r.seed));
  sqlite3_bind_text(st.s, 12, r.estimator_version.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 13, r.host.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 14, confirm_text.c_str(), -1, SQLITE_TRANSIENT);
  if (r.ok()) sqlite3_bind_double(st.s, 15, r.latency_us());
  else sqlite3_bind_null(st.s, 15);
  sqlite3_bind_text(st.s, 16, r.codegen.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) db_->fail("adding a record");
  const int64_t id = sqlite3_last_insert_rowid(db_->db);
  if (claimed_) {  // the claim, if this process made one, is done
    Db::Stmt del =
        db_->prepare(std::string("DELETE") + kClaimOfProgram, {&r.task_key, &r.target, &r.sketch, &r.config});
    if (sqlite3_step(del.s) != SQLITE_DONE) db_->fail("ending a claim");
  }
  return id;
}

void RecordStore::confirm(int64_t id, const std::vector<double>& confirm_us) {
  auto r = db_->query("WHERE id = ?", {std::to_string(id)});
  if (r.empty())
    throw InternalError("records file '" + path_ + "' has no record " + std::to_string(id) + " to confirm");
  r[0].confirm_us = confirm_us;
  Db::Stmt st = db_->prepare("UPDATE records SET confirm_us = ?, latency_us = ? WHERE id = ?");
  const std::string text = nlohmann::json(confirm_us).dump();
  sqlite3_bind_text(st.s, 1, text.c_str(), -1, SQLITE_TRANSIENT);
  if (r[0].ok()) sqlite3_bind_double(st.s, 2, r[0].latency_us());
  else sqlite3_bind_null(st.s, 2);
  sqlite3_bind_int64(st.s, 3, id);
  if (sqlite3_step(st.s) != SQLITE_DONE) db_->fail("confirming a record");
}

int64_t RecordStore::name_best(int64_t id) {
  // One statement: the next number of the record's task and target, atomic under
  // SQLite's write lock when several processes share the file.
  Db::Stmt st = db_->prepare(
      "UPDATE records SET best_seq = 1 + (SELECT COALESCE(MAX(o.best_seq), 0) FROM records o "
      "WHERE o.task_key = records.task_key AND o.target = records.target) WHERE id = ? RETURNING best_seq");
  sqlite3_bind_int64(st.s, 1, id);
  const int rc = sqlite3_step(st.s);
  if (rc == SQLITE_DONE)
    throw InternalError("records file '" + path_ + "' has no record " + std::to_string(id) + " to name the best");
  if (rc != SQLITE_ROW) db_->fail("naming a best record");
  return sqlite3_column_int64(st.s, 0);
}

int64_t RecordStore::relabel_host(const std::string& from, const std::string& to) {
  // A description of `from` moves to `to`, unless `to` has one of its own.
  const auto described = machines();
  if (auto d = described.find(from); d != described.end() && described.count(to) == 0 && !to.empty()) {
    try {
      Hardware hw = Hardware::from_json(d->second);
      hw.host = to;
      set_machine(to, hw.to_json());
      Db::Stmt del = db_->prepare("DELETE FROM machines WHERE host = ?");
      sqlite3_bind_text(del.s, 1, from.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(del.s) != SQLITE_DONE) db_->fail("relabelling a machine's description");
      std::lock_guard<std::mutex> lock(described_mu_);
      described_.erase(from);
    } catch (const Error&) {
      // A description this basin cannot read stays under its old name.
    }
  }
  Db::Stmt st = db_->prepare("UPDATE records SET host = ? WHERE host = ?");
  sqlite3_bind_text(st.s, 1, to.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, from.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) db_->fail("relabelling records");
  return sqlite3_changes(db_->db);
}

void RecordStore::set_machine(const std::string& host, const std::string& description) {
  Hardware::from_json(description);  // refuses anything but a description
  Db::Stmt st = db_->prepare("INSERT OR REPLACE INTO machines (host, description) VALUES (?, ?)");
  sqlite3_bind_text(st.s, 1, host.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, description.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) db_->fail("describing a machine");
}

void RecordStore::describe_machine(const std::string& host, const std::string& description) {
  std::lock_guard<std::mutex> lock(described_mu_);
  if (described_.count(host)) return;
  if (machines().count(host) == 0) set_machine(host, description);
  described_.insert(host);
}

std::map<std::string, std::string> RecordStore::machines() const {
  std::map<std::string, std::string> out;
  // A file written before machines were described has no such table (read-only stores
  // do not create it).
  {
    Db::Stmt probe = db_->prepare("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'machines'");
    if (sqlite3_step(probe.s) != SQLITE_ROW || sqlite3_column_int(probe.s, 0) == 0) return out;
  }
  Db::Stmt st = db_->prepare("SELECT host, description FROM machines ORDER BY host");
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) out[column_text(st.s, 0)] = column_text(st.s, 1);
  if (rc != SQLITE_DONE) db_->fail("reading the machines' descriptions");
  return out;
}

std::map<std::string, int64_t> RecordStore::hosts() const {
  Db::Stmt st = db_->prepare("SELECT host, COUNT(*) FROM records GROUP BY host");
  std::map<std::string, int64_t> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) out[column_text(st.s, 0)] += sqlite3_column_int64(st.s, 1);
  if (rc != SQLITE_DONE) db_->fail("counting the records' machines");
  return out;
}

std::vector<Record> RecordStore::task_records(const std::string& task_key, const std::string& target) const {
  return db_->query("WHERE task_key = ? AND target = ? ORDER BY id", {task_key, target});
}

std::optional<Record> RecordStore::best(const std::string& task_key, const std::string& target,
                                        const std::set<std::string>* sketches) const {
  // Latencies of two machines, or of two code generations, do not compare: the records
  // measured here first, then this machine's; then the one a tuner named its best
  // last; then the programs measured more than once (as the tuner picks its best),
  // fastest first. The same predicates as Record::from_host and Record::from_codegen.
  // A damaged row reads as a failed record (Db::row): the first readable one in that order.
  const std::string here = machine_description(target);
  for (const char* limit : {" LIMIT 16", ""}) {
    auto r = db_->query(
        std::string("WHERE task_key = ? AND target = ? AND error = '' AND latency_us IS NOT NULL "
                    "ORDER BY ((host = ?3 OR host = '' OR host = ?4) AND (codegen = ?5 OR codegen = '')) DESC, "
                    "(host = ?3 OR host = '' OR host = ?4) DESC, best_seq DESC, confirm_us != '[]' DESC, latency_us") +
            limit,
        {task_key, target, here, legacy_host_description(here), codegen::codegen_version(target)});
    for (const Record& x : r)
      if (x.ok() && (!sketches || sketches->count(x.sketch))) return x;
    if (r.size() < 16) break;
  }
  return std::nullopt;
}

bool RecordStore::contains(const std::string& task_key, const std::string& target, const std::string& sketch,
                           const std::string& config, const std::string& host, const std::string& codegen) const {
  return !db_->query(
                 "WHERE task_key = ? AND target = ? AND sketch = ? AND config = ? "
                 "AND (?5 = '' OR host = ?5 OR host = '' OR host = ?6) AND (?7 = '' OR codegen = ?7 OR codegen = '') "
                 "LIMIT 1",
                 {task_key, target, sketch, config, host, legacy_host_description(host), codegen})
              .empty();
}

int64_t RecordStore::count() const {
  Db::Stmt st = db_->prepare("SELECT COUNT(*) FROM records");
  if (sqlite3_step(st.s) != SQLITE_ROW) db_->fail("counting records");
  return sqlite3_column_int64(st.s, 0);
}

std::vector<Record> RecordStore::all() const { return db_->query("ORDER BY id", {}); }

}  // namespace basin::search
