// Entry points. librlscope_cuda is LD_PRELOADed into every process rls-prof
// starts (shells, compilers, workers...) and named by CUDA_INJECTION64_PATH,
// so the load-time constructor only reads the environment; CUPTI is set up
// when the CUDA driver calls InitializeInjection() at cuInit, or on demand.
#include <link.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "collector.h"
#include "config.h"
#include "log.h"

#define RLSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// Which CUDA libraries are mapped, by name only (no CUDA call).
void cuda_libraries_loaded(bool* runtime, bool* driver) {
  struct Found {
    bool runtime = false, driver = false;
  } found;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* p) -> int {
        auto* f = static_cast<Found*>(p);
        const char* name = info->dlpi_name;
        const char* base = name ? std::strrchr(name, '/') : nullptr;
        base = base ? base + 1 : name;
        if (!base) return 0;
        if (std::strncmp(base, "libcudart.so", 12) == 0) f->runtime = true;
        if (std::strncmp(base, "libcuda.so", 10) == 0) f->driver = true;
        return 0;
      },
      &found);
  *runtime = found.runtime;
  *driver = found.driver;
}

__attribute__((constructor)) void on_load() { rlscope::cuda::set_config(rlscope::cuda::read_config()); }

// A process that loaded CUDA but never initialised it through us gets one line
// saying why its GPU work is not in the trace -- only when the machine has no
// NVIDIA kernel driver: with one, such a process simply never used CUDA (e.g.
// `import torch` loads libcudart in every worker).
__attribute__((destructor)) void on_unload() {
  using namespace rlscope::cuda;
  if (!config().enabled || collector_attempted()) return;
  bool runtime = false, driver = false;
  cuda_libraries_loaded(&runtime, &driver);
  if (!runtime && !driver) return;
  if (access("/proc/driver/nvidia/version", F_OK) == 0) return;
  log_line("GPU not traced in pid %d: the CUDA %s is loaded but there is no NVIDIA driver "
           "(/proc/driver/nvidia is missing)", int(getpid()), runtime ? "runtime" : "driver library");
}

}  // namespace

// Called by the CUDA driver during cuInit for the library named by
// CUDA_INJECTION64_PATH. Returns 1 (success) even when tracing is off, so the
// workload's CUDA initialisation is never affected.
RLSCOPE_EXPORT int InitializeInjection(void) {
  rlscope::cuda::collector_start("CUDA_INJECTION64_PATH");
  return 1;
}

// On demand (e.g. from Python once CUDA is already initialised): re-reads the
// environment, then sets up CUPTI. Returns 0 when recording, -1 otherwise.
RLSCOPE_EXPORT int rlscope_cuda_start(void) {
  if (!rlscope::cuda::collector_attempted()) {
    rlscope::cuda::set_config(rlscope::cuda::read_config());
  }
  return rlscope::cuda::collector_start("rlscope_cuda_start") ? 0 : -1;
}

RLSCOPE_EXPORT void rlscope_cuda_flush(void) { rlscope::cuda::collector_flush(); }

RLSCOPE_EXPORT void rlscope_cuda_stop(void) { rlscope::cuda::collector_stop(); }
