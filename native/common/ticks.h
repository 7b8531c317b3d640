// The hot path's timestamps. Where the kernel itself keeps CLOCK_MONOTONIC on an
// invariant TSC, an event's time is the raw TSC: one instruction, no call and no vDSO
// data page to bring into the cache (about 1 us per vector step of a fast env loop's
// ~20 events). Elsewhere it is CLOCK_MONOTONIC ns. The writer turns ticks into
// CLOCK_MONOTONIC ns when it drains (TickMap), so traces, CUPTI, the sampler and the
// workload's perf_counter_ns all share one clock.
#pragma once

#include <cstdint>

#include "clock.h"
#include "hot_flags.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace rlscope {

inline int64_t ticks() {
#if defined(__x86_64__)
  if (__builtin_expect(g_hot.tsc_ticks, 1)) return int64_t(__rdtsc());
#endif
  return monotonic_ns();
}

// Sets g_hot.tsc_ticks: x86-64 with constant and nonstop TSC and the kernel's clocksource
// "tsc" (checked, and the TSC rate measured, at the first call), and $RLSCOPE_CLOCK not
// "monotonic" now. Returns it.
bool choose_ticks();
// ns per tick as measured by choose_ticks (1 when ticks are ns).
double initial_ns_per_tick();

// A (ticks, CLOCK_MONOTONIC) pair: ns is the midpoint of two ticks readings around a
// monotonic one, mapped back; the tightest of a few tries.
struct TickAnchor {
  int64_t ticks;
  int64_t ns;
  int64_t uncertainty_ns;  // of the pair (ticks apart, in ns)
};
TickAnchor read_anchor();

// Ticks -> CLOCK_MONOTONIC ns, piecewise linear through anchors the writer reads at
// each flush. Within a segment the error is the anchors' (tens of ns); after the last
// anchor (events the flush drains after reading it) the segment's rate extrapolates
// for the microseconds the drain takes. The identity when ticks are ns.
class TickMap {
 public:
  // A new file: its first anchor. `tsc`: whether ticks need mapping; `rate`: ns per
  // tick until a segment gives one (a map that had a segment keeps its rate).
  void begin(const TickAnchor& a, bool tsc, double rate);
  void begin(const TickAnchor& a) { begin(a, g_hot.tsc_ticks, initial_ns_per_tick()); }
  void advance(const TickAnchor& a);  // a flush: the segment from the last anchor to a
  int64_t to_ns(int64_t t) const {
    if (!tsc_) return t;
    return n0_ + int64_t(double(t - t0_) * ns_per_tick_);
  }

 private:
  bool tsc_ = false;
  bool rate_known_ = false;
  int64_t t0_ = 0;
  int64_t n0_ = 0;
  double ns_per_tick_ = 1.0;
};

}  // namespace rlscope
