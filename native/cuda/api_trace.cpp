#include "api_trace.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <string_view>

#include "clock.h"
#include "config.h"

namespace rlscope::cuda {

std::atomic<bool> g_api_tracing{false};

namespace {

// Largest cbid + 1 of both domains in CUDA 13.0 is < 1024; ids beyond that
// (a newer libcupti) are never filtered.
constexpr uint32_t kFilterBits = 2048;
uint64_t g_filter[2][kFilterBits / 64];  // [0] runtime, [1] driver; written before tracing starts

__thread ApiThread* tls_api __attribute__((tls_model("initial-exec"))) = nullptr;

// Leaked on purpose: callbacks may run during exit, after static destructors.
struct Registry {
  BlockPool pool;
  std::mutex mu;
  std::vector<ApiThread*> threads;
  uint32_t next_index = 1;
  pthread_key_t key;
};
Registry* g_reg = [] {
  auto* r = new Registry();
  // The key's destructor marks the thread finished; the writer frees it.
  pthread_key_create(&r->key, [](void* p) {
    // A later callback on this exiting thread registers afresh.
    tls_api = nullptr;
    static_cast<ApiThread*>(p)->finished.store(true, std::memory_order_release);
  });
  return r;
}();

inline bool filtered(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  uint32_t d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : 0;
  return cbid < kFilterBits && (g_filter[d][cbid >> 6] >> (cbid & 63) & 1);
}

ApiThread* register_thread() {
  auto* t = new (std::nothrow) ApiThread(&g_reg->pool);
  if (!t) return nullptr;
  t->tid = int64_t(syscall(SYS_gettid));
  char name[64] = {0};
  if (pthread_getname_np(pthread_self(), name, sizeof name) == 0) t->name = name;
  {
    std::lock_guard<std::mutex> lk(g_reg->mu);
    t->index = g_reg->next_index++;
    g_reg->threads.push_back(t);
  }
  pthread_setspecific(g_reg->key, t);
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

bool is_filtered_name(const std::string& name) {
  // Trivial queries that frameworks call thousands of times per step; they
  // would dominate the table and the overhead without telling anything.
  static const char* const kFiltered[] = {
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
  };
  for (const char* f : kFiltered) {
    if (name == f) return true;
  }
  return false;
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

void api_set_memory_limit(uint64_t bytes) { g_reg->pool.set_limit_bytes(bytes); }

uint64_t api_drain(std::vector<ApiCall>& out, std::vector<const ApiThread*>& new_threads,
                   std::vector<uint32_t>& thread_of_call) {
  std::vector<ApiThread*> threads;
  {
    std::lock_guard<std::mutex> lk(g_reg->mu);
    threads = g_reg->threads;
  }
  uint64_t dropped = 0;
  std::vector<Record> recs;
  std::vector<ApiThread*> done;
  for (ApiThread* t : threads) {
    bool finished = t->finished.load(std::memory_order_acquire);
    recs.clear();
    t->buf.drain_into(recs);
    uint64_t d = t->buf.dropped();
    dropped += d - t->dropped_reported;
    t->dropped_reported = d;
    if (!recs.empty() && !t->defined) {
      t->defined = true;
      new_threads.push_back(t);
    }
    // Records come in (call, arg) pairs published together.
    for (size_t i = 0; i + 1 < recs.size(); i += 2) {
      out.push_back(ApiCall{recs[i].ts, recs[i + 1].ts, recs[i].name, recs[i].kind,
                            recs[i + 1].name});
      thread_of_call.push_back(t->index);
    }
    if (finished) done.push_back(t);
  }
  if (!done.empty()) {
    // new_threads may still point at them: the caller finishes with them
    // before the next drain, so free only ones defined in an earlier drain.
    std::lock_guard<std::mutex> lk(g_reg->mu);
    auto& v = g_reg->threads;
    for (ApiThread* t : done) {
      bool just_defined = false;
      for (const ApiThread* n : new_threads) just_defined |= (n == t);
      if (just_defined) continue;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == t) {
          v.erase(v.begin() + long(i));
          delete t;
          break;
        }
      }
    }
  }
  return dropped;
}

void api_reset_in_child() {
  // Only the forking thread exists; its parent-side records belong to the
  // parent's file. Forget every thread (leaking their blocks is fine).
  g_api_tracing.store(false, std::memory_order_relaxed);
  new (&g_reg->mu) std::mutex();
  g_reg->pool.reinit_after_fork();
  g_reg->threads.clear();
  if (tls_api) {
    pthread_setspecific(g_reg->key, nullptr);
    tls_api = nullptr;
  }
}

}  // namespace rlscope::cuda
