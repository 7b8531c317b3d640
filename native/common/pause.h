// When a calibration child was paused (rlscope.calibration.chunks).
//
// Calibration runs several forked copies of a workload in turns: the parent
// pauses a copy with SIGTSTP and resumes it with SIGCONT. The handler notes the
// CLOCK_MONOTONIC time just before the copy stops itself and just after it
// resumes, so the copy's trace can be read without the time the others ran
// (measured from outside, those instants are off by the signal and scheduling
// latencies, ~100 us a turn). Async-signal-safe: a clock read, kill(), a store.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rlscope {

// Installs the SIGTSTP handler (which then stops the process with SIGSTOP).
bool install_pause_handler();

// Copies up to max_pairs (stop, resume) pairs into out; returns the count.
size_t pause_gaps(uint64_t* out, size_t max_pairs);

}  // namespace rlscope
