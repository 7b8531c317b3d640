// Test program for the fake libcupti: plays the role of a CUDA application
// (API calls, kernels, copies) and prints what it did as one JSON line, which
// the pytest compares with the trace librlscope_cuda wrote.
//   cuda_app basic | threads N | fork | fork_before_init | many N | bench N | graph
#include <cupti.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" {
int fake_cuInit(void);
uint32_t fake_api(int domain, uint32_t cbid, const char* name, void (*body)(void*), void* arg);
void fake_kernel(uint32_t corr, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                 const char* name, const int32_t dims[6]);
void fake_memcpy(uint32_t corr, uint64_t start, uint64_t end, uint64_t bytes, uint8_t copy_kind,
                 uint32_t device, uint32_t stream);
void fake_memset(uint32_t corr, uint64_t start, uint64_t end, uint64_t bytes, uint32_t device,
                 uint32_t stream);
void fake_external_correlation(uint32_t kind, uint64_t external_id, uint32_t corr);
void fake_overhead(uint32_t kind, uint32_t thread_id, uint64_t start, uint64_t end);
int fake_new_buffer(void);
void fake_complete(int index);
void fake_drop(uint64_t n);
}

namespace {

constexpr int RT = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr int DRV = CUPTI_CB_DOMAIN_DRIVER_API;

int64_t mono() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// A CUPTI timestamp and the monotonic time it corresponds to (midpoint).
// The tightest of several tries; `window` is its width (the error bound).
void cupti_now(uint64_t* cupti, int64_t* mono_mid, int64_t* window) {
  *window = INT64_MAX;
  for (int i = 0; i < 20; ++i) {
    uint64_t c;
    int64_t m0 = mono();
    cuptiGetTimestamp(&c);
    int64_t m1 = mono();
    if (m1 - m0 < *window) {
      *window = m1 - m0;
      *cupti = c;
      *mono_mid = m0 + (m1 - m0) / 2;
    }
  }
}

long tid() { return syscall(SYS_gettid); }

uint32_t launch() {
  return fake_api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel", nullptr,
                  nullptr);
}

void nested_alloc(void*) {
  fake_api(DRV, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", nullptr, nullptr);
}

int basic() {
  fake_cuInit();
  uint64_t t0;
  int64_t m0, w0;
  cupti_now(&t0, &m0, &w0);
  const int32_t dims_a[6] = {2, 3, 4, 32, 1, 1};
  const int32_t dims_b[6] = {1, 1, 1, 128, 2, 1};
  uint32_t c_launch = launch();
  fake_kernel(c_launch, t0 + 1000, t0 + 5000, 0, 7, "kern_a", dims_a);
  uint32_t c_memcpy = fake_api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy", nullptr, nullptr);
  fake_memcpy(c_memcpy, t0 + 6000, t0 + 7000, 4096, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0, 7);
  uint32_t c_memset = fake_api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync", nullptr, nullptr);
  fake_memset(c_memset, t0 + 8000, t0 + 8500, 256, 1, 3);
  // Filtered (trivial) calls: not in the trace.
  fake_api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice", nullptr, nullptr);
  fake_api(DRV, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent", nullptr, nullptr);
  // A runtime call with a nested driver call: only the runtime call is recorded.
  uint32_t c_malloc = fake_api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc", nested_alloc, nullptr);
  // A top-level driver call (as Triton/JAX make) whose kernel lands in a second
  // buffer that completes before the first (out-of-order completion).
  uint32_t c_drv = fake_api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", nullptr, nullptr);
  fake_new_buffer();
  fake_kernel(c_drv, t0 + 9000, t0 + 12000, 1, 9, "kern_b", dims_b);
  fake_external_correlation(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42, c_launch);
  fake_overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, uint32_t(tid()), t0 + 100, t0 + 300);
  // The zero-timestamp bug: skipped and counted.
  fake_kernel(c_drv, 0, 0, 1, 9, "kern_zero", dims_b);
  fake_drop(3);
  fake_complete(1);
  fake_complete(0);
  uint32_t c_sync = fake_api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize", nullptr, nullptr);
  printf("{\"pid\": %d, \"tid\": %ld, \"t0_mono\": %lld, \"launch\": %u, \"memcpy\": %u, "
         "\"memset\": %u, \"malloc\": %u, \"drv\": %u, \"sync\": %u, \"end_mono\": %lld, "
         "\"window\": %lld}\n",
         int(getpid()), tid(), (long long)m0, c_launch, c_memcpy, c_memset, c_malloc, c_drv, c_sync,
         (long long)mono(), (long long)w0);
  return 0;  // exit flushes the rest
}

int threads(int n_threads, int calls) {
  fake_cuInit();
  std::vector<long> tids(size_t(n_threads), 0);
  std::vector<std::thread> ts;
  for (int i = 0; i < n_threads; ++i) {
    ts.emplace_back([i, calls, &tids] {
      tids[size_t(i)] = tid();
      for (int k = 0; k < calls; ++k) launch();
    });
  }
  for (auto& t : ts) t.join();
  printf("{\"pid\": %d, \"tids\": [", int(getpid()));
  for (int i = 0; i < n_threads; ++i) printf("%s%ld", i ? ", " : "", tids[size_t(i)]);
  printf("]}\n");
  return 0;
}

int many(int n) {
  // With a small RLSCOPE_CUDA_BUFFER_BYTES the records span many buffers.
  fake_cuInit();
  uint64_t t0;
  int64_t m0, w0;
  cupti_now(&t0, &m0, &w0);
  const int32_t dims[6] = {1, 1, 1, 1, 1, 1};
  for (int i = 0; i < n; ++i) {
    uint32_t c = launch();
    fake_kernel(c, t0 + uint64_t(i) * 10 + 1, t0 + uint64_t(i) * 10 + 6, 0, 1, "k", dims);
  }
  printf("{\"pid\": %d, \"n\": %d}\n", int(getpid()), n);
  return 0;
}

int fork_after_init() {
  fake_cuInit();
  uint32_t a = launch();
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    // CUDA is unusable in a child forked after cuInit; the collector must stay
    // out of the way (no file, no crash) even when callbacks still fire.
    launch();
    fake_cuInit();
    launch();
    exit(0);  // runs atexit handlers
  }
  int status = 0;
  waitpid(child, &status, 0);
  uint32_t b = launch();
  printf("{\"pid\": %d, \"child\": %d, \"child_status\": %d, \"a\": %u, \"b\": %u}\n", int(getpid()),
         int(child), status, a, b);
  return 0;
}

int fork_before_init() {
  fflush(stdout);
  pid_t child = fork();
  fake_cuInit();
  uint32_t c = launch();
  if (child == 0) {
    printf("{\"pid\": %d, \"corr\": %u}\n", int(getpid()), c);
    exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  printf("{\"pid\": %d, \"corr\": %u, \"child\": %d}\n", int(getpid()), c, int(child));
  return 0;
}

// A CUDA graph launched on device 0 (its kernels run on two streams and carry the
// graph launch's correlation id: there are no per-node launch calls), while a second
// thread works on device 1, streams 3 and 4.
int graph() {
  fake_cuInit();
  uint64_t t0;
  int64_t m0, w0;
  cupti_now(&t0, &m0, &w0);
  const int32_t dims[6] = {4, 1, 1, 64, 1, 1};
  uint32_t g = fake_api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch",
                        nullptr, nullptr);
  fake_kernel(g, t0 + 1000, t0 + 3000, 0, 7, "graph_node_a", dims);
  fake_kernel(g, t0 + 1500, t0 + 2500, 0, 8, "graph_node_b", dims);  // concurrent, stream 8
  fake_kernel(g, t0 + 3000, t0 + 4000, 0, 7, "graph_node_c", dims);
  uint32_t other[3] = {0, 0, 0};
  long other_tid = 0;
  std::thread t([&] {
    other_tid = tid();
    other[0] = launch();
    fake_kernel(other[0], t0 + 2000, t0 + 6000, 1, 3, "dev1_kernel", dims);
    other[1] = launch();
    fake_kernel(other[1], t0 + 2500, t0 + 3500, 1, 4, "dev1_kernel2", dims);
    other[2] = fake_api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy", nullptr, nullptr);
    fake_memcpy(other[2], t0 + 6000, t0 + 7000, 1 << 16, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 1, 4);
  });
  t.join();
  printf("{\"pid\": %d, \"tid\": %ld, \"other_tid\": %ld, \"graph\": %u, \"k1\": %u, "
         "\"k2\": %u, \"copy\": %u}\n",
         int(getpid()), tid(), other_tid, g, other[0], other[1], other[2]);
  return 0;
}

int bench(long n) {
  fake_cuInit();
  for (long i = 0; i < 10000; ++i) launch();  // warm-up (thread registration, blocks)
  int64_t best = INT64_MAX;
  for (int rep = 0; rep < 7; ++rep) {
    int64_t t0 = mono();
    for (long i = 0; i < n; ++i) launch();
    int64_t dt = mono() - t0;
    if (dt < best) best = dt;
  }
  printf("{\"ns_per_call\": %.2f}\n", double(best) / double(n));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "basic";
  long arg = argc > 2 ? atol(argv[2]) : 0;
  if (mode == "basic") return basic();
  if (mode == "threads") return threads(int(arg ? arg : 4), 100);
  if (mode == "many") return many(int(arg ? arg : 1000));
  if (mode == "fork") return fork_after_init();
  if (mode == "fork_before_init") return fork_before_init();
  if (mode == "bench") return bench(arg ? arg : 200000);
  if (mode == "graph") return graph();
  fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
