// One-line diagnostics on stderr. The collector never aborts the workload:
// CUPTI_CALL logs a failed call (when verbose) and evaluates to false so the
// caller can degrade.
#pragma once

#include <cupti.h>

#include <cstdarg>

namespace rlscope::cuda {

// "rlscope: <message>\n" on stderr, written with one write() call.
void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Only when RLSCOPE_CUDA_VERBOSE=1.
void log_debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// CUPTI's name for a result code ("CUPTI_ERROR_UNKNOWN"), or the number.
const char* cupti_error_name(CUptiResult r);

bool cupti_check(CUptiResult r, const char* call, const char* file, int line);

}  // namespace rlscope::cuda

#define CUPTI_CALL(call) ::rlscope::cuda::cupti_check((call), #call, __FILE__, __LINE__)
