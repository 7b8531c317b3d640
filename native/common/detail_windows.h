// When a process's events are written in full (detail windows) and when only as
// aggregates, under a size budget for the run directory (docs/trace-format.md,
// "Bounded traces"). Writer thread only; no locks.
#pragma once

#include <cstdint>
#include <string>

namespace rlscope {

class DetailWindows {
 public:
  enum Reason { NONE = 0, START = 1, PERIODIC = 2, DEMAND = 3 };

  // budget_bytes 0: no budget, every flush is detail. `dir`: the directory whose
  // files count against the budget (and where the on-demand file is looked for).
  // `run_start_ns`: the run's start (CLOCK_MONOTONIC; 0: unknown, this process's).
  void configure(uint64_t budget_bytes, const std::string& dir, int64_t now_ns,
                 int64_t run_start_ns);
  bool bounded() const { return budget_ > 0; }
  // Whether the events of the flush made at `now_ns` are detail. `own_bytes`: bytes
  // this process wrote to its file so far (adds to the last directory scan).
  bool detail(int64_t now_ns, uint64_t own_bytes);
  // The window that just ended (reason NONE when none did), for its metadata.
  Reason ended(int64_t* begin_ns, int64_t* end_ns);
  Reason current() const { return reason_; }
  // Whether an event at `ts` falls in the current (or just closed) periodic window:
  // those are detail to the record, at the same times in every process of the run.
  bool in_range(int64_t ts) const { return ts >= range_begin_ && ts < range_end_; }
  int64_t window_begin() const { return begin_ns_; }
  // The run directory's bytes at which the open window must end (a start or demand
  // window: its share of the budget; a periodic one ends on time), and the estimate
  // the last detail() call made: a flush can end a window part-way through its events.
  uint64_t byte_cap() const;
  uint64_t last_estimate() const { return last_estimate_; }
  // Ends the open start or demand window at `ts` (its bytes reached byte_cap() inside a
  // flush: a starved writer can find seconds of a dense loop's events pending).
  void cut(int64_t ts);
  // A start or demand window covers the events of the flush it opened at, the oldest of
  // them older than the flush: its begin moves back to the first one (`ts`).
  void began_by(int64_t ts);

  // Tunables (tests may shorten them through the environment: recorder.cpp).
  int64_t window_ns = 2'000'000'000;
  // The start window's largest, in bytes of the run directory: its events are what a
  // report reads most of (a day-long run's report stays within a minute and 2 GB). A
  // cap in bytes, not time: a sparse run keeps every event however long it runs.
  uint64_t start_max_bytes = 100'000'000;
  // Its longest (0: no limit; tests shorten it).
  int64_t start_window_ns = 0;
  int64_t first_period_ns = 30'000'000'000;
  int64_t scan_interval_ns = 1'000'000'000;

 private:
  bool scan_due(int64_t now_ns, uint64_t own_bytes) const;
  uint64_t estimate(int64_t now_ns, uint64_t own_bytes);
  bool demanded();
  void open(Reason why, int64_t now_ns, uint64_t bytes);
  void close(int64_t now_ns);
  void skip_past(int64_t now_ns);  // the first periodic window time after now

  uint64_t budget_ = 0;
  std::string dir_, demand_path_;
  Reason reason_ = NONE;
  int64_t begin_ns_ = 0, end_ns_ = 0;  // the open window's start and planned end
  int64_t range_begin_ = 0, range_end_ = 0;  // the last periodic window's [begin, end)
  uint64_t begin_bytes_ = 0;
  int64_t next_periodic_ns_ = 0, period_ns_ = 0;
  int64_t last_scan_ns_ = -1;
  uint64_t scanned_bytes_ = 0, own_at_scan_ = 0;
  uint64_t last_estimate_ = 0;
  int64_t demand_mtime_ns_ = 0;
  Reason ended_ = NONE;
  int64_t ended_begin_ = 0, ended_end_ = 0;
};

}  // namespace rlscope
