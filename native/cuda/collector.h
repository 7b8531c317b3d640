// Lifecycle of the CUDA collector: set-up when CUDA initialises (or on
// demand), the writer thread, exit flush, fork handling. Every failure
// degrades to "GPU not traced" with one line on stderr; nothing aborts.
#pragma once

namespace rlscope::cuda {

// Sets up CUPTI and starts recording. Safe to call more than once; only the
// first call in a process does anything. Returns true when recording.
bool collector_start(const char* how);
// Writes everything recorded so far.
void collector_flush();
// Device sync, forced CUPTI flush, final write, file closed. Idempotent.
void collector_stop();
// Whether set-up was attempted in this process (for the exit message).
bool collector_attempted();

}  // namespace rlscope::cuda
