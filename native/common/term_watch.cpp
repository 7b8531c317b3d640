#include "term_watch.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "clock.h"

namespace rlscope {
namespace {

struct sigaction g_prev;                 // the handler the watch wraps
std::atomic<bool> g_watching{false};
std::atomic<int64_t> g_arrived_ns{0};    // first unanswered SIGTERM, 0: none
std::atomic<bool> g_answered{false};

void on_term(int sig, siginfo_t* info, void* ctx) {
  int saved = errno;
  if (!g_answered.load(std::memory_order_relaxed)) {
    int64_t none = 0;
    g_arrived_ns.compare_exchange_strong(none, monotonic_ns());
  }
  errno = saved;
  if (g_prev.sa_flags & SA_SIGINFO) {
    if (g_prev.sa_sigaction) g_prev.sa_sigaction(sig, info, ctx);
  } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
    g_prev.sa_handler(sig);
  }
}

}  // namespace

int watch_sigterm() {
  struct sigaction cur;
  if (sigaction(SIGTERM, nullptr, &cur) != 0) return errno;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_term) return 0;  // inherited
  if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN))
    return EINVAL;
  g_prev = cur;
  struct sigaction mine = cur;
  mine.sa_sigaction = on_term;
  mine.sa_flags = cur.sa_flags | SA_SIGINFO;
  reset_sigterm_watch();
  if (sigaction(SIGTERM, &mine, nullptr) != 0) return errno;
  g_watching.store(true, std::memory_order_release);
  return 0;
}

void sigterm_answered() { g_answered.store(true, std::memory_order_relaxed); }

bool sigterm_unanswered(int64_t now_ns) {
  if (!g_watching.load(std::memory_order_acquire) || g_answered.load(std::memory_order_relaxed))
    return false;
  int64_t at = g_arrived_ns.load(std::memory_order_relaxed);
  return at != 0 && now_ns - at > kTermDeadlineNs;
}

void reset_sigterm_watch() {
  g_arrived_ns.store(0, std::memory_order_relaxed);
  g_answered.store(false, std::memory_order_relaxed);
}

void die_of_sigterm() {
  signal(SIGTERM, SIG_DFL);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  raise(SIGTERM);  // this thread takes it: the default action ends the process
  _exit(128 + SIGTERM);
}

}  // namespace rlscope
