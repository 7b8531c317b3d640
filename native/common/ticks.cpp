#include "ticks.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace rlscope {
namespace {

// A segment shorter than this keeps the previous rate: over a few us two anchors'
// uncertainty would dominate the rate they give.
constexpr int64_t kMinSegmentNs = 100'000;

// An anchor this wide is good enough (a clock_gettime call takes 20-50 ns).
constexpr int64_t kTightAnchorNs = 200;

double g_initial_ns_per_tick = 1.0;

#if defined(__x86_64__)
bool tsc_trusted() {
  std::ifstream cs("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  if (!(cs >> source) || source != "tsc") return false;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    line += ' ';
    return line.find(" constant_tsc ") != std::string::npos &&
           line.find(" nonstop_tsc ") != std::string::npos;
  }
  return false;
}
#endif

}  // namespace

TickAnchor read_anchor() {
  TickAnchor best{0, 0, INT64_MAX};
  // Tries until one is tight (a preempted try is microseconds wide), 64 at most.
  for (int i = 0; i < 64 && (i < 7 || best.uncertainty_ns > kTightAnchorNs); ++i) {
    int64_t t0 = ticks();
    int64_t n = monotonic_ns();
    int64_t t1 = ticks();
    int64_t width = int64_t(double(t1 - t0) * (g_hot.tsc_ticks ? g_initial_ns_per_tick : 1.0));
    if (width < best.uncertainty_ns) best = TickAnchor{t0 + (t1 - t0) / 2, n, width};
  }
  return best;
}

bool choose_ticks() {
  static int trusted = -1;  // the machine's answer, once per process
#if defined(__x86_64__)
  if (trusted < 0) {
    trusted = tsc_trusted();
    if (trusted) {  // the rate a segment shorter than kMinSegmentNs uses: over 2x that
      g_hot.tsc_ticks = true;
      TickAnchor a = read_anchor();
      TickAnchor b = a;
      while (b.ns - a.ns < 2 * kMinSegmentNs) b = read_anchor();
      g_initial_ns_per_tick = double(b.ns - a.ns) / double(b.ticks - a.ticks);
    }
  }
#else
  trusted = 0;
#endif
  const char* forced = getenv("RLSCOPE_CLOCK");
  g_hot.tsc_ticks = trusted == 1 && !(forced && strcmp(forced, "monotonic") == 0);
  return g_hot.tsc_ticks;
}

double initial_ns_per_tick() { return g_initial_ns_per_tick; }

void TickMap::begin(const TickAnchor& a, bool tsc, double rate) {
  tsc_ = tsc;
  if (!rate_known_) ns_per_tick_ = rate;
  t0_ = a.ticks;
  n0_ = a.ns;
}

void TickMap::advance(const TickAnchor& a) {
  if (!tsc_ || a.ns - n0_ < kMinSegmentNs || a.ticks <= t0_) return;
  ns_per_tick_ = double(a.ns - n0_) / double(a.ticks - t0_);
  rate_known_ = true;
  t0_ = a.ticks;
  n0_ = a.ns;
}

}  // namespace rlscope
