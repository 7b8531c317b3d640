// CLOCK_MONOTONIC in nanoseconds: the one clock every rlscope timestamp uses
// (the same clock as Python's time.perf_counter_ns() on Linux).
#pragma once

#include <cstdint>
#include <ctime>

namespace rlscope {

inline int64_t monotonic_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline int64_t realtime_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// A (monotonic, realtime) pair read back to back: monotonic is the midpoint of
// two monotonic readings around the realtime one; uncertainty is their
// distance. The best (tightest) of a few tries is kept.
struct ClockPairReading {
  int64_t monotonic_ns;
  int64_t realtime_ns;
  int64_t uncertainty_ns;
};

inline ClockPairReading read_clock_pair() {
  ClockPairReading best{0, 0, INT64_MAX};
  for (int i = 0; i < 5; ++i) {
    int64_t m0 = monotonic_ns();
    int64_t r = realtime_ns();
    int64_t m1 = monotonic_ns();
    if (m1 - m0 < best.uncertainty_ns) {
      best = ClockPairReading{m0 + (m1 - m0) / 2, r, m1 - m0};
    }
  }
  return best;
}

}  // namespace rlscope
