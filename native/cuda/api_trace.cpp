#include "api_trace.h"

#include <algorithm>
#include <cstddef>
#include <new>

#include "clock.h"
#include "config.h"

namespace rlscope::cuda {

std::atomic<bool> g_api_tracing{false};

namespace {

// Largest cbid + 1 of both domains in CUDA 13.0 is < 1024; ids beyond that
// (a newer libcupti) are never filtered.
constexpr uint32_t kFilterBits = 2048;
uint64_t g_filter[2][kFilterBits / 64];  // [0] runtime, [1] driver; written before tracing starts

struct ApiThread;
__thread ApiThread* tls_api __attribute__((tls_model("initial-exec"))) = nullptr;

// The registry's per-thread state plus the open calls' start times.
struct ApiThread : BufferedThread {
  explicit ApiThread(BlockPool* pool) : BufferedThread(pool) {}
  void on_thread_exit() override { tls_api = nullptr; }
  // Owning thread only.
  uint32_t depth = 0;
  int64_t start_ns[kMaxNesting];
};

// Leaked on purpose: callbacks may run during exit, after static destructors.
// Thread indices start at 1.
ThreadRegistry* g_reg = new ThreadRegistry(1);

inline bool filtered(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  uint32_t d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : 0;
  return cbid < kFilterBits && (g_filter[d][cbid >> 6] >> (cbid & 63) & 1);
}

ApiThread* register_thread() {
  auto* t = new (std::nothrow) ApiThread(&g_reg->pool());
  if (!t) return nullptr;
  t->name = os_thread_name();
  g_reg->add(t);
  tls_api = t;
  return t;
}

}  // namespace

std::string strip_version_suffix(const char* name) {
  std::string s = name ? name : "";
  size_t v = s.rfind("_v");
  if (v != std::string::npos && v + 2 < s.size() &&
      s.find_first_not_of("0123456789", v + 2) == std::string::npos) {
    s.resize(v);
  }
  return s;
}

const std::vector<std::string>& filtered_call_names() {
  // Trivial queries that frameworks call thousands of times per step; they
  // would dominate the table and the overhead without telling anything.
  static const std::vector<std::string> kFiltered = {
      // runtime
      "cudaGetDevice", "cudaSetDevice", "cudaGetLastError", "cudaPeekAtLastError",
      "cudaGetDeviceCount", "cudaDeviceGetAttribute", "cudaDriverGetVersion",
      "cudaRuntimeGetVersion", "cudaStreamIsCapturing", "cudaStreamGetCaptureInfo",
      "cudaThreadExchangeStreamCaptureMode", "cudaGetDeviceProperties", "cudaPointerGetAttributes",
      "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion", "cudaGetExportTable",
      "cudaFuncGetAttributes", "cudaGetFuncBySymbol", "cudaGetSymbolAddress",
      // driver
      "cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxGetDevice", "cuCtxGetId", "cuDeviceGet",
      "cuDeviceGetAttribute", "cuDeviceGetCount", "cuDevicePrimaryCtxGetState",
      "cuDriverGetVersion", "cuGetProcAddress", "cuGetExportTable", "cuStreamIsCapturing",
      "cuStreamGetCaptureInfo", "cuThreadExchangeStreamCaptureMode", "cuPointerGetAttribute",
      "cuPointerGetAttributes", "cuFuncGetAttribute", "cuCtxGetStreamPriorityRange",
      "cuGetErrorString", "cuGetErrorName", "cuKernelGetFunction", "cuLibraryGetKernel",
      // Seen on an H100 with PyTorch 2.11: one top-level cuKernelGetName per
      // cudaLaunchKernel, a third of all recorded calls.
      "cuKernelGetName", "cuFuncGetName",
  };
  return kFiltered;
}

bool is_filtered_name(const std::string& name) {
  const auto& names = filtered_call_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

void set_filtered(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (cbid >= kFilterBits) return;
  uint32_t d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : 0;
  g_filter[d][cbid >> 6] |= uint64_t(1) << (cbid & 63);
}

void CUPTIAPI api_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* cbdata) {
  if (__builtin_expect(!g_api_tracing.load(std::memory_order_relaxed), 0)) return;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (filtered(domain, cbid)) return;
  ApiThread* t = tls_api;
  if (__builtin_expect(t == nullptr, 0)) {
    if (!(t = register_thread())) return;
  }
  const auto* cb = static_cast<const CUpti_CallbackData*>(cbdata);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    uint32_t d = t->depth++;
    if (d < kMaxNesting) t->start_ns[d] = monotonic_ns();
    return;
  }
  if (__builtin_expect(t->depth == 0, 0)) return;  // ENTER happened before tracing began
  uint32_t d = --t->depth;
  // A driver call made inside a runtime call is part of that call's time.
  if (d != 0 && !config().record_nested) return;
  if (d >= kMaxNesting) return;
  Record r[2];
  r[0].ts = t->start_ns[d];
  r[0].name = cbid;
  r[0].kind = uint32_t(domain);
  r[1].ts = monotonic_ns();
  r[1].name = cb->correlationId;
  r[1].kind = kArgKind;
  t->buf.append_n(r, 2);
}

void api_set_memory_limit(uint64_t bytes) { g_reg->pool().set_limit_bytes(bytes); }

uint64_t api_drain(std::vector<ApiCall>& out, std::vector<const BufferedThread*>& new_threads,
                   std::vector<uint32_t>& thread_of_call) {
  return g_reg->drain([&](BufferedThread& t, const std::vector<Record>& recs) {
    if (!t.defined) {
      t.defined = true;
      new_threads.push_back(&t);
    }
    // Records come in (call, arg) pairs published together.
    size_t first = out.size();
    for (size_t i = 0; i + 1 < recs.size(); i += 2) {
      out.push_back(ApiCall{recs[i].ts, recs[i + 1].ts, recs[i].name, recs[i].kind,
                            recs[i + 1].name});
      thread_of_call.push_back(t.index);
    }
    // A call is appended at its EXIT, so nested calls (RLSCOPE_CUDA_NESTED)
    // come inner first: order this thread's calls by start. Only this thread's
    // range is sorted, so thread_of_call stays in step.
    auto by_start = [](const ApiCall& a, const ApiCall& b) { return a.start_ns < b.start_ns; };
    auto begin = out.begin() + std::ptrdiff_t(first);
    if (!std::is_sorted(begin, out.end(), by_start)) std::stable_sort(begin, out.end(), by_start);
  });
}

void api_reap() { g_reg->reap(); }

void api_reset_in_child() {
  // Only the forking thread exists; its parent-side records belong to the
  // parent's file. Forget every thread, this one included.
  g_api_tracing.store(false, std::memory_order_relaxed);
  g_reg->reset_in_child(nullptr);
  tls_api = nullptr;
}

}  // namespace rlscope::cuda
