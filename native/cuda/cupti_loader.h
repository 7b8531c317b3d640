// libcupti, loaded at run time with dlopen. librlscope_cuda is built against
// the CUPTI headers only, so it loads (and stays inert) on machines without
// CUDA. The copy the process already uses (e.g. the one shipped with the
// torch wheel) is preferred, so there is never a second libcupti in-process.
#pragma once

#include <cupti.h>

#include <string>

namespace rlscope::cuda {

struct Cupti {
  void* handle = nullptr;
  std::string path;     // where it was found
  uint32_t version = 0;  // cuptiGetVersion()
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) Subscribe_v2 = nullptr;  // optional (CUDA >= 12.x)
  decltype(&cuptiUnsubscribe) Unsubscribe = nullptr;
  decltype(&cuptiEnableDomain) EnableDomain = nullptr;
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&cuptiGetCallbackName) GetCallbackName = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
};

// The process-wide table (empty until load_cupti succeeds).
const Cupti& cupti();

// Finds and loads libcupti, in this order: RLSCOPE_CUPTI_LIBRARY (and nothing
// else when it is set); a libcupti already loaded in the process; the dynamic
// loader's search path; the CUDA toolkit ($CUDA_HOME, /usr/local/cuda).
// Returns "" on success, otherwise why not (one line, for the user).
std::string load_cupti(const std::string& explicit_path);

}  // namespace rlscope::cuda
