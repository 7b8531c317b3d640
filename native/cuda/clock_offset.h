// CUPTI time -> CLOCK_MONOTONIC. CUPTI timestamps are not CLOCK_MONOTONIC
// (13.0 reads CLOCK_REALTIME), and the timestamp callback has a zero-time bug
// before 13.1, so the offset is measured: the tightest of several
// monotonic / cuptiGetTimestamp / monotonic windows.
#pragma once

#include <cstdint>

#include "clock.h"
#include "cupti_loader.h"

namespace rlscope::cuda {

struct ClockOffset {
  int64_t offset_ns = 0;  // monotonic = cupti + offset_ns
  int64_t error_ns = 0;   // |error| <= error_ns (half the window, rounded up)
};

inline ClockOffset measure_cupti_offset(const Cupti& c, int tries = 64) {
  ClockOffset best{0, INT64_MAX};
  for (int i = 0; i < tries; ++i) {
    uint64_t t = 0;
    int64_t m0 = monotonic_ns();
    if (c.GetTimestamp(&t) != CUPTI_SUCCESS) break;
    int64_t m1 = monotonic_ns();
    int64_t half = (m1 - m0 + 1) / 2;
    if (half < best.error_ns) best = ClockOffset{m0 + (m1 - m0) / 2 - int64_t(t), half};
  }
  if (best.error_ns == INT64_MAX) best = ClockOffset{0, -1};  // -1: not measured
  return best;
}

}  // namespace rlscope::cuda
