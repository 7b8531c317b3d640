#include "recorder.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <unordered_map>

#include "aggregator.h"
#include "detail_windows.h"
#include "host.h"
#include "term_watch.h"
#include "trace_writer.h"

namespace rlscope {

__thread ThreadState* tls_thread __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

struct PendingMetadata {
  std::string key, json;
  int64_t time_ns;
};

// Lock order (outermost first): control_mu, drain_mu, threads.mutex(),
// strings_mu, meta_mu, threads.pool().mutex(). wake_mu is a leaf, never held
// with another lock.
struct Recorder {
  Recorder();

  std::mutex control_mu;   // start / stop / after_fork_child
  std::mutex drain_mu;     // consumer side of every buffer, the file, stats
  ThreadRegistry threads{0};
  std::mutex strings_mu;
  std::mutex meta_mu;
  std::mutex wake_mu;
  std::condition_variable wake_cv;
  bool stop_writer = false;  // wake_mu

  // strings_mu
  std::unordered_map<std::string, uint32_t> ids;
  std::deque<std::string> by_id;  // id - 1 -> value
  size_t strings_emitted = 0;     // ids <= this are defined in the current file

  // meta_mu
  std::vector<PendingMetadata> pending_meta;

  // control_mu (+ drain_mu for the file and stats)
  Config cfg;
  TraceFile file;
  uint64_t sequence = 0;
  Stats st;
  int64_t last_flush_ns = 0;
  bool writer_running = false;
  pthread_t writer{};
  uint32_t session_counter = 0;
  bool needs_reopen = false;       // forked child of a recording process
  uint32_t session_at_fork = 0;

  // drain_mu: reused scratch
  std::vector<ChunkEncoder> chunks;
  // drain_mu: the bounded trace (aggregator.h, detail_windows.h)
  Aggregator agg;
  DetailWindows windows;
  uint64_t budget_bytes = 0;
  int64_t last_rows_ns = 0;
  uint32_t windows_ended = 0;
  bool budget_announced = false;  // the rlscope.trace_budget metadata is written
  // drain_mu: events' ticks -> CLOCK_MONOTONIC ns (ticks.h)
  TickMap tick_map;
};

// Rows of an open gap are written at least this often (a kill loses at most this).
constexpr int64_t kRowsInterval = 5'000'000'000;

const char* reason_name(DetailWindows::Reason r) {
  switch (r) {
    case DetailWindows::START: return "start";
    case DetailWindows::PERIODIC: return "periodic";
    case DetailWindows::DEMAND: return "demand";
    default: return "none";
  }
}

void window_metadata(Recorder& r, ChunkEncoder& enc, DetailWindows::Reason why,
                     int64_t begin, int64_t end) {
  std::string json = std::string("{\"reason\": \"") + reason_name(why) +
                     "\", \"begin_ns\": " + std::to_string(begin) +
                     ", \"end_ns\": " + std::to_string(end) + "}";
  enc.add_metadata("rlscope.window:" + std::to_string(r.windows_ended++), json, end);
}

// "123", else 0 (no budget).
uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long x = strtoull(v, &end, 10);
  return (end && *end == 0) ? uint64_t(x) : fallback;
}

void fork_prepare();
void fork_parent();
void fork_child();

Recorder::Recorder() { pthread_atfork(fork_prepare, fork_parent, fork_child); }

// Leaked on purpose: the writer thread may outlive static destructors.
Recorder& R() {
  static Recorder* r = new Recorder();
  return *r;
}

// ---- flushing (drain_mu held) ----

void flush_locked(Recorder& r, bool final = false) {
  if (!r.file.is_open()) return;
  if (r.chunks.empty()) r.chunks.emplace_back();
  size_t nchunks = 1;
  r.chunks[0].reset();
  uint64_t events = 0;

  // The segment of ticks this flush's events lie in (before now, the drain's start).
  r.tick_map.advance(read_anchor());
  const TickMap& clock = r.tick_map;

  // 0. Under a budget: detail or aggregates for this flush's events.
  const bool bounded = r.windows.bounded();
  const int64_t now = monotonic_ns();
  const bool detail = !bounded || r.windows.detail(now, r.file.bytes_written());
  bool rows_due = final;
  if (bounded) {
    if (!r.budget_announced) {
      r.chunks[0].add_metadata("rlscope.trace_budget", std::to_string(r.budget_bytes), now);
      r.budget_announced = true;
    }
    int64_t b, e;
    DetailWindows::Reason why = r.windows.ended(&b, &e);
    if (why != DetailWindows::NONE) window_metadata(r, r.chunks[0], why, b, e);
    if (detail && r.agg.any_gap()) {
      r.agg.close_gaps(r.chunks[0]);  // before this flush's events, which come later
      rows_due = true;
    }
  }

  // 1. Drain events first, encoding them straight into chunk columns. A start or demand
  // window ends on its bytes, checked every kCapCheck detail events: at the first past
  // its cap the window is cut, and the events after it (of every thread) aggregate.
  const uint64_t cap = detail && bounded ? r.windows.byte_cap() : UINT64_MAX;
  const uint64_t bytes_before = bounded ? r.windows.last_estimate() : 0;
  constexpr uint64_t kCapCheck = 256;
  int64_t cut_ts = INT64_MAX;
  int64_t first_detail_ts = INT64_MAX;
  uint64_t detail_events = 0;
  bool keep_args = true;  // the args of an aggregated event go with it
  uint64_t dropped =
      r.threads.drain([&](const BufferedThread& t, const std::vector<Record>& recs) {
        for (const Record& rec : recs) {
          ChunkEncoder* enc = &r.chunks[nchunks - 1];
          if (rec.kind == kArgKind) {
            if (keep_args) enc->add_arg(rec.ts);
            continue;
          }
          const int64_t ts = clock.to_ns(rec.ts);
          if (enc->events() >= kMaxEventsPerChunk) {
            if (r.chunks.size() == nchunks) r.chunks.emplace_back();
            enc = &r.chunks[nchunks++];
            enc->reset();
          }
          const bool in_detail = detail && ts < cut_ts;
          if (!in_detail && !r.windows.in_range(ts)) {
            keep_args = r.agg.aggregate(*enc, t.index, ts, rec.kind, rec.name);
            if (!keep_args) continue;
          } else if (bounded) {
            if (!in_detail) {  // a periodic window begins inside this flush
              r.agg.close_gap(*enc, t.index);
              rows_due = true;
            }
            r.agg.detail(t.index, ts, rec.kind, rec.name);
            keep_args = true;
          }
          enc->add_event(ts, t.index, rec.kind, rec.name);
          ++events;
          if (in_detail) first_detail_ts = std::min(first_detail_ts, ts);
          if (in_detail && cap != UINT64_MAX && ++detail_events % kCapCheck == 0) {
            uint64_t written = 0;
            for (size_t c = 0; c < nchunks; ++c) written += r.chunks[c].event_bytes();
            if (bytes_before + written >= cap) {
              cut_ts = ts + 1;  // this event is the window's last
              r.windows.cut(cut_ts);
            }
          }
        }
      });
  if (bounded && detail && first_detail_ts != INT64_MAX) r.windows.began_by(first_detail_ts);
  if (cut_ts != INT64_MAX) {  // the window cut above: its metadata with these events
    int64_t b, e;
    DetailWindows::Reason why = r.windows.ended(&b, &e);
    if (why != DetailWindows::NONE) window_metadata(r, r.chunks[nchunks - 1], why, b, e);
  }
  if (final && bounded) {
    if (r.windows.current() != DetailWindows::NONE) {
      window_metadata(r, r.chunks[nchunks - 1], r.windows.current(), r.windows.window_begin(),
                      now);
    }
    r.agg.close_gaps(r.chunks[nchunks - 1]);
  }

  // 2. Then definitions: every id used above is registered by now.
  ChunkEncoder& first = r.chunks[0];
  r.threads.define_new([&](const BufferedThread& t) {
    first.add_thread(t.index, t.tid, t.name);
    ++r.st.threads;
  });
  {
    std::lock_guard<std::mutex> lk(r.strings_mu);
    for (size_t id = r.strings_emitted + 1; id <= r.by_id.size(); ++id) {
      first.add_string(uint32_t(id), r.by_id[id - 1]);
    }
    r.strings_emitted = r.by_id.size();
  }
  {
    std::lock_guard<std::mutex> lk(r.meta_mu);
    for (const auto& m : r.pending_meta) first.add_metadata(m.key, m.json, m.time_ns);
    r.pending_meta.clear();
  }
  first.set_dropped(dropped);
  if (bounded && (rows_due || now - r.last_rows_ns >= kRowsInterval) && r.agg.has_rows()) {
    r.agg.emit(first);  // after the strings its states name
    r.last_rows_ns = now;
  }

  // 3. Write, one write() per chunk.
  for (size_t c = 0; c < nchunks; ++c) {
    if (r.chunks[c].empty()) continue;
    const std::string& bytes = r.chunks[c].finish(r.sequence);
    r.file.write_all(bytes);
    ++r.sequence;
    ++r.st.chunks;
  }
  r.st.events += events;
  r.st.dropped += dropped;
  r.st.bytes_written = r.file.bytes_written();
  r.last_flush_ns = monotonic_ns();

  // 4. Free threads that exited, now drained and defined.
  r.threads.reap();
}

void stop_locked(Recorder& r, ThreadState* t, bool process_ends);

// A SIGTERM the program's handler never acted on (term_watch.h): the recording is
// stopped as an exit stops it where no thread is starting or stopping one (else what is
// buffered is flushed), then the process ends as SIGTERM would have ended it.
// (Not waiting for control_mu: a thread stopping the recording may be joining this one.)
[[noreturn]] void end_after_unanswered_sigterm(Recorder& r) {
  std::unique_lock<std::mutex> ctl(r.control_mu, std::try_to_lock);
  if (ctl.owns_lock()) {
    stop_locked(r, current_thread(), /*process_ends=*/true);
  } else {
    std::lock_guard<std::mutex> lk(r.drain_mu);
    flush_locked(r);
  }
  die_of_sigterm();
}

void* writer_main(void*) {
  Recorder& r = R();
  const auto tick = std::chrono::milliseconds(20);
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(r.wake_mu);
      r.wake_cv.wait_for(lk, tick, [&] { return r.stop_writer; });
      if (r.stop_writer) break;
    }
    if (sigterm_unanswered(monotonic_ns())) end_after_unanswered_sigterm(r);
    std::lock_guard<std::mutex> lk(r.drain_mu);
    if (!r.file.is_open()) continue;
    int64_t interval = int64_t(r.cfg.flush_interval_s * 1e9);
    if (monotonic_ns() - r.last_flush_ns >= interval ||
        r.threads.pending() >= r.cfg.flush_threshold_records) {
      flush_locked(r);
    }
  }
  return nullptr;
}

void start_writer(Recorder& r) {
  {
    std::lock_guard<std::mutex> lk(r.wake_mu);
    r.stop_writer = false;
  }
  // The writer must not receive the process's signals (Python handles them
  // on the main thread).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&r.writer, nullptr, writer_main, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  r.writer_running = (rc == 0);
  if (r.writer_running) pthread_setname_np(r.writer, "rlscope-writer");
  // Without a writer thread, data is still written by flush() and stop().
}

void stop_writer(Recorder& r) {
  if (!r.writer_running) return;
  {
    std::lock_guard<std::mutex> lk(r.wake_mu);
    r.stop_writer = true;
  }
  r.wake_cv.notify_all();
  pthread_join(r.writer, nullptr);
  r.writer_running = false;
}

// Open `path` and write magic + header. drain_mu held. Returns 0 or errno.
int open_file_locked(Recorder& r, const std::string& path) {
  int err = r.file.open(path);
  if (err) return err;
  HeaderInfo h;
  h.source = r.cfg.source;
  h.pid = getpid();
  h.ppid = getppid();
  h.host = host_label();
  h.process_name = r.cfg.process_name;
  h.argv = r.cfg.argv;
  h.clock = read_clock_pair();
  h.rlscope_version = r.cfg.rlscope_version;
  err = r.file.write_all(encode_file_start(h));
  if (err) {
    r.file.close();
    unlink(path.c_str());
    return err;
  }
  choose_ticks();
  r.tick_map.begin(read_anchor());
  r.sequence = 0;
  r.st = Stats{};
  r.st.bytes_written = r.file.bytes_written();
  r.last_flush_ns = monotonic_ns();
  // A bounded trace: $RLSCOPE_TRACE_BUDGET bytes for the file's directory.
  r.agg.reset();
  r.windows_ended = 0;
  r.last_rows_ns = r.last_flush_ns;
  r.budget_bytes = env_u64("RLSCOPE_TRACE_BUDGET", 0);
  r.windows.first_period_ns =
      int64_t(env_u64("RLSCOPE_TRACE_PERIOD_MS", 30'000)) * 1'000'000;
  r.windows.window_ns = int64_t(env_u64("RLSCOPE_TRACE_WINDOW_MS", 2'000)) * 1'000'000;
  r.windows.start_window_ns = int64_t(env_u64("RLSCOPE_TRACE_START_MS", 0)) * 1'000'000;
  r.windows.start_max_bytes = env_u64("RLSCOPE_TRACE_START_MB", 100) * 1'000'000;
  size_t slash = path.rfind('/');
  r.windows.configure(r.budget_bytes, slash == std::string::npos ? "." : path.substr(0, slash),
                      r.last_flush_ns, int64_t(env_u64("RLSCOPE_RUN_START_NS", 0)));
  r.budget_announced = false;
  return 0;
}

// New file: every string and thread must be defined again.
void reset_definitions_locked(Recorder& r) {
  r.threads.undefine_all();
  {
    std::lock_guard<std::mutex> lk(r.strings_mu);
    r.strings_emitted = 0;
  }
}

uint32_t next_session(Recorder& r) {
  if (++r.session_counter == 0) ++r.session_counter;
  return r.session_counter;
}

// ---- fork ----

void fork_prepare() {
  Recorder& r = R();
  r.control_mu.lock();
  r.drain_mu.lock();
  r.threads.mutex().lock();
  r.strings_mu.lock();
  r.meta_mu.lock();
  r.threads.pool().mutex().lock();
}

void fork_parent() {
  Recorder& r = R();
  r.threads.pool().mutex().unlock();
  r.meta_mu.unlock();
  r.strings_mu.unlock();
  r.threads.mutex().unlock();
  r.drain_mu.unlock();
  r.control_mu.unlock();
}

// Only this thread exists now. No I/O, no threads: fresh locks, forget the
// writer and the other threads, keep this thread's open scopes (after_fork_child
// marks them inherited).
void fork_child() {
  Recorder& r = R();
  new (&r.control_mu) std::mutex();
  new (&r.drain_mu) std::mutex();
  new (&r.strings_mu) std::mutex();
  new (&r.meta_mu) std::mutex();
  new (&r.wake_mu) std::mutex();
  new (&r.wake_cv) std::condition_variable();

  uint32_t s = g_hot.session.load(std::memory_order_relaxed);
  g_hot.session.store(0, std::memory_order_release);
  r.needs_reopen = r.file.is_open();
  r.session_at_fork = s;
  r.file.abandon();  // the parent's descriptor; the parent keeps writing it
  r.writer_running = false;
  r.stop_writer = false;

  r.threads.reset_in_child(tls_thread);
  r.strings_emitted = 0;
  r.pending_meta.clear();
  r.sequence = 0;
  r.st = Stats{};
}

}  // namespace

// ---- registration ----

void ThreadState::on_thread_exit() {
  if (tls_thread == this) tls_thread = nullptr;
}

ThreadState* register_thread(std::string_view name) {
  if (tls_thread) return tls_thread;
  Recorder& r = R();
  auto* t = new ThreadState(&r.threads.pool());
  t->name = std::string(name);
  r.threads.add(t);
  tls_thread = t;
  return t;
}

ThreadState* current_thread() {
  if (tls_thread) return tls_thread;
  return register_thread(os_thread_name());
}

// ---- lifecycle ----

// Which clock the events were taken on (their times in the file are CLOCK_MONOTONIC ns
// either way): for a reader checking a suspect trace, and the tests.
void announce_clock() {
  char json[96];
  snprintf(json, sizeof json, "{\"ticks\": \"%s\", \"ns_per_tick\": %.6f}",
           g_hot.tsc_ticks ? "tsc" : "monotonic", initial_ns_per_tick());
  metadata("rlscope.event_clock", json);
}

int start(const Config& cfg, ThreadState* t) {
  Recorder& r = R();
  std::lock_guard<std::mutex> ctl(r.control_mu);
  if (g_hot.session.load(std::memory_order_acquire) != 0) return -1;
  {
    std::lock_guard<std::mutex> lk(r.drain_mu);
    r.cfg = cfg;
    r.threads.pool().set_limit_bytes(cfg.max_buffer_bytes);
    int err = open_file_locked(r, cfg.path);
    if (err) return err;
    r.needs_reopen = false;
    // Leftovers from before (events raced with a stop, exited threads).
    r.threads.discard_all();
    reset_definitions_locked(r);
    {
      std::lock_guard<std::mutex> ml(r.meta_mu);
      r.pending_meta.clear();
    }
    g_hot.session.store(next_session(r), std::memory_order_release);
  }
  if (t) record(t, PROCESS_START, 0);
  announce_clock();
  start_writer(r);
  return 0;
}

namespace {

// stop() with control_mu held.
// The writer thread's CPU time as the trace's metadata, keyed as rlscope.annotate keys
// rlscope's threads ("rlscope.cpu:<OS name>"; a later record wins): a process that ends
// through the native exit or SIGTERM paths does not run the Python note, and the
// overhead correction removes this CPU from the process tree's.
void note_writer_cpu(Recorder& r) {
  if (!r.writer_running) return;
  clockid_t cid;
  timespec ts;
  if (pthread_getcpuclockid(r.writer, &cid) != 0 || clock_gettime(cid, &ts) != 0) return;
  int64_t ns = int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  std::lock_guard<std::mutex> lk(r.meta_mu);
  r.pending_meta.push_back(
      PendingMetadata{"rlscope.cpu:rlscope-writer", std::to_string(ns), monotonic_ns()});
}

void stop_locked(Recorder& r, ThreadState* t, bool process_ends) {
  if (g_hot.session.load(std::memory_order_acquire) == 0) return;
  if (t && begin_event(t)) {
    // Close the scopes still open on this thread so the trace stays balanced.
    int64_t now = ticks();
    for (uint32_t j = t->depth; j-- > 0;) {
      if (t->stack[j].kind & kInherited) continue;
      t->buf.append(now, t->stack[j].name, t->stack[j].kind + 1);
    }
    t->depth = 0;
    t->buf.append(now, 0, PROCESS_END);
  }
  g_hot.session.store(0, std::memory_order_release);
  if (process_ends) note_writer_cpu(r);
  if (!process_ends) {
    stop_writer(r);
  } else if (r.writer_running) {
    // Told to leave, not waited for: on a loaded machine the writer may not run for
    // milliseconds, and a Ray worker is SIGKILLed ~10 ms after it starts to exit. If it
    // is flushing now, drain_mu below waits for that flush only.
    std::lock_guard<std::mutex> lk(r.wake_mu);
    r.stop_writer = true;
  }
  {
    std::lock_guard<std::mutex> lk(r.drain_mu);
    flush_locked(r, /*final=*/true);
    r.file.close();
  }
  if (!process_ends) r.threads.pool().trim();
}

}  // namespace

void stop(ThreadState* t, bool process_ends) {
  Recorder& r = R();
  std::lock_guard<std::mutex> ctl(r.control_mu);
  stop_locked(r, t, process_ends);
}

void flush() {
  Recorder& r = R();
  std::lock_guard<std::mutex> lk(r.drain_mu);
  flush_locked(r);
}

bool is_active() { return g_hot.session.load(std::memory_order_acquire) != 0; }

Stats stats() {
  Recorder& r = R();
  std::lock_guard<std::mutex> lk(r.drain_mu);
  return r.st;
}

int write_error() {
  Recorder& r = R();
  std::lock_guard<std::mutex> lk(r.drain_mu);
  return r.file.error();
}

std::string current_path() {
  Recorder& r = R();
  std::lock_guard<std::mutex> lk(r.drain_mu);
  return r.file.path();
}

int after_fork_child(const std::string& path, ThreadState* t) {
  Recorder& r = R();
  std::lock_guard<std::mutex> ctl(r.control_mu);
  if (!r.needs_reopen || g_hot.session.load(std::memory_order_acquire) != 0) return -1;
  uint32_t s;
  {
    std::lock_guard<std::mutex> lk(r.drain_mu);
    int err = open_file_locked(r, path);
    if (err) return err;
    r.cfg.path = path;
    r.needs_reopen = false;
    reset_definitions_locked(r);
    s = next_session(r);
  }
  if (t) {
    // The scopes open at fork (if they belong to the recording active then) were
    // opened by the parent: the child's trace starts without them, and its code may
    // still leave them, silently.
    if (t->session != r.session_at_fork) t->depth = 0;
    for (uint32_t i = 0; i < t->depth; ++i) t->stack[i].kind |= kInherited;
    t->session = s;
  }
  g_hot.session.store(s, std::memory_order_release);
  if (t) t->buf.append(ticks(), 0, PROCESS_START);
  announce_clock();
  reset_sigterm_watch();  // a SIGTERM the parent had is not the child's
  start_writer(r);
  return 0;
}

// ---- interning / metadata ----

uint32_t intern(std::string_view s) {
  Recorder& r = R();
  std::lock_guard<std::mutex> lk(r.strings_mu);
  auto it = r.ids.find(std::string(s));
  if (it != r.ids.end()) return it->second;
  r.by_id.emplace_back(s);
  uint32_t id = uint32_t(r.by_id.size());
  r.ids.emplace(std::string(s), id);
  return id;
}

std::string string_of(uint32_t id) {
  Recorder& r = R();
  std::lock_guard<std::mutex> lk(r.strings_mu);
  if (id == 0 || id > r.by_id.size()) return std::string();
  return r.by_id[id - 1];
}

void metadata(std::string_view key, std::string_view json_value) {
  if (!is_active()) return;
  Recorder& r = R();
  int64_t now = monotonic_ns();
  std::lock_guard<std::mutex> lk(r.meta_mu);
  r.pending_meta.push_back(PendingMetadata{std::string(key), std::string(json_value), now});
}

// ---- stack operations (slow parts) ----

Status exit_scope_slow(ThreadState* t, uint32_t begin_kind, uint32_t name,
                       std::vector<StackEntry>* unwound) {
  uint32_t d = t->depth;
  uint32_t i = d;
  while (i > 0) {
    --i;
    if ((t->stack[i].kind & ~kInherited) == begin_kind && t->stack[i].name == name) {
      int64_t now = ticks();
      bool inner_open = false;  // scopes of this process left open inside it
      for (uint32_t j = d; j-- > i;) {
        if (t->stack[j].kind & kInherited) continue;  // the parent's: nothing to record
        if (j > i) {
          inner_open = true;
          if (unwound) unwound->push_back(t->stack[j]);
        }
        t->buf.append(now, t->stack[j].name, t->stack[j].kind + 1);
      }
      t->depth = i;
      return inner_open ? MISMATCH : OK;
    }
  }
  return NOT_ON_STACK;
}

Status pop(ThreadState* t, uint32_t begin_kind, uint32_t name) {
  if (!begin_event(t)) return NOT_ACTIVE;
  uint32_t d = t->depth;
  if (d == 0) return STACK_EMPTY;
  const StackEntry& top = t->stack[d - 1];
  if ((top.kind & ~kInherited) != begin_kind || (name != 0 && top.name != name)) {
    // Under inherited scopes only, nothing of this process is open.
    return (top.kind & kInherited) ? STACK_EMPTY : MISMATCH;
  }
  t->depth = d - 1;
  if (!(top.kind & kInherited)) t->buf.append(ticks(), top.name, begin_kind + 1);
  return OK;
}

Status progress(ThreadState* t, int64_t timesteps, int64_t total) {
  if (!begin_event(t)) return NOT_ACTIVE;
  Record recs[3] = {
      {ticks(), 0, PROGRESS},
      {timesteps, 0, kArgKind},
      {total, 0, kArgKind},
  };
  t->buf.append_n(recs, 3);
  return OK;
}

Status env_begin(ThreadState* t, uint32_t begin_kind, uint32_t name, int64_t index) {
  if (!begin_event(t)) return NOT_ACTIVE;
  Record recs[2] = {
      {ticks(), name, begin_kind},
      {index, 0, kArgKind},
  };
  t->buf.append_n(recs, 2);
  return OK;
}

Status env_end(ThreadState* t, uint32_t begin_kind, uint32_t name) {
  if (!begin_event(t)) return NOT_ACTIVE;
  t->buf.append(ticks(), name, begin_kind + 1);
  return OK;
}

std::vector<StackEntry> open_scopes(ThreadState* t) {
  std::vector<StackEntry> out;
  if (!t || g_hot.session.load(std::memory_order_acquire) == 0 ||
      t->session != g_hot.session.load(std::memory_order_acquire)) {
    return out;
  }
  for (uint32_t i = 0; i < t->depth; ++i) {
    if (!(t->stack[i].kind & kInherited)) out.push_back(t->stack[i]);
  }
  return out;
}

}  // namespace rlscope

extern "C" int rlscope_ctypes_record(unsigned kind, unsigned name) {
  if (kind >= rlscope::kArgKind) return -1;  // reserved for internal records
  if (!rlscope::is_active()) return rlscope::NOT_ACTIVE;
  return rlscope::record(rlscope::current_thread(), kind, name);
}
