// Plain C++ tests of the CUDA collector's parts that need no libcupti (only
// its headers): the API-call filter list, the callback's per-thread records
// as the writer drains them, and the CudaChunk encoder, decoded with the
// minimal wire reader.
//
// Usage: rlscope_cuda_tests [scratch-dir]   writes <dir>/cuda_chunk.rlscope
//        (a header and one chunk, for tests/unit/test_native_cpp.py to decode
//        with protobuf) and exits 0 when every check passed.
//        rlscope_cuda_tests --filter-list   prints the filter list, one a line.
#include <cupti.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "api_trace.h"
#include "check.h"
#include "config.h"
#include "cuda_chunk.h"
#include "trace_writer.h"
#include "wire_reader.h"

namespace {

using rlscope::BufferedThread;
using namespace rlscope::cuda;

constexpr auto kRuntime = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr auto kDriver = CUPTI_CB_DOMAIN_DRIVER_API;

// What CUPTI does around one API call: ENTER, the call, EXIT.
void enter(CUpti_CallbackDomain d, uint32_t cbid, uint32_t corr) {
  CUpti_CallbackData cb{};
  cb.callbackSite = CUPTI_API_ENTER;
  cb.correlationId = corr;
  api_callback(nullptr, d, CUpti_CallbackId(cbid), &cb);
}
void exit_(CUpti_CallbackDomain d, uint32_t cbid, uint32_t corr) {
  CUpti_CallbackData cb{};
  cb.callbackSite = CUPTI_API_EXIT;
  cb.correlationId = corr;
  api_callback(nullptr, d, CUpti_CallbackId(cbid), &cb);
}
void call(CUpti_CallbackDomain d, uint32_t cbid, uint32_t corr) {
  enter(d, cbid, corr);
  exit_(d, cbid, corr);
}

struct Drained {
  std::vector<ApiCall> calls;
  std::vector<uint32_t> thread;
  std::vector<std::string> new_threads;
  uint64_t dropped = 0;
};

Drained drain() {
  Drained d;
  std::vector<const BufferedThread*> nt;
  d.dropped = api_drain(d.calls, nt, d.thread);
  for (const BufferedThread* t : nt) d.new_threads.push_back(t->name);
  api_reap();
  REQUIRE(d.calls.size() == d.thread.size());
  return d;
}

// ------------------------------------------------------------ filter list

void test_filter_names() {
  CHECK(strip_version_suffix("cudaLaunchKernel_v7000") == "cudaLaunchKernel");
  CHECK(strip_version_suffix("cuMemAlloc_v2") == "cuMemAlloc");
  CHECK(strip_version_suffix("cuLaunchKernel") == "cuLaunchKernel");
  CHECK(strip_version_suffix("cuFoo_v") == "cuFoo_v");         // no digits
  CHECK(strip_version_suffix("cuFoo_v2x") == "cuFoo_v2x");     // not only digits
  CHECK(strip_version_suffix("cu_vFoo_v10") == "cu_vFoo");     // the last _v only
  CHECK(strip_version_suffix(nullptr).empty());

  CHECK(!filtered_call_names().empty());
  for (const std::string& n : filtered_call_names()) CHECK(is_filtered_name(n));
  // The calls whose time matters are never filtered.
  for (const char* n : {"cudaLaunchKernel", "cudaMemcpy", "cudaMemcpyAsync", "cudaMalloc",
                        "cudaFree", "cudaDeviceSynchronize", "cudaStreamSynchronize",
                        "cuLaunchKernel", "cuMemcpyHtoD", "cuMemAlloc", "cuCtxSynchronize",
                        "cudaGraphLaunch", ""}) {
    CHECK(!is_filtered_name(n));
  }
  // Matched after the suffix is stripped, not before.
  CHECK(!is_filtered_name("cudaGetDevice_v3020"));
  CHECK(is_filtered_name(strip_version_suffix("cudaGetDevice_v3020")));
}

// set_filtered drops a (domain, cbid) in the callback itself; the other
// domain's same cbid and out-of-range cbids are not affected.
void test_filter_in_callback() {
  set_filtered(kRuntime, 17);
  set_filtered(kDriver, 300);
  set_filtered(kRuntime, 5000);  // beyond the bitmap: ignored
  call(kRuntime, 17, 1);         // filtered
  call(kDriver, 17, 2);          // same cbid, other domain: kept
  call(kDriver, 300, 3);         // filtered
  call(kRuntime, 300, 4);        // kept
  call(kRuntime, 5000, 5);       // kept
  call(CUPTI_CB_DOMAIN_RESOURCE, 1, 6);  // not an API domain: ignored
  Drained d = drain();
  REQUIRE(d.calls.size() == 3);
  CHECK(d.calls[0].domain == kDriver && d.calls[0].cbid == 17 && d.calls[0].correlation_id == 2);
  CHECK(d.calls[1].domain == kRuntime && d.calls[1].cbid == 300);
  CHECK(d.calls[2].domain == kRuntime && d.calls[2].cbid == 5000);
  for (const ApiCall& c : d.calls) CHECK(c.end_ns >= c.start_ns && c.start_ns > 0);
}

// ------------------------------------------------------------ drain

// Nested calls are appended at EXIT, inner first; the drain orders each
// thread's calls by start without mixing threads.
void test_nested_calls_ordered_per_thread() {
  Config cfg = config();
  cfg.record_nested = true;
  set_config(cfg);
  std::thread other([] {
    call(kRuntime, 211, 100);
    enter(kRuntime, 211, 101);
    call(kDriver, 307, 102);
    exit_(kRuntime, 211, 101);
  });
  other.join();
  enter(kRuntime, 31, 10);    // outer
  enter(kDriver, 307, 11);    // inner
  call(kDriver, 308, 12);     // innermost
  exit_(kDriver, 307, 11);
  exit_(kRuntime, 31, 10);
  call(kRuntime, 31, 13);
  Drained d = drain();
  REQUIRE(d.calls.size() == 7);
  std::map<uint32_t, std::vector<uint32_t>> corr_by_thread;
  for (size_t i = 0; i < d.calls.size(); ++i) {
    // Grouped: a thread's calls are contiguous.
    if (i > 0 && d.thread[i] != d.thread[i - 1]) CHECK(corr_by_thread.count(d.thread[i]) == 0);
    corr_by_thread[d.thread[i]].push_back(d.calls[i].correlation_id);
    if (i > 0 && d.thread[i] == d.thread[i - 1]) {
      CHECK(d.calls[i - 1].start_ns <= d.calls[i].start_ns);
    }
  }
  std::vector<std::vector<uint32_t>> seqs;
  for (auto& [t, v] : corr_by_thread) seqs.push_back(v);
  CHECK(seqs.size() == 2);
  bool main_seen = false, other_seen = false;
  for (const auto& v : seqs) {
    main_seen |= v == std::vector<uint32_t>{10, 11, 12, 13};
    other_seen |= v == std::vector<uint32_t>{100, 101, 102};
  }
  CHECK(main_seen && other_seen);

  cfg.record_nested = false;
  set_config(cfg);
  enter(kRuntime, 31, 20);
  call(kDriver, 307, 21);  // inside a runtime call: part of its time, not recorded
  exit_(kRuntime, 31, 20);
  d = drain();
  REQUIRE(d.calls.size() == 1);
  CHECK(d.calls[0].correlation_id == 20);
}

// Threads are defined once, at their first drained call; exited threads
// are freed after the drain that emptied them.
void test_thread_definitions_and_memory_bound() {
  Drained d = drain();
  CHECK(d.calls.empty() && d.new_threads.empty());
  std::thread t([] {
    pthread_setname_np(pthread_self(), "api-worker");
    call(kRuntime, 211, 1);
  });
  t.join();
  d = drain();
  CHECK((d.new_threads == std::vector<std::string>{"api-worker"}));
  CHECK(d.calls.size() == 1);
  call(kRuntime, 211, 2);  // main thread: defined in an earlier drain
  d = drain();
  CHECK(d.new_threads.empty() && d.calls.size() == 1);

  // Memory bound: every call beyond it is dropped, and counted once.
  api_set_memory_limit(0);  // the minimum, 2 blocks; the main thread holds one
  constexpr uint32_t kCalls = 10000;
  std::thread flood([] {
    for (uint32_t i = 0; i < kCalls; ++i) call(kRuntime, 211, i);
  });
  flood.join();
  d = drain();
  CHECK(d.dropped > 0);
  CHECK(d.calls.size() + d.dropped == kCalls);
  CHECK(drain().dropped == 0);
  api_set_memory_limit(256ull << 20);
}

// ------------------------------------------------------------ chunk encoder

struct Column {
  std::vector<uint64_t> v;
  std::vector<int64_t> deltas_to_values(int64_t base) const {
    std::vector<int64_t> out;
    for (uint64_t x : v) out.push_back(base += unzigzag(x));
    return out;
  }
};

struct DecodedChunk {
  uint64_t sequence = 0;
  std::map<uint32_t, std::string> strings;
  std::map<uint32_t, std::pair<int64_t, std::string>> threads;
  std::map<uint32_t, int64_t> ints;   // singular varint fields by number
  std::map<uint32_t, Column> cols;    // packed fields by number
};

DecodedChunk decode_chunk(const std::string& framed) {
  size_t pos = 0;
  uint64_t n;
  REQUIRE(get_varint(framed, pos, &n));
  REQUIRE(pos + n == framed.size());
  std::vector<Field> rec = parse(framed.substr(pos));
  REQUIRE(rec.size() == 1 && rec[0].number == 3 && rec[0].wire == 2);  // Record.cuda_chunk
  DecodedChunk c;
  for (const Field& f : parse(rec[0].bytes)) {
    if (f.number == 1) {
      c.sequence = f.value;
    } else if (f.number == 2) {
      uint32_t id = 0;
      std::string v;
      for (const Field& g : parse(f.bytes)) {
        if (g.number == 1) id = uint32_t(g.value);
        if (g.number == 2) v = g.bytes;
      }
      CHECK(c.strings.count(id) == 0);
      c.strings[id] = v;
    } else if (f.number == 3) {
      uint32_t idx = 0;
      int64_t tid = 0;
      std::string name;
      for (const Field& g : parse(f.bytes)) {
        if (g.number == 1) idx = uint32_t(g.value);
        if (g.number == 2) tid = int64_t(g.value);
        if (g.number == 3) name = g.bytes;
      }
      c.threads[idx] = {tid, name};
    } else if (f.wire == 0) {
      CHECK(c.ints.count(f.number) == 0);
      c.ints[f.number] = int64_t(f.value);
    } else {
      CHECK(c.cols.count(f.number) == 0);
      c.cols[f.number].v = unpack(f.bytes);
    }
  }
  return c;
}

std::vector<uint64_t> u(std::initializer_list<uint64_t> v) { return v; }

// The batch the encoder test writes; tests/unit/test_native_cpp.py checks the
// same values after decoding the file with protobuf.
ActivityBatch sample_activity() {
  ActivityBatch b;
  GpuRow k{};
  k.start_ns = 5000;
  k.end_ns = 5600;
  k.kind = kKernel;
  k.device = 0;
  k.stream = 7;
  k.correlation_id = 41;
  k.name = "vectorAdd";
  int32_t dims[6] = {128, 2, 1, 256, 1, 1};
  std::memcpy(k.dims, dims, sizeof dims);
  GpuRow m{};
  m.start_ns = 4000;  // earlier than the kernel: a negative delta
  m.end_ns = 4100;
  m.kind = kMemcpy;
  m.device = 1;
  m.stream = 8;
  m.correlation_id = 40;
  m.bytes = 1 << 20;
  m.copy_kind = 1;  // HtoD
  GpuRow s{};
  s.start_ns = 6000;
  s.end_ns = 6010;
  s.kind = kMemset;
  s.stream = 7;
  s.correlation_id = 45;
  s.bytes = 4096;
  b.gpu = {k, m, s};
  b.ext = {ExtCorrelationRow{2, 0xfeedbeefcafeull, 41}};
  b.overhead = {OverheadRow{3000, 3500, 1, 12345}};
  b.dropped = 3;
  b.invalid = 2;
  return b;
}

void test_cuda_chunk_encoder(const std::string& dir) {
  CudaChunkEncoder enc;
  CHECK(enc.empty());
  enc.add_thread(1, 4242, "main");
  enc.add_thread(2, 4243, "");
  // Grouped by thread, by start within a thread: the second thread's first
  // call starts earlier (negative start delta), and correlation ids go down.
  std::vector<ApiCall> calls = {
      {1000, 1100, 211, kRuntime, 40},
      {1200, 1250, 13, kRuntime, 41},
      {900, 2000, 307, kDriver, 7},
  };
  enc.add_api_calls(calls, {1, 1, 2});
  enc.add_dropped_api_calls(5);
  enc.add_activity(sample_activity());
  CHECK(!enc.empty());
  std::string bytes = enc.finish();
  CHECK(enc.empty());

  DecodedChunk c = decode_chunk(bytes);
  CHECK(c.sequence == 0);
  CHECK(c.threads[1] == std::make_pair(int64_t(4242), std::string("main")));
  CHECK(c.threads[2] == std::make_pair(int64_t(4243), std::string()));
  // No libcupti loaded: API names fall back to domain + cbid.
  std::vector<std::string> api_names;
  for (uint64_t id : c.cols[8].v) api_names.push_back(c.strings[uint32_t(id)]);
  CHECK((api_names == std::vector<std::string>{"runtime_cbid_211", "runtime_cbid_13",
                                               "driver_cbid_307"}));
  CHECK(c.ints[4] == 1000);                                                    // api_base_ns
  CHECK((c.cols[5].deltas_to_values(1000) == std::vector<int64_t>{1000, 1200, 900}));
  CHECK(c.cols[6].v == u({100, 50, 1100}));                                    // durations
  CHECK(c.cols[7].v == u({1, 1, 2}));                                          // threads
  CHECK(c.cols[9].v == u({1, 1, 2}));              // domain: 1 runtime, 2 driver
  CHECK((c.cols[10].deltas_to_values(0) == std::vector<int64_t>{40, 41, 7}));  // correlation

  CHECK(c.ints[11] == 5000);  // gpu_base_ns: the first row's start
  CHECK((c.cols[12].deltas_to_values(5000) == std::vector<int64_t>{5000, 4000, 6000}));
  CHECK(c.cols[13].v == u({600, 100, 10}));
  CHECK(c.cols[14].v == u({kKernel, kMemcpy, kMemset}));
  CHECK(c.cols[15].v == u({0, 1, 0}));
  CHECK(c.cols[16].v == u({7, 8, 7}));
  REQUIRE(c.cols[17].v.size() == 3);
  CHECK(c.strings[uint32_t(c.cols[17].v[0])] == "vectorAdd");
  CHECK(c.cols[17].v[1] == 0 && c.cols[17].v[2] == 0);  // names for kernels only
  CHECK((c.cols[18].deltas_to_values(0) == std::vector<int64_t>{41, 40, 45}));
  CHECK(c.cols[19].v == u({0, 1 << 20, 4096}));
  CHECK(c.cols[20].v == u({128, 2, 1, 256, 1, 1}));  // per kernel
  CHECK(c.cols[21].v == u({1}));                     // per memcpy
  CHECK(c.cols[22].v == u({2}));
  CHECK(c.cols[23].v == u({0xfeedbeefcafeull}));
  CHECK(c.cols[24].v == u({41}));
  CHECK(c.ints[25] == 3000);
  CHECK((c.cols[26].deltas_to_values(3000) == std::vector<int64_t>{3000}));
  CHECK(c.cols[27].v == u({500}));
  CHECK(c.cols[28].v == u({1}));
  CHECK(c.cols[29].v == u({12345}));
  CHECK(c.ints[30] == 5 && c.ints[31] == 3 && c.ints[32] == 2);
  CHECK(c.strings.size() == 4);

  // For the protobuf cross-check: a header and this chunk.
  rlscope::HeaderInfo h;
  h.source = "cuda";
  h.recorder = "cupti";
  h.pid = 1;
  {
    std::ofstream out(dir + "/cuda_chunk.rlscope", std::ios::binary | std::ios::trunc);
    out << rlscope::encode_file_start(h) << bytes;
  }

  // Second chunk: strings stay interned for the file (defined once), columns
  // and counters start afresh, the sequence goes on.
  enc.add_api_calls({{7000, 7001, 211, kRuntime, 50}}, {1});
  ActivityBatch b2;
  b2.gpu = {sample_activity().gpu[0]};
  enc.add_activity(b2);
  DecodedChunk c2 = decode_chunk(enc.finish());
  CHECK(c2.sequence == 1);
  CHECK(c2.strings.empty() && c2.threads.empty());
  CHECK(c2.cols[8].v == u({c.cols[8].v[0]}));
  CHECK(c2.cols[17].v == u({c.cols[17].v[0]}));
  CHECK(c2.ints[4] == 7000 && c2.ints[11] == 5000);
  CHECK((c2.cols[10].deltas_to_values(0) == std::vector<int64_t>{50}));
  CHECK(c2.ints.count(30) == 0 && c2.ints.count(31) == 0);  // zero: omitted
  CHECK(c2.cols.count(22) == 0 && c2.cols.count(26) == 0);  // empty: omitted
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--filter-list") == 0) {
    for (const std::string& n : filtered_call_names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  std::string dir = argc > 1 ? argv[1] : "/tmp";
  pthread_setname_np(pthread_self(), "main");
  g_api_tracing.store(true);
  test_filter_names();
  test_filter_in_callback();
  test_nested_calls_ordered_per_thread();
  test_thread_definitions_and_memory_bound();
  test_cuda_chunk_encoder(dir);
  if (g_failures) {
    std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("all CUDA native tests passed\n");
  return 0;
}
