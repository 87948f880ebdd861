// MPI transport of a distributed tuning run (search/mpi.h). Messages are JSON text;
// every MPI call is made by the communication thread (Comm::loop).
#include "search/mpi.h"

#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "codegen/version.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "core/util/hardware.h"
#include "core/util/host.h"

namespace basin::search::mpi {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double epoch_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

enum Tag : int { kHello = 1, kWork, kResult, kCancel, kStop, kBeat, kLost = 100 };
// The body of kStop when a rank was lost during the run (no rank then finalizes MPI).
constexpr const char* kStopLost = "lost";

struct Message {
  int peer = 0;  // the sender (incoming) or the receiver (outgoing)
  int tag = 0;
  std::string body;
};

// BASIN_MPI_TEST_KILL=R:N (fault injection for the tests): rank R kills itself with
// SIGKILL once N programs went through it (a worker: measured and sent; rank 0:
// outcomes received and handed to the tuner). -1 when unset or another rank.
int kill_after(int rank) {
  const char* v = std::getenv("BASIN_MPI_TEST_KILL");
  int r = -1, n = -1;
  if (!v || std::sscanf(v, "%d:%d", &r, &n) != 2 || r != rank) return -1;
  return n;
}

std::string codegen_versions() { return codegen::codegen_version("llvm") + "; " + codegen::codegen_version("cuda"); }

}  // namespace

bool built_with_mpi() { return true; }

// The communication thread: sends what is posted, receives into the inbox, beats and
// watches its peers' heartbeats.
class Comm {
 public:
  Comm(int rank, int size, const Settings& s) : rank_(rank), size_(size), settings_(s), lost_(size, false) {
    // Rank 0 watches every worker; a worker watches rank 0.
    for (int r = 0; r < size; ++r)
      if (r != rank && (rank == 0 || r == 0)) watched_.push_back(r);
    thread_ = std::thread([this] { loop(); });
  }
  ~Comm() { stop(); }

  void post(int to, int tag, std::string body) {
    std::lock_guard<std::mutex> l(mu_);
    if (lost_[static_cast<size_t>(to)]) return;
    ++traffic_.messages_out;
    traffic_.bytes_out += static_cast<int64_t>(body.size());
    outbox_.push_back({to, tag, std::move(body)});
  }
  // The next message (a lost peer comes as one of tag kLost), waiting up to timeout.
  std::optional<Message> take(double timeout_seconds) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::duration<double>(std::max(0.0, timeout_seconds)), [&] { return !inbox_.empty(); });
    if (inbox_.empty()) return std::nullopt;
    Message m = std::move(inbox_.front());
    inbox_.pop_front();
    return m;
  }
  bool lost(int r) {
    std::lock_guard<std::mutex> l(mu_);
    return lost_[static_cast<size_t>(r)];
  }
  Traffic traffic() {
    std::lock_guard<std::mutex> l(mu_);
    return traffic_;
  }
  bool cancelled(uint64_t work) {
    std::lock_guard<std::mutex> l(mu_);
    return cancelled_.count(work) > 0;
  }
  // Sends what is posted (at most 5 s more), then the thread ends.
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Sending {
    MPI_Request request;
    std::shared_ptr<std::string> body;
    int to;
  };

  void isend(int to, int tag, std::shared_ptr<std::string> body) {
    Sending s{MPI_REQUEST_NULL, std::move(body), to};
    MPI_Isend(s.body->data(), static_cast<int>(s.body->size()), MPI_CHAR, to, tag, MPI_COMM_WORLD, &s.request);
    sending_.push_back(std::move(s));
  }

  void loop() {
    std::vector<Clock::time_point> seen(static_cast<size_t>(size_), Clock::now());
    Clock::time_point beat = Clock::now() - std::chrono::seconds(2);
    std::optional<Clock::time_point> stop_since;
    const auto empty = std::make_shared<std::string>();
    for (;;) {
      bool busy = false;
      std::deque<Message> out;
      bool stopping;
      {
        std::lock_guard<std::mutex> l(mu_);
        out.swap(outbox_);
        stopping = stopping_;
      }
      for (Message& m : out) {
        isend(m.peer, m.tag, std::make_shared<std::string>(std::move(m.body)));
        busy = true;
      }
      for (size_t i = 0; i < sending_.size();) {
        int done = 0;
        MPI_Test(&sending_[i].request, &done, MPI_STATUS_IGNORE);
        if (done || lost(sending_[i].to)) {
          // A send to a lost rank may never complete: it is let go.
          if (!done) MPI_Request_free(&sending_[i].request);
          sending_[i] = std::move(sending_.back());
          sending_.pop_back();
        } else {
          ++i;
        }
      }
      for (;;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) break;
        busy = true;
        int n = 0;
        MPI_Get_count(&st, MPI_CHAR, &n);
        Message m{st.MPI_SOURCE, st.MPI_TAG, std::string(static_cast<size_t>(n), '\0')};
        MPI_Recv(m.body.data(), n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        seen[static_cast<size_t>(m.peer)] = Clock::now();
        if (m.tag == kBeat) continue;
        std::lock_guard<std::mutex> l(mu_);
        if (lost_[static_cast<size_t>(m.peer)]) continue;  // given up: what it says now is not waited for
        ++traffic_.messages_in;
        traffic_.bytes_in += static_cast<int64_t>(m.body.size());
        if (m.tag == kCancel) {
          cancelled_.insert(std::stoull(m.body));
          continue;
        }
        inbox_.push_back(std::move(m));
        cv_.notify_all();
      }
      if (since(beat) >= 1) {
        beat = Clock::now();
        for (int r : watched_)
          if (!lost(r)) isend(r, kBeat, empty);
      }
      for (int r : watched_) {
        const double limit = rank_ == 0 ? settings_.silence_seconds : settings_.leader_silence_seconds;
        if (lost(r) || since(seen[static_cast<size_t>(r)]) < limit) continue;
        std::lock_guard<std::mutex> l(mu_);
        lost_[static_cast<size_t>(r)] = true;
        inbox_.push_back({r, kLost, ""});
        cv_.notify_all();
      }
      if (stopping) {
        if (!stop_since) stop_since = Clock::now();
        bool left = false;
        for (const Sending& s : sending_) left = left || s.body.get() != empty.get();
        if (!left || since(*stop_since) > 5) break;
      }
      if (!busy) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    for (Sending& s : sending_) {
      int done = 0;
      MPI_Test(&s.request, &done, MPI_STATUS_IGNORE);
      if (!done) MPI_Request_free(&s.request);
    }
    sending_.clear();
  }

  int rank_, size_;
  Settings settings_;
  std::vector<int> watched_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> inbox_, outbox_;
  std::vector<bool> lost_;
  std::set<uint64_t> cancelled_;
  bool stopping_ = false;
  Traffic traffic_;
  std::vector<Sending> sending_;  // the thread's own
};

struct Session::Impl {
  int rank = 0, size = 1;
  Settings settings;
  std::unique_ptr<Comm> comm;
  bool peer_lost = false;  // a worker: rank 0 said a rank was lost, or rank 0 is
  void log(const std::string& line) const {
    if (settings.log) settings.log(line);
  }
};

namespace {

nlohmann::json options_json(const codegen::MeasureOptions& o) {
  return {{"timeout_seconds", o.timeout_seconds},
          {"tolerance", o.tolerance},
          {"input_seed", o.input_seed},
          {"target", o.target},
          {"precision", o.precision},
          {"cuda_arch", o.cuda_arch},
          {"flush_l2", o.flush_l2},
          {"compile_threads", o.compile_threads},
          {"max_instructions", o.max_instructions},
          {"constant_inputs", o.constant_inputs},
          {"cold_constants", o.cold_constants}};
}

codegen::MeasureOptions options_from(const nlohmann::json& j) {
  codegen::MeasureOptions o;
  o.timeout_seconds = j.at("timeout_seconds");
  o.tolerance = j.at("tolerance");
  o.input_seed = j.at("input_seed");
  o.target = j.at("target");
  o.precision = j.at("precision");
  o.cuda_arch = j.at("cuda_arch");
  o.flush_l2 = j.at("flush_l2");
  o.compile_threads = j.at("compile_threads");
  o.max_instructions = j.at("max_instructions");
  o.constant_inputs = j.at("constant_inputs").get<std::set<int>>();
  o.cold_constants = j.at("cold_constants");
  return o;
}

class MpiCluster : public Cluster {
 public:
  explicit MpiCluster(Session::Impl& s)
      : s_(s),
        hosts_(static_cast<size_t>(s.size)),
        machines_(static_cast<size_t>(s.size)),
        measured_(static_cast<size_t>(s.size)),
        busy_(static_cast<size_t>(s.size)) {
    kill_after_ = kill_after(0);
    // Every worker says hello (or is lost) before the first work.
    std::set<int> waiting;
    for (int r = 1; r < s.size; ++r) waiting.insert(r);
    const std::string mine = codegen_versions();
    while (!waiting.empty()) {
      std::optional<Message> m = s.comm->take(1.0);
      if (!m) continue;
      if (m->tag == kLost) {
        lost(m->peer, "before it said hello");
        waiting.erase(m->peer);
        continue;
      }
      if (m->tag != kHello) continue;
      nlohmann::json j = nlohmann::json::parse(m->body);
      hosts_[static_cast<size_t>(m->peer)] = j.at("host").get<std::string>();
      machines_[static_cast<size_t>(m->peer)] = j.value("machine", std::string());
      if (j.at("codegen") != mine)
        throw Error("rank " + std::to_string(m->peer) + " (" + j.at("host").get<std::string>() +
                    ") runs a basin that generates other code (" + j.at("codegen").get<std::string>() + ", not " +
                    mine + "): run the same build of basin on every machine");
      waiting.erase(m->peer);
    }
    hosts_[0] = machine_description("llvm");
  }

  std::vector<int> live_workers() override {
    std::vector<int> out;
    for (int r = 1; r < s_.size; ++r)
      if (!lost_.count(r) && !s_.comm->lost(r)) out.push_back(r);
    return out;
  }

  uint64_t send(int rank, const std::string& task_key, const codegen::MeasureOptions& options,
                const std::vector<RemoteProgram>& programs) override {
    const uint64_t id = ++next_work_;
    nlohmann::json ps = nlohmann::json::array();
    for (const RemoteProgram& p : programs)
      ps.push_back({{"slot", p.slot}, {"sketch", p.sketch}, {"config", p.config}, {"slow_us", p.slow_us}});
    nlohmann::json j = {{"work", id}, {"task", task_key}, {"options", options_json(options)}, {"programs", ps}};
    s_.comm->post(rank, kWork, j.dump());
    return id;
  }

  void cancel(int rank, uint64_t work) override { s_.comm->post(rank, kCancel, std::to_string(work)); }

  std::optional<RemoteOutcome> next(double timeout_seconds) override {
    const auto t0 = Clock::now();
    for (;;) {
      std::optional<Message> m = s_.comm->take(std::max(0.0, timeout_seconds - since(t0)));
      if (!m) return std::nullopt;
      RemoteOutcome o;
      o.rank = m->peer;
      if (m->tag == kLost) {
        if (lost_.count(m->peer)) continue;
        lost(m->peer, "no word from it for " + std::to_string(static_cast<int>(s_.settings.silence_seconds)) + " s");
        o.kind = RemoteOutcome::Kind::Lost;
        return o;
      }
      if (m->tag != kResult) continue;
      if (kill_after_ >= 0 && outcomes_++ == kill_after_) raise(SIGKILL);
      nlohmann::json j = nlohmann::json::parse(m->body);
      o.work = j.at("work");
      o.slot = j.at("slot");
      if (j.at("kind") == "skipped") {
        o.kind = RemoteOutcome::Kind::Skipped;
        return o;
      }
      o.kind = RemoteOutcome::Kind::Measured;
      codegen::MeasureResult& r = o.result;
      r.latencies_us = j.at("latencies_us").get<std::vector<double>>();
      r.median_us = j.at("median_us");
      r.compile_seconds = j.at("compile_seconds");
      r.lower_seconds = j.at("lower_seconds");
      r.compile_cpu_seconds = j.at("compile_cpu_seconds");
      r.error = j.at("error");
      r.brief = j.at("brief");
      r.disturbed = j.value("disturbed", 0);
      r.constant_stage = j.at("constant_stage");
      o.host = j.at("host");
      o.codegen = j.at("codegen");
      o.machine = machines_[static_cast<size_t>(o.rank)];
      o.started_at = j.at("started_at");
      o.finished_at = j.at("finished_at");
      ++measured_[static_cast<size_t>(o.rank)];
      busy_[static_cast<size_t>(o.rank)] = j.at("busy_seconds");
      return o;
    }
  }

  Traffic traffic() override { return s_.comm->traffic(); }

  std::vector<RankReport> report(int local, double local_busy) override {
    std::vector<RankReport> out;
    for (int r = 0; r < s_.size; ++r) {
      const size_t i = static_cast<size_t>(r);
      out.push_back({r, hosts_[i], r == 0 ? local : measured_[i], r == 0 ? local_busy : busy_[i], lost_.count(r) > 0});
    }
    return out;
  }

 private:
  void lost(int rank, const std::string& why) {
    lost_.insert(rank);
    const std::string& host = hosts_[static_cast<size_t>(rank)];
    s_.log("rank " + std::to_string(rank) + (host.empty() ? "" : " (" + host + ")") + " is lost (" + why +
           "); the run goes on without it, its unfinished programs measured here");
  }

  Session::Impl& s_;
  std::vector<std::string> hosts_;
  std::vector<std::string> machines_;  // each rank's description (Hardware::to_json) from its hello
  std::vector<int> measured_;
  std::vector<double> busy_;
  std::set<int> lost_;
  uint64_t next_work_ = 0;
  int kill_after_ = -1, outcomes_ = 0;
};

nlohmann::json result_json(uint64_t work, int slot, const codegen::MeasureResult& r, const std::string& target,
                           double started_at, double busy_seconds) {
  return {{"busy_seconds", busy_seconds},
          {"work", work},
          {"slot", slot},
          {"kind", "measured"},
          {"latencies_us", r.latencies_us},
          {"median_us", r.median_us},
          {"compile_seconds", r.compile_seconds},
          {"lower_seconds", r.lower_seconds},
          {"compile_cpu_seconds", r.compile_cpu_seconds},
          {"error", r.error},
          {"brief", r.brief},
          {"disturbed", r.disturbed},
          {"constant_stage", r.constant_stage},
          {"host", machine_description(target)},
          {"codegen", codegen::codegen_version(target)},
          {"started_at", started_at},
          {"finished_at", epoch_seconds()}};
}

}  // namespace

std::unique_ptr<Session> Session::start_if_launched(Settings settings) {
  if (launched_ranks() <= 1) return nullptr;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw Error("this MPI library gives no MPI_THREAD_SERIALIZED (basin's communication thread needs it)");
  }
  // A failed call returns its error (a rank lost) instead of ending every rank.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto impl = std::make_unique<Impl>();
  MPI_Comm_rank(MPI_COMM_WORLD, &impl->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &impl->size);
  impl->settings = std::move(settings);
  impl->comm = std::make_unique<Comm>(impl->rank, impl->size, impl->settings);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::~Session() {
  Impl& s = *impl_;
  bool lost = s.peer_lost;
  if (s.rank == 0) {
    for (int r = 1; r < s.size; ++r) lost = lost || s.comm->lost(r);
    for (int r = 1; r < s.size; ++r) s.comm->post(r, kStop, lost ? kStopLost : "");
  }
  s.comm->stop();
  s.comm.reset();
  // After a rank was lost, MPI_Finalize can wait forever on it (Open MPI 4.1, even with
  // --enable-recovery: one run in five to ten): a run that lost a rank ends without
  // it, its records and report written; mpirun then says that a rank exited without
  // finalizing (docs/distributed.md, "Failures").
  if (lost) {
    std::fflush(nullptr);
    return;
  }
  MPI_Finalize();
}

int Session::rank() const { return impl_->rank; }
int Session::size() const { return impl_->size; }

std::unique_ptr<Cluster> Session::cluster() {
  if (impl_->rank != 0) throw InternalError("Session::cluster on rank " + std::to_string(impl_->rank));
  return std::make_unique<MpiCluster>(*impl_);
}

int Session::serve() {
  Impl& s = *impl_;
  if (s.rank == 0) throw InternalError("Session::serve on rank 0");
  Comm& comm = *s.comm;
  comm.post(0, kHello,
            nlohmann::json{{"host", machine_description("llvm")},
                           {"codegen", codegen_versions()},
                           {"machine", this_hardware().to_json()}}
                .dump());
  const int die_after = kill_after(s.rank);
  int done = 0;
  double busy = 0;  // seconds spent compiling and measuring
  // One measurer per task and options, kept for the task's later rounds.
  std::map<std::string, std::unique_ptr<codegen::MeasurePool>> served;
  for (;;) {
    std::optional<Message> m = comm.take(1.0);
    if (!m) continue;
    if (m->tag == kStop) {
      s.peer_lost = m->body == kStopLost;
      return 0;
    }
    if (m->tag == kLost) {
      s.peer_lost = true;
      s.log("rank " + std::to_string(s.rank) + ": rank 0 is lost (no word from it for " +
            std::to_string(static_cast<int>(s.settings.leader_silence_seconds)) + " s); stopping");
      return 1;
    }
    if (m->tag != kWork) continue;
    nlohmann::json w = nlohmann::json::parse(m->body);
    const uint64_t work = w.at("work");
    const std::string key = w.at("task");
    const codegen::MeasureOptions options = options_from(w.at("options"));
    std::vector<codegen::Candidate> cs;
    std::vector<int> slots;
    std::vector<double> slow;
    std::string failed;  // why the work cannot be measured here (each program's error)
    codegen::MeasurePool* pool = nullptr;
    const std::string served_key = key + "\n" + w.at("options").dump();  // a task measured with given options
    try {
      std::unique_ptr<codegen::MeasurePool>& p = served[served_key];
      if (!p) {
        const ops::OpGraph task = sched::task_from_key(key);
        p = std::make_unique<codegen::MeasurePool>(task, sched::sketches_for(task, options.target, options.precision),
                                                   options);
      }
      pool = p.get();
    } catch (const std::exception& e) {
      failed = std::string("rank ") + std::to_string(s.rank) + " cannot measure task " + key + ": " + e.what();
      served.erase(served_key);
      pool = nullptr;
    }
    for (const nlohmann::json& p : w.at("programs")) {
      slots.push_back(p.at("slot"));
      slow.push_back(p.at("slow_us"));
      codegen::Candidate c;
      if (pool) {
        try {
          const sched::Sketch* sk = nullptr;
          c.config = sched::config_from_json(p.at("config").get<std::string>(), pool->sketches(), "rank 0", &sk);
          c.sketch = sk;
        } catch (const std::exception&) {
          c.sketch = nullptr;
        }
      }
      cs.push_back(std::move(c));
    }
    std::vector<codegen::Candidate> ahead;
    for (const codegen::Candidate& c : cs)
      if (c.sketch) ahead.push_back(c);
    const auto busy_since = Clock::now();
    if (pool && !ahead.empty()) pool->prepare(ahead);
    for (size_t i = 0; i < cs.size(); ++i) {
      if (comm.cancelled(work)) {
        comm.post(0, kResult, nlohmann::json{{"work", work}, {"slot", slots[i]}, {"kind", "skipped"}}.dump());
        continue;
      }
      const double started = epoch_seconds();
      codegen::MeasureResult r;
      if (!pool) r.error = failed;
      else if (!cs[i].sketch) r.error = "rank " + std::to_string(s.rank) + " cannot read the configuration";
      else r = pool->measure_one(cs[i], slow[i]);
      comm.post(0, kResult, result_json(work, slots[i], r, options.target, started, busy + since(busy_since)).dump());
      if (die_after >= 0 && ++done >= die_after) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the result on its way
        raise(SIGKILL);
      }
    }
    busy += since(busy_since);
  }
}

}  // namespace basin::search::mpi
