#include "config.h"

#include <cstdlib>
#include <cstring>

namespace rlscope::cuda {

namespace {

Config g_config;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool env_flag(const char* name, bool dflt) {
  const char* v = env(name);
  if (!v) return dflt;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 ||
           std::strcmp(v, "off") == 0 || std::strcmp(v, "no") == 0);
}

}  // namespace

Config read_config() {
  Config c;
  if (const char* d = env("RLSCOPE_OUTPUT_DIR")) c.output_dir = d;
  c.enabled = !c.output_dir.empty() && env_flag("RLSCOPE_CUDA", true);
  if (const char* v = env("RLSCOPE_FLUSH_INTERVAL_S")) {
    double s = std::strtod(v, nullptr);
    if (s >= 0.01 && s <= 3600) c.flush_interval_s = s;
  }
  if (const char* v = env("RLSCOPE_CUDA_BUFFER_BYTES")) {
    unsigned long long b = std::strtoull(v, nullptr, 10);
    if (b >= 1024 && b <= (1ull << 30)) c.activity_buffer_bytes = size_t(b) & ~size_t(7);
  }
  if (const char* v = env("RLSCOPE_MAX_BUFFER_BYTES")) {
    unsigned long long b = std::strtoull(v, nullptr, 10);
    if (b > 0) c.max_api_buffer_bytes = b;
  }
  c.record_nested = env_flag("RLSCOPE_CUDA_NESTED", false);
  c.verbose = env_flag("RLSCOPE_CUDA_VERBOSE", false);
  c.device_sync_at_exit = env_flag("RLSCOPE_CUDA_SYNC_AT_EXIT", true);
  c.activity = env_flag("RLSCOPE_CUDA_ACTIVITY", true);
  if (const char* v = env("RLSCOPE_CUPTI_LIBRARY")) c.cupti_library = v;
  return c;
}

const Config& config() { return g_config; }
void set_config(const Config& c) { g_config = c; }

}  // namespace rlscope::cuda
