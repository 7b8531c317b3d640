#include "detail_windows.h"

#include <algorithm>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

namespace rlscope {

namespace {

// Sum of the sizes of the regular files directly in `dir` (the run's trace files,
// run.json, the samples file; host directories count per host).
uint64_t directory_bytes(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  uint64_t total = 0;
  int fd = dirfd(d);
  while (dirent* e = readdir(d)) {
    struct stat st;
    if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      total += uint64_t(st.st_size);
    }
  }
  closedir(d);
  return total;
}

int64_t mtime_ns(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Shares of the budget: detail stops at 80% of it (the rest is for aggregates and
// the other files), the start window at 25%, a window on demand takes at most 5%, and
// none opens within 5% of the 80%.
constexpr double kDetailShare = 0.80, kStartShare = 0.25, kWindowShare = 0.05;
// A process rescans the directory after writing this share of the budget.
constexpr double kScanShare = 0.01;

}  // namespace

void DetailWindows::configure(uint64_t budget_bytes, const std::string& dir,
                              int64_t now_ns, int64_t run_start_ns) {
  budget_ = budget_bytes;
  dir_ = dir.empty() ? "." : dir;
  demand_path_ = dir_ + "/rlscope.window";
  reason_ = NONE;
  ended_ = NONE;
  last_scan_ns_ = -1;
  scanned_bytes_ = own_at_scan_ = 0;
  // Periodic windows at fixed times of the run (start + P, + 2P more, + 4P more, ...),
  // the same in every process of the run: their windows line up.
  period_ns_ = first_period_ns;
  next_periodic_ns_ = (run_start_ns > 0 && run_start_ns <= now_ns ? run_start_ns : now_ns) +
                      period_ns_;
  skip_past(now_ns);
  demand_mtime_ns_ = budget_ ? mtime_ns(demand_path_) : 0;  // an old request is not new
  if (budget_) open(START, now_ns, 0);
  // or on size, first
  end_ns_ = start_window_ns > 0 ? now_ns + start_window_ns : INT64_MAX;
}

bool DetailWindows::scan_due(int64_t now_ns, uint64_t own_bytes) const {
  // Every second, and whenever this process wrote another 1% of the budget: a dense
  // writer fills 5 MB/s, and the other processes of the run only see it at a scan (three
  // of them each wrote a whole start window past the run's 25% in one second).
  return last_scan_ns_ < 0 || now_ns - last_scan_ns_ >= scan_interval_ns ||
         own_bytes - std::min(own_bytes, own_at_scan_) >= uint64_t(double(budget_) * kScanShare);
}

uint64_t DetailWindows::estimate(int64_t now_ns, uint64_t own_bytes) {
  if (scan_due(now_ns, own_bytes)) {
    scanned_bytes_ = directory_bytes(dir_);
    own_at_scan_ = own_bytes;
    last_scan_ns_ = now_ns;
  }
  return scanned_bytes_ + (own_bytes > own_at_scan_ ? own_bytes - own_at_scan_ : 0);
}

bool DetailWindows::demanded() {
  int64_t m = mtime_ns(demand_path_);
  if (m == 0 || m == demand_mtime_ns_) return false;
  demand_mtime_ns_ = m;
  return true;
}

void DetailWindows::open(Reason why, int64_t now_ns, uint64_t bytes) {
  reason_ = why;
  begin_ns_ = now_ns;
  end_ns_ = now_ns + window_ns;
  begin_bytes_ = bytes;
}

void DetailWindows::close(int64_t now_ns) {
  ended_ = reason_;
  ended_begin_ = begin_ns_;
  ended_end_ = now_ns;
  reason_ = NONE;
}

uint64_t DetailWindows::byte_cap() const {
  auto share = [&](double s) { return uint64_t(double(budget_) * s); };
  switch (reason_) {
    case START: return std::min(share(kDetailShare),
                                std::min(share(kStartShare), start_max_bytes));
    case DEMAND: return std::min(share(kDetailShare), begin_bytes_ + share(kWindowShare));
    default: return UINT64_MAX;
  }
}

void DetailWindows::cut(int64_t ts) {
  if (reason_ == START || reason_ == DEMAND) close(ts);
}

void DetailWindows::began_by(int64_t ts) {
  if (reason_ == START || reason_ == DEMAND) {
    begin_ns_ = std::min(begin_ns_, ts);
  } else if (ended_ == START || ended_ == DEMAND) {
    ended_begin_ = std::min(ended_begin_, ts);
  }
}

bool DetailWindows::detail(int64_t now_ns, uint64_t own_bytes) {
  if (!budget_) return true;
  bool scan_due = this->scan_due(now_ns, own_bytes);
  uint64_t bytes = estimate(now_ns, own_bytes);
  last_estimate_ = bytes;
  auto share = [&](double s) { return uint64_t(double(budget_) * s); };
  if (reason_ != NONE) {
    // A periodic window ends on time only (at the same time in every process, for the
    // lock-step tables), the others on their share of the budget too.
    bool over = bytes >= share(kDetailShare) || now_ns >= end_ns_ ||
                (reason_ == START && bytes >= std::min(share(kStartShare), start_max_bytes)) ||
                (reason_ == DEMAND && bytes - begin_bytes_ >= share(kWindowShare));
    if (!over) return reason_ != PERIODIC;
    if (reason_ == PERIODIC) range_end_ = std::min(range_end_, now_ns);
    close(reason_ == PERIODIC ? range_end_ : now_ns);
    skip_past(now_ns);  // a periodic window due while another one was open: the next
    return false;
  }
  if (bytes >= share(kDetailShare) - share(kWindowShare)) return false;
  if (scan_due && demanded()) {
    open(DEMAND, now_ns, bytes);
    return true;
  }
  if (now_ns >= next_periodic_ns_) {
    // At its scheduled time, to the record, in every process alike: the flush's records
    // from then on are detail (in_range), those before it aggregates.
    int64_t at = next_periodic_ns_;
    skip_past(now_ns);
    open(PERIODIC, at, bytes);
    range_begin_ = at;
    range_end_ = at + window_ns;
    if (now_ns >= range_end_) close(range_end_);  // a flush later than the whole window
  }
  return false;
}

void DetailWindows::skip_past(int64_t now_ns) {
  while (next_periodic_ns_ <= now_ns) {
    period_ns_ *= 2;
    next_periodic_ns_ += period_ns_;
  }
}

DetailWindows::Reason DetailWindows::ended(int64_t* begin_ns, int64_t* end_ns) {
  Reason r = ended_;
  *begin_ns = ended_begin_;
  *end_ns = ended_end_;
  ended_ = NONE;
  return r;
}

}  // namespace rlscope
