#include "collector.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <thread>

#include "activity.h"
#include "api_trace.h"
#include "clock_offset.h"
#include "config.h"
#include "cuda_chunk.h"
#include "cupti_loader.h"
#include "host.h"
#include "log.h"
#include "pb_encode.h"
#include "trace_fields.h"
#include "trace_writer.h"

#ifndef RLSCOPE_VERSION
#define RLSCOPE_VERSION ""
#endif

namespace rlscope::cuda {

namespace {

enum class Phase { kIdle, kTracing, kStopped, kForkedAway };

// Leaked on purpose: used from atexit and CUPTI threads during exit.
struct State {
  std::mutex mu;  // serialises set-up, writes and stop
  Phase phase = Phase::kIdle;
  bool attempted = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  ClockOffset offset;
  TraceFile file;
  CudaChunkEncoder enc;
  // writer thread
  std::mutex cv_mu;
  std::condition_variable cv;
  bool stop_writer = false, wake = false;
  std::thread* writer = nullptr;
  // scratch (writer side, under mu)
  std::vector<ApiCall> calls;
  std::vector<uint32_t> call_thread;
  std::vector<const BufferedThread*> new_threads;
  ActivityBatch batch;
};
State* g = new State();

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

HeaderInfo make_header(const Cupti& c, const ClockOffset& off) {
  HeaderInfo h;
  h.source = "cuda";
  h.pid = getpid();
  h.ppid = getppid();
  h.host = host_label();
  h.process_name = read_file("/proc/self/comm");
  while (!h.process_name.empty() && h.process_name.back() == '\n') h.process_name.pop_back();
  std::string cmd = read_file("/proc/self/cmdline");
  for (size_t p = 0; p < cmd.size();) {
    size_t e = cmd.find('\0', p);
    if (e == std::string::npos) e = cmd.size();
    h.argv.emplace_back(cmd, p, e - p);
    p = e + 1;
  }
  h.clock = read_clock_pair();
  h.recorder = "cupti";
  h.rlscope_version = RLSCOPE_VERSION;
  // The CUDA-only Header fields: CUPTI offset, its error bound, version.
  pb::put_int(h.extra_fields, fields::header::kCuptiOffsetNs, off.offset_ns);
  pb::put_int(h.extra_fields, fields::header::kCuptiOffsetErrorNs, off.error_ns);
  pb::put_uint(h.extra_fields, fields::header::kCuptiVersion, c.version);
  return h;
}

int open_trace_file(TraceFile& f) {
  // A program with no Python process (no rlscope.start) may be first on this host.
  if (mkdir(config().output_dir.c_str(), 0777) != 0 && errno != EEXIST) return errno;
  std::string base = config().output_dir + "/cuda." + std::to_string(getpid());
  int err = f.open(base + ".rlscope");
  for (int n = 1; err == EEXIST && n < 1000; ++n) {
    err = f.open(base + "." + std::to_string(n) + ".rlscope");
  }
  return err;
}

// Drains API buffers and parsed activity into one chunk and writes it. mu held.
void write_pending_locked() {
  g->calls.clear();
  g->call_thread.clear();
  g->new_threads.clear();
  uint64_t dropped = api_drain(g->calls, g->new_threads, g->call_thread);
  for (const BufferedThread* t : g->new_threads) g->enc.add_thread(t->index, t->tid, t->name);
  api_reap();  // done with new_threads
  g->enc.add_api_calls(g->calls, g->call_thread);
  g->enc.add_dropped_api_calls(dropped);
  g->batch.clear();
  activity_collect(g->batch, g->offset.offset_ns);
  g->enc.add_activity(g->batch);
  if (!g->enc.empty()) {
    int err = g->file.write_all(g->enc.finish());
    if (err && g->file.error() == err) {
      static bool once = false;
      if (!once) {
        once = true;
        log_line("CUDA trace %s: write failed (%s); GPU records are being lost",
                 g->file.path().c_str(), std::strerror(err));
      }
    }
  }
}

void wake_writer() {
  {
    std::lock_guard<std::mutex> lk(g->cv_mu);
    g->wake = true;
  }
  g->cv.notify_one();
}

void writer_loop() {
  auto interval = std::chrono::duration<double>(config().flush_interval_s);
  for (;;) {
    bool stop;
    {
      std::unique_lock<std::mutex> lk(g->cv_mu);
      g->cv.wait_for(lk, interval, [] { return g->stop_writer || g->wake; });
      stop = g->stop_writer;
      g->wake = false;
    }
    if (stop) return;  // collector_stop does the final write
    // Periodic flush: hand over the buffers CUPTI has completed so far. What it completes
    // now is written below: a wake-up it caused is not a reason to flush again.
    CUPTI_CALL(cupti().ActivityFlushAll(0));
    {
      std::lock_guard<std::mutex> lk(g->cv_mu);
      g->wake = false;
    }
    std::lock_guard<std::mutex> lk(g->mu);
    if (g->phase == Phase::kTracing) write_pending_locked();
  }
}

void at_exit() { collector_stop(); }

void fork_prepare() { g->mu.lock(); }
void fork_parent() { g->mu.unlock(); }
void fork_child() {
  // Only this thread survives; CUDA cannot be used in a child forked from a
  // process that initialised it, and the parent owns the file and buffers.
  new (&g->mu) std::mutex();
  new (&g->cv_mu) std::mutex();
  new (&g->cv) std::condition_variable();
  if (g->phase == Phase::kTracing) {
    g->phase = Phase::kForkedAway;
    g->file.abandon();
    g->writer = nullptr;  // the thread does not exist here; leak its handle
  }
  api_reset_in_child();
  activity_reset_in_child();
}

std::string subscribe(const Cupti& c) {
  CUptiResult r;
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {0};
  if (c.Subscribe_v2) {
    CUpti_SubscriberParams p{};
    p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    p.subscriberName = "rlscope";
    p.oldSubscriberName = old_name;
    p.oldSubscriberSize = sizeof old_name;
    r = c.Subscribe_v2(&g->subscriber, api_callback, nullptr, &p);
  } else {
    r = c.Subscribe(&g->subscriber, api_callback, nullptr);
  }
  if (r == CUPTI_SUCCESS) return "";
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    std::string who = old_name[0] ? std::string(old_name)
                                  : "torch.profiler, Nsight Systems/Compute or cuda-gdb";
    return "another CUPTI client is active (" + who +
           "); only one tool can trace CUDA at a time (rls-prof --no-cuda leaves the GPU "
           "to it)";
  }
  return std::string("cuptiSubscribe failed: ") + cupti_error_name(r) +
         (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED
              ? " (no NVIDIA driver or GPU?)"
              : "");
}

// Enables both API domains minus the filter list (docs/cuda.md).
void enable_callbacks(const Cupti& c) {
  const struct {
    CUpti_CallbackDomain domain;
    uint32_t size;
  } domains[] = {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE},
                 {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE}};
  for (const auto& d : domains) {
    CUPTI_CALL(c.EnableDomain(1, g->subscriber, d.domain));
    for (uint32_t cbid = 1; cbid < d.size; ++cbid) {
      const char* name = nullptr;
      if (c.GetCallbackName(d.domain, cbid, &name) != CUPTI_SUCCESS || !name) continue;
      if (!is_filtered_name(strip_version_suffix(name))) continue;
      set_filtered(d.domain, cbid);
      CUPTI_CALL(c.EnableCallback(0, g->subscriber, d.domain, cbid));
    }
  }
}

void not_traced(const std::string& why) {
  log_line("GPU not traced in pid %d: %s", int(getpid()), why.c_str());
}

}  // namespace

bool collector_attempted() { return g->attempted; }

bool collector_start(const char* how) {
  std::lock_guard<std::mutex> lk(g->mu);
  if (g->attempted) return g->phase == Phase::kTracing;
  g->attempted = true;
  if (!config().enabled) return false;
  std::string err = load_cupti(config().cupti_library);
  if (!err.empty()) {
    not_traced(err);
    return false;
  }
  const Cupti& c = cupti();
  g->offset = measure_cupti_offset(c);
  if (g->offset.error_ns < 0) {
    not_traced("cuptiGetTimestamp failed, CUPTI times cannot be converted");
    return false;
  }
  if (!(err = subscribe(c)).empty()) {
    not_traced(err);
    return false;
  }
  if (config().activity && !(err = activity_start(config().activity_buffer_bytes)).empty()) {
    CUPTI_CALL(c.Unsubscribe(g->subscriber));
    not_traced(err);
    return false;
  }
  if (int e = open_trace_file(g->file)) {
    CUPTI_CALL(c.Unsubscribe(g->subscriber));
    not_traced(std::string("cannot create the trace file in ") + config().output_dir + ": " +
               std::strerror(e));
    return false;
  }
  g->file.write_all(encode_file_start(make_header(c, g->offset)));
  api_set_memory_limit(config().max_api_buffer_bytes);
  enable_callbacks(c);
  activity_set_notify(wake_writer);
  g->phase = Phase::kTracing;
  g_api_tracing.store(true, std::memory_order_release);
  g->stop_writer = false;
  g->writer = new std::thread(writer_loop);
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit(at_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
  }
  log_debug("tracing CUDA in pid %d (%s) with %s, CUPTI %u, clock offset error %lld ns",
            int(getpid()), how, c.path.c_str(), c.version, (long long)g->offset.error_ns);
  return true;
}

void collector_flush() {
  if (g->phase != Phase::kTracing) return;
  CUPTI_CALL(cupti().ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::lock_guard<std::mutex> lk(g->mu);
  if (g->phase == Phase::kTracing) write_pending_locked();
}

void collector_stop() {
  {
    std::lock_guard<std::mutex> lk(g->mu);
    if (g->phase != Phase::kTracing) return;
  }
  g_api_tracing.store(false, std::memory_order_release);
  if (config().device_sync_at_exit) {
    // Kernels still running would otherwise be missing from the trace.
    if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      using SyncFn = int (*)();
      if (auto sync = reinterpret_cast<SyncFn>(dlsym(cuda, "cuCtxSynchronize"))) sync();
      dlclose(cuda);
    }
  }
  CUPTI_CALL(cupti().ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  {
    std::lock_guard<std::mutex> lk(g->cv_mu);
    g->stop_writer = true;
  }
  g->cv.notify_one();
  if (g->writer) {
    g->writer->join();
    delete g->writer;
    g->writer = nullptr;
  }
  std::lock_guard<std::mutex> lk(g->mu);
  if (g->phase != Phase::kTracing) return;
  activity_set_notify(nullptr);
  write_pending_locked();
  g->file.close();
  g->phase = Phase::kStopped;
}

}  // namespace rlscope::cuda
