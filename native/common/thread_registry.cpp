#include "thread_registry.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <new>

namespace rlscope {

int64_t os_tid() { return int64_t(syscall(SYS_gettid)); }

std::string os_thread_name() {
  char name[64] = {0};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) name[0] = 0;
  return name;
}

ThreadRegistry::ThreadRegistry(uint32_t first_index) : next_index_(first_index) {
  // The key's value is the thread's state; its destructor runs at thread exit.
  pthread_key_create(&key_, [](void* p) {
    auto* t = static_cast<BufferedThread*>(p);
    t->on_thread_exit();
    t->finished.store(true, std::memory_order_release);  // the consumer may free t now
  });
}

void ThreadRegistry::add(BufferedThread* t) {
  t->tid = os_tid();
  {
    std::lock_guard<std::mutex> lk(mu_);
    t->index = next_index_++;
    threads_.push_back(t);
  }
  pthread_setspecific(key_, t);
}

void ThreadRegistry::undefine_all() {
  std::lock_guard<std::mutex> lk(mu_);
  for (BufferedThread* t : threads_) t->defined = false;
}

void ThreadRegistry::reap() {
  if (exited_.empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (BufferedThread* t : exited_) {
      threads_.erase(std::find(threads_.begin(), threads_.end(), t));
    }
  }
  // Outside mu_: freeing the buffer takes the pool lock.
  for (BufferedThread* t : exited_) delete t;
  exited_.clear();
}

void ThreadRegistry::discard_all() {
  reap();
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (BufferedThread* t : threads_) {
      t->buf.discard();
      t->dropped_reported = t->buf.dropped();
      if (t->finished.load(std::memory_order_acquire)) exited_.push_back(t);
    }
  }
  reap();
}

size_t ThreadRegistry::pending() {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = 0;
  for (BufferedThread* t : threads_) n += t->buf.pending();
  return n;
}

void ThreadRegistry::reset_in_child(BufferedThread* keep) {
  new (&mu_) std::mutex();
  pool_.reinit_after_fork();
  for (BufferedThread* t : threads_) {
    if (t != keep) pool_.forget(t->buf.count_blocks());
  }
  threads_.clear();
  snap_.clear();
  exited_.clear();
  if (keep) {
    threads_.push_back(keep);
    keep->buf.reset_in_child();
    keep->tid = os_tid();
    keep->defined = false;
    keep->dropped_reported = 0;
  }
  pthread_setspecific(key_, keep);
}

}  // namespace rlscope
