// The process-wide recorder: string interning, per-thread scope stacks, the
// writer thread and fork handling (its threads live in a ThreadRegistry).
//
// Hot path (push/exit_scope/record/progress): a relaxed-ish load of the
// session id, a clock read, a 16-byte append to the calling thread's buffer.
// No lock, no allocation, no encoding. Everything else is slow path.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ticks.h"
#include "thread_registry.h"

namespace rlscope {

enum EventKind : uint32_t {
  EVENT_KIND_UNSPECIFIED = 0,
  OPERATION_BEGIN = 1,
  OPERATION_END = 2,
  PHASE_BEGIN = 3,
  PHASE_END = 4,
  PROGRESS = 5,
  PROCESS_START = 6,
  PROCESS_END = 7,
  // One step / reset of env `index` of a vector env (env_begin / env_end).
  ENV_STEP_BEGIN = 8,
  ENV_STEP_END = 9,
  ENV_RESET_BEGIN = 10,
  ENV_RESET_END = 11,
  // Intercepted native calls (calls.h): END = BEGIN + 1.
  BACKEND_CALL_BEGIN = 16,
  BACKEND_CALL_END = 17,
  SIMULATOR_CALL_BEGIN = 18,
  SIMULATOR_CALL_END = 19,
  WAIT_CALL_BEGIN = 20,
  WAIT_CALL_END = 21,
  MARK_CALL_BEGIN = 22,
  MARK_CALL_END = 23,
  // Edges of a stretch of a thread kept as aggregates only (aggregator.h).
  AGGREGATED_BEGIN = 24,
  AGGREGATED_END = 25,
};

enum Status : int {
  OK = 0,
  NOT_ACTIVE = 1,    // no recording: nothing recorded, stack untouched
  STACK_EMPTY = 2,   // pop with no open scope
  MISMATCH = 3,      // pop/exit does not match the innermost open scope
  TOO_DEEP = 4,      // more than kMaxDepth open scopes
  NOT_ON_STACK = 5,  // exit of a scope that is not open on this thread
};

constexpr uint32_t kMaxDepth = 256;

struct StackEntry {
  uint32_t kind;  // the BEGIN kind (OPERATION_BEGIN or PHASE_BEGIN); END = kind + 1
  uint32_t name;
};

// Set on `kind` of the scopes a forked child inherited open from its parent. A child's
// trace starts with no open scopes (fork and spawn name the same work the same); these
// only let the child's code leave them without an error, recording nothing. Never
// equal to a BEGIN kind, so the hot-path exit check misses them and the slow path pops.
constexpr uint32_t kInherited = 0x80000000u;

// The registry's per-thread state plus what the hot path needs.
struct ThreadState : BufferedThread {
  explicit ThreadState(BlockPool* pool) : BufferedThread(pool) {}
  void on_thread_exit() override;  // forgets tls_thread

  // Owning thread only.
  uint32_t session = 0;  // recording session the stack belongs to
  uint32_t depth = 0;
  // Per call category (calls.h): 1 while inside an outermost intercepted call.
  uint8_t in_call[4] = {0, 0, 0, 0};
  StackEntry stack[kMaxDepth];
};

// The calling thread's state, nullptr until it registers.
extern __thread ThreadState* tls_thread __attribute__((tls_model("initial-exec")));

struct Config {
  std::string path;
  std::vector<std::string> argv;
  std::string process_name;
  std::string rlscope_version;
  std::string source = "python";
  double flush_interval_s = 0.5;
  uint64_t max_buffer_bytes = 256ull << 20;
  uint32_t flush_threshold_records = 32768;
};

struct Stats {
  uint64_t events = 0;         // events written to the file (args not counted)
  uint64_t dropped = 0;        // events dropped because of the memory bound
  uint64_t chunks = 0;
  uint64_t bytes_written = 0;  // including magic and header
  uint64_t threads = 0;        // ThreadDefs written to the file
};

// ---- thread registration (slow path, once per thread) ----
// Registers the calling thread under `name` (no-op if already registered).
ThreadState* register_thread(std::string_view name);
// The calling thread's state, registering it under its OS thread name.
ThreadState* current_thread();

// ---- lifecycle ----
// Returns 0, -1 if a recording is already active, or an errno from creating
// or writing the file. `t` (may be null) receives the PROCESS_START event.
int start(const Config& cfg, ThreadState* t);
// Records END for the scopes still open on `t` (may be null) and
// PROCESS_END, writes everything, joins the writer, closes the file. No-op
// when not recording.
// `process_ends`: the process ends right after (a library's _Exit): the writer thread is
// told to stop but not waited for, the caller flushes.
void stop(ThreadState* t, bool process_ends = false);
// Synchronous drain + write of every buffer. No-op when not recording.
void flush();
bool is_active();
Stats stats();
// First errno seen writing the current/last file, 0 if none.
int write_error();
std::string current_path();
// In a forked child whose parent was recording: open `path` (a new file),
// write a header, record PROCESS_START, mark the scopes still open on `t` as
// inherited (kInherited: they close silently), start the writer. Returns 0, -1 if there is nothing to resume, or an
// errno.
int after_fork_child(const std::string& path, ThreadState* t);

// ---- interning (mutex) ----
uint32_t intern(std::string_view s);  // ids from 1; 0 = no name
std::string string_of(uint32_t id);

// ---- metadata (slow path, mutex) ----
void metadata(std::string_view key, std::string_view json_value);

// ---- hot path ----
inline bool begin_event(ThreadState* t) {
  uint32_t s = g_hot.session.load(std::memory_order_acquire);
  if (__builtin_expect(s == 0, 0)) return false;
  if (__builtin_expect(t->session != s, 0)) {
    // First event of a new recording on this thread: stale scopes are gone.
    t->session = s;
    t->depth = 0;
  }
  return true;
}

inline Status record(ThreadState* t, uint32_t kind, uint32_t name) {
  if (!begin_event(t)) return NOT_ACTIVE;
  t->buf.append(ticks(), name, kind);
  return OK;
}

inline Status push(ThreadState* t, uint32_t begin_kind, uint32_t name) {
  if (!begin_event(t)) return NOT_ACTIVE;
  uint32_t d = t->depth;
  if (__builtin_expect(d >= kMaxDepth, 0)) return TOO_DEEP;
  t->stack[d] = StackEntry{begin_kind, name};
  t->depth = d + 1;
  t->buf.append(ticks(), name, begin_kind);
  return OK;
}

// Slow part of exit_scope; see there.
Status exit_scope_slow(ThreadState* t, uint32_t begin_kind, uint32_t name,
                       std::vector<StackEntry>* unwound);

// Innermost-scope exit only: OK (popped, END recorded), NOT_ACTIVE, or
// NOT_ON_STACK meaning "not the innermost scope; nothing changed" (then call
// exit_scope for the full rules).
inline Status exit_innermost(ThreadState* t, uint32_t begin_kind, uint32_t name) {
  if (!begin_event(t)) return NOT_ACTIVE;
  uint32_t d = t->depth;
  if (__builtin_expect(d != 0 && t->stack[d - 1].kind == begin_kind &&
                           t->stack[d - 1].name == name, 1)) {
    t->depth = d - 1;
    t->buf.append(ticks(), name, begin_kind + 1);
    return OK;
  }
  return NOT_ON_STACK;
}

// Exit of a scope (context manager __exit__):
//  - innermost: pop, record END, OK (an inherited scope: pop, nothing recorded);
//  - deeper in the stack: END for the inner scopes and this one (same
//    timestamp), pop them, MISMATCH; `unwound` gets the inner scopes
//    (innermost first);
//  - not open (or empty stack): NOT_ON_STACK, nothing changes.
inline Status exit_scope(ThreadState* t, uint32_t begin_kind, uint32_t name,
                         std::vector<StackEntry>* unwound) {
  Status st = exit_innermost(t, begin_kind, name);
  if (st != NOT_ON_STACK) return st;
  return exit_scope_slow(t, begin_kind, name, unwound);
}

// Whether a scope of this kind and name is open on the thread (inherited ones too).
inline bool on_stack(const ThreadState* t, uint32_t begin_kind, uint32_t name) {
  for (uint32_t i = t->depth; i-- > 0;) {
    if ((t->stack[i].kind & ~kInherited) == begin_kind && t->stack[i].name == name) return true;
  }
  return false;
}

// Explicit pop (pop_operation): the innermost scope must be `begin_kind` and,
// if name != 0, `name`. STACK_EMPTY / MISMATCH change nothing.
Status pop(ThreadState* t, uint32_t begin_kind, uint32_t name);

// PROGRESS event followed by its two ARG records, published together.
Status progress(ThreadState* t, int64_t timesteps, int64_t total);

// ENV_STEP_BEGIN / ENV_RESET_BEGIN (`begin_kind`) with its env index, published
// together; env_end records the matching END. Not scopes: no stack, no nesting rules.
Status env_begin(ThreadState* t, uint32_t begin_kind, uint32_t name, int64_t index);
Status env_end(ThreadState* t, uint32_t begin_kind, uint32_t name);

// Open scopes of `t`, outermost first, without inherited ones (empty when not
// recording).
std::vector<StackEntry> open_scopes(ThreadState* t);

}  // namespace rlscope

// For the ctypes-per-event benchmark: records one event on the calling thread
// (registering it under its OS thread name). Returns a Status, or -1 for a
// kind >= 255 (reserved).
extern "C" __attribute__((visibility("default"))) int rlscope_ctypes_record(unsigned kind,
                                                                          unsigned name);
