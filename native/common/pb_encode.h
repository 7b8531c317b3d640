// Hand-written protobuf wire-format encoder (we do not link libprotobuf).
// Just what trace.proto needs: varints, zigzag, tags, length-delimited fields
// (strings, nested messages, packed repeated scalars). Output goes into a
// std::string used as a byte buffer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rlscope::pb {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

inline uint64_t zigzag(int64_t v) {
  return (uint64_t(v) << 1) ^ uint64_t(v >> 63);
}

inline size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Byte by byte with push_back (inlined: a capacity check and a store), not append():
// the writer encodes every event's four columns this way, and most varints are 1-3 bytes.
inline void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(uint8_t(v)));
}

inline void put_tag(std::string& out, uint32_t field, WireType wt) {
  put_varint(out, (uint64_t(field) << 3) | wt);
}

// Scalar fields. proto3 omits default (zero/empty) values, and so do we.
inline void put_uint(std::string& out, uint32_t field, uint64_t v) {
  if (v == 0) return;
  put_tag(out, field, kVarint);
  put_varint(out, v);
}

inline void put_int(std::string& out, uint32_t field, int64_t v) {
  // int32/int64: negative values are 10-byte varints of the two's complement.
  if (v == 0) return;
  put_tag(out, field, kVarint);
  put_varint(out, uint64_t(v));
}

inline void put_sint(std::string& out, uint32_t field, int64_t v) {
  if (v == 0) return;
  put_tag(out, field, kVarint);
  put_varint(out, zigzag(v));
}

// Length-delimited: strings, bytes, nested messages, packed arrays. Written
// even when empty (callers skip empty optional strings themselves).
inline void put_bytes(std::string& out, uint32_t field, std::string_view data) {
  put_tag(out, field, kLen);
  put_varint(out, data.size());
  out.append(data.data(), data.size());
}

inline void put_string(std::string& out, uint32_t field, std::string_view s) {
  if (s.empty()) return;
  put_bytes(out, field, s);
}

// A packed repeated field whose payload (concatenated varints) was built
// separately; omitted when empty.
inline void put_packed(std::string& out, uint32_t field, std::string_view payload) {
  if (payload.empty()) return;
  put_bytes(out, field, payload);
}

}  // namespace rlscope::pb
