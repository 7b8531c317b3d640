// Plain C++ tests of rlscope_core (no Python): the protobuf wire encoder on
// known vectors, and multi-threaded recording to a file that is read back with
// a minimal protobuf decoder.
//
// Usage: rlscope_native_tests [scratch-dir]   (default: /tmp). Exit 0 = pass.
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "detail_windows.h"
#include "pb_encode.h"
#include "recorder.h"
#include "ticks.h"
#include "trace_writer.h"
#include "wire_reader.h"

namespace {

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string varint_hex(uint64_t v) {
  std::string s;
  rlscope::pb::put_varint(s, v);
  return hex(s);
}

void test_encoder_vectors() {
  using namespace rlscope::pb;
  CHECK(varint_hex(0) == "00");
  CHECK(varint_hex(1) == "01");
  CHECK(varint_hex(127) == "7f");
  CHECK(varint_hex(128) == "8001");
  CHECK(varint_hex(300) == "ac02");
  CHECK(varint_hex(16384) == "808001");
  CHECK(varint_hex(UINT64_MAX) == "ffffffffffffffffff01");
  CHECK(varint_size(0) == 1 && varint_size(127) == 1 && varint_size(128) == 2);
  CHECK(varint_size(UINT64_MAX) == 10);

  CHECK(zigzag(0) == 0);
  CHECK(zigzag(-1) == 1);
  CHECK(zigzag(1) == 2);
  CHECK(zigzag(-2) == 3);
  CHECK(zigzag(2147483647) == 4294967294ull);
  CHECK(zigzag(-2147483648ll) == 4294967295ull);
  CHECK(zigzag(INT64_MAX) == 0xfffffffffffffffeull);
  CHECK(zigzag(INT64_MIN) == 0xffffffffffffffffull);

  std::string s;
  put_uint(s, 1, 150);  // the protobuf docs' example: 08 96 01
  CHECK(hex(s) == "089601");
  s.clear();
  put_string(s, 2, "testing");  // 12 07 74 65 73 74 69 6e 67
  CHECK(hex(s) == "120774657374696e67");
  s.clear();
  put_sint(s, 5, -1);
  CHECK(hex(s) == "2801");
  s.clear();
  put_int(s, 3, -1);  // int64 -1: ten-byte varint
  CHECK(hex(s) == "18ffffffffffffffffff01");
  s.clear();
  put_uint(s, 1, 0);  // proto3 default: omitted
  put_string(s, 2, "");
  put_packed(s, 5, "");
  CHECK(s.empty());
  s.clear();
  std::string payload;
  put_varint(payload, 3);
  put_varint(payload, 270);
  put_varint(payload, 86942);
  put_packed(s, 4, payload);  // docs' packed example: 22 06 03 8e 02 9e a7 05
  CHECK(hex(s) == "2206038e029ea705");
  s.clear();
  put_tag(s, 2, kLen);
  put_tag(s, 16, kVarint);
  CHECK(hex(s) == "128001");
}

struct Event {
  int64_t ts;
  uint32_t thread, kind, name;
};

struct Trace {
  std::map<std::string, uint64_t> header_ints;  // by field name
  std::vector<std::string> argv;
  std::string source, recorder;
  std::map<uint32_t, std::string> strings;
  std::map<uint32_t, std::string> thread_names;
  std::vector<Event> events;
  std::vector<int64_t> args;
  std::vector<uint32_t> chunk_sizes;
  uint64_t dropped = 0;
  size_t metadata = 0;
};

Trace read_trace(const std::string& path) {
  Trace t;
  bool first = true;
  uint64_t expect_seq = 0;
  for (const Field& rec : read_records(read_file(path))) {
    if (first) {
      REQUIRE(rec.number == 1);  // header
      for (const Field& f : parse(rec.bytes)) {
        if (f.number == 1) t.header_ints["format_version"] = f.value;
        if (f.number == 2) t.source = f.bytes;
        if (f.number == 3) t.header_ints["pid"] = f.value;
        if (f.number == 7) t.argv.push_back(f.bytes);
        if (f.number == 9) t.recorder = f.bytes;
      }
      first = false;
      continue;
    }
    REQUIRE(rec.number == 2);  // chunk
    uint64_t seq = 0;
    int64_t time = 0;
    std::vector<uint64_t> deltas, threads, kinds, names;
    for (const Field& f : parse(rec.bytes)) {
      switch (f.number) {
        case 1: seq = f.value; break;
        case 2: {
          uint32_t id = 0;
          std::string v;
          for (const Field& g : parse(f.bytes)) {
            if (g.number == 1) id = uint32_t(g.value);
            if (g.number == 2) v = g.bytes;
          }
          CHECK(t.strings.count(id) == 0);
          t.strings[id] = v;
          break;
        }
        case 3: {
          uint32_t idx = 0;
          std::string name;
          for (const Field& g : parse(f.bytes)) {
            if (g.number == 1) idx = uint32_t(g.value);
            if (g.number == 3) name = g.bytes;
          }
          CHECK(t.thread_names.count(idx) == 0);
          t.thread_names[idx] = name;
          break;
        }
        case 4: time = int64_t(f.value); break;
        case 5: deltas = unpack(f.bytes); break;
        case 6: threads = unpack(f.bytes); break;
        case 7: kinds = unpack(f.bytes); break;
        case 8: names = unpack(f.bytes); break;
        case 9:
          for (uint64_t v : unpack(f.bytes)) t.args.push_back(unzigzag(v));
          break;
        case 10: t.dropped += f.value; break;
        case 11: ++t.metadata; break;
        default: CHECK(false && "unknown chunk field");
      }
    }
    CHECK(seq == expect_seq);
    ++expect_seq;
    REQUIRE(deltas.size() == kinds.size() && threads.size() == kinds.size() &&
            names.size() == kinds.size());
    CHECK(kinds.size() <= rlscope::kMaxEventsPerChunk);
    t.chunk_sizes.push_back(uint32_t(kinds.size()));
    for (size_t i = 0; i < kinds.size(); ++i) {
      time += unzigzag(deltas[i]);
      // Definitions come in the same or an earlier chunk.
      CHECK(t.thread_names.count(uint32_t(threads[i])) == 1);
      CHECK(names[i] == 0 || t.strings.count(uint32_t(names[i])) == 1);
      t.events.push_back(Event{time, uint32_t(threads[i]), uint32_t(kinds[i]),
                               uint32_t(names[i])});
    }
  }
  return t;
}

// ------------------------------------------------------------ recording

constexpr int kThreads = 6;
constexpr int kIters = 20000;

void worker(int k, uint32_t outer, uint32_t inner) {
  char name[16];
  std::snprintf(name, sizeof(name), "worker-%d", k);
  pthread_setname_np(pthread_self(), name);
  rlscope::ThreadState* t = rlscope::current_thread();
  for (int i = 0; i < kIters; ++i) {
    CHECK(rlscope::push(t, rlscope::OPERATION_BEGIN, outer) == rlscope::OK);
    CHECK(rlscope::push(t, rlscope::PHASE_BEGIN, inner) == rlscope::OK);
    CHECK(rlscope::exit_scope(t, rlscope::PHASE_BEGIN, inner, nullptr) == rlscope::OK);
    if (i % 1000 == 0) CHECK(rlscope::progress(t, i, kIters) == rlscope::OK);
    CHECK(rlscope::exit_scope(t, rlscope::OPERATION_BEGIN, outer, nullptr) == rlscope::OK);
  }
}

void test_multithreaded_recording(const std::string& dir) {
  std::string path = dir + "/rlscope_native_test_" + std::to_string(getpid()) + ".trace";
  unlink(path.c_str());
  rlscope::Config cfg;
  cfg.path = path;
  cfg.argv = {"test", "", "arg"};
  cfg.process_name = "native-test";
  cfg.rlscope_version = "0";
  cfg.flush_interval_s = 0.01;  // the writer thread flushes concurrently
  rlscope::ThreadState* me = rlscope::current_thread();
  REQUIRE(rlscope::start(cfg, me) == 0);
  CHECK(rlscope::start(cfg, me) == -1);  // already active
  uint32_t outer = rlscope::intern("outer");
  uint32_t inner = rlscope::intern("inner");
  CHECK(rlscope::intern("outer") == outer && outer != 0 && inner != outer);
  rlscope::metadata("key", "\"value\"");

  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) threads.emplace_back(worker, k, outer, inner);
  for (auto& th : threads) th.join();
  rlscope::ThreadState* me2 = rlscope::current_thread();
  CHECK(me2 == me);
  CHECK(rlscope::pop(me, rlscope::OPERATION_BEGIN, 0) == rlscope::STACK_EMPTY);
  rlscope::stop(me);
  rlscope::Stats st = rlscope::stats();

  Trace t = read_trace(path);
  CHECK(t.header_ints["format_version"] == 1);
  CHECK(t.header_ints["pid"] == uint64_t(getpid()));
  CHECK(t.source == "python" && t.recorder == "native");
  CHECK((t.argv == std::vector<std::string>{"test", "", "arg"}));
  CHECK(t.dropped == 0 && st.dropped == 0);
  CHECK(t.metadata == 2);  // "key" and rlscope.event_clock
  CHECK(st.events == t.events.size());
  CHECK(st.chunks == t.chunk_sizes.size());

  const uint64_t per_thread = uint64_t(kIters) * 4 + kIters / 1000;
  std::map<uint32_t, std::vector<Event>> by;
  for (const Event& e : t.events) by[e.thread].push_back(e);
  CHECK(by.size() == kThreads + 1);
  int workers = 0;
  for (auto& [idx, evs] : by) {
    const std::string& name = t.thread_names[idx];
    if (name == "main") {
      CHECK(evs.size() == 2);
      CHECK(evs.front().kind == rlscope::PROCESS_START);
      CHECK(evs.back().kind == rlscope::PROCESS_END);
      continue;
    }
    ++workers;
    CHECK(name.rfind("worker-", 0) == 0);
    CHECK(evs.size() == per_thread);
    std::vector<std::pair<uint32_t, uint32_t>> stack;
    for (size_t i = 0; i < evs.size(); ++i) {
      if (i) CHECK(evs[i].ts >= evs[i - 1].ts);
      uint32_t k = evs[i].kind;
      if (k == rlscope::OPERATION_BEGIN || k == rlscope::PHASE_BEGIN) {
        stack.emplace_back(k, evs[i].name);
      } else if (k == rlscope::OPERATION_END || k == rlscope::PHASE_END) {
        CHECK(!stack.empty() && stack.back() == std::make_pair(k - 1, evs[i].name));
        if (!stack.empty()) stack.pop_back();
      } else {
        CHECK(k == rlscope::PROGRESS);
      }
    }
    CHECK(stack.empty());
  }
  CHECK(workers == kThreads);
  CHECK(t.args.size() == size_t(2 * kThreads * (kIters / 1000)));
  for (size_t i = 0; i + 1 < t.args.size(); i += 2) CHECK(t.args[i + 1] == kIters);
  CHECK(t.strings[outer] == "outer" && t.strings[inner] == "inner");
  unlink(path.c_str());
}

// One flush with more than 65536 events: split into chunks, definitions in
// the first one.
void test_chunk_split(const std::string& dir) {
  std::string path = dir + "/rlscope_native_split_" + std::to_string(getpid()) + ".trace";
  unlink(path.c_str());
  rlscope::Config cfg;
  cfg.path = path;
  cfg.flush_interval_s = 3600;
  cfg.flush_threshold_records = 1u << 30;
  rlscope::ThreadState* me = rlscope::current_thread();
  REQUIRE(rlscope::start(cfg, me) == 0);
  uint32_t name = rlscope::intern("split");
  for (int i = 0; i < 50000; ++i) {
    rlscope::push(me, rlscope::OPERATION_BEGIN, name);
    rlscope::exit_scope(me, rlscope::OPERATION_BEGIN, name, nullptr);
  }
  rlscope::flush();
  rlscope::stop(me);
  Trace t = read_trace(path);
  CHECK((t.chunk_sizes == std::vector<uint32_t>{65536, 100001 - 65536, 1}));
  CHECK(t.events.size() == 100002);
  // Bytes per event on a tight loop: a few bytes.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  double per_event = double(in.tellg()) / double(t.events.size());
  std::printf("chunk split: %.2f bytes/event\n", per_event);
  CHECK(per_event <= 12.0);
  unlink(path.c_str());
}

// ------------------------------------------------------------ thread registry

void test_thread_registry() {
  using rlscope::BufferedThread;
  using rlscope::Record;
  // Leaked, as the recorders leak theirs: its thread-exit key must stay valid.
  auto& reg = *new rlscope::ThreadRegistry(5);
  reg.pool().set_limit_bytes(0);  // the minimum: 2 blocks
  constexpr int kWorkers = 3;
  constexpr uint32_t kPerWorker = 100;
  std::vector<std::thread> ws;
  for (int k = 0; k < kWorkers; ++k) {
    ws.emplace_back([&reg, k] {
      auto* t = new BufferedThread(&reg.pool());
      t->name = "w" + std::to_string(k);
      reg.add(t);
      for (uint32_t i = 0; i < kPerWorker; ++i) t->buf.append(int64_t(i), uint32_t(k), 1);
    });
    ws.back().join();  // one at a time: each exits (and keeps its block) before the next
  }
  // Each exited worker still holds its one block: 3 blocks > the bound of 2,
  // so the last worker recorded nothing.
  CHECK(reg.pending() == 2 * kPerWorker);
  std::map<uint32_t, size_t> got;
  uint64_t dropped = reg.drain([&](const BufferedThread& t, const std::vector<Record>& recs) {
    got[t.index] += recs.size();
    for (size_t i = 0; i < recs.size(); ++i) CHECK(recs[i].ts == int64_t(i));
  });
  CHECK((got == std::map<uint32_t, size_t>{{5, kPerWorker}, {6, kPerWorker}}));
  CHECK(dropped == kPerWorker);
  std::vector<std::string> defined;
  reg.define_new([&](const BufferedThread& t) { defined.push_back(t.name); });
  CHECK((defined == std::vector<std::string>{"w0", "w1", "w2"}));
  reg.define_new([&](const BufferedThread&) { CHECK(false && "defined twice"); });
  reg.reap();  // all three exited before the drain: freed, blocks back in the pool
  CHECK(reg.pending() == 0);
  reg.undefine_all();
  reg.define_new([&](const BufferedThread&) { CHECK(false && "reaped thread still there"); });

  // A live thread: discard_all drops its records but keeps it; the dropped
  // count stays in step (the next drain reports none).
  auto* me = new BufferedThread(&reg.pool());
  reg.add(me);
  CHECK(me->index == 8);
  for (uint32_t i = 0; i < 3 * rlscope::Block::kCapacity; ++i) me->buf.append(0, 0, 1);
  CHECK(me->buf.dropped() == rlscope::Block::kCapacity);
  reg.discard_all();
  CHECK(reg.pending() == 0);
  size_t visited = 0;
  CHECK(reg.drain([&](const BufferedThread&, const std::vector<Record>&) { ++visited; }) == 0);
  CHECK(visited == 0);
  me->buf.append(7, 0, 1);
  reg.drain([&](const BufferedThread& t, const std::vector<Record>& recs) {
    CHECK(&t == me && recs.size() == 1 && recs[0].ts == 7);
  });
}

// Three processes of a run writing densely (5 MB/s each) under one budget: each start
// window ends near the run's 25% although another process's writes are seen only at
// its scans, and periodic windows still open afterwards in every process.
void test_detail_windows_share_the_budget(const std::string& dir) {
  const std::string d = dir + "/rlscope-windows-test";
  mkdir(d.c_str(), 0755);
  const uint64_t budget = 20'000'000, dense = 50'000, sparse = 500;  // bytes per 10 ms
  const int n = 3;
  rlscope::DetailWindows w[n];
  uint64_t own[n] = {0, 0, 0};
  std::string files[n];
  int64_t start_end[n] = {0, 0, 0};
  bool periodic[n] = {false, false, false};
  const int64_t ms = 1'000'000, t0 = 1000 * ms;
  for (int p = 0; p < n; ++p) {
    files[p] = d + "/python." + std::to_string(p) + ".rlscope";
    std::ofstream(files[p], std::ios::trunc).close();
    w[p].first_period_ns = 1500 * ms;
    w[p].window_ns = 100 * ms;
    w[p].configure(budget, d, t0, t0);
  }
  uint64_t at_start_end = 0;
  for (int64_t now = t0 + 10 * ms; now < t0 + 4000 * ms; now += 10 * ms) {
    for (int p = 0; p < n; ++p) {
      bool detail = w[p].detail(now, own[p]) || w[p].in_range(now - 5 * ms);
      int64_t b, e;
      auto why = w[p].ended(&b, &e);
      if (why == rlscope::DetailWindows::START) {
        start_end[p] = e;
        uint64_t total = 0;
        for (int q = 0; q < n; ++q) total += own[q];
        at_start_end = std::max(at_start_end, total);
      }
      if (why == rlscope::DetailWindows::PERIODIC) periodic[p] = true;
      own[p] += detail ? dense : sparse;
      CHECK(truncate(files[p].c_str(), off_t(own[p])) == 0);
    }
  }
  for (int p = 0; p < n; ++p) {
    CHECK(start_end[p] > 0);
    CHECK(periodic[p]);
    std::remove(files[p].c_str());
  }
  // 25% of the budget, plus what each process wrote between two of its scans (1% and
  // a flush) that the others did not see yet.
  CHECK(at_start_end <= uint64_t(budget * 0.25) + n * (budget / 100 + 2 * dense));
  rmdir(d.c_str());
}

// The start window ends on size only: a sparse run keeps every event however long it
// runs; a dense one stops at 100 MB of a 1 GB budget (not 25% of it).
void test_start_window_is_capped_in_bytes(const std::string& dir) {
  const std::string d = dir + "/rlscope-start-window-test";
  mkdir(d.c_str(), 0755);
  const std::string file = d + "/python.1.rlscope";
  std::ofstream(file, std::ios::trunc).close();
  const int64_t s = 1'000'000'000;
  rlscope::DetailWindows sparse;
  sparse.configure(1'000'000'000, d, s, s);
  uint64_t own = 0;
  for (int64_t now = s; now < 600 * s; now += s / 2) {  // 10 minutes at 2 KB/s
    CHECK(sparse.detail(now, own));
    own += 1000;
  }
  CHECK(sparse.current() == rlscope::DetailWindows::START);
  rlscope::DetailWindows dense;
  dense.configure(1'000'000'000, d, s, s);
  own = 0;
  int64_t now = s;
  while (dense.detail(now, own) && own < 400'000'000) {  // 20 MB a flush
    own += 20'000'000;
    CHECK(truncate(file.c_str(), off_t(own)) == 0);
    now += s / 10;
  }
  CHECK(own >= 100'000'000 && own <= 100'000'000 + 2 * 20'000'000);
  std::remove(file.c_str());
  rmdir(d.c_str());
}

// A flush can end a start or demand window part-way through its events: the cap in
// bytes it reports, cut() at an event's time, and the window's begin moved back to the
// oldest event of the flush that opened it.
void test_windows_cut_inside_a_flush(const std::string& dir) {
  const std::string d = dir + "/rlscope-window-cut-test";
  mkdir(d.c_str(), 0755);
  const int64_t s = 1'000'000'000;
  rlscope::DetailWindows w;
  w.configure(1'000'000, d, s, s);  // a 1 MB budget: start window 250 kB
  CHECK(w.current() == rlscope::DetailWindows::START);
  CHECK(w.byte_cap() == 250'000);
  CHECK(w.detail(s + s / 2, 0) && w.last_estimate() == 0);
  w.began_by(s / 2);  // its first flush held events older than the recording: kept
  w.cut(s + s / 4);
  CHECK(w.current() == rlscope::DetailWindows::NONE);
  CHECK(w.byte_cap() == UINT64_MAX);
  int64_t b = 0, e = 0;
  CHECK(w.ended(&b, &e) == rlscope::DetailWindows::START);
  CHECK(b == s / 2 && e == s + s / 4);
  w.cut(2 * s);  // nothing open: nothing to cut
  CHECK(w.ended(&b, &e) == rlscope::DetailWindows::NONE);
  rmdir(d.c_str());
}

// Ticks -> ns through the writer's anchors, on made-up anchors: exact on each segment's
// line, a segment under 100 us keeps the last rate, a new file keeps a measured rate.
void test_tick_map() {
  rlscope::TickMap m;
  m.begin({1000, 5000, 0}, true, 0.5);
  CHECK(m.to_ns(1000) == 5000 && m.to_ns(3000) == 6000 && m.to_ns(0) == 4500);
  const rlscope::TickAnchor a1{1000 + 1'000'000, 5000 + 250'000, 0};
  m.advance(a1);  // the rate changed: 0.25 ns/tick, the line through both anchors
  CHECK(m.to_ns(1000) == 5000 && m.to_ns(a1.ticks) == a1.ns);
  CHECK(m.to_ns(1000 + 500'000) == 5000 + 125'000);
  m.advance({a1.ticks + 100, a1.ns + 50, 0});  // 50 ns later: too short for a rate
  CHECK(m.to_ns(a1.ticks + 100) == a1.ns + 25);
  const rlscope::TickAnchor a2{a1.ticks + 2'000'000, a1.ns + 1'000'000, 0};
  m.advance(a2);  // measured from a1, not from the short segment's end
  CHECK(m.to_ns(a1.ticks) == a1.ns && m.to_ns(a2.ticks) == a2.ns);
  m.begin({a2.ticks + 10, 0, 0}, true, 9.0);  // a fork child's file: the rate stays 0.5
  CHECK(m.to_ns(a2.ticks + 30) == 10);
  rlscope::TickMap ns;  // ticks that are ns already
  ns.begin({7, 7, 0}, false, 1.0);
  ns.advance({9'000'000, 1, 0});
  CHECK(ns.to_ns(123) == 123);
}

void test_not_active() {
  rlscope::ThreadState* me = rlscope::current_thread();
  CHECK(!rlscope::is_active());
  CHECK(rlscope::push(me, rlscope::OPERATION_BEGIN, 1) == rlscope::NOT_ACTIVE);
  CHECK(rlscope_ctypes_record(1, 1) == rlscope::NOT_ACTIVE);
  CHECK(rlscope::open_scopes(me).empty());
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "/tmp";
  pthread_setname_np(pthread_self(), "main");  // before the thread registers
  test_encoder_vectors();
  test_thread_registry();
  test_not_active();
  test_multithreaded_recording(dir);
  test_chunk_split(dir);
  test_detail_windows_share_the_budget(dir);
  test_start_window_is_capped_in_bytes(dir);
  test_windows_cut_inside_a_flush(dir);
  test_tick_map();
  test_not_active();
  if (g_failures) {
    std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("all native tests passed\n");
  return 0;
}
