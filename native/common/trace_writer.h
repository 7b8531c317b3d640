// Trace file encoding and I/O: the header record, chunk records (columnar
// events + definitions) and an append-only file. No threads or locks here;
// the recorder decides when to call it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "clock.h"

namespace rlscope {

constexpr uint32_t kFormatVersion = 1;
constexpr char kMagic[] = "RLSCOPE\n";  // 8 bytes, no terminator written
constexpr size_t kMagicSize = 8;
constexpr uint32_t kMaxEventsPerChunk = 65536;

struct HeaderInfo {
  std::string source = "python";
  int64_t pid = 0;
  int64_t ppid = 0;
  std::string host;
  std::string process_name;
  std::vector<std::string> argv;
  ClockPairReading clock{};
  std::string recorder = "native";
  std::string rlscope_version;
  // Pre-encoded Header fields appended verbatim (fields >= 11, e.g. the CUDA
  // collector's CUPTI clock offset), so other sources need no encoder change.
  std::string extra_fields;
};

// Record{field = body} prefixed by its varint length (one trace-file record).
void frame_record(std::string& out, uint32_t field, std::string_view body);
// A StringDef / ThreadDef message as field `field` of the enclosing message
// (Chunk and CudaChunk share both).
void put_string_def(std::string& out, uint32_t field, uint32_t id, std::string_view value);
void put_thread_def(std::string& out, uint32_t field, uint32_t index, int64_t tid,
                    std::string_view name);

// Magic bytes followed by the length-prefixed Record{header}.
std::string encode_file_start(const HeaderInfo& h);

// Builds one Chunk. Usage: reset(), add_event()/add_arg() in file order
// (grouped by thread, time-ordered within a thread), definitions, then
// finish() which returns the length-prefixed Record{chunk} bytes.
class ChunkEncoder {
 public:
  void reset();
  void add_event(int64_t ts, uint32_t thread, uint32_t kind, uint32_t name);
  void add_arg(int64_t value);
  void add_string(uint32_t id, std::string_view value);
  void add_thread(uint32_t index, int64_t tid, std::string_view name);
  void add_metadata(std::string_view key, std::string_view json_value, int64_t time_ns);
  void set_dropped(uint64_t n) { dropped_ = n; }
  // Pre-encoded Chunk fields appended verbatim (the aggregator's rows).
  void add_raw(std::string_view fields) { raw_ += fields; }
  uint32_t events() const { return n_; }
  // The encoded size of the events and args so far (what finish() adds is small).
  size_t event_bytes() const {
    return deltas_.size() + threads_.size() + kinds_.size() + names_.size() + args_.size();
  }
  bool empty() const {
    return n_ == 0 && args_.empty() && defs_.empty() && meta_.empty() && raw_.empty() &&
           dropped_ == 0;
  }
  const std::string& finish(uint64_t sequence);

 private:
  uint32_t n_ = 0;
  int64_t base_ = 0;
  int64_t prev_ = 0;
  uint64_t dropped_ = 0;
  std::string deltas_, threads_, kinds_, names_, args_;
  std::string defs_;  // encoded StringDef (2) and ThreadDef (3) fields
  std::string meta_;  // encoded Metadata (11) fields
  std::string raw_;   // add_raw
  std::string body_, out_;
};

// Append-only trace file.
class TraceFile {
 public:
  // O_WRONLY|O_CREAT|O_EXCL|O_APPEND|O_CLOEXEC, 0644. Returns 0 or errno.
  int open(const std::string& path);
  // One write() per call (looping on partial writes and EINTR). Returns 0 or
  // errno; the first error is remembered in error().
  int write_all(std::string_view data);
  void close();
  // Forget the descriptor in a forked child: close it without writing.
  void abandon();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return bytes_; }
  int error() const { return error_; }

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t bytes_ = 0;
  int error_ = 0;
};

}  // namespace rlscope
