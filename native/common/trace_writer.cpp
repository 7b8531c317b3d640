#include "trace_writer.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "pb_encode.h"

namespace rlscope {

namespace {

// Field numbers from proto/rlscope/trace.proto.
namespace f {
constexpr uint32_t kRecordHeader = 1, kRecordChunk = 2;
constexpr uint32_t kClockMono = 1, kClockReal = 2, kClockUnc = 3;
constexpr uint32_t kHdrVersion = 1, kHdrSource = 2, kHdrPid = 3, kHdrPpid = 4, kHdrHost = 5,
                   kHdrProcName = 6, kHdrArgv = 7, kHdrClock = 8, kHdrRecorder = 9,
                   kHdrRlsVersion = 10;
constexpr uint32_t kStrId = 1, kStrValue = 2;
constexpr uint32_t kThrIndex = 1, kThrTid = 2, kThrName = 3;
constexpr uint32_t kMetaKey = 1, kMetaJson = 2, kMetaTime = 3;
constexpr uint32_t kChSeq = 1, kChStrings = 2, kChThreads = 3, kChBase = 4, kChDelta = 5,
                   kChThread = 6, kChKind = 7, kChName = 8, kChArgs = 9, kChDropped = 10,
                   kChMeta = 11;
}  // namespace f

// Record{field = body} prefixed by its varint length.
void frame_record(std::string& out, uint32_t field, const std::string& body) {
  size_t rec_len = pb::varint_size((uint64_t(field) << 3) | pb::kLen) +
                   pb::varint_size(body.size()) + body.size();
  pb::put_varint(out, rec_len);
  pb::put_bytes(out, field, body);
}

}  // namespace

std::string encode_file_start(const HeaderInfo& h) {
  std::string clock;
  pb::put_int(clock, f::kClockMono, h.clock.monotonic_ns);
  pb::put_int(clock, f::kClockReal, h.clock.realtime_ns);
  pb::put_int(clock, f::kClockUnc, h.clock.uncertainty_ns);

  std::string hdr;
  pb::put_uint(hdr, f::kHdrVersion, kFormatVersion);
  pb::put_string(hdr, f::kHdrSource, h.source);
  pb::put_int(hdr, f::kHdrPid, h.pid);
  pb::put_int(hdr, f::kHdrPpid, h.ppid);
  pb::put_string(hdr, f::kHdrHost, h.host);
  pb::put_string(hdr, f::kHdrProcName, h.process_name);
  for (const auto& a : h.argv) pb::put_bytes(hdr, f::kHdrArgv, a);  // keep empty args
  pb::put_bytes(hdr, f::kHdrClock, clock);
  pb::put_string(hdr, f::kHdrRecorder, h.recorder);
  pb::put_string(hdr, f::kHdrRlsVersion, h.rlscope_version);
  hdr += h.extra_fields;

  std::string out(kMagic, kMagicSize);
  frame_record(out, f::kRecordHeader, hdr);
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
  std::string m;
  pb::put_uint(m, f::kStrId, id);
  pb::put_string(m, f::kStrValue, value);
  pb::put_bytes(defs_, f::kChStrings, m);
}

void ChunkEncoder::add_thread(uint32_t index, int64_t tid, std::string_view name) {
  std::string m;
  pb::put_uint(m, f::kThrIndex, index);
  pb::put_int(m, f::kThrTid, tid);
  pb::put_string(m, f::kThrName, name);
  pb::put_bytes(defs_, f::kChThreads, m);
}

void ChunkEncoder::add_metadata(std::string_view key, std::string_view json_value,
                                int64_t time_ns) {
  std::string m;
  pb::put_string(m, f::kMetaKey, key);
  pb::put_string(m, f::kMetaJson, json_value);
  pb::put_int(m, f::kMetaTime, time_ns);
  pb::put_bytes(meta_, f::kChMeta, m);
}

const std::string& ChunkEncoder::finish(uint64_t sequence) {
  body_.clear();
  pb::put_uint(body_, f::kChSeq, sequence);
  body_ += defs_;  // strings (2) and threads (3)
  pb::put_int(body_, f::kChBase, base_);
  pb::put_packed(body_, f::kChDelta, deltas_);
  pb::put_packed(body_, f::kChThread, threads_);
  pb::put_packed(body_, f::kChKind, kinds_);
  pb::put_packed(body_, f::kChName, names_);
  pb::put_packed(body_, f::kChArgs, args_);
  pb::put_uint(body_, f::kChDropped, dropped_);
  body_ += meta_;
  out_.clear();
  frame_record(out_, f::kRecordChunk, body_);
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
