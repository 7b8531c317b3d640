// A fake libcupti.so.13 for tests without a GPU: built against the real CUPTI
// headers, it implements the calls librlscope_cuda makes and, on command
// (fake_* functions called by the test program), fires API callbacks and
// fills / completes activity buffers.
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

CUpti_CallbackFunc g_cb = nullptr;
void* g_userdata = nullptr;
bool g_domain_on[8] = {false};
std::set<std::pair<int, uint32_t>> g_disabled;
std::atomic<uint32_t> g_corr{0};

CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
std::set<int> g_activity_kinds;

struct Buf {
  uint8_t* p;
  size_t size, used;
};
std::mutex g_mu;           // buffers
std::mutex g_deliver_mu;   // serialises completions
std::vector<Buf> g_open;   // requested, not completed; back() is current
uint64_t g_dropped_pending = 0;
std::atomic<uint64_t> g_dropped_report{0};

// Injected costs (calibration tests): CPU time burnt per API call while a
// subscriber's callbacks are on (FAKE_CUPTI_CALLBACK_COST_NS, what CUPTI's
// dispatch would cost) and per activity record of an enabled kind
// (FAKE_CUPTI_RECORD_COST_NS). Burnt by spinning on CLOCK_MONOTONIC (vDSO, no
// system call) with PAUSE between reads: a burn is far shorter than a time
// slice, so its wall time is its CPU time unless preempted. Spinning on the
// thread CPU clock instead (a system call per read here) slowed the code
// around the burns and rlscope's other threads by far more: calibration then
// found records 40% dearer than the burn (tests/cuda/test_calibrate_cuda.py).
// Each burn's length is measured and fake_burn_mean() reports it.
uint64_t cost_ns(const char* var) {
  const char* v = getenv(var);
  return v ? strtoull(v, nullptr, 10) : 0;
}
const uint64_t g_callback_cost = cost_ns("FAKE_CUPTI_CALLBACK_COST_NS");
const uint64_t g_record_cost = cost_ns("FAKE_CUPTI_RECORD_COST_NS");
constexpr size_t kBurnSamples = 4096;
uint64_t g_burn_ns[2][kBurnSamples];
std::atomic<size_t> g_burns[2];

uint64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void burn(uint64_t ns, int which) {
  if (!ns) return;
  uint64_t w0 = clock_ns(CLOCK_MONOTONIC);
  uint64_t until = w0 + ns;
  while (clock_ns(CLOCK_MONOTONIC) < until) {
#if defined(__x86_64__) || defined(__i386__)
    for (int k = 0; k < 8; ++k) __builtin_ia32_pause();
#endif
  }
  size_t i = g_burns[which].fetch_add(1, std::memory_order_relaxed);
  if (i < kBurnSamples) g_burn_ns[which][i] = clock_ns(CLOCK_MONOTONIC) - w0;
}

struct Name {
  int domain;
  uint32_t cbid;
  const char* name;
};
const Name kNames[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel_v7000"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch_v10000"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent"},
};

size_t record_size(CUpti_ActivityKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
    default: return 0;
  }
}

inline size_t round8(size_t n) { return (n + 7) & ~size_t(7); }

// Under g_mu: a new current buffer from the client.
bool request_locked() {
  uint8_t* p = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&p, &size, &max_records);
  if (!p || size == 0) return false;
  g_open.push_back(Buf{p, size, 0});
  return true;
}

void deliver(std::vector<Buf> bufs, uint64_t dropped) {
  std::lock_guard<std::mutex> lk(g_deliver_mu);
  for (size_t i = 0; i < bufs.size(); ++i) {
    g_dropped_report.store(i == 0 ? dropped : 0);
    g_complete(nullptr, 0, bufs[i].p, bufs[i].size, bufs[i].used);
  }
  g_dropped_report.store(0);
}

// Appends one record of `kind`; a full buffer is completed and a new one
// requested (records split across buffers); no buffer -> dropped.
void append(const void* rec, CUpti_ActivityKind kind) {
  if (!g_activity_kinds.count(kind) || !g_request) return;
  burn(g_record_cost, 1);
  size_t n = round8(record_size(kind));
  std::vector<Buf> full;
  uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_open.empty() || g_open.back().size - g_open.back().used < n) {
      if (!g_open.empty()) {
        full.push_back(g_open.back());
        g_open.pop_back();
      }
      if (!request_locked() || g_open.back().size < n) {
        ++g_dropped_pending;
      }
    }
    if (!g_open.empty() && g_open.back().size - g_open.back().used >= n) {
      memcpy(g_open.back().p + g_open.back().used, rec, record_size(kind));
      g_open.back().used += n;
    }
    if (!full.empty()) {
      dropped = g_dropped_pending;
      g_dropped_pending = 0;
    }
  }
  if (!full.empty()) deliver(full, dropped);
}

uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

// ------------------------------------------------------------------ CUPTI API
EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  const char* v = getenv("FAKE_CUPTI_VERSION");
  *version = v ? uint32_t(atoi(v)) : CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_UNKNOWN: *str = "CUPTI_ERROR_UNKNOWN"; break;
    default: *str = "CUPTI_ERROR_(fake)"; break;
  }
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = realtime_ns();  // like CUPTI 13.0 without a driver
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                     void* userdata, CUpti_SubscriberParams* params) {
  if (const char* r = getenv("FAKE_CUPTI_SUBSCRIBE_RESULT")) {
    const char* old = getenv("FAKE_CUPTI_OLD_SUBSCRIBER");
    if (old && params && params->oldSubscriberName && params->oldSubscriberSize) {
      snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", old);
    }
    return CUptiResult(atoi(r));
  }
  if (g_cb) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_cb = callback;
  g_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_cb);
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                  void* userdata) {
  return cuptiSubscribe_v2(subscriber, callback, userdata, nullptr);
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  g_cb = nullptr;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain) {
  if (int(domain) < 0 || int(domain) >= 8) return CUPTI_ERROR_INVALID_PARAMETER;
  g_domain_on[domain] = enable != 0;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                       CUpti_CallbackId cbid) {
  if (enable) g_disabled.erase({int(domain), cbid});
  else g_disabled.insert({int(domain), cbid});
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  for (const Name& n : kNames) {
    if (n.domain == int(domain) && n.cbid == cbid) {
      *name = n.name;
      return CUPTI_SUCCESS;
    }
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (getenv("FAKE_CUPTI_ACTIVITY_FAIL")) return CUPTI_ERROR_UNKNOWN;
  g_activity_kinds.insert(kind);
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                  CUpti_BuffersCallbackCompleteFunc done) {
  g_request = req;
  g_complete = done;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  size_t pos = 0;
  if (*record) {
    pos = size_t(reinterpret_cast<uint8_t*>(*record) - buffer) + round8(record_size((*record)->kind));
  }
  if (pos + sizeof(CUpti_Activity) > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + pos);
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = g_dropped_report.load();
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  std::vector<Buf> bufs;
  uint64_t dropped;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    bufs.swap(g_open);
    dropped = g_dropped_pending;
    g_dropped_pending = 0;
  }
  if (g_complete && (!bufs.empty() || dropped)) {
    if (bufs.empty()) {
      // Report drops with an empty buffer, as CUPTI does when all were lost.
      uint8_t* p = nullptr;
      size_t size = 0, mr = 0;
      g_request(&p, &size, &mr);
      if (p) bufs.push_back(Buf{p, size, 0});
    }
    deliver(bufs, dropped);
  }
  return CUPTI_SUCCESS;
}

// ------------------------------------------------------------------ commands
// Emulates the driver's cuInit: loads CUDA_INJECTION64_PATH, calls
// InitializeInjection (once per process, like the driver).
EXPORT int fake_cuInit(void) {
  static bool done = false;
  if (done) return 0;
  done = true;
  const char* path = getenv("CUDA_INJECTION64_PATH");
  if (!path || !*path) return -1;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "fake_cuInit: %s\n", dlerror());
    return -2;
  }
  auto init = reinterpret_cast<int (*)(void)>(dlsym(h, "InitializeInjection"));
  return init ? init() : -3;
}

// One API call: ENTER callback, body(arg), EXIT callback. Returns its
// correlation id.
EXPORT uint32_t fake_api(int domain, uint32_t cbid, const char* name, void (*body)(void*), void* arg) {
  uint32_t corr = g_corr.fetch_add(1, std::memory_order_relaxed) + 1;
  CUpti_CallbackFunc cb = g_cb;
  bool on = cb && domain >= 0 && domain < 8 && g_domain_on[domain] &&
            (g_disabled.empty() || !g_disabled.count({domain, cbid}));
  CUpti_CallbackData d{};
  d.functionName = name;
  d.correlationId = corr;
  if (on) burn(g_callback_cost, 0);
  if (on) {
    d.callbackSite = CUPTI_API_ENTER;
    cb(g_userdata, CUpti_CallbackDomain(domain), cbid, &d);
  }
  if (body) body(arg);
  if (on) {
    d.callbackSite = CUPTI_API_EXIT;
    cb(g_userdata, CUpti_CallbackDomain(domain), cbid, &d);
  }
  return corr;
}

EXPORT void fake_kernel(uint32_t corr, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                        const char* name, const int32_t dims[6]) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = device;
  k.streamId = stream;
  k.correlationId = corr;
  k.name = strdup(name);  // CUPTI keeps names alive; so does the fake (leaked)
  k.gridX = dims[0]; k.gridY = dims[1]; k.gridZ = dims[2];
  k.blockX = dims[3]; k.blockY = dims[4]; k.blockZ = dims[5];
  append(&k, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
}

EXPORT void fake_memcpy(uint32_t corr, uint64_t start, uint64_t end, uint64_t bytes, uint8_t copy_kind,
                        uint32_t device, uint32_t stream) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = copy_kind;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.deviceId = device;
  m.streamId = stream;
  m.correlationId = corr;
  append(&m, CUPTI_ACTIVITY_KIND_MEMCPY);
}

EXPORT void fake_memset(uint32_t corr, uint64_t start, uint64_t end, uint64_t bytes, uint32_t device,
                        uint32_t stream) {
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.deviceId = device;
  m.streamId = stream;
  m.correlationId = corr;
  append(&m, CUPTI_ACTIVITY_KIND_MEMSET);
}

EXPORT void fake_external_correlation(uint32_t kind, uint64_t external_id, uint32_t corr) {
  CUpti_ActivityExternalCorrelation x{};
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  x.externalKind = CUpti_ExternalCorrelationKind(kind);
  x.externalId = external_id;
  x.correlationId = corr;
  append(&x, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
}

EXPORT void fake_overhead(uint32_t kind, uint32_t thread_id, uint64_t start, uint64_t end) {
  CUpti_ActivityOverhead3 o{};
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = CUpti_ActivityOverheadKind(kind);
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.processId = uint32_t(getpid());
  o.objectId.pt.threadId = thread_id;
  o.start = start;
  o.end = end;
  append(&o, CUPTI_ACTIVITY_KIND_OVERHEAD);
}

// Opens a new current buffer (the previous one stays open): lets a test
// complete buffers out of order.
EXPORT int fake_new_buffer(void) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_request || !request_locked()) return -1;
  return int(g_open.size()) - 1;
}

// Completes open buffer `index` (0 = oldest) now.
EXPORT void fake_complete(int index) {
  std::vector<Buf> b;
  uint64_t dropped;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (index < 0 || size_t(index) >= g_open.size()) return;
    b.push_back(g_open[size_t(index)]);
    g_open.erase(g_open.begin() + index);
    dropped = g_dropped_pending;
    g_dropped_pending = 0;
  }
  deliver(b, dropped);
}

// CUPTI lost n records (reported with the next completed buffer).
EXPORT void fake_drop(uint64_t n) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_dropped_pending += n;
}

// n kernel launches (API call + kernel record each, of kernel_ns on stream 1)
// without a ctypes call per launch: the calibration workload's loop.
EXPORT void fake_launch_loop(uint64_t n, uint64_t kernel_ns) {
  const int32_t dims[6] = {1, 1, 1, 32, 1, 1};
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t corr = fake_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                             "cudaLaunchKernel", nullptr, nullptr);
    uint64_t t = realtime_ns();
    fake_kernel(corr, t, t + kernel_ns, 0, 1, "loop_kernel", dims);
  }
}

// Mean length of the injected burns so far (0: callbacks, 1: records), ns,
// leaving out those over 3x the median (preempted: their extra length is not
// CPU time); 0 when there were none.
EXPORT uint64_t fake_burn_mean(int which) {
  if (which < 0 || which > 1) return 0;
  size_t n = std::min(g_burns[which].load(), kBurnSamples);
  if (!n) return 0;
  std::vector<uint64_t> v(g_burn_ns[which], g_burn_ns[which] + n);
  std::nth_element(v.begin(), v.begin() + long(n / 2), v.end());
  uint64_t limit = 3 * v[n / 2], sum = 0, k = 0;
  for (uint64_t x : v) {
    if (x <= limit) {
      sum += x;
      ++k;
    }
  }
  return k ? sum / k : 0;
}
