// Encodes Record{cuda_chunk} (proto/rlscope/trace.proto, CudaChunk): API
// calls and GPU activity, columnar and delta-encoded. Runs on the writer
// thread; owns the file's string table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "activity.h"
#include "api_trace.h"

namespace rlscope::cuda {

class CudaChunkEncoder {
 public:
  // Interned id of `s` (1, 2, ...); a new string is defined in the next chunk.
  uint32_t intern(std::string_view s);
  // Name id of an API call, resolved with cuptiGetCallbackName once per cbid.
  uint32_t api_name(uint32_t domain, uint32_t cbid);

  void add_thread(uint32_t index, int64_t tid, std::string_view name);
  // `calls` grouped by thread and sorted by start within a thread.
  void add_api_calls(const std::vector<ApiCall>& calls, const std::vector<uint32_t>& thread);
  void add_activity(const ActivityBatch& b);
  void add_dropped_api_calls(uint64_t n) { dropped_api_ += n; }

  bool empty() const;
  // The length-prefixed Record{cuda_chunk}; resets the chunk (not the strings).
  const std::string& finish();

 private:
  void reset();
  uint64_t sequence_ = 0;
  std::unordered_map<std::string, uint32_t> ids_;
  std::unordered_map<uint64_t, uint32_t> api_names_;
  std::string defs_, threads_;
  // API columns
  bool api_started_ = false;
  int64_t api_base_ = 0, api_prev_ = 0;
  int64_t api_corr_prev_ = 0;
  uint32_t n_api_ = 0;
  std::string api_start_, api_dur_, api_thread_, api_name_, api_domain_, api_corr_;
  // GPU columns
  bool gpu_started_ = false;
  int64_t gpu_base_ = 0, gpu_prev_ = 0, gpu_corr_prev_ = 0;
  uint32_t n_gpu_ = 0;
  std::string gpu_start_, gpu_dur_, gpu_kind_, gpu_device_, gpu_stream_, gpu_name_,
      gpu_corr_, gpu_bytes_, kernel_dims_, memcpy_kind_;
  std::string ext_kind_, ext_id_, ext_corr_;
  bool ovh_started_ = false;
  int64_t ovh_base_ = 0, ovh_prev_ = 0;
  std::string ovh_start_, ovh_dur_, ovh_kind_, ovh_obj_;
  uint64_t dropped_api_ = 0, dropped_act_ = 0, invalid_act_ = 0;
  std::string body_, out_;
};

}  // namespace rlscope::cuda
