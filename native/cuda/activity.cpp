#include "activity.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>

#include "cupti_loader.h"
#include "log.h"

namespace rlscope::cuda {

namespace {

struct Completed {
  uint8_t* buffer;
  size_t valid;
  uint64_t dropped;
};

// Leaked on purpose (CUPTI may call back during exit).
struct Queue {
  std::mutex mu;
  std::deque<Completed> completed;
  std::vector<uint8_t*> free_buffers;  // reused: steady state allocates nothing
  size_t buffer_bytes = 8u << 20;
  void (*notify)() = nullptr;
};
Queue* g_q = new Queue();

constexpr size_t kAlign = 8;  // CUPTI requires 8-byte aligned buffers

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  uint8_t* b = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_q->mu);
    if (!g_q->free_buffers.empty()) {
      b = g_q->free_buffers.back();
      g_q->free_buffers.pop_back();
    }
  }
  if (!b) b = static_cast<uint8_t*>(std::aligned_alloc(kAlign, g_q->buffer_bytes));
  *buffer = b;
  *size = b ? g_q->buffer_bytes : 0;  // size 0: CUPTI drops records (counted)
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  size_t dropped = 0;
  if (cupti().ActivityGetNumDroppedRecords) {
    CUPTI_CALL(cupti().ActivityGetNumDroppedRecords(ctx, stream, &dropped));
  }
  void (*notify)() = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_q->mu);
    g_q->completed.push_back(Completed{buffer, valid, dropped});
    // Wake the writer early only for a buffer CUPTI filled. The writer's own periodic
    // flush completes partly filled ones: waking it for those made it flush again at
    // once, a loop that on a real GPU flushed ~1,000 times a second (docs/cuda.md).
    if (valid >= g_q->buffer_bytes / 2) notify = g_q->notify;
  }
  if (notify) notify();
}

// CUPTI time -> CLOCK_MONOTONIC; false for the zero-timestamp bug or end < start.
inline bool convert(uint64_t start, uint64_t end, int64_t offset, int64_t* s, int64_t* e) {
  if (start == 0 || end == 0 || end < start) return false;
  *s = int64_t(start) + offset;
  *e = int64_t(end) + offset;
  return true;
}

void parse(const Completed& c, ActivityBatch& out, int64_t offset) {
  out.dropped += c.dropped;
  CUpti_Activity* rec = nullptr;
  while (cupti().ActivityGetNextRecord(c.buffer, c.valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        GpuRow r{};
        if (!convert(k->start, k->end, offset, &r.start_ns, &r.end_ns)) {
          ++out.invalid;
          break;
        }
        r.kind = kKernel;
        r.device = k->deviceId;
        r.stream = k->streamId;
        r.correlation_id = k->correlationId;
        r.name = k->name ? k->name : "";
        int32_t dims[6] = {k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ};
        std::memcpy(r.dims, dims, sizeof dims);
        out.gpu.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        GpuRow r{};
        if (!convert(m->start, m->end, offset, &r.start_ns, &r.end_ns)) {
          ++out.invalid;
          break;
        }
        r.kind = kMemcpy;
        r.device = m->deviceId;
        r.stream = m->streamId;
        r.correlation_id = m->correlationId;
        r.bytes = m->bytes;
        r.copy_kind = m->copyKind;
        out.gpu.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        GpuRow r{};
        if (!convert(m->start, m->end, offset, &r.start_ns, &r.end_ns)) {
          ++out.invalid;
          break;
        }
        r.kind = kMemset;
        r.device = m->deviceId;
        r.stream = m->streamId;
        r.correlation_id = m->correlationId;
        r.bytes = m->bytes;
        out.gpu.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
        out.ext.push_back(ExtCorrelationRow{uint32_t(x->externalKind), x->externalId,
                                            x->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(rec);
        OverheadRow r{};
        if (!convert(o->start, o->end, offset, &r.start_ns, &r.end_ns)) {
          ++out.invalid;
          break;
        }
        r.kind = uint32_t(o->overheadKind);
        r.object_id = o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
                              o->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS
                          ? uint64_t(o->objectId.pt.threadId)
                          : uint64_t(o->objectId.dcs.deviceId);
        out.overhead.push_back(r);
        break;
      }
      default:
        break;  // kinds we did not enable
    }
  }
}

}  // namespace

std::string activity_start(size_t buffer_bytes) {
  g_q->buffer_bytes = (buffer_bytes + kAlign - 1) & ~(kAlign - 1);
  const Cupti& c = cupti();
  CUptiResult r = c.ActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    return std::string("cuptiActivityRegisterCallbacks failed: ") + cupti_error_name(r);
  }
  // CONCURRENT_KERNEL, not KERNEL: KERNEL serialises kernel execution.
  const CUpti_ActivityKind kinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
      CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
      CUPTI_ACTIVITY_KIND_OVERHEAD};
  r = c.ActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    return std::string("cuptiActivityEnable(CONCURRENT_KERNEL) failed: ") + cupti_error_name(r);
  }
  for (size_t i = 1; i < sizeof kinds / sizeof kinds[0]; ++i) CUPTI_CALL(c.ActivityEnable(kinds[i]));
  return "";
}

void activity_collect(ActivityBatch& out, int64_t offset) {
  std::deque<Completed> todo;
  {
    std::lock_guard<std::mutex> lk(g_q->mu);
    todo.swap(g_q->completed);
  }
  for (const Completed& c : todo) {
    if (c.buffer) parse(c, out, offset);
  }
  std::lock_guard<std::mutex> lk(g_q->mu);
  for (const Completed& c : todo) {
    if (c.buffer) g_q->free_buffers.push_back(c.buffer);
  }
}

size_t activity_queued() {
  std::lock_guard<std::mutex> lk(g_q->mu);
  return g_q->completed.size();
}

void activity_set_notify(void (*notify)()) {
  std::lock_guard<std::mutex> lk(g_q->mu);
  g_q->notify = notify;
}

void activity_reset_in_child() {
  new (&g_q->mu) std::mutex();
  g_q->completed.clear();
  g_q->notify = nullptr;
}

}  // namespace rlscope::cuda
