#include "pause.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "clock.h"

namespace rlscope {
namespace {

constexpr size_t kMaxGaps = size_t{1} << 16;
uint64_t g_gaps[kMaxGaps][2];
std::atomic<size_t> g_count{0};

void on_tstp(int) {
  int saved = errno;
  uint64_t stop = monotonic_ns();
  kill(getpid(), SIGSTOP);  // returns once the parent sends SIGCONT
  uint64_t resume = monotonic_ns();
  size_t i = g_count.load(std::memory_order_relaxed);
  if (i < kMaxGaps) {
    g_gaps[i][0] = stop;
    g_gaps[i][1] = resume;
    g_count.store(i + 1, std::memory_order_release);
  }
  errno = saved;
}

}  // namespace

bool install_pause_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_tstp;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  g_count.store(0, std::memory_order_relaxed);
  return sigaction(SIGTSTP, &sa, nullptr) == 0;
}

size_t pause_gaps(uint64_t* out, size_t max_pairs) {
  size_t n = g_count.load(std::memory_order_acquire);
  if (n > max_pairs) n = max_pairs;
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = g_gaps[i][0];
    out[2 * i + 1] = g_gaps[i][1];
  }
  return n;
}

}  // namespace rlscope
