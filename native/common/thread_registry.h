// The consumer side of per-thread buffers, shared by the Python recorder
// (recorder.cpp) and the CUDA API tracer (native/cuda/api_trace.cpp):
// registering a thread, noticing its exit, draining every buffer, freeing
// exited threads once drained, and the fork-child reset.
//
// The hot path is not here: producers append to their BufferedThread::buf
// (thread_buffer.h) directly. Everything in this file is slow path.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "thread_buffer.h"

namespace rlscope {

// What every recorded thread has; recorders derive their per-thread state
// from it and add what their hot path needs.
struct BufferedThread {
  explicit BufferedThread(BlockPool* pool) : buf(pool) {}
  virtual ~BufferedThread() = default;
  BufferedThread(const BufferedThread&) = delete;
  BufferedThread& operator=(const BufferedThread&) = delete;

  // Runs on the exiting thread just before it is marked finished: clear the
  // owner's thread-local pointer, so an event later in that thread's exit
  // registers afresh instead of touching a state the consumer may free.
  virtual void on_thread_exit() {}

  ThreadBuffer buf;
  // Set at registration (tid updated in a forked child).
  uint32_t index = 0;
  int64_t tid = 0;
  std::string name;
  // Thread exit -> true; the consumer drains and then frees the state.
  std::atomic<bool> finished{false};
  // Consumer side (the caller serialises drains).
  bool defined = false;  // its ThreadDef is in the current file
  uint64_t dropped_reported = 0;
};

// OS thread id (gettid) and name (pthread_getname_np, "" if unknown).
int64_t os_tid();
std::string os_thread_name();

// Threads of one recorder and the block pool (memory bound) of their buffers.
// Lives as long as the process (owners leak it: threads may record during
// exit, after static destructors).
class ThreadRegistry {
 public:
  // Thread indices are given out from `first_index` in registration order.
  explicit ThreadRegistry(uint32_t first_index);
  ThreadRegistry(const ThreadRegistry&) = delete;
  ThreadRegistry& operator=(const ThreadRegistry&) = delete;

  BlockPool& pool() { return pool_; }
  // The registry lock, for the owner's pthread_atfork prepare/parent (its
  // place in the owner's lock order: before pool().mutex()).
  std::mutex& mutex() { return mu_; }

  // Registers `t` (built on pool()) as the calling thread's state: tid,
  // index, and its exit sets `finished`. Once per thread.
  void add(BufferedThread* t);

  // ---- consumer side: the caller serialises all of these ----

  // For each registered thread with records published since the last drain,
  // calls visit(BufferedThread&, const std::vector<Record>&). Returns the
  // events dropped (memory bound) since the last drain. Threads that had
  // exited before their buffer was read are complete now: reap() frees them.
  template <class Visit>
  uint64_t drain(Visit&& visit);
  // Calls def(const BufferedThread&) for every registered thread not yet
  // defined in the current file, and marks it defined.
  template <class Def>
  void define_new(Def&& def);
  // New file: every thread must be defined again.
  void undefine_all();
  // Frees the threads the last drain found exited (call when done with the
  // pointers drain and define_new handed out; the next drain does it too).
  void reap();
  // Drops every buffered record unread (keeping the dropped counts in step)
  // and frees exited threads.
  void discard_all();
  // Records published and not yet drained, over all threads (approximate).
  size_t pending();

  // Forked child (only the calling thread exists; no locks are taken): fresh
  // locks; every other thread's state is leaked, not freed (cheaper, and a
  // fork+exec child touches no copied heap pages) and its blocks stop counting
  // against the bound. `keep` (the caller's state, may be null) stays
  // registered with its unflushed records dropped (the parent writes them).
  void reset_in_child(BufferedThread* keep);

 private:
  std::mutex mu_;
  BlockPool pool_;
  pthread_key_t key_;
  std::vector<BufferedThread*> threads_;  // mu_
  uint32_t next_index_;                   // mu_
  // Consumer-side scratch, reused across drains.
  std::vector<BufferedThread*> snap_, exited_;
  std::vector<Record> recs_;
};

template <class Visit>
uint64_t ThreadRegistry::drain(Visit&& visit) {
  reap();
  {
    std::lock_guard<std::mutex> lk(mu_);
    snap_ = threads_;
  }
  uint64_t dropped = 0;
  for (BufferedThread* t : snap_) {
    // Read before the buffer: whatever the thread published before exiting
    // is then drained below, so the state can be freed after this drain.
    bool exited = t->finished.load(std::memory_order_acquire);
    recs_.clear();
    t->buf.drain_into(recs_);
    uint64_t d = t->buf.dropped();
    dropped += d - t->dropped_reported;
    t->dropped_reported = d;
    if (!recs_.empty()) visit(*t, static_cast<const std::vector<Record>&>(recs_));
    if (exited) exited_.push_back(t);
  }
  snap_.clear();
  return dropped;
}

template <class Def>
void ThreadRegistry::define_new(Def&& def) {
  std::lock_guard<std::mutex> lk(mu_);
  for (BufferedThread* t : threads_) {
    if (t->defined) continue;
    def(static_cast<const BufferedThread&>(*t));
    t->defined = true;
  }
}

}  // namespace rlscope
