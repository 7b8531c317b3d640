// The host label a trace records (Header.host) and, for runs spread over several hosts,
// the per-host directory its files go in (docs/multiprocess.md#several-hosts).
// Mirrors rlscope/trace/format.py host_name() / host_directory().
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace rlscope {

// RLSCOPE_HOST when set (several Ray nodes on one machine share a hostname), else the
// hostname; characters other than [A-Za-z0-9._-] become '_' so the label is a file name.
inline std::string host_label() {
  std::string s;
  const char* v = std::getenv("RLSCOPE_HOST");
  if (v && *v) {
    s = v;
  } else {
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) == 0) s = buf;
  }
  for (char& c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "host";
  return s;
}

// RLSCOPE_OUTPUT_DIR/<host> with RLSCOPE_HOST_DIRS=1, else the directory unchanged.
inline std::string host_directory(const std::string& out) {
  const char* v = std::getenv("RLSCOPE_HOST_DIRS");
  if (!v || std::strcmp(v, "1") != 0 || out.empty()) return out;
  return out + "/" + host_label();
}

}  // namespace rlscope
