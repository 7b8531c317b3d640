#include "cuda_chunk.h"

#include "cupti_loader.h"
#include "pb_encode.h"
#include "trace_fields.h"
#include "trace_writer.h"

namespace rlscope::cuda {

namespace {

namespace f = fields::cuda_chunk;

using pb::put_varint;
using pb::zigzag;

// Deltas of a monotone-ish series: `prev` starts at the chunk's base.
inline void put_delta(std::string& col, int64_t v, int64_t* prev) {
  put_varint(col, zigzag(v - *prev));
  *prev = v;
}

}  // namespace

uint32_t CudaChunkEncoder::intern(std::string_view s) {
  auto it = ids_.find(std::string(s));
  if (it != ids_.end()) return it->second;
  uint32_t id = uint32_t(ids_.size()) + 1;
  ids_.emplace(std::string(s), id);
  put_string_def(defs_, f::kStrings, id, s);
  return id;
}

uint32_t CudaChunkEncoder::api_name(uint32_t domain, uint32_t cbid) {
  uint64_t key = (uint64_t(domain) << 32) | cbid;
  auto it = api_names_.find(key);
  if (it != api_names_.end()) return it->second;
  const char* name = nullptr;
  std::string s;
  if (cupti().GetCallbackName &&
      cupti().GetCallbackName(CUpti_CallbackDomain(domain), cbid, &name) == CUPTI_SUCCESS &&
      name) {
    s = strip_version_suffix(name);
  } else {
    s = (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver_cbid_" : "runtime_cbid_") +
        std::to_string(cbid);
  }
  uint32_t id = intern(s);
  api_names_.emplace(key, id);
  return id;
}

void CudaChunkEncoder::add_thread(uint32_t index, int64_t tid, std::string_view name) {
  put_thread_def(threads_, f::kThreads, index, tid, name);
}

void CudaChunkEncoder::add_api_calls(const std::vector<ApiCall>& calls,
                                     const std::vector<uint32_t>& thread) {
  for (size_t i = 0; i < calls.size(); ++i) {
    const ApiCall& c = calls[i];
    if (!api_started_) {
      api_started_ = true;
      api_base_ = api_prev_ = c.start_ns;
    }
    put_delta(api_start_, c.start_ns, &api_prev_);
    put_varint(api_dur_, uint64_t(c.end_ns >= c.start_ns ? c.end_ns - c.start_ns : 0));
    put_varint(api_thread_, thread[i]);
    put_varint(api_name_, api_name(c.domain, c.cbid));
    // trace.proto / rlscope.trace.gpu: 1 runtime, 2 driver (CUPTI numbers them 2 and 1).
    put_varint(api_domain_, c.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? 1u : 2u);
    put_delta(api_corr_, int64_t(c.correlation_id), &api_corr_prev_);
    ++n_api_;
  }
}

void CudaChunkEncoder::add_activity(const ActivityBatch& b) {
  for (const GpuRow& r : b.gpu) {
    if (!gpu_started_) {
      gpu_started_ = true;
      gpu_base_ = gpu_prev_ = r.start_ns;
    }
    put_delta(gpu_start_, r.start_ns, &gpu_prev_);
    put_varint(gpu_dur_, uint64_t(r.end_ns - r.start_ns));
    put_varint(gpu_kind_, r.kind);
    put_varint(gpu_device_, r.device);
    put_varint(gpu_stream_, r.stream);
    put_varint(gpu_name_, r.kind == kKernel ? intern(r.name) : 0);
    put_delta(gpu_corr_, int64_t(r.correlation_id), &gpu_corr_prev_);
    put_varint(gpu_bytes_, r.bytes);
    if (r.kind == kKernel) {
      for (int32_t d : r.dims) put_varint(kernel_dims_, uint32_t(d));
    } else if (r.kind == kMemcpy) {
      put_varint(memcpy_kind_, r.copy_kind);
    }
    ++n_gpu_;
  }
  for (const ExtCorrelationRow& x : b.ext) {
    put_varint(ext_kind_, x.kind);
    put_varint(ext_id_, x.external_id);
    put_varint(ext_corr_, x.correlation_id);
  }
  for (const OverheadRow& o : b.overhead) {
    if (!ovh_started_) {
      ovh_started_ = true;
      ovh_base_ = ovh_prev_ = o.start_ns;
    }
    put_delta(ovh_start_, o.start_ns, &ovh_prev_);
    put_varint(ovh_dur_, uint64_t(o.end_ns - o.start_ns));
    put_varint(ovh_kind_, o.kind);
    put_varint(ovh_obj_, o.object_id);
  }
  dropped_act_ += b.dropped;
  invalid_act_ += b.invalid;
}

bool CudaChunkEncoder::empty() const {
  return n_api_ == 0 && n_gpu_ == 0 && ext_kind_.empty() && ovh_kind_.empty() &&
         dropped_api_ == 0 && dropped_act_ == 0 && invalid_act_ == 0 && threads_.empty() &&
         defs_.empty();
}

const std::string& CudaChunkEncoder::finish() {
  body_.clear();
  pb::put_uint(body_, f::kSequence, sequence_++);
  body_ += defs_;
  body_ += threads_;
  pb::put_int(body_, f::kApiBaseNs, api_base_);
  pb::put_packed(body_, f::kApiStartDeltaNs, api_start_);
  pb::put_packed(body_, f::kApiDurationNs, api_dur_);
  pb::put_packed(body_, f::kApiThread, api_thread_);
  pb::put_packed(body_, f::kApiName, api_name_);
  pb::put_packed(body_, f::kApiDomain, api_domain_);
  pb::put_packed(body_, f::kApiCorrelationDelta, api_corr_);
  pb::put_int(body_, f::kGpuBaseNs, gpu_base_);
  pb::put_packed(body_, f::kGpuStartDeltaNs, gpu_start_);
  pb::put_packed(body_, f::kGpuDurationNs, gpu_dur_);
  pb::put_packed(body_, f::kGpuKind, gpu_kind_);
  pb::put_packed(body_, f::kGpuDevice, gpu_device_);
  pb::put_packed(body_, f::kGpuStream, gpu_stream_);
  pb::put_packed(body_, f::kGpuName, gpu_name_);
  pb::put_packed(body_, f::kGpuCorrelationDelta, gpu_corr_);
  pb::put_packed(body_, f::kGpuBytes, gpu_bytes_);
  pb::put_packed(body_, f::kKernelDims, kernel_dims_);
  pb::put_packed(body_, f::kMemcpyKind, memcpy_kind_);
  pb::put_packed(body_, f::kExtKind, ext_kind_);
  pb::put_packed(body_, f::kExtId, ext_id_);
  pb::put_packed(body_, f::kExtCorrelation, ext_corr_);
  pb::put_int(body_, f::kOverheadBaseNs, ovh_base_);
  pb::put_packed(body_, f::kOverheadStartDeltaNs, ovh_start_);
  pb::put_packed(body_, f::kOverheadDurationNs, ovh_dur_);
  pb::put_packed(body_, f::kOverheadKind, ovh_kind_);
  pb::put_packed(body_, f::kOverheadObjectId, ovh_obj_);
  pb::put_uint(body_, f::kDroppedApiCalls, dropped_api_);
  pb::put_uint(body_, f::kDroppedActivityRecords, dropped_act_);
  pb::put_uint(body_, f::kInvalidActivityRecords, invalid_act_);
  out_.clear();
  frame_record(out_, fields::record::kCudaChunk, body_);
  reset();
  return out_;
}

void CudaChunkEncoder::reset() {
  defs_.clear();
  threads_.clear();
  api_started_ = gpu_started_ = ovh_started_ = false;
  api_base_ = api_prev_ = api_corr_prev_ = 0;
  gpu_base_ = gpu_prev_ = gpu_corr_prev_ = 0;
  ovh_base_ = ovh_prev_ = 0;
  n_api_ = n_gpu_ = 0;
  for (std::string* s : {&api_start_, &api_dur_, &api_thread_, &api_name_, &api_domain_,
                         &api_corr_, &gpu_start_, &gpu_dur_, &gpu_kind_, &gpu_device_,
                         &gpu_stream_, &gpu_name_, &gpu_corr_, &gpu_bytes_, &kernel_dims_,
                         &memcpy_kind_, &ext_kind_, &ext_id_, &ext_corr_, &ovh_start_,
                         &ovh_dur_, &ovh_kind_, &ovh_obj_}) {
    s->clear();
  }
  dropped_api_ = dropped_act_ = invalid_act_ = 0;
}

}  // namespace rlscope::cuda
