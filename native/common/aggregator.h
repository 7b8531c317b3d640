// Aggregates of the events outside detail windows (docs/trace-format.md, "Bounded
// traces"). Runs on the writer thread only (the caller serialises every call): the
// recording threads' hot path does not change.
//
// Per thread it keeps a shadow of the open scopes whatever the mode (so a gap can be
// opened and closed at any flush), and, inside a gap, the time spent in each shadow
// state, the BEGINs that entered it and the event counts per kind.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace rlscope {

class ChunkEncoder;

class Aggregator {
 public:
  // Reset for a new file (state ids and gap numbers start again).
  void reset();
  // A detail event (encoded by the caller): keeps the shadow stack in step.
  void detail(uint32_t thread, int64_t ts, uint32_t kind, uint32_t name);
  // An event inside a gap. Opens the thread's gap first (synthetic ENDs and
  // AGGREGATED_BEGIN into `enc`). Returns true when the event is kept as an event
  // (PROGRESS, PROCESS_START/END): the caller then encodes it and its args.
  bool aggregate(ChunkEncoder& enc, uint32_t thread, int64_t ts, uint32_t kind,
                 uint32_t name);
  // Closes every open gap: AGGREGATED_END and the re-opening BEGINs into `enc`.
  void close_gaps(ChunkEncoder& enc);
  // Closes the thread's gap, if open (before its first detail event after the gap).
  void close_gap(ChunkEncoder& enc, uint32_t thread);
  bool any_gap() const { return open_gaps_ > 0; }
  // Encodes the state definitions not yet written and the accumulated rows into
  // `enc` (Chunk fields 12-22), then forgets the rows.
  void emit(ChunkEncoder& enc);
  bool has_rows() const;

 private:
  struct Entry {
    uint32_t kind, name;
  };
  struct Row {
    int64_t ns = 0, calls = 0;
    uint64_t events = 0;
  };
  struct ThreadAgg {
    std::vector<Entry> stack;
    std::vector<uint32_t> prefix;  // state id of stack[0..i] for each depth i+1
    uint32_t state = 0;            // 0: empty stack
    bool in_gap = false;
    uint32_t gap = 0;              // number of the open gap (or of the next one)
    int64_t last_ts = 0;
    std::unordered_map<uint32_t, Row> rows;  // state -> row (current gap)
    int64_t counts[32] = {};                 // kind -> events in the current gap
    bool has_progress = false;
    int64_t last_progress_ts = 0;            // the last PROGRESS kept in a gap
    bool dirty = false;
  };

  void apply(ThreadAgg& t, uint32_t kind, uint32_t name);
  uint32_t push_state(uint32_t parent, uint32_t kind, uint32_t name);
  void flush_rows(uint32_t index, ThreadAgg& t);
  void close(ChunkEncoder& enc, uint32_t index, ThreadAgg& t);

  std::unordered_map<uint32_t, ThreadAgg> threads_;
  // State interning: (parent state, kind, name) -> state; each state's definition.
  std::unordered_map<uint64_t, uint32_t> children_;
  struct StateDef {
    uint32_t parent, kind, name;
  };
  std::vector<StateDef> states_;  // id - 1 -> definition
  size_t states_emitted_ = 0;
  int open_gaps_ = 0;
  // Encoded rows not yet emitted (columns).
  std::string r_thread_, r_gap_, r_state_, r_ns_, r_calls_, r_events_, r_until_;
  std::string c_thread_, c_gap_, c_kind_, c_n_;
};

}  // namespace rlscope
