// Field numbers of proto/rlscope/trace.proto, the one place the native
// encoders (trace_writer.cpp, native/cuda/cuda_chunk.cpp, the CUDA header
// fields in collector.cpp) take them from.
//
// Written by hand rather than generated: the core is plain C++ built without
// Python or protoc (RLSCOPE_BUILD_PYTHON=OFF, the C++ tests), and the schema
// changes rarely. tests/unit/test_trace_fields.py keeps it honest: it compiles
// trace.proto with grpc_tools.protoc and checks every constant here against
// the descriptor, and that every field of these messages has one.
//
// Convention (the test relies on it): one namespace per message, named as the
// message in snake_case; one constant per field, `k` + the field name in
// CamelCase.
#pragma once

#include <cstdint>

namespace rlscope::fields {

namespace record {
constexpr uint32_t kHeader = 1, kChunk = 2, kCudaChunk = 3, kSampleChunk = 4;
}  // namespace record

namespace clock_pair {
constexpr uint32_t kMonotonicNs = 1, kRealtimeNs = 2, kUncertaintyNs = 3;
}  // namespace clock_pair

namespace header {
constexpr uint32_t kFormatVersion = 1, kSource = 2, kPid = 3, kPpid = 4, kHost = 5,
                   kProcessName = 6, kArgv = 7, kClock = 8, kRecorder = 9,
                   kRlscopeVersion = 10, kCuptiOffsetNs = 11, kCuptiOffsetErrorNs = 12,
                   kCuptiVersion = 13;
}  // namespace header

namespace string_def {
constexpr uint32_t kId = 1, kValue = 2;
}  // namespace string_def

namespace thread_def {
constexpr uint32_t kIndex = 1, kTid = 2, kName = 3;
}  // namespace thread_def

namespace metadata {
constexpr uint32_t kKey = 1, kJsonValue = 2, kTimeNs = 3;
}  // namespace metadata

namespace chunk {
constexpr uint32_t kSequence = 1, kStrings = 2, kThreads = 3, kBaseTimeNs = 4,
                   kTimeDeltaNs = 5, kThread = 6, kKind = 7, kName = 8, kArgs = 9,
                   kDroppedEvents = 10, kMetadata = 11, kAggStates = 12, kAggThread = 13,
                   kAggGap = 14, kAggState = 15, kAggNs = 16, kAggCalls = 17, kAggEvents = 18,
                   kCountThread = 19, kCountGap = 20, kCountKind = 21, kCountN = 22,
                   kAggUntilNs = 23;
}  // namespace chunk

namespace agg_state {
constexpr uint32_t kId = 1, kParent = 2, kKind = 3, kName = 4;
}  // namespace agg_state

namespace cuda_chunk {
constexpr uint32_t kSequence = 1, kStrings = 2, kThreads = 3;
constexpr uint32_t kApiBaseNs = 4, kApiStartDeltaNs = 5, kApiDurationNs = 6, kApiThread = 7,
                   kApiName = 8, kApiDomain = 9, kApiCorrelationDelta = 10;
constexpr uint32_t kGpuBaseNs = 11, kGpuStartDeltaNs = 12, kGpuDurationNs = 13,
                   kGpuKind = 14, kGpuDevice = 15, kGpuStream = 16, kGpuName = 17,
                   kGpuCorrelationDelta = 18, kGpuBytes = 19, kKernelDims = 20,
                   kMemcpyKind = 21;
constexpr uint32_t kExtKind = 22, kExtId = 23, kExtCorrelation = 24;
constexpr uint32_t kOverheadBaseNs = 25, kOverheadStartDeltaNs = 26,
                   kOverheadDurationNs = 27, kOverheadKind = 28, kOverheadObjectId = 29;
constexpr uint32_t kDroppedApiCalls = 30, kDroppedActivityRecords = 31,
                   kInvalidActivityRecords = 32;
}  // namespace cuda_chunk

// Written by rls-prof's sampler (Python, rlscope/recorder/wire.py); listed here so the
// test sees every message of the schema.
namespace gpu_def {
constexpr uint32_t kIndex = 1, kName = 2, kUuid = 3, kMemoryTotalBytes = 4;
}  // namespace gpu_def

namespace sample_chunk {
constexpr uint32_t kSequence = 1, kIntervalNs = 2, kGpus = 3, kProcBaseNs = 4,
                   kProcTimeDeltaNs = 5, kProcPid = 6, kProcCpuNs = 7, kProcRssBytes = 8,
                   kCoreBaseNs = 9, kCoreTimeDeltaNs = 10, kCoreIndex = 11, kCoreBusyNs = 12,
                   kGpuBaseNs = 13, kGpuTimeDeltaNs = 14, kGpuIndex = 15, kGpuUtilPct = 16,
                   kGpuMemoryUtilPct = 17, kGpuMemoryUsedBytes = 18, kGpuSmClockMhz = 19,
                   kGpuStatus = 20, kSamplerCpuNs = 21, kTicks = 22, kGpmBaseNs = 23,
                   kGpmTimeDeltaNs = 24, kGpmIndex = 25, kGpmSmActiveCpct = 26,
                   kGpmSmOccupancyCpct = 27, kGpmGraphicsCpct = 28, kGpmStatus = 29,
                   kProcRunqNs = 30;
}  // namespace sample_chunk

}  // namespace rlscope::fields
