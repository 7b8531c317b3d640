// Configuration from the environment (docs/rls-prof.md, docs/cuda.md). Read
// by the load-time constructor, which must not touch CUDA or CUPTI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rlscope::cuda {

struct Config {
  bool enabled = false;        // RLSCOPE_OUTPUT_DIR set and RLSCOPE_CUDA != 0
  std::string output_dir;      // RLSCOPE_OUTPUT_DIR
  double flush_interval_s = 0.5;      // RLSCOPE_FLUSH_INTERVAL_S
  size_t activity_buffer_bytes = 8u << 20;  // RLSCOPE_CUDA_BUFFER_BYTES (tests: small)
  uint64_t max_api_buffer_bytes = 256ull << 20;  // RLSCOPE_MAX_BUFFER_BYTES
  bool record_nested = false;  // RLSCOPE_CUDA_NESTED=1: driver calls made inside runtime calls
  bool verbose = false;        // RLSCOPE_CUDA_VERBOSE=1
  bool device_sync_at_exit = true;  // RLSCOPE_CUDA_SYNC_AT_EXIT=0 turns it off
  // RLSCOPE_CUDA_ACTIVITY=0: API callbacks only, no activity records (calibration's
  // full-cuda-api configuration, which separates the two costs).
  bool activity = true;
  std::string cupti_library;   // RLSCOPE_CUPTI_LIBRARY: explicit libcupti path
};

Config read_config();
const Config& config();
void set_config(const Config& c);

}  // namespace rlscope::cuda
