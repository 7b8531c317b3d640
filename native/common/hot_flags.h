// The flags every wrapper call reads, on one cache line. Apart they took three lines,
// one of them ~1 MB from the others, and each line a call reaches is a likely cache
// miss in a loop whose libraries evict it between calls.
#pragma once

#include <atomic>
#include <cstdint>

namespace rlscope {

struct alignas(64) HotFlags {
  // 0 = not recording; otherwise the id of the current recording session.
  std::atomic<uint32_t> session{0};
  // Bit c set: calls of category c are recorded (calls.h). Calibration
  // (rlscope.launch.chunk_copies) switches categories off in a forked child to time the
  // others alone.
  std::atomic<uint32_t> call_mask{~0u};
  // Events read the TSC (ticks.h): chosen at each recording start, before its events.
  bool tsc_ticks = false;
};

inline HotFlags g_hot;

}  // namespace rlscope
