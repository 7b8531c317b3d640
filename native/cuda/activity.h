// GPU activity from the CUPTI activity API. CUPTI fills buffers we hand it
// (bufferRequested) and gives them back when full or flushed
// (bufferCompleted, on CUPTI's thread). Completed buffers are queued and
// parsed on the collector's writer thread, never on an application thread.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rlscope::cuda {

enum GpuKind : uint32_t { kKernel = 1, kMemcpy = 2, kMemset = 3 };

struct GpuRow {
  int64_t start_ns, end_ns;  // CLOCK_MONOTONIC
  uint32_t kind, device, stream;
  uint32_t correlation_id;
  uint64_t bytes;
  std::string name;  // kernels
  int32_t dims[6];   // kernels: grid xyz, block xyz
  uint32_t copy_kind;  // memcpy
};

struct ExtCorrelationRow {
  uint32_t kind;
  uint64_t external_id;
  uint32_t correlation_id;
};

struct OverheadRow {
  int64_t start_ns, end_ns;
  uint32_t kind;
  uint64_t object_id;
};

struct ActivityBatch {
  std::vector<GpuRow> gpu;
  std::vector<ExtCorrelationRow> ext;
  std::vector<OverheadRow> overhead;
  uint64_t dropped = 0;  // reported by CUPTI
  uint64_t invalid = 0;  // zero or inverted timestamps, skipped
  bool empty() const {
    return gpu.empty() && ext.empty() && overhead.empty() && dropped == 0 && invalid == 0;
  }
  void clear() { *this = ActivityBatch(); }
};

// Registers the buffer callbacks and enables the activity kinds. Returns ""
// or why GPU activity cannot be recorded.
std::string activity_start(size_t buffer_bytes);
// Parses every queued buffer into `out` (CUPTI time + offset -> monotonic).
void activity_collect(ActivityBatch& out, int64_t cupti_offset_ns);
// Number of completed buffers waiting to be parsed.
size_t activity_queued();
// Called from bufferCompleted to wake the writer.
void activity_set_notify(void (*notify)());
// Forked child: forget queued buffers (they belong to the parent).
void activity_reset_in_child();

}  // namespace rlscope::cuda
