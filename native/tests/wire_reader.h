// A minimal protobuf wire-format reader for the tests: an encoder checked
// only against itself would prove nothing, so field numbers here are the
// literal ones of trace.proto, not trace_fields.h's.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"

struct Field {
  uint32_t number;
  uint32_t wire;
  uint64_t value;     // varint / fixed
  std::string bytes;  // length-delimited
};

inline bool get_varint(const std::string& d, size_t& pos, uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (pos >= d.size()) return false;
    uint8_t b = uint8_t(d[pos++]);
    r |= uint64_t(b & 0x7f) << shift;
    if (b < 0x80) {
      *v = r;
      return true;
    }
  }
  return false;
}

// The fields of one message, in order.
inline std::vector<Field> parse(const std::string& d) {
  std::vector<Field> out;
  size_t pos = 0;
  while (pos < d.size()) {
    uint64_t key;
    REQUIRE(get_varint(d, pos, &key));
    Field f{uint32_t(key >> 3), uint32_t(key & 7), 0, {}};
    if (f.wire == 0) {
      REQUIRE(get_varint(d, pos, &f.value));
    } else if (f.wire == 2) {
      uint64_t n;
      REQUIRE(get_varint(d, pos, &n));
      REQUIRE(pos + n <= d.size());
      f.bytes = d.substr(pos, n);
      pos += n;
    } else {
      REQUIRE(false && "unexpected wire type");
    }
    out.push_back(std::move(f));
  }
  return out;
}

// A packed repeated varint field.
inline std::vector<uint64_t> unpack(const std::string& d) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos < d.size()) {
    uint64_t v;
    REQUIRE(get_varint(d, pos, &v));
    out.push_back(v);
  }
  return out;
}

inline int64_t unzigzag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Splits a trace file (magic, then varint-length-prefixed Records) into its
// records, each parsed to its single oneof field.
inline std::vector<Field> read_records(const std::string& d) {
  REQUIRE(d.size() >= 8 && d.compare(0, 8, "RLSCOPE\n") == 0);
  std::vector<Field> out;
  size_t pos = 8;
  while (pos < d.size()) {
    uint64_t n;
    REQUIRE(get_varint(d, pos, &n));
    REQUIRE(pos + n <= d.size());
    std::vector<Field> rec = parse(d.substr(pos, n));
    pos += n;
    REQUIRE(rec.size() == 1);
    out.push_back(std::move(rec[0]));
  }
  return out;
}
