#include "trace_writer.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "pb_encode.h"
#include "trace_fields.h"

namespace rlscope {

namespace H = fields::header;
namespace C = fields::chunk;

void frame_record(std::string& out, uint32_t field, std::string_view body) {
  size_t rec_len = pb::varint_size((uint64_t(field) << 3) | pb::kLen) +
                   pb::varint_size(body.size()) + body.size();
  pb::put_varint(out, rec_len);
  pb::put_bytes(out, field, body);
}

void put_string_def(std::string& out, uint32_t field, uint32_t id, std::string_view value) {
  std::string m;
  pb::put_uint(m, fields::string_def::kId, id);
  pb::put_string(m, fields::string_def::kValue, value);
  pb::put_bytes(out, field, m);
}

void put_thread_def(std::string& out, uint32_t field, uint32_t index, int64_t tid,
                    std::string_view name) {
  std::string m;
  pb::put_uint(m, fields::thread_def::kIndex, index);
  pb::put_int(m, fields::thread_def::kTid, tid);
  pb::put_string(m, fields::thread_def::kName, name);
  pb::put_bytes(out, field, m);
}

std::string encode_file_start(const HeaderInfo& h) {
  std::string clock;
  pb::put_int(clock, fields::clock_pair::kMonotonicNs, h.clock.monotonic_ns);
  pb::put_int(clock, fields::clock_pair::kRealtimeNs, h.clock.realtime_ns);
  pb::put_int(clock, fields::clock_pair::kUncertaintyNs, h.clock.uncertainty_ns);

  std::string hdr;
  pb::put_uint(hdr, H::kFormatVersion, kFormatVersion);
  pb::put_string(hdr, H::kSource, h.source);
  pb::put_int(hdr, H::kPid, h.pid);
  pb::put_int(hdr, H::kPpid, h.ppid);
  pb::put_string(hdr, H::kHost, h.host);
  pb::put_string(hdr, H::kProcessName, h.process_name);
  for (const auto& a : h.argv) pb::put_bytes(hdr, H::kArgv, a);  // keep empty args
  pb::put_bytes(hdr, H::kClock, clock);
  pb::put_string(hdr, H::kRecorder, h.recorder);
  pb::put_string(hdr, H::kRlscopeVersion, h.rlscope_version);
  hdr += h.extra_fields;

  std::string out(kMagic, kMagicSize);
  frame_record(out, fields::record::kHeader, hdr);
  return out;
}

void ChunkEncoder::reset() {
  n_ = 0;
  base_ = prev_ = 0;
  dropped_ = 0;
  deltas_.clear();
  threads_.clear();
  kinds_.clear();
  names_.clear();
  args_.clear();
  defs_.clear();
  meta_.clear();
  raw_.clear();
}

void ChunkEncoder::add_event(int64_t ts, uint32_t thread, uint32_t kind, uint32_t name) {
  if (n_ == 0) base_ = prev_ = ts;
  pb::put_varint(deltas_, pb::zigzag(ts - prev_));
  prev_ = ts;
  pb::put_varint(threads_, thread);
  pb::put_varint(kinds_, kind);
  pb::put_varint(names_, name);
  ++n_;
}

void ChunkEncoder::add_arg(int64_t value) { pb::put_varint(args_, pb::zigzag(value)); }

void ChunkEncoder::add_string(uint32_t id, std::string_view value) {
  put_string_def(defs_, C::kStrings, id, value);
}

void ChunkEncoder::add_thread(uint32_t index, int64_t tid, std::string_view name) {
  put_thread_def(defs_, C::kThreads, index, tid, name);
}

void ChunkEncoder::add_metadata(std::string_view key, std::string_view json_value,
                                int64_t time_ns) {
  std::string m;
  pb::put_string(m, fields::metadata::kKey, key);
  pb::put_string(m, fields::metadata::kJsonValue, json_value);
  pb::put_int(m, fields::metadata::kTimeNs, time_ns);
  pb::put_bytes(meta_, C::kMetadata, m);
}

const std::string& ChunkEncoder::finish(uint64_t sequence) {
  body_.clear();
  pb::put_uint(body_, C::kSequence, sequence);
  body_ += defs_;  // strings (2) and threads (3)
  pb::put_int(body_, C::kBaseTimeNs, base_);
  pb::put_packed(body_, C::kTimeDeltaNs, deltas_);
  pb::put_packed(body_, C::kThread, threads_);
  pb::put_packed(body_, C::kKind, kinds_);
  pb::put_packed(body_, C::kName, names_);
  pb::put_packed(body_, C::kArgs, args_);
  pb::put_uint(body_, C::kDroppedEvents, dropped_);
  body_ += meta_;
  body_ += raw_;
  out_.clear();
  frame_record(out_, fields::record::kChunk, body_);
  return out_;
}

int TraceFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  fd_ = fd;
  path_ = path;
  bytes_ = 0;
  error_ = 0;
  return 0;
}

int TraceFile::write_all(std::string_view data) {
  if (fd_ < 0) return EBADF;
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (!error_) error_ = errno;
      return errno;
    }
    p += n;
    left -= size_t(n);
    bytes_ += uint64_t(n);
  }
  return 0;
}

void TraceFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TraceFile::abandon() { close(); }

}  // namespace rlscope
