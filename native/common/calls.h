// Recording of intercepted native calls (Python -> ML backend, Python ->
// simulator). Plain C++; the CPython wrapper type that calls these lives in
// native/pyext/module.cpp.
//
// Only the outermost call of a category on a thread is recorded: a wrapped
// call made inside another wrapped call of the same category (re-entrancy,
// recursion, a backend op calling back into Python that calls another op)
// is forwarded without events, so category time is never double counted.
// Hot path: a flag test, a clock read, a 16-byte append; no lock, no
// allocation.
#pragma once

#include <atomic>
#include <cstdint>

#include "recorder.h"

namespace rlscope {

enum CallCategory : uint32_t {
  CALL_BACKEND = 0,    // BACKEND_CALL_BEGIN / END
  CALL_SIMULATOR = 1,  // SIMULATOR_CALL_BEGIN / END
  CALL_WAIT = 2,       // WAIT_CALL_BEGIN / END (blocking calls: off the CPU)
  CALL_MARK = 3,       // MARK_CALL_BEGIN / END (phase markers: module forward,
                       // optimizer step; not a CPU category, see docs/attribution.md)
};
constexpr uint32_t kCallCategories = 4;

inline bool call_category_on(uint32_t category) {
  return (g_hot.call_mask.load(std::memory_order_relaxed) >> category) & 1u;
}

constexpr uint32_t call_begin_kind(uint32_t category) {
  return BACKEND_CALL_BEGIN + 2 * category;
}

// Records BEGIN and returns true when recording is active and this is the
// outermost call of `category` on `t`; then call_exit must follow. Returns
// false (nothing recorded, nothing to undo) otherwise.
inline bool call_enter(ThreadState* t, uint32_t category, uint32_t name) {
  if (t->in_call[category]) return false;
  if (!begin_event(t)) return false;
  t->in_call[category] = 1;
  t->buf.append(ticks(), name, call_begin_kind(category));
  return true;
}

// Ends the call entered by a successful call_enter. END is recorded only if
// the recording is still active (a stop() inside the call leaves the BEGIN
// unmatched; the reader closes it at the process end).
inline void call_exit(ThreadState* t, uint32_t category, uint32_t name) {
  t->in_call[category] = 0;
  if (!begin_event(t)) return;
  t->buf.append(ticks(), name, call_begin_kind(category) + 1);
}

}  // namespace rlscope
