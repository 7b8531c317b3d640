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
#include <mutex>
#include <string>
#include <vector>

#include "thread_buffer.h"

namespace rlscope::cuda {

constexpr uint32_t kMaxNesting = 32;

// One API call as the writer thread reads it back.
struct ApiCall {
  int64_t start_ns, end_ns;  // CLOCK_MONOTONIC
  uint32_t cbid, domain, correlation_id;
};

struct ApiThread {
  explicit ApiThread(BlockPool* pool) : buf(pool) {}
  ThreadBuffer buf;
  // Owning thread only.
  uint32_t depth = 0;
  int64_t start_ns[kMaxNesting];
  // Set at registration.
  uint32_t index = 0;
  int64_t tid = 0;
  std::string name;
  std::atomic<bool> finished{false};
  // Writer side.
  bool defined = false;
  uint64_t dropped_reported = 0;
};

// True while API calls are recorded (flipped off at exit and in forked children).
extern std::atomic<bool> g_api_tracing;

// The CUPTI subscriber callback.
void CUPTIAPI api_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* cbdata);

// Filter list of noisy trivial calls (docs/cuda.md): matched by name without
// the "_vNNNN" suffix. Returns whether `name` is filtered.
bool is_filtered_name(const std::string& name);
// Marks (domain, cbid) filtered for the callback's own check.
void set_filtered(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel".
std::string strip_version_suffix(const char* name);

// Registry, used by the writer.
void api_set_memory_limit(uint64_t bytes);
// Drains all threads; calls `thread_def(t)` for threads not yet defined, then
// appends their calls (grouped by thread) to `out`. Returns API calls dropped
// since the last call. Frees finished threads. Caller serialises drains.
uint64_t api_drain(std::vector<ApiCall>& out, std::vector<const ApiThread*>& new_threads,
                   std::vector<uint32_t>& thread_of_call);
// Forked child: forget everything recorded in the parent.
void api_reset_in_child();

}  // namespace rlscope::cuda
