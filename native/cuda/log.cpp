#include "log.h"

#include <unistd.h>

#include <cstdio>

#include "config.h"
#include "cupti_loader.h"

namespace rlscope::cuda {

namespace {

void vlog(const char* fmt, va_list ap) {
  char buf[1024];
  int n = std::snprintf(buf, sizeof buf, "rlscope: ");
  int m = std::vsnprintf(buf + n, sizeof buf - size_t(n) - 1, fmt, ap);
  size_t len = size_t(n) + (m < 0 ? 0 : std::min(size_t(m), sizeof buf - size_t(n) - 2));
  buf[len++] = '\n';
  ssize_t w = ::write(STDERR_FILENO, buf, len);
  (void)w;
}

}  // namespace

void log_line(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void log_debug(const char* fmt, ...) {
  if (!config().verbose) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

const char* cupti_error_name(CUptiResult r) {
  const char* s = nullptr;
  const Cupti& c = cupti();
  if (c.GetResultString && c.GetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  static thread_local char num[32];
  std::snprintf(num, sizeof num, "CUPTI error %d", int(r));
  return num;
}

bool cupti_check(CUptiResult r, const char* call, const char* file, int line) {
  if (r == CUPTI_SUCCESS) return true;
  log_debug("%s failed: %s (%s:%d)", call, cupti_error_name(r), file, line);
  return false;
}

}  // namespace rlscope::cuda
