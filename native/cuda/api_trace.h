// CUDA API calls from the CUPTI callback API.
//
// Hot path (api_callback): a TLS load, a clock read at ENTER and at EXIT, and
// one 32-byte append (two 16-byte records published together) to the calling
// thread's buffer. No lock, no allocation, no string work: names are resolved
// from (domain, cbid) on the writer thread.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "thread_registry.h"

namespace rlscope::cuda {

constexpr uint32_t kMaxNesting = 32;

// One API call as the writer thread reads it back.
struct ApiCall {
  int64_t start_ns, end_ns;  // CLOCK_MONOTONIC
  uint32_t cbid, domain, correlation_id;
};

// True while API calls are recorded (flipped off at exit and in forked children).
extern std::atomic<bool> g_api_tracing;

// The CUPTI subscriber callback.
void CUPTIAPI api_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* cbdata);

// Filter list of noisy trivial calls (docs/cuda.md): names without the
// "_vNNNN" suffix. is_filtered_name: whether `name` is one of them.
const std::vector<std::string>& filtered_call_names();
bool is_filtered_name(const std::string& name);
// Marks (domain, cbid) filtered for the callback's own check.
void set_filtered(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel".
std::string strip_version_suffix(const char* name);

// Registry, used by the writer.
void api_set_memory_limit(uint64_t bytes);
// Drains all threads: appends their calls to `out` grouped by thread, ordered
// by start within a thread, and each call's thread index to `thread_of_call`;
// threads with calls that are not defined yet go to `new_threads`. Returns the
// API calls dropped since the last drain. Caller serialises drains and calls
// api_reap() once done with `new_threads`.
uint64_t api_drain(std::vector<ApiCall>& out, std::vector<const BufferedThread*>& new_threads,
                   std::vector<uint32_t>& thread_of_call);
// Frees the threads that had exited by the last drain.
void api_reap();
// Forked child: forget everything recorded in the parent.
void api_reset_in_child();

}  // namespace rlscope::cuda
